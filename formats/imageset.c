/* imageset.c - the per-image set backends png0, bmp and jpeg (spec: formats/imageset.md).
 *
 * One image file per sample in class folders, plus one index file per shard. The three backends
 * differ only in the encoder, the file extension and the format number in the index, so they share
 * all code here and their vtables are thin wrappers that pass a set_kind.
 *
 * Writer: every image goes to FOLDER/INDEX.EXT.tmp and is renamed into place, all relative to a
 * descriptor of the dataset directory (no path length limits, no re-resolving of the directory).
 * Durability comes from one syncfs(2) at finish rather than an fsync per file; the index is then
 * written atomically and is the shard's commit record (imageset.md "Writing").
 *
 * Reader: the whole index is read into memory and validated on open; image files are opened only
 * when a sample is read or checked, so a missing or damaged file is reported for that sample.
 */
#include "imageset.h"

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

#define IDX_MAGIC "SHARDIDX"
#define IDX_VERSION_MAJOR 1u
#define IDX_VERSION_MINOR 0u
#define IDX_HEADER_SIZE 160u
#define IDX_ENTRY_SIZE 64u
#define IDX_TRAILER_SIZE 8u
#define IDX_ENTRY_AUX 1u
#define IDX_MAX_FOLDER 255u     /* NAME_MAX of common filesystems */
#define IDX_DEFAULT_QUALITY 90
/* folder / 20 digits . ext .tmp, with room to spare */
#define IDX_REL_MAX (IDX_MAX_FOLDER + 48u)
#define SET_SHARD_TAG 0x53455449u  /* "SETI": catches a handle of another backend in asserts */

typedef enum { SET_PNG0 = 1, SET_BMP = 2, SET_JPEG = 3 } set_format;

typedef struct {
    set_format format;
    const char *name;
    const char *ext;            /* with the dot */
} set_kind;

static const set_kind kind_png0 = { SET_PNG0, "png0", ".png" };
static const set_kind kind_bmp = { SET_BMP, "bmp", ".bmp" };
static const set_kind kind_jpeg = { SET_JPEG, "jpeg", ".jpg" };

/* ---- shared helpers ---- */

typedef struct {
    uint64_t hash, file_hash, file_size, source, aux_off;
    int32_t label;
    uint32_t height, width, channels, flags, folder, aux_len;
} set_entry;

static void encode_entry(const set_entry *e, uint8_t *out)
{
    memset(out, 0, IDX_ENTRY_SIZE);
    fmt_le_put64(out, e->hash);
    fmt_le_put64(out + 8, e->file_hash);
    fmt_le_put64(out + 16, e->file_size);
    fmt_le_put64(out + 24, e->source);
    fmt_le_put64(out + 32, e->aux_off);
    fmt_le_put32(out + 40, (uint32_t)e->label);
    fmt_le_put32(out + 44, e->height);
    fmt_le_put32(out + 48, e->width);
    fmt_le_put16(out + 52, (uint16_t)e->channels);
    fmt_le_put16(out + 54, (uint16_t)e->flags);
    fmt_le_put32(out + 56, e->folder);
    fmt_le_put32(out + 60, e->aux_len);
}

static void decode_entry(const uint8_t *in, set_entry *e)
{
    e->hash = fmt_le_get64(in);
    e->file_hash = fmt_le_get64(in + 8);
    e->file_size = fmt_le_get64(in + 16);
    e->source = fmt_le_get64(in + 24);
    e->aux_off = fmt_le_get64(in + 32);
    e->label = (int32_t)fmt_le_get32(in + 40);
    e->height = fmt_le_get32(in + 44);
    e->width = fmt_le_get32(in + 48);
    e->channels = fmt_le_get16(in + 52);
    e->flags = fmt_le_get16(in + 54);
    e->folder = fmt_le_get32(in + 56);
    e->aux_len = fmt_le_get32(in + 60);
}

/* A folder name that is one harmless path component (imageset.md "Files of a shard"). */
static int name_safe(const char *s, size_t n)
{
    if (n == 0 || n > IDX_MAX_FOLDER || s[0] == '.')
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '/' || c < 0x20 || c == 0x7f)
            return 0;
    }
    return 1;
}

/* "FOLDER/INDEX.EXT" (plus ".tmp" if tmp) into out, IDX_REL_MAX bytes. */
static void rel_name(char *out, const char *folder, size_t folder_len, uint64_t index,
                     const set_kind *k, int tmp)
{
    snprintf(out, IDX_REL_MAX, "%.*s/%08" PRIu64 "%s%s", (int)folder_len, folder, index, k->ext,
             tmp ? ".tmp" : "");
}

/* Decode limits that admit exactly the recorded size: a damaged header cannot make the decoder
 * allocate more than the sample needs. */
static fmt_decode_opts exact_decode_opts(uint32_t h, uint32_t w, uint32_t c)
{
    fmt_decode_opts o = { .channels = c };
    o.limits.max_side = h > w ? h : w;
    o.limits.max_pixels = (uint64_t)h * w;
    return o;
}

/* ---- writer ---- */

typedef struct {
    char *name;
    size_t len;
    int ready;                  /* known to exist (made or found) */
    int created;                /* made by this writer: removed again by abort if empty */
} set_folder;

typedef struct {
    int32_t label;
    uint32_t folder;
} set_label_folder;

typedef struct {
    const set_kind *kind;
    int dir_fd;
    char *idx_path;
    uint64_t first_index, fingerprint;
    int quality;
    char **classes;             /* copies of the class names (NULL where none was given) */
    size_t nclasses;
    uint32_t *class_folder;     /* per class: folder number + 1, 0 = not assigned yet */
    set_label_folder *extra;    /* labels outside the class list */
    size_t nextra, extra_cap;
    set_folder *folders;
    size_t nfolders, folders_cap;
    uint64_t folders_size;      /* bytes of the encoded folder table */
    uint8_t *entries;
    size_t entries_cap;
    fmt_writer_stats st;        /* count, sums */
    uint8_t *aux;
    size_t aux_len, aux_cap;
    uint64_t images_size;
    int err;                    /* first I/O error: the writer is failed */
} set_writer;

static void writer_free(set_writer *w)
{
    if (w->dir_fd >= 0)
        close(w->dir_fd);
    free(w->idx_path);
    for (size_t i = 0; i < w->nclasses; i++)
        free(w->classes[i]);
    free(w->classes);
    free(w->class_folder);
    free(w->extra);
    for (size_t i = 0; i < w->nfolders; i++)
        free(w->folders[i].name);
    free(w->folders);
    free(w->entries);
    free(w->aux);
    free(w);
}

/* Remove the image files this writer renamed into place, any index temp file, and the folders it
 * created (rmdir fails harmlessly on a folder other shards also use). */
static void remove_written(set_writer *w)
{
    char rel[IDX_REL_MAX];
    for (uint64_t i = 0; i < w->st.count; i++) {
        const set_folder *f = &w->folders[fmt_le_get32(w->entries + i * IDX_ENTRY_SIZE + 56)];
        rel_name(rel, f->name, f->len, w->first_index + i, w->kind, 0);
        unlinkat(w->dir_fd, rel, 0);
    }
    for (size_t i = 0; i < w->nfolders; i++) {
        if (w->folders[i].created)
            unlinkat(w->dir_fd, w->folders[i].name, AT_REMOVEDIR);
    }
    size_t n = strlen(w->idx_path);
    char *tmp = malloc(n + 5);
    if (tmp) {
        memcpy(tmp, w->idx_path, n);
        memcpy(tmp + n, ".tmp", 5);
        unlink(tmp);
        free(tmp);
    }
}

static int set_w_open(const set_kind *k, void **out, const fmt_writer_opts *o)
{
    *out = NULL;
    if (!o || !o->dir || !o->name || !o->name[0] || strchr(o->name, '/') ||
        (o->nclasses && !o->classes))
        return FMT_EINVAL;
    int quality = o->quality ? o->quality : IDX_DEFAULT_QUALITY;
    if (quality < 1 || quality > 100)
        return FMT_EINVAL;
    set_writer *w = calloc(1, sizeof *w);
    if (!w)
        return ENOMEM;
    int rc = 0;
    w->kind = k;
    w->dir_fd = -1;
    w->first_index = o->first_index;
    w->fingerprint = o->fingerprint;
    w->quality = k->format == SET_JPEG ? quality : 0;
    if (asprintf(&w->idx_path, "%s/%s.idx", o->dir, o->name) < 0) {
        w->idx_path = NULL;
        rc = ENOMEM;
        goto leave;
    }
    /* the class names are copied: the caller's list need not outlive open */
    if (o->nclasses) {
        w->classes = calloc(o->nclasses, sizeof *w->classes);
        w->class_folder = calloc(o->nclasses, sizeof *w->class_folder);
        if (!w->classes || !w->class_folder) {
            rc = ENOMEM;
            goto leave;
        }
        w->nclasses = o->nclasses;
        for (size_t i = 0; i < o->nclasses; i++) {
            if (o->classes[i] && !(w->classes[i] = strdup(o->classes[i]))) {
                rc = ENOMEM;
                goto leave;
            }
        }
    }
    w->dir_fd = open(o->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (w->dir_fd < 0) {
        rc = errno;
        goto leave;
    }
    /* An index vouches for files this shard is about to overwrite: it goes first, durably. */
    const char *base = strrchr(w->idx_path, '/') + 1;
    if (unlinkat(w->dir_fd, base, 0) == 0) {
        if (fsync(w->dir_fd) != 0 && errno != EINVAL)
            rc = errno;
    } else if (errno != ENOENT) {
        rc = errno;
    }
leave:
    if (rc)
        writer_free(w);
    else
        *out = w;
    return rc;
}

/* The folder number for label, assigning a folder on first use. ENOMEM leaves w unchanged. */
static int folder_for(set_writer *w, int32_t label, uint32_t *out)
{
    int in_list = label >= 0 && (uint64_t)label < w->nclasses;
    if (in_list && w->class_folder[label]) {
        *out = w->class_folder[label] - 1;
        return 0;
    }
    if (!in_list) {
        for (size_t i = 0; i < w->nextra; i++) {
            if (w->extra[i].label == label) {
                *out = w->extra[i].folder;
                return 0;
            }
        }
    }
    if (w->nfolders >= UINT32_MAX - 1)
        return FMT_ETOOBIG;
    char *name;
    const char *cls = in_list ? w->classes[label] : NULL;
    if (cls && name_safe(cls, strlen(cls)))
        name = strdup(cls);
    else if (asprintf(&name, "%" PRId32, label) < 0)
        name = NULL;
    if (!name)
        return ENOMEM;
    if (fmt_grow((void **)&w->folders, &w->folders_cap, w->nfolders * sizeof *w->folders,
             sizeof *w->folders) ||
        (!in_list && fmt_grow((void **)&w->extra, &w->extra_cap, w->nextra * sizeof *w->extra,
                          sizeof *w->extra))) {
        free(name);
        return ENOMEM;
    }
    uint32_t id = (uint32_t)w->nfolders;
    size_t len = strlen(name);
    w->folders[w->nfolders++] = (set_folder){ .name = name, .len = len };
    w->folders_size += 2 + len;
    if (in_list)
        w->class_folder[label] = id + 1;
    else
        w->extra[w->nextra++] = (set_label_folder){ .label = label, .folder = id };
    *out = id;
    return 0;
}

static int write_all(int fd, const uint8_t *p, size_t len)
{
    while (len) {
        ssize_t r = write(fd, p, len);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return errno;
        }
        if (r == 0)
            return EIO;
        p += r;
        len -= (size_t)r;
    }
    return 0;
}

/* Write data as the image file of dataset index `index` in folder f: FILE.tmp, then rename. */
static int write_image(set_writer *w, set_folder *f, uint64_t index, const uint8_t *data,
                       size_t len)
{
    char tmp[IDX_REL_MAX], final[IDX_REL_MAX];
    rel_name(tmp, f->name, f->len, index, w->kind, 1);
    rel_name(final, f->name, f->len, index, w->kind, 0);
    int fd = -1;
    /* another shard's abort may remove an empty folder between our mkdir and open: retry */
    for (int attempt = 0; fd < 0; attempt++) {
        if (!f->ready) {
            if (mkdirat(w->dir_fd, f->name, 0755) == 0)
                f->created = 1;
            else if (errno != EEXIST)
                return errno;
            f->ready = 1;
        }
        fd = openat(w->dir_fd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) {
            if (errno != ENOENT || attempt >= 2)
                return errno;
            f->ready = 0;
        }
    }
    int rc = write_all(fd, data, len);
    if (close(fd) != 0 && !rc)
        rc = errno;
    if (!rc && renameat(w->dir_fd, tmp, w->dir_fd, final) != 0)
        rc = errno;
    if (rc)
        unlinkat(w->dir_fd, tmp, 0);
    return rc;
}

static int set_w_add(void *wp, const fmt_sample_meta *m, const void *pixels,
                     uint64_t *stored_hash)
{
    set_writer *w = wp;
    if (w->err)
        return FMT_ESTATE;
    if (fmt_sample_meta_check(m) || !pixels)
        return FMT_EINVAL;
    uint32_t aux_len = m->aux ? m->aux_len : 0;
    uint64_t len;
    if (fmt_shape_bytes(m->height, m->width, m->channels, &len) || len > SIZE_MAX)
        return FMT_ETOOBIG;

    fmt_image img = { .pixels = (uint8_t *)pixels, .width = m->width, .height = m->height,
                      .channels = m->channels };
    uint8_t *file = NULL;
    size_t file_len = 0;
    uint64_t hash = m->hash;
    int rc;
    switch (w->kind->format) {
    case SET_PNG0:
        rc = fmt_png_encode(&img, 0, &file, &file_len);
        break;
    case SET_BMP:
        rc = fmt_bmp_encode(&img, &file, &file_len);
        break;
    default: {
        fmt_jpeg_opts jo = { .quality = w->quality, .subsampling = 420 };
        rc = fmt_jpeg_encode(&img, &jo, &file, &file_len);
        if (rc)
            break;
        /* lossy: what a reader will see is the decoder's output, so that is what is hashed */
        fmt_decode_opts dopt = exact_decode_opts(m->height, m->width, m->channels);
        fmt_image back;
        rc = fmt_image_decode(file, file_len, &dopt, &back, NULL);
        if (rc)
            break;
        if (back.width != m->width || back.height != m->height || back.channels != m->channels)
            rc = FMT_ECORRUPT;
        else
            hash = fmt_hash64(back.pixels, (size_t)len);
        fmt_image_free(&back);
        break;
    }
    }
    if (rc)
        goto leave;

    /* memory before the file: a failed allocation leaves nothing half-done, the writer usable */
    uint32_t folder;
    uint64_t images_size;
    if (__builtin_add_overflow(w->images_size, (uint64_t)file_len, &images_size) ||
        images_size > INT64_MAX) {
        rc = FMT_ETOOBIG;
        goto leave;
    }
    if ((rc = folder_for(w, m->label, &folder)))
        goto leave;
    if (fmt_grow((void **)&w->entries, &w->entries_cap, (size_t)w->st.count * IDX_ENTRY_SIZE,
             IDX_ENTRY_SIZE) ||
        fmt_grow((void **)&w->aux, &w->aux_cap, w->aux_len, aux_len)) {
        rc = ENOMEM;
        goto leave;
    }

    rc = write_image(w, &w->folders[folder], w->first_index + w->st.count, file, file_len);
    if (rc) {
        w->err = rc;
        goto leave;
    }

    set_entry e = {
        .hash = hash, .file_hash = fmt_hash64(file, file_len), .file_size = file_len,
        .source = m->source, .aux_off = aux_len ? w->aux_len : 0, .label = m->label,
        .height = m->height, .width = m->width, .channels = m->channels,
        .flags = aux_len ? IDX_ENTRY_AUX : 0, .folder = folder, .aux_len = aux_len,
    };
    encode_entry(&e, w->entries + (size_t)w->st.count * IDX_ENTRY_SIZE);
    if (aux_len) {
        memcpy(w->aux + w->aux_len, m->aux, aux_len);
        w->aux_len += aux_len;
    }
    fmt_writer_stats_add(&w->st, m);
    w->images_size = images_size;
    if (stored_hash)
        *stored_hash = hash;
leave:
    free(file);
    return rc;
}

static uint64_t set_w_count(const void *wp)
{
    return ((const set_writer *)wp)->st.count;
}

static uint64_t index_size(const set_writer *w)
{
    return IDX_HEADER_SIZE + w->st.count * IDX_ENTRY_SIZE + w->folders_size + w->aux_len +
           IDX_TRAILER_SIZE;
}

static uint64_t set_w_size(const void *wp)
{
    const set_writer *w = wp;
    return index_size(w) + w->images_size;
}

/* a + b + c, UINT64_MAX on overflow */
static uint64_t cost_sum(uint64_t a, uint64_t b, uint64_t c)
{
    uint64_t r;
    if (__builtin_add_overflow(a, b, &r) || __builtin_add_overflow(r, c, &r))
        return UINT64_MAX;
    return r;
}

/* PNG-0: stored deflate blocks add 5 bytes per 64 KiB and each row a filter byte (at most
 * payload/64 for rows of 64 bytes or more); signature, IHDR, IDAT framing and IEND about 64. */
static uint64_t png0_w_cost(uint64_t payload_len, uint32_t aux_len, uint32_t align)
{
    return cost_sum(payload_len, payload_len / 64 + 64, (uint64_t)IDX_ENTRY_SIZE + aux_len);
}

/* BMP: rows padded to 4 bytes, 54 bytes of headers and a 1 KiB palette for gray. */
static uint64_t bmp_w_cost(uint64_t payload_len, uint32_t aux_len, uint32_t align)
{
    return cost_sum(payload_len, payload_len / 64 + 1078, (uint64_t)IDX_ENTRY_SIZE + aux_len);
}

/* JPEG: the uncompressed size, as backend.h asks of compressed backends (an upper estimate). */
static uint64_t jpeg_w_cost(uint64_t payload_len, uint32_t aux_len, uint32_t align)
{
    return cost_sum(payload_len, 1024, (uint64_t)IDX_ENTRY_SIZE + aux_len);
}

/* Exactly what the writer would store for this sample: the image file encoded in memory (the
 * same encoder and options as set_w_add), its index entry and its aux record; 0 on failure. */
static uint64_t set_sample_bytes(int format, const fmt_writer_opts *o, const fmt_sample_meta *m,
                                 const void *pixels)
{
    fmt_image img = { .pixels = (uint8_t *)pixels, .width = m->width, .height = m->height,
                      .channels = m->channels };
    uint8_t *file = NULL;
    size_t file_len = 0;
    int rc;
    if (format == SET_PNG0) {
        rc = fmt_png_encode(&img, 0, &file, &file_len);
    } else if (format == SET_BMP) {
        rc = fmt_bmp_encode(&img, &file, &file_len);
    } else {
        fmt_jpeg_opts jo = { .quality = o && o->quality ? o->quality : 90, .subsampling = 420 };
        rc = fmt_jpeg_encode(&img, &jo, &file, &file_len);
    }
    free(file);
    if (rc)
        return 0;
    return cost_sum(file_len, IDX_ENTRY_SIZE, m->aux ? m->aux_len : 0);
}

static uint64_t png0_sample_bytes(const fmt_writer_opts *o, const fmt_sample_meta *m,
                                  const void *pixels)
{
    return set_sample_bytes(SET_PNG0, o, m, pixels);
}

static uint64_t bmp_sample_bytes(const fmt_writer_opts *o, const fmt_sample_meta *m,
                                 const void *pixels)
{
    return set_sample_bytes(SET_BMP, o, m, pixels);
}

static uint64_t jpeg_sample_bytes(const fmt_writer_opts *o, const fmt_sample_meta *m,
                                  const void *pixels)
{
    return set_sample_bytes(SET_JPEG, o, m, pixels);
}

static void set_w_abort(void *wp)
{
    set_writer *w = wp;
    if (!w)
        return;
    remove_written(w);
    writer_free(w);
}

static int set_w_finish(void *wp, uint64_t input_end, fmt_shard_info *info)
{
    set_writer *w = wp;
    uint8_t *buf = NULL;
    int rc = w->err, index_written = 0;
    if (rc)
        goto fail;
    /* one syncfs instead of an fsync per image: it writes back the image files and the
     * directory entries of their renames, and reports writeback errors since dir_fd was opened */
    if (syncfs(w->dir_fd) != 0) {
        rc = errno;
        goto fail;
    }
    uint64_t size = index_size(w);
    if (size > SIZE_MAX || !(buf = calloc(1, (size_t)size))) {
        rc = ENOMEM;
        goto fail;
    }
    uint64_t entries_bytes = w->st.count * IDX_ENTRY_SIZE;
    uint64_t folders_offset = IDX_HEADER_SIZE + entries_bytes;
    uint64_t aux_offset = folders_offset + w->folders_size;
    memcpy(buf, IDX_MAGIC, 8);
    fmt_le_put16(buf + 8, IDX_VERSION_MAJOR);
    fmt_le_put16(buf + 10, IDX_VERSION_MINOR);
    fmt_le_put32(buf + 12, IDX_HEADER_SIZE);
    fmt_le_put32(buf + 16, (uint32_t)w->kind->format);
    fmt_le_put32(buf + 20, (uint32_t)w->quality);
    fmt_le_put64(buf + 24, w->st.count);
    fmt_le_put64(buf + 32, w->first_index);
    fmt_le_put64(buf + 40, w->fingerprint);
    fmt_le_put64(buf + 48, input_end);
    for (int c = 0; c < 3; c++) {
        fmt_le_put64(buf + 56 + 8 * c, w->st.sum[c]);
        fmt_le_put64(buf + 80 + 8 * c, w->st.sumsq[c]);
    }
    fmt_le_put64(buf + 104, folders_offset);
    fmt_le_put64(buf + 112, w->folders_size);
    fmt_le_put32(buf + 120, (uint32_t)w->nfolders);
    fmt_le_put64(buf + 128, aux_offset);
    fmt_le_put64(buf + 136, w->aux_len);
    fmt_le_put64(buf + 144, size);
    fmt_le_put64(buf + 152, w->images_size);
    if (entries_bytes)
        memcpy(buf + IDX_HEADER_SIZE, w->entries, (size_t)entries_bytes);
    uint8_t *p = buf + folders_offset;
    for (size_t i = 0; i < w->nfolders; i++) {
        fmt_le_put16(p, (uint16_t)w->folders[i].len);
        memcpy(p + 2, w->folders[i].name, w->folders[i].len);
        p += 2 + w->folders[i].len;
    }
    if (w->aux_len)
        memcpy(buf + aux_offset, w->aux, w->aux_len);
    uint64_t hash = XXH3_64bits(buf, (size_t)size - IDX_TRAILER_SIZE);
    fmt_le_put64(buf + size - IDX_TRAILER_SIZE, hash);

    /* a failure from here on (the directory fsync after the rename) may leave the index in
     * place, vouching for files about to be removed: it goes too */
    index_written = 1;
    rc = fmt_write_file_atomic(w->idx_path, buf, (size_t)size);
    if (rc)
        goto fail;
    if (info) {
        memset(info, 0, sizeof *info);
        info->samples = w->st.count;
        info->first_index = w->first_index;
        info->fingerprint = w->fingerprint;
        info->input_end = input_end;
        memcpy(info->sum, w->st.sum, sizeof info->sum);
        memcpy(info->sumsq, w->st.sumsq, sizeof info->sumsq);
        info->bytes = size + w->images_size;
        info->hash = hash;
    }
    free(buf);
    writer_free(w);
    return 0;
fail:
    if (index_written)
        unlink(w->idx_path);
    remove_written(w);
    free(buf);
    writer_free(w);
    return rc;
}

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
        if (e.channels != 1 && e.channels != 3)
            return fmt_fail(msg, FMT_ECORRUPT, "entry %" PRIu64 ": bad channel count %" PRIu32,
                            i, e.channels);
        if (!e.height || !e.width)
            return fmt_fail(msg, FMT_ECORRUPT, "entry %" PRIu64 ": zero height or width", i);
        if (e.label < -1)
            return fmt_fail(msg, FMT_ECORRUPT, "entry %" PRIu64 ": bad label %" PRId32, i,
                            e.label);
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

int fmt_imageset_sample_path(const void *sp, uint64_t i, char *buf, size_t len)
{
    const set_shard *s = sp;
    assert(s->tag == SET_SHARD_TAG);
    if (i >= s->info.samples)
        return FMT_EINVAL;
    set_entry e;
    shard_entry(s, i, &e);
    const set_name *f = &s->folders[e.folder];
    char rel[IDX_REL_MAX];
    rel_name(rel, f->name, f->len, s->info.first_index + i, s->kind, 0);
    int n = snprintf(buf, len, "%s/%s", s->dir, rel);
    return n < 0 || (size_t)n >= len ? ENAMETOOLONG : 0;
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

int fmt_imageset_read(const void *sp, uint64_t i, void *dst, fmt_msg *msg)
{
    const set_shard *s = sp;
    if (msg)
        msg->text[0] = '\0';
    char path[PATH_MAX];
    int rc = fmt_imageset_sample_path(s, i, path, sizeof path);
    if (rc)
        return rc;
    set_entry e;
    shard_entry(s, i, &e);
    fmt_image img;
    rc = load_sample(&e, path, NULL, &img, msg);
    if (rc)
        return rc;
    memcpy(dst, img.pixels, (size_t)e.height * e.width * e.channels);
    fmt_image_free(&img);
    return 0;
}

int fmt_imageset_check(const void *sp, uint64_t i, fmt_msg *msg)
{
    const set_shard *s = sp;
    if (msg)
        msg->text[0] = '\0';
    char path[PATH_MAX];
    int rc = fmt_imageset_sample_path(s, i, path, sizeof path);
    if (rc)
        return rc;
    set_entry e;
    shard_entry(s, i, &e);
    fmt_image img;
    uint8_t *file = NULL;
    rc = load_sample(&e, path, &file, &img, msg);
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

static int png0_w_open(void **w, const fmt_writer_opts *o)
{
    return set_w_open(&kind_png0, w, o);
}

static int bmp_w_open(void **w, const fmt_writer_opts *o)
{
    return set_w_open(&kind_bmp, w, o);
}

static int jpeg_w_open(void **w, const fmt_writer_opts *o)
{
    return set_w_open(&kind_jpeg, w, o);
}

static int png0_r_open(void **s, const char *dir, const char *path, fmt_access access,
                       fmt_msg *msg)
{
    return set_r_open(&kind_png0, s, dir, path, access, msg);
}

static int bmp_r_open(void **s, const char *dir, const char *path, fmt_access access,
                      fmt_msg *msg)
{
    return set_r_open(&kind_bmp, s, dir, path, access, msg);
}

static int jpeg_r_open(void **s, const char *dir, const char *path, fmt_access access,
                       fmt_msg *msg)
{
    return set_r_open(&kind_jpeg, s, dir, path, access, msg);
}

/* The access mode does not apply: every sample is a file read whole and decoded. There is no
 * r_advise: files are opened per read, so there is no open descriptor to advise. */
const fmt_backend fmt_backend_png0 = {
    .name = "png0", .version = IDX_VERSION_MAJOR, .suffix = ".idx",
    .w_open = png0_w_open, .w_add = set_w_add, .w_count = set_w_count, .w_size = set_w_size,
    .w_cost = png0_w_cost, .w_sample_bytes = png0_sample_bytes, .w_finish = set_w_finish,
    .w_abort = set_w_abort,
    .r_open = png0_r_open, .r_close = set_r_close, .r_info = set_r_info, .r_get = set_r_get,
    .r_read = set_r_read, .r_check = set_r_check, .r_advise = NULL,
    .r_sample_path = fmt_imageset_sample_path,
};

const fmt_backend fmt_backend_bmp = {
    .name = "bmp", .version = IDX_VERSION_MAJOR, .suffix = ".idx",
    .w_open = bmp_w_open, .w_add = set_w_add, .w_count = set_w_count, .w_size = set_w_size,
    .w_cost = bmp_w_cost, .w_sample_bytes = bmp_sample_bytes, .w_finish = set_w_finish,
    .w_abort = set_w_abort,
    .r_open = bmp_r_open, .r_close = set_r_close, .r_info = set_r_info, .r_get = set_r_get,
    .r_read = set_r_read, .r_check = set_r_check, .r_advise = NULL,
    .r_sample_path = fmt_imageset_sample_path,
};

const fmt_backend fmt_backend_jpeg = {
    .name = "jpeg", .version = IDX_VERSION_MAJOR, .suffix = ".idx",
    .w_open = jpeg_w_open, .w_add = set_w_add, .w_count = set_w_count, .w_size = set_w_size,
    .w_cost = jpeg_w_cost, .w_sample_bytes = jpeg_sample_bytes, .w_finish = set_w_finish,
    .w_abort = set_w_abort,
    .r_open = jpeg_r_open, .r_close = set_r_close, .r_info = set_r_info, .r_get = set_r_get,
    .r_read = set_r_read, .r_check = set_r_check, .r_advise = NULL,
    .r_sample_path = fmt_imageset_sample_path,
};
