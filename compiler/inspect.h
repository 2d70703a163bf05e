/* inspect.h - looking into a built dataset: which file a sample came from, the options it was
 * rendered with, and replaying it from its source. */
#ifndef SHC_INSPECT_H
#define SHC_INSPECT_H

#include "dataset.h"
#include "render.h"
#include "build.h"

/* The path of input `source` from dir/inputs.tsv (*path malloc'd). ENOENT if absent. */
int shc_input_path(const char *dir, uint64_t source, char **path);

/* The render options a dataset was built with, from its manifest. */
int shc_render_opts_from_manifest(const fmt_manifest *m, shc_render_opts *o, fmt_msg *msg);

/* Render sample s of dataset d again from its source file (path): an augmented sample by
 * re-applying its recorded parameters to the decoded source, a plain one through the build's own
 * render path. *out is allocated here. On failure msg (may be NULL) says why. */
int shc_replay(const fmt_dataset *d, const fmt_sample *s, const char *path, fmt_image *out,
               fmt_msg *msg);

/* The manifest's fields against each other and against what the build recorded beside the
 * shards, for shardc verify: geometry (mode, size, sample size), channel stats against the
 * shards' sums (sum, sumsq: one per shard, in order), the inputs and rejects counts against
 * inputs.tsv and rejects.tsv, and the build fingerprint recomputed from the manifest's
 * geometry, classes, augmentation, seed and build options and inputs.tsv, against the one the
 * shards carry (shard_fp). Calls report(ctx, line) once per mismatch, naming the field; returns
 * the number of mismatches. */
size_t shc_check_manifest(const char *dir, const fmt_manifest *m, const uint64_t (*sum)[3],
                          const uint64_t (*sumsq)[3], uint64_t pixels, uint64_t shard_fp,
                          void (*report)(void *ctx, const char *line), void *ctx);

#endif
