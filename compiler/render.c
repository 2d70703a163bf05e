/* render.c - decode one input and produce its sample(s). */
#include "render.h"

#include "codec.h"
#include "image.h"

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

static int is_identity(const fmt_geom_plan *p, const fmt_image *src)
{
    return p->out_w == src->width && p->out_h == src->height && p->rs_w == src->width &&
           p->rs_h == src->height && p->win_x == 0 && p->win_y == 0 && p->box.x0 == 0.0f &&
           p->box.y0 == 0.0f && p->box.x1 == (float)src->width &&
           p->box.y1 == (float)src->height && p->dst_w == p->out_w && p->dst_h == p->out_h;
}

/* After the decode into s->dec (of an input src_w x src_h as its header gives it): the plan
 * (full, planned once from the header, plan_rc what fmt_geom_plan_for returned) mapped onto the
 * decoded image, then the plain geometry or the augmented variants into out[]. why says what
 * failed. */
static int render_decoded(const shc_render_opts *o, uint32_t src_w, uint32_t src_h,
                          const fmt_geom_plan *full, int plan_rc, uint64_t source,
                          shc_render_scratch *s, fmt_image *out, fmt_aug_params *params,
                          fmt_msg *why)
{
    uint32_t n = shc_render_count(o);
    if (plan_rc)
        return plan_rc;
    fmt_geom_plan plan = *full;
    /* the output comes from the full-size plan, so it does not depend on the DCT scale */
    int rc = fmt_geom_plan_map(&plan, src_w, src_h, s->dec.width, s->dec.height);
    if (rc)
        return rc;
    s->src_w = src_w;
    s->src_h = src_h;
    s->plan = plan;
    if (o->augment) {
        for (uint32_t v = 0; v < n && !rc; v++) {
            fmt_aug_draw(&o->aug, o->seed, source, v, s->dec.width, s->dec.height, &plan,
                         &params[v]);
            rc = fmt_aug_apply_into(s->rz, &s->dec, &params[v], plan.out_w, plan.out_h, &out[v],
                                    why);
        }
        return rc;
    }
    if (is_identity(&plan, &s->dec)) {
        /* hand the decoded buffer over and keep the output's for the next decode */
        fmt_image t = out[0];
        out[0] = s->dec;
        s->dec = t;
        return 0;
    }
    return fmt_resize_into(s->rz, &s->dec, &plan, &out[0], why);
}

int shc_render_into(const shc_render_opts *o, const char *path, uint64_t source,
                    shc_render_scratch *s, fmt_image *out, fmt_aug_params *params, fmt_msg *msg)
{
    size_t len = 0;
    int rc = fmt_read_file_into(path, o->max_file_bytes, &s->file, &s->file_cap, &len);
    if (rc) {
        if (rc == FMT_ETOOBIG)
            return fmt_fail(msg, rc, "file larger than %" PRIu64 " bytes", o->max_file_bytes);
        return fmt_fail(msg, rc, "%s", fmt_strerror(rc));
    }
    return shc_render_mem_into(o, s->file, len, source, s, out, params, msg);
}

/* A full-scale decode need only fill what the plain geometry's resize reads: the region of
 * interest of dopt (image.h), where it is smaller than the image. */
static void roi(const fmt_geom_plan *plan, const fmt_image_info *info, shc_render_scratch *s,
                fmt_decode_opts *dopt)
{
    uint32_t rect[4];
    fmt_resize_source_rect(s->rz, plan, info->width, info->height, rect);
    if (rect[2] < info->width || rect[3] < info->height) {
        dopt->roi_x = rect[0];
        dopt->roi_y = rect[1];
        dopt->roi_w = rect[2];
        dopt->roi_h = rect[3];
    }
}

int shc_render_mem_into(const shc_render_opts *o, const uint8_t *file, size_t len,
                        uint64_t source, shc_render_scratch *s, fmt_image *out,
                        fmt_aug_params *params, fmt_msg *msg)
{
    fmt_msg why = {{0}}, warning = {{0}};
    fmt_image_info info;
    int rc = fmt_image_probe(file, len, &info, &why);
    if (rc)
        goto fail;
    fmt_decode_opts dopt = {.channels = o->channels, .limits = o->limits};
    /* the sample's geometry, planned once from the header: the decode's scale and region, and
     * the resize (an error is reported after the decode, whose own error comes first) */
    fmt_geom_plan plan;
    int plan_rc = fmt_geom_plan_for(&o->geom, info.width, info.height, &plan);
    /* augmented crops can be small parts of the source: they need it at full size */
    if (!o->augment && !plan_rc)
        fmt_geom_plan_min_decode(&o->geom, &plan, info.width, info.height, &dopt.min_width,
                                 &dopt.min_height);
    if (!o->augment && !plan_rc && !dopt.min_width && !o->full_decode)
        roi(&plan, &info, s, &dopt);
    rc = fmt_image_decode_into(file, len, &dopt, &s->dec, &why);
    if (rc)
        goto fail;
    warning = why;              /* the decoder's warning, if any (image.h) */
    why.text[0] = '\0';
    rc = render_decoded(o, info.width, info.height, &plan, plan_rc, source, s, out, params,
                        &why);
    if (rc)
        goto fail;
    if (msg)
        *msg = warning;
    return 0;
fail:
    return fmt_fail(msg, rc, "%s", fmt_reason(&why, rc));
}

/* Pixels given as they are (1, 3 or 4 channels, rows packed) into s->dec with o->channels: gray
 * replicated (Pillow's L -> RGB), alpha dropped (RGBA -> RGB), colour to gray by fmt_luma
 * (Pillow's RGB -> L), as the decoders treat files of those layouts. */
static int take_pixels(const shc_render_opts *o, const uint8_t *px, uint32_t width,
                       uint32_t height, uint32_t channels, fmt_image *dec, fmt_msg *why)
{
    if (channels != 1 && channels != 3 && channels != 4)
        return fmt_fail(why, FMT_EINVAL, "pixels with %u channels (expected 1, 3 or 4)",
                        channels);
    int rc = fmt_limits_check(&o->limits, width, height, why);
    if (rc)
        return rc;
    if ((rc = fmt_image_reserve(dec, width, height, o->channels)) != 0)
        return fmt_fail(why, rc, "%s", fmt_strerror(rc));
    size_t npix = (size_t)width * height;
    uint8_t *d = dec->pixels;
    if (channels == o->channels) {
        memcpy(d, px, npix * channels);
    } else if (o->channels == 3 && channels == 1) {
        for (size_t i = 0; i < npix; i++, d += 3)
            d[0] = d[1] = d[2] = px[i];
    } else if (o->channels == 3) {          /* RGBA */
        for (size_t i = 0; i < npix; i++, d += 3, px += 4)
            memcpy(d, px, 3);
    } else if (channels == 3) {
        fmt_rgb_to_gray(px, d, npix);
    } else {                                /* RGBA to gray: its RGB's luma */
        for (size_t i = 0; i < npix; i++, px += 4)
            d[i] = fmt_luma(px[0], px[1], px[2]);
    }
    return 0;
}

int shc_render_pixels_into(const shc_render_opts *o, const uint8_t *px, uint32_t width,
                           uint32_t height, uint32_t channels, uint64_t source,
                           shc_render_scratch *s, fmt_image *out, fmt_aug_params *params,
                           fmt_msg *msg)
{
    fmt_msg why = {{0}};
    int rc = take_pixels(o, px, width, height, channels, &s->dec, &why);
    if (rc == 0) {
        fmt_geom_plan plan;
        int plan_rc = fmt_geom_plan_for(&o->geom, width, height, &plan);
        rc = render_decoded(o, width, height, &plan, plan_rc, source, s, out, params, &why);
    }
    if (rc)
        return fmt_fail(msg, rc, "%s", fmt_reason(&why, rc));
    if (msg)
        msg->text[0] = '\0';
    return 0;
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
