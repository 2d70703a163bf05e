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
    rmt_job *j = ud;
    size_t n = size * nmemb;
    if (n >= 5 && strncmp(p, "HTTP/", 5) == 0) {      /* a new response (after a 100 or redirect) */
        j->range_start = 0;
        j->started = 0;
    } else if (n > 14 && strncasecmp(p, "content-range:", 14) == 0) {
        const char *s = p + 14, *end = p + n;
        while (s < end && (*s == ' ' || *s == '\t'))
            s++;
        if (end - s > 6 && strncasecmp(s, "bytes ", 6) == 0) {
            uint64_t v = 0;
            for (s += 6; s < end && isdigit((unsigned char)*s); s++)
                v = v * 10 + (uint64_t)(*s - '0');
            j->range_start = v;
        }
    }
    return n;
}

static size_t on_body(char *p, size_t size, size_t nmemb, void *ud)
{
    rmt_job *j = ud;
    size_t n = size * nmemb;
    if (!j->started) {
        long code = 0;
        curl_easy_getinfo((CURL *)j->easy, CURLINFO_RESPONSE_CODE, &code);
        j->status = (int)code;
        j->started = 1;
        if (code == 200 && j->offset > 0) {             /* the whole object after all */
            if (ftruncate(j->fd, 0) != 0) {
                j->rc = errno;
                return 0;
            }
            j->offset = 0;
        } else if (code == 206 && j->range_start != j->offset) {
            j->range_bad = 1;                           /* not the range asked for */
            return 0;
        }
    }
    if (j->status < 200 || j->status >= 300) {
        size_t keep = j->err_len < ERR_BODY_MAX ? ERR_BODY_MAX - j->err_len : 0;
        if (keep > n)
            keep = n;
        if (keep) {
            char *b = realloc(j->err_body, j->err_len + keep + 1);
            if (b) {
                memcpy(b + j->err_len, p, keep);
                j->err_len += keep;
                b[j->err_len] = '\0';
                j->err_body = b;
            }
        }
        return n;
    }
    for (size_t done = 0; done < n;) {
        ssize_t w = pwrite(j->fd, p + done, n - done, (off_t)j->offset);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            j->rc = errno;
            return 0;
        }
        done += (size_t)w;
        j->offset += (uint64_t)w;
    }
    return n;
}

static void job_reset_response(rmt_job *j)
{
    free(j->err_body);
    j->err_body = NULL;
    j->err_len = 0;
    j->status = 0;
    j->started = 0;
    j->range_bad = 0;
    j->range_start = 0;
    j->errbuf[0] = '\0';
}

static int open_file(rmt_job *j)
{
    if (j->fd < 0) {
        j->fd = open(j->path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (j->fd < 0)
            return fmt_fail(&j->msg, errno, "cannot create %s: %s", j->path, strerror(errno));
    }
    struct stat st;
    if (fstat(j->fd, &st) != 0)
        return fmt_fail(&j->msg, errno, "cannot stat %s: %s", j->path, strerror(errno));
    j->offset = (uint64_t)st.st_size;
    if (j->size && j->offset > j->size) {
        if (ftruncate(j->fd, 0) != 0)
            return fmt_fail(&j->msg, errno, "cannot truncate %s: %s", j->path, strerror(errno));
        j->offset = 0;
    }
    return 0;
}

/* add an attempt of j to m; 1 when the file is already complete (no transfer needed) */
static int attempt(CURLM *m, fetch_ctx *f, rmt_job *j)
{
    const rmt_config *c = f->c;
    job_reset_response(j);
    int rc = open_file(j);
    if (rc)
        return rc;
    if (j->size && j->offset == j->size)
        return 1;
    CURL *e = curl_easy_init();
    char *url = NULL;
    if (!e || asprintf(&url, "%s/%s", c->base, j->name) < 0) {
        curl_easy_cleanup(e);
        return fmt_fail(&j->msg, ENOMEM, "out of memory");
    }
    struct curl_slist *h = NULL;
    curl_easy_setopt(e, CURLOPT_URL, url);
    free(url);
    curl_easy_setopt(e, CURLOPT_PRIVATE, j);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, j);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, j);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, j->errbuf);
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
    if (j->offset > 0) {
        snprintf(range, sizeof range, "%llu-", (unsigned long long)j->offset);
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
    j->easy = e;
    j->headers = h;
    if (curl_multi_add_handle(m, e) != CURLM_OK) {
        curl_easy_cleanup(e);
        curl_slist_free_all(h);
        j->easy = j->headers = NULL;
        return fmt_fail(&j->msg, ENOMEM, "cannot add a transfer");
    }
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

/* the end of an attempt: 0 finished (j->rc set), 1 to be retried */
static int finish(CURLM *m, fetch_ctx *f, rmt_job *j, CURLcode res, unsigned tries)
{
    long code = 0;
    CURL *e = j->easy;
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code);
    curl_off_t got = 0;
    if (f->st && curl_easy_getinfo(e, CURLINFO_SIZE_DOWNLOAD_T, &got) == CURLE_OK && got > 0)
        f->st->bytes += (uint64_t)got;
    curl_multi_remove_handle(m, e);
    curl_easy_cleanup(e);
    curl_slist_free_all(j->headers);
    j->easy = j->headers = NULL;
    j->tries++;
    char what[900];
    int transient = 0, rc = 0;
    if (res == CURLE_OK && (code == 200 || code == 206)) {
        j->rc = 0;
        return 0;
    }
    if (res == CURLE_WRITE_ERROR && j->rc) {            /* our file */
        int e2 = j->rc;
        fmt_fail(&j->msg, e2, "cannot write %s: %s", j->path, strerror(e2));
        return 0;
    }
    if (res == CURLE_WRITE_ERROR && j->range_bad) {     /* another range: start again */
        if (ftruncate(j->fd, 0) == 0)
            transient = 1;
        snprintf(what, sizeof what, "the server sent bytes from %llu, not %llu",
                 (unsigned long long)j->range_start, (unsigned long long)j->offset);
        rc = EIO;
    } else if (res != CURLE_OK) {
        transient = rmt_curl_transient(res);
        rc = rmt_curl_errno(res);
        snprintf(what, sizeof what, "%s", j->errbuf[0] ? j->errbuf : curl_easy_strerror(res));
    } else {
        if (code == 404 && j->optional) {
            j->rc = ENOENT;
            j->msg.text[0] = '\0';
            return 0;
        }
        if (code == 416) {                              /* the partial file is no prefix */
            if (ftruncate(j->fd, 0) == 0)
                transient = 1;
        }
        transient = transient || rmt_http_transient(code);
        rc = rmt_http_errno(code);
        char scode[128];
        rmt_http_what(what, sizeof what, code, j->err_body, scode);
    }
    if (transient && (unsigned)j->tries < tries) {
        j->not_before = now() + rmt_backoff(j->tries, &f->seed);
        if (f->st)
            f->st->retries++;
        return 1;
    }
    char tail[64] = "";
    if (transient)
        snprintf(tail, sizeof tail, " (after %d tries)", j->tries);
    strncat(what, tail, sizeof what - strlen(what) - 1);
    describe(f, j, rc, what);
    j->rc = rc;
    return 0;
}

/* bytes received of the jobs that transfer, of their total (a job its start skipped counts in
 * neither) */
static void report(const rmt_config *c, const rmt_job *jobs, size_t n, int final)
{
    uint64_t got = 0, total = 0;
    for (size_t i = 0; i < n; i++) {
        if (jobs[i].skipped)
            continue;
        total += jobs[i].size;
        if (jobs[i].state != J_NEW)
            got += jobs[i].offset < jobs[i].size ? jobs[i].offset : jobs[i].size;
    }
    c->progress(c->progress_ctx, got, total, final);
}

static void close_job(rmt_job *j)
{
    if (j->fd >= 0)
        close(j->fd);
    j->fd = -1;
    free(j->err_body);
    j->err_body = NULL;
    j->err_len = 0;
}

/* j has ended (j->rc set): its file closed, then done asked. 1: done wants it again from the
 * start (its file truncated, it waits to start at once); 0: it is J_DONE with its final rc. */
static int settle(rmt_job *j, rmt_done_fn done, void *ctx)
{
    close_job(j);
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
    j->tries = 0;
    j->skipped = 0;
    j->offset = 0;
    j->easy = j->headers = NULL;
    j->err_body = NULL;
    j->err_len = 0;
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
    size_t next = 0, left = n, active = 0;
    int first = 0;
    fmt_msg first_msg = {{0}};
    double shown = now(), asked = shown;
    while (left > 0 && !(abort && atomic_load(abort))) {
        double t = now(), wake = t + 0.1;
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
            if (j->state == J_WAIT && j->not_before > t) {
                if (j->not_before < wake)
                    wake = j->not_before;
                continue;
            }
            if (j->state == J_NEW) {
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
            rc = attempt(m, &f, j);
            if (rc == 0) {
                j->state = J_ACTIVE;
                active++;
                continue;
            }
            /* complete already (rc 1), or an error of ours */
            j->rc = rc == 1 ? 0 : rc;
            if (settle(j, done, ctx))
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
        for (size_t i = 0; more && i < slots; i++)
            if (jobs[i].state == J_NEW)
                wake = t;               /* a slot filled again: it starts now, no pause */
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
            rmt_job *j = NULL;
            curl_easy_getinfo(cm->easy_handle, CURLINFO_PRIVATE, (char **)&j);
            CURLcode res = cm->data.result;
            active--;
            if (finish(m, &f, j, res, tries)) {
                j->state = J_WAIT;
                continue;
            }
            if (settle(j, done, ctx))
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
        if (jobs[i].easy) {
            curl_multi_remove_handle(m, jobs[i].easy);
            curl_easy_cleanup(jobs[i].easy);
            curl_slist_free_all(jobs[i].headers);
            jobs[i].easy = jobs[i].headers = NULL;
        }
        close_job(&jobs[i]);
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

int rmt_fetch_stream(const rmt_config *c, rmt_job *jobs, size_t cap, unsigned parallel,
                     unsigned tries, rmt_start_fn start, rmt_done_fn done, rmt_ended_fn ended,
                     rmt_more_fn more, void *ctx, rmt_stats *st, const atomic_int *abort)
{
    fmt_msg msg = {{0}};
    return fetch_loop(c, jobs, cap, 0, parallel, tries, start, done, ended, more, ctx, st,
                      abort, &msg);
}
