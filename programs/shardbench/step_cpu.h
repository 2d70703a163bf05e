/* step_cpu.h - the CPU implementation of the training step (step.h), called by the dispatcher in
 * step.c when the step does not run on a GPU. Same options, same statistics, same semantics:
 *
 *   SB_STEP_EMULATED   the calling thread sleeps until step_ms have passed since the call began
 *                       (clock_nanosleep on CLOCK_MONOTONIC, absolute deadline, so a signal
 *                       cannot shorten it); busy_s adds the time measured around the sleep
 *   SB_STEP_MODEL      softmax regression or a 2-layer MLP (ReLU) trained by plain SGD on the
 *                       batch's pixels box-averaged down to model_side x model_side per channel
 *                       and normalised with mean/std; mean cross-entropy per batch, and the
 *                       predictions made before the update counted for accuracy. Weights start
 *                       from a seeded PRNG, so the same options and batches give the same losses
 *
 * Defaults for zero fields: model_side 16, hidden 128, lr 0.05. A std of 0 (a constant channel)
 * divides by 1. The device field is not looked at: choosing the implementation is the
 * dispatcher's job. The input geometry (channels 1..3, any height x width) is fixed by the first
 * batch a model step sees; later batches must have the same channel count (they may differ in
 * height and width).
 *
 * Statistics: on_gpu 0, h2d_s 0, h2d_bytes 0; busy_s is the wall time spent inside
 * sb_cpu_step_run; loss_sum / loss_batches and correct / seen count model steps only (an
 * emulated step learns nothing, so it leaves them 0).
 *
 * Errors: SHR_EINVAL for bad options (unknown kind or model, step_ms negative or not finite or
 * over an hour, classes 0 or over 65536 for a model, model_side over 512, hidden over 65536, lr
 * negative or not finite, a negative or non-finite std) and bad batches (NULL, no samples, no
 * data or labels, channels not 1..3, a label outside [0, classes), a channel count that changed);
 * ENOMEM. A failed run leaves the model as it was.
 *
 * Thread-safety: one step is used by one thread at a time.
 */
#ifndef SB_STEP_CPU_H
#define SB_STEP_CPU_H

#include "step.h"

/* Create a CPU step from o (copied). *s is NULL on failure. */
int sb_cpu_step_create(void **s, const sb_step_opts *o);

/* One step on batch b; b is not used after the call returns. */
int sb_cpu_step_run(void *s, const shr_batch *b);

/* Copy the counters since the last sync (or creation) into st (NULL: just reset) and reset them.
 * Nothing is queued on the CPU, so there is nothing to wait for. 0, or SHR_EINVAL for a NULL s. */
int sb_cpu_step_sync(void *s, sb_step_stats *st);

/* Accepts NULL. */
void sb_cpu_step_free(void *s);

#endif
