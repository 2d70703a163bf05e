/* assemble.h - what a worker does to fill a batch (assemble.c), for the reader's lifecycle in
 * shardread.c: the ring's fill callback, the worker thread, and the pieces open and
 * shr_draw_params (options.c) share with it. Internal to the reader. */
#ifndef SHR_ASSEMBLE_H
#define SHR_ASSEMBLE_H

#include "reader.h"

/* The parameters of sample idx, stored at src_w x src_h, for an output of out_w x out_h: see
 * shardread.h (rrc: the RandomResizedCrop box; else the crop/pad's stored rectangle). */
void shr_draw(const shr_options *o, const shr_tf_rrc *rrc, const shr_aug *aug, uint32_t out_w,
              uint32_t out_h, uint64_t epoch, uint64_t idx, uint32_t src_w, uint32_t src_h,
              shr_params *p);

/* The resampler's name for a filter. */
fmt_filter shr_rs_filter(shr_filter f);

/* The slot's box arrays grown to hold n boxes (never shrunk: they settle at the most boxes a
 * batch has had). 0 or ENOMEM, the old arrays kept. */
int shr_grow_targets(shr_slot *slot, size_t n);

/* Stream batch k is batch *number of *epoch (the first epoch may be a resumed, shorter one). */
void shr_stream_pos(const shr_reader *r, uint64_t k, uint64_t *epoch, uint64_t *number);
/* the stream's first batch of the epoch after stream batch k's */
uint64_t shr_stream_epoch_end(const shr_reader *r, uint64_t k);

/* The ring's fill (ring.h): stream batch k into slot si of the reader ctx, by worker `worker`
 * (a shr_worker). Returns the fill's result, also left in the slot (rc, msg). */
int shr_fill_slot(void *ctx, void *worker, uint32_t si, uint64_t k);

/* A worker thread (arg: its shr_worker): serves the ring until it stops. */
void *shr_worker_main(void *arg);

#endif
