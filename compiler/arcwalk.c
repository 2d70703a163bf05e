/* arcwalk.c - walking an archive's members through libarchive (arcwalk.h).
 *
 * Inner tars are read while the outer archive streams. When the outer one is an uncompressed tar
 * on disk, an inner tar is opened on its byte range of the file instead (pread, and seeks to skip
 * member data), so listing ImageNet's 1,000 class tars reads their headers only; the member
 * ordinals do not depend on which way an inner tar was opened.
 */
#define _FILE_OFFSET_BITS 64
#include "arcwalk.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <langinfo.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define BLOCK (1 << 16)
#define MAX_NAME 4096

int shc_arc_is_archive_name(const char *path)
{
    static const char *const sfx[] = {".tar", ".tgz", ".tar.gz", ".tar.bz2", ".tbz2", ".tbz",
                                      ".tar.xz", ".txz", ".tar.zst", ".tzst", ".zip"};
    size_t n = strlen(path);
    for (size_t i = 0; i < sizeof sfx / sizeof *sfx; i++) {
        size_t k = strlen(sfx[i]);
        if (n > k && strcasecmp(path + n - k, sfx[i]) == 0)
            return 1;
    }
    return 0;
}

int shc_arc_name_safe(const char *name)
{
    if (!*name || name[0] == '/')
        return 0;
    for (const char *p = name; *p;) {
        const char *e = strchr(p, '/');
        size_t k = e ? (size_t)(e - p) : strlen(p);
        if (k == 2 && p[0] == '.' && p[1] == '.')
            return 0;
        p += k + (e != NULL);
    }
    return 1;
}

struct shc_arc_reader {
    struct archive *a;
    int64_t size;
    int used;
};

typedef struct {
    const char *path;
    int fd;                     /* the archive, for inner tars opened on their byte range */
    shc_arc_visit visit;
    void *ctx;
    uint64_t seq;
    char last[2 * MAX_NAME + 2];    /* the last member read, for error messages */
} walker;

/* An inner tar: a byte range of the outer file, or the outer archive's current member data. */
typedef struct {
    int fd;
    int64_t base, size, pos;
    struct archive *outer;
    uint8_t buf[BLOCK];
} source;

static la_ssize_t range_read(struct archive *a, void *cd, const void **out)
{
    source *s = cd;
    *out = s->buf;
    int64_t want = s->size - s->pos < BLOCK ? s->size - s->pos : BLOCK;
    if (want <= 0)
        return 0;
    ssize_t got = pread(s->fd, s->buf, (size_t)want, s->base + s->pos);
    if (got < 0) {
        archive_set_error(a, errno, "%s", strerror(errno));
        return -1;
    }
    s->pos += got;
    return got;
}

static la_int64_t range_skip(struct archive *a, void *cd, la_int64_t request)
{
    (void)a;
    source *s = cd;
    int64_t left = s->size - s->pos;
    int64_t k = request < left ? request : left;
    s->pos += k;
    return k;
}

static la_ssize_t stream_read(struct archive *a, void *cd, const void **out)
{
    source *s = cd;
    *out = s->buf;
    la_ssize_t got = archive_read_data(s->outer, s->buf, BLOCK);
    if (got < 0)
        archive_set_error(a, archive_errno(s->outer) > 0 ? archive_errno(s->outer) : EIO, "%s",
                          archive_error_string(s->outer) ? archive_error_string(s->outer)
                                                         : "damaged outer archive");
    return got;
}

static struct archive *new_reader(void)
{
    struct archive *a = archive_read_new();
    if (!a)
        return NULL;
    archive_read_support_filter_all(a);
    archive_read_support_format_tar(a);
    archive_read_support_format_gnutar(a);
    archive_read_support_format_zip(a);
    return a;
}

static int arc_code(struct archive *a, int opened)
{
    const char *s = archive_error_string(a);
    if (!opened)
        return FMT_EFORMAT;
    if (s && (strstr(s, "runcated") || strstr(s, "end of file") || strstr(s, "EOF")))
        return FMT_ETRUNC;
    return FMT_ECORRUPT;
}

static const char *arc_reason(struct archive *a)
{
    const char *s = archive_error_string(a);
    return s ? s : "damaged archive";
}

/* A member's name as extraction would write it, into out (MAX_NAME + 1 bytes): "." components
 * and repeated '/' dropped ("./a//b/./c/" -> "a/b/c"), as tar and unzip resolve them. A leading
 * '/' and ".." components stay, for shc_arc_name_safe to refuse. 0 when empty, -1 when too long. */
static int norm_name(const char *raw, char *out)
{
    size_t n = 0;
    if (raw[0] == '/')
        out[n++] = '/';
    for (const char *p = raw; *p;) {
        const char *e = strchr(p, '/');
        size_t k = e ? (size_t)(e - p) : strlen(p);
        if (k > 0 && !(k == 1 && p[0] == '.')) {
            size_t sep = n > 0 && out[n - 1] != '/';
            if (k + sep > MAX_NAME - n)
                return -1;
            if (sep)
                out[n++] = '/';
            memcpy(out + n, p, k);
            n += k;
        }
        p += k + (e != NULL);
    }
    out[n] = '\0';
    return n > 0 && strcmp(out, "/") != 0 ? 1 : 0;
}

int shc_arc_norm_name(const char *name, char *out)
{
    return norm_name(name, out);
}

static int entry_type(struct archive_entry *e)
{
    if (archive_entry_hardlink(e))
        return SHC_ARC_LINK;
    switch (archive_entry_filetype(e)) {
    case AE_IFREG: return SHC_ARC_FILE;
    case AE_IFDIR: return SHC_ARC_DIR;
    case AE_IFLNK: return SHC_ARC_LINK;
    default: return SHC_ARC_OTHER;
    }
}

static int is_tar_name(const char *name)
{
    size_t n = strlen(name);
    return n > 4 && strchr(name, '/') == NULL && strcasecmp(name + n - 4, ".tar") == 0;
}

static int walk_archive(walker *w, struct archive *a, const char *outer_name, int nest,
                        fmt_msg *msg);

/* Visit the members of the inner tar that is outer's current member (name, size). A damaged
 * inner tar is reported to the visitor as SHC_ARC_ERROR; the outer walk goes on. */
static int walk_inner(walker *w, struct archive *outer, struct archive_entry *e, const char *name)
{
    source *s = calloc(1, sizeof *s);
    struct archive *in = new_reader();
    if (!s || !in) {
        free(s);
        if (in)
            archive_read_free(in);
        return ENOMEM;
    }
    s->fd = -1;
    s->outer = outer;
    int64_t size = archive_entry_size_is_set(e) ? archive_entry_size(e) : -1;
    /* an uncompressed outer tar: the inner tar's bytes lie at the outer's current position */
    if (w->fd >= 0 && size >= 0 && archive_filter_count(outer) == 1 &&
        (archive_format(outer) & ARCHIVE_FORMAT_BASE_MASK) == ARCHIVE_FORMAT_TAR &&
        archive_entry_sparse_count(e) == 0) {
        int64_t at = archive_filter_bytes(outer, -1);
        char magic[8] = {0};
        /* a tar header where the data should start, or an empty member: else stream it */
        if (size == 0 || (at > 0 && pread(w->fd, magic, 5, at + 257) == 5 &&
                          memcmp(magic, "ustar", 5) == 0)) {
            s->fd = w->fd;
            s->base = at;
            s->size = size;
        }
    }
    int rc;
    if (s->fd >= 0) {
        archive_read_set_read_callback(in, range_read);
        archive_read_set_skip_callback(in, range_skip);
    } else {
        archive_read_set_read_callback(in, stream_read);
    }
    archive_read_set_callback_data(in, s);
    fmt_msg why = {{0}};
    if (archive_read_open1(in) != ARCHIVE_OK) {
        rc = fmt_fail(&why, FMT_EFORMAT, "%s", arc_reason(in));
    } else {
        rc = walk_archive(w, in, name, 0, &why);
    }
    if (rc && rc != ENOMEM && (rc == FMT_EFORMAT || rc == FMT_ETRUNC || rc == FMT_ECORRUPT ||
                               rc == EIO)) {
        shc_arc_member m = {.name = name, .outer = name, .seq = w->seq++, .size = size,
                            .type = SHC_ARC_ERROR, .error = why.text};
        rc = w->visit(w->ctx, &m, NULL);
    }
    archive_read_free(in);
    free(s);
    return rc;
}

static int walk_archive(walker *w, struct archive *a, const char *outer_name, int nest,
                        fmt_msg *msg)
{
    struct archive_entry *e;
    char name[MAX_NAME + 1], full[2 * MAX_NAME + 2];
    int opened = outer_name != NULL;    /* an inner tar opened already said it is an archive */
    int rc = 0;
    for (;;) {
        int r = archive_read_next_header(a, &e);
        if (r == ARCHIVE_EOF)
            break;
        if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
            int code = arc_code(a, opened || w->seq > 0);
            if (w->seq == 0 && !outer_name)
                return fmt_fail(msg, code, "%s: %s", w->path, arc_reason(a));
            return fmt_fail(msg, code, "%s: damaged after member %s: %s", w->path,
                            w->last[0] ? w->last : "(none)", arc_reason(a));
        }
        opened = 1;
        const char *raw = archive_entry_pathname(e);
        if (!raw)
            raw = archive_entry_pathname_utf8(e);
        int type = entry_type(e), named = raw ? norm_name(raw, name) : 0;
        char bad[400] = "";
        if (named <= 0) {
            /* no usable name: a file or a link is reported (SHC_ARC_BADNAME), the rest passed
             * over (a "./" directory, say) */
            if (!raw)
                snprintf(bad, sizeof bad, "member name not readable (%.300s)",
                         r == ARCHIVE_WARN ? arc_reason(a) : "no name");
            else if (named < 0)
                snprintf(bad, sizeof bad, "member name longer than %d bytes", MAX_NAME);
            else
                snprintf(bad, sizeof bad, "empty member name");
            type = type == SHC_ARC_FILE || type == SHC_ARC_LINK ? SHC_ARC_BADNAME : SHC_ARC_OTHER;
            /* the raw name only in a reject's text: as a name its '/' would make classes */
            int show = raw && type == SHC_ARC_BADNAME;
            snprintf(name, sizeof name, "(member %llu%s%.200s%s)", (unsigned long long)w->seq,
                     show ? ": " : "", show ? raw : "", show && strlen(raw) > 200 ? "..." : "");
        }
        if (outer_name)
            snprintf(full, sizeof full, "%s!%s", outer_name, name);
        else
            snprintf(full, sizeof full, "%s", name);
        snprintf(w->last, sizeof w->last, "%s", full);
        shc_arc_member m = {.name = full, .outer = outer_name ? outer_name : full,
                            .inner = outer_name ? name : NULL, .seq = w->seq++,
                            .size = archive_entry_size_is_set(e) ? archive_entry_size(e) : -1,
                            .type = type, .error = type == SHC_ARC_BADNAME ? bad : NULL};
        shc_arc_reader rd = {.a = a, .size = m.size};
        if ((rc = w->visit(w->ctx, &m, &rd)))
            return rc;
        if (nest && type == SHC_ARC_FILE && !rd.used && is_tar_name(name)) {
            if ((rc = walk_inner(w, a, e, name)))
                return rc;
            snprintf(w->last, sizeof w->last, "%s", name);
        }
        /* the rest of the member's data is skipped by the next header read */
    }
    return 0;
}

static int arc_walk(const char *path, int nest, shc_arc_visit visit, void *ctx, fmt_msg *msg)
{
    walker w = {.path = path, .visit = visit, .ctx = ctx, .fd = -1};
    struct archive *a = new_reader();
    if (!a)
        return fmt_fail(msg, ENOMEM, "%s: out of memory", path);
    int rc;
    if (archive_read_open_filename(a, path, 1 << 20) != ARCHIVE_OK) {
        int e = archive_errno(a);
        rc = e > 0 ? e : FMT_EFORMAT;
        fmt_fail(msg, rc, "%s: %s", path, arc_reason(a));
        goto leave;
    }
    if (nest)
        w.fd = open(path, O_RDONLY | O_CLOEXEC);
    rc = walk_archive(&w, a, NULL, nest, msg);
leave:
    if (w.fd >= 0)
        close(w.fd);
    archive_read_free(a);
    return rc;
}

/* Member names in UTF-8 whatever the locale: libarchive converts a zip's UTF-8 names (and a pax
 * header's) to the locale's charset, and in the C locale it gives none for a non-ASCII name. The
 * calling thread's LC_CTYPE becomes C.UTF-8 for the walk (uselocale: thread-local, the process's
 * locale untouched); *old is what to restore (0: nothing changed). */
static locale_t utf8_begin(locale_t *old)
{
    *old = (locale_t)0;
    if (strcmp(nl_langinfo(CODESET), "UTF-8") == 0)
        return (locale_t)0;
    locale_t base = duplocale(uselocale((locale_t)0));
    locale_t u = base ? newlocale(LC_CTYPE_MASK, "C.UTF-8", base) : (locale_t)0;
    if (!u) {
        if (base)
            freelocale(base);
        return (locale_t)0;     /* no C.UTF-8: names as the locale gives them */
    }
    *old = uselocale(u);
    return u;
}

static void utf8_end(locale_t u, locale_t old)
{
    if (u) {
        uselocale(old);
        freelocale(u);
    }
}

int shc_arc_walk(const char *path, int nest, shc_arc_visit visit, void *ctx, fmt_msg *msg)
{
    locale_t old, u = utf8_begin(&old);
    int rc = arc_walk(path, nest, visit, ctx, msg);
    utf8_end(u, old);
    return rc;
}

int shc_arc_read(shc_arc_reader *r, uint64_t max, uint8_t **data, size_t *len, fmt_msg *msg)
{
    *data = NULL;
    *len = 0;
    if (r->used)
        return fmt_fail(msg, FMT_EINVAL, "member read twice");
    r->used = 1;
    if (r->size >= 0 && (uint64_t)r->size > max)
        return fmt_fail(msg, FMT_ETOOBIG, "member larger than %llu bytes",
                        (unsigned long long)max);
    size_t cap = r->size >= 0 ? (size_t)r->size + 1 : BLOCK, n = 0;
    uint8_t *buf = malloc(cap);
    if (!buf)
        return fmt_fail(msg, ENOMEM, "out of memory");
    for (;;) {
        if (n == cap) {
            if (cap > max) {
                free(buf);
                return fmt_fail(msg, FMT_ETOOBIG, "member larger than %llu bytes",
                                (unsigned long long)max);
            }
            uint8_t *p = realloc(buf, cap * 2);
            if (!p) {
                free(buf);
                return fmt_fail(msg, ENOMEM, "out of memory");
            }
            buf = p;
            cap *= 2;
        }
        la_ssize_t got = archive_read_data(r->a, buf + n, cap - n);
        if (got == 0)
            break;
        if (got < 0) {
            free(buf);
            int code = arc_code(r->a, 1);
            return fmt_fail(msg, code, "%s", arc_reason(r->a));
        }
        n += (size_t)got;
    }
    if (r->size >= 0 && n != (size_t)r->size) {
        free(buf);
        return fmt_fail(msg, FMT_ETRUNC, "member data ends after %zu of %lld bytes", n,
                        (long long)r->size);
    }
    if (n > max) {
        free(buf);
        return fmt_fail(msg, FMT_ETOOBIG, "member larger than %llu bytes",
                        (unsigned long long)max);
    }
    *data = buf;
    *len = n;
    return 0;
}
