/* util.c - CLI number parsing and formatting. */
#include "util.h"

#include "backend.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>
#include <xxhash.h>

int shc_parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    if (!s || !isdigit((unsigned char)*s))
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

int shc_parse_size(const char *s, uint64_t *out)
{
    static const struct {
        const char *suffix;
        uint64_t mul;
    } units[] = {
        {"", 1},          {"b", 1},
        {"k", 1000},      {"kb", 1000},    {"kib", 1ull << 10},
        {"m", 1000000},   {"mb", 1000000}, {"mib", 1ull << 20},
        {"g", 1000000000ull}, {"gb", 1000000000ull}, {"gib", 1ull << 30},
        {"t", 1000000000000ull}, {"tb", 1000000000000ull}, {"tib", 1ull << 40},
    };
    if (!s || !isdigit((unsigned char)*s))
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return -1;
    for (size_t i = 0; i < sizeof units / sizeof *units; i++) {
        if (strcasecmp(end, units[i].suffix) == 0) {
            if (v > UINT64_MAX / units[i].mul)
                return -1;
            *out = v * units[i].mul;
            return 0;
        }
    }
    return -1;
}

int shc_parse_wxh(const char *s, uint32_t *w, uint32_t *h)
{
    const char *x = s ? strpbrk(s, "xX") : NULL;
    if (s && !x) {
        /* one number: a square, as torchvision's crops and sizes take an int */
        uint64_t n;
        if (shc_parse_uint(s, 1, 65535, &n))
            return -1;
        *w = *h = (uint32_t)n;
        return 0;
    }
    if (!x)
        return -1;
    char buf[32];
    size_t n = (size_t)(x - s);
    if (n == 0 || n >= sizeof buf)
        return -1;
    memcpy(buf, s, n);
    buf[n] = '\0';
    uint64_t a, b;
    if (shc_parse_uint(buf, 1, 65535, &a) || shc_parse_uint(x + 1, 1, 65535, &b))
        return -1;
    *w = (uint32_t)a;
    *h = (uint32_t)b;
    return 0;
}

char *shc_human_size(uint64_t bytes, char *buf, size_t len)
{
    static const char *const u[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = (double)bytes;
    int i = 0;
    while (v >= 1024 && i < 5) {
        v /= 1024;
        i++;
    }
    if (i == 0)
        snprintf(buf, len, "%llu B", (unsigned long long)bytes);
    else
        snprintf(buf, len, "%.1f %s", v, u[i]);
    return buf;
}

int shc_grow_array(void *v, size_t *cap, size_t n, size_t elem, size_t first)
{
    if (n < *cap)
        return 0;
    size_t c = *cap ? *cap : first, bytes;
    if ((*cap && __builtin_mul_overflow(c, (size_t)2, &c)) ||
        __builtin_mul_overflow(c, elem, &bytes))
        return ENOMEM;
    void *p = realloc(*(void **)v, bytes);
    if (!p)
        return ENOMEM;
    *(void **)v = p;
    *cap = c;
    return 0;
}

void shc_hash_str(void *st, const char *s)
{
    XXH3_64bits_update(st, s, strlen(s) + 1);
}

void *shc_hash_begin(const char *tag)
{
    XXH3_state_t *st = XXH3_createState();
    if (st) {
        XXH3_64bits_reset(st);
        shc_hash_str(st, tag);
    }
    return st;
}

uint64_t shc_hash_end(void *st)
{
    uint64_t h = XXH3_64bits_digest(st);
    XXH3_freeState(st);
    return h;
}

double shc_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int shc_lock_dir(const char *dir, const char *name, int *fd, long *holder)
{
    *fd = -1;
    *holder = 0;
    char *path;
    if (asprintf(&path, "%s/%s", dir, name) < 0)
        return ENOMEM;
    int f = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    free(path);
    if (f < 0)
        return errno;
    if (flock(f, LOCK_EX | LOCK_NB) != 0) {
        int e = errno == EWOULDBLOCK ? EWOULDBLOCK : errno;
        char buf[32] = "";
        ssize_t n = pread(f, buf, sizeof buf - 1, 0);
        if (n > 0) {
            buf[n] = '\0';
            *holder = strtol(buf, NULL, 10);
        }
        close(f);
        return e;
    }
    char buf[32];
    int n = snprintf(buf, sizeof buf, "%ld\n", (long)getpid());
    if (ftruncate(f, 0) != 0 || pwrite(f, buf, (size_t)n, 0) != n) {
        int e = errno;
        close(f);
        return e;
    }
    *fd = f;
    return 0;
}

long shc_read_line(FILE *f, char *buf, size_t cap, int *nul)
{
    size_t n = 0;
    int c;
    *nul = 0;
    while ((c = getc_unlocked(f)) != EOF && c != '\n') {
        *nul |= c == '\0';
        if (n + 1 >= cap)
            return -2;
        buf[n++] = (char)c;
    }
    if (c == EOF && n == 0)
        return -1;
    buf[n] = '\0';
    return (long)n;
}

const char *const *shc_build_formats(void)
{
    return fmt_backend_names();
}
