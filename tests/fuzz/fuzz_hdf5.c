/* fuzz_hdf5 - an hdf5 shard (formats/hdf5.md) from untrusted bytes, opened through
 * fmt_backend_hdf5's r_open, then every sample through r_get, r_read and r_check.
 *
 * Two kinds of input:
 * - an HDF5 file (it starts with the HDF5 signature): written as the shard as it is. libhdf5
 *   parses such a file trusting much of it and crashes on many damaged files (README.md), so
 *   this mode mostly tests libhdf5; the access mode follows the input's length (even: mmap,
 *   odd: pread; HDF5 ignores bytes past its end of data);
 * - anything else is a recipe: the harness writes a well-formed HDF5 file with the HDF5 library
 *   from it (sample count, layout, storage, labels, shapes, offsets, hashes, aux records, each
 *   attribute and dataset, and one of them left out, mistyped or mis-sized, the content hash
 *   right or wrong), so that libhdf5 only ever parses files it wrote itself and every check of
 *   formats/hdf5read.c is reached. See fz_recipe below.
 */
#include "common.h"

#include <hdf5.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#define FZ_H5_SIG "\211HDF\r\n\032\n"
#define FZ_MAX_N 8u

typedef struct {
    const uint8_t *p;
    size_t n;
} fz_reader;

static uint8_t fz_byte(fz_reader *r)
{
    if (!r->n)
        return 0;
    r->n--;
    return *r->p++;
}

/* small values from one byte, any 64-bit value from nine */
static uint64_t fz_u64(fz_reader *r)
{
    uint8_t k = fz_byte(r);
    if (!(k & 0x80))
        return k;
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | fz_byte(r);
    return v;
}

enum { IT_FORMAT, IT_VERSION, IT_COUNT, IT_FIRST, IT_FINGERPRINT, IT_INPUT_END, IT_SUM, IT_SUMSQ,
       IT_HASH, IT_LABELS, IT_SHAPES, IT_HASHES, IT_SOURCES, IT_OFFSETS, IT_PIXELS, IT_AUX_LEN,
       IT_AUX, IT_COUNT_ITEMS };
enum { DMG_NONE, DMG_OMIT, DMG_TYPE, DMG_DIMS };

typedef struct {
    int item, kind;             /* the one damaged item and how */
    hid_t file, dcpl;
} fz_h5;

/* Write attribute or dataset `item` (rank 1 or 2, dims[0] rows), damaged if it is the chosen one:
 * left out, stored as a wrong integer type (64-bit signed, or 16-bit for 64-bit ones), or with
 * one row more (the extra row is zero). */
static void fz_put(fz_h5 *h, int item, int attr, const char *name, hid_t ftype, hid_t mtype,
                   size_t esize, int rank, const hsize_t *dims, const void *data, hid_t dcpl)
{
    int kind = h->item == item ? h->kind : DMG_NONE;
    if (kind == DMG_OMIT)
        return;
    hsize_t d[4];
    memcpy(d, dims, sizeof d[0] * (size_t)rank);
    const void *buf = data;
    void *grown = NULL;
    if (kind == DMG_TYPE)
        ftype = H5Tget_size(ftype) == 8 ? H5T_STD_I16LE : H5T_STD_I64LE;
    if (kind == DMG_DIMS) {
        size_t row = esize;
        for (int k = 1; k < rank; k++)
            row *= d[k];
        grown = calloc(d[0] + 1, row ? row : 1);
        FZ_ASSERT(grown != NULL);
        if (data && d[0] * row != 0)
            memcpy(grown, data, d[0] * row);
        buf = grown;
        d[0]++;
    }
    hid_t sp = H5Screate_simple(rank, d, NULL);
    hid_t o = attr ? H5Acreate2(h->file, name, ftype, sp, H5P_DEFAULT, H5P_DEFAULT)
                   : H5Dcreate2(h->file, name, ftype, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (o >= 0 && buf) {
        hsize_t total = 1;
        for (int k = 0; k < rank; k++)
            total *= d[k];
        if (total)
            attr ? H5Awrite(o, mtype, buf) : H5Dwrite(o, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
    }
    if (o >= 0)
        attr ? H5Aclose(o) : H5Dclose(o);
    H5Sclose(sp);
    free(grown);
}

/* The recipe: flags byte (bit 0 flat layout, 1 chunked pixels, 2 deflate, 3 aux datasets,
 * 4 content hash from the recipe, 5 variable-length format string, 6 one damaged item: next byte
 * = item + 17 * kind), then the sample count (mod 9), the fixed shape, first_index, fingerprint,
 * input_end, and per sample label, shape (flat), offset shift (flat), hash choice, source, aux
 * length; missing bytes read as 0. Returns 0 if a file was written. */
static int fz_recipe(const uint8_t *data, size_t size, const char *path)
{
    fz_reader r = {data, size};
    uint8_t flags = fz_byte(&r);
    fz_h5 h = {.item = -1, .kind = DMG_NONE};
    if (flags & 0x40) {
        uint8_t d = fz_byte(&r);
        h.item = d % IT_COUNT_ITEMS;
        h.kind = 1 + (d / IT_COUNT_ITEMS) % 3;
    }
    uint64_t n = fz_byte(&r) % (FZ_MAX_N + 1);
    int flat = (flags & 1) || n == 0, aux = (flags & 8) != 0;
    uint32_t fh = 1 + fz_byte(&r) % 5, fw = 1 + fz_byte(&r) % 5, fc = fz_byte(&r) & 1 ? 3 : 1;
    uint64_t first = fz_u64(&r), fingerprint = fz_u64(&r), input_end = fz_u64(&r);
    uint64_t sum[3] = {n, 2 * n, 3 * n}, sumsq[3] = {n * n, 0, 1};

    int32_t labels[FZ_MAX_N] = {0};
    uint32_t shapes[3 * FZ_MAX_N] = {0}, aux_len[FZ_MAX_N] = {0};
    uint64_t hashes[FZ_MAX_N] = {0}, sources[FZ_MAX_N] = {0}, offsets[FZ_MAX_N] = {0};
    uint8_t auxbuf[FZ_MAX_N * 64] = {0};
    const uint32_t aw = 64;
    static uint8_t pixels[FZ_MAX_N * 64 * 3 + 512];
    for (size_t k = 0; k < sizeof pixels; k++)
        pixels[k] = (uint8_t)(k * 7 + 3);
    uint64_t end = 0;
    for (uint64_t i = 0; i < n; i++) {
        labels[i] = (int8_t)fz_byte(&r);
        uint32_t *sh = shapes + 3 * i;
        if (flat) {
            sh[0] = fz_byte(&r) % 6;
            sh[1] = fz_byte(&r) % 6;
            sh[2] = fz_byte(&r) % 4;
            int64_t at = (int64_t)end + (int8_t)fz_byte(&r);
            offsets[i] = at < 0 ? 0 : (uint64_t)at;
        } else {
            sh[0] = fh;
            sh[1] = fw;
            sh[2] = fc;
            offsets[i] = i * fh * fw * fc;
        }
        uint64_t len = (uint64_t)sh[0] * sh[1] * sh[2];
        if (offsets[i] + len > end)
            end = offsets[i] + len;
        uint8_t hb = fz_byte(&r);
        hashes[i] = hb & 1 || offsets[i] + len > sizeof pixels ?
                    hb : fmt_hash64(pixels + offsets[i], (size_t)len);
        sources[i] = fz_byte(&r);
        aux_len[i] = fz_byte(&r) % (aw + 2);
        memset(auxbuf + i * aw, (int)i + 1, aux_len[i] < aw ? aux_len[i] : aw);
    }
    /* flat: the pixels dataset may be shorter or longer than the samples need */
    int64_t total = (int64_t)end + (flat ? (int8_t)fz_byte(&r) : 0);
    if (total < 0)
        total = 0;
    if ((uint64_t)total > sizeof pixels)
        total = sizeof pixels;

    uint64_t hash;
    if (flags & 0x10) {
        hash = fz_u64(&r);
    } else {
        /* hdf5.md "Content hash" */
        uint64_t head[13] = {1, n, first, fingerprint, input_end, sum[0], sum[1], sum[2],
                             sumsq[0], sumsq[1], sumsq[2], (uint64_t)flat, aux ? aw : 0};
        XXH3_state_t *st = XXH3_createState();
        FZ_ASSERT(st != NULL);
        XXH3_64bits_reset(st);
        XXH3_64bits_update(st, head, sizeof head);          /* little-endian host */
        XXH3_64bits_update(st, labels, 4 * n);
        XXH3_64bits_update(st, shapes, 12 * n);
        XXH3_64bits_update(st, hashes, 8 * n);
        XXH3_64bits_update(st, sources, 8 * n);
        if (flat)
            XXH3_64bits_update(st, offsets, 8 * n);
        if (aux) {
            XXH3_64bits_update(st, aux_len, 4 * n);
            XXH3_64bits_update(st, auxbuf, n * aw);
        }
        hash = XXH3_64bits_digest(st);
        XXH3_freeState(st);
    }

    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS), pcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_file_locking(fapl, 0, 1);
    h.dcpl = H5Pcreate(H5P_DATASET_CREATE);
    h.file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    FZ_ASSERT(h.file >= 0);
    hsize_t pd[4] = {n, fh, fw, fc}, td[1] = {(hsize_t)total};
    if ((flags & 2) && (flat ? total > 0 : 1)) {
        hsize_t cd[4] = {1, fh, fw, fc}, ct[1] = {(hsize_t)(total < 64 ? total : 64)};
        H5Pset_chunk(pcpl, flat ? 1 : 4, flat ? ct : cd);
        if (flags & 4)
            H5Pset_deflate(pcpl, 1);
    }
    hsize_t nd[1] = {n}, n3[2] = {n, 3}, na[2] = {n, aw}, three[1] = {3}, one[1] = {1};
    fz_put(&h, IT_PIXELS, 0, "pixels", H5T_STD_U8LE, H5T_NATIVE_UINT8, 1, flat ? 1 : 4,
           flat ? td : pd, pixels, pcpl);
    fz_put(&h, IT_LABELS, 0, "labels", H5T_STD_I32LE, H5T_NATIVE_INT32, 4, 1, nd, labels, h.dcpl);
    fz_put(&h, IT_SHAPES, 0, "shapes", H5T_STD_U32LE, H5T_NATIVE_UINT32, 4, 2, n3, shapes, h.dcpl);
    fz_put(&h, IT_HASHES, 0, "hashes", H5T_STD_U64LE, H5T_NATIVE_UINT64, 8, 1, nd, hashes, h.dcpl);
    fz_put(&h, IT_SOURCES, 0, "sources", H5T_STD_U64LE, H5T_NATIVE_UINT64, 8, 1, nd, sources,
           h.dcpl);
    if (flat)
        fz_put(&h, IT_OFFSETS, 0, "offsets", H5T_STD_U64LE, H5T_NATIVE_UINT64, 8, 1, nd, offsets,
               h.dcpl);
    if (aux) {
        fz_put(&h, IT_AUX_LEN, 0, "aux_len", H5T_STD_U32LE, H5T_NATIVE_UINT32, 4, 1, nd, aux_len,
               h.dcpl);
        fz_put(&h, IT_AUX, 0, "aux", H5T_STD_U8LE, H5T_NATIVE_UINT8, 1, 2, na, auxbuf, h.dcpl);
    }
    uint32_t version = h.item == IT_VERSION && h.kind == DMG_DIMS ? 2 : 1;
    hid_t str = H5Tcopy(H5T_C_S1);
    const char *fmt = "shardc-hdf5";
    if (flags & 0x20) {
        H5Tset_size(str, H5T_VARIABLE);
        fz_put(&h, IT_FORMAT, 1, "format", str, str, sizeof fmt, 1, one, &fmt, 0);
    } else {
        H5Tset_size(str, strlen(fmt));
        H5Tset_strpad(str, H5T_STR_NULLPAD);
        fz_put(&h, IT_FORMAT, 1, "format", str, str, strlen(fmt), 1, one, fmt, 0);
    }
    H5Tclose(str);
    fz_put(&h, IT_VERSION, 1, "version", H5T_STD_U32LE, H5T_NATIVE_UINT32, 4, 1, one, &version, 0);
    fz_put(&h, IT_COUNT, 1, "sample_count", H5T_STD_U64LE, H5T_NATIVE_UINT64, 8, 1, one, &n, 0);
    fz_put(&h, IT_FIRST, 1, "first_index", H5T_STD_U64LE, H5T_NATIVE_UINT64, 8, 1, one, &first,
           0);
    fz_put(&h, IT_FINGERPRINT, 1, "fingerprint", H5T_STD_U64LE, H5T_NATIVE_UINT64, 8, 1, one,
           &fingerprint, 0);
    fz_put(&h, IT_INPUT_END, 1, "input_end", H5T_STD_U64LE, H5T_NATIVE_UINT64, 8, 1, one,
           &input_end, 0);
    fz_put(&h, IT_SUM, 1, "channel_sum", H5T_STD_U64LE, H5T_NATIVE_UINT64, 8, 1, three, sum, 0);
    fz_put(&h, IT_SUMSQ, 1, "channel_sumsq", H5T_STD_U64LE, H5T_NATIVE_UINT64, 8, 1, three, sumsq,
           0);
    fz_put(&h, IT_HASH, 1, "content_hash", H5T_STD_U64LE, H5T_NATIVE_UINT64, 8, 1, one, &hash, 0);
    H5Fclose(h.file);
    H5Pclose(h.dcpl);
    H5Pclose(pcpl);
    H5Pclose(fapl);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[4096];
    if (size >= 8 && memcmp(data, FZ_H5_SIG, 8) == 0) {
        fz_write("shard-00000.h5", data, size, path, sizeof path);
        fz_backend(&fmt_backend_hdf5, fz_dir(), path,
                   (size & 1) ? FMT_ACCESS_PREAD : FMT_ACCESS_MMAP);
        return 0;
    }
    static int quiet;
    if (!quiet) {
        H5Eset_auto2(H5E_DEFAULT, NULL, NULL);  /* damaged recipes make HDF5 calls fail: fine */
        quiet = 1;
    }
    fz_path(path, sizeof path, "shard-00000.h5");
    if (fz_recipe(data, size, path) != 0)
        return 0;
    /* both read paths: HDF5 reads (pread mode on a chunked file) and direct reads */
    fz_backend(&fmt_backend_hdf5, fz_dir(), path, size & 1 ? FMT_ACCESS_PREAD : FMT_ACCESS_MMAP);
    return 0;
}
