/* fetch.c - objects into local files with libcurl's multi interface: several transfers at once
 * over reused connections, S3 requests signed by libcurl (CURLOPT_AWS_SIGV4), transient failures
 * (connection errors, timeouts, a body cut short, 5xx, 408, 429) retried with capped exponential
 * backoff and jitter, a partial body resumed with a Range request (remote.h). */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "curl_codes.h"
#include "remote.h"

enum { J_NEW, J_ACTIVE, J_WAIT, J_DONE };

#define ERR_BODY_MAX 4096       /* bytes of an error response kept for its message */
/* SHA-256 of the empty body: what S3 wants in x-amz-content-sha256 for a GET */
#define EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static CURLcode init_rc;

static void global_init(void)
{
    init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int rmt_curl_init(fmt_msg *msg)
{
    pthread_once(&init_once, global_init);
    if (init_rc != CURLE_OK)
        return fmt_fail(msg, EIO, "cannot initialise libcurl: %s", curl_easy_strerror(init_rc));
    return 0;
}

unsigned rmt_jitter_seed(void)
{
    return (unsigned)getpid() ^ (unsigned)(now() * 1e6);
}

typedef struct {
    const rmt_config *c;
    rmt_stats *st;
    unsigned seed;
} fetch_ctx;

static size_t on_header(char *p, size_t size, size_t nmemb, void *ud)
{
    rmt_stripe *s = ud;
    size_t n = size * nmemb;
    if (n >= 5 && strncmp(p, "HTTP/", 5) == 0) {      /* a new response (after a 100 or redirect) */
        s->range_start = 0;
        s->started = 0;
    } else if (n > 14 && strncasecmp(p, "content-range:", 14) == 0) {
        const char *q = p + 14, *end = p + n;
        while (q < end && (*q == ' ' || *q == '\t'))
            q++;
        if (end - q > 6 && strncasecmp(q, "bytes ", 6) == 0) {
            uint64_t v = 0;
            for (q += 6; q < end && isdigit((unsigned char)*q); q++)
                v = v * 10 + (uint64_t)(*q - '0');
            s->range_start = v;
        }
    }
    return n;
}

static size_t on_body(char *p, size_t size, size_t nmemb, void *ud)
{
    rmt_stripe *s = ud;
    rmt_job *j = s->job;
    size_t n = size * nmemb;
    if (!s->started) {
        long code = 0;
        curl_easy_getinfo((CURL *)s->easy, CURLINFO_RESPONSE_CODE, &code);
        s->status = (int)code;
        s->started = 1;
        s->pos = code == 206 ? s->range_start : 0;
        if (code == 200 && s->offset > 0 && j->nstripes == 1 && !j->buf) {  /* the whole object */
            if (ftruncate(j->fd, 0) != 0) {
                j->rc = errno;
                return 0;
            }
            s->offset = 0;
        } else if (code == 206 && s->range_start != s->offset) {
            s->range_bad = 1;                           /* not the range asked for */
            return 0;
        }
        /* a 200 to a split job's range: the bytes before this transfer's are passed over */
    }
    if (s->status < 200 || s->status >= 300) {
        size_t keep = s->err_len < ERR_BODY_MAX ? ERR_BODY_MAX - s->err_len : 0;
        if (keep > n)
            keep = n;
        if (keep) {
            char *b = realloc(s->err_body, s->err_len + keep + 1);
            if (b) {
                memcpy(b + s->err_len, p, keep);
                s->err_len += keep;
                b[s->err_len] = '\0';
                s->err_body = b;
            }
        }
        return n;
    }
    size_t done = 0;
    if (s->pos < s->offset) {                           /* bytes another transfer writes */
        uint64_t skip = s->offset - s->pos;
        done = skip < n ? (size_t)skip : n;
        s->pos += done;
    }
    size_t want = n;
    int capped = s->end && s->pos + (want - done) > s->end;
    if (capped)                                         /* the rest is another transfer's */
        want = done + (size_t)(s->end - s->pos);
    if (j->buf && done < want) {                      /* a range into memory */
        memcpy(j->buf + (s->offset - j->from), p + done, want - done);
        s->offset += (uint64_t)(want - done);
        s->pos += (uint64_t)(want - done);
        done = want;
    }
    while (done < want) {
        ssize_t w = pwrite(j->fd, p + done, want - done, (off_t)s->offset);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            j->rc = errno;
            return 0;
        }
        done += (size_t)w;
        s->offset += (uint64_t)w;
        s->pos += (uint64_t)w;
    }
    return capped ? 0 : n;      /* 0 ends a capped transfer: its range is complete */
}

static void stripe_reset_response(rmt_stripe *s)
{
    free(s->err_body);
    s->err_body = NULL;
    s->err_len = 0;
    s->status = 0;
    s->started = 0;
    s->range_bad = 0;
    s->range_start = 0;
    s->pos = 0;
    s->errbuf[0] = '\0';
}

/* the job's one transfer, of [begin, j->size) from offset: NULL when out of memory */
static rmt_stripe *first_stripe(rmt_job *j, uint64_t begin, uint64_t offset)
{
    if (!j->xf && !(j->xf = calloc(RMT_STRIPES, sizeof *j->xf))) {
        fmt_fail(&j->msg, ENOMEM, "out of memory");
        return NULL;
    }
    rmt_stripe *s = &j->xf[0];
    j->nstripes = 1;
    j->got = 0;
    s->job = j;
    s->tries = 0;
    s->begin = begin;
    s->offset = offset;
    s->end = j->size;
    return s;
}

/* the job's primary transfer from what its file holds: 1 when it is already complete */
static int open_file(rmt_job *j)
{
    if (j->buf)                         /* a range into memory: no file */
        return first_stripe(j, j->from, j->from) ? j->from >= j->size : ENOMEM;
    if (j->fd < 0) {
        j->fd = open(j->path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (j->fd < 0)
            return fmt_fail(&j->msg, errno, "cannot create %s: %s", j->path, strerror(errno));
    }
    struct stat st;
    if (fstat(j->fd, &st) != 0)
        return fmt_fail(&j->msg, errno, "cannot stat %s: %s", j->path, strerror(errno));
    rmt_stripe *s = first_stripe(j, 0, (uint64_t)st.st_size);
    if (!s)
        return ENOMEM;
    if (j->size && s->offset > j->size) {
        if (ftruncate(j->fd, 0) != 0)
            return fmt_fail(&j->msg, errno, "cannot truncate %s: %s", j->path, strerror(errno));
        s->offset = 0;
    }
    return j->size && s->offset == j->size;
}

/* add a transfer of s to m */
static int attempt(CURLM *m, fetch_ctx *f, rmt_stripe *s)
{
    const rmt_config *c = f->c;
    rmt_job *j = s->job;
    stripe_reset_response(s);
    CURL *e = curl_easy_init();
    char *url = NULL;
    if (!e || asprintf(&url, "%s/%s", c->base, j->name) < 0) {
        curl_easy_cleanup(e);
        return fmt_fail(&j->msg, ENOMEM, "out of memory");
    }
    struct curl_slist *h = NULL;
    curl_easy_setopt(e, CURLOPT_URL, url);
    free(url);
    curl_easy_setopt(e, CURLOPT_PRIVATE, s);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, s);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, s);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, s->errbuf);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT, 5L);
    /* a transfer without a byte for 10 s is stalled: retried */
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, 10L);
    if (c->ca_bundle)
        curl_easy_setopt(e, CURLOPT_CAINFO, c->ca_bundle);
    if (!c->s3) {
        curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L);
        curl_easy_setopt(e, CURLOPT_MAXREDIRS, 5L);
    }
    char range[48];
    if (s->end && (s->end < j->size || j->buf)) {   /* a range of a split job, or asked for */
        snprintf(range, sizeof range, "%llu-%llu", (unsigned long long)s->offset,
                 (unsigned long long)(s->end - 1));
        curl_easy_setopt(e, CURLOPT_RANGE, range);
    } else if (s->offset > 0) {
        snprintf(range, sizeof range, "%llu-", (unsigned long long)s->offset);
        curl_easy_setopt(e, CURLOPT_RANGE, range);
    }
    if (c->s3 && c->key_id) {
        char sig[200];
        snprintf(sig, sizeof sig, "aws:amz:%s:s3", c->region);
        curl_easy_setopt(e, CURLOPT_AWS_SIGV4, sig);
        curl_easy_setopt(e, CURLOPT_USERNAME, c->key_id);
        curl_easy_setopt(e, CURLOPT_PASSWORD, c->secret);
        h = curl_slist_append(h, "x-amz-content-sha256: " EMPTY_SHA256);
        if (c->token) {
            char *t = NULL;
            if (asprintf(&t, "x-amz-security-token: %s", c->token) >= 0) {
                struct curl_slist *h2 = curl_slist_append(h, t);
                h = h2 ? h2 : h;
                free(t);
            }
        }
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
    }
    s->easy = e;
    s->headers = h;
    if (curl_multi_add_handle(m, e) != CURLM_OK) {
        curl_easy_cleanup(e);
        curl_slist_free_all(h);
        s->easy = s->headers = NULL;
        return fmt_fail(&j->msg, ENOMEM, "cannot add a transfer");
    }
    s->state = J_ACTIVE;
    return 0;
}

static void describe(const fetch_ctx *f, const rmt_job *j, int rc, const char *what)
{
    const rmt_config *c = f->c;
    char where[600];
    if (c->s3)
        snprintf(where, sizeof where, " from %s (bucket %s)", c->endpoint, c->bucket);
    else
        where[0] = '\0';
    fmt_fail((fmt_msg *)&j->msg, rc, "cannot fetch %s/%s%s: %s", c->url, j->name, where, what);
}

static void stripe_drop(CURLM *m, rmt_stripe *s)
{
    if (s->easy) {
        curl_multi_remove_handle(m, s->easy);
        curl_easy_cleanup(s->easy);
        curl_slist_free_all(s->headers);
        s->easy = s->headers = NULL;
    }
    free(s->err_body);
    s->err_body = NULL;
    s->err_len = 0;
}

/* the end of one transfer of a job: 0 its range finished, 1 to be retried (s->not_before set),
 * -1 the job has failed (j->rc and j->msg set) */
static int finish(CURLM *m, fetch_ctx *f, rmt_stripe *s, CURLcode res, unsigned tries)
{
    rmt_job *j = s->job;
    long code = 0;
    CURL *e = s->easy;
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code);
    curl_off_t got = 0;
    if (f->st && curl_easy_getinfo(e, CURLINFO_SIZE_DOWNLOAD_T, &got) == CURLE_OK && got > 0)
        f->st->bytes += (uint64_t)got;
    curl_multi_remove_handle(m, e);
    curl_easy_cleanup(e);
    curl_slist_free_all(s->headers);
    s->easy = s->headers = NULL;
    s->tries++;
    char what[900];
    int transient = 0, rc = 0;
    int split = j->nstripes > 1;
    /* every byte of a known range written is a finished range, whatever ended the transfer
     * after them (its cap, or a body cut at the range's end: asked again, that would be a range
     * of no bytes) */
    if (!j->rc && s->end && s->offset == s->end)
        return 0;
    if (res == CURLE_OK && (code == 200 || code == 206)) {
        if (!s->end)
            return 0;
        /* a range's body ended early without an error: the rest again */
        transient = 1;
        rc = EIO;
        snprintf(what, sizeof what, "the body ended at byte %llu of %llu",
                 (unsigned long long)s->offset, (unsigned long long)s->end);
    } else if (res == CURLE_WRITE_ERROR && j->rc) {     /* our file */
        int e2 = j->rc;
        fmt_fail(&j->msg, e2, "cannot write %s: %s", j->path, strerror(e2));
        return -1;
    } else if (res == CURLE_WRITE_ERROR && s->range_bad) {  /* another range: again */
        if (split || j->buf || ftruncate(j->fd, 0) == 0) {
            transient = 1;
            if (!split && !j->buf)
                s->offset = 0;
        }
        snprintf(what, sizeof what, "the server sent bytes from %llu, not %llu",
                 (unsigned long long)s->range_start, (unsigned long long)s->offset);
        rc = EIO;
    } else if (res != CURLE_OK) {
        transient = rmt_curl_transient(res);
        rc = rmt_curl_errno(res);
        snprintf(what, sizeof what, "%s", s->errbuf[0] ? s->errbuf : curl_easy_strerror(res));
    } else {
        if (code == 404 && j->optional) {
            j->rc = ENOENT;
            j->msg.text[0] = '\0';
            return -1;
        }
        if (code == 416 && !split && !j->buf) {                    /* the partial file is no prefix */
            if (ftruncate(j->fd, 0) == 0) {
                transient = 1;
                s->offset = 0;
            }
        }
        transient = transient || rmt_http_transient(code);
        rc = rmt_http_errno(code);
        char scode[128];
        rmt_http_what(what, sizeof what, code, s->err_body, scode);
    }
    if (transient && (unsigned)s->tries < tries) {
        s->not_before = now() + rmt_backoff(s->tries, &f->seed);
        if (f->st)
            f->st->retries++;
        return 1;
    }
    char tail[64] = "";
    if (transient)
        snprintf(tail, sizeof tail, " (after %d tries)", s->tries);
    strncat(what, tail, sizeof what - strlen(what) - 1);
    describe(f, j, rc, what);
    j->rc = rc;
    return -1;
}

/* bytes received of the jobs that transfer, of their total (a job its start skipped counts in
 * neither) */
static void report(const rmt_config *c, const rmt_job *jobs, size_t n, int final)
{
    uint64_t got = 0, total = 0;
    for (size_t i = 0; i < n; i++) {
        const rmt_job *j = &jobs[i];
        if (j->skipped)
            continue;
        total += j->size;
        if (j->state == J_NEW)
            continue;
        uint64_t g = j->got;
        for (unsigned k = 0; j->xf && k < j->nstripes; k++)
            g += j->xf[k].offset - j->xf[k].begin;
        got += g < j->size ? g : j->size;
    }
    c->progress(c->progress_ctx, got, total, final);
}

/* the bytes from the object's start that j's file holds without a gap */
static uint64_t held_prefix(const rmt_job *j)
{
    uint64_t at = 0;
    for (unsigned again = 1; again;) {
        again = 0;
        for (unsigned k = 0; k < j->nstripes; k++) {
            const rmt_stripe *s = &j->xf[k];
            if (s->begin != at || s->offset == s->begin)
                continue;
            at = s->offset;
            again = s->offset == s->end;
            break;
        }
    }
    return at;
}

/* j's transfers removed and its file closed; a split job's file is cut to the bytes it holds
 * from the start, so that a later fetch resumes it as a prefix */
static void close_job(CURLM *m, rmt_job *j)
{
    if (j->xf) {
        uint64_t g = 0;
        for (unsigned k = 0; k < j->nstripes; k++) {
            stripe_drop(m, &j->xf[k]);
            g += j->xf[k].offset - j->xf[k].begin;
        }
        j->got = j->rc ? held_prefix(j) : g;
        if (j->fd >= 0 && j->nstripes > 1 && j->rc != 0)
            (void)ftruncate(j->fd, (off_t)j->got);
        free(j->xf);
        j->xf = NULL;
    }
    if (j->fd >= 0)
        close(j->fd);
    j->fd = -1;
}

/* j has ended (j->rc set): its file closed, then done asked. 1: done wants it again from the
 * start (its file truncated, it waits to start at once); 0: it is J_DONE with its final rc. */
static int settle(CURLM *m, rmt_job *j, rmt_done_fn done, void *ctx)
{
    close_job(m, j);
    int d = done ? done(j, ctx) : 0;
    if (d == 1) {
        if (truncate(j->path, 0) == 0) {
            j->state = J_WAIT;
            j->not_before = 0;
            return 1;
        }
        j->rc = errno;
    } else if (d) {
        j->rc = d;
    }
    j->state = J_DONE;
    return 0;
}

static void job_init(rmt_job *j)
{
    j->state = J_NEW;
    j->fd = -1;
    j->rc = ECANCELED;
    j->skipped = 0;
    j->not_before = 0;
    j->nstripes = 0;
    j->xf = NULL;
    j->got = 0;
    j->msg.text[0] = '\0';
}

/* Job i has ended: told to ended, then its slot filled again by more if it has a job. 1 when the
 * slot holds a new job. */
static int refill(rmt_job *jobs, size_t i, rmt_ended_fn ended, rmt_more_fn more, void *ctx)
{
    if (ended)
        ended(&jobs[i], ctx);
    if (!more || !more(&jobs[i], 0, ctx))
        return 0;
    job_init(&jobs[i]);
    return 1;
}

/* a connection is free and nothing waits for it: the transfer with the most bytes left (at
 * least 2 * RMT_STRIPE_MIN) gives the second half of its range to a new transfer. 1 when one
 * started. */
static int split_one(CURLM *m, fetch_ctx *f, rmt_job *jobs, size_t slots)
{
    rmt_stripe *best = NULL;
    uint64_t most = 2 * (uint64_t)RMT_STRIPE_MIN - 1;
    for (size_t i = 0; i < slots; i++) {
        rmt_job *j = &jobs[i];
        if (j->state != J_ACTIVE || j->nstripes >= RMT_STRIPES || !j->size || j->rc)
            continue;
        for (unsigned k = 0; k < j->nstripes; k++) {
            rmt_stripe *s = &j->xf[k];
            if (s->state == J_ACTIVE && s->end && s->end - s->offset > most) {
                most = s->end - s->offset;
                best = s;
            }
        }
    }
    if (!best)
        return 0;
    rmt_job *j = best->job;
    rmt_stripe *n = &j->xf[j->nstripes];
    memset(n, 0, sizeof *n);
    n->job = j;
    n->begin = n->offset = best->offset + most / 2;
    n->end = best->end;
    if (attempt(m, f, n) != 0)
        return 0;                       /* (the range stays the other transfer's) */
    best->end = n->begin;
    j->nstripes++;
    return 1;
}

/* the transfers under way: those of the jobs running */
static size_t transfers(const rmt_job *jobs, size_t slots)
{
    size_t a = 0;
    for (size_t i = 0; i < slots; i++)
        for (unsigned k = 0; jobs[i].state == J_ACTIVE && k < jobs[i].nstripes; k++)
            a += jobs[i].xf[k].state == J_ACTIVE;
    return a;
}

/* rmt_fetch and rmt_fetch_stream: n jobs of the array's cap slots; with more, an error ends only
 * its job and an ended job's slot is filled again */
static int fetch_loop(const rmt_config *c, rmt_job *jobs, size_t cap, size_t n, unsigned parallel,
                      unsigned tries, rmt_start_fn start, rmt_done_fn done, rmt_ended_fn ended,
                      rmt_more_fn more, void *ctx, rmt_stats *st, const atomic_int *abort,
                      fmt_msg *msg)
{
    int irc = rmt_curl_init(msg);
    if (irc)
        return irc;
    if (!parallel)
        parallel = 8;
    if (!tries)
        tries = 6;
    CURLM *m = curl_multi_init();
    if (!m)
        return fmt_fail(msg, ENOMEM, "cannot initialise libcurl");
    fetch_ctx f = {c, st, rmt_jitter_seed()};
    for (size_t i = 0; i < n; i++)
        job_init(&jobs[i]);
    for (size_t i = n; more && i < cap; i++) {
        job_init(&jobs[i]);             /* free slots */
        jobs[i].state = J_DONE;
        jobs[i].skipped = 1;
    }
    size_t slots = more ? cap : n;
    for (size_t i = n; more && i < cap && more(&jobs[i], 0, ctx); i++) {
        job_init(&jobs[i]);             /* (until more has none) */
        n++;
    }
    size_t next = 0, left = n;
    int first = 0;
    fmt_msg first_msg = {{0}};
    double shown = now(), asked = shown;
    while (left > 0 && !(abort && atomic_load(abort))) {
        double t = now(), wake = t + 0.1;
        size_t active = transfers(jobs, slots);
        /* a free slot while transfers run: more is asked again now and then (a reader may
         * want a shard that is not under way) */
        for (size_t i = 0; more && left < slots && t - asked >= 0.02 && i < slots; i++) {
            if (jobs[i].state != J_DONE)
                continue;
            asked = t;
            if (!more(&jobs[i], 1, ctx))
                break;
            job_init(&jobs[i]);
            left++;
        }
        if (c->progress && t - shown >= 0.25) {
            report(c, jobs, slots, 0);
            shown = t;
        }
        /* start what may start: retries whose time has come, then new jobs in order */
        for (size_t i = 0; !first && active < parallel && i < slots; i++) {
            rmt_job *j = &jobs[i];
            int rc;
            if (j->state == J_ACTIVE) {         /* its transfers waiting to be tried again */
                for (unsigned k = 0; active < parallel && k < j->nstripes; k++) {
                    rmt_stripe *s = &j->xf[k];
                    if (s->state != J_WAIT)
                        continue;
                    if (s->not_before > t) {
                        if (s->not_before < wake)
                            wake = s->not_before;
                        continue;
                    }
                    if ((rc = attempt(m, &f, s)) == 0) {
                        active++;
                        continue;
                    }
                    j->rc = rc;                 /* an error of ours: the job fails */
                    break;
                }
                if (!j->rc)
                    continue;
            } else if (j->state == J_WAIT && j->not_before > t) {
                if (j->not_before < wake)
                    wake = j->not_before;
                continue;
            } else if (j->state == J_NEW) {
                if (i < next)
                    continue;
                next = more ? 0 : i + 1;
                j->rc = 0;
                rc = start ? start(j, ctx) : 0;
                if (rc != 0) {
                    j->state = J_DONE;
                    j->skipped = 1;
                    if (rc != 1) {
                        j->rc = rc;
                        if (!more) {
                            first = rc;
                            first_msg = j->msg;
                        }
                    }
                    left--;
                    left += refill(jobs, i, ended, more, ctx);
                    continue;
                }
            } else if (j->state != J_WAIT) {
                continue;
            }
            if (j->state != J_ACTIVE) {         /* new, or again from the start */
                j->rc = 0;
                rc = open_file(j);
                if (rc == 0 && (rc = attempt(m, &f, &j->xf[0])) == 0) {
                    j->state = J_ACTIVE;
                    active++;
                    continue;
                }
                /* complete already (rc 1), or an error of ours */
                j->rc = rc == 1 ? 0 : rc;
            } else {                            /* a retry that could not start */
                active -= transfers(j, 1);
            }
            if (settle(m, j, done, ctx))
                continue;
            left--;
            if (j->rc && !first && !more) {
                first = j->rc;
                first_msg = j->msg;
            }
            left += refill(jobs, i, ended, more, ctx);
        }
        if (first)                      /* the rest is abandoned (a .part is resumed later) */
            break;
        if (left == 0)                  /* the last ones needed no transfer (cached): no pause */
            break;
        int waiting = 0;
        for (size_t i = 0; i < slots; i++)
            if (jobs[i].state == J_NEW || (jobs[i].state == J_WAIT && jobs[i].not_before <= t))
                waiting = 1;
        if (waiting && more)
            wake = t;                   /* a slot filled again: it starts now, no pause */
        /* connections free and no job waiting for one: split the largest range under way */
        while (!waiting && active > 0 && active < parallel && split_one(m, &f, jobs, slots))
            active++;
        if (active == 0) {
            double w = wake - now();
            if (w > 0) {
                struct timespec ts = {(time_t)w, (long)((w - (double)(time_t)w) * 1e9)};
                nanosleep(&ts, NULL);
            }
            continue;
        }
        int running = 0;
        curl_multi_perform(m, &running);
        CURLMsg *cm;
        int queued;
        int any = 0;
        while ((cm = curl_multi_info_read(m, &queued))) {
            if (cm->msg != CURLMSG_DONE)
                continue;
            any = 1;
            rmt_stripe *s = NULL;
            curl_easy_getinfo(cm->easy_handle, CURLINFO_PRIVATE, (char **)&s);
            rmt_job *j = s->job;
            CURLcode res = cm->data.result;
            int r = finish(m, &f, s, res, tries);
            if (r == 1) {
                s->state = J_WAIT;
                continue;
            }
            if (r == 0) {
                s->state = J_DONE;
                unsigned k = 0;
                while (k < j->nstripes && j->xf[k].state == J_DONE)
                    k++;
                if (k < j->nstripes)
                    continue;           /* its other ranges still under way */
                j->rc = 0;
            }                           /* (failed: its other transfers end with it) */
            if (settle(m, j, done, ctx))
                continue;
            left--;
            if (j->rc && !(j->optional && j->rc == ENOENT) && !first && !more) {
                first = j->rc;
                first_msg = j->msg;
            }
            left += refill(jobs, (size_t)(j - jobs), ended, more, ctx);
        }
        if (!any) {
            int ms = (int)((wake - now()) * 1000);
            curl_multi_poll(m, NULL, 0, ms < 1 ? 1 : ms > 100 ? 100 : ms, NULL);
        }
    }
    if (c->progress)
        report(c, jobs, slots, 1);
    for (size_t i = 0; i < slots; i++) {
        if (jobs[i].state == J_ACTIVE && !jobs[i].rc)
            jobs[i].rc = ECANCELED;     /* abandoned: a split file is cut to its prefix */
        close_job(m, &jobs[i]);
    }
    curl_multi_cleanup(m);
    if (first && msg)
        *msg = first_msg;
    return first;
}

int rmt_fetch(const rmt_config *c, rmt_job *jobs, size_t n, unsigned parallel, unsigned tries,
              rmt_start_fn start, rmt_done_fn done, void *ctx, rmt_stats *st, fmt_msg *msg)
{
    return fetch_loop(c, jobs, n, n, parallel, tries, start, done, NULL, NULL, ctx, st, NULL,
                      msg);
}

int rmt_fetch_until(const rmt_config *c, rmt_job *jobs, size_t n, unsigned parallel,
                    unsigned tries, rmt_start_fn start, rmt_done_fn done, void *ctx,
                    rmt_stats *st, const atomic_int *abort, fmt_msg *msg)
{
    return fetch_loop(c, jobs, n, n, parallel, tries, start, done, NULL, NULL, ctx, st, abort,
                      msg);
}

int rmt_fetch_stream(const rmt_config *c, rmt_job *jobs, size_t cap, unsigned parallel,
                     unsigned tries, rmt_start_fn start, rmt_done_fn done, rmt_ended_fn ended,
                     rmt_more_fn more, void *ctx, rmt_stats *st, const atomic_int *abort)
{
    fmt_msg msg = {{0}};
    return fetch_loop(c, jobs, cap, 0, parallel, tries, start, done, ended, more, ctx, st,
                      abort, &msg);
}
