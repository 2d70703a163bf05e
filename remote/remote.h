/* remote.h - datasets at URLs: s3://BUCKET/PREFIX (S3 and S3-compatible object storage) and
 * http(s)://BASE (any web server), read through a local cache (docs/REMOTE.md).
 *
 * rmt_resolve turns a URL into a local dataset directory that the existing readers open as any
 * other: the manifest is fetched (every time: it says what the dataset is now), then each shard
 * the cache does not hold, or holds damaged, is downloaded with libcurl (several at once, the
 * multi interface; retried with capped exponential backoff and jitter; a partial body resumed
 * with a Range request) to a temporary name, checked against the manifest (the shard's size,
 * whole-file hash where the manifest pins one, the backend's own header and index checks and
 * every sample's hash) and only then renamed into place; the checks run on a thread of their
 * own while the transfers go on. The manifest is written into the cache
 * last. Processes sharing one cache lock each shard (flock on a lock file next to it): one
 * downloads, the others wait and then use its file.
 *
 * Credentials and endpoint for s3:// are read as the AWS tools read them (rmt_config_load).
 * Secrets never appear in a message.
 *
 * The library never prints. Errors: 0, errno values (EACCES for a refused request, ENOENT for a
 * missing object, ECONNREFUSED, ETIMEDOUT, EIO), FMT_EHASH / FMT_ECORRUPT for an object that fails
 * its check, FMT_EUNSUPPORTED for a backend not yet read over URLs, with the reason in msg naming
 * the object's URL, the endpoint and the server's error code.
 */
#ifndef RMT_REMOTE_H
#define RMT_REMOTE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "dataset.h"
#include "fmt.h"
#include "manifest.h"

/* The variable the programs and the Python package take their default cache root from; the
 * library reads no setting from the environment. */
#define RMT_CACHE_ENV "SHARDREAD_CACHE"

/* The cache root into *root (malloc'd): given, else ~/.cache/shardread (HOME: the user's home,
 * not a setting). 0, FMT_EINVAL without either (no HOME), or ENOMEM; msg says which. */
int rmt_cache_root(const char *given, char **root, fmt_msg *msg);

/* Non-zero when path is a URL this module reads (s3://, http://, https://). */
int rmt_is_url(const char *path);

typedef struct {
    const char *cache;      /* the cache root; NULL or "": $HOME/.cache/shardread
                             * (rmt_cache_root) */
    int anonymous;          /* s3: unsigned requests (public buckets); also AWS_NO_SIGN_REQUEST */
    unsigned parallel;      /* transfers at once (0: 8) */
    unsigned tries;         /* attempts per object before giving up (0: 6) */
    /* rmt_resolve: called while shards download, at most every 0.25 s and once at the end
     * (final 1): bytes of shard data received, of total (the shards not found cached) */
    void (*progress)(void *ctx, uint64_t got, uint64_t total, int final);
    void *progress_ctx;
} rmt_options;

typedef struct {
    uint64_t shards;        /* shards in the manifest */
    uint64_t fetched;       /* shards downloaded by this call */
    uint64_t cached;        /* shards found complete in the cache */
    uint64_t bytes;         /* bytes received (every object, every attempt) */
    uint64_t retries;       /* attempts repeated after a transient failure */
} rmt_stats;

/* The local directory of the dataset at url (malloc'd into *dir), complete and checked, as
 * described above. o and st may be NULL. */
int rmt_resolve(const char *url, const rmt_options *o, char **dir, rmt_stats *st, fmt_msg *msg);

/* ---- a dataset whose shards arrive while it is read (docs/REMOTE.md "Prefetch and the bounded
 * cache"): the manifest is fetched at open; a thread then downloads the shards the readers'
 * plan wants next, in its order, into a cache folder kept within a byte limit, and a second
 * thread checks each download and renames it into place, so that the transfers never wait for
 * a check or an fsync. ---- */

typedef struct rmt_lazy rmt_lazy;

typedef struct {
    /* the distinct shards reader batch b touches, in first-use order, into out (room for the
     * plan_cap given to rmt_lazy_start); 0 only past the end of an ended stream. Pure: called
     * from the download thread at any time. */
    size_t (*plan)(void *ctx, uint64_t b, size_t *out);
    /* the reader stops using shard k (it is about to be evicted): close it */
    void (*unload)(void *ctx, size_t k);
    /* the first batch of the epoch after batch b's (NULL: the plan has no epochs). The window
     * takes the next epoch's shards only once every shard the rest of b's epoch reads has
     * arrived: they would share the link with this epoch's last ones, which the readers wait
     * for first (a one-epoch cold read took 3 shards of the next epoch, 0.77x the link against
     * 0.85x) */
    uint64_t (*epoch_end)(void *ctx, uint64_t b);
    void *ctx;
} rmt_lazy_hooks;

/* Fetch url's manifest into its cache folder (as rmt_resolve does; *dir and *manifest, its
 * bytes (len *mlen), malloc'd), and prepare the session. */
int rmt_lazy_open(rmt_lazy **z, const char *url, const rmt_options *o, char **dir,
                  uint8_t **manifest, size_t *mlen, fmt_msg *msg);
/* Bytes of the `shards` largest shards: the least cache that holds any `shards` of them (as many
 * as there are or more: the dataset's bytes). O(n log n) in the shards. */
uint64_t rmt_lazy_minimum(const rmt_lazy *z, size_t shards);
/* Parts of shard objects, before rmt_lazy_start (what a reader's open needs before the shards
 * arrive: formats/dataset.h fmt_dataset_open_lazy): for each span, the object's bytes [from, to)
 * into buf (to - from bytes, the caller's). From the shard's file in the cache folder when it is
 * there with the manifest's size and the span is not fresh (local then 1: the caller checks the
 * bytes, and asks again with fresh set when they fail), else fetched with Range requests, up to
 * the session's parallel transfers at once. 0, or the first error (msg names the object). */
int rmt_lazy_spans(rmt_lazy *z, fmt_span *sp, size_t n, fmt_msg *msg);
/* The session as fmt_dataset_open_lazy's source of those spans (rmt_lazy_spans, its URL). */
fmt_lazy_source rmt_lazy_source(rmt_lazy *z);
/* Start downloading: limit bytes in the folder at most (0: no limit), ahead distinct shards of
 * the plan at most, looking through scan batches at most for them. */
int rmt_lazy_start(rmt_lazy *z, const rmt_lazy_hooks *h, uint64_t limit, uint32_t ahead,
                   size_t plan_cap, uint64_t scan, fmt_msg *msg);
/* A reader starts (ends) filling batch b: the plan's window starts at the lowest in progress. */
void rmt_lazy_begin(rmt_lazy *z, uint64_t b);
void rmt_lazy_end(rmt_lazy *z, uint64_t b);
/* Wait until shard k is in the folder, checked, then hold it (no eviction until released): 0,
 * or the error that makes it unavailable (msg names the object). RMT_NOWAIT: EAGAIN at once
 * when it is not there now. RMT_WAIT_UNLESS_STARVED, for a caller that holds other shards:
 * EBUSY when no room can be made for it because other processes sharing the folder keep their
 * shards (they may wait for room the caller's shards take: it lets go with rmt_lazy_yield and
 * waits holding nothing). */
enum { RMT_NOWAIT, RMT_WAIT, RMT_WAIT_UNLESS_STARVED };
int rmt_lazy_acquire(rmt_lazy *z, size_t k, int wait, fmt_msg *msg);
void rmt_lazy_release(rmt_lazy *z, size_t k);
/* rmt_lazy_release, and when no reader holds or waits for it, this process lets go of the shard
 * entirely (unloaded, its shared lock dropped), so that another process may evict it */
void rmt_lazy_yield(rmt_lazy *z, size_t k);
/* the downloads so far, the folder's largest size seen, shards evicted */
void rmt_lazy_stats(rmt_lazy *z, rmt_stats *st, uint64_t *peak, uint64_t *evicted);
const fmt_manifest *rmt_lazy_manifest(const rmt_lazy *z);
const char *rmt_lazy_dir(const rmt_lazy *z);       /* the dataset's cache folder */
const char *rmt_lazy_url(const rmt_lazy *z);       /* its URL, without a trailing '/' */
/* Wake every rmt_lazy_acquire waiting now or later with ECANCELED and stop downloading (the
 * transfers under way are abandoned within about 0.1 s; rmt_lazy_close removes their partial
 * files), without freeing: a reader calls it before joining workers that may wait for a shard.
 * Accepts NULL. */
void rmt_lazy_cancel(rmt_lazy *z);
void rmt_lazy_close(rmt_lazy *z);      /* accepts NULL; stops the thread first */

/* ---- internals shared by the module's files (and its unit test) ---- */

/* For tests, before rmt_lazy_start: stage(ctx, k, RMT_STAGE_ARRIVED) on the download thread once
 * shard k's transfer has ended and it is queued for its check (no lock held), and
 * stage(ctx, k, RMT_STAGE_CHECK) on the check thread just before its check. */
enum { RMT_STAGE_ARRIVED, RMT_STAGE_CHECK };
void rmt_lazy_stage_hook(rmt_lazy *z, void (*stage)(void *ctx, size_t k, int stage), void *ctx);

typedef struct {
    int s3;                 /* 1: s3://, 0: http(s):// */
    char *url;              /* as given, without a trailing '/' */
    char *bucket, *prefix;  /* s3: the bucket and the key prefix ("" or without slashes at ends) */
    char *base;             /* where object NAME is: base + "/" + NAME (percent-encoded) */
    char *endpoint;         /* for messages: the endpoint, credentials in it removed */
    char *region;           /* s3 */
    char *key_id, *secret, *token;  /* s3 credentials (NULL: anonymous) */
    char *ca_bundle;        /* AWS_CA_BUNDLE (NULL: the system's) */
    void (*progress)(void *ctx, uint64_t got, uint64_t total, int final);  /* rmt_fetch's */
    void *progress_ctx;
} rmt_config;

/* Parse url and read the environment (and AWS_PROFILE's files) into c. 0, FMT_EINVAL (a bad
 * URL, no credentials: msg says which variables to set), ENOMEM. */
int rmt_config_load(rmt_config *c, const char *url, int anonymous, fmt_msg *msg);
void rmt_config_free(rmt_config *c);

/* At most this many transfers fetch one object at once: an object of known size whose
 * transfer has at least 2 * RMT_STRIPE_MIN bytes left is split in two ranges when a connection
 * would otherwise idle (the last objects of a stream, or fewer objects than connections) */
#define RMT_STRIPES 8
#define RMT_STRIPE_MIN (1u << 20)

struct rmt_job;

/* internal: one transfer of a job, writing the object's bytes [offset, end) into its file (end
 * 0: to the object's end); bytes [begin, offset) are there already */
typedef struct {
    struct rmt_job *job;
    int state, status, tries, started, range_bad;
    char errbuf[256];
    uint64_t begin, offset, end, range_start, pos;
    double not_before;
    char *err_body;
    size_t err_len;
    void *easy;
    void *headers;
} rmt_stripe;

/* One object to fetch into a local file. */
typedef struct rmt_job {
    const char *name;       /* the object's name under the dataset's prefix */
    const char *path;       /* the local file it is appended to (created if absent); a file
                             * already there is resumed with a Range request */
    uint64_t size;          /* its expected size (0: unknown) */
    int optional;           /* a missing object (404) is not an error: rc ENOENT, msg empty */
    /* with buf: only the object's bytes [from, size) are fetched (Range requests; size is where
     * the range ends, not the object's size), into buf (size - from bytes); path is unused */
    uint8_t *buf;
    uint64_t from;
    int rc;                 /* result */
    fmt_msg msg;
    void *user;
    /* internal */
    int state, fd, skipped;
    double not_before;      /* a job run again from the start waits until then */
    unsigned nstripes;      /* its transfers: xf[0] from the object's start, the others split
                             * off (their ranges partition the object); RMT_STRIPES of them,
                             * allocated while the job runs */
    rmt_stripe *xf;
    uint64_t got;           /* bytes its file held when its transfers last ended */
} rmt_job;

/* Called before a job's first attempt: 0 starts it, 1 leaves it out (job->rc stays 0, done is
 * not called), anything else becomes its rc (done is not called). */
typedef int (*rmt_start_fn)(rmt_job *job, void *ctx);
/* Called when a started job is finished (job->rc set, its file closed): 0 keeps the result, 1
 * runs it again from the start (the file truncated), anything else becomes its rc. */
typedef int (*rmt_done_fn)(rmt_job *job, void *ctx);

/* Fetch every job, up to parallel at once; the first error ends the call: transfers under way
 * are abandoned (their files keep what arrived) and jobs not finished keep rc ECANCELED. 0 or
 * the first job's error (its msg copied into msg). start and done may be NULL. */
int rmt_fetch(const rmt_config *c, rmt_job *jobs, size_t n, unsigned parallel, unsigned tries,
              rmt_start_fn start, rmt_done_fn done, void *ctx, rmt_stats *st, fmt_msg *msg);

/* rmt_fetch, ended also within about 0.1 s of *abort becoming non-zero (the transfers under way
 * abandoned, their jobs' rc ECANCELED; 0 returned unless a job failed first). */
int rmt_fetch_until(const rmt_config *c, rmt_job *jobs, size_t n, unsigned parallel,
                    unsigned tries, rmt_start_fn start, rmt_done_fn done, void *ctx,
                    rmt_stats *st, const atomic_int *abort, fmt_msg *msg);

/* Called when a job has ended for good (its final rc set; done called if it started). */
typedef void (*rmt_ended_fn)(rmt_job *job, void *ctx);
/* Fills the free slot job (name, path, size, user; the rest is set by the fetch) with the next
 * job: 1, or 0 when there is none now. idle: asked for a slot that has stayed free while other
 * transfers run (now and then), not for one a job has just left. */
typedef int (*rmt_more_fn)(rmt_job *job, int idle, void *ctx);

/* rmt_fetch as a stream over the cap slots of jobs, on one set of connections: the slots are
 * filled by more at the start and again as their jobs end (ended told first), up to parallel
 * transfers at once; an error ends its own job only. Returns when no job is under way and more
 * has none, or (abort not NULL) within about 0.1 s of *abort becoming non-zero, the transfers
 * under way left as they stand (their files keep what arrived; ended is not told). 0, or
 * EIO/ENOMEM when libcurl cannot start. */
int rmt_fetch_stream(const rmt_config *c, rmt_job *jobs, size_t cap, unsigned parallel,
                     unsigned tries, rmt_start_fn start, rmt_done_fn done, rmt_ended_fn ended,
                     rmt_more_fn more, void *ctx, rmt_stats *st, const atomic_int *abort);

#endif
