/* fmt.c - error names, messages, hashing and small file and buffer helpers shared by the formats
 * library. */
#include "fmt.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

const char *fmt_strerror(int rc)
{
#define NAME(code, value, name)                                                                    \
    case value:                                                                                    \
        return name;
    switch (rc) {
    case 0:
        return "success";
    FMT_ERRORS(NAME)
    SHR_ERRORS(NAME)
    SHC_ERRORS(NAME)
    SHC_MERGE_ERRORS(NAME)
    default:
        return rc > 0 ? strerror(rc) : "unknown error";     /* glibc: static strings */
    }
#undef NAME
}

int fmt_fail(fmt_msg *msg, int rc, const char *fmt, ...)
{
    if (msg) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg->text, sizeof msg->text, fmt, ap);
        va_end(ap);
    }
    return rc;
}

const char *fmt_reason(const fmt_msg *msg, int rc)
{
    if (msg && msg->text[0])
        return msg->text;
    return fmt_strerror(rc);
}

uint64_t fmt_hash64(const void *data, size_t len)
{
    return XXH3_64bits(data, len);
}

static const char *type_name(mode_t m)
{
    return S_ISDIR(m) ? "a folder" : S_ISFIFO(m) ? "a FIFO" : S_ISCHR(m) ? "a character device"
         : S_ISBLK(m) ? "a block device" : S_ISSOCK(m) ? "a socket" : "an unknown type";
}

int fmt_open_file(const char *path, int *fd, fmt_msg *msg)
{
    *fd = -1;
    int f = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (f < 0) {
        int e = errno;
        return fmt_fail(msg, e, "%s", strerror(e));
    }
    struct stat st;
    int rc = 0;
    if (fstat(f, &st) != 0)
        rc = errno, fmt_fail(msg, rc, "%s", strerror(rc));
    else if (!S_ISREG(st.st_mode))
        rc = fmt_fail(msg, S_ISDIR(st.st_mode) ? EISDIR : FMT_EUNSUPPORTED,
                      "not a regular file (%s)", type_name(st.st_mode));
    else if (fcntl(f, F_SETFL, fcntl(f, F_GETFL) & ~O_NONBLOCK) != 0)
        rc = errno, fmt_fail(msg, rc, "%s", strerror(rc));
    if (rc) {
        close(f);
        return rc;
    }
    *fd = f;
    return 0;
}

FILE *fmt_fopen_file(const char *path, int *rc, fmt_msg *msg)
{
    int fd;
    if ((*rc = fmt_open_file(path, &fd, msg)) != 0)
        return NULL;
    FILE *f = fdopen(fd, "r");
    if (!f) {
        *rc = errno;
        fmt_fail(msg, *rc, "%s", strerror(*rc));
        close(fd);
    }
    return f;
}

int fmt_read_file_into(const char *path, uint64_t max_bytes, uint8_t **buf, size_t *cap,
                       size_t *len)
{
    *len = 0;
    /* a FIFO or device named like an image must not hang the caller: refused before a byte is
     * read */
    int fd, rc = fmt_open_file(path, &fd, NULL);
    if (rc)
        return rc;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        rc = errno;
        goto leave;
    }
    if ((uint64_t)st.st_size > max_bytes || (uint64_t)st.st_size > SIZE_MAX - 1) {
        rc = FMT_ETOOBIG;
        goto leave;
    }
    size_t n = (size_t)st.st_size, got = 0;
    if (*cap < n + 1) {
        /* a fresh buffer, not realloc: nothing of the old one needs copying */
        uint8_t *p = malloc(n + 1);
        if (!p) {
            rc = ENOMEM;
            goto leave;
        }
        free(*buf);
        *buf = p;
        *cap = n + 1;
    }
    while (got < n) {
        ssize_t r = read(fd, *buf + got, n - got);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            rc = errno;
            goto leave;
        }
        if (r == 0)
            break; /* file shrank while we read: hand back what is there */
        got += (size_t)r;
    }
    *len = got;
leave:
    close(fd);
    return rc;
}

int fmt_read_file(const char *path, size_t max_bytes, uint8_t **buf, size_t *len)
{
    uint8_t *p = NULL;
    size_t cap = 0;
    int rc = fmt_read_file_into(path, max_bytes, &p, &cap, len);
    if (rc) {
        free(p);
        p = NULL;
        *len = 0;
    }
    *buf = p;
    return rc;
}

int fmt_fsync_parent(const char *path)
{
    char *copy = strdup(path);
    if (!copy)
        return ENOMEM;
    int rc = 0;
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        rc = errno;
    } else {
        if (fsync(fd) != 0 && errno != EINVAL)
            rc = errno;
        close(fd);
    }
    free(copy);
    return rc;
}

int fmt_write_file_synced(const char *path, const void *data, size_t len)
{
    int rc = 0;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return errno;
    const uint8_t *p = data;
    size_t done = 0;
    while (done < len) {
        ssize_t w = write(fd, p + done, len - done);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            rc = errno;
            break;
        }
        done += (size_t)w;
    }
    if (!rc && fsync(fd) != 0)
        rc = errno;
    if (close(fd) != 0 && !rc)
        rc = errno;
    if (rc)
        unlink(path);
    return rc;
}

int fmt_write_file_atomic(const char *path, const void *data, size_t len)
{
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 5);
    if (!tmp)
        return ENOMEM;
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp", 5);
    int rc = fmt_write_file_synced(tmp, data, len);
    if (!rc && rename(tmp, path) != 0) {
        rc = errno;
        unlink(tmp);
    }
    if (!rc)
        rc = fmt_fsync_parent(path);
    free(tmp);
    return rc;
}

int fmt_grow(void **buf, size_t *cap, size_t used, size_t more)
{
    size_t need;
    if (__builtin_add_overflow(used, more, &need))
        return ENOMEM;
    if (need <= *cap)
        return 0;
    size_t ncap = *cap ? *cap : 256;
    while (ncap < need) {
        if (__builtin_mul_overflow(ncap, (size_t)2, &ncap))
            return ENOMEM;
    }
    void *p = realloc(*buf, ncap);
    if (!p)
        return ENOMEM;
    *buf = p;
    *cap = ncap;
    return 0;
}

char *fmt_path_join(const char *dir, const char *name, const char *suffix)
{
    char *p;
    return asprintf(&p, "%s/%s%s", dir, name, suffix) < 0 ? NULL : p;
}

int fmt_pread_full(int fd, void *buf, size_t len, uint64_t off, size_t *got)
{
    size_t done = 0;
    int rc = 0;
    while (done < len) {
        ssize_t r = pread(fd, (uint8_t *)buf + done, len - done, (off_t)(off + done));
        if (r < 0) {
            if (errno == EINTR)
                continue;
            rc = errno;
            break;
        }
        if (r == 0)
            break;
        done += (size_t)r;
    }
    *got = done;
    return rc;
}

int fmt_pread_exact(int fd, void *buf, size_t len, uint64_t off)
{
    size_t got;
    int rc = fmt_pread_full(fd, buf, len, off, &got);
    return rc ? rc : got < len ? FMT_ETRUNC : 0;
}

int fmt_open_regular(const char *path, int *fd, struct stat *st, fmt_msg *msg)
{
    int rc = fmt_open_file(path, fd, msg);
    if (rc)
        return rc == FMT_EUNSUPPORTED ? EINVAL : rc;
    if (fstat(*fd, st) != 0)
        rc = errno;
    else if (st->st_size == 0)
        rc = fmt_fail(msg, FMT_ETRUNC, "empty file");
    if (rc) {
        close(*fd);
        *fd = -1;
        return rc;
    }
    return 0;
}

int fmt_hash_file(const char *path, uint64_t skip_off, uint64_t skip_len, uint64_t *pinned,
                  uint64_t *whole, uint64_t *size)
{
    enum { chunk = 1 << 20 };
    int fd, rc = fmt_open_file(path, &fd, NULL);
    if (rc)
        return rc;
    uint8_t *buf = malloc(chunk);
    XXH3_state_t *sp = pinned ? XXH3_createState() : NULL, *sw = whole ? XXH3_createState() : NULL;
    struct stat st;
    if (!buf || (pinned && !sp) || (whole && !sw)) {
        rc = ENOMEM;
        goto leave;
    }
    if (fstat(fd, &st) != 0) {
        rc = errno;
        goto leave;
    }
    if (sp)
        XXH3_64bits_reset(sp);
    if (sw)
        XXH3_64bits_reset(sw);
    uint64_t end = (uint64_t)st.st_size, skip_end = skip_off + skip_len;
    if (skip_len == 0 || skip_end < skip_off)
        skip_off = skip_end = end;
    for (uint64_t pos = 0; pos < end;) {
        if (!whole && pos >= skip_off && pos < skip_end) {
            pos = skip_end;
            continue;
        }
        uint64_t want = end - pos < chunk ? end - pos : chunk;
        /* stop at the edges of the skipped range so each chunk is wholly in or out of it */
        if (pos < skip_off && pos + want > skip_off)
            want = skip_off - pos;
        else if (pos >= skip_off && pos < skip_end && pos + want > skip_end)
            want = skip_end - pos;
        ssize_t n = pread(fd, buf, (size_t)want, (off_t)pos);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = errno;
            goto leave;
        }
        if (n == 0) {
            rc = FMT_ETRUNC;
            goto leave;
        }
        if (sw)
            XXH3_64bits_update(sw, buf, (size_t)n);
        if (sp && !(pos >= skip_off && pos < skip_end))
            XXH3_64bits_update(sp, buf, (size_t)n);
        pos += (uint64_t)n;
    }
    if (pinned)
        *pinned = XXH3_64bits_digest(sp);
    if (whole)
        *whole = XXH3_64bits_digest(sw);
    if (size)
        *size = end;
leave:
    XXH3_freeState(sp);
    XXH3_freeState(sw);
    free(buf);
    close(fd);
    return rc;
}

int fmt_utf8_len(const unsigned char *s, size_t avail)
{
    if (avail == 0)
        return 0;
    unsigned c = s[0];
    int n = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 :
            c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if ((size_t)n > avail)
        return 0;
    for (int i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    if ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] >= 0xA0) || (c == 0xF0 && s[1] < 0x90) ||
        (c == 0xF4 && s[1] >= 0x90))
        return 0;
    return n;
}
