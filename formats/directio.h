/* directio.h - a byte range of a file opened with O_DIRECT, read into memory of any alignment:
 * the DIRECT access mode of the backends that store pixels contiguously (raw, hdf5). Internal to
 * formats/. */
#ifndef FMT_DIRECTIO_H
#define FMT_DIRECTIO_H

#include <stddef.h>
#include <stdint.h>

#include "sample.h"

/* x rounded down / up to a multiple of FMT_DIRECT_ALIGN. */
static inline uint64_t fmt_direct_align_down(uint64_t x)
{
    return x & ~(uint64_t)(FMT_DIRECT_ALIGN - 1);
}

static inline uint64_t fmt_direct_align_up(uint64_t x)
{
    return fmt_direct_align_down(x + FMT_DIRECT_ALIGN - 1);
}

/* fmt_direct_read's flags */
#define FMT_DIRECT_BOUNCE 1u    /* every byte through scratch, never straight into dst */

/* Bounce buffer fmt_direct_read allocates per call when the caller gives none (at most). */
#define FMT_DIRECT_DEFAULT_SCRATCH (1u << 20)

/* Read [off, off + len) of the file open as dfd (O_DIRECT) into dst. O_DIRECT moves whole aligned
 * blocks into aligned memory (FMT_DIRECT_ALIGN, sample.h): they pass through scratch, address and
 * scratch_len multiples of FMT_DIRECT_ALIGN, scratch_len > 0, in chunks of scratch_len. When dst
 * and off agree modulo the block size, the whole blocks inside the range go straight into dst and
 * only the partial blocks at either end pass through scratch, unless flags has FMT_DIRECT_BOUNCE:
 * then everything passes through scratch (one request for a range that fits, where a split would
 * take up to three). scratch NULL: a bounce buffer of at most FMT_DIRECT_DEFAULT_SCRATCH bytes is
 * allocated for the call.
 *
 * A filesystem may accept O_DIRECT at open and refuse a transfer it cannot align (EINVAL): the
 * range is then read with plain pread on fd, the same file without O_DIRECT.
 *
 * Returns 0; FMT_EINVAL (scratch not as above); ENOMEM; errno values of pread; FMT_ETRUNC when
 * the file ends inside the range. Reads may run past the end of the file (the block of the last
 * byte), which is fine as long as the range itself came back. */
int fmt_direct_read(int dfd, int fd, void *dst, uint64_t off, uint64_t len, void *scratch,
                    size_t scratch_len, unsigned flags);

#endif
