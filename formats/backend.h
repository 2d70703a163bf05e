/* backend.h - the storage backends behind one interface, in the manner of Redis's rio.h: a table of
 * function pointers per backend, for writing one shard and for reading one shard.
 *
 * A dataset directory holds manifest.json, which names the backend, and a list of shards, each
 * holding a contiguous range of the dataset's samples. What a shard is depends on the backend:
 *   raw     one file, shard-NNNNN.raw                     (formats/raw.md)
 *   hdf5    one HDF5 file, shard-NNNNN.h5                 (formats/hdf5.md)
 *   lmdb    one LMDB environment directory, shard-NNNNN.lmdb/   (formats/lmdb.md)
 *   png0, bmp, jpeg   one index file shard-NNNNN.idx plus one image file per sample in class
 *                     folders (<dir>/<class>/<index>.<ext>)    (formats/imageset.md)
 * The compiler writes shards through fmt_backend's writer calls; formats/dataset.c reads them
 * through its reader calls. Neither knows which backend it talks to.
 *
 * Every backend stores, per sample: label, height, width, channels, uint8 HWC pixels, the XXH3-64
 * hash of those pixels (fmt_hash64), the source index, and an optional aux record (augmentation
 * parameters; opaque bytes here). Per shard: sample count, first dataset index, the build
 * fingerprint, input_end (where a resumed build continues), per-channel pixel sums and sums of
 * squares (for the manifest's stats), and a content hash that the manifest records.
 *
 * Writers are atomic: a shard is written under a temporary name and renamed into place by finish
 * (after an fsync), so a shard with its final name is always complete. The library never prints.
 *
 * Thread-safety: a writer is used by one thread. A reader shard is immutable after open: get, read
 * and check may be called from any number of threads at once.
 */
#ifndef FMT_BACKEND_H
#define FMT_BACKEND_H

#include "manifest.h"
#include "sample.h"

/* What a shard says about itself (written by finish, read back by open). */
typedef struct {
    uint64_t samples;
    uint64_t first_index;
    uint64_t fingerprint;
    uint64_t input_end;
    uint64_t sum[3], sumsq[3];
    uint64_t bytes;             /* size on disk (files of the shard together) */
    uint64_t hash;              /* content hash recorded in the manifest */
    /* Set by w_finish of the backends whose shards a third-party library parses (hdf5, lmdb),
     * for the manifest: the pins of fmt_manifest_shard (pins, file_hash, pin_hash, skip range). */
    uint32_t pins;
    uint64_t file_hash;
    uint64_t pin_hash, pin_skip_off, pin_skip_len;
    uint64_t skel_off, skel_len;    /* the manifest's skeleton range (lmdb), else 0, 0 */
} fmt_shard_info;

/* What a writer accumulates over the samples it adds, for its shard's header and fmt_shard_info:
 * the count, the per-channel sums, and whether every sample has one shape. */
typedef struct {
    uint64_t count;
    uint64_t sum[3], sumsq[3];
    int fixed;                  /* count > 0 and every sample is h x w x c */
    uint32_t h, w, c;
} fmt_writer_stats;

/* Count the sample m (its sums and shape) into *st, which starts zeroed. */
void fmt_writer_stats_add(fmt_writer_stats *st, const fmt_sample_meta *m);

typedef struct {
    const char *dir;            /* the dataset directory */
    const char *name;           /* shard name without suffix, e.g. "shard-00003" */
    uint64_t first_index;
    uint64_t fingerprint;
    uint32_t align;             /* raw: payload alignment (0 = the packed layout) */
    int quality;                /* jpeg sets: 1..100 (0 = 90) */
    int codec, level;           /* raw: payload compression (compress.h FMT_CODEC_*, level) */
    double jpeg_fraction;       /* raw: the share of samples stored as JPEG at quality (0: none) */
    const char *const *classes; /* per-image sets: class folder names, label L -> classes[L] */
    size_t nclasses;
} fmt_writer_opts;

typedef struct fmt_backend {
    const char *name;           /* manifest "backend": "raw", "hdf5", "lmdb", "png0", "bmp", "jpeg" */
    uint32_t version;           /* its on-disk format version (manifest "backend_version") */
    const char *suffix;         /* appended to the shard name: ".raw", ".h5", ".lmdb", ".idx" */

    /* ---- writing one shard ---- */
    int (*w_open)(void **w, const fmt_writer_opts *o);
    /* Append one sample. m->hash and m->sum/sumsq were computed by the caller over `pixels`. An
     * I/O error leaves the writer failed (later calls FMT_ESTATE). For lossy backends (jpeg) the
     * stored hash is that of the pixels a decoder gets back, and *stored_hash (if not NULL)
     * receives it; others set it to m->hash. */
    int (*w_add)(void *w, const fmt_sample_meta *m, const void *pixels, uint64_t *stored_hash);
    uint64_t (*w_count)(const void *w);
    uint64_t (*w_size)(const void *w);          /* bytes the shard would have if finished now */
    /* Bytes one more sample of payload_len pixel bytes and aux_len aux bytes adds (an estimate
     * for compressed backends: the uncompressed size). */
    uint64_t (*w_cost)(uint64_t payload_len, uint32_t aux_len, uint32_t align);
    /* Optional (may be NULL): the bytes a finished shard holds besides its samples' w_cost (its
     * fixed pages), for shardc build --dry-run; NULL: one page of the raw layout. */
    uint64_t (*w_base)(void);
    /* Optional (may be NULL): exactly the bytes this sample would add to a shard written with o,
     * found by encoding it in memory, for backends whose size depends on the pixels or the
     * shape where w_cost knows only the payload length (image files, compressed payloads);
     * 0 if it cannot be encoded. shardc build --dry-run renders a sample of the inputs for it.
     * o->first_index is the sample's own dataset index (raw's mixed mode picks by it). */
    uint64_t (*w_sample_bytes)(const fmt_writer_opts *o, const fmt_sample_meta *m,
                               const void *pixels);
    /* Complete, fsync, rename into place, free w. On failure the temporary files are removed and
     * w is freed all the same. */
    int (*w_finish)(void *w, uint64_t input_end, fmt_shard_info *info);
    void (*w_abort)(void *w);                   /* remove temporaries, free; accepts NULL */

    /* ---- reading one shard ---- */
    /* Optional (may be NULL): check, with our own bounds-checked code and before r_open hands
     * the shard to a library that trusts its bytes, the regions that library parses: against
     * the manifest's pin when ms->pins has FMT_PIN_OPEN, structurally in any case. path as for
     * r_open. 0, FMT_ECORRUPT / FMT_EHASH / FMT_ETRUNC with msg set, or errno values. */
    int (*r_precheck)(const char *path, const fmt_manifest_shard *ms, fmt_msg *msg);
    /* Optional (may be NULL): compute the manifest's pins (pins, file_hash, pin_hash, skip
     * range) of open shard s, at path, into info, as w_finish gives them (--resume keeps
     * finished shards with it). Reads the whole file. */
    int (*r_pins)(const void *s, const char *path, fmt_shard_info *info);
    /* The file of a shard that file_hash and bytes describe, relative to the shard's path
     * (lmdb: "data.mdb"); NULL when the shard path is itself that file. */
    const char *data_file;
    /* path: the shard's path (dir/name + suffix). Validate everything that later calls rely on. */
    int (*r_open)(void **s, const char *dir, const char *path, fmt_access access, fmt_msg *msg);
    void (*r_close)(void *s);                   /* accepts NULL */
    const fmt_shard_info *(*r_info)(const void *s);
    /* Sample i's metadata. out->pixels points at the stored pixels when the backend can hand
     * them out without copying (valid until close), else it is NULL and r_read must be used.
     * out->aux likewise (NULL if none). out->index is local (i). */
    int (*r_get)(const void *s, uint64_t i, fmt_sample *out);
    /* Copy (or decode) sample i's pixels into dst (out->length bytes). scratch: an aligned
     * buffer for O_DIRECT reads (may be NULL in other modes). */
    int (*r_read)(const void *s, uint64_t i, void *dst, void *scratch, size_t scratch_len);
    /* Re-hash sample i: 0, FMT_EHASH on mismatch, or a read/decode error. */
    int (*r_check)(const void *s, uint64_t i);
    /* Optional (may be NULL): access-pattern hint. */
    int (*r_advise)(const void *s, fmt_advice advice);
    /* Optional (may be NULL): non-zero when FMT_ACCESS_DIRECT reads really bypass the page cache
     * for this shard (the filesystem may refuse O_DIRECT). */
    int (*r_direct)(const void *s);
    /* Optional (may be NULL): where sample i's bytes lie for O_DIRECT requests of the caller's
     * own (sample.h fmt_extent). 0, FMT_EINVAL (bad i), or FMT_EUNSUPPORTED when this shard is
     * not read with O_DIRECT. */
    int (*r_extent)(const void *s, uint64_t i, fmt_extent *out);
    /* Optional (may be NULL): the file holding sample i, when a sample has a file of its own
     * (per-image sets), for messages. 0, or FMT_EINVAL / ERANGE. */
    int (*r_sample_path)(const void *s, uint64_t i, char *buf, size_t len);

    /* ---- a shard's metadata before its file arrives (optional: r_tail NULL for none) ----
     * For a dataset whose shards arrive after its open (fmt_dataset_open_lazy): the file's first
     * r_head bytes, or with r_head_of as many as it says from the manifest entry ms
     * (FMT_EUNSUPPORTED: the entry does not say where the payload lies); r_tail checks them
     * against ms (raw: the header and its header_hash) and says which further bytes of the file,
     * [*from, *to), hold the rest of what r_get needs (raw: the index and aux area; hdf5: all
     * after the pixels); r_open_parts opens a shard of both (head_len and tail_len bytes),
     * checked as r_open checks a file's. Such a shard answers r_info and r_get (pixels NULL);
     * r_read, r_check and r_extent return FMT_EUNSUPPORTED or an error of their own. */
    uint32_t r_head;
    int (*r_head_of)(const fmt_manifest_shard *ms, uint64_t *len, fmt_msg *msg);
    int (*r_tail)(const uint8_t *head, const fmt_manifest_shard *ms, uint64_t *from,
                  uint64_t *to, fmt_msg *msg);
    int (*r_open_parts)(void **s, const fmt_manifest_shard *ms, const uint8_t *head,
                        size_t head_len, const uint8_t *tail, size_t tail_len, fmt_msg *msg);
} fmt_backend;

/* Before be->r_open: be->r_precheck where the backend has one (see there), else 0. */
int fmt_shard_precheck(const fmt_backend *be, const char *path, const fmt_manifest_shard *ms,
                       fmt_msg *msg);

/* A shard's own account (h, from r_info) against manifest shard i: sample count, first index,
 * size, content hash, build fingerprint. 0, or FMT_ECORRUPT naming the first difference. */
int fmt_shard_check_info(const fmt_manifest *m, size_t i, const fmt_shard_info *h, fmt_msg *msg);

/* The backend called name, or NULL. */
const fmt_backend *fmt_backend_find(const char *name);

/* Names of every backend compiled in, NULL-terminated. */
const char *const *fmt_backend_names(void);

extern const fmt_backend fmt_backend_raw;
extern const fmt_backend fmt_backend_hdf5;
extern const fmt_backend fmt_backend_lmdb;
extern const fmt_backend fmt_backend_png0;
extern const fmt_backend fmt_backend_bmp;
extern const fmt_backend fmt_backend_jpeg;

#endif
