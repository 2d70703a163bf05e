/* raw_int.h - what the raw format's codecs and reader (raw.c), its writer (raw_write.c) and its
 * backend adapter (rawbackend.c) share beyond raw.h. Internal to formats/. */
#ifndef FMT_RAW_INT_H
#define FMT_RAW_INT_H

#include <stddef.h>
#include <stdint.h>

#include "raw.h"

#define RAW_MAGIC "SHARDRAW"
#define RAW_V1 1u               /* payloads at multiples of align (writer: an alignment given) */
#define RAW_V2 2u               /* packed layout, data_offset, per-entry codec */
#define RAW_VERSION_MINOR 0u
#define RAW_HASHED_BYTES 248u   /* header_hash covers header bytes 0..247 */

static inline int fmt_raw_align_ok(uint32_t align)
{
    return align >= FMT_RAW_MIN_ALIGN && align <= FMT_RAW_MAX_ALIGN && (align & (align - 1)) == 0;
}

/* x rounded up to a power of two a; 0 on overflow (x > 0 never rounds to 0 otherwise). */
static inline uint64_t fmt_raw_round_up(uint64_t x, uint64_t a)
{
    uint64_t r;
    if (__builtin_add_overflow(x, a - 1, &r))
        return 0;
    return r & ~(a - 1);
}

/* Entry e as its FMT_RAW_ENTRY_SIZE bytes of a shard of that version (raw.md "Index entry"). */
void fmt_raw_encode_entry(const fmt_raw_entry *e, uint8_t *out, unsigned version);

/* A JPEG of the h x w x c pixels at quality (1..100, 0 = 90; 4:2:0), and the hash of what a
 * decoder gives back: 0, or the encoder's / decoder's error. *jpeg is malloc'd.
 * The writer's mixed mode stores it; the backend's w_sample_bytes sizes it the same way. */
int fmt_raw_jpeg_encode(const void *pixels, uint32_t h, uint32_t w, uint32_t c, int quality,
                        uint8_t **jpeg, size_t *len, uint64_t *hash);

#endif
