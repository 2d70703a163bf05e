/* directio.c - O_DIRECT reads of a byte range into any memory, through an aligned bounce buffer
 * (directio.h). */
#include "directio.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fmt.h"

/* [off, off + len) of the file into dst through aligned blocks in scratch. */
static int direct_bounce(int fd, uint8_t *dst, uint64_t off, uint64_t len, uint8_t *scratch,
                         size_t scratch_len)
{
    uint64_t end = off + len, pos = fmt_direct_align_down(off), stop = fmt_direct_align_up(end);
    while (pos < end) {
        size_t want = (size_t)(stop - pos < scratch_len ? stop - pos : scratch_len);
        size_t got;
        int rc = fmt_pread_full(fd, scratch, want, pos, &got);
        if (rc)
            return rc;
        uint64_t from = pos > off ? pos : off;
        uint64_t to = pos + want < end ? pos + want : end;
        if (pos + got < to)
            return FMT_ETRUNC;
        memcpy(dst + (from - off), scratch + (from - pos), (size_t)(to - from));
        pos += want;
    }
    return 0;
}

/* The O_DIRECT transfers: whole blocks straight into dst where dst and off agree modulo the block
 * size, the partial blocks at either end (or everything, where they do not) through scratch. */
static int direct_transfer(int fd, uint8_t *dst, uint64_t off, uint64_t len, uint8_t *scratch,
                           size_t scratch_len)
{
    uint64_t mid_lo = fmt_direct_align_up(off), mid_hi = fmt_direct_align_down(off + len);
    if (((uintptr_t)dst - off) % FMT_DIRECT_ALIGN != 0 || mid_lo >= mid_hi)
        return direct_bounce(fd, dst, off, len, scratch, scratch_len);
    int rc = 0;
    if (off < mid_lo)
        rc = direct_bounce(fd, dst, off, mid_lo - off, scratch, scratch_len);
    if (rc == 0)
        rc = fmt_pread_exact(fd, dst + (mid_lo - off), (size_t)(mid_hi - mid_lo), mid_lo);
    if (rc == 0 && mid_hi < off + len)
        rc = direct_bounce(fd, dst + (mid_hi - off), mid_hi, off + len - mid_hi, scratch,
                           scratch_len);
    return rc;
}

int fmt_direct_read(int dfd, int fd, void *dst, uint64_t off, uint64_t len, void *scratch,
                    size_t scratch_len, unsigned flags)
{
    void *own = NULL;
    if (!scratch) {
        scratch_len = (size_t)(fmt_direct_align_up(len) + FMT_DIRECT_ALIGN);
        if (scratch_len > FMT_DIRECT_DEFAULT_SCRATCH)
            scratch_len = FMT_DIRECT_DEFAULT_SCRATCH;
        if (posix_memalign(&own, FMT_DIRECT_ALIGN, scratch_len) != 0)
            return ENOMEM;
        scratch = own;
    } else if ((uintptr_t)scratch % FMT_DIRECT_ALIGN != 0 || scratch_len == 0 ||
               scratch_len % FMT_DIRECT_ALIGN != 0) {
        return FMT_EINVAL;
    }
    int rc = flags & FMT_DIRECT_BOUNCE ? direct_bounce(dfd, dst, off, len, scratch, scratch_len)
                                       : direct_transfer(dfd, dst, off, len, scratch, scratch_len);
    /* O_DIRECT refused for this transfer: the data is still there for a plain pread */
    if (rc == EINVAL)
        rc = fmt_pread_exact(fd, dst, (size_t)len, off);
    free(own);
    return rc;
}
