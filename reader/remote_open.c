/* remote_open.c - datasets at URLs (shardread.h "Datasets at URLs"): the URL resolved to its
 * directory in the local cache (remote/remote.h), then opened as any local dataset. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "reader.h"

/* url's cached directory (malloc'd into *dir), or the error with shr_open_err set */
static int resolve(const char *url, const char *cache, char **dir)
{
    rmt_options ro;
    memset(&ro, 0, sizeof ro);
    ro.cache = cache;
    fmt_msg msg = {{0}};
    int rc = rmt_resolve(url, &ro, dir, NULL, &msg);
    if (rc)
        fmt_fail(&shr_open_err, rc, "cannot open dataset %s: %s", url, fmt_reason(&msg, rc));
    return rc;
}

int shr_remote_resolve(const char *url, const char *cache, char *dir, size_t len)
{
    shr_open_err.text[0] = '\0';
    if (!url || !dir)
        return fmt_fail(&shr_open_err, SHR_EINVAL, "no URL or buffer given");
    char *d;
    int rc = resolve(url, cache, &d);
    if (rc)
        return rc;
    if (strlen(d) >= len)
        rc = fmt_fail(&shr_open_err, ERANGE, "%s: the cached path %s is longer than %zu bytes",
                      url, d, len);
    else
        memcpy(dir, d, strlen(d) + 1);
    free(d);
    return rc;
}

int shr_dataset_open_url(shr_dataset **out, const char *url, shr_access access, unsigned flags)
{
    char *dir;
    int rc = resolve(url, NULL, &dir);
    if (rc)
        return rc;
    rc = shr_dataset_open_flags(out, dir, access, flags);
    free(dir);
    return rc;
}
