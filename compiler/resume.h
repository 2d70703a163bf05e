/* resume.h - a build's output directory: the names of the files it writes, what it may remove,
 * and --resume, which keeps the finished shards of an interrupted build. Internal to the build's
 * files. */
#ifndef SHC_RESUME_H
#define SHC_RESUME_H

#include <stdint.h>

#include "backend.h"
#include "build.h"
#include "inputs.h"
#include "manifest.h"

/* Shard k's name without the backend's suffix, and with it (the manifest's file name). Malloc'd;
 * NULL when out of memory. */
char *shc_shard_stem(uint64_t k);
char *shc_shard_name(const fmt_backend *be, uint64_t k);

/* 1 for backends whose shards keep their images in class folders (per-image sets). */
int shc_is_set(const fmt_backend *be);

/* 1 if dir holds anything; 2 if it holds something that is not ours (class folders are ours
 * when the backend writes per-image sets: sets, else NULL). */
int shc_dir_contents(const char *dir, const fmt_inputs *sets);

/* Remove our files: the manifest first, so no manifest ever names a removed shard. With
 * keep_from >= 0, shards numbered below keep_from (and the journal) are kept. Class folders of
 * per-image sets (sets != NULL) go only when everything goes: kept shards' images live there, and
 * a resumed build rewrites the others under the same names. 0 or an errno value. */
int shc_clear_output(const char *dir, long keep_from, const fmt_inputs *sets);

/* The finished shards of a build, as the manifest lists them, with their channel sums. */
typedef struct {
    fmt_manifest_shard *v;
    size_t n, cap;
    uint64_t sum[3], sumsq[3];
    uint64_t pixels;            /* per channel, over all samples of the listed shards */
} shc_shard_list;

/* Add shard `name` with the header h (its sums added up). 0 or ENOMEM. */
int shc_shard_list_add(shc_shard_list *l, const char *name, const fmt_shard_info *h);
void shc_shard_list_free(shc_shard_list *l);

/* --resume: keep finished shards 0, 1, ... of o->out while each opens, carries this build's
 * fingerprint fp, continues where the previous one ended and has every sample hash intact (added
 * to kept); remove the rest (shc_clear_output). Sets *next_input and *next_index to where the
 * build continues (first_input and 0 when nothing is kept). 0 or an errno value. */
int shc_resume_scan(const shc_build_opts *o, const shc_build_cb *cb, const fmt_inputs *in,
                    uint64_t fp, uint64_t first_input, shc_shard_list *kept,
                    uint64_t *next_input, uint64_t *next_index);

#endif
