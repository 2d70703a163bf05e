/* render.c - decode one input and produce its sample(s). */
#include "render.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct shc_render_scratch {
    fmt_resizer *rz;
    int own_rz;
    uint8_t *file;              /* the encoded input */
    size_t file_cap;
    fmt_image dec;              /* the decoded input */
    uint32_t src_w, src_h;      /* the last input's size, as its header gives it */
    fmt_geom_plan plan;         /* and the plan its pixels went through */
};

void shc_render_geometry(const shc_render_scratch *s, uint32_t *src_w, uint32_t *src_h,
                         fmt_geom_plan *plan)
{
    *src_w = s->src_w;
    *src_h = s->src_h;
    *plan = s->plan;
}

int shc_render_scratch_create(fmt_rs_cache *cache, shc_render_scratch **s)
{
    *s = calloc(1, sizeof **s);
    if (!*s)
        return ENOMEM;
    int rc = fmt_resizer_create_shared(cache, &(*s)->rz);
    if (rc) {
        free(*s);
        *s = NULL;
        return rc;
    }
    (*s)->own_rz = 1;
    return 0;
}

void shc_render_scratch_free(shc_render_scratch *s)
{
    if (!s)
        return;
    if (s->own_rz)
        fmt_resizer_free(s->rz);
    free(s->file);
    fmt_image_free(&s->dec);
    free(s);
}

/* fmt_read_file into a reused buffer: regular files only (a FIFO must not hang a worker), at
 * most max bytes (FMT_ETOOBIG beyond), errno values for I/O errors. */
static int read_into(const char *path, uint64_t max, shc_render_scratch *s, size_t *len)
{
    *len = 0;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return errno;
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) != 0) {
        rc = errno;
        goto leave;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = S_ISDIR(st.st_mode) ? EISDIR : FMT_EUNSUPPORTED;
        goto leave;
    }
    if ((uint64_t)st.st_size > max || (uint64_t)st.st_size > SIZE_MAX - 1) {
        rc = FMT_ETOOBIG;
        goto leave;
    }
    size_t n = (size_t)st.st_size, got = 0;
    if (s->file_cap < n + 1) {
        uint8_t *p = malloc(n + 1);
        if (!p) {
            rc = ENOMEM;
            goto leave;
        }
        free(s->file);
        s->file = p;
        s->file_cap = n + 1;
    }
    while (got < n) {
        ssize_t r = read(fd, s->file + got, n - got);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            rc = errno;
            goto leave;
        }
        if (r == 0)
            break; /* file shrank while we read: hand back what is there */
        got += (size_t)r;
    }
    *len = got;
leave:
    close(fd);
    return rc;
}

static int is_identity(const fmt_geom_plan *p, const fmt_image *src)
{
    return p->out_w == src->width && p->out_h == src->height && p->rs_w == src->width &&
           p->rs_h == src->height && p->win_x == 0 && p->win_y == 0 && p->box.x0 == 0.0f &&
           p->box.y0 == 0.0f && p->box.x1 == (float)src->width &&
           p->box.y1 == (float)src->height && p->dst_w == p->out_w && p->dst_h == p->out_h;
}

int shc_render_into(const shc_render_opts *o, const char *path, uint64_t source,
                    shc_render_scratch *s, fmt_image *out, fmt_aug_params *params, fmt_msg *msg)
{
    size_t len = 0;
    int rc = read_into(path, o->max_file_bytes, s, &len);
    if (rc) {
        if (rc == FMT_ETOOBIG)
            return fmt_fail(msg, rc, "file larger than %" PRIu64 " bytes", o->max_file_bytes);
        return fmt_fail(msg, rc, "%s", fmt_strerror(rc));
    }
    return shc_render_mem_into(o, s->file, len, source, s, out, params, msg);
}

int shc_render_mem_into(const shc_render_opts *o, const uint8_t *file, size_t len,
                        uint64_t source, shc_render_scratch *s, fmt_image *out,
                        fmt_aug_params *params, fmt_msg *msg)
{
    uint32_t n = shc_render_count(o);
    fmt_msg why = {{0}}, warning = {{0}};
    fmt_image_info info;
    int rc = fmt_image_probe(file, len, &info, &why);
    if (rc)
        goto fail;
    fmt_decode_opts dopt = {.channels = o->channels, .limits = o->limits};
    /* augmented crops can be small parts of the source: they need it at full size */
    if (!o->augment)
        fmt_geom_min_decode(&o->geom, info.width, info.height, &dopt.min_width, &dopt.min_height);
    rc = fmt_image_decode_into(file, len, &dopt, &s->dec, &why);
    if (rc)
        goto fail;
    warning = why;              /* the decoder's warning, if any (image.h) */
    why.text[0] = '\0';
    fmt_geom_plan plan;
    /* the output comes from the full-size plan, so it does not depend on the DCT scale */
    rc = fmt_geom_plan_decoded(&o->geom, info.width, info.height, s->dec.width, s->dec.height,
                               &plan);
    if (rc)
        goto fail;
    s->src_w = info.width;
    s->src_h = info.height;
    s->plan = plan;
    if (o->augment) {
        for (uint32_t v = 0; v < n && !rc; v++) {
            fmt_aug_draw(&o->aug, o->seed, source, v, s->dec.width, s->dec.height, &plan,
                         &params[v]);
            rc = fmt_aug_apply_into(s->rz, &s->dec, &params[v], plan.out_w, plan.out_h, &out[v],
                                    &why);
        }
        if (rc)
            goto fail;
    } else if (is_identity(&plan, &s->dec)) {
        /* hand the decoded buffer over and keep the output's for the next decode */
        fmt_image t = out[0];
        out[0] = s->dec;
        s->dec = t;
    } else {
        rc = fmt_resize_into(s->rz, &s->dec, &plan, &out[0], &why);
        if (rc)
            goto fail;
    }
    if (msg)
        *msg = warning;
    return 0;
fail:
    return fmt_fail(msg, rc, "%s", fmt_reason(&why, rc));
}

int shc_render(const shc_render_opts *o, const char *path, uint64_t source, fmt_resizer *rz,
               fmt_image *out, fmt_aug_params *params, fmt_msg *msg)
{
    uint32_t n = shc_render_count(o);
    memset(out, 0, n * sizeof *out);
    shc_render_scratch s = {.rz = rz};
    int rc = shc_render_into(o, path, source, &s, out, params, msg);
    free(s.file);
    fmt_image_free(&s.dec);
    if (rc)
        for (uint32_t v = 0; v < n; v++)
            fmt_image_free(&out[v]);
    return rc;
}

int shc_render_mem(const shc_render_opts *o, const uint8_t *file, size_t len, uint64_t source,
                   fmt_resizer *rz, fmt_image *out, fmt_aug_params *params, fmt_msg *msg)
{
    uint32_t n = shc_render_count(o);
    memset(out, 0, n * sizeof *out);
    shc_render_scratch s = {.rz = rz};
    int rc = shc_render_mem_into(o, file, len, source, &s, out, params, msg);
    fmt_image_free(&s.dec);
    if (rc)
        for (uint32_t v = 0; v < n; v++)
            fmt_image_free(&out[v]);
    return rc;
}
