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

/* Errors of shc_merge besides errno values of I/O (those leave no manifest either): the
 * project's list (fmt.h, SHC_ERRORS) names them, and merge.c checks this enum against it. */
enum {
    SHC_MERGE_ENOPARTS = -30590, /* OUT/parts missing or empty */
    SHC_MERGE_EMISSING,         /* parts missing or unfinished (msg lists them) */
    SHC_MERGE_EMISMATCH,        /* a part disagrees with the others or is damaged (msg names it) */
    SHC_MERGE_EBUSY,            /* another merge or build holds OUT's lock (nothing written) */
    SHC_MERGE_ELAST
};

/* The exit status of the CLI contract (build.h) for a result of shc_merge: a merge refused (the
 * codes above, or an OUT that cannot be written) SHC_EXIT_USAGE, any other failure
 * SHC_EXIT_IO. */
int shc_merge_exit(int rc);

typedef struct {
    uint32_t parts;
    uint64_t samples, inputs, rejects, shards, bytes;
} shc_merge_result;

/* For an s3:// out: the folder the parts' tables are downloaded into (NULL: "upload" under the
 * cache root, cache, NULL for ~/.cache/shardread: publish.h), and the part size of multipart
 * uploads (0: 64 MiB). shardc takes the cache root and the part size from $SHARDREAD_CACHE and
 * $SHARDC_UPLOAD_PART_SIZE; the library reads neither. */
typedef struct {
    const char *staging, *cache;
    uint64_t part_size;
} shc_merge_opts;

/* Merge the parts in out. 0, SHC_MERGE_* or an errno value; msg (fmt.h, may be NULL) says what and
 * names the parts at fault (a list of missing parts too long for it ends in "..."). o and res
 * may be NULL (o: the defaults). */
int shc_merge(const char *out, const shc_merge_opts *o, shc_merge_result *res, fmt_msg *msg);

/* A merge whose shards are elsewhere (the parts of an s3:// OUT: publish.h): out holds the
 * parts' manifests and tables only. Instead of opening each shard, shard(ctx, part, ms, msg)
 * says whether part's shard ms is there as its manifest names it (0, or an error with msg), and
 * the merged manifest is published without the reader's open. */
typedef int (*shc_merge_shard_fn)(void *ctx, const char *part, const fmt_manifest_shard *ms,
                                  fmt_msg *msg);
int shc_merge_with(const char *out, shc_merge_shard_fn shard, void *ctx, shc_merge_result *res,
                   fmt_msg *msg);

#endif
