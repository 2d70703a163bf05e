/* imageset_int.h - what the two halves of the per-image set backends share (imageset.c: the
 * reader and the three tables; imageset_write.c: the writer): the index layout of
 * formats/imageset.md, the set kinds and the writer's entry points. Internal to formats/. */
#ifndef FMT_IMAGESET_INT_H
#define FMT_IMAGESET_INT_H

#include "backend.h"
#include "image.h"
#include "le.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

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

typedef struct {
    uint64_t hash, file_hash, file_size, source, aux_off;
    int32_t label;
    uint32_t height, width, channels, flags, folder, aux_len;
} set_entry;

static inline void encode_entry(const set_entry *e, uint8_t *out)
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

static inline void decode_entry(const uint8_t *in, set_entry *e)
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
static inline int name_safe(const char *s, size_t n)
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
static inline void rel_name(char *out, const char *folder, size_t folder_len, uint64_t index,
                     const set_kind *k, int tmp)
{
    snprintf(out, IDX_REL_MAX, "%.*s/%08" PRIu64 "%s%s", (int)folder_len, folder, index, k->ext,
             tmp ? ".tmp" : "");
}

/* Decode limits that admit exactly the recorded size: a damaged header cannot make the decoder
 * allocate more than the sample needs. */
static inline fmt_decode_opts exact_decode_opts(uint32_t h, uint32_t w, uint32_t c)
{
    fmt_decode_opts o = { .channels = c };
    o.limits.max_side = h > w ? h : w;
    o.limits.max_pixels = (uint64_t)h * w;
    return o;
}

/* ---- the writer (imageset_write.c): the tables' w_ entries ---- */

int fmt_set_w_open(const set_kind *k, void **out, const fmt_writer_opts *o);
int fmt_set_w_add(void *wp, const fmt_sample_meta *m, const void *pixels,
                  uint64_t *stored_hash);
uint64_t fmt_set_w_count(const void *wp);
uint64_t fmt_set_w_size(const void *wp);
void fmt_set_w_abort(void *wp);
int fmt_set_w_finish(void *wp, uint64_t input_end, fmt_shard_info *info);
uint64_t fmt_set_png0_w_cost(uint64_t payload_len, uint32_t aux_len, uint32_t align);
uint64_t fmt_set_bmp_w_cost(uint64_t payload_len, uint32_t aux_len, uint32_t align);
uint64_t fmt_set_jpeg_w_cost(uint64_t payload_len, uint32_t aux_len, uint32_t align);
uint64_t fmt_set_png0_sample_bytes(const fmt_writer_opts *o, const fmt_sample_meta *m,
                                   const void *pixels);
uint64_t fmt_set_bmp_sample_bytes(const fmt_writer_opts *o, const fmt_sample_meta *m,
                                  const void *pixels);
uint64_t fmt_set_jpeg_sample_bytes(const fmt_writer_opts *o, const fmt_sample_meta *m,
                                   const void *pixels);

#endif
