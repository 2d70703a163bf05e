/* merge.h - `shardc merge OUT`: join the parts built with --part I/N (part.h) into one dataset.
 *
 * The merge checks that OUT/parts holds parts 0..N-1 of one N, each complete (its manifest
 * written) and consistent with the others (same input list, same options and format, same shardc,
 * the slice part.h assigns it), and that every shard of every part opens and matches its part's
 * manifest. Then it writes, each atomically, OUT/rejects.tsv, OUT/inputs.tsv and last
 * OUT/manifest.json, which names the parts' shards where they are (parts/IIIII-of-NNNNN/shard-...,
 * relative to OUT) with an offset that turns each part's sample numbers into dataset-wide ones.
 * No pixel is copied. The result is the dataset a one-machine build of the same inputs and
 * options gives: same samples, labels, sources and order, same rejects.tsv, inputs.tsv, counts,
 * fingerprint and exactly the same channel statistics (from exact integer sums); only the shard
 * boundaries differ (each part starts new shards).
 *
 * One writer at a time: the merge holds OUT's lock file (util.h SHC_LOCK_NAME, the one a whole
 * build takes) throughout, and a second merge or build of OUT is refused (SHC_MERGE_EBUSY) before
 * it reads anything. Before returning 0 the merge opens what it wrote the way a reader does
 * (fmt_dataset_probe): a merged dataset that would not open is an error here.
 *
 * Nothing is written when a check fails. Nothing here prints.
 */
#ifndef SHC_MERGE_H
#define SHC_MERGE_H

#include <stddef.h>
#include <stdint.h>

#include "fmt.h"
#include "manifest.h"
#include "shardc.h"

/* The codes (SHC_MERGE_*), shc_merge_exit, shc_merge_opts, shc_merge_result and shc_merge are
 * public: shardc.h. merge.c checks the codes against the project's list (fmt.h). */

/* A merge whose shards are elsewhere (the parts of an s3:// OUT: publish.h): out holds the
 * parts' manifests and tables only. Instead of opening each shard, shard(ctx, part, ms, msg)
 * says whether part's shard ms is there as its manifest names it (0, or an error with msg), and
 * the merged manifest is published without the reader's open. */
typedef int (*shc_merge_shard_fn)(void *ctx, const char *part, const fmt_manifest_shard *ms,
                                  fmt_msg *msg);
int shc_merge_with(const char *out, shc_merge_shard_fn shard, void *ctx, shc_merge_result *res,
                   fmt_msg *msg);

#endif
