/* render.c - decode one input and produce its sample(s). */
#include "render.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int is_identity(const fmt_geom_plan *p, const fmt_image *src)
{
    return p->out_w == src->width && p->out_h == src->height && p->src_x == 0 && p->src_y == 0 &&
           p->src_w == src->width && p->src_h == src->height && p->dst_w == p->out_w &&
           p->dst_h == p->out_h;
}

int shc_render(const shc_render_opts *o, const char *path, uint64_t source, fmt_resizer *rz,
               fmt_image *out, fmt_aug_params *params, char *reason, size_t rlen)
{
    uint32_t n = shc_render_count(o);
    uint8_t *buf = NULL;
    size_t len = 0;
    fmt_image dec = {0};
    fmt_msg msg = {{0}};
    memset(out, 0, n * sizeof *out);
    int rc = fmt_read_file(path, (size_t)o->max_file_bytes, &buf, &len);
    if (rc) {
        if (rc == FMT_ETOOBIG)
            snprintf(reason, rlen, "file larger than %" PRIu64 " bytes", o->max_file_bytes);
        else
            snprintf(reason, rlen, "%s", fmt_strerror(rc));
        goto leave;
    }
    fmt_image_info info;
    rc = fmt_image_probe(buf, len, &info, &msg);
    if (rc)
        goto fail;
    fmt_decode_opts dopt = {.channels = o->channels, .limits = o->limits};
    /* augmented crops can be small parts of the source: they need it at full size */
    if (!o->augment)
        fmt_geom_min_decode(&o->geom, info.width, info.height, &dopt.min_width, &dopt.min_height);
    rc = fmt_image_decode(buf, len, &dopt, &dec, &msg);
    if (rc)
        goto fail;
    free(buf);
    buf = NULL;
    fmt_geom_plan plan;
    /* the output size comes from the full-size plan, so it does not depend on the DCT scale */
    rc = fmt_geom_plan_decoded(&o->geom, info.width, info.height, dec.width, dec.height, &plan);
    if (rc)
        goto fail;
    if (o->augment) {
        for (uint32_t v = 0; v < n && !rc; v++) {
            fmt_aug_draw(&o->aug, o->seed, source, v, dec.width, dec.height, &plan, &params[v]);
            rc = fmt_aug_apply(rz, &dec, &params[v], plan.out_w, plan.out_h, &out[v], &msg);
        }
        if (rc)
            goto fail;
    } else if (is_identity(&plan, &dec)) {
        out[0] = dec;
        memset(&dec, 0, sizeof dec);
    } else {
        rc = fmt_resize(rz, &dec, &plan, &out[0], &msg);
        if (rc)
            goto fail;
    }
    goto leave;
fail:
    snprintf(reason, rlen, "%s", fmt_reason(&msg, rc));
leave:
    if (rc)
        for (uint32_t v = 0; v < n; v++)
            fmt_image_free(&out[v]);
    fmt_image_free(&dec);
    free(buf);
    return rc;
}
