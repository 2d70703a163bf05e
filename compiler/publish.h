/* publish.h - a build or merge whose OUT is an s3:// URL (docs/REMOTE.md, "Writing").
 *
 * shc_build calls shc_build_upload for such an OUT: the build runs as a local one into a staging
 * folder (opts.staging, else ROOT/upload/<XXH3-64 of the URL's base>, ROOT being opts.cache,
 * else ~/.cache/shardread; shardc and the Python writer pass $SHARDREAD_CACHE as opts.cache).
 * Each shard, once finished, is uploaded by one of opts.upload_threads threads, each with its own connection (the reject journal first, as object .rejects.journal,
 * unless a journal at least as new is up already, so that an uploaded shard always has its
 * rejects in the bucket; journal PUTs go one at a time and never replace a newer journal) and
 * deleted from the staging folder; the build waits while upload_threads + 1 finished shards wait
 * for (or are in) their upload, so the folder holds at most upload_threads + 2 shards. When every
 * shard is up,
 * rejects.tsv, warnings.tsv and inputs.tsv follow, then manifest.json, last; the journal object
 * is deleted after it. An interrupted build leaves no manifest: --resume downloads what was
 * uploaded into the staging folder, lets the local --resume keep the shards that check, and
 * uploads the rest. A streamed build (opts.stream) that fails deletes what it uploaded: it cannot
 * be resumed. A part (--part I/N) is staged and uploaded under parts/IIIII-of-NNNNN/.
 *
 * shc_merge calls shc_merge_upload for such an OUT: the parts' manifests and tables are
 * downloaded (no shard), merged as local parts are (merge.h; each shard checked to be in the
 * bucket with the size its part's manifest gives), and the merged tables and manifest uploaded,
 * the manifest last.
 *
 * The objects are byte for byte the files a local build or merge with the same options writes
 * (its hidden lock file aside). http(s):// OUTs are refused: they are read-only.
 */
#ifndef SHC_PUBLISH_H
#define SHC_PUBLISH_H

#include "build.h"
#include "merge.h"

/* As shc_build (build.h), for o->out an s3:// or http(s):// URL. */
int shc_build_upload(const shc_build_opts *o, const shc_build_cb *cb);

/* As shc_merge (merge.h), for out an s3:// or http(s):// URL. */
int shc_merge_upload(const char *out, const shc_merge_opts *o, shc_merge_result *res,
                     fmt_msg *msg);

#endif
