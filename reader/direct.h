/* direct.h - a batch's O_DIRECT reads with many requests in flight.
 *
 * SHR_ACCESS_DIRECT used to read one sample at a time with a synchronous pread per worker: one
 * request in flight per thread, a fraction of what a device delivers. Here a worker hands the
 * whole batch over at once: the samples' extents (fmt_dataset_extent) are sorted by file and
 * offset, neighbours are merged into larger requests (whole runs of samples when the order reads
 * them together: sequential, quasi-random windows), and up to `depth` requests are kept in flight
 * through io_uring. Where the kernel refuses io_uring (seccomp, io_uring_disabled, old kernels) the
 * same requests are issued with pread, one at a time per worker.
 *
 * Where the bytes go: a plain sample whose offset, length and destination meet the device's
 * O_DIRECT alignment (statx DIOALIGN: 512 here) is read straight into its place in the batch
 * buffer, and a run of such samples that lie back to back in the file and in the batch is read
 * with one request; no copy. Other requests land in the engine's aligned staging buffer, and each
 * sample is copied (plain) or decoded (compressed, then checked against its hash) from there into
 * the batch.
 *
 * Thread-safety: an engine belongs to one worker thread.
 */
#ifndef SHR_DIRECT_H
#define SHR_DIRECT_H

#include <stddef.h>
#include <stdint.h>

#include "sample.h"

typedef struct shr_direct shr_direct;

typedef struct {
    fmt_extent x;               /* where the sample's bytes lie */
    uint8_t *dst;               /* x.length bytes: the decoded pixels go here */
} shr_direct_item;

/* An engine with up to depth requests in flight (1..4096) and a staging buffer of `staging`
 * bytes to start with (it grows for a request larger than that). uring: io_uring is tried first
 * (see shr_direct_uring); 0 reads with pread alone (shr_options.direct_pread: to measure and
 * test that path on a kernel that has io_uring). Errors: ENOMEM, EINVAL. */
int shr_direct_create(shr_direct **d, uint32_t depth, size_t staging, int uring);
void shr_direct_free(shr_direct *d);        /* accepts NULL */

/* 1 if requests go through io_uring, 0 if through pread (the kernel refused io_uring). */
int shr_direct_uring(const shr_direct *d);

/* Read (and decode) every item into its dst. Returns 0, or the first error: an errno value of the
 * reads, FMT_ETRUNC (the file ends before a payload does), FMT_ECORRUPT / FMT_EHASH (a damaged
 * compressed payload), ENOMEM; then *bad is the failed item's position in it[] and msg says what
 * failed. Every request has completed when it returns, whatever the result. */
int shr_direct_read(shr_direct *d, shr_direct_item *it, uint32_t n, uint32_t *bad, fmt_msg *msg);

#endif
