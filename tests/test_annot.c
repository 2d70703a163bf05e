/* Annotations: the YOLO names file's duplicate finder (sorted, not pairwise), and the names and
 * label files it reads, refused when they hold NUL bytes or are no regular files. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "annot.h"
#include "testutil.h"

static int dup_of(char **names, size_t n, size_t *first, size_t *again)
{
    *first = *again = (size_t)-1;
    return shc_yolo_duplicate(names, n, first, again);
}

START_TEST(duplicates)
{
    size_t f, g;
    char *none[] = {"a", "b", "c", "ab", "A"};
    ck_assert_int_eq(dup_of(none, 5, &f, &g), 0);
    ck_assert_int_eq(dup_of(none, 0, &f, &g), 0);
    ck_assert_int_eq(dup_of(none, 1, &f, &g), 0);
    char *two[] = {"z", "z"};
    ck_assert_int_eq(dup_of(two, 2, &f, &g), 1);
    ck_assert_uint_eq(f, 0);
    ck_assert_uint_eq(g, 1);
    /* the first repeat in file order ("b" on 3), not the first name repeated ("x") */
    char *order[] = {"x", "b", "c", "b", "x", "c"};
    ck_assert_int_eq(dup_of(order, 6, &f, &g), 1);
    ck_assert_uint_eq(f, 1);
    ck_assert_uint_eq(g, 3);
    /* three of one name: the second against the first */
    char *three[] = {"m", "q", "q", "n", "q"};
    ck_assert_int_eq(dup_of(three, 5, &f, &g), 1);
    ck_assert_uint_eq(f, 1);
    ck_assert_uint_eq(g, 2);
    /* a later run whose first repeat comes earlier wins over an earlier name's later repeat */
    char *runs[] = {"a", "b", "b", "a"};
    ck_assert_int_eq(dup_of(runs, 4, &f, &g), 1);
    ck_assert_uint_eq(f, 1);
    ck_assert_uint_eq(g, 2);
}
END_TEST

/* 100,000 names, the one repeat at the end: what was quadratic */
START_TEST(many_names)
{
    enum { N = 100000 };
    char **v = malloc(N * sizeof *v);
    ck_assert_ptr_nonnull(v);
    for (size_t i = 0; i < N; i++)
        ck_assert_int_ge(asprintf(&v[i], "class-%zu", i % (N - 1)), 0);
    size_t f, g;
    ck_assert_int_eq(dup_of(v, N, &f, &g), 1);
    ck_assert_uint_eq(f, 0);
    ck_assert_uint_eq(g, N - 1);
    ck_assert_int_eq(dup_of(v, N - 1, &f, &g), 0);
    for (size_t i = 0; i < N; i++)
        free(v[i]);
    free(v);
}
END_TEST

static void put(const char *path, const char *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, len, f), len);
    fclose(f);
}

/* shc_annot_load over a names file; the message it gives. */
static int load_names(const char *dir, const char *names, fmt_msg *msg)
{
    char img[512], lab[512];
    snprintf(img, sizeof img, "%s/img", dir);
    snprintf(lab, sizeof lab, "%s/lab", dir);
    mkdir(img, 0755);
    mkdir(lab, 0755);
    shc_annot_opts o = {.images = img, .yolo = lab, .names = names};
    shc_annot a;
    fmt_inputs in;
    memset(msg, 0, sizeof *msg);
    int rc = shc_annot_load(&o, &a, &in, msg);
    if (rc == 0) {
        shc_annot_free(&a);
        fmt_inputs_free(&in);
    }
    return rc;
}

START_TEST(names_file)
{
    char dir[] = "/tmp/test_annot_XXXXXX", p[512], want[640];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    fmt_msg msg;
    snprintf(p, sizeof p, "%s/names.txt", dir);
    put(p, "a\nb\nc\nb\na\n", sizeof "a\nb\nc\nb\na\n" - 1);
    ck_assert_int_eq(load_names(dir, p, &msg), EINVAL);
    snprintf(want, sizeof want, "%s:4: class name 'b' also on line 2", p);
    ck_assert_str_eq(msg.text, want);
    put(p, "a\nb\r\nc\n\n", sizeof "a\nb\r\nc\n\n" - 1);
    ck_assert_msg(load_names(dir, p, &msg) == 0, "%s", msg.text);
    put(p, "a\n\nc\n", sizeof "a\n\nc\n" - 1);
    ck_assert_int_eq(load_names(dir, p, &msg), EINVAL);
    snprintf(want, sizeof want, "%s:2: empty class name", p);
    ck_assert_str_eq(msg.text, want);
    put(p, "a\nb\0c\n", sizeof "a\nb\0c\n" - 1);
    ck_assert_int_eq(load_names(dir, p, &msg), EINVAL);
    snprintf(want, sizeof want, "%s:2: NUL byte in the line (a damaged file, zero-filled by a "
             "crash?)", p);
    ck_assert_str_eq(msg.text, want);
    ck_assert_int_ne(load_names(dir, "/dev/zero", &msg), 0);
    ck_assert_str_eq(msg.text, "cannot read /dev/zero: not a regular file (a character device)");
    tu_rm_rf(dir);
}
END_TEST

int main(void)
{
    Suite *s = TU_SUITE("annot", "core", 0, duplicates, many_names, names_file);
    return tu_run(s);
}
