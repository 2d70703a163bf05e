/* info.c - what a caller reads of an open reader without consuming (shardread.h): its position
 * to resume from (shr_get_state), the epochs' batch and sample counts, the recovery counts, its
 * info; and the accessors of a delivered batch's detection targets, masks and keypoints.
 */
#include <stdio.h>
#include <string.h>

#include "pinned.h"
#include "reader.h"

/* ---- state and info ---- */

shr_state shr_get_state(const shr_reader *r)
{
    shr_state s = {0, 0, 0, 0};
    if (r) {
        s.seed = r->o.seed;
        s.epoch = r->epoch;
        s.cursor = r->cursor;
        s.consumed = shr_sampler_consumed(r->sampler, r->epoch, r->cursor);
    }
    return s;
}

uint64_t shr_batches_in_epoch(const shr_reader *r, uint64_t epoch)
{
    return r ? shr_sampler_batches_in(r->sampler, epoch) : 0;
}

shr_recovery shr_get_recovery(const shr_reader *r)
{
    shr_recovery z = {0, 0};
    return r ? r->recovery : z;
}

uint64_t shr_batches_per_epoch(const shr_reader *r)
{
    return r ? r->nb : 0;
}

uint64_t shr_samples_per_epoch(const shr_reader *r)
{
    if (!r)
        return 0;
    uint64_t per = shr_sampler_per_rank(r->sampler);
    if (r->o.drop_last)
        per -= per % r->o.batch_size;
    return per;
}

void shr_get_info(const shr_reader *r, shr_info *info)
{
    memset(info, 0, sizeof *info);
    if (!r)
        return;
    const fmt_manifest *m = fmt_dataset_manifest(r->ds);
    info->samples = m->samples;
    info->classes = (uint32_t)m->nclasses;
    info->height = r->height;
    info->width = r->width;
    info->channels = r->channels;
    for (int c = 0; c < 3; c++) {
        info->mean[c] = m->mean[c];
        info->std[c] = m->std[c];
    }
    info->dtype = r->o.dtype;
    info->layout = r->o.layout;
    info->batch_bytes = r->batch_bytes;
    info->ring_bytes = (uint64_t)r->nslots * (r->batch_bytes + (3 * sizeof(int64_t) +
                                                                sizeof(shr_params)) *
                                              (uint64_t)r->o.batch_size);
    if (r->mix.on)
        info->ring_bytes += (uint64_t)r->nslots * r->o.batch_size * r->mix.classes * sizeof(float);
    if (r->targets)
        info->ring_bytes += (uint64_t)r->nslots *
                            ((uint64_t)r->o.batch_size *
                                 (2 * sizeof(int64_t) + 3 * sizeof(uint32_t) + sizeof(fmt_target)) +
                             sizeof(int64_t));
    info->targets = r->targets;
    if (r->mx) {
        info->samples = r->mx->plan.total;
        info->classes = r->mx->all_classes;
        info->ring_bytes += (uint64_t)r->nslots * r->o.batch_size * sizeof(int64_t);
    }
    info->pinned = shr_pinned(r, NULL);
}

int shr_pinned(const shr_reader *r, shr_msg *why)
{
    if (!r)
        return 0;
    int pinned = r->slots && r->nslots > 0;
    for (uint32_t i = 0; pinned && i < r->nslots; i++)
        pinned = r->slots[i].b.pinned;
    if (pinned || !why)
        return pinned;
    if (r->o.pin == SHR_PIN_OFF)
        snprintf(why->text, sizeof why->text, "pinned memory is off (pin)");
    else if (r->unpinned.text[0])
        *why = r->unpinned;
    else {
        char status[sizeof why->text - 32];
        snprintf(why->text, sizeof why->text, "no CUDA device: %s",
                 shr_cuda_status(status, sizeof status));
    }
    return 0;
}

/* ---- a batch's targets ---- */

int shr_batch_target(const shr_batch *b, uint32_t i, shr_target *t)
{
    if (!b || !t || i >= b->n || !b->target_offsets)
        return SHR_EINVAL;
    int64_t o = b->target_offsets[i];
    memset(t, 0, sizeof *t);
    t->count = (uint32_t)(b->target_offsets[i + 1] - o);
    t->dropped = b->target_dropped[i];
    t->image_id = b->target_image_ids[i];
    t->orig_width = b->target_orig_sizes[2 * (size_t)i];
    t->orig_height = b->target_orig_sizes[2 * (size_t)i + 1];
    t->boxes = b->target_boxes + 4 * o;
    t->labels = b->target_labels + o;
    t->area = b->target_area + o;
    t->iscrowd = b->target_iscrowd + o;
    return 0;
}

int shr_batch_segm(const shr_batch *b, uint32_t i, uint32_t *num_keypoints,
                   const float **keypoints, const uint8_t **masks, uint32_t *width,
                   uint32_t *height)
{
    if (!b || i >= b->n || !b->target_offsets)
        return SHR_EINVAL;
    int64_t o = b->target_offsets[i];
    if (num_keypoints)
        *num_keypoints = b->num_keypoints;
    if (keypoints)
        *keypoints = b->num_keypoints && b->target_keypoints
                     ? b->target_keypoints + (size_t)o * b->num_keypoints * 3 : NULL;
    int m = b->target_masks != NULL;
    if (masks)
        *masks = m ? b->target_masks + b->target_mask_offsets[i] : NULL;
    if (width)
        *width = m ? b->target_mask_sizes[2 * (size_t)i] : 0;
    if (height)
        *height = m ? b->target_mask_sizes[2 * (size_t)i + 1] : 0;
    return 0;
}
