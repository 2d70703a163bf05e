/* hdf5.c - the hdf5 backend (spec: formats/hdf5.md): one HDF5 file per shard.
 *
 * Locking. The HDF5 library may not be entered by two threads at once (Debian's build is
 * configured thread-safe, which only means it takes a global lock of its own; other builds are
 * not safe at all), so every HDF5 call in this file is made holding h5_mutex, one mutex for the
 * whole process. That is the one global state of this backend, and the reason the read path avoids
 * HDF5: after r_open has validated a shard written by our writer, the HDF5 file is closed and
 * samples are read from our own descriptor or mapping at H5Dget_offset(pixels), so reader threads
 * never wait for each other. Only files with chunked or compressed pixels (written by other tools)
 * keep HDF5 open and read through H5Dread under the mutex.
 *
 * HDF5 prints its error stack on stderr by default; the library must never print, so each thread
 * turns automatic printing off the first time it takes the mutex (error stacks are per thread in
 * thread-safe builds). Errors are reported with the innermost message of HDF5's stack instead.
 *
 * Writing. The sample count is known only at finish, and a contiguous dataset cannot grow, so
 * pixels are first appended to NAME.h5.pixels.tmp; finish creates the HDF5 file with the pixel
 * dataset allocated (never filled), closes it and copies the pixel bytes into the reserved range
 * itself, outside HDF5 and without holding the mutex.
 */
#include "backend.h"
#include "directio.h"
#include "le.h"

#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#define H5B_FORMAT "shardc-hdf5"
#define H5B_VERSION 1u
#define H5B_MAX_AUX 65536u
#define H5B_COPY_CHUNK ((size_t)16 << 20)
#define H5B_DATA_ALIGN 4096u            /* file offset alignment of the pixel dataset */
/* HDF5 aligns every object at least this large: the pixels (where they matter), and metadata
 * datasets of more than about 500 samples, at a cost of < 4 KiB each */
#define H5B_ALIGN_THRESHOLD 4096u
/* HDF5's own bytes (superblock, object headers, attributes, heaps) in a shard: measured at 3.4 KiB
 * for an empty shard, 4.5 KiB with the aux datasets, whatever the sample count; rounded up */
#define H5B_OVERHEAD 8192u
/* metadata bytes per sample: labels 4 + shapes 12 + hashes 8 + sources 8 + offsets 8 */
#define H5B_META_PER_SAMPLE 40u
#define H5B_SIGNATURE "\211HDF\r\n\032\n"

/* ---- the HDF5 lock and error reporting ---- */

static pthread_mutex_t h5_mutex = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local int h5_quiet;

static void h5_lock(void)
{
    pthread_mutex_lock(&h5_mutex);
    if (!h5_quiet) {
        H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
        h5_quiet = 1;
    }
}

static void h5_unlock(void)
{
    pthread_mutex_unlock(&h5_mutex);
}

typedef struct {
    char desc[160];
    hid_t min_num;
    int found;
} h5_err;

static herr_t h5_err_walk(unsigned n, const H5E_error2_t *e, void *data)
{
    h5_err *out = data;
    if (n == 0 && e->desc) {
        snprintf(out->desc, sizeof out->desc, "%s", e->desc);
        out->min_num = e->min_num;
        out->found = 1;
    }
    return 0;
}

/* The innermost message of this thread's HDF5 error stack (clearing it), and the error code
 * that fits: the errno HDF5's file driver reports ("errno = 28, ..."), FMT_ETRUNC for a file
 * shorter than its superblock says, else dflt. Call with h5_mutex held. */
static int h5_error(int dflt, char *desc, size_t desc_len)
{
    h5_err e = { .desc = "", .found = 0 };
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, h5_err_walk, &e);
    H5Eclear2(H5E_DEFAULT);
    int rc = dflt;
    const char *p = strstr(e.desc, "errno = ");
    if (p) {
        int v = atoi(p + 8);
        if (v > 0)
            rc = v;
    } else if (e.found && e.min_num == H5E_TRUNCATED) {
        rc = FMT_ETRUNC;
    }
    if (desc)
        snprintf(desc, desc_len, "%s", e.found && e.desc[0] ? e.desc : "unknown HDF5 error");
    return rc;
}

/* fmt_fail with "WHAT: <HDF5's message>". Call with h5_mutex held. */
static int h5_fail(fmt_msg *msg, int dflt, const char *what)
{
    char desc[160];
    int rc = h5_error(dflt, desc, sizeof desc);
    return fmt_fail(msg, rc, "HDF5 error in %s: %s", what, desc);
}

static void h5_close_id(hid_t *id, herr_t (*close_fn)(hid_t))
{
    if (*id >= 0)
        close_fn(*id);
    *id = H5I_INVALID_HID;
}

/* ---- shared: the metadata of a shard and its content hash ---- */

typedef struct {
    uint64_t n, first_index, fingerprint, input_end;
    uint64_t sum[3], sumsq[3];
    int fixed;                  /* fixed layout: every sample is fh x fw x fc */
    uint32_t fh, fw, fc;
    uint64_t total;             /* pixel bytes */
    uint32_t aux_width;         /* A, 0 without aux */
    int32_t *labels;
    uint32_t *shapes;           /* 3n */
    uint64_t *hashes, *sources;
    uint64_t *offsets;          /* flat layout only */
    uint32_t *aux_len;          /* with aux only */
    uint8_t *aux;               /* n * aux_width */
} h5_meta;

static void meta_free(h5_meta *m)
{
    free(m->labels);
    free(m->shapes);
    free(m->hashes);
    free(m->sources);
    free(m->offsets);
    free(m->aux_len);
    free(m->aux);
    memset(m, 0, sizeof *m);
}

/* Allocate the arrays for m->n samples (aux_width and fixed set first). */
static int meta_alloc(h5_meta *m)
{
    size_t n = m->n ? (size_t)m->n : 1;
    if (m->n > SIZE_MAX / 24)
        return ENOMEM;
    m->labels = calloc(n, sizeof *m->labels);
    m->shapes = calloc(n, 3 * sizeof *m->shapes);
    m->hashes = calloc(n, sizeof *m->hashes);
    m->sources = calloc(n, sizeof *m->sources);
    if (!m->labels || !m->shapes || !m->hashes || !m->sources)
        return ENOMEM;
    if (!m->fixed && !(m->offsets = calloc(n, sizeof *m->offsets)))
        return ENOMEM;
    if (m->aux_width) {
        m->aux_len = calloc(n, sizeof *m->aux_len);
        m->aux = calloc(n, m->aux_width);
        if (!m->aux_len || !m->aux)
            return ENOMEM;
    }
    return 0;
}

/* Hash n integers of `width` bytes as little-endian. */
static void hash_le(XXH3_state_t *st, const void *arr, size_t n, size_t width)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    XXH3_64bits_update(st, arr, n * width);
#else
    const uint8_t *p = arr;
    uint8_t buf[4096];
    size_t per = sizeof buf / width;
    while (n > 0) {
        size_t k = n < per ? n : per;
        for (size_t i = 0; i < k; i++)
            for (size_t b = 0; b < width; b++)
                buf[i * width + b] = p[i * width + width - 1 - b];
        XXH3_64bits_update(st, buf, k * width);
        p += k * width;
        n -= k;
    }
#endif
}

/* The content hash of formats/hdf5.md. 0 or ENOMEM. */
static int content_hash(const h5_meta *m, uint64_t *out)
{
    XXH3_state_t *st = XXH3_createState();
    if (!st)
        return ENOMEM;
    uint8_t head[13 * 8];
    uint64_t f[13] = {
        H5B_VERSION, m->n, m->first_index, m->fingerprint, m->input_end,
        m->sum[0], m->sum[1], m->sum[2], m->sumsq[0], m->sumsq[1], m->sumsq[2],
        m->fixed ? 0 : 1, m->aux_width,
    };
    for (int i = 0; i < 13; i++)
        fmt_le_put64(head + 8 * i, f[i]);
    size_t n = (size_t)m->n;
    XXH3_64bits_reset(st);
    XXH3_64bits_update(st, head, sizeof head);
    hash_le(st, m->labels, n, 4);
    hash_le(st, m->shapes, 3 * n, 4);
    hash_le(st, m->hashes, n, 8);
    hash_le(st, m->sources, n, 8);
    if (!m->fixed)
        hash_le(st, m->offsets, n, 8);
    if (m->aux_width) {
        hash_le(st, m->aux_len, n, 4);
        XXH3_64bits_update(st, m->aux, n * m->aux_width);
    }
    *out = XXH3_64bits_digest(st);
    XXH3_freeState(st);
    return 0;
}

static int pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
{
    const uint8_t *p = buf;
    while (len > 0) {
        ssize_t r = pwrite(fd, p, len, (off_t)off);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return errno;
        }
        if (r == 0)
            return EIO; /* no progress on a non-empty write: do not spin */
        p += r;
        off += (uint64_t)r;
        len -= (size_t)r;
    }
    return 0;
}

/* ---- writer ---- */

typedef struct {
    int32_t label;
    uint32_t h, w, c;
    uint32_t aux_len;
    uint64_t hash, source, offset, aux_off;
} h5w_entry;

typedef struct {
    char *path, *tmp, *data_tmp;
    int fd;                     /* data_tmp */
    int err;                    /* first I/O error: the writer is failed */
    uint64_t first_index, fingerprint;
    h5w_entry *ents;
    size_t cap;
    uint8_t *aux;
    size_t aux_used, aux_cap;
    uint32_t aux_width;
    uint64_t pos;               /* pixel bytes written */
    fmt_writer_stats st;        /* count, sums, one shape */
} h5_writer;

static void writer_free(h5_writer *w)
{
    if (w->fd >= 0)
        close(w->fd);
    free(w->path);
    free(w->tmp);
    free(w->data_tmp);
    free(w->ents);
    free(w->aux);
    free(w);
}

static int h5w_open(void **out, const fmt_writer_opts *o)
{
    *out = NULL;
    if (!o || !o->dir || !o->name)
        return FMT_EINVAL;
    h5_writer *w = calloc(1, sizeof *w);
    if (!w)
        return ENOMEM;
    int rc = 0;
    w->fd = -1;
    w->first_index = o->first_index;
    w->fingerprint = o->fingerprint;
    w->path = fmt_path_join(o->dir, o->name, ".h5");
    w->tmp = fmt_path_join(o->dir, o->name, ".h5.tmp");
    w->data_tmp = fmt_path_join(o->dir, o->name, ".h5.pixels.tmp");
    if (!w->path || !w->tmp || !w->data_tmp) {
        rc = ENOMEM;
        goto leave;
    }
    w->fd = open(w->data_tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0)
        rc = errno;
leave:
    if (rc)
        writer_free(w);
    else
        *out = w;
    return rc;
}

static uint64_t h5w_cost(uint64_t payload_len, uint32_t aux_len, uint32_t align)
{
    uint64_t cost;
    uint64_t meta = H5B_META_PER_SAMPLE + (aux_len ? (uint64_t)aux_len + 4 : 0);
    if (__builtin_add_overflow(payload_len, meta, &cost))
        return UINT64_MAX;
    return cost;
}

/* Bytes a dataset of `bytes` takes, with the padding its alignment may cost. */
static uint64_t aligned_cost(uint64_t bytes)
{
    return bytes >= H5B_ALIGN_THRESHOLD ? bytes + H5B_DATA_ALIGN - 1 : bytes;
}

static uint64_t h5w_size(const void *wp)
{
    const h5_writer *w = wp;
    uint64_t n = w->st.count;
    /* an upper bound: the offsets dataset is counted even if the layout ends up fixed */
    uint64_t size = H5B_OVERHEAD + aligned_cost(w->pos) + aligned_cost(4 * n) +
                    aligned_cost(12 * n) + 3 * aligned_cost(8 * n);
    if (w->aux_width)
        size += aligned_cost(4 * n) + aligned_cost(n * w->aux_width);
    return size;
}

static uint64_t h5w_count(const void *wp)
{
    return ((const h5_writer *)wp)->st.count;
}

static int h5w_add(void *wp, const fmt_sample_meta *m, const void *pixels, uint64_t *stored_hash)
{
    h5_writer *w = wp;
    if (w->err)
        return FMT_ESTATE;
    if (fmt_sample_meta_check(m))
        return FMT_EINVAL;
    uint32_t aux_len = m->aux ? m->aux_len : 0;
    uint64_t len, end;
    if (aux_len > H5B_MAX_AUX || fmt_shape_bytes(m->height, m->width, m->channels, &len) ||
        len > SIZE_MAX || __builtin_add_overflow(w->pos, len, &end) || end > INT64_MAX)
        return FMT_ETOOBIG;

    /* memory first: a failed allocation leaves nothing half-done, so the writer stays usable */
    if (w->st.count == w->cap) {
        size_t ncap = w->cap ? 2 * w->cap : 256;
        h5w_entry *e = realloc(w->ents, ncap * sizeof *e);
        if (!e)
            return ENOMEM;
        w->ents = e;
        w->cap = ncap;
    }
    if (w->aux_used + aux_len > w->aux_cap) {
        size_t ncap = w->aux_cap ? w->aux_cap : 4096;
        while (ncap < w->aux_used + aux_len)
            ncap *= 2;
        uint8_t *a = realloc(w->aux, ncap);
        if (!a)
            return ENOMEM;
        w->aux = a;
        w->aux_cap = ncap;
    }

    int rc = pwrite_all(w->fd, pixels, (size_t)len, w->pos);
    if (rc) {
        w->err = rc;
        return rc;
    }
    w->ents[w->st.count] = (h5w_entry){
        .label = m->label, .h = m->height, .w = m->width, .c = m->channels,
        .aux_len = aux_len, .hash = m->hash, .source = m->source, .offset = w->pos,
        .aux_off = w->aux_used,
    };
    if (aux_len) {
        memcpy(w->aux + w->aux_used, m->aux, aux_len);
        w->aux_used += aux_len;
        if (aux_len > w->aux_width)
            w->aux_width = aux_len;
    }
    fmt_writer_stats_add(&w->st, m);
    w->pos = end;
    if (stored_hash)
        *stored_hash = m->hash;
    return 0;
}

/* Create a contiguous dataset and write data (unless NULL or empty). Call with h5_mutex held. */
static int h5_write_dset(hid_t file, hid_t dcpl, const char *name, hid_t ftype, hid_t mtype,
                         int rank, const hsize_t *dims, const void *data, hid_t *keep)
{
    int rc = 0;
    hid_t space = H5Screate_simple(rank, dims, NULL);
    hid_t d = space < 0 ? H5I_INVALID_HID :
              H5Dcreate2(file, name, ftype, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (d < 0) {
        rc = -1;
        goto leave;
    }
    hsize_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= dims[i];
    if (data && n > 0 && H5Dwrite(d, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
        rc = -1;
leave:
    if (keep && rc == 0)
        *keep = d;
    else
        h5_close_id(&d, H5Dclose);
    h5_close_id(&space, H5Sclose);
    return rc;
}

static int h5_write_attr(hid_t obj, const char *name, hid_t ftype, hid_t mtype, hsize_t n,
                         const void *data)
{
    int rc = -1;
    hid_t space = n == 1 ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &n, NULL);
    hid_t a = space < 0 ? H5I_INVALID_HID :
              H5Acreate2(obj, name, ftype, space, H5P_DEFAULT, H5P_DEFAULT);
    if (a >= 0 && H5Awrite(a, mtype, data) >= 0)
        rc = 0;
    h5_close_id(&a, H5Aclose);
    h5_close_id(&space, H5Sclose);
    return rc;
}

/* Write the HDF5 file at w->tmp with m's datasets and attributes; the pixel dataset is allocated
 * but not written: *pix_off receives its file offset (0 if it is empty). Takes h5_mutex. */
static int h5_create_file(const char *path, const h5_meta *m, uint64_t hash, uint64_t *pix_off)
{
    int rc = EIO;
    hid_t fcpl = H5I_INVALID_HID, fapl = H5I_INVALID_HID, dcpl = H5I_INVALID_HID;
    hid_t pcpl = H5I_INVALID_HID, file = H5I_INVALID_HID, pix = H5I_INVALID_HID;
    hid_t str = H5I_INVALID_HID;
    h5_lock();
    fcpl = H5Pcreate(H5P_FILE_CREATE);
    fapl = H5Pcreate(H5P_FILE_ACCESS);
    dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (fcpl < 0 || fapl < 0 || dcpl < 0 ||
        H5Pset_obj_track_times(fcpl, 0) < 0 || H5Pset_obj_track_times(dcpl, 0) < 0 ||
        H5Pset_layout(dcpl, H5D_CONTIGUOUS) < 0 ||
        H5Pset_alignment(fapl, H5B_ALIGN_THRESHOLD, H5B_DATA_ALIGN) < 0 ||
        H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG) < 0 ||
        H5Pset_file_locking(fapl, 0, 1) < 0)
        goto leave;
    /* the pixels: space reserved now, bytes copied in by the caller after close */
    pcpl = H5Pcopy(dcpl);
    if (pcpl < 0 || H5Pset_alloc_time(pcpl, H5D_ALLOC_TIME_EARLY) < 0 ||
        H5Pset_fill_time(pcpl, H5D_FILL_TIME_NEVER) < 0)
        goto leave;
    file = H5Fcreate(path, H5F_ACC_TRUNC, fcpl, fapl);
    if (file < 0)
        goto leave;

    hsize_t n = m->n, n3[2] = { m->n, 3 }, naux[2] = { m->n, m->aux_width };
    hsize_t pdims[4] = { m->n, m->fh, m->fw, m->fc }, tdims[1] = { m->total };
    if (h5_write_dset(file, pcpl, "pixels", H5T_STD_U8LE, H5T_NATIVE_UINT8, m->fixed ? 4 : 1,
                      m->fixed ? pdims : tdims, NULL, &pix) ||
        h5_write_dset(file, dcpl, "labels", H5T_STD_I32LE, H5T_NATIVE_INT32, 1, &n, m->labels,
                      NULL) ||
        h5_write_dset(file, dcpl, "shapes", H5T_STD_U32LE, H5T_NATIVE_UINT32, 2, n3, m->shapes,
                      NULL) ||
        h5_write_dset(file, dcpl, "hashes", H5T_STD_U64LE, H5T_NATIVE_UINT64, 1, &n, m->hashes,
                      NULL) ||
        h5_write_dset(file, dcpl, "sources", H5T_STD_U64LE, H5T_NATIVE_UINT64, 1, &n, m->sources,
                      NULL))
        goto leave;
    if (!m->fixed && h5_write_dset(file, dcpl, "offsets", H5T_STD_U64LE, H5T_NATIVE_UINT64, 1, &n,
                                   m->offsets, NULL))
        goto leave;
    if (m->aux_width &&
        (h5_write_dset(file, dcpl, "aux_len", H5T_STD_U32LE, H5T_NATIVE_UINT32, 1, &n,
                       m->aux_len, NULL) ||
         h5_write_dset(file, dcpl, "aux", H5T_STD_U8LE, H5T_NATIVE_UINT8, 2, naux, m->aux, NULL)))
        goto leave;

    uint32_t version = H5B_VERSION;
    str = H5Tcopy(H5T_C_S1);
    if (str < 0 || H5Tset_size(str, sizeof H5B_FORMAT - 1) < 0 ||
        H5Tset_strpad(str, H5T_STR_NULLPAD) < 0 ||
        h5_write_attr(file, "format", str, str, 1, H5B_FORMAT) ||
        h5_write_attr(file, "version", H5T_STD_U32LE, H5T_NATIVE_UINT32, 1, &version) ||
        h5_write_attr(file, "sample_count", H5T_STD_U64LE, H5T_NATIVE_UINT64, 1, &m->n) ||
        h5_write_attr(file, "first_index", H5T_STD_U64LE, H5T_NATIVE_UINT64, 1,
                      &m->first_index) ||
        h5_write_attr(file, "fingerprint", H5T_STD_U64LE, H5T_NATIVE_UINT64, 1,
                      &m->fingerprint) ||
        h5_write_attr(file, "input_end", H5T_STD_U64LE, H5T_NATIVE_UINT64, 1, &m->input_end) ||
        h5_write_attr(file, "channel_sum", H5T_STD_U64LE, H5T_NATIVE_UINT64, 3, m->sum) ||
        h5_write_attr(file, "channel_sumsq", H5T_STD_U64LE, H5T_NATIVE_UINT64, 3, m->sumsq) ||
        h5_write_attr(file, "content_hash", H5T_STD_U64LE, H5T_NATIVE_UINT64, 1, &hash))
        goto leave;

    *pix_off = 0;
    if (m->total > 0) {
        haddr_t off = H5Dget_offset(pix);
        if (off == HADDR_UNDEF)
            goto leave;
        *pix_off = off;
    }
    h5_close_id(&pix, H5Dclose);
    hid_t f = file;
    file = H5I_INVALID_HID;
    if (H5Fclose(f) < 0)
        goto leave;
    rc = 0;
leave:
    if (rc)
        rc = h5_error(EIO, NULL, 0);
    h5_close_id(&str, H5Tclose);
    h5_close_id(&pix, H5Dclose);
    h5_close_id(&file, H5Fclose);
    h5_close_id(&pcpl, H5Pclose);
    h5_close_id(&dcpl, H5Pclose);
    h5_close_id(&fapl, H5Pclose);
    h5_close_id(&fcpl, H5Pclose);
    H5Eclear2(H5E_DEFAULT);
    h5_unlock();
    return rc;
}

/* Copy len bytes from in (offset 0) to out at off: in the kernel where it can, else through a
 * 16 MiB buffer. */
static int copy_range(int in, int out, uint64_t off, uint64_t len)
{
    uint64_t done = 0;
    while (done < len) {
        loff_t ioff = (loff_t)done, ooff = (loff_t)(off + done);
        size_t want = len - done > H5B_COPY_CHUNK ? H5B_COPY_CHUNK : (size_t)(len - done);
        ssize_t r = copy_file_range(in, &ioff, out, &ooff, want, 0);
        if (r > 0) {
            done += (uint64_t)r;
            continue;
        }
        if (r == 0)
            return FMT_ETRUNC;
        if (errno == EINTR)
            continue;
        if (errno != EXDEV && errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
            return errno;
        break; /* not supported here: copy in user space */
    }
    if (done == len)
        return 0;
    size_t blen = len - done > H5B_COPY_CHUNK ? H5B_COPY_CHUNK : (size_t)(len - done);
    uint8_t *buf = malloc(blen);
    if (!buf)
        return ENOMEM;
    int rc = 0;
    while (done < len) {
        size_t k = len - done > blen ? blen : (size_t)(len - done);
        if ((rc = fmt_pread_exact(in, buf, k, done)) != 0 ||
            (rc = pwrite_all(out, buf, k, off + done)) != 0)
            break;
        done += k;
    }
    free(buf);
    return rc;
}

static int h5w_finish(void *wp, uint64_t input_end, fmt_shard_info *info)
{
    h5_writer *w = wp;
    h5_meta m = {0};
    int out = -1, renamed = 0;
    int rc = w->err;
    if (rc)
        goto leave;

    m.n = w->st.count;
    m.first_index = w->first_index;
    m.fingerprint = w->fingerprint;
    m.input_end = input_end;
    memcpy(m.sum, w->st.sum, sizeof m.sum);
    memcpy(m.sumsq, w->st.sumsq, sizeof m.sumsq);
    m.fixed = w->st.fixed;
    if (m.fixed) {
        m.fh = w->st.h;
        m.fw = w->st.w;
        m.fc = w->st.c;
    }
    m.total = w->pos;
    m.aux_width = w->aux_width;
    if ((rc = meta_alloc(&m)) != 0)
        goto leave;
    for (size_t i = 0; i < w->st.count; i++) {
        const h5w_entry *e = &w->ents[i];
        m.labels[i] = e->label;
        m.shapes[3 * i] = e->h;
        m.shapes[3 * i + 1] = e->w;
        m.shapes[3 * i + 2] = e->c;
        m.hashes[i] = e->hash;
        m.sources[i] = e->source;
        if (!m.fixed)
            m.offsets[i] = e->offset;
        if (m.aux_width) {
            m.aux_len[i] = e->aux_len;
            memcpy(m.aux + i * m.aux_width, w->aux + e->aux_off, e->aux_len);
        }
    }
    uint64_t hash, pix_off;
    if ((rc = content_hash(&m, &hash)) != 0 ||
        (rc = h5_create_file(w->tmp, &m, hash, &pix_off)) != 0)
        goto leave;

    out = open(w->tmp, O_WRONLY | O_CLOEXEC);
    if (out < 0) {
        rc = errno;
        goto leave;
    }
    if ((rc = copy_range(w->fd, out, pix_off, m.total)) != 0)
        goto leave;
    struct stat st;
    if (fsync(out) != 0 || fstat(out, &st) != 0) {
        rc = errno;
        goto leave;
    }
    int fd = out;
    out = -1;
    if (close(fd) != 0) {
        rc = errno;
        goto leave;
    }
    /* the pins of the manifest: every byte HDF5 parses (all but the pixels), and the whole file */
    uint64_t pin = 0, whole = 0;
    if ((rc = fmt_hash_file(w->tmp, pix_off, m.total, &pin, &whole, NULL)) != 0)
        goto leave;
    if (rename(w->tmp, w->path) != 0) {
        rc = errno;
        goto leave;
    }
    renamed = 1;
    /* renamed: from here on the shard is in place; only the pixel temp file is left to remove */
    rc = fmt_fsync_parent(w->path);
    if (!rc && info) {
        *info = (fmt_shard_info){
            .samples = m.n, .first_index = m.first_index, .fingerprint = m.fingerprint,
            .input_end = input_end, .bytes = (uint64_t)st.st_size, .hash = hash,
            .pins = FMT_PIN_FILE | FMT_PIN_OPEN, .file_hash = whole, .pin_hash = pin,
            .pin_skip_off = m.total ? pix_off : 0, .pin_skip_len = m.total,
        };
        memcpy(info->sum, m.sum, sizeof info->sum);
        memcpy(info->sumsq, m.sumsq, sizeof info->sumsq);
    }
leave:
    if (out >= 0)
        close(out);
    if (!renamed)
        unlink(w->tmp);
    unlink(w->data_tmp);
    meta_free(&m);
    writer_free(w);
    return rc;
}

static void h5w_abort(void *wp)
{
    h5_writer *w = wp;
    if (!w)
        return;
    unlink(w->tmp);
    unlink(w->data_tmp);
    writer_free(w);
}

/* ---- reader ---- */

typedef struct {
    fmt_shard_info info;
    h5_meta m;
    fmt_access access;
    int fd, dfd;                /* dfd: O_DIRECT descriptor, -1 if none (or refused) */
    const uint8_t *map;
    size_t map_len;
    uint64_t file_size;
    int direct;                 /* pixels are contiguous in the file at pix_off */
    uint64_t pix_off;
    uint64_t stride;            /* fixed layout: bytes per sample */
    hid_t file, pixels;         /* H5Dread path only */
} h5_shard;

static void h5r_close(void *sp)
{
    h5_shard *s = sp;
    if (!s)
        return;
    if (s->file >= 0 || s->pixels >= 0) {
        h5_lock();
        h5_close_id(&s->pixels, H5Dclose);
        h5_close_id(&s->file, H5Fclose);
        h5_unlock();
    }
    if (s->map)
        munmap((void *)s->map, s->map_len);
    if (s->dfd >= 0)
        close(s->dfd);
    if (s->fd >= 0)
        close(s->fd);
    meta_free(&s->m);
    free(s);
}

/* Open attribute name and check it is an integer of `size` bytes and signedness `sign` holding n
 * values (scalar when n is 1); read it as mtype. Call with h5_mutex held. */
static int read_attr_int(hid_t file, const char *name, size_t size, H5T_sign_t sign, hsize_t n,
                         hid_t mtype, void *out, fmt_msg *msg)
{
    int rc = 0;
    hid_t a = H5I_INVALID_HID, t = H5I_INVALID_HID, sp = H5I_INVALID_HID;
    htri_t ex = H5Aexists(file, name);
    if (ex < 0)
        return h5_fail(msg, FMT_ECORRUPT, "H5Aexists");
    if (!ex)
        return fmt_fail(msg, FMT_ECORRUPT, "missing attribute %s", name);
    if ((a = H5Aopen(file, name, H5P_DEFAULT)) < 0 || (t = H5Aget_type(a)) < 0 ||
        (sp = H5Aget_space(a)) < 0) {
        char what[96];
        snprintf(what, sizeof what, "H5Aopen(%s)", name);
        rc = h5_fail(msg, FMT_ECORRUPT, what);
        goto leave;
    }
    int rank = H5Sget_simple_extent_ndims(sp);
    hssize_t npts = H5Sget_simple_extent_npoints(sp);
    if (H5Tget_class(t) != H5T_INTEGER || H5Tget_size(t) != size || H5Tget_sign(t) != sign ||
        rank < 0 || rank > 1 || npts < 0 || (hsize_t)npts != n) {
        rc = fmt_fail(msg, FMT_ECORRUPT, "attribute %s: wrong type or size", name);
        goto leave;
    }
    if (H5Aread(a, mtype, out) < 0) {
        char what[96];
        snprintf(what, sizeof what, "H5Aread(%s)", name);
        rc = h5_fail(msg, FMT_ECORRUPT, what);
    }
leave:
    h5_close_id(&sp, H5Sclose);
    h5_close_id(&t, H5Tclose);
    h5_close_id(&a, H5Aclose);
    return rc;
}

/* The `format` attribute: a fixed or variable-length string equal to H5B_FORMAT. */
static int check_format_attr(hid_t file, fmt_msg *msg)
{
    int rc = 0;
    hid_t a = H5I_INVALID_HID, t = H5I_INVALID_HID, sp = H5I_INVALID_HID, mt = H5I_INVALID_HID;
    char buf[64] = "";
    htri_t ex = H5Aexists(file, "format");
    if (ex < 0)
        return h5_fail(msg, FMT_ECORRUPT, "H5Aexists");
    if (!ex)
        return fmt_fail(msg, FMT_EFORMAT, "not a shardc hdf5 shard (no format attribute)");
    if ((a = H5Aopen(file, "format", H5P_DEFAULT)) < 0 || (t = H5Aget_type(a)) < 0 ||
        (sp = H5Aget_space(a)) < 0) {
        rc = h5_fail(msg, FMT_ECORRUPT, "H5Aopen(format)");
        goto leave;
    }
    if (H5Tget_class(t) != H5T_STRING || H5Sget_simple_extent_npoints(sp) != 1) {
        rc = fmt_fail(msg, FMT_EFORMAT, "not a shardc hdf5 shard (format is not a string)");
        goto leave;
    }
    htri_t var = H5Tis_variable_str(t);
    if (var > 0) {
        char *s = NULL;
        if ((mt = H5Tcopy(H5T_C_S1)) < 0 || H5Tset_size(mt, H5T_VARIABLE) < 0 ||
            H5Aread(a, mt, &s) < 0) {
            rc = h5_fail(msg, FMT_ECORRUPT, "H5Aread(format)");
            goto leave;
        }
        if (s)
            snprintf(buf, sizeof buf, "%s", s);
        H5free_memory(s);
    } else {
        size_t size = H5Tget_size(t);
        if (var < 0 || size == 0 || size >= sizeof buf) {
            rc = fmt_fail(msg, FMT_EFORMAT, "not a shardc hdf5 shard (bad format attribute)");
            goto leave;
        }
        if ((mt = H5Tcopy(H5T_C_S1)) < 0 || H5Tset_size(mt, size) < 0 ||
            H5Tset_strpad(mt, H5T_STR_NULLPAD) < 0 || H5Aread(a, mt, buf) < 0) {
            rc = h5_fail(msg, FMT_ECORRUPT, "H5Aread(format)");
            goto leave;
        }
        buf[size] = '\0';
    }
    if (strcmp(buf, H5B_FORMAT) != 0)
        rc = fmt_fail(msg, FMT_EFORMAT, "not a shardc hdf5 shard (format is \"%.40s\")", buf);
leave:
    h5_close_id(&mt, H5Tclose);
    h5_close_id(&sp, H5Sclose);
    h5_close_id(&t, H5Tclose);
    h5_close_id(&a, H5Aclose);
    return rc;
}

/* Open dataset name, check it is an integer of `size` bytes and signedness `sign` with rank
 * `rank` (0: 1 or 4, for pixels) and store its dims. Returns the id, or -1 with *rc set. */
static hid_t open_dset(hid_t file, const char *name, size_t size, H5T_sign_t sign, int rank,
                       int *got_rank, hsize_t dims[4], fmt_msg *msg, int *rc)
{
    hid_t d = H5I_INVALID_HID, t = H5I_INVALID_HID, sp = H5I_INVALID_HID;
    htri_t ex = H5Lexists(file, name, H5P_DEFAULT);
    if (ex <= 0) {
        *rc = ex < 0 ? h5_fail(msg, FMT_ECORRUPT, "H5Lexists") :
              fmt_fail(msg, FMT_ECORRUPT, "missing dataset %s", name);
        return H5I_INVALID_HID;
    }
    *rc = 0;
    if ((d = H5Dopen2(file, name, H5P_DEFAULT)) < 0 || (t = H5Dget_type(d)) < 0 ||
        (sp = H5Dget_space(d)) < 0) {
        char what[96];
        snprintf(what, sizeof what, "H5Dopen(%s)", name);
        *rc = h5_fail(msg, FMT_ECORRUPT, what);
        goto leave;
    }
    if (H5Tget_class(t) != H5T_INTEGER || H5Tget_size(t) != size || H5Tget_sign(t) != sign) {
        *rc = fmt_fail(msg, FMT_ECORRUPT, "dataset %s: wrong type (want %s%zu)", name,
                       sign == H5T_SGN_NONE ? "uint" : "int", 8 * size);
        goto leave;
    }
    int r = H5Sget_simple_extent_ndims(sp);
    if (r < 0 || (rank ? r != rank : (r != 1 && r != 4))) {
        *rc = fmt_fail(msg, FMT_ECORRUPT, "dataset %s: wrong rank %d", name, r);
        goto leave;
    }
    if (H5Sget_simple_extent_dims(sp, dims, NULL) < 0) {
        *rc = h5_fail(msg, FMT_ECORRUPT, "H5Sget_simple_extent_dims");
        goto leave;
    }
    if (got_rank)
        *got_rank = r;
leave:
    h5_close_id(&sp, H5Sclose);
    h5_close_id(&t, H5Tclose);
    if (*rc)
        h5_close_id(&d, H5Dclose);
    return d;
}

/* Open a metadata dataset, check its dims are (n) or (n, dim1), read it whole as mtype. */
static int read_dset(hid_t file, const char *name, size_t size, H5T_sign_t sign, uint64_t n,
                     hsize_t dim1, hid_t mtype, void *out, fmt_msg *msg)
{
    int rc;
    hsize_t dims[4] = {0};
    hid_t d = open_dset(file, name, size, sign, dim1 ? 2 : 1, NULL, dims, msg, &rc);
    if (d < 0)
        return rc;
    if (dims[0] != n || (dim1 && dims[1] != dim1)) {
        rc = fmt_fail(msg, FMT_ECORRUPT, "dataset %s: has %" PRIu64 " rows, want %" PRIu64,
                      name, (uint64_t)dims[0], n);
    } else if (n > 0 && H5Dread(d, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) < 0) {
        char what[96];
        snprintf(what, sizeof what, "H5Dread(%s)", name);
        rc = h5_fail(msg, FMT_ECORRUPT, what);
    }
    H5Dclose(d);
    return rc;
}

/* hdf5.md "What a reader checks on open", item 5. */
static int check_samples(const h5_meta *m, fmt_msg *msg)
{
    uint64_t prev_end = 0;
    for (uint64_t i = 0; i < m->n; i++) {
        const uint32_t *sh = m->shapes + 3 * i;
        uint64_t len, end;
        if (m->labels[i] < -1)
            return fmt_fail(msg, FMT_ECORRUPT, "sample %" PRIu64 ": bad label %" PRId32, i,
                            m->labels[i]);
        if (sh[2] != 1 && sh[2] != 3)
            return fmt_fail(msg, FMT_ECORRUPT, "sample %" PRIu64 ": bad channel count %" PRIu32,
                            i, sh[2]);
        if (!sh[0] || !sh[1])
            return fmt_fail(msg, FMT_ECORRUPT, "sample %" PRIu64 ": zero height or width", i);
        if (fmt_shape_bytes(sh[0], sh[1], sh[2], &len) || len > INT64_MAX)
            return fmt_fail(msg, FMT_ECORRUPT, "sample %" PRIu64 ": shape too large", i);
        if (m->fixed) {
            if (sh[0] != m->fh || sh[1] != m->fw || sh[2] != m->fc)
                return fmt_fail(msg, FMT_ECORRUPT, "sample %" PRIu64 ": shape differs from the "
                                "pixels dataset", i);
        } else {
            if (m->offsets[i] < prev_end)
                return fmt_fail(msg, FMT_ECORRUPT, "sample %" PRIu64 ": pixels overlap the "
                                "previous sample", i);
            if (__builtin_add_overflow(m->offsets[i], len, &end) || end > m->total)
                return fmt_fail(msg, FMT_ECORRUPT, "sample %" PRIu64 ": pixels extend past the "
                                "pixels dataset", i);
            prev_end = end;
        }
        if (m->aux_width && m->aux_len[i] > m->aux_width)
            return fmt_fail(msg, FMT_ECORRUPT, "sample %" PRIu64 ": aux_len %" PRIu32
                            " exceeds the aux width", i, m->aux_len[i]);
    }
    return 0;
}

/* Decide how pixels are read: directly at their file offset, or through H5Dread (keeping the
 * dataset open in s->pixels). hdf5.md item 6. */
static int check_pixel_storage(h5_shard *s, hid_t pix, fmt_msg *msg)
{
    int rc = 0;
    hid_t dcpl = H5Dget_create_plist(pix);
    if (dcpl < 0)
        return h5_fail(msg, FMT_ECORRUPT, "H5Dget_create_plist(pixels)");
    H5D_layout_t layout = H5Pget_layout(dcpl);
    int next = H5Pget_external_count(dcpl);
    int nfilters = H5Pget_nfilters(dcpl);
    if (layout < 0 || next < 0 || nfilters < 0) {
        rc = h5_fail(msg, FMT_ECORRUPT, "H5Pget_layout(pixels)");
        goto leave;
    }
    if (layout == H5D_VIRTUAL || next > 0) {
        rc = fmt_fail(msg, FMT_EUNSUPPORTED, "pixels dataset: virtual or external storage is "
                      "not supported");
        goto leave;
    }
    for (int k = 0; k < nfilters; k++) {
        unsigned flags, cd[8];
        size_t ncd = 8;
        char name[64];
        H5Z_filter_t f = H5Pget_filter2(dcpl, (unsigned)k, &flags, &ncd, cd, sizeof name, name,
                                        NULL);
        if (f < 0 || H5Zfilter_avail(f) <= 0) {
            H5Eclear2(H5E_DEFAULT);
            rc = fmt_fail(msg, FMT_EUNSUPPORTED, "pixels dataset: HDF5 filter %d is not "
                          "available", (int)f);
            goto leave;
        }
    }
    if (s->m.total == 0) {
        s->direct = 1; /* nothing to read */
        goto leave;
    }
    if (layout == H5D_CONTIGUOUS) {
        haddr_t off = H5Dget_offset(pix);
        hsize_t stored = H5Dget_storage_size(pix);
        H5Eclear2(H5E_DEFAULT);
        if (off != HADDR_UNDEF && stored == s->m.total) {
            uint64_t end;
            if (__builtin_add_overflow((uint64_t)off, s->m.total, &end) || end > s->file_size) {
                rc = fmt_fail(msg, FMT_ETRUNC, "pixels extend past the end of the file (offset "
                              "%" PRIu64 ", %" PRIu64 " bytes, file %" PRIu64 " bytes)",
                              (uint64_t)off, s->m.total, s->file_size);
                goto leave;
            }
            s->direct = 1;
            s->pix_off = off;
        }
    }
leave:
    H5Pclose(dcpl);
    return rc;
}

/* The HDF5 part of r_open: attributes, datasets, checks. Takes h5_mutex. */
static int h5r_load(h5_shard *s, const char *path, fmt_msg *msg)
{
    int rc = 0;
    hid_t fapl = H5I_INVALID_HID, file = H5I_INVALID_HID, pix = H5I_INVALID_HID;
    h5_meta *m = &s->m;
    h5_lock();
    fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0 || H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG) < 0 ||
        H5Pset_file_locking(fapl, 0, 1) < 0) {
        rc = h5_fail(msg, ENOMEM, "H5Pcreate");
        goto leave;
    }
    file = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    if (file < 0) {
        rc = h5_fail(msg, FMT_ECORRUPT, "H5Fopen");
        goto leave;
    }

    uint32_t version = 0;
    uint64_t hash = 0;
    if ((rc = check_format_attr(file, msg)) != 0 ||
        (rc = read_attr_int(file, "version", 4, H5T_SGN_NONE, 1, H5T_NATIVE_UINT32, &version,
                            msg)) != 0)
        goto leave;
    if (version != H5B_VERSION) {
        rc = fmt_fail(msg, FMT_EVERSION, "unsupported version %" PRIu32 " (this reader knows %u)",
                      version, H5B_VERSION);
        goto leave;
    }
    if ((rc = read_attr_int(file, "sample_count", 8, H5T_SGN_NONE, 1, H5T_NATIVE_UINT64, &m->n,
                            msg)) != 0 ||
        (rc = read_attr_int(file, "first_index", 8, H5T_SGN_NONE, 1, H5T_NATIVE_UINT64,
                            &m->first_index, msg)) != 0 ||
        (rc = read_attr_int(file, "fingerprint", 8, H5T_SGN_NONE, 1, H5T_NATIVE_UINT64,
                            &m->fingerprint, msg)) != 0 ||
        (rc = read_attr_int(file, "input_end", 8, H5T_SGN_NONE, 1, H5T_NATIVE_UINT64,
                            &m->input_end, msg)) != 0 ||
        (rc = read_attr_int(file, "channel_sum", 8, H5T_SGN_NONE, 3, H5T_NATIVE_UINT64, m->sum,
                            msg)) != 0 ||
        (rc = read_attr_int(file, "channel_sumsq", 8, H5T_SGN_NONE, 3, H5T_NATIVE_UINT64,
                            m->sumsq, msg)) != 0 ||
        (rc = read_attr_int(file, "content_hash", 8, H5T_SGN_NONE, 1, H5T_NATIVE_UINT64, &hash,
                            msg)) != 0)
        goto leave;
    if (m->n > s->file_size) {
        rc = fmt_fail(msg, FMT_ECORRUPT, "sample_count %" PRIu64 " is more than a file of %"
                      PRIu64 " bytes can hold", m->n, s->file_size);
        goto leave;
    }

    /* the pixels dataset decides the layout */
    int prank = 0;
    hsize_t pd[4] = {0};
    pix = open_dset(file, "pixels", 1, H5T_SGN_NONE, 0, &prank, pd, msg, &rc);
    if (pix < 0)
        goto leave;
    if (prank == 4) {
        m->fixed = 1;
        if (pd[0] != m->n || m->n == 0 || (pd[3] != 1 && pd[3] != 3) || !pd[1] || !pd[2] ||
            pd[1] > UINT32_MAX || pd[2] > UINT32_MAX) {
            rc = fmt_fail(msg, FMT_ECORRUPT, "dataset pixels: bad dims (%" PRIu64 ", %" PRIu64
                          ", %" PRIu64 ", %" PRIu64 ")", (uint64_t)pd[0], (uint64_t)pd[1],
                          (uint64_t)pd[2], (uint64_t)pd[3]);
            goto leave;
        }
        m->fh = (uint32_t)pd[1];
        m->fw = (uint32_t)pd[2];
        m->fc = (uint32_t)pd[3];
        fmt_shape_bytes(m->fh, m->fw, m->fc, &s->stride);
        if (__builtin_mul_overflow(s->stride, m->n, &m->total) || m->total > INT64_MAX) {
            rc = fmt_fail(msg, FMT_ECORRUPT, "dataset pixels: too large");
            goto leave;
        }
    } else {
        m->total = pd[0];
        if (m->total > INT64_MAX) {
            rc = fmt_fail(msg, FMT_ECORRUPT, "dataset pixels: too large");
            goto leave;
        }
    }
    htri_t has_aux = H5Lexists(file, "aux", H5P_DEFAULT);
    htri_t has_aux_len = H5Lexists(file, "aux_len", H5P_DEFAULT);
    if (has_aux < 0 || has_aux_len < 0) {
        rc = h5_fail(msg, FMT_ECORRUPT, "H5Lexists");
        goto leave;
    }
    if (has_aux != has_aux_len) {
        rc = fmt_fail(msg, FMT_ECORRUPT, "dataset %s without %s", has_aux ? "aux" : "aux_len",
                      has_aux ? "aux_len" : "aux");
        goto leave;
    }
    if (has_aux) {
        hsize_t ad[4] = {0};
        hid_t a = open_dset(file, "aux", 1, H5T_SGN_NONE, 2, NULL, ad, msg, &rc);
        if (a < 0)
            goto leave;
        H5Dclose(a);
        if (ad[1] < 1 || ad[1] > H5B_MAX_AUX) {
            rc = fmt_fail(msg, FMT_ECORRUPT, "dataset aux: bad width %" PRIu64, (uint64_t)ad[1]);
            goto leave;
        }
        m->aux_width = (uint32_t)ad[1];
    }
    if ((rc = meta_alloc(m)) != 0) {
        fmt_fail(msg, rc, "cannot allocate the metadata of %" PRIu64 " samples", m->n);
        goto leave;
    }
    if ((rc = read_dset(file, "labels", 4, H5T_SGN_2, m->n, 0, H5T_NATIVE_INT32, m->labels,
                        msg)) != 0 ||
        (rc = read_dset(file, "shapes", 4, H5T_SGN_NONE, m->n, 3, H5T_NATIVE_UINT32, m->shapes,
                        msg)) != 0 ||
        (rc = read_dset(file, "hashes", 8, H5T_SGN_NONE, m->n, 0, H5T_NATIVE_UINT64, m->hashes,
                        msg)) != 0 ||
        (rc = read_dset(file, "sources", 8, H5T_SGN_NONE, m->n, 0, H5T_NATIVE_UINT64,
                        m->sources, msg)) != 0)
        goto leave;
    if (!m->fixed && (rc = read_dset(file, "offsets", 8, H5T_SGN_NONE, m->n, 0,
                                     H5T_NATIVE_UINT64, m->offsets, msg)) != 0)
        goto leave;
    if (m->aux_width &&
        ((rc = read_dset(file, "aux_len", 4, H5T_SGN_NONE, m->n, 0, H5T_NATIVE_UINT32,
                         m->aux_len, msg)) != 0 ||
         (rc = read_dset(file, "aux", 1, H5T_SGN_NONE, m->n, m->aux_width, H5T_NATIVE_UINT8,
                         m->aux, msg)) != 0))
        goto leave;

    uint64_t want;
    if ((rc = content_hash(m, &want)) != 0)
        goto leave;
    if (want != hash) {
        rc = fmt_fail(msg, FMT_EHASH, "content hash does not match (metadata changed)");
        goto leave;
    }
    if ((rc = check_samples(m, msg)) != 0 || (rc = check_pixel_storage(s, pix, msg)) != 0)
        goto leave;

    s->info = (fmt_shard_info){
        .samples = m->n, .first_index = m->first_index, .fingerprint = m->fingerprint,
        .input_end = m->input_end, .bytes = s->file_size, .hash = hash,
    };
    memcpy(s->info.sum, m->sum, sizeof m->sum);
    memcpy(s->info.sumsq, m->sumsq, sizeof m->sumsq);
    if (!s->direct) {
        /* the H5Dread path keeps the file open */
        s->file = file;
        s->pixels = pix;
        file = pix = H5I_INVALID_HID;
    }
leave:
    h5_close_id(&pix, H5Dclose);
    if (file >= 0 && H5Fclose(file) < 0 && !rc)
        rc = h5_fail(msg, FMT_ECORRUPT, "H5Fclose");
    h5_close_id(&fapl, H5Pclose);
    H5Eclear2(H5E_DEFAULT);
    h5_unlock();
    return rc;
}

static int same_file(const struct stat *a, const char *path)
{
    struct stat b;
    return stat(path, &b) == 0 && a->st_dev == b.st_dev && a->st_ino == b.st_ino;
}

static int h5r_open(void **out, const char *dir, const char *path, fmt_access access,
                    fmt_msg *msg)
{
    *out = NULL;
    if (msg)
        msg->text[0] = '\0';
    if (access != FMT_ACCESS_MMAP && access != FMT_ACCESS_PREAD && access != FMT_ACCESS_DIRECT)
        return fmt_fail(msg, FMT_EINVAL, "unknown access mode %d", (int)access);
    h5_shard *s = calloc(1, sizeof *s);
    if (!s)
        return ENOMEM;
    int rc = 0;
    s->fd = s->dfd = -1;
    s->file = s->pixels = H5I_INVALID_HID;
    s->access = access;
    struct stat st;
    if ((rc = fmt_open_regular(path, &s->fd, &st, msg)) != 0)
        goto leave;
    s->file_size = (uint64_t)st.st_size;
    /* refuse what is not HDF5 before the HDF5 library parses a byte of it */
    uint8_t sig[8];
    rc = fmt_pread_exact(s->fd, sig, s->file_size < 8 ? (size_t)s->file_size : 8, 0);
    if (rc)
        goto leave;
    if (s->file_size < 8 || memcmp(sig, H5B_SIGNATURE, 8) != 0) {
        rc = fmt_fail(msg, FMT_EFORMAT, "not an HDF5 file (bad signature)");
        goto leave;
    }
    if ((rc = h5r_load(s, path, msg)) != 0)
        goto leave;
    /* HDF5 opened the path by name: make sure it read the file our descriptor holds */
    if (!same_file(&st, path)) {
        rc = fmt_fail(msg, FMT_ECORRUPT, "file was replaced while being opened");
        goto leave;
    }
    if (s->direct && s->m.total > 0 && access == FMT_ACCESS_MMAP) {
        if (s->file_size > SIZE_MAX) {
            rc = fmt_fail(msg, FMT_ETOOBIG, "file too large to map");
            goto leave;
        }
        void *map = mmap(NULL, (size_t)s->file_size, PROT_READ, MAP_SHARED, s->fd, 0);
        if (map == MAP_FAILED) {
            rc = errno;
            goto leave;
        }
        s->map = map;
        s->map_len = (size_t)s->file_size;
    }
    if (s->direct && access == FMT_ACCESS_DIRECT) {
        s->dfd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
        if (s->dfd < 0 && errno != EINVAL) {
            rc = errno;
            goto leave;
        }
        struct stat dst;
        if (s->dfd >= 0 && (fstat(s->dfd, &dst) != 0 || dst.st_dev != st.st_dev ||
                            dst.st_ino != st.st_ino)) {
            rc = fmt_fail(msg, FMT_ECORRUPT, "file was replaced while being opened");
            goto leave;
        }
    }
leave:
    if (rc)
        h5r_close(s);
    else
        *out = s;
    return rc;
}

/* Before HDF5 sees the file: its size, and the hash of every byte HDF5 parses (all but the
 * pixel range), against the manifest's pins. HDF5 trusts its superblock, object headers, heaps
 * and B-trees; damage there has made libhdf5 read out of bounds (H5Aexists) and leak on every
 * failed open, so a damaged shard never reaches it. Without pins (manifests of older builds)
 * only the signature check of h5r_open stands between HDF5 and the file. */
static int h5r_precheck(const char *path, const fmt_manifest_shard *ms, fmt_msg *msg)
{
    if (!(ms->pins & FMT_PIN_OPEN))
        return 0;
    uint64_t pin, size;
    int rc = fmt_hash_file(path, ms->pin_skip_off, ms->pin_skip_len, &pin, NULL, &size);
    if (rc)
        return fmt_fail(msg, rc, "%s", fmt_strerror(rc));
    if (size != ms->bytes)
        return fmt_fail(msg, size < ms->bytes ? FMT_ETRUNC : FMT_ECORRUPT, "file is %" PRIu64
                        " bytes, the manifest says %" PRIu64, size, ms->bytes);
    if (pin != ms->pin_hash)
        return fmt_fail(msg, FMT_EHASH, "HDF5 metadata (superblock, object headers, indexes) does "
                        "not match the manifest's pin: damaged");
    return 0;
}

static int h5r_pins(const void *sp, const char *path, fmt_shard_info *info)
{
    const h5_shard *s = sp;
    if (!s->direct)
        return FMT_EUNSUPPORTED;    /* not written by our writer */
    info->pin_skip_off = s->m.total ? s->pix_off : 0;
    info->pin_skip_len = s->m.total;
    int rc = fmt_hash_file(path, info->pin_skip_off, info->pin_skip_len, &info->pin_hash,
                           &info->file_hash, NULL);
    info->pins = rc ? 0 : FMT_PIN_FILE | FMT_PIN_OPEN;
    return rc;
}

static const fmt_shard_info *h5r_info(const void *sp)
{
    return &((const h5_shard *)sp)->info;
}

/* Offset of sample i inside the pixel data, and its length. */
static void sample_range(const h5_shard *s, uint64_t i, uint64_t *off, uint64_t *len)
{
    const uint32_t *sh = s->m.shapes + 3 * i;
    *len = (uint64_t)sh[0] * sh[1] * sh[2];
    *off = s->m.fixed ? i * s->stride : s->m.offsets[i];
}

static int h5r_get(const void *sp, uint64_t i, fmt_sample *out)
{
    const h5_shard *s = sp;
    if (i >= s->m.n)
        return FMT_EINVAL;
    uint64_t off, len;
    sample_range(s, i, &off, &len);
    const uint32_t *sh = s->m.shapes + 3 * i;
    *out = (fmt_sample){
        .index = i, .label = s->m.labels[i], .height = sh[0], .width = sh[1],
        .channels = sh[2], .source = s->m.sources[i], .hash = s->m.hashes[i], .length = len,
        .pixels = s->map ? s->map + s->pix_off + off : NULL,
    };
    if (s->m.aux_width && s->m.aux_len[i]) {
        out->aux = s->m.aux + i * s->m.aux_width;
        out->aux_len = s->m.aux_len[i];
    }
    return 0;
}

/* H5Dread path: one hyperslab of the pixels dataset. */
static int read_h5(const h5_shard *s, uint64_t i, uint64_t off, uint64_t len, void *dst)
{
    int rc = 0;
    hid_t fsp = H5I_INVALID_HID, msp = H5I_INVALID_HID;
    hsize_t start[4] = {0}, count[4] = {0};
    int rank = s->m.fixed ? 4 : 1;
    if (s->m.fixed) {
        start[0] = i;
        count[0] = 1;
        count[1] = s->m.fh;
        count[2] = s->m.fw;
        count[3] = s->m.fc;
    } else {
        start[0] = off;
        count[0] = len;
    }
    h5_lock();
    if ((fsp = H5Dget_space(s->pixels)) < 0 ||
        H5Sselect_hyperslab(fsp, H5S_SELECT_SET, start, NULL, count, NULL) < 0 ||
        /* the memory space has the selection's shape: HDF5 then copies whole rows, where a
         * 1-D memory space against a 4-D selection costs it milliseconds per sample */
        (msp = H5Screate_simple(rank, count, NULL)) < 0 ||
        H5Dread(s->pixels, H5T_NATIVE_UINT8, msp, fsp, H5P_DEFAULT, dst) < 0)
        rc = h5_error(FMT_ECORRUPT, NULL, 0);
    h5_close_id(&msp, H5Sclose);
    h5_close_id(&fsp, H5Sclose);
    h5_unlock();
    return rc;
}

static int h5r_read(const void *sp, uint64_t i, void *dst, void *scratch, size_t scratch_len)
{
    const h5_shard *s = sp;
    if (i >= s->m.n)
        return FMT_EINVAL;
    uint64_t off, len;
    sample_range(s, i, &off, &len);
    if (len == 0)
        return 0;
    if (!s->direct)
        return read_h5(s, i, off, len, dst);
    if (s->map) {
        memcpy(dst, s->map + s->pix_off + off, (size_t)len);
        return 0;
    }
    if (s->dfd < 0)
        return fmt_pread_exact(s->fd, dst, (size_t)len, s->pix_off + off);
    /* a scratch O_DIRECT cannot use is left aside: fmt_direct_read allocates one. Samples lie
     * back to back, mostly off block boundaries: one request through scratch each (a split
     * straight into dst would take up to three) */
    if (scratch_len == 0 || scratch_len % FMT_DIRECT_ALIGN ||
        (uintptr_t)scratch % FMT_DIRECT_ALIGN)
        scratch = NULL;
    return fmt_direct_read(s->dfd, s->fd, dst, s->pix_off + off, len, scratch, scratch_len,
                           FMT_DIRECT_BOUNCE);
}

static int h5r_check(const void *sp, uint64_t i)
{
    const h5_shard *s = sp;
    if (i >= s->m.n)
        return FMT_EINVAL;
    uint64_t off, len;
    sample_range(s, i, &off, &len);
    if (s->map)
        return fmt_hash64(s->map + s->pix_off + off, (size_t)len) == s->m.hashes[i] ? 0 :
               FMT_EHASH;
    uint8_t *buf = malloc(len ? (size_t)len : 1);
    if (!buf)
        return ENOMEM;
    int rc = h5r_read(s, i, buf, NULL, 0);
    if (!rc && fmt_hash64(buf, (size_t)len) != s->m.hashes[i])
        rc = FMT_EHASH;
    free(buf);
    return rc;
}

static int h5r_direct(const void *sp)
{
    return ((const h5_shard *)sp)->dfd >= 0;
}

static int h5r_advise(const void *sp, fmt_advice advice)
{
    const h5_shard *s = sp;
    if ((unsigned)advice > FMT_ADVICE_RANDOM)
        return FMT_EINVAL;
    if (s->map) {
        int a = advice == FMT_ADVICE_SEQUENTIAL ? MADV_SEQUENTIAL :
                advice == FMT_ADVICE_RANDOM ? MADV_RANDOM : MADV_NORMAL;
        return madvise((void *)s->map, s->map_len, a) == 0 ? 0 : errno;
    }
    if (s->direct && s->access == FMT_ACCESS_PREAD) {
        int a = advice == FMT_ADVICE_SEQUENTIAL ? POSIX_FADV_SEQUENTIAL :
                advice == FMT_ADVICE_RANDOM ? POSIX_FADV_RANDOM : POSIX_FADV_NORMAL;
        return posix_fadvise(s->fd, 0, 0, a);
    }
    return 0; /* O_DIRECT has no page cache; HDF5's reads are its own */
}

const fmt_backend fmt_backend_hdf5 = {
    .name = "hdf5",
    .version = H5B_VERSION,
    .suffix = ".h5",
    .w_open = h5w_open,
    .w_add = h5w_add,
    .w_count = h5w_count,
    .w_size = h5w_size,
    .w_cost = h5w_cost,
    .w_finish = h5w_finish,
    .w_abort = h5w_abort,
    .r_precheck = h5r_precheck,
    .r_pins = h5r_pins,
    .r_open = h5r_open,
    .r_close = h5r_close,
    .r_info = h5r_info,
    .r_get = h5r_get,
    .r_read = h5r_read,
    .r_check = h5r_check,
    .r_advise = h5r_advise,
    .r_direct = h5r_direct,
};
