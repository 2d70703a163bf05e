/* curl_codes.h - what a libcurl result or an HTTP answer means for a transfer of remote/
 * (fetch.c, upload.c): whether it is worth another try, the errno it is reported as, the words
 * of its message, and how long to wait before the next try: the downloads and the uploads retry
 * alike. Also the two things both start with (defined in fetch.c): libcurl's global set-up, and
 * the seed of their retries' jitter. */
#ifndef RMT_CURL_CODES_H
#define RMT_CURL_CODES_H

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmt.h"

#define RMT_BACKOFF_BASE 0.1    /* seconds before the first retry (before jitter) */
#define RMT_BACKOFF_CAP 2.0     /* the longest wait between two attempts */

static inline int rmt_curl_transient(CURLcode r)
{
    switch (r) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_PARTIAL_FILE:
    case CURLE_GOT_NOTHING:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR:
        return 1;
    default:
        return 0;
    }
}

static inline int rmt_curl_errno(CURLcode r)
{
    switch (r) {
    case CURLE_COULDNT_CONNECT:
        return ECONNREFUSED;
    case CURLE_OPERATION_TIMEDOUT:
        return ETIMEDOUT;
    case CURLE_COULDNT_RESOLVE_HOST:
        return EHOSTUNREACH;
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_SSL_CACERT_BADFILE:
        return EPROTO;
    default:
        return EIO;
    }
}

/* an HTTP status worth another try: 5xx, 408, 429 */
static inline int rmt_http_transient(long code)
{
    return code >= 500 || code == 429 || code == 408;
}

static inline int rmt_http_errno(long code)
{
    return code == 401 || code == 403 ? EACCES : code == 404 ? ENOENT : EIO;
}

/* the text between <tag> and </tag> in an XML body, printable characters only */
static inline void rmt_xml_field(const char *body, const char *tag, char *out, size_t len)
{
    char open[40], close[40];
    out[0] = '\0';
    snprintf(open, sizeof open, "<%s>", tag);
    snprintf(close, sizeof close, "</%s>", tag);
    const char *s = body ? strstr(body, open) : NULL;
    const char *e = s ? strstr(s, close) : NULL;
    if (!s || !e)
        return;
    s += strlen(open);
    size_t k = 0;
    for (; s < e && k + 1 < len; s++)
        out[k++] = isprint((unsigned char)*s) ? *s : ' ';
    out[k] = '\0';
}

/* "HTTP CODE S3CODE: MESSAGE" into what, from the status and the error body (NULL: none); the
 * body's <Code> into scode */
static inline void rmt_http_what(char *what, size_t len, long code, const char *body,
                                 char scode[128])
{
    char smsg[400];
    rmt_xml_field(body, "Code", scode, 128);
    rmt_xml_field(body, "Message", smsg, sizeof smsg);
    snprintf(what, len, "HTTP %ld%s%s%s%s", code, scode[0] ? " " : "", scode, smsg[0] ? ": " : "",
             smsg);
}

/* libcurl's global set-up, done once for the process: 0, or EIO with msg saying why. */
int rmt_curl_init(fmt_msg *msg);

/* A seed for rmt_backoff's jitter: the process id and the monotonic clock, so that processes
 * (and transfers started at different times) draw differently. */
unsigned rmt_jitter_seed(void);

/* Seconds to wait after attempt number tries (1, 2, ...) failed: capped exponential backoff with
 * equal jitter (half fixed, half random), so that clients retrying together spread out. */
static inline double rmt_backoff(int tries, unsigned *seed)
{
    double d = RMT_BACKOFF_BASE;
    for (int k = 1; k < tries && d < RMT_BACKOFF_CAP; k++)
        d *= 2;
    if (d > RMT_BACKOFF_CAP)
        d = RMT_BACKOFF_CAP;
    return d / 2 + d / 2 * ((double)rand_r(seed) / RAND_MAX);
}

#endif
