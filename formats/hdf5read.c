/* hdf5read.c - the reader of the hdf5 backend (spec: formats/hdf5.md): opening a shard checks
 * everything hdf5.md's "What a reader checks on open" lists, and samples are then read from our
 * own descriptor or mapping where the pixels lie contiguous in the file, or through H5Dread under
 * the HDF5 lock where they do not. Its entry points sit in fmt_backend_hdf5 (hdf5.c), which also
 * holds the writer, the lock and why it shapes this read path, and the metadata and content hash
 * both halves share (hdf5_int.h).
 */
#include "hdf5_int.h"

#include "backend.h"
#include "directio.h"
#include "fdcache.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define H5B_SIGNATURE "\211HDF\r\n\032\n"

typedef struct h5_shard {
    fmt_shard_info info;
    h5_meta m;
    fmt_access access;
    int fd, dfd;                /* while opening; afterwards -1 (see pfile, dfile) */
    /* pread / O_DIRECT reads of contiguous pixels: the descriptors, from the bounded cache
     * (fdcache.h), so that an open shard holds none of its own; NULL where unused */
    fmt_fdfile *pfile, *dfile;
    const uint8_t *map;
    size_t map_len;
    uint64_t file_size;
    int direct;                 /* pixels are contiguous in the file at pix_off */
    uint64_t pix_off;
    uint64_t stride;            /* fixed layout: bytes per sample */
    /* H5Dread path only: the file and its pixels dataset while HDF5 holds the file open (else
     * both H5I_INVALID_HID), in the list of open files; path, dev and ino to reopen it and check
     * that it is still the file validated at open. All under the HDF5 lock. */
    hid_t file, pixels;
    char *path;
    dev_t dev;
    ino_t ino;
    int mapped;                 /* map counted by fmt_map_reserve */
    int skeleton;               /* fmt_h5r_open_parts: metadata only, no pixels to read */
    struct h5_shard *prev, *next;
} h5_shard;

/* Shards of the H5Dread path (chunked pixels) whose file HDF5 holds open, most recently read
 * first, under the HDF5 lock. HDF5 keeps a descriptor per open file: past H5R_OPEN_MAX the least
 * recently read is closed, and reopened when next read, so that any number of chunked shards
 * opens within a small fixed number of descriptors. */
#define H5R_OPEN_MAX 32
static h5_shard *h5_open_head, *h5_open_tail;
static unsigned h5_open_count;

static void open_unlink(h5_shard *s)
{
    if (s->prev)
        s->prev->next = s->next;
    else
        h5_open_head = s->next;
    if (s->next)
        s->next->prev = s->prev;
    else
        h5_open_tail = s->prev;
    s->prev = s->next = NULL;
    h5_open_count--;
}

static void open_push(h5_shard *s)
{
    s->prev = NULL;
    s->next = h5_open_head;
    if (h5_open_head)
        h5_open_head->prev = s;
    else
        h5_open_tail = s;
    h5_open_head = s;
    h5_open_count++;
}

/* Let HDF5 close s's file (under the lock). */
static void file_close(h5_shard *s)
{
    if (s->file < 0)
        return;
    open_unlink(s);
    fmt_h5_close_id(&s->pixels, H5Dclose);
    fmt_h5_close_id(&s->file, H5Fclose);
    H5Eclear2(H5E_DEFAULT);
}

/* Close the least recently read files past H5R_OPEN_MAX (under the lock). */
static void file_trim(void)
{
    while (h5_open_count > H5R_OPEN_MAX && h5_open_tail)
        file_close(h5_open_tail);
}

void fmt_h5r_close(void *sp)
{
    h5_shard *s = sp;
    if (!s)
        return;
    if (s->file >= 0) {
        fmt_h5_lock();
        file_close(s);
        fmt_h5_unlock();
    }
    if (s->map)
        munmap((void *)s->map, s->map_len);
    if (s->mapped)
        fmt_map_unreserve();
    free(s->path);
    if (s->dfd >= 0)
        close(s->dfd);
    if (s->fd >= 0)
        close(s->fd);
    fmt_fdfile_free(s->dfile);
    fmt_fdfile_free(s->pfile);
    fmt_h5_meta_free(&s->m);
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
        return fmt_h5_fail(msg, FMT_ECORRUPT, "H5Aexists");
    if (!ex)
        return fmt_fail(msg, FMT_ECORRUPT, "missing attribute %s", name);
    if ((a = H5Aopen(file, name, H5P_DEFAULT)) < 0 || (t = H5Aget_type(a)) < 0 ||
        (sp = H5Aget_space(a)) < 0) {
        char what[96];
        snprintf(what, sizeof what, "H5Aopen(%s)", name);
        rc = fmt_h5_fail(msg, FMT_ECORRUPT, what);
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
        rc = fmt_h5_fail(msg, FMT_ECORRUPT, what);
    }
leave:
    fmt_h5_close_id(&sp, H5Sclose);
    fmt_h5_close_id(&t, H5Tclose);
    fmt_h5_close_id(&a, H5Aclose);
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
        return fmt_h5_fail(msg, FMT_ECORRUPT, "H5Aexists");
    if (!ex)
        return fmt_fail(msg, FMT_EFORMAT, "not a shardc hdf5 shard (no format attribute)");
    if ((a = H5Aopen(file, "format", H5P_DEFAULT)) < 0 || (t = H5Aget_type(a)) < 0 ||
        (sp = H5Aget_space(a)) < 0) {
        rc = fmt_h5_fail(msg, FMT_ECORRUPT, "H5Aopen(format)");
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
            rc = fmt_h5_fail(msg, FMT_ECORRUPT, "H5Aread(format)");
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
            rc = fmt_h5_fail(msg, FMT_ECORRUPT, "H5Aread(format)");
            goto leave;
        }
        buf[size] = '\0';
    }
    if (strcmp(buf, H5B_FORMAT) != 0)
        rc = fmt_fail(msg, FMT_EFORMAT, "not a shardc hdf5 shard (format is \"%.40s\")", buf);
leave:
    fmt_h5_close_id(&mt, H5Tclose);
    fmt_h5_close_id(&sp, H5Sclose);
    fmt_h5_close_id(&t, H5Tclose);
    fmt_h5_close_id(&a, H5Aclose);
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
        *rc = ex < 0 ? fmt_h5_fail(msg, FMT_ECORRUPT, "H5Lexists") :
              fmt_fail(msg, FMT_ECORRUPT, "missing dataset %s", name);
        return H5I_INVALID_HID;
    }
    *rc = 0;
    if ((d = H5Dopen2(file, name, H5P_DEFAULT)) < 0 || (t = H5Dget_type(d)) < 0 ||
        (sp = H5Dget_space(d)) < 0) {
        char what[96];
        snprintf(what, sizeof what, "H5Dopen(%s)", name);
        *rc = fmt_h5_fail(msg, FMT_ECORRUPT, what);
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
        *rc = fmt_h5_fail(msg, FMT_ECORRUPT, "H5Sget_simple_extent_dims");
        goto leave;
    }
    if (got_rank)
        *got_rank = r;
leave:
    fmt_h5_close_id(&sp, H5Sclose);
    fmt_h5_close_id(&t, H5Tclose);
    if (*rc)
        fmt_h5_close_id(&d, H5Dclose);
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
        rc = fmt_h5_fail(msg, FMT_ECORRUPT, what);
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
        return fmt_h5_fail(msg, FMT_ECORRUPT, "H5Dget_create_plist(pixels)");
    H5D_layout_t layout = H5Pget_layout(dcpl);
    int next = H5Pget_external_count(dcpl);
    int nfilters = H5Pget_nfilters(dcpl);
    if (layout < 0 || next < 0 || nfilters < 0) {
        rc = fmt_h5_fail(msg, FMT_ECORRUPT, "H5Pget_layout(pixels)");
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
    fmt_h5_lock();
    fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0 || H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG) < 0 ||
        H5Pset_file_locking(fapl, 0, 1) < 0) {
        rc = fmt_h5_fail(msg, ENOMEM, "H5Pcreate");
        goto leave;
    }
    file = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    if (file < 0) {
        rc = fmt_h5_fail(msg, FMT_ECORRUPT, "H5Fopen");
        goto leave;
    }

    uint32_t version = 0;
    uint64_t hash = 0;
    if ((rc = check_format_attr(file, msg)) != 0 ||
        (rc = read_attr_int(file, "version", 4, H5T_SGN_NONE, 1, H5T_NATIVE_UINT32, &version,
                            msg)) != 0)
        goto leave;
    if (version != H5B_VERSION && version != H5B_VERSION_PACKED) {
        rc = fmt_fail(msg, FMT_EVERSION, "unsupported version %" PRIu32 " (this reader knows %u "
                      "and %u)", version, H5B_VERSION, H5B_VERSION_PACKED);
        goto leave;
    }
    m->packed = version == H5B_VERSION_PACKED;
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
        rc = fmt_h5_fail(msg, FMT_ECORRUPT, "H5Lexists");
        goto leave;
    }
    if (has_aux != has_aux_len) {
        rc = fmt_fail(msg, FMT_ECORRUPT, "dataset %s without %s", has_aux ? "aux" : "aux_len",
                      has_aux ? "aux_len" : "aux");
        goto leave;
    }
    if (has_aux) {
        /* version 1: an n x A table; version 2: the records end to end, A their widest (from
         * aux_len, below) */
        hsize_t ad[4] = {0};
        hid_t a = open_dset(file, "aux", 1, H5T_SGN_NONE, m->packed ? 1 : 2, NULL, ad, msg, &rc);
        if (a < 0)
            goto leave;
        H5Dclose(a);
        if (m->packed) {
            m->aux_total = ad[0];
            m->aux_width = 1;       /* for the allocation; the widest record once read */
        } else if (ad[1] < 1 || ad[1] > H5B_MAX_AUX) {
            rc = fmt_fail(msg, FMT_ECORRUPT, "dataset aux: bad width %" PRIu64, (uint64_t)ad[1]);
            goto leave;
        } else {
            m->aux_width = (uint32_t)ad[1];
        }
    }
    if ((rc = fmt_h5_meta_alloc(m)) != 0) {
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
         (rc = read_dset(file, "aux", 1, H5T_SGN_NONE, m->packed ? m->aux_total : m->n,
                         m->packed ? 0 : m->aux_width, H5T_NATIVE_UINT8, m->aux, msg)) != 0))
        goto leave;
    if (m->aux_width && m->packed) {
        /* each record's offset, and the widest: the records must fill the dataset exactly */
        uint64_t at = 0;
        m->aux_width = 0;
        for (uint64_t i = 0; i < m->n; i++) {
            m->aux_off[i] = at;
            at += m->aux_len[i];
            if (m->aux_len[i] > m->aux_width)
                m->aux_width = m->aux_len[i];
        }
        if (at != m->aux_total || m->aux_width > H5B_MAX_AUX_PACKED || m->aux_width == 0) {
            rc = fmt_fail(msg, FMT_ECORRUPT, "dataset aux: its records take %" PRIu64 " bytes of "
                          "%" PRIu64, at, m->aux_total);
            goto leave;
        }
    }

    uint64_t want;
    if ((rc = fmt_h5_content_hash(m, &want)) != 0)
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
        /* the H5Dread path keeps the file open while it is among the H5R_OPEN_MAX most
         * recently read */
        s->file = file;
        s->pixels = pix;
        file = pix = H5I_INVALID_HID;
        open_push(s);
        file_trim();
    }
leave:
    fmt_h5_close_id(&pix, H5Dclose);
    if (file >= 0 && H5Fclose(file) < 0 && !rc)
        rc = fmt_h5_fail(msg, FMT_ECORRUPT, "H5Fclose");
    fmt_h5_close_id(&fapl, H5Pclose);
    H5Eclear2(H5E_DEFAULT);
    fmt_h5_unlock();
    return rc;
}

static int same_file(const struct stat *a, const char *path)
{
    struct stat b;
    return stat(path, &b) == 0 && a->st_dev == b.st_dev && a->st_ino == b.st_ino;
}

int fmt_h5r_open(void **out, const char *dir, const char *path, fmt_access access,
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
    s->dev = st.st_dev;
    s->ino = st.st_ino;
    if (!(s->path = strdup(path))) {
        rc = ENOMEM;
        goto leave;
    }
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
    /* past the mapping cap (fdcache.h) a MMAP shard is read with pread */
    if (s->direct && s->m.total > 0 && access == FMT_ACCESS_MMAP && fmt_map_reserve()) {
        s->mapped = 1;
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
    /* a mapping and HDF5's own reads need no descriptor of ours; pread and O_DIRECT reads take
     * theirs from the cache */
    if (s->direct && !s->map) {
        rc = fmt_fdfile_new(&s->pfile, path, O_RDONLY, s->fd);
        s->fd = -1;
        if (!rc && s->dfd >= 0)
            rc = fmt_fdfile_new(&s->dfile, path, O_RDONLY | O_DIRECT, s->dfd);
        else if (s->dfd >= 0)
            close(s->dfd);
        s->dfd = -1;
        if (rc)
            goto leave;
    } else {
        close(s->fd);
        s->fd = -1;
        if (s->dfd >= 0)
            close(s->dfd);
        s->dfd = -1;
    }
leave:
    if (rc)
        fmt_h5r_close(s);
    else
        *out = s;
    return rc;
}

/* Before HDF5 sees the file: its size, and the hash of every byte HDF5 parses (all but the
 * pixel range), against the manifest's pins. HDF5 trusts its superblock, object headers, heaps
 * and B-trees; damage there has made libhdf5 read out of bounds (H5Aexists) and leak on every
 * failed open, so a damaged shard never reaches it. Without pins (manifests of older builds)
 * only the signature check of fmt_h5r_open stands between HDF5 and the file. */
int fmt_h5r_precheck(const char *path, const fmt_manifest_shard *ms, fmt_msg *msg)
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

int fmt_h5r_pins(const void *sp, const char *path, fmt_shard_info *info)
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

const fmt_shard_info *fmt_h5r_info(const void *sp)
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

int fmt_h5r_get(const void *sp, uint64_t i, fmt_sample *out)
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
        out->aux = s->m.packed ? s->m.aux + s->m.aux_off[i] : s->m.aux + i * s->m.aux_width;
        out->aux_len = s->m.aux_len[i];
    }
    return 0;
}

/* Have HDF5 open s's file again (under the lock): the file validated at open, or FMT_ECORRUPT
 * when its path now names another. */
static int file_reopen(h5_shard *s)
{
    int rc = 0;
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    void *handle = NULL;
    struct stat st;
    if (fapl < 0 || H5Pset_fapl_sec2(fapl) < 0 || H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG) < 0 ||
        H5Pset_file_locking(fapl, 0, 1) < 0) {
        rc = ENOMEM;
        goto leave;
    }
    if ((s->file = H5Fopen(s->path, H5F_ACC_RDONLY, fapl)) < 0) {
        /* the path gone or unreadable now: say why where the system can */
        rc = access(s->path, R_OK) != 0 ? errno : FMT_ECORRUPT;
        goto leave;
    }
    /* sec2 keeps one descriptor: it must hold the file validated at open */
    if (H5Fget_vfd_handle(s->file, fapl, &handle) < 0 || !handle ||
        fstat(*(int *)handle, &st) != 0 || st.st_dev != s->dev || st.st_ino != s->ino) {
        rc = FMT_ECORRUPT;
        goto leave;
    }
    if ((s->pixels = H5Dopen2(s->file, "pixels", H5P_DEFAULT)) < 0)
        rc = FMT_ECORRUPT;
leave:
    if (rc) {
        fmt_h5_close_id(&s->pixels, H5Dclose);
        fmt_h5_close_id(&s->file, H5Fclose);
    } else {
        open_push(s);
    }
    fmt_h5_close_id(&fapl, H5Pclose);
    H5Eclear2(H5E_DEFAULT);
    return rc;
}

/* H5Dread path: one hyperslab of the pixels dataset, reopening the file if it was closed. */
static int read_h5(const h5_shard *cs, uint64_t i, uint64_t off, uint64_t len, void *dst)
{
    /* the open-file list is the only state a read changes, under the lock */
    h5_shard *s = (h5_shard *)cs;
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
    fmt_h5_lock();
    if (s->file < 0) {
        if ((rc = file_reopen(s)) != 0) {
            fmt_h5_unlock();
            return rc;
        }
    } else if (s != h5_open_head) {
        open_unlink(s);
        open_push(s);
    }
    if ((fsp = H5Dget_space(s->pixels)) < 0 ||
        H5Sselect_hyperslab(fsp, H5S_SELECT_SET, start, NULL, count, NULL) < 0 ||
        /* the memory space has the selection's shape: HDF5 then copies whole rows, where a
         * 1-D memory space against a 4-D selection costs it milliseconds per sample */
        (msp = H5Screate_simple(rank, count, NULL)) < 0 ||
        H5Dread(s->pixels, H5T_NATIVE_UINT8, msp, fsp, H5P_DEFAULT, dst) < 0)
        rc = fmt_h5_error(FMT_ECORRUPT, NULL, 0);
    fmt_h5_close_id(&msp, H5Sclose);
    fmt_h5_close_id(&fsp, H5Sclose);
    file_trim();
    fmt_h5_unlock();
    return rc;
}

int fmt_h5r_read(const void *sp, uint64_t i, void *dst, void *scratch, size_t scratch_len)
{
    const h5_shard *s = sp;
    if (i >= s->m.n)
        return FMT_EINVAL;
    if (s->skeleton)
        return FMT_EUNSUPPORTED;
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
    int fd, dfd, rc = fmt_fdfile_get(s->pfile, 0, &fd);
    if (rc)
        return rc;
    if (!s->dfile) {
        rc = fmt_pread_exact(fd, dst, (size_t)len, s->pix_off + off);
        fmt_fdfile_put(s->pfile);
        return rc;
    }
    if ((rc = fmt_fdfile_get(s->dfile, 0, &dfd)) != 0) {
        fmt_fdfile_put(s->pfile);
        return rc;
    }
    /* a scratch O_DIRECT cannot use is left aside: fmt_direct_read allocates one. Samples lie
     * back to back, mostly off block boundaries: one request through scratch each (a split
     * straight into dst would take up to three) */
    if (scratch_len == 0 || scratch_len % FMT_DIRECT_ALIGN ||
        (uintptr_t)scratch % FMT_DIRECT_ALIGN)
        scratch = NULL;
    rc = fmt_direct_read(dfd, fd, dst, s->pix_off + off, len, scratch, scratch_len,
                         FMT_DIRECT_BOUNCE);
    fmt_fdfile_put(s->dfile);
    fmt_fdfile_put(s->pfile);
    return rc;
}

int fmt_h5r_check(const void *sp, uint64_t i)
{
    const h5_shard *s = sp;
    if (i >= s->m.n)
        return FMT_EINVAL;
    if (s->skeleton)
        return FMT_EUNSUPPORTED;
    uint64_t off, len;
    sample_range(s, i, &off, &len);
    if (s->map)
        return fmt_hash64(s->map + s->pix_off + off, (size_t)len) == s->m.hashes[i] ? 0 :
               FMT_EHASH;
    uint8_t *buf = malloc(len ? (size_t)len : 1);
    if (!buf)
        return ENOMEM;
    int rc = fmt_h5r_read(s, i, buf, NULL, 0);
    if (!rc && fmt_hash64(buf, (size_t)len) != s->m.hashes[i])
        rc = FMT_EHASH;
    free(buf);
    return rc;
}

int fmt_h5r_direct(const void *sp)
{
    return ((const h5_shard *)sp)->dfile != NULL;
}

int fmt_h5r_advise(const void *sp, fmt_advice advice)
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
        /* a hint for the descriptor open now, if the cache holds one (lost when it closes) */
        int fd;
        if (fmt_fdfile_get(s->pfile, 1, &fd) != 0)
            return 0;
        int rc = posix_fadvise(fd, 0, 0, a);
        fmt_fdfile_put(s->pfile);
        return rc;
    }
    return 0; /* O_DIRECT has no page cache; HDF5's reads are its own */
}

/* fmt_h5r_open_parts's shard (hdf5skel.c): metadata only, its pixels never read (the file it
 * was opened from goes at once). FMT_EUNSUPPORTED when its pixels are not contiguous (another
 * tool's file), which only the H5Dread path, reopening that file, could read. */
int fmt_h5r_as_skeleton(void *sp)
{
    h5_shard *s = sp;
    if (!s->direct)
        return FMT_EUNSUPPORTED;
    fmt_fdfile_free(s->pfile);
    s->pfile = NULL;
    s->skeleton = 1;
    return 0;
}
