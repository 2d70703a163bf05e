/* test_arcfeed.c - an archive's members are only ever delivered from the file the listing read,
 * and a compressed stream's checksum is always compared (arcwalk.h, feed.h).
 *
 * The listing records the archive's identity; a file replaced (new inode) or rewritten in place
 * (same inode, size and mtime, members reordered) before a feed walk gives every position an
 * error, never another member's bytes, and the feed reports the change. A tar.gz whose gzip
 * CRC-32 no longer matches is FMT_EHASH for a walk (found when the stream ends: this small one
 * is decoded whole when it is opened). */
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

#include "arcwalk.h"
#include "feed.h"
#include "inputs.h"
#include "testutil.h"

enum { NMEM = 6 };

/* The member names, and each one's bytes: its name repeated, 100 + 37 k bytes. */
static const char *const names[NMEM] = {"a/0.jpg", "a/1.jpg", "a/2.jpg",
                                        "b/3.jpg", "b/4.jpg", "b/5.jpg"};

static size_t member_bytes(int k, char *buf)
{
    size_t n = 100 + 37 * (size_t)k;
    for (size_t i = 0; i < n; i++)
        buf[i] = names[k][i % strlen(names[k])];
    return n;
}

/* A tar (gz: gzip-compressed) at path holding the members in order[] (indexes into names). */
static void write_tar(const char *path, const int *order, int gz)
{
    struct archive *a = archive_write_new();
    ck_assert_ptr_nonnull(a);
    ck_assert_int_eq(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
    if (gz)
        ck_assert_int_eq(archive_write_add_filter_gzip(a), ARCHIVE_OK);
    ck_assert_int_eq(archive_write_open_filename(a, path), ARCHIVE_OK);
    char buf[512];
    for (int i = 0; i < NMEM; i++) {
        size_t n = member_bytes(order[i], buf);
        struct archive_entry *e = archive_entry_new();
        archive_entry_set_pathname(e, names[order[i]]);
        archive_entry_set_perm(e, 0644);
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_size(e, (la_int64_t)n);
        archive_entry_set_mtime(e, 1000000, 0);
        ck_assert_int_eq(archive_write_header(a, e), ARCHIVE_OK);
        ck_assert_int_eq(archive_write_data(a, buf, n), (la_ssize_t)n);
        archive_entry_free(e);
    }
    ck_assert_int_eq(archive_write_close(a), ARCHIVE_OK);
    archive_write_free(a);
}

static const int reversed[NMEM] = {5, 4, 3, 2, 1, 0};
static const int forward[NMEM] = {0, 1, 2, 3, 4, 5};

/* Overwrite path in place with the bytes of from (same length), then give it back its mtime:
 * the same inode, size and modification time, other contents. */
static void rewrite_in_place(const char *path, const char *from)
{
    struct stat before, src;
    ck_assert_int_eq(stat(path, &before), 0);
    ck_assert_int_eq(stat(from, &src), 0);
    ck_assert_int_eq(src.st_size, before.st_size);
    char *buf = malloc((size_t)src.st_size);
    ck_assert_ptr_nonnull(buf);
    int in = open(from, O_RDONLY), out = open(path, O_WRONLY);
    ck_assert(in >= 0 && out >= 0);
    ck_assert_int_eq(read(in, buf, (size_t)src.st_size), src.st_size);
    ck_assert_int_eq(pwrite(out, buf, (size_t)src.st_size, 0), src.st_size);
    struct timespec ts[2] = {before.st_atim, before.st_mtim};
    ck_assert_int_eq(futimens(out, ts), 0);
    close(in);
    close(out);
    free(buf);
    struct stat after;
    ck_assert_int_eq(stat(path, &after), 0);
    ck_assert(after.st_ino == before.st_ino && after.st_size == before.st_size &&
              after.st_mtim.tv_sec == before.st_mtim.tv_sec &&
              after.st_mtim.tv_nsec == before.st_mtim.tv_nsec);
}

/* List path, let change() alter it, then feed every member with a budget of one byte (one walk
 * per member, as members are in reverse order): no position gets bytes, each gets `code`, and
 * so does shc_feed_check, naming the archive. */
static void expect_feed_fails(const char *path, void (*change)(const char *), int code,
                              const char *what)
{
    fmt_inputs in;
    fmt_msg msg = {{0}};
    char *srcs[] = {(char *)path};
    ck_assert_int_eq(fmt_inputs_from_dirs(srcs, 1, &in, &msg), 0);
    ck_assert_uint_eq(in.n, NMEM);
    change(path);
    shc_feed *f;
    ck_assert_int_eq(shc_feed_start(&in, 0, in.n, 1 << 20, 1, &f), 0);
    for (size_t i = 0; i < in.n; i++) {
        uint8_t *data;
        size_t len;
        fmt_msg why = {{0}};
        int rc = shc_feed_take(f, i, &data, &len, &why);
        ck_assert_msg(rc == code, "position %zu: rc %d (%s), want %d", i, rc, why.text, code);
        ck_assert_ptr_null(data);
        ck_assert_ptr_nonnull(strstr(why.text, path));
        ck_assert_ptr_nonnull(strstr(why.text, what));
    }
    fmt_msg why = {{0}};
    ck_assert_int_eq(shc_feed_check(f, 1, &why), code);
    ck_assert_ptr_nonnull(strstr(why.text, path));
    shc_feed_free(f);
    fmt_inputs_free(&in);
}

static char other[700];

static void replace_by_rename(const char *path)
{
    ck_assert_int_eq(rename(other, path), 0);
}

static void reorder_in_place(const char *path)
{
    rewrite_in_place(path, other);
}

/* t.tar (members reversed) listed, then changed by change() with new.tar (members forward): the
 * feed fails ESTALE, saying want. */
static void expect_changed_tar_fails(void (*change)(const char *), const char *want)
{
    char path[700];
    tu_path(path, sizeof path, "t.tar");
    tu_path(other, sizeof other, "new.tar");
    write_tar(path, reversed, 0);
    write_tar(other, forward, 0);
    expect_feed_fails(path, change, ESTALE, want);
}

/* A new file under the archive's name: its inode (and mtime) differ from the listed one's. */
START_TEST(replaced_archive_is_refused)
{
    expect_changed_tar_fails(replace_by_rename, "changed since it was listed");
}
END_TEST

/* The same inode, size and mtime, members in another order: the member met at a listed ordinal
 * has another name, so the walk stops instead of handing its bytes to the listed position. */
START_TEST(reordered_in_place_is_refused)
{
    expect_changed_tar_fails(reorder_in_place, "listed as");
}
END_TEST

static int count_visit(void *ctx, const shc_arc_member *m, shc_arc_reader *r)
{
    (void)m;
    (void)r;
    ++*(int *)ctx;
    return 0;
}

/* gzip's CRC-32 flipped: every member decodes, the check at the end of the stream fails. */
static void flip_gzip_crc(const char *path)
{
    struct stat sb;
    ck_assert_int_eq(stat(path, &sb), 0);
    int fd = open(path, O_RDWR);
    ck_assert(fd >= 0);
    uint8_t b;
    ck_assert_int_eq(pread(fd, &b, 1, sb.st_size - 8), 1);
    b ^= 0x01;
    ck_assert_int_eq(pwrite(fd, &b, 1, sb.st_size - 8), 1);
    struct timespec ts[2] = {sb.st_atim, sb.st_mtim};
    ck_assert_int_eq(futimens(fd, ts), 0);
    close(fd);
}

START_TEST(gzip_crc_is_checked)
{
    char path[700];
    tu_path(path, sizeof path, "t.tar.gz");
    write_tar(path, reversed, 1);
    int n = 0;
    fmt_msg msg = {{0}};
    ck_assert_int_eq(shc_arc_walk(path, 1, count_visit, &n, &msg), 0);
    ck_assert_int_eq(n, NMEM);
    /* listed intact, damaged before the build reads it: the feed says so */
    expect_feed_fails(path, flip_gzip_crc, FMT_EHASH, "gzip data damaged");
    n = 0;
    ck_assert_int_eq(shc_arc_walk(path, 1, count_visit, &n, &msg), FMT_EHASH);
    ck_assert_ptr_nonnull(strstr(msg.text, path));
    ck_assert_ptr_nonnull(strstr(msg.text, "incorrect data check"));
    /* the listing refuses it */
    fmt_inputs in;
    char *srcs[] = {path};
    ck_assert_int_eq(fmt_inputs_from_dirs(srcs, 1, &in, &msg), FMT_EHASH);
    ck_assert_ptr_nonnull(strstr(msg.text, "no member of it can be trusted"));
}
END_TEST

/* The intact archive, listed and fed with the same budget: every member's own bytes (the
 * checks above fail for the change, not for the multi-walk feed). */
START_TEST(unchanged_archive_feeds)
{
    char path[700];
    tu_path(path, sizeof path, "t.tar.gz");
    write_tar(path, reversed, 1);
    fmt_inputs in;
    fmt_msg msg = {{0}};
    char *srcs[] = {path};
    ck_assert_int_eq(fmt_inputs_from_dirs(srcs, 1, &in, &msg), 0);
    shc_feed *f;
    ck_assert_int_eq(shc_feed_start(&in, 0, in.n, 1 << 20, 1, &f), 0);
    for (size_t i = 0; i < in.n; i++) {
        uint8_t *data;
        size_t len;
        char want[512];
        ck_assert_int_eq(shc_feed_take(f, i, &data, &len, &msg), 0);
        size_t n = member_bytes((int)i, want);
        ck_assert_uint_eq(len, n);
        ck_assert_int_eq(memcmp(data, want, n), 0);
        free(data);
    }
    ck_assert_int_eq(shc_feed_check(f, 1, &msg), 0);
    ck_assert_uint_eq(shc_feed_walks(f), NMEM);
    shc_feed_free(f);
    fmt_inputs_free(&in);
}
END_TEST

int main(void)
{
    Suite *s = TU_TEMP_SUITE("arcfeed", "core", 0, replaced_archive_is_refused,
                             reordered_in_place_is_refused, gzip_crc_is_checked,
                             unchanged_archive_feeds);
    return tu_run(s);
}
