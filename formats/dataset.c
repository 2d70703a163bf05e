/* dataset.c - a dataset directory: the manifest plus its mapped raw shards, and the three ways of
 * reading payload bytes (mapping, pread, O_DIRECT pread). */
#include "dataset.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "raw.h"

/* Bounce buffer fmt_dataset_read allocates per call in DIRECT mode (larger samples loop). */
#define DS_DEFAULT_SCRATCH (1u << 20)

typedef struct {
    fmt_raw_shard *raw;
    char *path;
    int dfd;                    /* O_DIRECT descriptor, or -1 (then pread on the raw fd) */
} ds_shard;

struct fmt_dataset {
    fmt_manifest man;
    fmt_access access;
    size_t ndirect;
    uint64_t max_length;        /* largest payload */
    ds_shard *shards;           /* one per manifest shard */
};

/* Second descriptor for O_DIRECT reads. The filesystem may refuse the flag (EINVAL): the shard is
 * then read with plain pread, as the header promises. The file must be the one the first open
 * mapped and validated, not one renamed over it in between. */
static int open_direct(ds_shard *s, fmt_msg *msg)
{
    int fd = open(s->path, O_RDONLY | O_DIRECT | O_CLOEXEC);
    if (fd < 0) {
        if (errno == EINVAL)
            return 0;
        int rc = errno;
        return fmt_fail(msg, rc, "%s: cannot open with O_DIRECT: %s", s->path, fmt_strerror(rc));
    }
    struct stat a, b;
    if (fstat(fd, &a) != 0 || fstat(fmt_raw_fd(s->raw), &b) != 0) {
        int rc = errno;
        close(fd);
        return fmt_fail(msg, rc, "%s: %s", s->path, fmt_strerror(rc));
    }
    if (a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
        close(fd);
        return fmt_fail(msg, FMT_ECORRUPT, "%s: file was replaced while opening", s->path);
    }
    s->dfd = fd;
    return 0;
}

static uint64_t max_u64(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}

/* Largest payload of a shard. fmt_raw_open has just walked the index to check it, so the extra
 * pass for a variable-shape shard reads warm pages. */
static uint64_t max_length(const fmt_raw_shard *raw)
{
    const fmt_raw_header *h = fmt_raw_get_header(raw);
    uint64_t n = fmt_raw_count(raw), max = 0;
    if ((h->flags & FMT_RAW_FLAG_FIXED) && n)
        return (uint64_t)h->fixed_height * h->fixed_width * h->fixed_channels;
    for (uint64_t i = 0; i < n; i++) {
        fmt_raw_entry e;
        fmt_raw_get_entry(raw, i, &e);
        max = max_u64(max, e.length);
    }
    return max;
}

int fmt_dataset_open_ex(fmt_dataset **out, const char *dir, fmt_access access, fmt_msg *msg)
{
    *out = NULL;
    if (access != FMT_ACCESS_MMAP && access != FMT_ACCESS_PREAD && access != FMT_ACCESS_DIRECT)
        return fmt_fail(msg, FMT_EINVAL, "unknown access mode %d", (int)access);
    fmt_dataset *d = calloc(1, sizeof *d);
    if (!d)
        return ENOMEM;
    d->access = access;
    int rc = fmt_manifest_read(dir, &d->man, msg);
    if (rc)
        goto leave;
    if (strcmp(d->man.backend, "raw") != 0) {
        rc = fmt_fail(msg, FMT_EUNSUPPORTED, "%s/manifest.json: backend '%s' is not supported",
                      dir, d->man.backend);
        goto leave;
    }
    d->shards = calloc(d->man.nshards ? d->man.nshards : 1, sizeof *d->shards);
    if (!d->shards) {
        rc = ENOMEM;
        goto leave;
    }
    for (size_t i = 0; i < d->man.nshards; i++)
        d->shards[i].dfd = -1;
    for (size_t i = 0; i < d->man.nshards; i++) {
        const fmt_manifest_shard *ms = &d->man.shards[i];
        ds_shard *s = &d->shards[i];
        if (asprintf(&s->path, "%s/%s", dir, ms->file) < 0) {
            s->path = NULL;
            rc = ENOMEM;
            goto leave;
        }
        fmt_msg sub = {{0}};
        rc = fmt_raw_open(&s->raw, s->path, &sub);
        if (rc) {
            fmt_fail(msg, rc, "%s: %s", s->path, fmt_reason(&sub, rc));
            goto leave;
        }
        const fmt_raw_header *h = fmt_raw_get_header(s->raw);
        if (h->header_hash != ms->hash || h->sample_count != ms->samples ||
            h->first_index != ms->first || h->file_size != ms->bytes) {
            rc = fmt_fail(msg, FMT_ECORRUPT, "%s: does not match the manifest (%s)", s->path,
                          h->header_hash != ms->hash ? "header hash differs" : "counts differ");
            goto leave;
        }
        d->max_length = max_u64(d->max_length, max_length(s->raw));
        if (access == FMT_ACCESS_DIRECT) {
            rc = open_direct(s, msg);
            if (rc)
                goto leave;
            d->ndirect += s->dfd >= 0;
        }
    }
    *out = d;
    d = NULL;
leave:
    fmt_dataset_close(d);
    return rc;
}

int fmt_dataset_open(fmt_dataset **d, const char *dir, fmt_msg *msg)
{
    return fmt_dataset_open_ex(d, dir, FMT_ACCESS_MMAP, msg);
}

void fmt_dataset_close(fmt_dataset *d)
{
    if (!d)
        return;
    for (size_t i = 0; d->shards && i < d->man.nshards; i++) {
        fmt_raw_close(d->shards[i].raw);
        if (d->shards[i].dfd >= 0)
            close(d->shards[i].dfd);
        free(d->shards[i].path);
    }
    free(d->shards);
    fmt_manifest_free(&d->man);
    free(d);
}

const fmt_manifest *fmt_dataset_manifest(const fmt_dataset *d)
{
    return &d->man;
}

uint64_t fmt_dataset_count(const fmt_dataset *d)
{
    return d->man.samples;
}

fmt_access fmt_dataset_access(const fmt_dataset *d)
{
    return d->access;
}

uint64_t fmt_dataset_max_length(const fmt_dataset *d)
{
    return d->max_length;
}

size_t fmt_dataset_direct_shards(const fmt_dataset *d)
{
    return d->ndirect;
}

/* Shard of sample idx and the entry, or FMT_EINVAL. */
static int locate(const fmt_dataset *d, uint64_t idx, const ds_shard **sh, uint64_t *local,
                  fmt_raw_entry *e)
{
    long si = fmt_manifest_find_shard(&d->man, idx);
    if (si < 0)
        return FMT_EINVAL;
    *sh = &d->shards[si];
    *local = idx - d->man.shards[si].first;
    fmt_raw_get_entry((*sh)->raw, *local, e);
    return 0;
}

static void fill_meta(const ds_shard *sh, uint64_t idx, uint64_t local, const fmt_raw_entry *e,
                      fmt_sample *s)
{
    s->index = idx;
    s->label = e->label;
    s->height = e->height;
    s->width = e->width;
    s->channels = e->channels;
    s->source = e->source;
    s->hash = e->hash;
    s->length = e->length;
    s->pixels = NULL;
    s->aux = fmt_raw_aux(sh->raw, local, &s->aux_len);
}

int fmt_dataset_get(const fmt_dataset *d, uint64_t idx, fmt_sample *s)
{
    const ds_shard *sh;
    uint64_t local;
    fmt_raw_entry e;
    if (locate(d, idx, &sh, &local, &e))
        return FMT_EINVAL;
    fill_meta(sh, idx, local, &e, s);
    s->pixels = fmt_raw_pixels(sh->raw, local);
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

int fmt_dataset_read_buf(const fmt_dataset *d, uint64_t idx, void *dst, fmt_sample *meta,
                         void *scratch, size_t scratch_len)
{
    const ds_shard *sh;
    uint64_t local;
    fmt_raw_entry e;
    if (locate(d, idx, &sh, &local, &e))
        return FMT_EINVAL;
    if (meta)
        fill_meta(sh, idx, local, &e, meta);
    if (d->access == FMT_ACCESS_MMAP) {
        memcpy(dst, fmt_raw_pixels(sh->raw, local), (size_t)e.length);
        return 0;
    }
    if (d->access == FMT_ACCESS_PREAD || sh->dfd < 0)
        return pread_exact(fmt_raw_fd(sh->raw), dst, (size_t)e.length, e.offset);

    void *own = NULL;
    if (!scratch) {
        scratch_len = (size_t)(align_up(e.length) + FMT_DIRECT_ALIGN);
        if (scratch_len > DS_DEFAULT_SCRATCH)
            scratch_len = DS_DEFAULT_SCRATCH;
        if (posix_memalign(&own, FMT_DIRECT_ALIGN, scratch_len) != 0)
            return ENOMEM;
        scratch = own;
    } else if ((uintptr_t)scratch % FMT_DIRECT_ALIGN != 0 || scratch_len == 0 ||
               scratch_len % FMT_DIRECT_ALIGN != 0) {
        return FMT_EINVAL;
    }
    int rc = direct_read(sh->dfd, dst, e.offset, e.length, scratch, scratch_len);
    /* Some filesystems accept O_DIRECT at open and refuse a transfer they cannot align (EINVAL):
     * the data is still there for a plain pread. */
    if (rc == EINVAL)
        rc = pread_exact(fmt_raw_fd(sh->raw), dst, (size_t)e.length, e.offset);
    free(own);
    return rc;
}

int fmt_dataset_read(const fmt_dataset *d, uint64_t idx, void *dst, fmt_sample *meta)
{
    return fmt_dataset_read_buf(d, idx, dst, meta, NULL, 0);
}

const char *fmt_dataset_sample_file(const fmt_dataset *d, uint64_t idx)
{
    long si = fmt_manifest_find_shard(&d->man, idx);
    return si < 0 ? NULL : d->shards[si].path;
}

int fmt_dataset_advise(const fmt_dataset *d, fmt_advice advice)
{
    static const int madv[] = {MADV_NORMAL, MADV_SEQUENTIAL, MADV_RANDOM};
    static const int fadv[] = {POSIX_FADV_NORMAL, POSIX_FADV_SEQUENTIAL, POSIX_FADV_RANDOM};
    if ((unsigned)advice > FMT_ADVICE_RANDOM)
        return FMT_EINVAL;
    if (d->access == FMT_ACCESS_DIRECT)
        return 0;
    int first = 0;
    for (size_t i = 0; i < d->man.nshards; i++) {
        const fmt_raw_shard *raw = d->shards[i].raw;
        int rc;
        if (d->access == FMT_ACCESS_MMAP) {
            /* the mapping is read-only for us; madvise only changes the kernel's read-ahead */
            void *base = (void *)(uintptr_t)fmt_raw_base(raw);
            rc = madvise(base, (size_t)fmt_raw_get_header(raw)->file_size, madv[advice]) ? errno
                                                                                          : 0;
        } else {
            rc = posix_fadvise(fmt_raw_fd(raw), 0, 0, fadv[advice]);
        }
        if (rc && !first)
            first = rc;
    }
    return first;
}

int fmt_dataset_check(const fmt_dataset *d, uint64_t idx)
{
    long si = fmt_manifest_find_shard(&d->man, idx);
    if (si < 0)
        return FMT_EINVAL;
    return fmt_raw_check_sample(d->shards[si].raw, idx - d->man.shards[si].first);
}
