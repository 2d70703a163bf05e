/* upload.h - objects written to s3:// (docs/REMOTE.md, "Writing"): the write side of remote/,
 * used by a build or merge whose output is an s3:// URL (compiler/upload.c).
 *
 * Requests are made with libcurl and signed by it (CURLOPT_AWS_SIGV4), with the settings and
 * credentials remote.h's rmt_config_load reads. Every body is sent with its SHA-256 in
 * x-amz-content-sha256, so the signature covers the bytes and the server refuses a body changed
 * on the way. A file larger than the part size is sent as a multipart upload
 * (CreateMultipartUpload, UploadPart, CompleteMultipartUpload), aborted when it fails. Transient
 * failures (connection errors, timeouts, 5xx, 408, 429) are retried as the downloads are
 * (fetch.c): up to 6 attempts, capped exponential backoff with jitter. http(s):// URLs are
 * read-only: rmt_writer_open refuses them.
 *
 * Errors: 0, EACCES (401, 403), ENOENT (404), ECONNREFUSED, ETIMEDOUT, EIO, FMT_EINVAL (a URL
 * that cannot be written), errno values of local files, with msg naming the object's URL, the
 * endpoint, the bucket and the server's status and error code. Secrets never appear in a message.
 * The library never prints. One writer is used by one thread at a time.
 */
#ifndef RMT_UPLOAD_H
#define RMT_UPLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "fmt.h"
#include "remote.h"

#define RMT_PART_SIZE_DEFAULT ((uint64_t)64 << 20)

typedef struct rmt_writer rmt_writer;

/* A writer of objects under the s3:// URL url. part_size: files larger than this are sent in
 * parts of this size (0: RMT_PART_SIZE_DEFAULT). 0, FMT_EINVAL (not an s3://
 * URL, no credentials: msg says which), ENOMEM. */
int rmt_writer_open(rmt_writer **w, const char *url, uint64_t part_size, fmt_msg *msg);
void rmt_writer_close(rmt_writer *w);           /* accepts NULL */

/* Its settings (for rmt_fetch) and URL (without a trailing '/'). */
const rmt_config *rmt_writer_config(const rmt_writer *w);

/* Called as a body's bytes go out: bytes sent by this writer so far (every object, the current
 * attempt's bytes included). */
void rmt_writer_progress(rmt_writer *w, void (*fn)(void *ctx, uint64_t sent), void *ctx);

/* Object NAME (under the URL's prefix) := the file at path, or len bytes at data. */
int rmt_put_file(rmt_writer *w, const char *name, const char *path, fmt_msg *msg);
int rmt_put_data(rmt_writer *w, const char *name, const void *data, size_t len, fmt_msg *msg);

/* Delete object NAME (a missing one is no error). */
int rmt_delete(rmt_writer *w, const char *name, fmt_msg *msg);

typedef struct {
    char *name;         /* under the URL's prefix */
    uint64_t size;
} rmt_object;

/* The objects whose names (under the URL's prefix) start with sub (ListObjectsV2, every page),
 * malloc'd into *v (free with rmt_objects_free). */
int rmt_list(rmt_writer *w, const char *sub, rmt_object **v, size_t *n, fmt_msg *msg);
void rmt_objects_free(rmt_object *v, size_t n);

/* Counters since the writer was opened. */
typedef struct {
    uint64_t objects, parts, bytes, retries;
} rmt_upload_stats;

void rmt_writer_stats(const rmt_writer *w, rmt_upload_stats *st);

/* SHA-256 of len bytes, as 64 lowercase hex digits and a NUL (exposed for the unit test). */
void rmt_sha256_hex(const void *data, size_t len, char hex[65]);

#endif
