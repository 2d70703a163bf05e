/* build.h - `shardc build`: list inputs, decode/resize them in worker threads, write shards in
 * input order, then rejects.tsv and (last) manifest.json.
 *
 * Output bytes depend only on the inputs and the options, never on the thread count or timing:
 * workers finish out of order, the writer consumes results strictly by input position.
 */
#ifndef SHC_BUILD_H
#define SHC_BUILD_H

#include <stdatomic.h>
#include <stdint.h>

#include "backend.h"
#include "compress.h"
#include "inputs.h"
#include "part.h"
#include "render.h"

/* Exit codes of the CLI contract. */
enum { SHC_EXIT_OK = 0, SHC_EXIT_REJECTS = 1, SHC_EXIT_USAGE = 2, SHC_EXIT_IO = 3 };

/* For a program that runs builds itself (shardc-mpi): it may stop a build from another thread
 * (the build ends at the next input with SHC_EXIT_IO and no manifest) and watch its progress. */
typedef struct {
    atomic_int stop;            /* set non-zero to stop the build */
    atomic_uint_fast64_t done;  /* inputs of this build (or part) handled so far */
    atomic_uint_fast64_t total; /* inputs of this build (or part), once known */
    int quiet;                  /* no summary line (messages about inputs and errors remain) */
} shc_build_ctl;

typedef struct {
    char *const *srcs;
    size_t nsrc;
    const char *list;           /* list file, or NULL for class folders */
    const char *out;
    const fmt_backend *backend; /* storage format */
    int quality;                /* --format jpeg: 1..100 */
    shc_render_opts r;          /* geometry, channels, limits, augmentation */
    unsigned threads;           /* worker threads (>= 1) */
    uint64_t shard_bytes;       /* bound on a shard's file size (a single larger sample still fits) */
    uint64_t shard_samples;     /* 0 = no bound */
    uint32_t align;
    fmt_codec_spec compress;    /* --compress (raw): per-sample payload compression */
    int strict, resume, force, dry_run;
    int progress;               /* print a progress line on stderr */
    int json;                   /* machine-readable summary on stdout */
    shc_part part;              /* build this slice only, into OUT/parts/ (count 0: all of it) */
    shc_build_ctl *ctl;         /* NULL, or a driver's view of the build (shardc-mpi) */
} shc_build_opts;

/* Run a build (with o->part.count, one part of it: part.h). Prints its own messages (one line per reject, errors, summary) on stderr. Returns
 * an exit code: SHC_EXIT_OK, SHC_EXIT_REJECTS (finished with rejects, or --strict stopped it),
 * SHC_EXIT_USAGE (bad inputs found before any work), SHC_EXIT_IO (fatal I/O; no manifest). */
int shc_build(const shc_build_opts *o);

/* The build fingerprint of options o over inputs in (every shard records it; --resume and
 * shardc verify compare it): geometry, channels, limits, shard bounds, augmentation, seed,
 * class names and every input's path and label. */
uint64_t shc_fingerprint(const shc_build_opts *o, const fmt_inputs *in);

#endif
