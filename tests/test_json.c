/* test_json.c - JSON string literals (formats/json.h): the escapes, UTF-8 passed through, bytes
 * that are not UTF-8 as surrogate escapes, and a Python json round trip of all of them. */
#include "json.h"
#include "progs.h"
#include "testutil.h"

/* What fmt_json_string writes for str, NUL-terminated in a malloc'd buffer. */
static char *json_of(const char *str)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fmt_json_string(f, str), 0);
    ck_assert_int_eq(fclose(f), 0);
    return buf;
}

static void expect(const char *str, const char *want)
{
    char *got = json_of(str);
    ck_assert_str_eq(got, want);
    free(got);
}

START_TEST(test_escapes)
{
    expect("", "\"\"");
    expect("plain name-1.jpg", "\"plain name-1.jpg\"");
    expect("say \"hi\"", "\"say \\\"hi\\\"\"");
    expect("C:\\dir\\", "\"C:\\\\dir\\\\\"");
    expect("a\nb\tc\rd", "\"a\\u000ab\\u0009c\\u000dd\"");
    expect("\x01\x1f\x7f/", "\"\\u0001\\u001f\\u007f/\"");
    expect(NULL, "null");
}
END_TEST

START_TEST(test_utf8)
{
    /* two-, three- and four-byte sequences pass through unchanged */
    expect("caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80",
           "\"caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80\"");
    /* bytes outside valid UTF-8: a lone continuation byte, a Latin-1 byte, a truncated sequence,
     * an overlong form, a surrogate encoded in UTF-8 */
    expect("\x80", "\"\\udc80\"");
    expect("caf\xe9.jpg", "\"caf\\udce9.jpg\"");
    expect("\xe6\x97", "\"\\udce6\\udc97\"");
    expect("\xc0\xaf", "\"\\udcc0\\udcaf\"");
    expect("\xed\xa0\x80", "\"\\udced\\udca0\\udc80\"");
}
END_TEST

/* fmt_json_bytes: the same escapes over a length, NUL bytes among them, a sequence cut by the
 * length escaped byte by byte */
START_TEST(test_bytes)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fmt_json_bytes(f, "a\0\"b\x7f\xc3\xa9\xe6\x97\xa5", 9), 0);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_str_eq(buf, "\"a\\u0000\\\"b\\u007f\xc3\xa9\\udce6\\udc97\"");
    free(buf);
}
END_TEST

/* Python's json module reads what was written back as the same string, and os.fsencode gives the
 * original bytes back (surrogateescape). */
START_TEST(test_python_round_trip)
{
    const char *python = tu_python_or_skip("numpy, torch, torchvision, PIL",
                                           "no python3 with numpy, torch, torchvision and Pillow: "
                                           "Python's json round trip");
    if (!python)
        return;
    static const char *const names[] = {
        "plain", "q\"uote", "back\\slash", "ctl\x01\x1f\x7f", "tab\tnl\n",
        "caf\xc3\xa9 \xf0\x9f\x98\x80", "latin\xe9", "\xff\xfe", "\xed\xa0\x80",
    };
    char path[700], cmd[2048];
    tu_path(path, sizeof path, "strings.json");
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputc('[', f);
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        if (i)
            fputs(", ", f);
        ck_assert_int_eq(fmt_json_string(f, names[i]), 0);
    }
    fputs("]\n", f);
    ck_assert_int_eq(fclose(f), 0);
    /* the expected bytes, as hex, on the command line */
    size_t used = (size_t)snprintf(cmd, sizeof cmd, "%s -c 'import json, os, sys; got = "
                                   "[os.fsencode(s).hex() for s in json.load(open(sys.argv[1]))]; "
                                   "sys.exit(0 if got == sys.argv[2:] else 1)' %s", python, path);
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        used += (size_t)snprintf(cmd + used, sizeof cmd - used, " ");
        for (const unsigned char *p = (const unsigned char *)names[i]; *p; p++)
            used += (size_t)snprintf(cmd + used, sizeof cmd - used, "%02x", *p);
    }
    ck_assert_uint_lt(used, sizeof cmd);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

START_TEST(test_write_error)
{
    FILE *f = fopen("/dev/full", "w");
    if (!f) {
        tu_skip("no /dev/full: the write-error check");
        return;
    }
    setvbuf(f, NULL, _IONBF, 0);
    ck_assert_int_eq(fmt_json_string(f, "x"), EOF);
    fclose(f);
}
END_TEST

static Suite *json_suite(void)
{
    TCase *tc;
    Suite *s = tu_suite("json", "json", 0, &tc);
    /* tu_python imports torch and torchvision: seconds on a loaded machine, past check's
     * default 4 s */
    tcase_set_timeout(tc, 60);
    tu_temp_fixtures(tc);
    TU_ADD_TESTS(tc, test_escapes, test_utf8, test_bytes, test_python_round_trip, test_write_error);
    return s;
}

int main(void)
{
    return tu_run_suite(json_suite());
}
