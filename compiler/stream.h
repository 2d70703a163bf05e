/* stream.h - inputs handed to a running build one at a time (the Python writer,
 * shardread.build): a file path, an encoded file's bytes, or decoded pixels, each with its label.
 *
 * A producer adds items at positions 0, 1, 2, ... while the build runs (build.h: opts.stream);
 * the build's workers take them by position, in any order, and its writer finishes them in
 * order. Memory: at most `window` items are held (added, not yet finished by the writer), and
 * their bytes stay within `budget` unless only one is held, so the producer blocks in
 * shc_stream_add while the build is that far behind. The item at the lowest position held is
 * always admitted, so a build always makes progress.
 *
 * Thread-safety: every function from any thread; shc_stream_free once nothing else uses it.
 */
#ifndef SHC_STREAM_H
#define SHC_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "fields.h"
#include "fmt.h"
#include "geometry.h"
#include "inputs.h"
#include "manifest.h"
#include "render.h"

typedef enum {
    SHC_ITEM_PATH = 0,      /* name is the file to read (as a build reads its inputs) */
    SHC_ITEM_ENCODED,       /* data: the bytes of an image file (JPEG, PNG, BMP, ...) */
    SHC_ITEM_PIXELS,        /* data: height rows of width * channels (1, 3 or 4) bytes */
    SHC_ITEM_REJECT         /* refused before the build saw it: data is the reason (a C string),
                             * listed as the reject of its position */
} shc_item_kind;

typedef struct {
    int kind;               /* shc_item_kind */
    char *name;             /* the path, or what inputs.tsv and rejects.tsv record for it */
    int32_t label;          /* 0..FMT_MAX_LABEL (below the class count when classes are given) */
    uint8_t *data;          /* ENCODED, PIXELS: malloc'd */
    size_t len;
    uint32_t width, height, channels;   /* PIXELS */
    uint8_t *fields;        /* the item's fields record (fields.h; malloc'd), or NULL: with a
                             * schema set (shc_stream_set_fields) every item but a reject has one */
    uint32_t fields_len;
    uint8_t *target;        /* the item's detection target in source pixels (malloc'd; the
                             * SHC_SRC_TARGET layout), or NULL: with shc_stream_set_targets every
                             * item but a reject has one, and label -1 */
    uint32_t target_len;
} shc_item;

/* A streamed item's target as the producer gives it (native byte order, in-process only): u32
 * n, u32 0, i64 image_id, f64[n][4] boxes (x1, y1, x2, y2 in the source's pixels, edges), i64[n]
 * category ids, f64[n] areas (NaN: the box's area), u8[n] iscrowd (0 or 1). */
#define SHC_SRC_TARGET_SIZE(n) (16u + 49u * (uint64_t)(n))

typedef struct shc_stream shc_stream;

/* window: items held at most (>= 1); budget: their bytes (0: no bound but the window); classes:
 * the class names (copied; labels must then be below nclasses), or NULL, 0 for none (the
 * manifest then names class L "L", as for a list file). Returns 0 or ENOMEM. */
int shc_stream_create(size_t window, uint64_t budget, const char *const *classes,
                      size_t nclasses, shc_stream **out);

/* Producer: add the next item, waiting while the window or the budget is full. On success the
 * stream owns it->name and it->data. Returns 0; EINVAL for a label out of range or a malformed
 * item, a fields record missing, present without a schema or not of the schema (fmt_fields_check);
 * ECANCELED once the stream is cancelled or closed (the item stays the caller's). */
int shc_stream_add(shc_stream *st, shc_item *it);

/* Producer, before the first item: every item carries a fields record of this schema (copied;
 * fmt_fields_schema_check'd). 0, FMT_EINVAL (msg says why), EBUSY once items were added, ENOMEM. */
int shc_stream_set_fields(shc_stream *st, const fmt_field_def *defs, size_t n, fmt_msg *msg);

/* Producer, before the first item: every item carries a detection target (a detection build:
 * the manifest gets "targets", source "stream"). 0, or EBUSY once items were added. */
int shc_stream_set_targets(shc_stream *st);

/* Producer, before shc_stream_close of a build with targets: the categories the manifest
 * names (copied; sorted by id and distinct, else EINVAL; every item's ids must be among them,
 * which the build's check of the staged dataset holds it to). 0, EINVAL, ENOMEM. */
int shc_stream_set_categories(shc_stream *st, const fmt_category *cats, size_t n);

/* Whether items carry targets, and the categories set (valid while st lives). */
int shc_stream_targets(const shc_stream *st, const fmt_category **cats, size_t *n);

/* Build worker, after shc_stream_render of pos: the item's target record (target.h), its boxes
 * moved by the plan p of its src_w x src_h source (fmt_target_map_box; boxes left without area
 * dropped and counted), into *buf (grown as needed). *len 0 when the item has no target. 0, or
 * FMT_ECORRUPT naming the box (outside the image by more than SHC_ANNOT_EDGE_EPS, no size, an
 * area below 0), ENOMEM. */
int shc_stream_item_target(shc_stream *st, uint64_t pos, uint32_t src_w, uint32_t src_h,
                           const fmt_geom_plan *p, uint8_t **buf, size_t *cap, uint32_t *len,
                           uint32_t *dropped, fmt_msg *why);

/* The schema set (NULL, 0 when none), valid while st lives. */
const fmt_field_def *shc_stream_fields(const shc_stream *st, size_t *n);

/* Build worker, after shc_stream_render of pos: the item's fields record (NULL, 0 for none),
 * valid until shc_stream_finish of pos. */
void shc_stream_item_fields(shc_stream *st, uint64_t pos, const uint8_t **rec, uint32_t *len);

/* Producer: no more items. */
void shc_stream_close(shc_stream *st);

/* Stop: a waiting producer gets ECANCELED, workers SHC_ESTOPPED. */
void shc_stream_cancel(shc_stream *st);

/* Items added so far. */
uint64_t shc_stream_added(shc_stream *st);

/* The given class names (NULL when none were given), valid while st lives. */
const char *const *shc_stream_classes(const shc_stream *st, size_t *n);

/* When no names were given: in's classes made from its labels once the stream ended, as for a
 * list file (label L is class "L", for every L up to the largest). 0 or ENOMEM. */
int shc_stream_label_classes(fmt_inputs *in);

/* Build worker: wait for the item at pos and render it (render.h) into out[] / params[]; its
 * label in *label. Returns as shc_render_into, or SHC_EEND when the stream was closed with
 * fewer items, SHC_ESTOPPED once it is cancelled. The item's bytes are freed here. */
int shc_stream_render(shc_stream *st, uint64_t pos, const shc_render_opts *o,
                      shc_render_scratch *rs, fmt_image *out, fmt_aug_params *params,
                      int32_t *label, fmt_msg *msg);

/* Build writer: the item at pos (the lowest held) is done; hands over its name (the caller
 * frees it) and label, and frees its place in the window. */
void shc_stream_finish(shc_stream *st, uint64_t pos, char **name, int32_t *label);

void shc_stream_free(shc_stream *st);   /* accepts NULL */

#endif
