/* hdf5_int.h - what the parts of the hdf5 backend share: hdf5.c (the HDF5 lock, error
 * reporting, a shard's metadata and its content hash, the writer, the backend table),
 * hdf5read.c (the reader, whose entry points the table names), and hdf5skel.c (a shard read
 * from its parts before its file arrives). Internal to formats/.
 */
#ifndef FMT_HDF5_INT_H
#define FMT_HDF5_INT_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"

#define H5B_FORMAT "shardc-hdf5"        /* the `format` attribute */
#define H5B_VERSION 1u                  /* aux records in an n x A table (A: the widest) */
#define H5B_VERSION_PACKED 2u           /* aux records end to end (a record wider than A's bound) */
#define H5B_MAX_AUX 65536u              /* widest aux record of a version 1 shard's table */
#define H5B_MAX_AUX_PACKED (256u << 20) /* widest aux record at all (version 2) */

/* ---- the HDF5 lock and error reporting (hdf5.c) ---- */

/* Take and release the process-wide HDF5 lock (h5_mutex in hdf5.c, whose head says why every
 * HDF5 call is made holding it). A thread's first fmt_h5_lock turns HDF5's automatic printing of
 * its error stack off for that thread. */
void fmt_h5_lock(void);
void fmt_h5_unlock(void);

/* The innermost message of this thread's HDF5 error stack (clearing it) into desc (may be NULL),
 * and the error code that fits: the errno HDF5's file driver reports ("errno = 28, ..."),
 * FMT_ETRUNC for a file shorter than its superblock says, else dflt. Call with h5_mutex held. */
int fmt_h5_error(int dflt, char *desc, size_t desc_len);

/* fmt_fail with "HDF5 error in WHAT: <HDF5's message>". Call with h5_mutex held. */
int fmt_h5_fail(fmt_msg *msg, int dflt, const char *what);

/* Close *id with close_fn unless it is invalid already; *id is H5I_INVALID_HID after. */
void fmt_h5_close_id(hid_t *id, herr_t (*close_fn)(hid_t));

/* ---- a shard's metadata and its content hash (hdf5.c) ---- */

/* What the writer records and the reader loads: everything but the pixels. */
typedef struct {
    uint64_t n, first_index, fingerprint, input_end;
    uint64_t sum[3], sumsq[3];
    int fixed;                  /* fixed layout: every sample is fh x fw x fc */
    uint32_t fh, fw, fc;
    uint64_t total;             /* pixel bytes */
    uint32_t aux_width;         /* A: the widest record, 0 without aux */
    int packed;                 /* version 2: aux holds the records end to end */
    uint64_t aux_total;         /* packed: their bytes */
    int32_t *labels;
    uint32_t *shapes;           /* 3n */
    uint64_t *hashes, *sources;
    uint64_t *offsets;          /* flat layout only */
    uint32_t *aux_len;          /* with aux only */
    uint8_t *aux;               /* n * aux_width, or aux_total bytes packed */
    uint64_t *aux_off;          /* packed, the reader's: record i's offset in aux */
} h5_meta;

/* Free m's arrays and zero it. */
void fmt_h5_meta_free(h5_meta *m);

/* Allocate the arrays for m->n samples (aux_width, packed with aux_total, and fixed set
 * first). 0 or ENOMEM. */
int fmt_h5_meta_alloc(h5_meta *m);

/* The content hash of formats/hdf5.md. 0 or ENOMEM. */
int fmt_h5_content_hash(const h5_meta *m, uint64_t *out);

/* ---- the reader (hdf5read.c): its entries in fmt_backend_hdf5, as backend.h says ---- */

int fmt_h5r_precheck(const char *path, const fmt_manifest_shard *ms, fmt_msg *msg);
int fmt_h5r_pins(const void *sp, const char *path, fmt_shard_info *info);
int fmt_h5r_open(void **out, const char *dir, const char *path, fmt_access access, fmt_msg *msg);
/* len bytes of buf written at offset off of fd, EINTR retried: 0 or the errno (EIO when a write
 * makes no progress). (hdf5.c) */
int fmt_h5_pwrite_all(int fd, const void *buf, size_t len, uint64_t off);

/* (hdf5skel.c) A shard before its file arrives (backend.h r_head_of, r_tail, r_open_parts):
 * the bytes before its pixels and those after them, which its manifest entry's pins locate
 * and hash. */
int fmt_h5r_head_of(const fmt_manifest_shard *ms, uint64_t *len, fmt_msg *msg);
int fmt_h5r_tail(const uint8_t *head, const fmt_manifest_shard *ms, uint64_t *from, uint64_t *to,
                 fmt_msg *msg);
int fmt_h5r_open_parts(void **out, const fmt_manifest_shard *ms, const uint8_t *head,
                       size_t head_len, const uint8_t *tail, size_t tail_len, fmt_msg *msg);
/* (hdf5read.c) A shard fmt_h5r_open opened from such parts made metadata only: its r_read and
 * r_check FMT_EUNSUPPORTED. 0, or FMT_EUNSUPPORTED when its pixels are not contiguous. */
int fmt_h5r_as_skeleton(void *s);
void fmt_h5r_close(void *sp);
const fmt_shard_info *fmt_h5r_info(const void *sp);
int fmt_h5r_get(const void *sp, uint64_t i, fmt_sample *out);
int fmt_h5r_read(const void *sp, uint64_t i, void *dst, void *scratch, size_t scratch_len);
int fmt_h5r_check(const void *sp, uint64_t i);
int fmt_h5r_advise(const void *sp, fmt_advice advice);
int fmt_h5r_direct(const void *sp);

#endif
