/* fuzz_codec - one compressed payload of a raw shard (formats/raw.md, codec) from untrusted bytes:
 * fmt_decompress and fmt_raw_decode, as a reader calls them on a block read from a shard.
 *
 * Input: byte 0 picks the codec (bit 0: LZ4 or Zstandard), bytes 1..3 the expected decoded length
 * (little-endian, 24 bits), the rest is the block. The destination is exactly that long, as a
 * reader's is, so ASan sees any write past it. A block that decodes must decode to exactly the
 * expected length, and, compressed again and decoded, give the same bytes back.
 */
#include "common.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "compress.h"
#include "raw.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4)
        return 0;
    int codec = (data[0] & 1) ? FMT_CODEC_ZSTD : FMT_CODEC_LZ4;
    size_t len = (size_t)data[1] | (size_t)data[2] << 8 | (size_t)data[3] << 16;
    const uint8_t *block = data + 4;
    size_t stored = size - 4;
    uint8_t *dst = malloc(len ? len : 1);
    if (!dst)
        return 0;
    int rc = fmt_decompress(codec, block, stored, dst, len);
    fz_trace(fmt_codec_name(codec), rc, NULL);
    FZ_ASSERT(rc == 0 || rc == FMT_ECORRUPT || rc == ENOMEM);
    if (rc == 0) {
        fz_touch(dst, len);
        /* the decoded bytes survive a round trip through the same codec */
        fmt_codec_spec spec = {codec, 0};
        size_t cap = fmt_compress_bound(codec, len), out;
        uint8_t *enc = malloc(cap ? cap : 1), *back = malloc(len ? len : 1);
        if (enc && back && cap && fmt_compress(&spec, dst, len, enc, cap, &out) == 0) {
            FZ_ASSERT(fmt_decompress(codec, enc, out, back, len) == 0);
            FZ_ASSERT(memcmp(back, dst, len) == 0);
        }
        free(enc);
        free(back);
    }
    /* the raw reader's path: decode and check the hash (here, of the first 8 bytes' worth) */
    if (stored) {
        fmt_raw_entry e = {.codec = (uint32_t)codec, .stored = stored, .length = len,
                           .hash = size >= 12 ? fz_get64(data + size - 8) : 0};
        fmt_msg msg;
        int r2 = fmt_raw_decode(&e, block, dst, &msg);
        FZ_ASSERT(r2 == 0 || r2 == FMT_ECORRUPT || r2 == FMT_EHASH || r2 == ENOMEM);
        FZ_ASSERT((rc == 0) == (r2 == 0 || r2 == FMT_EHASH));
        if (r2)
            FZ_ASSERT(msg.text[0] != '\0');
    }
    free(dst);
    return 0;
}
