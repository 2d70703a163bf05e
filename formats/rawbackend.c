/* rawbackend.c - the raw format behind the backend interface (backend.h): the fmt_backend_raw
 * table, writing through the raw writer and reading with the three ways of reading payload bytes:
 * the mapping, pread, and pread on a second O_DIRECT descriptor. The format itself (header and
 * entry codecs, writer, reader) is raw.c; this file uses it through raw.h and raw_int.h only.
 *
 * Only FMT_ACCESS_MMAP maps the file. In the pread and O_DIRECT modes the shard is opened with
 * FMT_RAW_OPEN_NOMAP (index and aux area copied into memory at open), so that a shard truncated
 * under a running reader yields FMT_ETRUNC from a short pread instead of a SIGBUS from a mapped
 * page: those modes are the ones meant for files that may change (network filesystems).
 */
#include "raw.h"
#include "raw_int.h"
#include "backend.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "compress.h"
#include "directio.h"
#include "fdcache.h"

typedef struct {
    fmt_raw_shard *raw;
    fmt_access access;          /* how it is read: PREAD for a MMAP shard past the mapping cap */
    int mapped;                 /* counted by fmt_map_reserve */
    fmt_fdfile *dfile;          /* O_DIRECT descriptor (from the cache), or NULL (then pread on
                                 * the raw shard's descriptor) */
    uint32_t mem_align, off_align;  /* what dfd's transfers need (statx; else FMT_DIRECT_ALIGN) */
    fmt_shard_info info;
} rb_shard;

/* ---- writing ---- */

static int rb_w_open(void **w, const fmt_writer_opts *o)
{
    char *path = fmt_path_join(o->dir, o->name, ".raw");
    if (!path)
        return ENOMEM;
    fmt_raw_writer_opts wo = {.align = o->align, .first_index = o->first_index,
                              .fingerprint = o->fingerprint, .codec = o->codec,
                              .level = o->level, .jpeg_fraction = o->jpeg_fraction,
                              .quality = o->quality};
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

/* What the writer stores for this sample: its payload, compressed where that is smaller, with
 * its share of the padding (fmt_raw_sample_cost of the stored size), entry and aux record. */
static uint64_t rb_sample_bytes(const fmt_writer_opts *o, const fmt_sample_meta *m,
                                const void *pixels)
{
    uint64_t len, stored;
    if (fmt_shape_bytes(m->height, m->width, m->channels, &len) || len > SIZE_MAX)
        return 0;
    stored = len;
    fmt_codec_spec spec = {o->codec, o->level};
    uint64_t jpeg_cost = 0;
    if (o->jpeg_fraction > 0) {
        uint8_t *jpeg;
        size_t jlen;
        uint64_t h;
        if (fmt_raw_jpeg_encode(pixels, m->height, m->width, m->channels, o->quality, &jpeg,
                                &jlen, &h))
            return 0;
        free(jpeg);
        jpeg_cost = fmt_raw_sample_cost(jlen < len ? jlen : len, m->aux ? m->aux_len : 0, 0);
    }
    if (spec.codec && fmt_codec_check(&spec) == 0) {
        size_t bound = fmt_compress_bound(spec.codec, (size_t)len), clen;
        uint8_t *buf = bound ? malloc(bound) : NULL;
        if (!buf)
            return 0;
        if (fmt_compress(&spec, pixels, (size_t)len, buf, bound, &clen) == 0 && clen && clen < len)
            stored = clen;
        free(buf);
    }
    uint64_t cost = fmt_raw_sample_cost(stored, m->aux ? m->aux_len : 0,
                                        spec.codec || o->jpeg_fraction > 0 ? 0 : o->align);
    /* mixed mode: first_index is the sample's dataset index, as the writer picks by it */
    if (o->jpeg_fraction > 0 && fmt_raw_jpeg_pick(o->first_index, o->jpeg_fraction))
        cost = jpeg_cost;
    return cost;
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
    int bfd, rc = fmt_raw_fd_get(s->raw, 0, &bfd);
    if (rc) {
        close(fd);
        return fmt_fail(msg, rc, "cannot reopen: %s", fmt_strerror(rc));
    }
    struct stat a, b;
    if (fstat(fd, &a) != 0 || fstat(bfd, &b) != 0) {
        rc = errno;
        fmt_raw_fd_put(s->raw);
        close(fd);
        return fmt_fail(msg, rc, "%s", fmt_strerror(rc));
    }
    fmt_raw_fd_put(s->raw);
    if (a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
        close(fd);
        return fmt_fail(msg, FMT_ECORRUPT, "file was replaced while opening");
    }
    /* the device's own O_DIRECT alignment where the kernel says (often 512), else the safe 4096 */
    s->mem_align = s->off_align = FMT_DIRECT_ALIGN;
#ifdef STATX_DIOALIGN
    struct statx sx;
    if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 && (sx.stx_mask & STATX_DIOALIGN) &&
        sx.stx_dio_mem_align && sx.stx_dio_offset_align &&
        !(sx.stx_dio_mem_align & (sx.stx_dio_mem_align - 1)) &&
        !(sx.stx_dio_offset_align & (sx.stx_dio_offset_align - 1)) &&
        sx.stx_dio_mem_align <= FMT_DIRECT_ALIGN && sx.stx_dio_offset_align <= FMT_DIRECT_ALIGN) {
        s->mem_align = sx.stx_dio_mem_align;
        s->off_align = sx.stx_dio_offset_align;
    }
#endif
    /* held by the cache from now on, like the raw shard's own descriptor */
    if ((rc = fmt_fdfile_new(&s->dfile, path, O_RDONLY | O_DIRECT, fd)) != 0)
        return fmt_fail(msg, rc, "%s", fmt_strerror(rc));
    return 0;
}

static void rb_r_close(void *p)
{
    rb_shard *s = p;
    if (!s)
        return;
    fmt_raw_close(s->raw);
    fmt_fdfile_free(s->dfile);
    if (s->mapped)
        fmt_map_unreserve();
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
    s->access = access;
    /* past the mapping cap (fdcache.h) a MMAP shard is read with pread like a PREAD one: its
     * samples' pixels pointers are then NULL, as for a compressed sample */
    if (access == FMT_ACCESS_MMAP) {
        if (fmt_map_reserve())
            s->mapped = 1;
        else
            s->access = FMT_ACCESS_PREAD;
    }
    int rc = fmt_raw_open_ex(&s->raw, path, s->mapped ? 0 : FMT_RAW_OPEN_NOMAP, msg);
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
    out->pixels = fmt_raw_pixels(s->raw, i);   /* NULL unless MMAP and stored plain */
    out->aux = fmt_raw_aux(s->raw, i, &out->aux_len);
    return 0;
}

/* A compressed payload: its stored bytes out of the mapping, or read into scratch (whole aligned
 * blocks with O_DIRECT) or a buffer of its own when scratch is too small, then decoded into dst. */
static int read_encoded(const rb_shard *s, const fmt_raw_entry *e, uint8_t *dst, uint8_t *scratch,
                        size_t scratch_len)
{
    const uint8_t *src = NULL;
    void *own = NULL;
    int rc = 0;
    if (s->access == FMT_ACCESS_MMAP) {
        src = fmt_raw_base(s->raw) + e->offset;
    } else if (s->dfile) {
        uint64_t lo = fmt_direct_align_down(e->offset),
                 hi = fmt_direct_align_up(e->offset + e->stored);
        if (!scratch || (uintptr_t)scratch % FMT_DIRECT_ALIGN || scratch_len < hi - lo) {
            if (posix_memalign(&own, FMT_DIRECT_ALIGN, (size_t)(hi - lo)) != 0)
                return ENOMEM;
            scratch = own;
        }
        size_t got;
        int dfd;
        if (!(rc = fmt_fdfile_get(s->dfile, 0, &dfd))) {
            rc = fmt_pread_full(dfd, scratch, (size_t)(hi - lo), lo, &got);
            fmt_fdfile_put(s->dfile);
        }
        if (rc == EINVAL) { /* O_DIRECT refused for this transfer: plain pread */
            int fd;
            if (!(rc = fmt_raw_fd_get(s->raw, 0, &fd))) {
                rc = fmt_pread_full(fd, scratch, (size_t)(hi - lo), lo, &got);
                fmt_raw_fd_put(s->raw);
            }
        }
        if (!rc && got < e->offset + e->stored - lo)
            rc = FMT_ETRUNC;
        src = scratch + (e->offset - lo);
    } else {
        if (!scratch || scratch_len < e->stored) {
            if (!(own = malloc((size_t)e->stored)))
                return ENOMEM;
            scratch = own;
        }
        int fd;
        if (!(rc = fmt_raw_fd_get(s->raw, 0, &fd))) {
            rc = fmt_pread_exact(fd, scratch, (size_t)e->stored, e->offset);
            fmt_raw_fd_put(s->raw);
        }
        src = scratch;
    }
    if (!rc)
        rc = fmt_raw_decode(e, src, dst, NULL);
    free(own);
    return rc;
}

static int rb_r_read(const void *p, uint64_t i, void *dst, void *scratch, size_t scratch_len)
{
    const rb_shard *s = p;
    if (i >= fmt_raw_count(s->raw))
        return FMT_EINVAL;
    fmt_raw_entry e;
    fmt_raw_get_entry(s->raw, i, &e);
    if (e.codec != FMT_RAW_CODEC_NONE)
        return read_encoded(s, &e, dst, scratch, scratch_len);
    if (s->access == FMT_ACCESS_MMAP) {
        memcpy(dst, fmt_raw_pixels(s->raw, i), (size_t)e.length);
        return 0;
    }
    int fd, dfd = -1, rc = fmt_raw_fd_get(s->raw, 0, &fd);
    if (rc)
        return rc;
    if (s->access == FMT_ACCESS_PREAD || !s->dfile)
        rc = fmt_pread_exact(fd, dst, (size_t)e.length, e.offset);
    else if (!(rc = fmt_fdfile_get(s->dfile, 0, &dfd))) {
        rc = fmt_direct_read(dfd, fd, dst, e.offset, e.length, scratch, scratch_len, 0);
        fmt_fdfile_put(s->dfile);
    }
    fmt_raw_fd_put(s->raw);
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
    /* read-ahead advice belongs to the open file: it is lost when the cache closes the
     * descriptor, so only a shard whose descriptor is open now takes it (a hint only) */
    int fd, rc = fmt_raw_fd_get(s->raw, 1, &fd);
    if (rc)
        return 0;
    rc = posix_fadvise(fd, 0, 0, fadv[advice]);
    fmt_raw_fd_put(s->raw);
    return rc;
}

static int rb_r_direct(const void *p)
{
    return ((const rb_shard *)p)->dfile != NULL;
}

static void rb_extent_release(const void *p)
{
    const rb_shard *s = p;
    fmt_fdfile_put(s->dfile);
    fmt_raw_fd_put(s->raw);
}

static int rb_r_extent(const void *p, uint64_t i, fmt_extent *x)
{
    const rb_shard *s = p;
    if (i >= fmt_raw_count(s->raw))
        return FMT_EINVAL;
    if (!s->dfile)
        return FMT_EUNSUPPORTED;
    /* both descriptors stay pinned until fmt_extent_release; bounded, so that a caller holding
     * many extents at once gets EBUSY (and reads that sample another way) rather than more
     * descriptors than the cache allows */
    int fd, dfd, rc = fmt_raw_fd_get(s->raw, 1, &fd);
    if (rc)
        return rc;
    if ((rc = fmt_fdfile_get(s->dfile, 1, &dfd)) != 0) {
        fmt_raw_fd_put(s->raw);
        return rc;
    }
    fmt_raw_entry e;
    fmt_raw_get_entry(s->raw, i, &e);
    *x = (fmt_extent){.fd = dfd, .buffered_fd = fd, .mem_align = s->mem_align,
                      .off_align = s->off_align, .offset = e.offset, .stored = e.stored,
                      .length = e.length, .hash = e.hash, .codec = (int)e.codec,
                      .height = e.height, .width = e.width, .channels = e.channels,
                      .release = rb_extent_release, .owner = s};
    return 0;
}

/* The header of a shard not yet here: its own checks, then its hash and size against the
 * manifest's (what fmt_shard_check_info compares once it is opened), before its index_offset says
 * which bytes to fetch next. */
static int rb_r_tail(const uint8_t *head, const fmt_manifest_shard *ms, uint64_t *from,
                     uint64_t *to, fmt_msg *msg)
{
    fmt_raw_header h;
    int rc = fmt_raw_decode_header(head, &h, msg);
    if (rc)
        return rc;
    if (h.header_hash != ms->hash)
        return fmt_fail(msg, FMT_EHASH, "header hash %016" PRIx64 " differs from the "
                        "manifest's %016" PRIx64, h.header_hash, ms->hash);
    if (h.file_size != ms->bytes)
        return fmt_fail(msg, FMT_ECORRUPT, "is %" PRIu64 " bytes, the manifest says %" PRIu64,
                        h.file_size, ms->bytes);
    *from = h.index_offset;
    *to = h.file_size;
    return 0;
}

static int rb_r_open_parts(void **out, const fmt_manifest_shard *ms, const uint8_t *head,
                           size_t head_len, const uint8_t *tail, size_t tail_len, fmt_msg *msg)
{
    (void)ms;                   /* (r_tail checked the header against it) */
    (void)head_len;             /* FMT_RAW_HEADER_SIZE: r_head */
    *out = NULL;
    rb_shard *s = calloc(1, sizeof *s);
    if (!s)
        return ENOMEM;
    s->access = FMT_ACCESS_PREAD;       /* no mapping; reads find no descriptor */
    int rc = fmt_raw_open_parts(&s->raw, head, tail, tail_len, msg);
    if (rc) {
        rb_r_close(s);
        return rc;
    }
    info_from_header(fmt_raw_get_header(s->raw), &s->info);
    *out = s;
    return 0;
}

const fmt_backend fmt_backend_raw = {
    .name = "raw",
    .version = 2,               /* shards of version 1 (aligned) and 2 (packed) */
    .suffix = ".raw",
    .w_open = rb_w_open,
    .w_add = rb_w_add,
    .w_count = rb_w_count,
    .w_size = rb_w_size,
    .w_cost = fmt_raw_sample_cost,
    .w_finish = rb_w_finish,
    .w_abort = rb_w_abort,
    .w_sample_bytes = rb_sample_bytes,
    .r_open = rb_r_open,
    .r_close = rb_r_close,
    .r_info = rb_r_info,
    .r_get = rb_r_get,
    .r_read = rb_r_read,
    .r_check = rb_r_check,
    .r_advise = rb_r_advise,
    .r_direct = rb_r_direct,
    .r_extent = rb_r_extent,
    .r_head = FMT_RAW_HEADER_SIZE,
    .r_tail = rb_r_tail,
    .r_open_parts = rb_r_open_parts,
};
