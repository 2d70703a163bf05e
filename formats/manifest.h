/* manifest.h - OUT/manifest.json (spec: formats/manifest.md): what a dataset directory holds.
 *
 * The manifest is written last, atomically, so its presence means every shard it names is complete.
 * Reading validates everything (types, ranges, shard ranges contiguous and summing to the sample
 * count, shard file names without path separators) so later code can trust it.
 */
#ifndef FMT_MANIFEST_H
#define FMT_MANIFEST_H

#include "fields.h"
#include "geometry.h"

#define FMT_MANIFEST_NAME "manifest.json"
#define FMT_MANIFEST_VERSION 1
#define FMT_MANIFEST_MAX_BYTES (256u << 20)

typedef struct {
    char *file;                 /* shard path relative to the dataset directory: a file name, or
                                 * folders then a name (merged builds: parts/P/shard-00000.raw);
                                 * never absolute, never a component starting with '.' */
    uint64_t first, samples;    /* dataset-wide index of its first sample; its sample count */
    uint64_t bytes;             /* file size */
    uint64_t hash;              /* the shard's own content hash (raw: header_hash; see each spec) */
    /* Optional pins (absent from manifests of older builds; FMT_PIN_* in `pins` says which):
     * file_hash: XXH3-64 of the whole shard file (lmdb: its data.mdb), checked by verify before
     *            any library parses the file;
     * pin_hash:  XXH3-64 of the bytes a third-party library trusts when it opens the shard
     *            (hdf5: every byte but the pixel range [pin_skip_off, +pin_skip_len); lmdb: its
     *            meta pages and B-tree pages, see formats/lmdb.md), checked at every open. */
    uint32_t pins;
    uint64_t file_hash;
    uint64_t pin_hash, pin_skip_off, pin_skip_len;
    /* Optional (skel_len 0: absent): where the shard's skeleton lies in its file, the bytes that
     * give every sample's metadata without the pixels, checked by the content hash (lmdb: its
     * __shardc__/index value, formats/lmdb.md); what a reader of a shard that has not arrived
     * fetches (fmt_dataset_open_lazy). */
    uint64_t skel_off, skel_len;
    uint64_t offset;            /* added to the indexes the shard itself records gives dataset
                                 * indexes: 0, except in a merged build, where each part numbers
                                 * its samples from 0 (then: the samples of the parts before) */
} fmt_manifest_shard;

#define FMT_PIN_FILE 1u             /* file_hash is set */
#define FMT_PIN_OPEN 2u             /* pin_hash (and the skip range) are set */

/* A detection category: its id as the annotations give it, and its name. */
typedef struct {
    int64_t id;
    char *name;
} fmt_category;

typedef struct {
    char *backend;              /* "raw" */
    uint32_t backend_version;   /* version of the backend's on-disk format */
    char *tool;                 /* "shardc X.Y.Z" */
    uint64_t samples;           /* samples in the dataset */
    uint64_t inputs;            /* input images listed by the build */
    uint64_t rejects;           /* inputs skipped (listed in rejects.tsv) */
    size_t nclasses;
    char **classes;             /* class names; label L is classes[L] */
    fmt_geom geom;
    uint32_t channels;          /* 1 or 3 */
    uint32_t sample_width, sample_height;   /* every sample's size when fixed, else 0 */
    uint64_t pixels;            /* pixels (per channel) the stats cover */
    double mean[3], std[3];     /* per channel, over all stored pixels, on the 0..255 scale */
    uint64_t fingerprint;       /* hash of inputs and options (resume uses it) */
    size_t nshards;
    fmt_manifest_shard *shards;
    uint32_t augment;           /* K variants per source image; 0 = none */
    char *aug_spec;             /* the augmentation spec (canonical form); NULL when augment = 0 */
    uint64_t seed;              /* seed of the augmentation draws */
    char *build_json;           /* build options, a JSON object written by the compiler (opaque here) */
    /* Detection (manifest.md "targets"): every sample carries a target record (target.h) as its
     * aux record. Absent from classification manifests, whose samples carry none. */
    int targets;                /* 1: the object "targets" is present */
    char *target_source;        /* "coco" or "yolo" */
    uint64_t target_hash;       /* hash of the annotations as read (the fingerprint covers it) */
    uint64_t target_skipped;    /* images left out for having no annotation (--skip-empty) */
    size_t ncategories;
    fmt_category *categories;   /* sorted by id, ids distinct */
    /* Segmentation and keypoints (manifest.md "targets", record_version 2): target_ext 0 for
     * boxes only (record version 1), else the FMT_TARGET_EXT_* bits every record carries. */
    uint32_t target_ext;
    uint32_t num_keypoints;     /* K (EXT_KEYPOINTS) */
    char **keypoint_names;      /* K names */
    uint32_t nskeleton;
    uint32_t *skeleton;         /* nskeleton pairs of keypoint numbers, 1-based as COCO's */
    uint32_t ignore_index;      /* EXT_MAP: the label of pixels to ignore (padding) */
    /* Fields (manifest.md "fields"): every sample carries a fields record (fields.h) as its aux
     * record, checked against this schema. nfields 0: the object "fields" is absent. */
    size_t nfields;
    fmt_field_def *fields;
    char *fields_source;        /* "stream" (the Python writer) or "jsonl" (--fields FILE) */
    uint64_t fields_hash;       /* the --fields file's hash (0 for a stream) */
} fmt_manifest;

/* Index of category id in m->categories (binary search), or -1. */
long fmt_manifest_find_category(const fmt_manifest *m, int64_t id);

/* Serialise m to JSON (malloc'd, NUL-terminated; caller frees). */
int fmt_manifest_dump(const fmt_manifest *m, char **json);

/* Parse and validate JSON text (len bytes). On success *m is filled (free with fmt_manifest_free).
 * Errors: FMT_ECORRUPT (bad JSON or fields, msg names the field), FMT_EVERSION, ENOMEM. */
int fmt_manifest_parse(const char *json, size_t len, fmt_manifest *m, fmt_msg *msg);

/* dir/manifest.json: write atomically / read and parse. Read errors: ENOENT if absent, else those
 * of fmt_read_file and fmt_manifest_parse. */
int fmt_manifest_write(const char *dir, const fmt_manifest *m);
int fmt_manifest_read(const char *dir, fmt_manifest *m, fmt_msg *msg);

/* fmt_manifest_write in two steps, so that a writer can open what it wrote (fmt_dataset_open_flags
 * with FMT_OPEN_STAGED) before any reader sees it: _stage writes dir/manifest.json.tmp (fsynced,
 * FMT_MANIFEST_STAGED_NAME), _publish renames it to manifest.json and fsyncs dir; a staged
 * manifest that is not to be published is simply removed. */
#define FMT_MANIFEST_STAGED_NAME FMT_MANIFEST_NAME ".tmp"
int fmt_manifest_stage(const char *dir, const fmt_manifest *m);
int fmt_manifest_publish(const char *dir);

/* fmt_manifest_read of dir/name (FMT_MANIFEST_NAME or FMT_MANIFEST_STAGED_NAME). */
int fmt_manifest_read_named(const char *dir, const char *name, fmt_manifest *m, fmt_msg *msg);

/* Release everything m owns and zero it. Accepts a zeroed manifest. */
void fmt_manifest_free(fmt_manifest *m);

/* Names used in the manifest for geometry modes and fit modes, and their parsers (-1 if unknown). */
const char *fmt_geom_mode_name(fmt_geom_mode m);
const char *fmt_fit_name(fmt_fit f);
int fmt_fit_parse(const char *s);

/* The folder holding shard s of the dataset in dir, where its backend finds the files that go
 * with it (per-image sets: class folders): dir itself, or dir/parts/P for a merged build's shard
 * parts/P/shard-00000.idx. Malloc'd; NULL when out of memory. */
char *fmt_manifest_shard_dir(const char *dir, const fmt_manifest_shard *s);

/* Index of the shard holding dataset sample idx (binary search), or -1 if idx >= samples. */
long fmt_manifest_find_shard(const fmt_manifest *m, uint64_t idx);

#endif
