/* build.h - `shardc build`: list inputs, decode/resize them in worker threads, write shards in
 * input order, then rejects.tsv and (last) manifest.json.
 *
 * Output bytes depend only on the inputs and the options, never on the thread count or timing:
 * workers finish out of order, the writer consumes results strictly by input position.
 */
#ifndef SHC_BUILD_H
#define SHC_BUILD_H

#include <stdint.h>

#include "backend.h"
#include "compress.h"
#include "inputs.h"
#include "render.h"

/* Exit codes of the CLI contract. */
enum { SHC_EXIT_OK = 0, SHC_EXIT_REJECTS = 1, SHC_EXIT_USAGE = 2, SHC_EXIT_IO = 3 };

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
} shc_build_opts;

/* Run a build. Prints its own messages (one line per reject, errors, summary) on stderr. Returns
 * an exit code: SHC_EXIT_OK, SHC_EXIT_REJECTS (finished with rejects, or --strict stopped it),
 * SHC_EXIT_USAGE (bad inputs found before any work), SHC_EXIT_IO (fatal I/O; no manifest). */
int shc_build(const shc_build_opts *o);

/* The build fingerprint of options o over inputs in (every shard records it; --resume and
 * shardc verify compare it): geometry, channels, limits, shard bounds, augmentation, seed,
 * class names and every input's path and label. */
uint64_t shc_fingerprint(const shc_build_opts *o, const fmt_inputs *in);

#endif
