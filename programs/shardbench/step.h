/* step.h - a training step fed by libshardread batches: the consumer side of shardbench train
 * (part of the benchmark, not of the library).
 *
 * A step takes one batch (uint8 NHWC pixels + labels) and does the work of one training iteration:
 *   SB_STEP_EMULATED   stands in for a bigger model: busy for step_ms milliseconds per batch
 *                       (on the GPU: a kernel that spins for that long on the device; on the CPU:
 *                       the calling thread sleeps), so the input pipeline can be measured against
 *                       a known demand (e.g. ResNet-50 on an A100: ~11.7 ms per 256 images)
 *   SB_STEP_MODEL      a real small model trained by SGD: softmax regression or a 2-layer MLP
 *                       on pixels downsampled to model_side x model_side, whose loss falls on the
 *                       sample data
 * Where a CUDA device is present and the GPU implementation is built (cuda_step.cu), the step runs
 * on the GPU: the batch is copied host-to-device on a copy stream (double-buffered, events order
 * the copy before the step and the step before the host buffer's reuse) and normalised to float
 * NCHW by a kernel; otherwise the same step runs on the CPU. Results are reported the same way.
 *
 * Thread-safety: a step is used by one thread (the consumer). Errors: 0, errno values, SHR_E*.
 */
#ifndef SB_STEP_H
#define SB_STEP_H

#include "shardread.h"

typedef enum { SB_STEP_EMULATED = 0, SB_STEP_MODEL } sb_step_kind;
typedef enum { SB_MODEL_SOFTMAX = 0, SB_MODEL_MLP } sb_model;
typedef enum { SB_DEVICE_AUTO = 0, SB_DEVICE_CPU, SB_DEVICE_GPU } sb_device;

typedef struct {
    sb_step_kind kind;
    double step_ms;             /* SB_STEP_EMULATED */
    sb_model model;            /* SB_STEP_MODEL */
    uint32_t model_side;        /* input downsampled to side x side (default 16) */
    uint32_t hidden;            /* MLP hidden units (default 128) */
    uint32_t classes;           /* output classes (from the dataset) */
    float lr;                   /* learning rate (default 0.05) */
    uint64_t seed;              /* weight initialisation */
    double mean[3], std[3];     /* normalisation (from the manifest) */
    sb_device device;
} sb_step_opts;

typedef struct sb_step sb_step;

typedef struct {
    int on_gpu;                 /* the step runs on a CUDA device */
    double busy_s;              /* time the step spent working */
    double h2d_s;               /* time host-to-device copies took (GPU) */
    uint64_t h2d_bytes;
    double loss_sum;            /* SB_STEP_MODEL: sum of per-batch mean losses since last reset */
    uint64_t loss_batches;
    uint64_t correct, seen;     /* training accuracy counters since last reset */
} sb_step_stats;

int sb_step_create(sb_step **s, const sb_step_opts *o);
void sb_step_free(sb_step *s);                            /* accepts NULL */

/* Run one step on batch b. The batch may be released as soon as this returns: a GPU step has
 * then finished reading the host buffer (its copy completed), even if the device work has not. */
int sb_step_run(sb_step *s, const shr_batch *b);

/* Wait for queued device work; copy out and reset the counters. */
int sb_step_sync(sb_step *s, sb_step_stats *st);

/* Where a device is (1) or is not (0) usable by the GPU step in this process. */
int sb_step_gpu_available(void);

#endif
