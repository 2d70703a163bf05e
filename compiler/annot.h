/* annot.h - detection annotations for a build: what COCO instances JSON (coco.c) or YOLO label
 * files (yolo.c) say about each input image, and the target record a sample gets from them.
 *
 * Loading builds the input list too: the images the annotations cover, in the order of their
 * paths relative to IMAGES (byte order), so a COCO file and YOLO labels of the same images list
 * them alike. Every input gets label -1 (a detection sample has no single class; its target is
 * its label). What makes the annotations themselves wrong is an error of the load, naming the
 * file and the entry; what only the image can tell (its real size, a box outside it, a box
 * without size) is found when the image is rendered and rejects that image (rejects.tsv).
 */
#ifndef SHC_ANNOT_H
#define SHC_ANNOT_H

#include <stddef.h>
#include <stdint.h>

#include "geometry.h"
#include "inputs.h"
#include "manifest.h"
#include "target.h"

/* How far (in source pixels) a box edge may lie outside the image before the image is rejected:
 * float rounding in the annotation tools. An edge within it is clamped to the image. */
#define SHC_ANNOT_EDGE_EPS 1e-3

typedef enum { SHC_ANNOT_COCO = 1, SHC_ANNOT_YOLO, SHC_ANNOT_MAPS } shc_annot_kind;

/* One box as the annotations give it. */
typedef struct {
    int64_t id;                 /* COCO: the annotation's id; YOLO: the line number */
    double v[4];                /* COCO: x, y, w, h in pixels; YOLO: cx, cy, w, h normalised */
    int64_t category;           /* COCO category_id; YOLO class index */
    double area;                /* COCO area; YOLO: unused (the box's area in pixels) */
    uint8_t iscrowd;            /* COCO iscrowd; YOLO 0 */
    /* segmentation (segm.c): the mask's source form in pool[seg_at .. seg_at + seg_len) */
    uint8_t seg_kind;           /* SHC_SEG_* */
    size_t seg_at, seg_len;
    size_t kp_at;               /* its K keypoints (x, y, v) at pool[kp_at ..], or SIZE_MAX */
} shc_annot_box;

enum {
    SHC_SEG_NONE = 0,           /* no mask given: the box's pixels (masks datasets) */
    SHC_SEG_POLY,               /* polygons: npoly, then per polygon npoints, x, y, ... */
    SHC_SEG_RLE,                /* COCO RLE at the image's size: ncounts, counts (column-major) */
    SHC_SEG_NPOLY               /* one normalised polygon (YOLO): npoints, x, y, ... in 0..1 */
};

/* What the annotations say about one input image. */
typedef struct {
    int64_t image_id;           /* COCO image id; YOLO: the stem when all digits, else the
                                 * position in the sorted list */
    uint32_t width, height;     /* COCO: the annotated size; YOLO: 0 (the file's own size) */
    size_t first, count;        /* its boxes: boxes[first .. first + count) */
    char *where;                /* for messages: "instances.json: image id 7" or the label file
                                 * (label maps: the image) */
    char *map;                  /* label maps: the map's path; else NULL */
} shc_annot_image;

typedef struct {
    shc_annot_kind kind;
    shc_annot_image *images;    /* one per input position */
    size_t nimages;
    shc_annot_box *boxes;
    size_t nboxes;
    fmt_category *cats;         /* sorted by id */
    size_t ncats;
    uint64_t skipped_empty;     /* images left out for having no box (skip_empty) */
    /* segmentation and keypoints (segm.c): FMT_TARGET_EXT_* bits of every record */
    uint32_t ext;
    uint32_t nkp;               /* K keypoints per instance */
    char **kp_names;            /* K names */
    uint32_t nskeleton, *skeleton;  /* pairs of 1-based keypoint numbers */
    uint8_t *cat_kp;            /* per category (as cats): 1 when it has keypoints */
    double *pool;               /* the boxes' polygons, RLE counts and keypoints */
    size_t npool, cappool;
    uint32_t ignore_index;      /* label maps: the label of padding */
    uint64_t hash;              /* of everything above that the targets depend on */
} shc_annot;

typedef struct {
    const char *images;         /* the IMAGES folder */
    const char *coco;           /* instances JSON, or NULL */
    const char *yolo;           /* labels folder, or NULL */
    const char *names;          /* YOLO class names, one per line */
    int skip_empty;             /* leave out images without a box (a label map: --masks) */
    uint32_t kpt_k, kpt_d;      /* YOLO pose: K keypoints of D (2 or 3) values a line; 0: none */
    /* Semantic segmentation (segmap.c): label-map PNGs under masks, paired with the images by
     * relative path and stem; mask_suffix "FROM:TO" (or NULL): an image stem ending in FROM has
     * the map of the stem ending in TO instead. ignore_index: the label of padding. */
    const char *masks, *mask_suffix;
    uint32_t ignore_index;
} shc_annot_opts;

/* Load the annotations and list their images into *in (class-less, labels -1). 0; EINVAL with
 * msg naming the file and entry for annotations that are malformed or inconsistent; errno
 * values for files that cannot be read; ENOMEM. On failure *a and *in are empty. */
int shc_annot_load(const shc_annot_opts *o, shc_annot *a, fmt_inputs *in, fmt_msg *msg);
void shc_annot_free(shc_annot *a);

/* coco.c / yolo.c: the two readers behind shc_annot_load (same contract). */
int shc_coco_load(const shc_annot_opts *o, shc_annot *a, fmt_inputs *in, fmt_msg *msg);
int shc_yolo_load(const shc_annot_opts *o, shc_annot *a, fmt_inputs *in, fmt_msg *msg);
int shc_segmap_load(const shc_annot_opts *o, shc_annot *a, fmt_inputs *in, fmt_msg *msg);

/* The first repeated name of names[0..n) in order (the YOLO names file's check): 1 with *again
 * the position of the first name that an earlier one equals and *first that earlier one's
 * position; 0 when all names differ; -ENOMEM. O(n log n). */
int shc_yolo_duplicate(char *const *names, size_t n, size_t *first, size_t *again);

/* The target record of input pos: its boxes in source pixels (checked against the src_w x
 * src_h image, see the top of this file), moved through plan p (fmt_target_map_box), those left
 * without area dropped. The record goes to *buf (grown as needed, capacity *cap), its length to
 * *len, the number of boxes dropped to *dropped. 0; FMT_ECORRUPT with why naming the annotation
 * when the image is to be rejected; ENOMEM. */
int shc_annot_target(const shc_annot *a, size_t pos, uint32_t src_w, uint32_t src_h,
                     const fmt_geom_plan *p, uint8_t **buf, size_t *cap, uint32_t *len,
                     uint32_t *dropped, fmt_msg *why);

/* Bytes input pos's record takes at most (before any box is dropped). */
uint32_t shc_annot_record_bytes(const shc_annot *a, size_t pos);

/* Helpers the readers share: append an image with its boxes so far; hash and sort at the end. */
int shc_annot_add_image(shc_annot *a, int64_t image_id, uint32_t w, uint32_t h, char *where);
int shc_annot_add_box(shc_annot *a, const shc_annot_box *b);
/* The regular files under root (recursively, hidden names left out) whose names pass keep, as
 * paths relative to root in byte order: *out (malloc'd, each malloc'd), *n. 0, or an errno value
 * with msg naming the folder. */
int shc_annot_walk(const char *root, int (*keep)(const char *), char ***out, size_t *n,
                   fmt_msg *msg);

/* Label maps (segmap.c): input pos's record (no boxes, its label map moved through p) as
 * shc_annot_target makes it. */
int shc_segmap_target(const shc_annot *a, size_t pos, uint32_t src_w, uint32_t src_h,
                      const fmt_geom_plan *p, uint8_t **buf, size_t *cap, uint32_t *len,
                      fmt_msg *why);

/* Box b (x1, y1, x2, y2, source pixels) of a w x h image within SHC_ANNOT_EDGE_EPS of it: 1,
 * with out the box clamped to the image; 0 when it lies further outside. */
int shc_annot_clamp_box(const double b[4], uint32_t w, uint32_t h, double out[4]);

/* Encode t into *buf (grown as needed, capacity *cap), its length to *len (shc_annot_target's
 * and shc_segmap_target's last step). 0; ENOMEM; FMT_ECORRUPT with why naming `where` when the
 * record would exceed 4 GiB. */
int shc_annot_encode(const fmt_target *t, const char *where, uint8_t **buf, size_t *cap,
                     uint32_t *len, fmt_msg *why);

/* Append n values to a->pool (polygons, RLE counts, keypoints). 0 or ENOMEM. */
int shc_annot_pool_add(shc_annot *a, const double *v, size_t n);
void shc_annot_finish_hash(shc_annot *a);

#endif
