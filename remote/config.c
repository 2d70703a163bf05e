/* config.c - a dataset URL and the settings the AWS tools read: endpoint, region, credentials,
 * CA bundle (remote.h, docs/REMOTE.md). */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "remote.h"

int rmt_is_url(const char *path)
{
    return path && (strncmp(path, "s3://", 5) == 0 || strncasecmp(path, "http://", 7) == 0 ||
                    strncasecmp(path, "https://", 8) == 0);
}

static const char *env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

static int truthy(const char *v)
{
    return v && (strcmp(v, "1") == 0 || strcasecmp(v, "true") == 0 || strcasecmp(v, "yes") == 0);
}

/* key's value in section sect of the INI file at path (malloc'd), or NULL */
static char *ini_get(const char *path, const char *sect, const char *key)
{
    FILE *f = path ? fopen(path, "r") : NULL;
    if (!f)
        return NULL;
    char line[4096], *out = NULL;
    int in = 0;
    while (!out && fgets(line, sizeof line, f)) {
        char *s = line;
        while (isspace((unsigned char)*s))
            s++;
        size_t n = strlen(s);
        while (n && isspace((unsigned char)s[n - 1]))
            s[--n] = '\0';
        if (!*s || *s == '#' || *s == ';')
            continue;
        if (*s == '[') {
            char *e = strchr(s, ']');
            if (!e)
                continue;
            *e = '\0';
            s++;
            while (isspace((unsigned char)*s))
                s++;
            in = strcmp(s, sect) == 0;
            continue;
        }
        char *eq = strchr(s, '=');
        if (!in || !eq || isspace((unsigned char)*s))
            continue;
        char *k = s, *ke = eq;
        while (ke > k && isspace((unsigned char)ke[-1]))
            ke--;
        *ke = '\0';
        char *v = eq + 1;
        while (isspace((unsigned char)*v))
            v++;
        if (strcmp(k, key) == 0)
            out = strdup(v);
    }
    fclose(f);
    return out;
}

/* ~/.aws/NAME, or the file the variable var names */
static char *aws_file(const char *var, const char *name)
{
    const char *p = env(var), *home = env("HOME");
    char *out = NULL;
    if (p)
        return strdup(p);
    if (home && asprintf(&out, "%s/.aws/%s", home, name) < 0)
        out = NULL;
    return out;
}

/* the profile's key from the config file ([profile NAME], [default]) */
static char *config_get(const char *cfg, const char *profile, const char *key)
{
    char sect[300];
    if (strcmp(profile, "default") == 0)
        return ini_get(cfg, "default", key);
    snprintf(sect, sizeof sect, "profile %s", profile);
    char *v = ini_get(cfg, sect, key);
    return v ? v : ini_get(cfg, profile, key);
}

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

/* base with any user:password@ removed, for messages */
static char *redact(const char *base)
{
    char *out = strdup(base);
    if (!out)
        return NULL;
    char *p = strstr(out, "://");
    if (!p)
        return out;
    p += 3;
    char *slash = strchr(p, '/'), *at = strchr(p, '@');
    if (at && (!slash || at < slash))
        memmove(p, at + 1, strlen(at + 1) + 1);
    return out;
}

void rmt_config_free(rmt_config *c)
{
    if (!c)
        return;
    free(c->url);
    free(c->bucket);
    free(c->prefix);
    free(c->base);
    free(c->endpoint);
    free(c->region);
    free(c->key_id);
    if (c->secret) {
        memset(c->secret, 0, strlen(c->secret));
        free(c->secret);
    }
    free(c->token);
    free(c->ca_bundle);
    memset(c, 0, sizeof *c);
}

/* unreserved characters and '/' kept, the rest percent-encoded (S3's key encoding) */
static int key_ok(const char *s)
{
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && !strchr("-._~/", *s))
            return 0;
    return 1;
}

int rmt_config_load(rmt_config *c, const char *url, int anonymous, fmt_msg *msg)
{
    memset(c, 0, sizeof *c);
    if (!rmt_is_url(url))
        return fmt_fail(msg, FMT_EINVAL, "%s: not an s3:// or http(s):// URL", url);
    c->url = strdup(url);
    if (!c->url)
        return ENOMEM;
    size_t n = strlen(c->url);
    while (n > 0 && c->url[n - 1] == '/')
        c->url[--n] = '\0';
    c->ca_bundle = dup_or_null(env("AWS_CA_BUNDLE"));
    int rc = ENOMEM;
    if (strncmp(url, "s3://", 5) != 0) {
        if (strchr(c->url, '?') || strchr(c->url, '#')) {
            rc = fmt_fail(msg, FMT_EINVAL, "%s: a dataset URL names a folder: no query or "
                          "fragment", url);
            goto fail;
        }
        c->base = strdup(c->url);
        c->endpoint = redact(c->url);
        if (!c->base || !c->endpoint)
            goto fail;
        return 0;
    }
    c->s3 = 1;
    const char *b = c->url + 5, *slash = strchr(b, '/');
    size_t blen = slash ? (size_t)(slash - b) : strlen(b);
    c->bucket = strndup(b, blen);
    c->prefix = strdup(slash ? slash + 1 : "");
    if (!c->bucket || !c->prefix)
        goto fail;
    if (!blen || !key_ok(c->bucket) || strchr(c->bucket, '/') || !key_ok(c->prefix) ||
        strstr(c->prefix, "//")) {
        rc = fmt_fail(msg, FMT_EINVAL, "%s: expected s3://BUCKET/PREFIX (letters, digits and "
                      "-._~ in the bucket and prefix)", url);
        goto fail;
    }
    const char *profile = env("AWS_PROFILE");
    if (!profile)
        profile = "default";
    char *cfg = aws_file("AWS_CONFIG_FILE", "config");
    char *creds = aws_file("AWS_SHARED_CREDENTIALS_FILE", "credentials");
    const char *reg = env("AWS_REGION");
    if (!reg)
        reg = env("AWS_DEFAULT_REGION");
    c->region = reg ? strdup(reg) : config_get(cfg, profile, "region");
    if (!c->region)
        c->region = strdup("us-east-1");
    const char *ep = env("AWS_ENDPOINT_URL_S3");
    if (!ep)
        ep = env("AWS_ENDPOINT_URL");
    char *epv = ep ? strdup(ep) : config_get(cfg, profile, "endpoint_url");
    if (!truthy(env("AWS_NO_SIGN_REQUEST")) && !anonymous) {
        const char *id = env("AWS_ACCESS_KEY_ID"), *sec = env("AWS_SECRET_ACCESS_KEY");
        if (id && sec) {
            c->key_id = strdup(id);
            c->secret = strdup(sec);
            c->token = dup_or_null(env("AWS_SESSION_TOKEN"));
        } else {
            /* the shared credentials file, then the config file */
            const char *files[2] = {creds, cfg};
            for (int i = 0; i < 2 && !c->key_id; i++) {
                char *k = i ? config_get(cfg, profile, "aws_access_key_id")
                            : ini_get(files[i], profile, "aws_access_key_id");
                char *s = i ? config_get(cfg, profile, "aws_secret_access_key")
                            : ini_get(files[i], profile, "aws_secret_access_key");
                if (k && s) {
                    c->key_id = k;
                    c->secret = s;
                    c->token = i ? config_get(cfg, profile, "aws_session_token")
                                 : ini_get(files[i], profile, "aws_session_token");
                } else {
                    free(k);
                    free(s);
                }
            }
        }
        if (!c->key_id) {
            rc = fmt_fail(msg, FMT_EINVAL, "%s: no AWS credentials: set AWS_ACCESS_KEY_ID and "
                          "AWS_SECRET_ACCESS_KEY, or AWS_PROFILE with ~/.aws/credentials, or "
                          "AWS_NO_SIGN_REQUEST=1 for a public bucket", url);
            free(cfg);
            free(creds);
            free(epv);
            goto fail;
        }
    }
    free(cfg);
    free(creds);
    if (epv) {
        size_t e = strlen(epv);
        while (e > 0 && epv[e - 1] == '/')
            epv[--e] = '\0';
        /* a custom endpoint: path-style addressing, ENDPOINT/BUCKET/KEY */
        if (asprintf(&c->base, "%s/%s%s%s", epv, c->bucket, *c->prefix ? "/" : "", c->prefix) < 0)
            c->base = NULL;
        c->endpoint = redact(epv);
        free(epv);
    } else {
        if (asprintf(&c->base, "https://%s.s3.%s.amazonaws.com%s%s", c->bucket, c->region,
                     *c->prefix ? "/" : "", c->prefix) < 0)
            c->base = NULL;
        if (asprintf(&c->endpoint, "https://%s.s3.%s.amazonaws.com", c->bucket, c->region) < 0)
            c->endpoint = NULL;
    }
    if (!c->region || !c->base || !c->endpoint || (c->key_id && !c->secret))
        goto fail;
    return 0;
fail:
    rmt_config_free(c);
    return rc;
}
