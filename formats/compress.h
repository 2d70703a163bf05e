/* compress.h - the payload codecs of compressed raw shards (formats/raw.md, "codec"): LZ4 and
 * Zstandard on one sample's pixels at a time, so that any sample decodes on its own (O(1) random
 * access) straight into the caller's buffer.
 *
 * A codec spec, as `shardc build --compress` takes it: "lz4" (LZ4's fast mode), "lz4:L" with L in
 * 1..12 (1: the fast mode, 2..12: LZ4 HC at level L), "zstd" (level 1), "zstd:L" with L in
 * -7..-1 or 1..19.
 *
 * Decoding trusts nothing: a block that does not decode to exactly the expected number of bytes
 * is FMT_ECORRUPT, and nothing is written past the destination's length.
 *
 * Thread-safety: every function may be called from any number of threads at once. Zstandard's
 * decoding contexts are kept per thread and freed when the thread exits.
 */
#ifndef FMT_COMPRESS_H
#define FMT_COMPRESS_H

#include <stddef.h>
#include <stdint.h>

#include "fmt.h"

/* The codec numbers stored in raw shard entries (raw.md, entry flags bits 8..11). */
enum {
    FMT_CODEC_NONE = 0,
    FMT_CODEC_LZ4 = 1,
    FMT_CODEC_ZSTD = 2,
    FMT_CODEC_COUNT
};

typedef struct {
    int codec;                  /* FMT_CODEC_* */
    int level;                  /* as in the spec; 0 = the codec's default */
} fmt_codec_spec;

/* Parse a spec ("lz4", "zstd:9", ...; see above). FMT_EINVAL with msg saying why. "none" gives
 * FMT_CODEC_NONE. */
int fmt_codec_parse(const char *text, fmt_codec_spec *spec, fmt_msg *msg);

/* 0 if spec names a codec (FMT_CODEC_NONE included) and a level it has, else FMT_EINVAL. */
int fmt_codec_check(const fmt_codec_spec *spec);

/* The spec as text ("lz4", "zstd:3", ...) into buf (at least 16 bytes). */
void fmt_codec_format(const fmt_codec_spec *spec, char *buf, size_t len);

/* Name of a codec number ("none", "lz4", "zstd"), "unknown" otherwise. */
const char *fmt_codec_name(int codec);

/* Largest encoding of len bytes: what dst must hold for fmt_compress. 0 if len is too large for
 * the codec. */
size_t fmt_compress_bound(int codec, size_t len);

/* Encode src[0, len) into dst (cap bytes, at least fmt_compress_bound): *out receives the encoded
 * length. Errors: FMT_EINVAL (bad codec or level, cap too small), ENOMEM, FMT_ETOOBIG. */
int fmt_compress(const fmt_codec_spec *spec, const void *src, size_t len, void *dst, size_t cap,
                 size_t *out);

/* Decode src[0, stored) into dst, which must come out exactly len bytes. 0, FMT_ECORRUPT (the
 * block does not decode, or not to len bytes), FMT_EINVAL (unknown codec), ENOMEM. */
int fmt_decompress(int codec, const void *src, size_t stored, void *dst, size_t len);

#endif
