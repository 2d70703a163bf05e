/* curl_codes.h - what a libcurl result means for a transfer of remote/ (fetch.c, upload.c):
 * whether it is worth another try, and the errno it is reported as. */
#ifndef RMT_CURL_CODES_H
#define RMT_CURL_CODES_H

#include <curl/curl.h>
#include <errno.h>

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

#endif
