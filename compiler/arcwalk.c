/* arcwalk.c - walking an archive's members through libarchive (arcwalk.h).
 *
 * A compressed archive is decompressed in a layer of its own under the tar (or zip) reader: gzip
 * by zlib here (libarchive's gzip filter never compares the CRC-32 and length of the trailer),
 * the others (zstd, xz, bzip2, lz4, ...) by libarchive's filters in its "raw" format. When the
 * reader has seen the archive's last member, the layer is read on to the end of the compressed
 * stream, so the checksum at its end (gzip's CRC-32, zstd's frame checksum, xz's and bzip2's
 * block checks, lz4's content checksum) is always compared. A stream that fails its check or
 * does not decode is FMT_EHASH: its data cannot be trusted anywhere, not even in the members read
 * before the failure (a check covers bytes already handed out). One that merely ends early is
 * what it was before (the members read whole stay good, the rest is damaged).
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
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define BLOCK (1 << 16)
#define MAX_NAME 4096

int shc_arc_is_archive_name(const char *path)
{
    static const char *const sfx[] = {".tar", ".tgz", ".tar.gz", ".tar.bz2", ".tbz2", ".tbz",
                                      ".tar.xz", ".txz", ".tar.zst", ".tzst", ".tar.lz4", ".zip"};
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

typedef struct layer layer;

typedef struct {
    const char *path;
    int fd;                     /* the archive, for inner tars opened on their byte range */
    layer *lay;                 /* the decompression layer of a compressed archive, or NULL */
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

/* ---- the decompression layer ---- */

struct layer {
    int fd;
    struct archive *raw;        /* libarchive's filters in the raw format; NULL: gzip here */
    z_stream z;
    int zinit, between, in_eof, done;
    const char *kind;           /* the filter by its magic bytes (when libarchive cannot say) */
    int bad;                    /* 0, FMT_EHASH (damaged, check failed), FMT_ETRUNC, or errno */
    char why[512];
    uint8_t in[BLOCK], out[BLOCK];
};

static la_ssize_t layer_fail(layer *L, int code, const char *fmt, const char *s)
{
    L->bad = code;
    snprintf(L->why, sizeof L->why, fmt, s);
    return -1;
}

/* More compressed bytes into L->in (what is left of them moved to the front). 0 or errno. */
static int gz_fill(layer *L)
{
    if (L->in_eof)
        return 0;
    if (L->z.avail_in && L->z.next_in != L->in)
        memmove(L->in, L->z.next_in, L->z.avail_in);
    L->z.next_in = L->in;
    ssize_t got;
    do
        got = read(L->fd, L->in + L->z.avail_in, BLOCK - L->z.avail_in);
    while (got < 0 && errno == EINTR);
    if (got < 0)
        return errno;
    if (got == 0)
        L->in_eof = 1;
    L->z.avail_in += (uInt)got;
    return 0;
}

/* Inflate gzip members (one after another, as gzip -d does; bytes after the last one that do
 * not start another are ignored, as gzip and libarchive ignore them) into L->out: bytes made,
 * 0 at the end, -1 with L->bad. zlib compares each member's CRC-32 and length. */
static la_ssize_t gz_read(layer *L)
{
    L->z.next_out = L->out;
    L->z.avail_out = BLOCK;
    for (;;) {
        int e;
        if (L->between) {
            if (L->z.avail_in < 2 && !L->in_eof) {
                if ((e = gz_fill(L)))
                    return layer_fail(L, e, "%s", strerror(e));
                continue;
            }
            if (L->z.avail_in < 2 || L->z.next_in[0] != 0x1f || L->z.next_in[1] != 0x8b) {
                L->done = 1;
                return 0;
            }
            if (inflateReset(&L->z) != Z_OK)
                return layer_fail(L, FMT_EHASH, "gzip: %s", "cannot restart");
            L->between = 0;
            L->z.next_out = L->out;
            L->z.avail_out = BLOCK;
        }
        if (L->z.avail_in == 0 && (e = gz_fill(L)))
            return layer_fail(L, e, "%s", strerror(e));
        int zr = inflate(&L->z, Z_NO_FLUSH);
        la_ssize_t made = BLOCK - L->z.avail_out;
        if (zr == Z_STREAM_END) {
            L->between = 1;
            if (made)
                return made;
        } else if (zr == Z_OK) {
            if (made)
                return made;
        } else if (zr == Z_BUF_ERROR && !(L->in_eof && L->z.avail_in == 0)) {
            if (made)
                return made;
        } else if (zr == Z_BUF_ERROR) {
            return layer_fail(L, FMT_ETRUNC, "%s", "truncated gzip input");
        } else if (zr == Z_MEM_ERROR) {
            return layer_fail(L, ENOMEM, "%s", "out of memory");
        } else {
            return layer_fail(L, FMT_EHASH, "gzip data damaged (%s)",
                              L->z.msg ? L->z.msg : "invalid data");
        }
    }
}

static la_ssize_t layer_damage(layer *L);

/* The next decompressed bytes, in L->out: their count, 0 at the end, -1 with L->bad and why. */
static la_ssize_t layer_next(layer *L)
{
    la_ssize_t got;
    if (L->bad || L->done)
        return L->bad ? -1 : 0;
    if (!L->raw)
        return gz_read(L);
    if ((got = archive_read_data(L->raw, L->out, BLOCK)) == 0)
        L->done = 1;
    if (got >= 0)
        return got;
    return layer_damage(L);
}

/* L->raw failed: why, and whether its stream ends early (FMT_ETRUNC) or is damaged. -1. */
static la_ssize_t layer_damage(layer *L)
{
    const char *s = arc_reason(L->raw);
    const char *f = archive_filter_count(L->raw) > 1 ? archive_filter_name(L->raw, 0) : L->kind;
    /* liblzma's "No progress is possible": the input ended */
    if (arc_code(L->raw, 1) == FMT_ETRUNC || strstr(s, "No progress is possible"))
        return layer_fail(L, FMT_ETRUNC, "%s", s);
    layer_fail(L, FMT_EHASH, "%s", f ? f : "compressed");
    size_t n = strlen(L->why);
    snprintf(L->why + n, sizeof L->why - n, " data damaged (%s)", s);
    return -1;
}

/* libarchive's read callback of the reader above the layer. */
static la_ssize_t layer_read(struct archive *a, void *cd, const void **out)
{
    layer *L = cd;
    *out = L->out;
    la_ssize_t got = layer_next(L);
    if (got < 0)
        archive_set_error(a, L->bad == FMT_ETRUNC || L->bad == FMT_EHASH ? EIO : L->bad, "%s",
                          L->why);
    return got;
}

/* Read L to the end of its stream (the checks there compared). 0, or L->bad. */
static int layer_drain(layer *L)
{
    la_ssize_t got;
    while ((got = layer_next(L)) > 0) {
    }
    return got < 0 ? L->bad : 0;
}

/* A layer for the archive open on fd when it is compressed (*out = NULL when it is not: fd is
 * then at offset 0 again). 0 or ENOMEM. */
static int layer_open(int fd, layer **out)
{
    *out = NULL;
    unsigned char magic[6] = {0};
    ssize_t nm = pread(fd, magic, sizeof magic, 0);
    int gz = nm >= 2 && magic[0] == 0x1f && magic[1] == 0x8b;
    /* zstd, xz, bzip2, lz4: known compressed even when libarchive's open fails on them */
    static const struct { const char *name, *magic; size_t n; } known[] = {
        {"zstd", "\x28\xb5\x2f\xfd", 4}, {"xz", "\xfd" "7zXZ", 6}, {"bzip2", "BZh", 3},
        {"lz4", "\x04\x22\x4d\x18", 4}};
    const char *packed = NULL;
    for (size_t k = 0; nm == (ssize_t)sizeof magic && k < sizeof known / sizeof *known; k++)
        if (memcmp(magic, known[k].magic, known[k].n) == 0)
            packed = known[k].name;
    layer *L = calloc(1, sizeof *L);
    if (!L)
        return ENOMEM;
    L->fd = fd;
    L->kind = packed;
    if (gz) {
        if (inflateInit2(&L->z, 16 + MAX_WBITS) != Z_OK) {
            free(L);
            return ENOMEM;
        }
        L->zinit = 1;
        *out = L;
        return 0;
    }
    struct archive_entry *e;
    if (!(L->raw = archive_read_new())) {
        free(L);
        return ENOMEM;
    }
    archive_read_support_filter_all(L->raw);
    archive_read_support_format_raw(L->raw);
    /* the first bytes are decoded already (the formats' bids): a small stream may fail its
     * check here, in the open or the header */
    int opened = archive_read_open_fd(L->raw, fd, BLOCK) == ARCHIVE_OK;
    if (archive_filter_count(L->raw) > 1 || (!opened && packed)) {
        if (!opened || archive_read_next_header(L->raw, &e) != ARCHIVE_OK)
            layer_damage(L);
        *out = L;
        return 0;
    }
    archive_read_free(L->raw);
    free(L);
    lseek(fd, 0, SEEK_SET);
    return 0;
}

static void layer_free(layer *L)
{
    if (!L)
        return;
    if (L->zinit)
        inflateEnd(&L->z);
    if (L->raw)
        archive_read_free(L->raw);
    free(L);
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
    if (w->lay && w->lay->bad == FMT_EHASH) {
        rc = FMT_EHASH;         /* the outer stream is damaged: the walk ends (shc_arc_walk_id) */
    } else if (rc && rc != ENOMEM && (rc == FMT_EFORMAT || rc == FMT_ETRUNC ||
                                      rc == FMT_ECORRUPT || rc == EIO)) {
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

static void arc_id_of(const struct stat *sb, shc_arc_id *id)
{
    *id = (shc_arc_id){.dev = (uint64_t)sb->st_dev, .ino = (uint64_t)sb->st_ino,
                       .size = (int64_t)sb->st_size, .mtime_s = (int64_t)sb->st_mtim.tv_sec,
                       .mtime_ns = (int64_t)sb->st_mtim.tv_nsec};
}

int shc_arc_id_same(const shc_arc_id *a, const shc_arc_id *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime_s == b->mtime_s && a->mtime_ns == b->mtime_ns;
}

static int arc_walk_id(const char *path, int nest, const shc_arc_id *expect, shc_arc_id *id,
                       shc_arc_visit visit, void *ctx, fmt_msg *msg);

int shc_arc_walk(const char *path, int nest, shc_arc_visit visit, void *ctx, fmt_msg *msg)
{
    return shc_arc_walk_id(path, nest, NULL, NULL, visit, ctx, msg);
}

static int arc_walk_id(const char *path, int nest, const shc_arc_id *expect, shc_arc_id *id,
                       shc_arc_visit visit, void *ctx, fmt_msg *msg)
{
    walker w = {.path = path, .visit = visit, .ctx = ctx, .fd = -1};
    struct archive *a = NULL;
    struct stat sb;
    shc_arc_id was, now;
    fmt_msg why = {{0}};
    int rc, fd;
    /* refused by type before a byte is read: a FIFO swapped in after the listing's stat would
     * block an open without O_NONBLOCK */
    if ((rc = fmt_open_file(path, &fd, &why)) != 0) {
        fmt_fail(msg, rc, "%s: %s", path, why.text);
        goto leave;
    }
    if (fstat(fd, &sb) != 0) {
        rc = errno;
        fmt_fail(msg, rc, "%s: %s", path, strerror(rc));
        goto leave;
    }
    arc_id_of(&sb, &was);
    if (id)
        *id = was;
    if (expect && !shc_arc_id_same(expect, &was)) {
        rc = fmt_fail(msg, ESTALE, "%s: the archive changed since it was listed (its size, "
                      "modification time or inode differ)", path);
        goto leave;
    }
    if ((rc = layer_open(fd, &w.lay)) || !(a = new_reader())) {
        rc = fmt_fail(msg, ENOMEM, "%s: out of memory", path);
        goto leave;
    }
    if (w.lay) {
        archive_read_set_read_callback(a, layer_read);
        archive_read_set_callback_data(a, w.lay);
        rc = archive_read_open1(a);
    } else {
        rc = archive_read_open_fd(a, fd, 1 << 20);
        if (nest)
            w.fd = fd;  /* inner tars of an uncompressed tar: read on their byte range */
    }
    if (rc != ARCHIVE_OK) {
        int e = archive_errno(a);
        rc = e > 0 ? e : FMT_EFORMAT;
        fmt_fail(msg, rc, "%s: %s", path, arc_reason(a));
    } else {
        rc = walk_archive(&w, a, NULL, nest, msg);
    }
    /* the rest of the compressed stream, to its checks at the end; after the tar reader's own
     * error too (a damaged header may be a damaged stream's doing: the check says which) */
    int d = w.lay && rc != ENOMEM && rc != ECANCELED ? layer_drain(w.lay) : 0;
    if (rc == 0 && d && d != FMT_EHASH)
        rc = fmt_fail(msg, d, "%s: damaged after member %s: %s", path,
                      w.last[0] ? w.last : "(none)", w.lay->why);
    if (w.lay && w.lay->bad == FMT_EHASH && rc != ENOMEM && rc != ECANCELED)
        rc = fmt_fail(msg, FMT_EHASH, "%s: %s%s%s: no member of it can be trusted", path,
                      w.lay->why, w.last[0] ? " after member " : "", w.last);
    if (rc == 0 && (fstat(fd, &sb) != 0 || (arc_id_of(&sb, &now), !shc_arc_id_same(&was, &now))))
        rc = fmt_fail(msg, ESTALE, "%s: the archive changed while it was read", path);
leave:
    if (a)
        archive_read_free(a);
    layer_free(w.lay);
    if (fd >= 0)
        close(fd);
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

int shc_arc_walk_id(const char *path, int nest, const shc_arc_id *expect, shc_arc_id *id,
                    shc_arc_visit visit, void *ctx, fmt_msg *msg)
{
    locale_t old, u = utf8_begin(&old);
    int rc = arc_walk_id(path, nest, expect, id, visit, ctx, msg);
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
