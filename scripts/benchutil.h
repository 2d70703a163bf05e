/* benchutil.h - what the C benchmark tools of scripts/ (codec-bench.c, decode-bench.c) share: the
 * monotonic clock they time by, and the comparison that sorts their reps for the median. */
#ifndef SCRIPTS_BENCHUTIL_H
#define SCRIPTS_BENCHUTIL_H

#include <time.h>

/* Seconds on the monotonic clock. */
static inline double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* qsort's comparison of doubles, ascending. */
static inline int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#endif
