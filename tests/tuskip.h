/* tuskip.h - a check whose reference tool is missing says SKIPPED, and its suite exits 77.
 *
 * check has no skip status: a test that returns early passes green, so a machine without Pillow,
 * torchvision, h5dump or mdb_stat would pass the differential tests without running them. A test
 * calls tu_skip("why") instead and returns; the count lives in a page shared with check's forked
 * test processes, and tu_run_suite() makes a run with no failure but some skips exit 77, which
 * scripts/run-tests.sh reports as skipped, or as a failure under SHARDC_NO_SKIP=1 (.ci/run sets it:
 * CI cannot go green without the references). Conditions that are no reference (no GPU, a kernel
 * that refuses io_uring) are not skips: those suites test what the machine has and say so.
 * The suites are made and run here too: tu_suite, TU_ADD_TESTS, tu_run_suite. */
#ifndef TUSKIP_H
#define TUSKIP_H

#include <check.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

static int *tu_skips;                   /* shared with the forked tests; made by tu_run_suite */

static __attribute__((unused, format(printf, 1, 0))) void tu_vskip(const char *fmt, va_list ap)
{
    fprintf(stderr, "%s: SKIPPED: ", program_invocation_short_name);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    if (tu_skips)
        __atomic_fetch_add(tu_skips, 1, __ATOMIC_SEQ_CST);
}

/* Say SKIPPED and why (printf-style), and count it. Call it from a test, then return. */
static __attribute__((unused, format(printf, 1, 2))) void tu_skip(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tu_vskip(fmt, ap);
    va_end(ap);
}

/* A suite `name` of one test case tcname, as most suites are, with a timeout of timeout seconds
 * (0: check's default); *tc gets the case, for its fixtures and tests. */
static __attribute__((unused)) Suite *tu_suite(const char *name, const char *tcname,
                                               double timeout, TCase **tc)
{
    Suite *s = suite_create(name);
    *tc = tcase_create(tcname);
    if (timeout > 0)
        tcase_set_timeout(*tc, timeout);
    suite_add_tcase(s, *tc);
    return s;
}

static __attribute__((unused)) void tu_add_tests(TCase *tc, const TTest *const *t)
{
    for (; *t; t++)
        tcase_add_test(tc, *t);
}

static __attribute__((unused)) void tu_add_loop_tests(TCase *tc, int start, int end,
                                                      const TTest *const *t)
{
    for (; *t; t++)
        tcase_add_loop_test(tc, *t, start, end);
}

/* tu_suite of the tests given (TU_ADD_TESTS), for a suite of plain tests alone. */
static __attribute__((unused)) Suite *tu_suite_of(const char *name, const char *tcname,
                                                  double timeout, const TTest *const *t)
{
    TCase *tc;
    Suite *s = tu_suite(name, tcname, timeout, &tc);
    tu_add_tests(tc, t);
    return s;
}

/* tcase_add_test for each test given, in their order; tcase_add_loop_test(tc, test, start, end)
 * for each; TU_SUITE: a suite `name` of the one case tcname with those tests. */
#define TU_SUITE(name, tcname, timeout, ...)                                                      \
    tu_suite_of((name), (tcname), (timeout), (const TTest *const[]){__VA_ARGS__, NULL})
#define TU_ADD_TESTS(tc, ...) tu_add_tests((tc), (const TTest *const[]){__VA_ARGS__, NULL})
#define TU_ADD_LOOP_TESTS(tc, start, end, ...)                                                    \
    tu_add_loop_tests((tc), (start), (end), (const TTest *const[]){__VA_ARGS__, NULL})

/* Run every test of s (s is freed): EXIT_FAILURE if any failed, else 77 if any skipped, else 0. */
static __attribute__((unused)) int tu_run_suite(Suite *s)
{
    if (!tu_skips) {
        void *m = mmap(NULL, sizeof *tu_skips, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                       -1, 0);
        tu_skips = m == MAP_FAILED ? NULL : m;
    }
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    if (failed)
        return EXIT_FAILURE;
    if (!tu_skips) {
        fprintf(stderr, "%s: cannot map the skip counter\n", program_invocation_short_name);
        return EXIT_FAILURE;
    }
    if (*tu_skips) {
        fprintf(stderr, "%s: %d check(s) SKIPPED for want of their reference tool\n",
                program_invocation_short_name, *tu_skips);
        return 77;
    }
    return EXIT_SUCCESS;
}

/* The reference python: the first of $SHARDC_PYTHON (make test sets it), $PYTHON,
 * /usr/bin/python3 and python3 that imports every module of imports ("numpy, torch, PIL"), or
 * NULL (the caller says tu_skip). The first python3 on PATH may be a separate installation
 * without the modules, so the others are tried too. */
static __attribute__((unused)) const char *tu_python(const char *imports)
{
    static char found[512];
    const char *env = getenv("SHARDC_PYTHON"), *env2 = getenv("PYTHON");
    const char *cands[] = {env && *env ? env : NULL, env2 && *env2 ? env2 : NULL,
                           "/usr/bin/python3", "python3"};
    for (size_t i = 0; i < sizeof cands / sizeof *cands; i++) {
        if (!cands[i])
            continue;
        char cmd[1200];
        snprintf(cmd, sizeof cmd, "'%s' -c 'import %s' >/dev/null 2>&1", cands[i], imports);
        if (system(cmd) == 0) {
            snprintf(found, sizeof found, "%s", cands[i]);
            return found;
        }
    }
    return NULL;
}

/* tu_python(imports), or NULL once tu_skip has said why (printf-style): the test then returns. */
static __attribute__((unused, format(printf, 2, 3))) const char *tu_python_or_skip(
    const char *imports, const char *fmt, ...)
{
    const char *py = tu_python(imports);
    if (!py) {
        va_list ap;
        va_start(ap, fmt);
        tu_vskip(fmt, ap);
        va_end(ap);
    }
    return py;
}

#endif
