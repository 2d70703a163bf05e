/* imageset_write.c - the writer of the per-image set backends png0, bmp and jpeg (spec:
 * formats/imageset.md "Writing"; the tables and the reader: imageset.c).
 *
 * Every image goes to FOLDER/INDEX.EXT.tmp and is renamed into place, all relative to a
 * descriptor of the dataset directory (no path length limits, no re-resolving of the directory).
 * Durability comes from one syncfs(2) at finish rather than an fsync per file; the index is then
 * written atomically and is the shard's commit record.
 */
#include "imageset_int.h"

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

int fmt_set_w_open(const set_kind *k, void **out, const fmt_writer_opts *o)
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

int fmt_set_w_add(void *wp, const fmt_sample_meta *m, const void *pixels,
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

uint64_t fmt_set_w_count(const void *wp)
{
    return ((const set_writer *)wp)->st.count;
}

static uint64_t index_size(const set_writer *w)
{
    return IDX_HEADER_SIZE + w->st.count * IDX_ENTRY_SIZE + w->folders_size + w->aux_len +
           IDX_TRAILER_SIZE;
}

uint64_t fmt_set_w_size(const void *wp)
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
uint64_t fmt_set_png0_w_cost(uint64_t payload_len, uint32_t aux_len, uint32_t align)
{
    return cost_sum(payload_len, payload_len / 64 + 64, (uint64_t)IDX_ENTRY_SIZE + aux_len);
}

/* BMP: rows padded to 4 bytes, 54 bytes of headers and a 1 KiB palette for gray. */
uint64_t fmt_set_bmp_w_cost(uint64_t payload_len, uint32_t aux_len, uint32_t align)
{
    return cost_sum(payload_len, payload_len / 64 + 1078, (uint64_t)IDX_ENTRY_SIZE + aux_len);
}

/* JPEG: the uncompressed size, as backend.h asks of compressed backends (an upper estimate). */
uint64_t fmt_set_jpeg_w_cost(uint64_t payload_len, uint32_t aux_len, uint32_t align)
{
    return cost_sum(payload_len, 1024, (uint64_t)IDX_ENTRY_SIZE + aux_len);
}

/* Exactly what the writer would store for this sample: the image file encoded in memory (the
 * same encoder and options as fmt_set_w_add), its index entry and its aux record; 0 on failure. */
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

uint64_t fmt_set_png0_sample_bytes(const fmt_writer_opts *o, const fmt_sample_meta *m,
                                   const void *pixels)
{
    return set_sample_bytes(SET_PNG0, o, m, pixels);
}

uint64_t fmt_set_bmp_sample_bytes(const fmt_writer_opts *o, const fmt_sample_meta *m,
                                  const void *pixels)
{
    return set_sample_bytes(SET_BMP, o, m, pixels);
}

uint64_t fmt_set_jpeg_sample_bytes(const fmt_writer_opts *o, const fmt_sample_meta *m,
                                   const void *pixels)
{
    return set_sample_bytes(SET_JPEG, o, m, pixels);
}

void fmt_set_w_abort(void *wp)
{
    set_writer *w = wp;
    if (!w)
        return;
    remove_written(w);
    writer_free(w);
}

int fmt_set_w_finish(void *wp, uint64_t input_end, fmt_shard_info *info)
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

