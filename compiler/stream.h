/* stream.h - inputs handed to a running build one at a time (the Python writer,
 * shardread.build): a file path, an encoded file's bytes, or decoded pixels, each with its label.
 *
 * The producer's side (the items, shc_stream_create, _add, _set_fields, _set_targets,
 * _set_categories, _close, _cancel, _added, _free, the limits) is public: include/shardc.h, "a
 * streamed build", which also says how the window and the budget bound the memory held. This
 * header is the build's side (build.h: opts.stream): what its workers and writer take of the
 * items, in the formats' types.
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
#include "shardc.h"

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

#endif
