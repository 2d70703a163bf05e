/* test_bench_json.c - shardbench's JSON strings (sb_json_string, programs/shardbench/report.c)
 * are the bytes the storage layer's writer gives (fmt_json_string, which shardc's --json uses),
 * for text, escapes, well-formed and malformed UTF-8 of every length: the two programs' reports
 * quote a path alike. */
#include "bench.h"
#include "json.h"
#include "testutil.h"

#include <check.h>

/* What write(f, s) puts in a memory stream. */
static char *quoted(int (*write)(FILE *, const char *), const char *s, int *rc)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_ptr_nonnull(f);
    *rc = write(f, s);
    ck_assert_int_eq(fclose(f), 0);
    return buf;
}

static void same(const char *s)
{
    int ra, rb;
    char *a = quoted(sb_json_string, s, &ra), *b = quoted(fmt_json_string, s, &rb);
    ck_assert_int_eq(ra, 0);
    ck_assert_int_eq(rb, 0);
    ck_assert_str_eq(a, b);
    free(a);
    free(b);
}

START_TEST(test_json_string_as_the_writer)
{
    int rc;
    char *q = quoted(sb_json_string, "a/\"b\"\\c\n\x7f" "\xc3\xa9\xff", &rc);
    ck_assert_str_eq(q, "\"a/\\\"b\\\"\\\\c\\u000a\\u007f\xc3\xa9\\udcff\"");
    free(q);
    q = quoted(sb_json_string, NULL, &rc);
    ck_assert_str_eq(q, "null");
    free(q);
    same(NULL);
    same("");
    same("/data/imagenet/train");
    static const char *const tricky[] = {
        "\xc2\xa0", "\xc1\xbf", "\xe0\x9f\xbf", "\xe0\xa0\x80", "\xed\x9f\xbf", "\xed\xa0\x80",
        "\xef\xbf\xbf", "\xf0\x8f\xbf\xbf", "\xf0\x90\x80\x80", "\xf4\x8f\xbf\xbf",
        "\xf4\x90\x80\x80", "\xf5\x80\x80\x80", "\xe2\x82", "\xe2\x82\xac", "\xe2\x82x", "\x80",
        "\xc3", "\x01\x1f\x20\x7e", "tab\there",
    };
    for (size_t i = 0; i < sizeof tricky / sizeof *tricky; i++)
        same(tricky[i]);
    /* every one- and two-byte string, and random longer ones */
    char s[8];
    for (unsigned a = 1; a < 256; a++) {
        s[0] = (char)a;
        s[1] = '\0';
        same(s);
        for (unsigned b = 1; b < 256; b++) {
            s[1] = (char)b;
            s[2] = '\0';
            same(s);
        }
    }
    uint64_t x = 0x9e3779b97f4a7c15u;
    for (int i = 0; i < 20000; i++) {
        for (int j = 0; j < 7; j++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            s[j] = (char)(x % 255 + 1);
        }
        s[7] = '\0';
        same(s);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("bench_json");
    TCase *tc = tcase_create("bench_json");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_json_string_as_the_writer);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
