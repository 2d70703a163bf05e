/* options.c - the command line shared by every command: usage errors and number, size and order
 * parsing. */
#include "bench.h"

/* The message, then the usage's first line and where the rest is. */
int usage_error(const char *usage, const char *fmt, const char *arg)
{
    fprintf(stderr, "shardbench: ");
    fprintf(stderr, fmt, arg);
    const char *eol = strchr(usage, '\n');
    int len = eol ? (int)(eol - usage) : (int)strlen(usage);
    fprintf(stderr, "\n%.*s\n(--help for the options)\n", len, usage);
    return SB_EXIT_USAGE;
}

int wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return 1;
    return 0;
}

/* Unsigned decimal in [min, max], overflow-checked. 0 on success, -1 on error. */
int parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    if (!s || *s < '0' || *s > '9')
        return -1;
    uint64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return -1;
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    if (v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

/* "WxH", both 1..65535. */
int parse_wxh(const char *s, uint32_t *w, uint32_t *h)
{
    const char *x = strchr(s, 'x');
    if (!x)
        x = strchr(s, 'X');
    if (!x || x == s || !x[1])
        return -1;
    char wbuf[16];
    size_t wl = (size_t)(x - s);
    if (wl >= sizeof wbuf)
        return -1;
    memcpy(wbuf, s, wl);
    wbuf[wl] = '\0';
    uint64_t a, b;
    if (parse_uint(wbuf, 1, 65535, &a) || parse_uint(x + 1, 1, 65535, &b))
        return -1;
    *w = (uint32_t)a;
    *h = (uint32_t)b;
    return 0;
}

const char *order_name(shr_order o)
{
    return o == SHR_ORDER_RANDOM ? "random" : o == SHR_ORDER_QUASI ? "quasi" : "seq";
}

const char *access_name(shr_access a)
{
    return a == SHR_ACCESS_PREAD ? "pread" : a == SHR_ACCESS_DIRECT ? "direct" : "mmap";
}

/* --order for every command */
int parse_order(const char *s, shr_order *o)
{
    if (strcmp(s, "seq") == 0 || strcmp(s, "sequential") == 0)
        *o = SHR_ORDER_SEQUENTIAL;
    else if (strcmp(s, "random") == 0)
        *o = SHR_ORDER_RANDOM;
    else if (strcmp(s, "quasi") == 0)
        *o = SHR_ORDER_QUASI;
    else
        return -1;
    return 0;
}

/* --on-error for read and train */
int parse_on_error(const char *s, shr_on_error *o)
{
    if (strcmp(s, "fail") == 0)
        *o = SHR_ON_ERROR_FAIL;
    else if (strcmp(s, "skip") == 0)
        *o = SHR_ON_ERROR_SKIP;
    else if (strcmp(s, "substitute") == 0)
        *o = SHR_ON_ERROR_SUBSTITUTE;
    else
        return -1;
    return 0;
}

/* Samples a reader replaced or skipped are reported on stderr, never hidden, whatever the output
 * format: the counts and the latest reason, which names the file and the sample. */
void report_recovery(const char *dir, shr_reader *r, uint32_t epochs)
{
    shr_recovery rec = shr_get_recovery(r);
    if (rec.replaced || rec.skipped)
        fprintf(stderr, "shardbench: %s: %" PRIu64 " sample(s) replaced, %" PRIu64 " skipped over "
                "%u epoch(s) (latest: %s)\n", dir, rec.replaced, rec.skipped, epochs,
                shr_last_error(r));
}

/* A decimal number in [min, max]. 0 on success, -1 on error. */
int parse_double(const char *s, double min, double max, double *out)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v) || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}
