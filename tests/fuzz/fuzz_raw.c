/* fuzz_raw - a raw shard (formats/raw.md) from untrusted bytes: fmt_raw_open, then every accessor
 * on every sample, mapped and unmapped (FMT_RAW_OPEN_NOMAP), and through fmt_backend_raw in pread
 * mode.
 *
 * The header and index are hash-protected, so random bytes almost never get past the hash checks.
 * Each input therefore runs twice: as it is, and with index_hash and header_hash recomputed over
 * the mutated bytes (when its index_offset lies inside the input), which lets the fuzzer reach
 * the field checks behind the hashes. Both are inputs a damaged or crafted file can present.
 */
#include "common.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "raw.h"

/* Check every sample through the raw reader's own accessors, with the file mapped (flags 0) or
 * read with pread (FMT_RAW_OPEN_NOMAP). */
static void fz_raw_direct(const char *path, unsigned flags)
{
    fmt_raw_shard *s;
    fmt_msg msg;
    int rc = fmt_raw_open_ex(&s, path, flags, &msg);
    fz_trace(flags ? "raw (nomap)" : "raw (mapped)", rc, &msg);
    if (rc) {
        FZ_ASSERT(s == NULL);
        return;
    }
    const fmt_raw_header *h = fmt_raw_get_header(s);
    const uint8_t *base = fmt_raw_base(s);
    FZ_ASSERT((base == NULL) == (flags == FMT_RAW_OPEN_NOMAP));
    uint64_t n = fmt_raw_count(s);
    FZ_ASSERT(n == h->sample_count);
    for (uint64_t i = 0; i < n; i++) {
        fmt_raw_entry e;
        fmt_raw_get_entry(s, i, &e);
        FZ_ASSERT(e.channels == 1 || e.channels == 3);
        FZ_ASSERT(e.length == (uint64_t)e.height * e.width * e.channels);
        FZ_ASSERT(e.offset >= h->data_offset && e.offset + e.stored <= h->index_offset);
        FZ_ASSERT(e.codec != FMT_RAW_CODEC_NONE || e.stored == e.length);
        if ((h->flags & FMT_RAW_FLAG_FIXED) && h->version_major == 1)
            FZ_ASSERT(e.offset == h->align + i * h->stride);
        const uint8_t *px = fmt_raw_pixels(s, i);
        if (e.codec != FMT_RAW_CODEC_NONE) {
            FZ_ASSERT(px == NULL);
            FZ_ASSERT(e.length / e.stored < 65536);
        } else if (base) {
            FZ_ASSERT(px == base + e.offset);
            fz_touch(px, (size_t)e.length);
        } else {
            FZ_ASSERT(px == NULL);
        }
        uint32_t alen;
        const uint8_t *aux = fmt_raw_aux(s, i, &alen);
        if (aux)
            fz_touch(aux, alen);
        else
            FZ_ASSERT(alen == 0);
        rc = fmt_raw_check_sample(s, i);
        FZ_ASSERT(rc == 0 || rc == FMT_EHASH || (e.codec && (rc == FMT_ECORRUPT || rc == ENOMEM)));
    }
    FZ_ASSERT(fmt_raw_check_sample(s, n) == FMT_EINVAL);
    fmt_raw_close(s);
}

static void fz_raw_run(const uint8_t *data, size_t size)
{
    char path[4096];
    fz_write("shard-00000.raw", data, size, path, sizeof path);
    fz_raw_direct(path, 0);
    fz_raw_direct(path, FMT_RAW_OPEN_NOMAP);
    fz_backend(&fmt_backend_raw, NULL, path, FMT_ACCESS_PREAD);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_raw_run(data, size);
    if (size < FMT_RAW_HEADER_SIZE)
        return 0;
    uint64_t index_offset = fz_get64(data + 32);
    if (index_offset > size)
        return 0;
    uint8_t *fixed = malloc(size);
    if (!fixed)
        return 0;
    memcpy(fixed, data, size);
    fz_put64(fixed + 160, fmt_hash64(fixed + index_offset, size - (size_t)index_offset));
    fz_put64(fixed + 248, fmt_hash64(fixed, 248));
    if (memcmp(fixed, data, FMT_RAW_HEADER_SIZE) != 0)
        fz_raw_run(fixed, size);
    free(fixed);
    return 0;
}
