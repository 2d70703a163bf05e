/* Input listing (class folders, archives, list files) and the CLI's number parsing. */
#include <archive.h>
#include <archive_entry.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "inputs.h"
#include "util.h"
#include "testutil.h"

static char root[64];

static void touch(const char *rel)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    FILE *f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fputs("x", f);
    fclose(f);
}

static void mk(const char *rel)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    ck_assert_int_eq(mkdir(p, 0755), 0);
}

/* The inputs of the one source root/rel, which must read. */
static void inputs_under(const char *rel, fmt_inputs *in)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    char *srcs[] = {p};
    fmt_msg err = {{0}};
    ck_assert_int_eq(fmt_inputs_from_dirs(srcs, 1, in, &err), 0);
}

/* in has the n classes names, in that order. */
static void has_classes(const fmt_inputs *in, const char *const *names, size_t n)
{
    ck_assert_uint_eq(in->nclasses, n);
    for (size_t k = 0; k < n; k++)
        ck_assert_str_eq(in->classes[k], names[k]);
}

static void setup(void)
{
    snprintf(root, sizeof root, "/tmp/test_inputs_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(root));
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    ck_assert_int_eq(system(cmd), 0);
}

static const char *rel(const char *path)
{
    return path + strlen(root) + 1;
}

START_TEST(class_folders)
{
    mk("a");
    mk("a/zebra");
    mk("a/apple");
    mk("a/apple/sub");
    mk("a/.hidden");
    touch("a/zebra/2.JPG");
    touch("a/zebra/10.png");
    touch("a/apple/b.bmp");
    touch("a/apple/sub/a.jpeg");
    touch("a/apple/notes.txt");
    touch("a/apple/.DS_Store.jpg");
    touch("a/.hidden/x.jpg");
    touch("a/top.jpg");
    fmt_inputs in;
    inputs_under("a", &in);
    ck_assert_uint_eq(in.nclasses, 2);
    ck_assert_str_eq(in.classes[0], "apple");
    ck_assert_str_eq(in.classes[1], "zebra");
    ck_assert_uint_eq(in.n, 4);
    /* byte order of paths inside a class; the sub folder's file comes after b.bmp */
    ck_assert_str_eq(rel(in.items[0].path), "a/apple/b.bmp");
    ck_assert_int_eq(in.items[0].label, 0);
    ck_assert_str_eq(rel(in.items[1].path), "a/apple/sub/a.jpeg");
    ck_assert_str_eq(rel(in.items[2].path), "a/zebra/10.png");
    ck_assert_str_eq(rel(in.items[3].path), "a/zebra/2.JPG");
    ck_assert_int_eq(in.items[3].label, 1);
    ck_assert_uint_eq(in.ignored, 2); /* notes.txt, top.jpg */
    ck_assert_uint_eq(in.nskipped, 0);
    fmt_inputs_free(&in);
}
END_TEST

START_TEST(union_of_sources)
{
    mk("s1");
    mk("s2");
    mk("s1/b");
    mk("s2/a");
    mk("s2/b");
    touch("s1/b/1.jpg");
    touch("s2/b/1.jpg");
    touch("s2/a/1.jpg");
    char p1[256], p2[256];
    snprintf(p1, sizeof p1, "%s/s1", root);
    snprintf(p2, sizeof p2, "%s/s2", root);
    char *srcs[] = {p1, p2};
    fmt_inputs in;
    fmt_msg err = {{0}};
    ck_assert_int_eq(fmt_inputs_from_dirs(srcs, 2, &in, &err), 0);
    ck_assert_uint_eq(in.nclasses, 2);
    ck_assert_uint_eq(in.n, 3);
    ck_assert_str_eq(rel(in.items[0].path), "s2/a/1.jpg");
    ck_assert_str_eq(rel(in.items[1].path), "s1/b/1.jpg");
    ck_assert_str_eq(rel(in.items[2].path), "s2/b/1.jpg");
    ck_assert_int_eq(in.items[2].label, 1);
    fmt_inputs_free(&in);
}
END_TEST

START_TEST(symlink_loops_are_skipped)
{
    mk("d");
    mk("d/c");
    touch("d/c/ok.jpg");
    char p[256], t[256];
    snprintf(p, sizeof p, "%s/d/c/self.jpg", root);
    ck_assert_int_eq(symlink("self.jpg", p), 0); /* a -> a: ELOOP */
    snprintf(p, sizeof p, "%s/d/c/up", root);
    snprintf(t, sizeof t, "%s/d/c", root);
    ck_assert_int_eq(symlink(t, p), 0); /* directory cycle */
    fmt_inputs in;
    inputs_under("d", &in);
    ck_assert_uint_eq(in.n, 1);
    ck_assert_uint_eq(in.nskipped, 2);
    ck_assert_ptr_nonnull(strstr(in.skipped[0].path, "self.jpg"));
    ck_assert_ptr_nonnull(strstr(in.skipped[0].reason, "loop"));
    ck_assert_ptr_nonnull(strstr(in.skipped[1].path, "up"));
    ck_assert_ptr_nonnull(strstr(in.skipped[1].reason, "loop"));
    fmt_inputs_free(&in);
}
END_TEST

START_TEST(missing_source)
{
    char p[256];
    snprintf(p, sizeof p, "%s/nope", root);
    char *srcs[] = {p};
    fmt_inputs in;
    fmt_msg err = {{0}};
    ck_assert_int_eq(fmt_inputs_from_dirs(srcs, 1, &in, &err), ENOENT);
    ck_assert_ptr_nonnull(strstr(err.text, "nope"));
}
END_TEST

static int list_case(const char *text, fmt_inputs *in, fmt_msg *err)
{
    char lp[256];
    snprintf(lp, sizeof lp, "%s/list.txt", root);
    FILE *f = fopen(lp, "w");
    fputs(text, f);
    fclose(f);
    char *srcs[] = {root};
    return fmt_inputs_from_list(lp, srcs, 1, in, err);
}

START_TEST(list_file)
{
    mk("x");
    touch("x/one.jpg");
    touch("x/two words.png");
    fmt_inputs in;
    fmt_msg err = {{0}};
    ck_assert_int_eq(list_case("# comment\n\nx/one.jpg 3\n  x/two words.png\t0  \r\n", &in, &err),
                     0);
    ck_assert_uint_eq(in.n, 2);
    ck_assert_str_eq(rel(in.items[0].path), "x/one.jpg");
    ck_assert_int_eq(in.items[0].label, 3);
    ck_assert_str_eq(rel(in.items[1].path), "x/two words.png");
    ck_assert_int_eq(in.items[1].label, 0);
    ck_assert_uint_eq(in.nclasses, 4);
    ck_assert_str_eq(in.classes[3], "3");
    fmt_inputs_free(&in);

    ck_assert_int_eq(list_case("x/one.jpg 1\nx/missing.jpg 2\n", &in, &err), ENOENT);
    ck_assert_ptr_nonnull(strstr(err.text, ":2:"));
    ck_assert_ptr_nonnull(strstr(err.text, "missing.jpg"));
    ck_assert_int_eq(list_case("x/one.jpg cat\n", &in, &err), EINVAL);
    ck_assert_ptr_nonnull(strstr(err.text, "bad label 'cat'"));
    ck_assert_int_eq(list_case("x/one.jpg -1\n", &in, &err), EINVAL);
    ck_assert_int_eq(list_case("x/one.jpg 99999999999\n", &in, &err), EINVAL);
    ck_assert_int_eq(list_case("x/one.jpg 1.5\n", &in, &err), EINVAL);
    ck_assert_int_eq(list_case("x/one.jpg\n", &in, &err), EINVAL);
    ck_assert_ptr_nonnull(strstr(err.text, "path label"));
}
END_TEST

/* A tar at root/name holding the given members ("name" files of one byte; "name/" folders; a
 * "@" prefix: a symbolic link), in the order given. */
static void mktar(const char *name, const char *const *members, size_t n)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", root, name);
    struct archive *a = archive_write_new();
    ck_assert_ptr_nonnull(a);
    ck_assert_int_eq(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
    ck_assert_int_eq(archive_write_open_filename(a, p), ARCHIVE_OK);
    for (size_t i = 0; i < n; i++) {
        const char *m = members[i];
        size_t len = strlen(m);
        struct archive_entry *e = archive_entry_new();
        int link = m[0] == '@';
        archive_entry_set_pathname(e, m + link);
        archive_entry_set_perm(e, 0644);
        if (link) {
            archive_entry_set_filetype(e, AE_IFLNK);
            archive_entry_set_symlink(e, "/etc/passwd");
        } else {
            archive_entry_set_filetype(e, m[len - 1] == '/' ? AE_IFDIR : AE_IFREG);
            archive_entry_set_size(e, m[len - 1] == '/' ? 0 : 1);
        }
        ck_assert_int_eq(archive_write_header(a, e), ARCHIVE_OK);
        if (!link && m[len - 1] != '/')
            ck_assert_int_eq(archive_write_data(a, "x", 1), 1);
        archive_entry_free(e);
    }
    ck_assert_int_eq(archive_write_close(a), ARCHIVE_OK);
    archive_write_free(a);
}

/* The inputs of the source t.tar, made of MEMBERS by mktar. */
static void tar_inputs(const char *const *members, size_t n, fmt_inputs *in)
{
    mktar("t.tar", members, n);
    char src[256];
    snprintf(src, sizeof src, "%s/t.tar", root);
    char *srcs[] = {src};
    fmt_msg err = {{0}};
    ck_assert_int_eq(fmt_inputs_from_dirs(srcs, 1, in, &err), 0);
}

/* An archive SRC is the tree it extracts into: folder-walk order (components compared one by
 * one), hidden names left out, the later of two equal paths kept, unsafe names and links
 * skipped, an empty folder still a class. */
START_TEST(archive_as_tree)
{
    static const char *const members[] = {
        "b/2.jpg", "a.jpg", "./a/x.jpg", "a/x/1.jpg", "a/0.jpg", ".hidden/z.jpg", "a/.h.jpg",
        "../up.jpg", "a/0.jpg", "@a/link.jpg", "empty/", "b/notes.txt"};
    fmt_inputs in;
    fmt_msg err = {{0}};
    tar_inputs(members, sizeof members / sizeof *members, &in);
    has_classes(&in, (const char *const[]){"a", "b", "empty"}, 3);
    ck_assert_uint_eq(in.n, 4);
    ck_assert_str_eq(rel(in.items[0].path), "t.tar!a/0.jpg");
    ck_assert_uint_eq(in.items[0].seq, 8);      /* the later a/0.jpg */
    ck_assert_str_eq(rel(in.items[1].path), "t.tar!a/x/1.jpg");
    ck_assert_str_eq(rel(in.items[2].path), "t.tar!a/x.jpg");
    ck_assert_str_eq(rel(in.items[3].path), "t.tar!b/2.jpg");
    ck_assert_int_eq(in.items[3].label, 1);
    ck_assert_uint_eq(in.items[3].archive, 1);
    ck_assert_uint_eq(in.narchives, 1);
    ck_assert_uint_eq(in.nskipped, 2);          /* ../up.jpg and the link */
    ck_assert_ptr_nonnull(strstr(in.skipped[0].path, "t.tar!../up.jpg"));
    ck_assert_ptr_nonnull(strstr(in.skipped[0].reason, "unsafe"));
    ck_assert_ptr_nonnull(strstr(in.skipped[1].reason, "link"));
    ck_assert_uint_eq(in.ignored, 2);           /* a.jpg at the top, b/notes.txt */
    fmt_inputs_free(&in);

    /* a list file names members the same way */
    ck_assert_int_eq(list_case("t.tar!b/2.jpg 4\nt.tar!./a/x.jpg 0\n", &in, &err), 0);
    ck_assert_uint_eq(in.n, 2);
    ck_assert_str_eq(rel(in.items[0].path), "t.tar!b/2.jpg");
    ck_assert_str_eq(rel(in.items[1].path), "t.tar!a/x.jpg");
    ck_assert_int_eq(in.items[0].label, 4);
    fmt_inputs_free(&in);
    ck_assert_int_eq(list_case("t.tar!b/3.jpg 4\n", &in, &err), ENOENT);
    ck_assert_ptr_nonnull(strstr(err.text, ":1: no member b/3.jpg"));
    ck_assert_int_eq(list_case("t.tar!empty 4\n", &in, &err), EINVAL);
}
END_TEST

/* Member names as extraction writes them: "." components and repeated '/' resolved ("c/./2.jpg",
 * "./c//3.jpg"), so "d/1.jpg" and "d//1.jpg" are one file (the later member, as tar overwrites);
 * a folder holding only hidden files, with no entry of its own, is a class as in the extracted
 * tree; a name longer than 4096 bytes is a reject naming the member, the "./" folder entry
 * nothing at all. */
START_TEST(archive_names)
{
    char *longname = malloc(5010);
    ck_assert_ptr_nonnull(longname);
    memcpy(longname, "e/", 2);
    memset(longname + 2, 'x', 5000);
    strcpy(longname + 5002, ".jpg");
    const char *const members[] = {"./", "h/.DS_Store", "c/./2.jpg", "./c//3.jpg", "d/1.jpg",
                                   "d//1.jpg", longname, "c/./"};
    fmt_inputs in;
    fmt_msg err = {{0}};
    tar_inputs(members, sizeof members / sizeof *members, &in);
    free(longname);
    has_classes(&in, (const char *const[]){"c", "d", "h"}, 3);
    ck_assert_uint_eq(in.n, 3);
    ck_assert_str_eq(rel(in.items[0].path), "t.tar!c/2.jpg");
    ck_assert_str_eq(rel(in.items[1].path), "t.tar!c/3.jpg");
    ck_assert_str_eq(rel(in.items[2].path), "t.tar!d/1.jpg");
    ck_assert_uint_eq(in.items[2].seq, 5);      /* d//1.jpg, the later one */
    ck_assert_int_eq(in.items[2].label, 1);
    ck_assert_uint_eq(in.nskipped, 1);
    ck_assert_ptr_nonnull(strstr(in.skipped[0].path, "t.tar!(member 6: e/xxxx"));
    ck_assert_str_eq(in.skipped[0].reason, "member name longer than 4096 bytes");
    fmt_inputs_free(&in);

    /* a list file's member names resolve the same way */
    ck_assert_int_eq(list_case("t.tar!c/2.jpg 0\nt.tar!./d/./1.jpg 1\nt.tar!c//3.jpg 2\n", &in,
                               &err), 0);
    ck_assert_uint_eq(in.n, 3);
    ck_assert_str_eq(rel(in.items[1].path), "t.tar!d/1.jpg");
    ck_assert_uint_eq(in.items[1].seq, 5);
    ck_assert_str_eq(rel(in.items[2].path), "t.tar!c/3.jpg");
    fmt_inputs_free(&in);
}
END_TEST

/* List lines are bounded: a longer one (a stream without newlines) is an error naming the line. */
START_TEST(list_line_bound)
{
    mk("x");
    touch("x/one.jpg");
    size_t n = FMT_LIST_LINE_MAX + 10;
    char *text = malloc(n + 32);
    ck_assert_ptr_nonnull(text);
    strcpy(text, "x/one.jpg 1\n");
    memset(text + 12, 'a', n);
    text[12 + n] = '\0';
    fmt_inputs in;
    fmt_msg err = {{0}};
    ck_assert_int_eq(list_case(text, &in, &err), EINVAL);
    ck_assert_ptr_nonnull(strstr(err.text, ":2: line longer than 65536 bytes"));
    free(text);
}
END_TEST

START_TEST(parse_numbers)
{
    uint64_t v;
    uint32_t w, h;
    ck_assert_int_eq(shc_parse_size("1GiB", &v), 0);
    ck_assert_uint_eq(v, 1ull << 30);
    ck_assert_int_eq(shc_parse_size("512M", &v), 0);
    ck_assert_uint_eq(v, 512000000ull);
    ck_assert_int_eq(shc_parse_size("4096", &v), 0);
    ck_assert_uint_eq(v, 4096);
    ck_assert_int_eq(shc_parse_size("3kib", &v), 0);
    ck_assert_uint_eq(v, 3072);
    ck_assert_int_eq(shc_parse_size("99999999999TiB", &v), -1);
    ck_assert_int_eq(shc_parse_size("1 GiB", &v), -1);
    ck_assert_int_eq(shc_parse_size("-1", &v), -1);
    ck_assert_int_eq(shc_parse_size("GiB", &v), -1);
    ck_assert_int_eq(shc_parse_wxh("224x160", &w, &h), 0);
    ck_assert_uint_eq(w, 224);
    ck_assert_uint_eq(h, 160);
    ck_assert_int_eq(shc_parse_wxh("64", &w, &h), 0);      /* an int: a square */
    ck_assert(w == 64 && h == 64);
    ck_assert_int_eq(shc_parse_wxh("x64", &w, &h), -1);
    ck_assert_int_eq(shc_parse_wxh("64x", &w, &h), -1);
    ck_assert_int_eq(shc_parse_wxh("0", &w, &h), -1);
    ck_assert_int_eq(shc_parse_wxh("0x5", &w, &h), -1);
    ck_assert_int_eq(shc_parse_wxh("5x70000", &w, &h), -1);
    ck_assert(w == 64 && h == 64);      /* a refusal leaves the answers as they were */
    /* the public list of formats is the storage layer's, raw first */
    const char *const *formats = shc_build_formats(), *const *backends = fmt_backend_names();
    ck_assert_str_eq(formats[0], "raw");
    size_t k = 0;
    for (; formats[k]; k++) {
        ck_assert_ptr_nonnull(backends[k]);
        ck_assert_str_eq(formats[k], backends[k]);
        ck_assert_ptr_nonnull(fmt_backend_find(formats[k]));
    }
    ck_assert_ptr_null(backends[k]);
    ck_assert_uint_ge(k, 6);            /* raw, hdf5, lmdb, png0, bmp, jpeg */
    ck_assert_int_eq(shc_parse_uint("12", 1, 10, &v), -1);
    ck_assert_int_eq(shc_parse_uint("10", 1, 10, &v), 0);
    ck_assert_int_eq(shc_parse_uint("+3", 0, 10, &v), -1);
}
END_TEST

int main(void)
{
    TCase *tc;
    Suite *s = tu_suite("inputs", "core", 0, &tc);
    tcase_add_checked_fixture(tc, setup, teardown);
    TU_ADD_TESTS(tc, class_folders, union_of_sources, symlink_loops_are_skipped, missing_source,
                 list_file, archive_as_tree, archive_names, list_line_bound, parse_numbers);
    return tu_run(s);
}
