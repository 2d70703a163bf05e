/* upload.c - objects written to s3:// with libcurl: PUT, multipart uploads for large files,
 * DELETE and ListObjectsV2, signed by libcurl (CURLOPT_AWS_SIGV4) over a body hash computed here,
 * transient failures retried with capped exponential backoff and jitter (upload.h). */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "curl_codes.h"
#include "upload.h"

#define TRIES 6                         /* as fetch.c's default */
#define RESP_MAX ((size_t)4 << 20)      /* a response body kept (a listing page, an error) */
#define MAX_PARTS 10000u                /* S3's limit on the parts of one upload */

/* ---- SHA-256 (FIPS 180-4): the payload hash SigV4 signs ---- */

typedef struct {
    uint32_t h[8];
    uint64_t len;
    uint8_t buf[64];
    size_t n;
} sha256_t;

static const uint32_t K256[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha_block(sha256_t *s, const uint8_t *p)
{
    uint32_t w[64], a[8];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    memcpy(a, s->h, sizeof a);
    for (int i = 0; i < 64; i++) {
        uint32_t S1 = ROR(a[4], 6) ^ ROR(a[4], 11) ^ ROR(a[4], 25);
        uint32_t ch = (a[4] & a[5]) ^ (~a[4] & a[6]);
        uint32_t t1 = a[7] + S1 + ch + K256[i] + w[i];
        uint32_t S0 = ROR(a[0], 2) ^ ROR(a[0], 13) ^ ROR(a[0], 22);
        uint32_t mj = (a[0] & a[1]) ^ (a[0] & a[2]) ^ (a[1] & a[2]);
        uint32_t t2 = S0 + mj;
        memmove(a + 1, a, 7 * sizeof *a);
        a[4] += t1;
        a[0] = t1 + t2;
    }
    for (int i = 0; i < 8; i++)
        s->h[i] += a[i];
}

static void sha_init(sha256_t *s)
{
    static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(s->h, h0, sizeof h0);
    s->len = 0;
    s->n = 0;
}

static void sha_update(sha256_t *s, const void *data, size_t len)
{
    const uint8_t *p = data;
    s->len += len;
    while (len) {
        size_t k = 64 - s->n < len ? 64 - s->n : len;
        memcpy(s->buf + s->n, p, k);
        s->n += k;
        p += k;
        len -= k;
        if (s->n == 64) {
            sha_block(s, s->buf);
            s->n = 0;
        }
    }
}

static void sha_hex(sha256_t *s, char hex[65])
{
    uint64_t bits = s->len * 8;
    uint8_t pad = 0x80, zero = 0, lenb[8];
    sha_update(s, &pad, 1);
    while (s->n != 56)
        sha_update(s, &zero, 1);
    for (int i = 0; i < 8; i++)
        lenb[i] = (uint8_t)(bits >> (56 - 8 * i));
    sha_update(s, lenb, 8);
    for (int i = 0; i < 8; i++)
        snprintf(hex + 8 * i, 9, "%08x", s->h[i]);
}

void rmt_sha256_hex(const void *data, size_t len, char hex[65])
{
    sha256_t s;
    sha_init(&s);
    sha_update(&s, data, len);
    sha_hex(&s, hex);
}

/* the SHA-256 of bytes [off, off + len) of fd */
static int sha_file(int fd, uint64_t off, uint64_t len, char hex[65])
{
    static const size_t chunk = (size_t)1 << 20;
    char *buf = malloc(chunk);
    if (!buf)
        return ENOMEM;
    sha256_t s;
    sha_init(&s);
    while (len) {
        size_t k = len < chunk ? (size_t)len : chunk;
        ssize_t r = pread(fd, buf, k, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            int e = r < 0 ? errno : EIO;
            free(buf);
            return e;
        }
        sha_update(&s, buf, (size_t)r);
        off += (uint64_t)r;
        len -= (uint64_t)r;
    }
    free(buf);
    sha_hex(&s, hex);
    return 0;
}

/* ---- the writer ---- */

struct rmt_writer {
    rmt_config c;
    char *bucket_url;           /* ENDPOINT/BUCKET (the listing's URL) */
    uint64_t part_size;
    CURL *easy;                 /* one handle: its connections are reused */
    unsigned seed;
    rmt_upload_stats st;
    void (*progress)(void *ctx, uint64_t sent);
    void *pctx;
};

int rmt_writer_open(rmt_writer **out, const char *url, uint64_t part_size, fmt_msg *msg)
{
    *out = NULL;
    if (!rmt_is_url(url) || strncmp(url, "s3://", 5) != 0)
        return fmt_fail(msg, FMT_EINVAL, "%s: http(s):// datasets are read-only; write to "
                        "s3://BUCKET/PREFIX or to a local folder", url);
    int rc = rmt_curl_init(msg);
    if (rc)
        return rc;
    rmt_writer *w = calloc(1, sizeof *w);
    if (!w)
        return fmt_fail(msg, ENOMEM, "out of memory");
    rc = rmt_config_load(&w->c, url, 0, msg);
    if (rc) {
        free(w);
        return rc;
    }
    w->part_size = part_size ? part_size : RMT_PART_SIZE_DEFAULT;
    size_t bl = strlen(w->c.base), pl = strlen(w->c.prefix);
    w->bucket_url = strndup(w->c.base, pl ? bl - pl - 1 : bl);
    w->easy = curl_easy_init();
    w->seed = rmt_jitter_seed();
    if (!w->bucket_url || !w->easy) {
        rmt_writer_close(w);
        return fmt_fail(msg, ENOMEM, "out of memory");
    }
    *out = w;
    return 0;
}

void rmt_writer_close(rmt_writer *w)
{
    if (!w)
        return;
    if (w->easy)
        curl_easy_cleanup(w->easy);
    free(w->bucket_url);
    rmt_config_free(&w->c);
    free(w);
}

const rmt_config *rmt_writer_config(const rmt_writer *w)
{
    return &w->c;
}

void rmt_writer_progress(rmt_writer *w, void (*fn)(void *ctx, uint64_t sent), void *ctx)
{
    w->progress = fn;
    w->pctx = ctx;
}

void rmt_writer_stats(const rmt_writer *w, rmt_upload_stats *st)
{
    *st = w->st;
}

/* ---- one request, retried ---- */

typedef struct {
    const char *method;         /* "PUT", "POST", "DELETE", "GET" */
    char *url;
    const char *verb, *object;  /* for messages: "upload", "s3://b/p/name" */
    int fd;                     /* the body: bytes [off, off + len) of fd, or data */
    uint64_t off, len, pos;
    const char *data;
    char sha[65];
    const char *ctype;          /* a Content-Type, or NULL */
    /* the answer */
    long code;
    char *resp;
    size_t rlen;
    char etag[256];
    rmt_writer *w;
    int rerr;                   /* a read error of the body's file */
} req_t;

static size_t on_read(char *buf, size_t size, size_t nitems, void *ud)
{
    req_t *r = ud;
    size_t want = size * nitems;
    if (want > r->len - r->pos)
        want = (size_t)(r->len - r->pos);
    if (!want)
        return 0;
    if (r->data) {
        memcpy(buf, r->data + r->pos, want);
    } else {
        ssize_t got;
        do
            got = pread(r->fd, buf, want, (off_t)(r->off + r->pos));
        while (got < 0 && errno == EINTR);
        if (got <= 0) {
            r->rerr = got < 0 ? errno : EIO;
            return CURL_READFUNC_ABORT;
        }
        want = (size_t)got;
    }
    r->pos += want;
    return want;
}

static size_t on_resp(char *p, size_t size, size_t nmemb, void *ud)
{
    req_t *r = ud;
    size_t n = size * nmemb, keep = r->rlen < RESP_MAX ? RESP_MAX - r->rlen : 0;
    if (keep > n)
        keep = n;
    if (keep) {
        char *b = realloc(r->resp, r->rlen + keep + 1);
        if (!b)
            return 0;
        memcpy(b + r->rlen, p, keep);
        r->rlen += keep;
        b[r->rlen] = '\0';
        r->resp = b;
    }
    return n;
}

static size_t on_head(char *p, size_t size, size_t nmemb, void *ud)
{
    req_t *r = ud;
    size_t n = size * nmemb;
    if (n > 5 && strncasecmp(p, "etag:", 5) == 0) {
        const char *s = p + 5, *e = p + n;
        while (s < e && (*s == ' ' || *s == '\t'))
            s++;
        while (e > s && isspace((unsigned char)e[-1]))
            e--;
        size_t k = (size_t)(e - s) < sizeof r->etag - 1 ? (size_t)(e - s) : sizeof r->etag - 1;
        memcpy(r->etag, s, k);
        r->etag[k] = '\0';
    }
    return n;
}

static int on_xfer(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                   curl_off_t ulnow)
{
    req_t *r = ud;
    if (r->w->progress && ulnow > 0)
        r->w->progress(r->w->pctx, r->w->st.bytes + (uint64_t)ulnow);
    return 0;
}

/* Run r until it succeeds (2xx, and no <Error> in a 200's body), fails for good, or has been
 * tried TRIES times. 0 or an error described in msg. */
static int perform(rmt_writer *w, req_t *r, fmt_msg *msg)
{
    const rmt_config *c = &w->c;
    CURL *e = w->easy;
    char errbuf[CURL_ERROR_SIZE];
    char what[900];
    int rc = 0;
    for (int tries = 1;; tries++) {
        curl_easy_reset(e);
        r->pos = 0;
        r->code = 0;
        r->rerr = 0;
        free(r->resp);
        r->resp = NULL;
        r->rlen = 0;
        r->etag[0] = '\0';
        errbuf[0] = '\0';
        struct curl_slist *h = NULL, *h2;
        char line[400];
        snprintf(line, sizeof line, "x-amz-content-sha256: %s", r->sha);
        h = curl_slist_append(h, line);
        if (h && r->ctype) {
            snprintf(line, sizeof line, "Content-Type: %s", r->ctype);
            if ((h2 = curl_slist_append(h, line)))
                h = h2;
        }
        if (h && c->token) {
            char *t = NULL;
            if (asprintf(&t, "x-amz-security-token: %s", c->token) >= 0) {
                if ((h2 = curl_slist_append(h, t)))
                    h = h2;
                free(t);
            }
        }
        if (!h)
            return fmt_fail(msg, ENOMEM, "out of memory");
        curl_easy_setopt(e, CURLOPT_URL, r->url);
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_resp);
        curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
        curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_head);
        curl_easy_setopt(e, CURLOPT_HEADERDATA, r);
        curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf);
        curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT, 5L);
        curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
        curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, 30L);
        curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, on_xfer);
        curl_easy_setopt(e, CURLOPT_XFERINFODATA, r);
        if (c->ca_bundle)
            curl_easy_setopt(e, CURLOPT_CAINFO, c->ca_bundle);
        if (c->key_id) {
            char sig[200];
            snprintf(sig, sizeof sig, "aws:amz:%s:s3", c->region);
            curl_easy_setopt(e, CURLOPT_AWS_SIGV4, sig);
            curl_easy_setopt(e, CURLOPT_USERNAME, c->key_id);
            curl_easy_setopt(e, CURLOPT_PASSWORD, c->secret);
        }
        if (strcmp(r->method, "PUT") == 0) {
            curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
            curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE, (curl_off_t)r->len);
            curl_easy_setopt(e, CURLOPT_READFUNCTION, on_read);
            curl_easy_setopt(e, CURLOPT_READDATA, r);
        } else if (strcmp(r->method, "POST") == 0) {
            /* in memory (a small XML body, or none): libcurl hashes what it signs */
            curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->len);
            curl_easy_setopt(e, CURLOPT_POSTFIELDS, r->data ? r->data : "");
        } else if (strcmp(r->method, "DELETE") == 0) {
            curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, "DELETE");
        }
        CURLcode res = curl_easy_perform(e);
        curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &r->code);
        curl_slist_free_all(h);
        int transient = 0;
        char scode[128] = "";
        if (res == CURLE_ABORTED_BY_CALLBACK && r->rerr) {
            rc = r->rerr;
            snprintf(what, sizeof what, "cannot read the file: %s", strerror(rc));
        } else if (res != CURLE_OK) {
            transient = rmt_curl_transient(res);
            rc = rmt_curl_errno(res);
            snprintf(what, sizeof what, "%s", errbuf[0] ? errbuf : curl_easy_strerror(res));
        } else {
            int err_body = r->code == 200 && r->resp && strstr(r->resp, "<Error>");
            if (r->code >= 200 && r->code < 300 && !err_body) {
                if (strcmp(r->method, "PUT") == 0)
                    w->st.bytes += r->len;
                return 0;
            }
            rmt_http_what(what, sizeof what, r->code, r->resp, scode);
            transient = rmt_http_transient(r->code) ||
                        (err_body && (strcmp(scode, "InternalError") == 0 ||
                                      strcmp(scode, "SlowDown") == 0));
            rc = rmt_http_errno(r->code);
        }
        if (transient && tries < TRIES) {
            double d = rmt_backoff(tries, &w->seed);
            struct timespec ts = {(time_t)d, (long)((d - (double)(time_t)d) * 1e9)};
            nanosleep(&ts, NULL);
            w->st.retries++;
            continue;
        }
        char tail[64] = "";
        if (transient)
            snprintf(tail, sizeof tail, " (after %d tries)", tries);
        return fmt_fail(msg, rc, "cannot %s %s %s %s (bucket %s): %s%s", r->verb, r->object,
                        strcmp(r->verb, "upload") == 0 ? "to" : "at", c->endpoint, c->bucket,
                        what, tail);
    }
}

static void req_free(req_t *r)
{
    free(r->url);
    free(r->resp);
    r->url = r->resp = NULL;
}

/* s with everything but unreserved characters percent-encoded (and '/' too unless keep_slash) */
static char *pct(const char *s, int keep_slash)
{
    char *o = malloc(3 * strlen(s) + 1), *p = o;
    if (!o)
        return NULL;
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (isalnum(ch) || strchr("-._~", ch) || (keep_slash && ch == '/'))
            *p++ = (char)ch;
        else
            p += sprintf(p, "%%%02X", ch);
    }
    *p = '\0';
    return o;
}

static int object_req(rmt_writer *w, req_t *r, const char *name, const char *query,
                      char **object, fmt_msg *msg)
{
    char *enc = pct(name, 1);
    int bad = !enc || asprintf(&r->url, "%s/%s%s%s", w->c.base, enc, query ? "?" : "",
                               query ? query : "") < 0;
    free(enc);
    if (bad) {
        r->url = NULL;
        return fmt_fail(msg, ENOMEM, "out of memory");
    }
    if (asprintf(object, "%s/%s", w->c.url, name) < 0) {
        *object = NULL;
        return fmt_fail(msg, ENOMEM, "out of memory");
    }
    r->object = *object;
    r->w = w;
    r->fd = -1;
    return 0;
}

/* ---- the operations ---- */

static int put_range(rmt_writer *w, const char *name, const char *query, int fd, uint64_t off,
                     uint64_t len, const void *data, char *etag, size_t etag_len, fmt_msg *msg)
{
    req_t r = {.method = "PUT", .verb = "upload"};
    char *object = NULL;
    int rc = object_req(w, &r, name, query, &object, msg);
    if (!rc) {
        r.fd = fd;
        r.off = off;
        r.len = len;
        r.data = data;
        if (data)
            rmt_sha256_hex(data, (size_t)len, r.sha);
        else if ((rc = sha_file(fd, off, len, r.sha)))
            fmt_fail(msg, rc, "cannot read the file of %s: %s", object, strerror(rc));
    }
    if (!rc)
        rc = perform(w, &r, msg);
    if (!rc && etag)
        snprintf(etag, etag_len, "%s", r.etag);
    req_free(&r);
    free(object);
    return rc;
}

static int post(rmt_writer *w, const char *name, const char *query, const char *body,
                const char *verb, char **resp, fmt_msg *msg)
{
    req_t r = {.method = "POST", .verb = verb};
    char *object = NULL;
    int rc = object_req(w, &r, name, query, &object, msg);
    if (!rc) {
        r.data = body;
        r.len = body ? strlen(body) : 0;
        r.ctype = body ? "application/xml" : NULL;
        rmt_sha256_hex(body ? body : "", (size_t)r.len, r.sha);
        rc = perform(w, &r, msg);
    }
    if (!rc && resp) {
        *resp = r.resp;
        r.resp = NULL;
    }
    req_free(&r);
    free(object);
    return rc;
}

static int delete_query(rmt_writer *w, const char *name, const char *query, fmt_msg *msg)
{
    req_t r = {.method = "DELETE", .verb = "delete"};
    char *object = NULL;
    int rc = object_req(w, &r, name, query, &object, msg);
    if (!rc) {
        rmt_sha256_hex("", 0, r.sha);
        rc = perform(w, &r, msg);
        if (rc == ENOENT)
            rc = 0;
    }
    req_free(&r);
    free(object);
    return rc;
}

int rmt_delete(rmt_writer *w, const char *name, fmt_msg *msg)
{
    return delete_query(w, name, NULL, msg);
}

int rmt_put_data(rmt_writer *w, const char *name, const void *data, size_t len, fmt_msg *msg)
{
    int rc = put_range(w, name, NULL, -1, 0, len, data ? data : "", NULL, 0, msg);
    if (!rc)
        w->st.objects++;
    return rc;
}

/* a file in parts: CreateMultipartUpload, UploadPart each, CompleteMultipartUpload; aborted
 * when anything fails */
static int put_multipart(rmt_writer *w, const char *name, int fd, uint64_t size, fmt_msg *msg)
{
    uint64_t psize = w->part_size;
    if ((size + psize - 1) / psize > MAX_PARTS)
        psize = (size + MAX_PARTS - 1) / MAX_PARTS;
    uint64_t nparts = (size + psize - 1) / psize;
    char *resp = NULL, id[1024], *qid = NULL, *xml = NULL, *query = NULL;
    size_t xlen = 0;
    int rc = post(w, name, "uploads=", NULL, "upload", &resp, msg);
    if (rc)
        return rc;
    rmt_xml_field(resp, "UploadId", id, sizeof id);
    free(resp);
    if (!id[0])
        return fmt_fail(msg, EIO, "cannot upload %s/%s to %s (bucket %s): the server named no "
                        "UploadId", w->c.url, name, w->c.endpoint, w->c.bucket);
    qid = pct(id, 0);
    FILE *x = qid ? open_memstream(&xml, &xlen) : NULL;
    if (!x) {
        free(qid);
        return fmt_fail(msg, ENOMEM, "out of memory");
    }
    fputs("<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">", x);
    for (uint64_t k = 0; k < nparts && !rc; k++) {
        uint64_t off = k * psize, len = size - off < psize ? size - off : psize;
        char etag[256];
        free(query);
        if (asprintf(&query, "partNumber=%" PRIu64 "&uploadId=%s", k + 1, qid) < 0) {
            query = NULL;
            rc = fmt_fail(msg, ENOMEM, "out of memory");
            break;
        }
        rc = put_range(w, name, query, fd, off, len, NULL, etag, sizeof etag, msg);
        if (!rc && !etag[0])
            rc = fmt_fail(msg, EIO, "cannot upload %s/%s to %s (bucket %s): part %" PRIu64
                          " has no ETag", w->c.url, name, w->c.endpoint, w->c.bucket, k + 1);
        if (!rc) {
            w->st.parts++;
            fprintf(x, "<Part><PartNumber>%" PRIu64 "</PartNumber><ETag>", k + 1);
            for (const char *s = etag; *s; s++)
                fputs(*s == '"' ? "&quot;" : *s == '&' ? "&amp;" : *s == '<' ? "&lt;"
                      : (char[2]){*s, 0}, x);
            fputs("</ETag></Part>", x);
        }
    }
    fputs("</CompleteMultipartUpload>", x);
    fclose(x);
    free(query);
    query = NULL;
    if (!rc && asprintf(&query, "uploadId=%s", qid) < 0) {
        query = NULL;
        rc = fmt_fail(msg, ENOMEM, "out of memory");
    }
    if (!rc)
        rc = post(w, name, query, xml, "upload", NULL, msg);
    if (rc) {
        /* abort, so that no part is kept (and billed); best effort */
        char *aq = NULL;
        fmt_msg ignore;
        if (asprintf(&aq, "uploadId=%s", qid) >= 0)
            delete_query(w, name, aq, &ignore);
        free(aq);
    }
    free(query);
    free(xml);
    free(qid);
    return rc;
}

int rmt_put_file(rmt_writer *w, const char *name, const char *path, fmt_msg *msg)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return fmt_fail(msg, errno, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) != 0)
        rc = fmt_fail(msg, errno, "cannot stat %s: %s", path, strerror(errno));
    else if ((uint64_t)st.st_size > w->part_size)
        rc = put_multipart(w, name, fd, (uint64_t)st.st_size, msg);
    else
        rc = put_range(w, name, NULL, fd, 0, (uint64_t)st.st_size, NULL, NULL, 0, msg);
    close(fd);
    if (!rc)
        w->st.objects++;
    return rc;
}

void rmt_objects_free(rmt_object *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free(v[i].name);
    free(v);
}

/* &amp; &lt; &gt; &quot; &apos; decoded in place */
static void xml_unescape(char *s)
{
    static const char *const ent[5] = {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"};
    static const char ch[5] = {'&', '<', '>', '"', '\''};
    char *o = s;
    while (*s) {
        int k = 0;
        for (; k < 5; k++)
            if (strncmp(s, ent[k], strlen(ent[k])) == 0)
                break;
        if (k < 5) {
            *o++ = ch[k];
            s += strlen(ent[k]);
        } else {
            *o++ = *s++;
        }
    }
    *o = '\0';
}

int rmt_list(rmt_writer *w, const char *sub, rmt_object **out, size_t *nout, fmt_msg *msg)
{
    *out = NULL;
    *nout = 0;
    const char *pre = w->c.prefix;
    char *keypre = NULL, *token = NULL, *epre = NULL, *object = NULL;
    rmt_object *v = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    if (asprintf(&keypre, "%s%s%s", pre, *pre ? "/" : "", sub) < 0 ||
        asprintf(&object, "%s/%s", w->c.url, sub) < 0 || !(epre = pct(keypre, 0))) {
        rc = fmt_fail(msg, ENOMEM, "out of memory");
        goto out;
    }
    size_t skip = *pre ? strlen(pre) + 1 : 0;
    for (;;) {
        req_t r = {.method = "GET", .verb = "list", .object = object, .w = w, .fd = -1};
        char *etok = token ? pct(token, 0) : NULL;
        /* query parameters in the order SigV4 sorts them */
        int bad = (token && !etok) ||
                  asprintf(&r.url, "%s?%s%s%slist-type=2&prefix=%s", w->bucket_url,
                           token ? "continuation-token=" : "", token ? etok : "",
                           token ? "&" : "", epre) < 0;
        free(etok);
        if (bad) {
            r.url = NULL;
            rc = fmt_fail(msg, ENOMEM, "out of memory");
            goto out;
        }
        rmt_sha256_hex("", 0, r.sha);
        rc = perform(w, &r, msg);
        if (rc) {
            req_free(&r);
            goto out;
        }
        const char *p = r.resp ? r.resp : "";
        while ((p = strstr(p, "<Contents>"))) {
            const char *end = strstr(p, "</Contents>");
            if (!end)
                break;
            size_t len = (size_t)(end - p);
            char *one = strndup(p, len), key[2048], size[64];
            p = end;
            if (!one) {
                rc = ENOMEM;
                break;
            }
            rmt_xml_field(one, "Key", key, sizeof key);
            rmt_xml_field(one, "Size", size, sizeof size);
            free(one);
            xml_unescape(key);
            if (strlen(key) < skip || strncmp(key, keypre, strlen(keypre)) != 0)
                continue;
            if (n == cap) {
                size_t nc = cap ? 2 * cap : 64;
                rmt_object *nv = realloc(v, nc * sizeof *v);
                if (!nv) {
                    rc = ENOMEM;
                    break;
                }
                v = nv;
                cap = nc;
            }
            v[n].name = strdup(key + skip);
            v[n].size = strtoull(size, NULL, 10);
            if (!v[n].name) {
                rc = ENOMEM;
                break;
            }
            n++;
        }
        char trunc[16], next[1024];
        rmt_xml_field(r.resp, "IsTruncated", trunc, sizeof trunc);
        rmt_xml_field(r.resp, "NextContinuationToken", next, sizeof next);
        req_free(&r);
        if (rc) {
            fmt_fail(msg, rc, "out of memory");
            goto out;
        }
        free(token);
        token = NULL;
        if (strcmp(trunc, "true") != 0 || !next[0])
            break;
        xml_unescape(next);
        if (!(token = strdup(next))) {
            rc = fmt_fail(msg, ENOMEM, "out of memory");
            goto out;
        }
    }
    *out = v;
    *nout = n;
    v = NULL;
out:
    rmt_objects_free(v, n);
    free(token);
    free(keypre);
    free(epre);
    free(object);
    return rc;
}
