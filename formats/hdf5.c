/* hdf5.c - the hdf5 backend (spec: formats/hdf5.md): one HDF5 file per shard. This file holds
 * the HDF5 lock and error reporting, a shard's metadata and its content hash (all three shared with
 * the reader through hdf5_int.h), the writer, and the backend table fmt_backend_hdf5. The reader
 * is hdf5read.c.
 *
 * Locking. The HDF5 library may not be entered by two threads at once (Debian's build is
 * configured thread-safe, which only means it takes a global lock of its own; other builds are
 * not safe at all), so every HDF5 call of the backend is made holding h5_mutex, one mutex for the
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
#include "hdf5_int.h"

#include "backend.h"
#include "le.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

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

/* ---- the HDF5 lock and error reporting ---- */

static pthread_mutex_t h5_mutex = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local int h5_quiet;

void fmt_h5_lock(void)
{
    pthread_mutex_lock(&h5_mutex);
    if (!h5_quiet) {
        H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
        h5_quiet = 1;
    }
}

void fmt_h5_unlock(void)
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

int fmt_h5_error(int dflt, char *desc, size_t desc_len)
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

int fmt_h5_fail(fmt_msg *msg, int dflt, const char *what)
{
    char desc[160];
    int rc = fmt_h5_error(dflt, desc, sizeof desc);
    return fmt_fail(msg, rc, "HDF5 error in %s: %s", what, desc);
}

void fmt_h5_close_id(hid_t *id, herr_t (*close_fn)(hid_t))
{
    if (*id >= 0)
        close_fn(*id);
    *id = H5I_INVALID_HID;
}

/* ---- shared with the reader: the metadata of a shard and its content hash ---- */

void fmt_h5_meta_free(h5_meta *m)
{
    free(m->labels);
    free(m->shapes);
    free(m->hashes);
    free(m->sources);
    free(m->offsets);
    free(m->aux_len);
    free(m->aux);
    free(m->aux_off);
    memset(m, 0, sizeof *m);
}

int fmt_h5_meta_alloc(h5_meta *m)
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
        if (m->packed) {
            if (m->aux_total > SIZE_MAX)
                return ENOMEM;
            m->aux = malloc(m->aux_total ? (size_t)m->aux_total : 1);
            m->aux_off = calloc(n, sizeof *m->aux_off);
        } else {
            m->aux = calloc(n, m->aux_width);
        }
        if (!m->aux_len || !m->aux || (m->packed && !m->aux_off))
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

int fmt_h5_content_hash(const h5_meta *m, uint64_t *out)
{
    XXH3_state_t *st = XXH3_createState();
    if (!st)
        return ENOMEM;
    uint8_t head[13 * 8];
    uint64_t f[13] = {
        m->packed ? H5B_VERSION_PACKED : H5B_VERSION, m->n, m->first_index, m->fingerprint, m->input_end,
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
        XXH3_64bits_update(st, m->aux, m->packed ? (size_t)m->aux_total : n * m->aux_width);
    }
    *out = XXH3_64bits_digest(st);
    XXH3_freeState(st);
    return 0;
}

/* ---- writer ---- */

int fmt_h5_pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
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
    if (w->aux_width)   /* the table, or the records end to end past its bound */
        size += aligned_cost(4 * n) +
                aligned_cost(w->aux_width > H5B_MAX_AUX ? w->aux_used : n * w->aux_width);
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
    if (aux_len > H5B_MAX_AUX_PACKED || fmt_shape_bytes(m->height, m->width, m->channels, &len) ||
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

    int rc = fmt_h5_pwrite_all(w->fd, pixels, (size_t)len, w->pos);
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
        fmt_h5_close_id(&d, H5Dclose);
    fmt_h5_close_id(&space, H5Sclose);
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
    fmt_h5_close_id(&a, H5Aclose);
    fmt_h5_close_id(&space, H5Sclose);
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
    fmt_h5_lock();
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
    hsize_t nflat = m->aux_total;
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
         h5_write_dset(file, dcpl, "aux", H5T_STD_U8LE, H5T_NATIVE_UINT8, m->packed ? 1 : 2,
                       m->packed ? &nflat : naux, m->aux, NULL)))
        goto leave;

    uint32_t version = m->packed ? H5B_VERSION_PACKED : H5B_VERSION;
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
    fmt_h5_close_id(&pix, H5Dclose);
    hid_t f = file;
    file = H5I_INVALID_HID;
    if (H5Fclose(f) < 0)
        goto leave;
    rc = 0;
leave:
    if (rc)
        rc = fmt_h5_error(EIO, NULL, 0);
    fmt_h5_close_id(&str, H5Tclose);
    fmt_h5_close_id(&pix, H5Dclose);
    fmt_h5_close_id(&file, H5Fclose);
    fmt_h5_close_id(&pcpl, H5Pclose);
    fmt_h5_close_id(&dcpl, H5Pclose);
    fmt_h5_close_id(&fapl, H5Pclose);
    fmt_h5_close_id(&fcpl, H5Pclose);
    H5Eclear2(H5E_DEFAULT);
    fmt_h5_unlock();
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
            (rc = fmt_h5_pwrite_all(out, buf, k, off + done)) != 0)
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
    m.packed = w->aux_width > H5B_MAX_AUX;     /* else the table, as before version 2 */
    m.aux_total = w->aux_used;
    if ((rc = fmt_h5_meta_alloc(&m)) != 0)
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
            memcpy(m.packed ? m.aux + e->aux_off : m.aux + i * m.aux_width,
                   w->aux + e->aux_off, e->aux_len);
        }
    }
    uint64_t hash, pix_off;
    if ((rc = fmt_h5_content_hash(&m, &hash)) != 0 ||
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
    fmt_h5_meta_free(&m);
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

/* ---- the backend table: the writer above, the reader in hdf5read.c ---- */

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
    .r_precheck = fmt_h5r_precheck,
    .r_pins = fmt_h5r_pins,
    .r_open = fmt_h5r_open,
    .r_close = fmt_h5r_close,
    .r_info = fmt_h5r_info,
    .r_get = fmt_h5r_get,
    .r_read = fmt_h5r_read,
    .r_check = fmt_h5r_check,
    .r_advise = fmt_h5r_advise,
    .r_direct = fmt_h5r_direct,
    .r_head_of = fmt_h5r_head_of,
    .r_tail = fmt_h5r_tail,
    .r_open_parts = fmt_h5r_open_parts,
};
