/* fuzz_imageset - the .idx index of a per-image set shard (formats/imageset.md) from untrusted
 * bytes, opened through the r_open of the backend its format field names (png0 for anything but
 * 2 = bmp and 3 = jpeg, so that wrong formats are refused too), then every sample through r_get,
 * r_read, r_check and r_sample_path.
 *
 * For the first FZ_FILES samples the harness puts an image file at the sample's path before
 * reading it: a small image of the recorded shape (one pixel wider when the recorded source index
 * is 7 mod 8, so that a file whose size disagrees with its entry is read too), encoded the way the
 * set stores images. Other samples have no file and fail with ENOENT.
 *
 * The index ends in a hash of everything before it, and each entry records its file's size and
 * hashes. Each input therefore runs twice: as it is, and with the entries of the first FZ_FILES
 * samples made to match the files the harness will write (file_size, file_hash, pixel hash), then
 * images_size, file_size and the trailer hash recomputed, so that the fuzzer reaches the checks
 * behind them and the successful read and check of a sample.
 */
#include "common.h"

#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FZ_IDX_HEADER 160u
#define FZ_IDX_ENTRY 64u
#define FZ_IDX_TRAILER 8u
#define FZ_FILES 8u                 /* samples that get an image file */
#define FZ_FILE_MAX_PIXELS 4096u    /* larger recorded shapes get none */

static uint32_t fz_format_of(const fmt_backend *b)
{
    return b == &fmt_backend_bmp ? 2 : b == &fmt_backend_jpeg ? 3 : 1;
}

/* The file the harness writes for a sample: deterministic pixels of h x w x c, one pixel wider when
 * source % 8 == 7, encoded for the set's format (1 png0, 2 bmp, 3 jpeg). NULL when the shape is too
 * large or not one an encoder takes. *pix_hash (if not NULL) receives the hash of the pixels a
 * decoder gets back. */
static uint8_t *fz_image_file(uint32_t format, uint32_t h, uint32_t w, uint32_t c, uint64_t source,
                              size_t *len, uint64_t *pix_hash)
{
    if (source % 8 == 7 && w < UINT32_MAX)
        w++;
    if (!h || !w || (c != 1 && c != 3) || (uint64_t)h * w > FZ_FILE_MAX_PIXELS)
        return NULL;
    fmt_image img, dec;
    if (fmt_image_alloc(&img, w, h, c) != 0)
        return NULL;
    size_t n = (size_t)w * h * c;
    for (size_t k = 0; k < n; k++)
        img.pixels[k] = (uint8_t)(k * 37 + 11);
    uint8_t *out = NULL;
    int rc = format == 2 ? fmt_bmp_encode(&img, &out, len) :
             format == 3 ? fmt_jpeg_encode(&img, NULL, &out, len) :
                           fmt_png_encode(&img, 0, &out, len);
    if (rc == 0 && pix_hash) {
        fmt_decode_opts o = {.channels = c};
        *pix_hash = 0;
        if (fmt_image_decode(out, *len, &o, &dec, NULL) == 0) {
            *pix_hash = fmt_hash64(dec.pixels, (size_t)dec.width * dec.height * dec.channels);
            fmt_image_free(&dec);
        }
    }
    fmt_image_free(&img);
    return rc ? NULL : out;
}

static void fz_sample_file(const fmt_backend *b, void *s, uint64_t i, const fmt_sample *smp,
                           int after)
{
    char path[4096], dir[4096];
    if (i >= FZ_FILES || b->r_sample_path(s, i, path, sizeof path) != 0)
        return;
    snprintf(dir, sizeof dir, "%s", path);
    dirname(dir);
    if (after) {
        unlink(path);
        rmdir(dir);     /* fails while other samples' files are in it: fine */
        return;
    }
    size_t len;
    uint8_t *file = fz_image_file(fz_format_of(b), smp->height, smp->width, smp->channels,
                                  smp->source, &len, NULL);
    if (!file)
        return;
    mkdir(dir, 0700);
    /* the path is inside the scratch directory: folder names in an index are single, safe path
     * components (r_open checks), which is what this asserts */
    FZ_ASSERT(strncmp(path, fz_dir(), strlen(fz_dir())) == 0 && !strstr(path, "/../"));
    char rel[4096];
    snprintf(rel, sizeof rel, "%s", path + strlen(fz_dir()) + 1);
    char written[4096];
    fz_write(rel, file, len, written, sizeof written);
    free(file);
}

static void fz_idx_run(const uint8_t *data, size_t size)
{
    char path[4096];
    fz_write("shard-00000.idx", data, size, path, sizeof path);
    const fmt_backend *b = &fmt_backend_png0;
    uint32_t format = size >= 20 ? fz_get32(data + 16) : 0;
    if (format == 2)
        b = &fmt_backend_bmp;
    else if (format == 3)
        b = &fmt_backend_jpeg;
    fz_backend_hook(b, fz_dir(), path, FMT_ACCESS_MMAP, fz_sample_file);
}

/* Make the first FZ_FILES entries describe the files fz_sample_file will write, then the sizes
 * and the trailer hash consistent with the bytes. */
static void fz_idx_fixup(uint8_t *b, size_t size)
{
    uint32_t format = fz_get32(b + 16);
    uint64_t count = fz_get64(b + 24);
    if (count <= (size - FZ_IDX_HEADER - FZ_IDX_TRAILER) / FZ_IDX_ENTRY) {
        uint64_t total = 0;
        for (uint64_t i = 0; i < count; i++) {
            uint8_t *e = b + FZ_IDX_HEADER + i * FZ_IDX_ENTRY;
            size_t len;
            uint64_t pix_hash;
            uint8_t *file = i < FZ_FILES ?
                fz_image_file(format == 2 || format == 3 ? format : 1, fz_get32(e + 44),
                              fz_get32(e + 48), e[52] | (uint32_t)e[53] << 8, fz_get64(e + 24),
                              &len, &pix_hash) : NULL;
            if (file) {
                fz_put64(e, pix_hash);
                fz_put64(e + 8, fmt_hash64(file, len));
                fz_put64(e + 16, len);
                free(file);
            }
            total += fz_get64(e + 16);
        }
        fz_put64(b + 152, total);
    }
    fz_put64(b + 144, size);
    fz_put64(b + size - FZ_IDX_TRAILER, fmt_hash64(b, size - FZ_IDX_TRAILER));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_idx_run(data, size);
    if (size < FZ_IDX_HEADER + FZ_IDX_TRAILER)
        return 0;
    uint8_t *fixed = malloc(size);
    if (!fixed)
        return 0;
    memcpy(fixed, data, size);
    fz_idx_fixup(fixed, size);
    if (memcmp(fixed, data, size) != 0)
        fz_idx_run(fixed, size);
    free(fixed);
    return 0;
}
