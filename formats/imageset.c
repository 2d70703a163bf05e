/* imageset.c - the per-image set backends png0, bmp and jpeg (spec: formats/imageset.md).
 *
 * One image file per sample in class folders, plus one index file per shard. The three backends
 * differ only in the encoder, the file extension and the format number in the index, so they share
 * all code and their vtables (here) are thin wrappers that pass a set_kind. The writer is
 * imageset_write.c; the index layout and helpers both use, imageset_int.h.
 *
 * Reader: the whole index is read into memory and validated on open; image files are opened only
 * when a sample is read or checked, so a missing or damaged file is reported for that sample.
 */
#include "imageset.h"
#include "imageset_int.h"

#include "image.h"
#include "le.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

static const set_kind kind_png0 = { SET_PNG0, "png0", ".png" };
static const set_kind kind_bmp = { SET_BMP, "bmp", ".bmp" };
static const set_kind kind_jpeg = { SET_JPEG, "jpeg", ".jpg" };

/* ---- reader ---- */

typedef struct {
    const char *name;           /* inside the index buffer, not terminated */
    size_t len;
} set_name;

typedef struct {
    uint32_t tag;
    const set_kind *kind;
    char *dir;                  /* dataset directory */
    size_t dir_len;
    uint8_t *idx;               /* the whole index file */
    size_t idx_len;
    const uint8_t *entries, *aux;
    set_name *folders;
    uint32_t nfolders;
    fmt_shard_info info;
} set_shard;

static void set_r_close(void *sp)
{
    set_shard *s = sp;
    if (!s)
        return;
    free(s->dir);
    free(s->idx);
    free(s->folders);
    free(s);
}

/* Items 3..5 of imageset.md "What a reader checks on open"; the trailer hash is already checked. */
static int validate(set_shard *s, fmt_msg *msg)
{
    const uint8_t *b = s->idx;
    uint32_t header_size = fmt_le_get32(b + 12), format = fmt_le_get32(b + 16);
    uint64_t count = fmt_le_get64(b + 24), first = fmt_le_get64(b + 32);
    uint64_t folders_offset = fmt_le_get64(b + 104), folders_size = fmt_le_get64(b + 112);
    uint32_t nfolders = fmt_le_get32(b + 120);
    uint64_t aux_offset = fmt_le_get64(b + 128), aux_size = fmt_le_get64(b + 136);
    uint64_t file_size = fmt_le_get64(b + 144), images_size = fmt_le_get64(b + 152);
    uint64_t v, end;

    if (header_size != IDX_HEADER_SIZE)
        return fmt_fail(msg, FMT_ECORRUPT, "bad header size %" PRIu32, header_size);
    if (format != (uint32_t)s->kind->format) {
        const char *names[] = { "unknown", "png0", "bmp", "jpeg" };
        return fmt_fail(msg, FMT_ECORRUPT, "index of a %s set, not %s",
                        names[format <= SET_JPEG ? format : 0], s->kind->name);
    }
    if (__builtin_add_overflow(first, count, &v))
        return fmt_fail(msg, FMT_ECORRUPT, "sample range overflows");
    if (__builtin_mul_overflow(count, (uint64_t)IDX_ENTRY_SIZE, &v) ||
        __builtin_add_overflow(v, (uint64_t)IDX_HEADER_SIZE, &v) || v != folders_offset)
        return fmt_fail(msg, FMT_ECORRUPT, "folder table does not follow the entries");
    if (__builtin_add_overflow(folders_offset, folders_size, &v) || v != aux_offset)
        return fmt_fail(msg, FMT_ECORRUPT, "aux area does not follow the folder table");
    if (__builtin_add_overflow(aux_offset, aux_size, &v) ||
        __builtin_add_overflow(v, (uint64_t)IDX_TRAILER_SIZE, &v) || v != file_size)
        return fmt_fail(msg, FMT_ECORRUPT, "areas do not end at the trailer");

    /* file_size == idx_len was checked by the caller, so every offset below is in the buffer */
    /* a record takes at least 3 bytes: the table bounds the allocation, not the count field */
    if (nfolders > folders_size / 3)
        return fmt_fail(msg, FMT_ECORRUPT, "folder table of %" PRIu64 " bytes cannot hold %"
                        PRIu32 " folders", folders_size, nfolders);
    s->folders = calloc(nfolders ? nfolders : 1, sizeof *s->folders);
    if (!s->folders)
        return ENOMEM;
    s->nfolders = nfolders;
    uint64_t pos = folders_offset, table_end = aux_offset;
    for (uint32_t f = 0; f < nfolders; f++) {
        if (table_end - pos < 2)
            return fmt_fail(msg, FMT_ECORRUPT, "folder %" PRIu32 " outside the folder table", f);
        uint16_t n = fmt_le_get16(b + pos);
        if (table_end - pos - 2 < n)
            return fmt_fail(msg, FMT_ECORRUPT, "folder %" PRIu32 " outside the folder table", f);
        const char *name = (const char *)b + pos + 2;
        if (!name_safe(name, n) || memchr(name, '\0', n))
            return fmt_fail(msg, FMT_ECORRUPT, "folder %" PRIu32 ": unsafe name", f);
        s->folders[f] = (set_name){ .name = name, .len = n };
        pos += 2 + (uint64_t)n;
    }
    if (pos != table_end)
        return fmt_fail(msg, FMT_ECORRUPT, "folder table has %" PRIu64 " stray bytes",
                        table_end - pos);

    uint64_t total = 0;
    for (uint64_t i = 0; i < count; i++) {
        set_entry e;
        decode_entry(b + IDX_HEADER_SIZE + i * IDX_ENTRY_SIZE, &e);
        int rc = fmt_sample_shape_check("entry", i, e.height, e.width, e.channels, e.label, msg);
        if (rc)
            return rc;
        if (__builtin_mul_overflow((uint64_t)e.height * e.width, (uint64_t)e.channels, &v) ||
            v > SIZE_MAX)
            return fmt_fail(msg, FMT_ECORRUPT, "entry %" PRIu64 ": shape too large", i);
        if (!e.file_size)
            return fmt_fail(msg, FMT_ECORRUPT, "entry %" PRIu64 ": empty image file", i);
        if (e.folder >= nfolders)
            return fmt_fail(msg, FMT_ECORRUPT, "entry %" PRIu64 ": bad folder %" PRIu32, i,
                            e.folder);
        if ((e.flags & IDX_ENTRY_AUX) &&
            (__builtin_add_overflow(e.aux_off, (uint64_t)e.aux_len, &end) || end > aux_size))
            return fmt_fail(msg, FMT_ECORRUPT, "entry %" PRIu64 ": aux record outside the aux "
                            "area", i);
        if (__builtin_add_overflow(total, e.file_size, &total))
            return fmt_fail(msg, FMT_ECORRUPT, "image sizes overflow");
    }
    if (total != images_size)
        return fmt_fail(msg, FMT_ECORRUPT, "image sizes add up to %" PRIu64 ", header says %"
                        PRIu64, total, images_size);
    if (__builtin_add_overflow(file_size, images_size, &v))
        return fmt_fail(msg, FMT_ECORRUPT, "shard size overflows");

    s->entries = b + IDX_HEADER_SIZE;
    s->aux = b + aux_offset;
    fmt_shard_info *in = &s->info;
    in->samples = count;
    in->first_index = first;
    in->fingerprint = fmt_le_get64(b + 40);
    in->input_end = fmt_le_get64(b + 48);
    for (int c = 0; c < 3; c++) {
        in->sum[c] = fmt_le_get64(b + 56 + 8 * c);
        in->sumsq[c] = fmt_le_get64(b + 80 + 8 * c);
    }
    in->bytes = v;
    in->hash = fmt_le_get64(b + file_size - IDX_TRAILER_SIZE);
    return 0;
}

static int set_r_open(const set_kind *k, void **out, const char *dir, const char *path,
                      fmt_access access, fmt_msg *msg)
{
    *out = NULL;
    if (msg)
        msg->text[0] = '\0';
    if (!path)
        return FMT_EINVAL;
    set_shard *s = calloc(1, sizeof *s);
    if (!s)
        return ENOMEM;
    s->tag = SET_SHARD_TAG;
    s->kind = k;
    int rc = 0;
    if (dir) {
        s->dir = strdup(dir);
    } else {
        /* no dataset directory given: the one holding the index */
        const char *slash = strrchr(path, '/');
        s->dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    }
    if (!s->dir) {
        rc = ENOMEM;
        goto leave;
    }
    s->dir_len = strlen(s->dir);
    if (s->dir_len + 1 + IDX_REL_MAX > PATH_MAX) {
        rc = fmt_fail(msg, ENAMETOOLONG, "dataset directory name too long");
        goto leave;
    }
    rc = fmt_read_file(path, SIZE_MAX, &s->idx, &s->idx_len);
    if (rc) {
        if (rc == FMT_EUNSUPPORTED)
            fmt_fail(msg, rc, "not a regular file");
        goto leave;
    }
    const uint8_t *b = s->idx;
    size_t n = s->idx_len;
    if (n == 0) {
        rc = fmt_fail(msg, FMT_ETRUNC, "empty file");
        goto leave;
    }
    if (memcmp(b, IDX_MAGIC, n < 8 ? n : 8) != 0) {
        rc = fmt_fail(msg, FMT_EFORMAT, "bad magic (not an image-set index)");
        goto leave;
    }
    if (n < IDX_HEADER_SIZE + IDX_TRAILER_SIZE) {
        rc = fmt_fail(msg, FMT_ETRUNC, "file is %zu bytes, shorter than the header", n);
        goto leave;
    }
    uint16_t major = fmt_le_get16(b + 8), minor = fmt_le_get16(b + 10);
    if (major != IDX_VERSION_MAJOR) {
        rc = fmt_fail(msg, FMT_EVERSION, "unsupported version %u.%u (this reader knows %u.x)",
                      major, minor, IDX_VERSION_MAJOR);
        goto leave;
    }
    /* the size before the hash: "truncated" says more than "bad hash" about a short file */
    uint64_t file_size = fmt_le_get64(b + 144);
    if (file_size != (uint64_t)n) {
        rc = fmt_fail(msg, n < file_size ? FMT_ETRUNC : FMT_ECORRUPT,
                      "file is %zu bytes, header says %" PRIu64, n, file_size);
        goto leave;
    }
    if (XXH3_64bits(b, n - IDX_TRAILER_SIZE) != fmt_le_get64(b + n - IDX_TRAILER_SIZE)) {
        rc = fmt_fail(msg, FMT_EHASH, "bad index hash");
        goto leave;
    }
    rc = validate(s, msg);
leave:
    if (rc)
        set_r_close(s);
    else
        *out = s;
    return rc;
}

static const fmt_shard_info *set_r_info(const void *sp)
{
    return &((const set_shard *)sp)->info;
}

static void shard_entry(const set_shard *s, uint64_t i, set_entry *e)
{
    decode_entry(s->entries + i * IDX_ENTRY_SIZE, e);
}

static int set_r_get(const void *sp, uint64_t i, fmt_sample *out)
{
    const set_shard *s = sp;
    if (i >= s->info.samples)
        return FMT_EINVAL;
    set_entry e;
    shard_entry(s, i, &e);
    memset(out, 0, sizeof *out);
    out->index = i;
    out->label = e.label;
    out->height = e.height;
    out->width = e.width;
    out->channels = e.channels;
    out->source = e.source;
    out->hash = e.hash;
    out->pixels = NULL; /* files must be decoded: r_read */
    out->length = (uint64_t)e.height * e.width * e.channels;
    if (e.flags & IDX_ENTRY_AUX) {
        out->aux = s->aux + e.aux_off;
        out->aux_len = e.aux_len;
    }
    return 0;
}

/* Sample i's entry, and its file's path relative to the dataset directory into rel. */
static void sample_rel(const set_shard *s, uint64_t i, set_entry *e, char rel[IDX_REL_MAX])
{
    shard_entry(s, i, e);
    const set_name *f = &s->folders[e->folder];
    rel_name(rel, f->name, f->len, s->info.first_index + i, s->kind, 0);
}

int fmt_imageset_sample_path(const void *sp, uint64_t i, char *buf, size_t len)
{
    const set_shard *s = sp;
    assert(s->tag == SET_SHARD_TAG);
    if (i >= s->info.samples)
        return FMT_EINVAL;
    set_entry e;
    char rel[IDX_REL_MAX];
    sample_rel(s, i, &e, rel);
    int n = snprintf(buf, len, "%s/%s", s->dir, rel);
    return n < 0 || (size_t)n >= len ? ENAMETOOLONG : 0;
}

int fmt_imageset_sample_object(const void *sp, uint64_t i, char *rel, size_t len, uint64_t *size,
                               uint64_t *file_hash)
{
    const set_shard *s = sp;
    assert(s->tag == SET_SHARD_TAG);
    if (i >= s->info.samples)
        return FMT_EINVAL;
    set_entry e;
    char name[IDX_REL_MAX];
    sample_rel(s, i, &e, name);
    if (strlen(name) >= len)
        return ENAMETOOLONG;
    memcpy(rel, name, strlen(name) + 1);
    *size = e.file_size;
    *file_hash = e.file_hash;
    return 0;
}

/* Read the file of entry e (exactly its recorded size) and decode it to the recorded shape. With
 * file not NULL (checking) the file's hash is compared first and *file receives its bytes. */
static int load_sample(const set_entry *e, const char *path, uint8_t **file, fmt_image *img,
                       fmt_msg *msg)
{
    memset(img, 0, sizeof *img);
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc = fmt_read_file(path, e->file_size > SIZE_MAX ? SIZE_MAX : (size_t)e->file_size,
                           &buf, &len);
    if (rc == FMT_ETOOBIG) {
        rc = fmt_fail(msg, FMT_ECORRUPT, "%s: file is larger than the %" PRIu64
                      " bytes recorded", path, e->file_size);
        goto leave;
    }
    if (rc) {
        fmt_fail(msg, rc, "%s: %s", path, fmt_strerror(rc));
        goto leave;
    }
    if (len != e->file_size) {
        rc = fmt_fail(msg, FMT_ETRUNC, "%s: file is %zu bytes, %" PRIu64 " recorded", path, len,
                      e->file_size);
        goto leave;
    }
    if (file && fmt_hash64(buf, len) != e->file_hash) {
        rc = fmt_fail(msg, FMT_EHASH, "%s: file content hash mismatch", path);
        goto leave;
    }
    fmt_decode_opts o = exact_decode_opts(e->height, e->width, e->channels);
    fmt_msg dmsg = {{0}};
    rc = fmt_image_decode(buf, len, &o, img, &dmsg);
    if (rc) {
        fmt_fail(msg, rc, "%s: %s", path, fmt_reason(&dmsg, rc));
        goto leave;
    }
    if (img->width != e->width || img->height != e->height || img->channels != e->channels) {
        rc = fmt_fail(msg, FMT_ECORRUPT, "%s: decoded %" PRIu32 "x%" PRIu32 "x%" PRIu32
                      ", recorded %" PRIu32 "x%" PRIu32 "x%" PRIu32, path, img->width,
                      img->height, img->channels, e->width, e->height, e->channels);
        fmt_image_free(img);
    }
leave:
    if (file && !rc)
        *file = buf;
    else
        free(buf);
    return rc;
}

/* Sample i of shard sp decoded into *img (its entry in *e, its file's path in path), with
 * load_sample's checks; its file's bytes into *file when file is not NULL. */
static int load_indexed(const void *sp, uint64_t i, char path[PATH_MAX], set_entry *e,
                        uint8_t **file, fmt_image *img, fmt_msg *msg)
{
    const set_shard *s = sp;
    if (msg)
        msg->text[0] = '\0';
    int rc = fmt_imageset_sample_path(s, i, path, PATH_MAX);
    if (rc)
        return rc;
    shard_entry(s, i, e);
    return load_sample(e, path, file, img, msg);
}

int fmt_imageset_read(const void *sp, uint64_t i, void *dst, fmt_msg *msg)
{
    char path[PATH_MAX];
    set_entry e;
    fmt_image img;
    int rc = load_indexed(sp, i, path, &e, NULL, &img, msg);
    if (rc)
        return rc;
    memcpy(dst, img.pixels, (size_t)e.height * e.width * e.channels);
    fmt_image_free(&img);
    return 0;
}

int fmt_imageset_check(const void *sp, uint64_t i, fmt_msg *msg)
{
    char path[PATH_MAX];
    set_entry e;
    fmt_image img;
    uint8_t *file = NULL;
    int rc = load_indexed(sp, i, path, &e, &file, &img, msg);
    if (rc)
        return rc;
    if (fmt_hash64(img.pixels, (size_t)e.height * e.width * e.channels) != e.hash)
        rc = fmt_fail(msg, FMT_EHASH, "%s: pixel hash mismatch", path);
    fmt_image_free(&img);
    free(file);
    return rc;
}

static int set_r_read(const void *sp, uint64_t i, void *dst, void *scratch, size_t scratch_len)
{
    return fmt_imageset_read(sp, i, dst, NULL);
}

static int set_r_check(const void *sp, uint64_t i)
{
    return fmt_imageset_check(sp, i, NULL);
}

/* ---- the three tables ---- */

/* One backend of kind K (png0, bmp, jpeg): its open functions pass kind_K, everything else is
 * shared. The access mode does not apply: every sample is a file read whole and decoded. There
 * is no r_advise: files are opened per read, so there is no open descriptor to advise. */
#define SET_BACKEND(K)                                                                           \
    static int K##_w_open(void **w, const fmt_writer_opts *o)                                    \
    {                                                                                            \
        return fmt_set_w_open(&kind_##K, w, o);                                                  \
    }                                                                                            \
    static int K##_r_open(void **s, const char *dir, const char *path, fmt_access access,        \
                          fmt_msg *msg)                                                          \
    {                                                                                            \
        return set_r_open(&kind_##K, s, dir, path, access, msg);                                 \
    }                                                                                            \
    const fmt_backend fmt_backend_##K = {                                                        \
        .name = #K, .version = IDX_VERSION_MAJOR, .suffix = ".idx",                              \
        .w_open = K##_w_open, .w_add = fmt_set_w_add, .w_count = fmt_set_w_count,                \
        .w_size = fmt_set_w_size, .w_cost = fmt_set_##K##_w_cost,                                \
        .w_sample_bytes = fmt_set_##K##_sample_bytes, .w_finish = fmt_set_w_finish,              \
        .w_abort = fmt_set_w_abort,                                                              \
        .r_open = K##_r_open, .r_close = set_r_close, .r_info = set_r_info, .r_get = set_r_get,  \
        .r_read = set_r_read, .r_check = set_r_check, .r_advise = NULL,                          \
        .r_sample_path = fmt_imageset_sample_path,                                               \
    };

SET_BACKEND(png0)
SET_BACKEND(bmp)
SET_BACKEND(jpeg)
