/* rawbackend.c - the raw shard format (raw.c) behind the backend interface, with the three ways of
 * reading payload bytes: the mapping, pread, and pread on a second O_DIRECT descriptor.
 *
 * Only FMT_ACCESS_MMAP maps the file. In the pread and O_DIRECT modes the shard is opened with
 * FMT_RAW_OPEN_NOMAP (index and aux area copied into memory at open), so that a shard truncated
 * under a running reader yields FMT_ETRUNC from a short pread instead of a SIGBUS from a mapped
 * page: those modes are the ones meant for files that may change (network filesystems). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"

/* Bounce buffer r_read allocates per call in DIRECT mode when the caller gives none. */
#define RB_DEFAULT_SCRATCH (1u << 20)

typedef struct {
    fmt_raw_shard *raw;
    fmt_access access;
    int dfd;                    /* O_DIRECT descriptor, or -1 (then pread on the raw fd) */
    fmt_shard_info info;
} rb_shard;

/* ---- writing ---- */

static int rb_w_open(void **w, const fmt_writer_opts *o)
{
    char *path;
    if (asprintf(&path, "%s/%s.raw", o->dir, o->name) < 0)
        return ENOMEM;
    fmt_raw_writer_opts wo = {.align = o->align, .first_index = o->first_index,
                              .fingerprint = o->fingerprint};
    int rc = fmt_raw_writer_open((fmt_raw_writer **)w, path, &wo);
    free(path);
    return rc;
}

static int rb_w_add(void *w, const fmt_sample_meta *m, const void *pixels, uint64_t *stored_hash)
{
    if (stored_hash)
        *stored_hash = m->hash;
    return fmt_raw_writer_add(w, m, pixels);
}

static uint64_t rb_w_count(const void *w)
{
    return fmt_raw_writer_count(w);
}

static uint64_t rb_w_size(const void *w)
{
    return fmt_raw_writer_size(w);
}

static void info_from_header(const fmt_raw_header *h, fmt_shard_info *info)
{
    memset(info, 0, sizeof *info);
    info->samples = h->sample_count;
    info->first_index = h->first_index;
    info->fingerprint = h->fingerprint;
    info->input_end = h->input_end;
    memcpy(info->sum, h->channel_sum, sizeof info->sum);
    memcpy(info->sumsq, h->channel_sumsq, sizeof info->sumsq);
    info->bytes = h->file_size;
    info->hash = h->header_hash;
}

static int rb_w_finish(void *w, uint64_t input_end, fmt_shard_info *info)
{
    fmt_raw_header h;
    int rc = fmt_raw_writer_finish(w, input_end, &h);
    if (rc == 0 && info)
        info_from_header(&h, info);
    return rc;
}

static void rb_w_abort(void *w)
{
    fmt_raw_writer_abort(w);
}

/* ---- reading ---- */

/* Second descriptor for O_DIRECT reads. The filesystem may refuse the flag (EINVAL): the shard is
 * then read with plain pread. The file must be the one the first open mapped and validated, not
 * one renamed over it in between. */
static int open_direct(rb_shard *s, const char *path, fmt_msg *msg)
{
    int fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
    if (fd < 0) {
        if (errno == EINVAL)
            return 0;
        int rc = errno;
        return fmt_fail(msg, rc, "cannot open with O_DIRECT: %s", fmt_strerror(rc));
    }
    struct stat a, b;
    if (fstat(fd, &a) != 0 || fstat(fmt_raw_fd(s->raw), &b) != 0) {
        int rc = errno;
        close(fd);
        return fmt_fail(msg, rc, "%s", fmt_strerror(rc));
    }
    if (a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
        close(fd);
        return fmt_fail(msg, FMT_ECORRUPT, "file was replaced while opening");
    }
    s->dfd = fd;
    return 0;
}

static void rb_r_close(void *p)
{
    rb_shard *s = p;
    if (!s)
        return;
    fmt_raw_close(s->raw);
    if (s->dfd >= 0)
        close(s->dfd);
    free(s);
}

static int rb_r_open(void **out, const char *dir, const char *path, fmt_access access,
                     fmt_msg *msg)
{
    (void)dir;
    *out = NULL;
    rb_shard *s = calloc(1, sizeof *s);
    if (!s)
        return ENOMEM;
    s->dfd = -1;
    s->access = access;
    int rc = fmt_raw_open_ex(&s->raw, path, access == FMT_ACCESS_MMAP ? 0 : FMT_RAW_OPEN_NOMAP,
                             msg);
    if (rc == 0 && access == FMT_ACCESS_DIRECT)
        rc = open_direct(s, path, msg);
    if (rc) {
        rb_r_close(s);
        return rc;
    }
    info_from_header(fmt_raw_get_header(s->raw), &s->info);
    *out = s;
    return 0;
}

static const fmt_shard_info *rb_r_info(const void *p)
{
    return &((const rb_shard *)p)->info;
}

static int rb_r_get(const void *p, uint64_t i, fmt_sample *out)
{
    const rb_shard *s = p;
    if (i >= fmt_raw_count(s->raw))
        return FMT_EINVAL;
    fmt_raw_entry e;
    fmt_raw_get_entry(s->raw, i, &e);
    out->index = i;
    out->label = e.label;
    out->height = e.height;
    out->width = e.width;
    out->channels = e.channels;
    out->source = e.source;
    out->hash = e.hash;
    out->length = e.length;
    out->pixels = fmt_raw_pixels(s->raw, i);           /* NULL unless MMAP */
    out->aux = fmt_raw_aux(s->raw, i, &out->aux_len);
    return 0;
}

/* Read up to len bytes at off, retrying after signals and partial transfers; *got is what was
 * read (less than len only at end of file). */
static int pread_full(int fd, void *buf, size_t len, uint64_t off, size_t *got)
{
    size_t done = 0;
    while (done < len) {
        ssize_t r = pread(fd, (uint8_t *)buf + done, len - done, (off_t)(off + done));
        if (r < 0) {
            if (errno == EINTR)
                continue;
            *got = done;
            return errno;
        }
        if (r == 0)
            break;
        done += (size_t)r;
    }
    *got = done;
    return 0;
}

static int pread_exact(int fd, void *buf, size_t len, uint64_t off)
{
    size_t got;
    int rc = pread_full(fd, buf, len, off, &got);
    if (rc == 0 && got < len)
        rc = FMT_ETRUNC;
    return rc;
}

static uint64_t align_down(uint64_t x)
{
    return x & ~(uint64_t)(FMT_DIRECT_ALIGN - 1);
}

static uint64_t align_up(uint64_t x)
{
    return align_down(x + FMT_DIRECT_ALIGN - 1);
}

/* [off, off + len) of the file into dst through aligned blocks in scratch. Reads may run past the
 * end of the file (the last payload's block, when the index is short): that is fine as long as
 * the payload itself came back. */
static int direct_bounce(int fd, uint8_t *dst, uint64_t off, uint64_t len, uint8_t *scratch,
                         size_t scratch_len)
{
    uint64_t end = off + len, pos = align_down(off);
    while (pos < end) {
        size_t want = (size_t)(align_up(end) - pos < scratch_len ? align_up(end) - pos
                                                                 : scratch_len);
        size_t got;
        int rc = pread_full(fd, scratch, want, pos, &got);
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

/* O_DIRECT read of [off, off + len) into dst. When dst and off agree modulo the block size, the
 * whole blocks inside the payload are read straight into dst (no copy) and only the partial blocks
 * at either end bounce through scratch. */
static int direct_read(int fd, uint8_t *dst, uint64_t off, uint64_t len, uint8_t *scratch,
                       size_t scratch_len)
{
    uint64_t mid_lo = align_up(off), mid_hi = align_down(off + len);
    if (((uintptr_t)dst - off) % FMT_DIRECT_ALIGN != 0 || mid_lo >= mid_hi)
        return direct_bounce(fd, dst, off, len, scratch, scratch_len);
    int rc = 0;
    if (off < mid_lo)
        rc = direct_bounce(fd, dst, off, mid_lo - off, scratch, scratch_len);
    if (rc == 0)
        rc = pread_exact(fd, dst + (mid_lo - off), (size_t)(mid_hi - mid_lo), mid_lo);
    if (rc == 0 && mid_hi < off + len)
        rc = direct_bounce(fd, dst + (mid_hi - off), mid_hi, off + len - mid_hi, scratch,
                           scratch_len);
    return rc;
}

static int rb_r_read(const void *p, uint64_t i, void *dst, void *scratch, size_t scratch_len)
{
    const rb_shard *s = p;
    if (i >= fmt_raw_count(s->raw))
        return FMT_EINVAL;
    fmt_raw_entry e;
    fmt_raw_get_entry(s->raw, i, &e);
    if (s->access == FMT_ACCESS_MMAP) {
        memcpy(dst, fmt_raw_pixels(s->raw, i), (size_t)e.length);
        return 0;
    }
    if (s->access == FMT_ACCESS_PREAD || s->dfd < 0)
        return pread_exact(fmt_raw_fd(s->raw), dst, (size_t)e.length, e.offset);

    void *own = NULL;
    if (!scratch) {
        scratch_len = (size_t)(align_up(e.length) + FMT_DIRECT_ALIGN);
        if (scratch_len > RB_DEFAULT_SCRATCH)
            scratch_len = RB_DEFAULT_SCRATCH;
        if (posix_memalign(&own, FMT_DIRECT_ALIGN, scratch_len) != 0)
            return ENOMEM;
        scratch = own;
    } else if ((uintptr_t)scratch % FMT_DIRECT_ALIGN != 0 || scratch_len == 0 ||
               scratch_len % FMT_DIRECT_ALIGN != 0) {
        return FMT_EINVAL;
    }
    int rc = direct_read(s->dfd, dst, e.offset, e.length, scratch, scratch_len);
    /* Some filesystems accept O_DIRECT at open and refuse a transfer they cannot align (EINVAL):
     * the data is still there for a plain pread. */
    if (rc == EINVAL)
        rc = pread_exact(fmt_raw_fd(s->raw), dst, (size_t)e.length, e.offset);
    free(own);
    return rc;
}

static int rb_r_check(const void *p, uint64_t i)
{
    return fmt_raw_check_sample(((const rb_shard *)p)->raw, i);
}

static int rb_r_advise(const void *p, fmt_advice advice)
{
    static const int madv[] = {MADV_NORMAL, MADV_SEQUENTIAL, MADV_RANDOM};
    static const int fadv[] = {POSIX_FADV_NORMAL, POSIX_FADV_SEQUENTIAL, POSIX_FADV_RANDOM};
    const rb_shard *s = p;
    if ((unsigned)advice > FMT_ADVICE_RANDOM)
        return FMT_EINVAL;
    if (s->access == FMT_ACCESS_DIRECT)
        return 0;
    if (s->access == FMT_ACCESS_MMAP) {
        /* the mapping is read-only for us; madvise only changes the kernel's read-ahead */
        void *base = (void *)(uintptr_t)fmt_raw_base(s->raw);
        return madvise(base, (size_t)fmt_raw_get_header(s->raw)->file_size, madv[advice]) ? errno
                                                                                             : 0;
    }
    return posix_fadvise(fmt_raw_fd(s->raw), 0, 0, fadv[advice]);
}

static int rb_r_direct(const void *p)
{
    return ((const rb_shard *)p)->dfd >= 0;
}

const fmt_backend fmt_backend_raw = {
    .name = "raw",
    .version = 1,
    .suffix = ".raw",
    .w_open = rb_w_open,
    .w_add = rb_w_add,
    .w_count = rb_w_count,
    .w_size = rb_w_size,
    .w_cost = fmt_raw_sample_cost,
    .w_finish = rb_w_finish,
    .w_abort = rb_w_abort,
    .r_open = rb_r_open,
    .r_close = rb_r_close,
    .r_info = rb_r_info,
    .r_get = rb_r_get,
    .r_read = rb_r_read,
    .r_check = rb_r_check,
    .r_advise = rb_r_advise,
    .r_direct = rb_r_direct,
};
