/* annot.c - the annotation table of a detection build and the target records made from it. */
#include "annot.h"

#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "segm.h"
#include "target.h"

int shc_annot_load(const shc_annot_opts *o, shc_annot *a, fmt_inputs *in, fmt_msg *msg)
{
    memset(a, 0, sizeof *a);
    memset(in, 0, sizeof *in);
    int rc = o->coco ? shc_coco_load(o, a, in, msg) : o->masks ? shc_segmap_load(o, a, in, msg)
             : shc_yolo_load(o, a, in, msg);
    if (rc) {
        shc_annot_free(a);
        fmt_inputs_free(in);
        return rc;
    }
    shc_annot_finish_hash(a);
    return 0;
}

void shc_annot_free(shc_annot *a)
{
    for (size_t i = 0; i < a->nimages; i++) {
        free(a->images[i].where);
        free(a->images[i].map);
    }
    for (size_t i = 0; i < a->ncats; i++)
        free(a->cats[i].name);
    for (uint32_t k = 0; a->kp_names && k < a->nkp; k++)
        free(a->kp_names[k]);
    free(a->kp_names);
    free(a->skeleton);
    free(a->cat_kp);
    free(a->pool);
    free(a->images);
    free(a->boxes);
    free(a->cats);
    memset(a, 0, sizeof *a);
}

int shc_annot_add_image(shc_annot *a, int64_t image_id, uint32_t w, uint32_t h, char *where)
{
    if (!where)
        return ENOMEM;
    shc_annot_image *p = realloc(a->images, (a->nimages + 1) * sizeof *p);
    if (!p) {
        free(where);
        return ENOMEM;
    }
    a->images = p;
    p[a->nimages++] = (shc_annot_image){.image_id = image_id, .width = w, .height = h,
                                        .first = a->nboxes, .count = 0, .where = where};
    return 0;
}

int shc_annot_add_box(shc_annot *a, const shc_annot_box *b)
{
    if (a->nboxes == 0 || (a->nboxes >= 16 && (a->nboxes & (a->nboxes - 1)) == 0)) {
        size_t cap = a->nboxes ? 2 * a->nboxes : 16;
        shc_annot_box *p = realloc(a->boxes, cap * sizeof *p);
        if (!p)
            return ENOMEM;
        a->boxes = p;
    }
    a->boxes[a->nboxes++] = *b;
    a->images[a->nimages - 1].count++;
    return 0;
}

int shc_annot_pool_add(shc_annot *a, const double *v, size_t n)
{
    if (a->npool + n > a->cappool) {
        size_t cap = a->cappool ? a->cappool : 256;
        while (cap < a->npool + n)
            cap *= 2;
        double *p = realloc(a->pool, cap * sizeof *p);
        if (!p)
            return ENOMEM;
        a->pool = p;
        a->cappool = cap;
    }
    memcpy(a->pool + a->npool, v, n * sizeof *v);
    a->npool += n;
    return 0;
}

void shc_annot_finish_hash(shc_annot *a)
{
    XXH3_state_t *st = XXH3_createState();
    if (!st) {
        a->hash = 1;
        return;
    }
    XXH3_64bits_reset(st);
    const char tag[] = "shardc-targets-1";
    XXH3_64bits_update(st, tag, sizeof tag);
    int64_t kind = a->kind;
    XXH3_64bits_update(st, &kind, sizeof kind);
    for (size_t i = 0; i < a->ncats; i++) {
        XXH3_64bits_update(st, &a->cats[i].id, sizeof a->cats[i].id);
        XXH3_64bits_update(st, a->cats[i].name, strlen(a->cats[i].name) + 1);
    }
    for (size_t i = 0; i < a->nimages; i++) {
        const shc_annot_image *im = &a->images[i];
        int64_t v[4] = {im->image_id, im->width, im->height, (int64_t)im->count};
        XXH3_64bits_update(st, v, sizeof v);
        for (size_t k = im->first; k < im->first + im->count; k++) {
            const shc_annot_box *b = &a->boxes[k];
            XXH3_64bits_update(st, &b->id, sizeof b->id);
            XXH3_64bits_update(st, b->v, sizeof b->v);
            XXH3_64bits_update(st, &b->category, sizeof b->category);
            XXH3_64bits_update(st, &b->area, sizeof b->area);
            XXH3_64bits_update(st, &b->iscrowd, 1);
        }
    }
    if (a->ext)
        shc_segm_hash(a, st);
    if (a->kind == SHC_ANNOT_MAPS) {
        XXH3_64bits_update(st, &a->ignore_index, sizeof a->ignore_index);
        for (size_t i = 0; i < a->nimages; i++)
            XXH3_64bits_update(st, a->images[i].map, strlen(a->images[i].map) + 1);
    }
    a->hash = XXH3_64bits_digest(st);
    if (a->hash == 0)
        a->hash = 1;                /* 0 means "no targets" to the fingerprint */
    XXH3_freeState(st);
}

uint32_t shc_annot_record_bytes(const shc_annot *a, size_t pos)
{
    size_t n = a->images[pos].count;
    uint32_t base = fmt_target_size(n > FMT_TARGET_MAX_BOXES ? FMT_TARGET_MAX_BOXES + 1
                                                             : (uint32_t)n);
    if (!a->ext || !base)
        return base;
    /* the extension's fixed part; the runs depend on the geometry (not counted) */
    uint64_t e = FMT_TARGET_EXT_HEADER + ((12u * (uint64_t)n * a->nkp + 7) & ~7ull) +
                 (a->ext & FMT_TARGET_EXT_MASKS ? 4u * ((uint64_t)n + 2) : 0);
    return base + e > UINT32_MAX ? UINT32_MAX : (uint32_t)(base + e);
}

/* Box b of an image of w x h in source pixels (x1, y1, x2, y2), checked and clamped. 0, or
 * FMT_ECORRUPT with why saying what is wrong with it. */
static int source_box(const shc_annot *a, const shc_annot_image *im, const shc_annot_box *b,
                      uint32_t w, uint32_t h, double out[4], fmt_msg *why)
{
    const char *unit = a->kind == SHC_ANNOT_COCO ? "annotation id" : "line";
    double x1, y1, bw, bh;
    if (a->kind == SHC_ANNOT_COCO) {
        x1 = b->v[0];
        y1 = b->v[1];
        bw = b->v[2];
        bh = b->v[3];
    } else {
        bw = b->v[2] * w;
        bh = b->v[3] * h;
        x1 = b->v[0] * w - bw / 2;
        y1 = b->v[1] * h - bh / 2;
    }
    if (!(bw > 0) || !(bh > 0))
        return fmt_fail(why, FMT_ECORRUPT, "%s: %s %" PRId64 ": box of non-positive size "
                        "(%g x %g pixels)", im->where, unit, b->id, bw, bh);
    double x2 = x1 + bw, y2 = y1 + bh, in[4] = {x1, y1, x2, y2};
    if (!shc_annot_clamp_box(in, w, h, out))
        return fmt_fail(why, FMT_ECORRUPT, "%s: %s %" PRId64 ": box (%g, %g, %g, %g) outside "
                        "the %" PRIu32 "x%" PRIu32 " image", im->where, unit, b->id, x1, y1, x2,
                        y2, w, h);
    return 0;
}

int shc_annot_clamp_box(const double b[4], uint32_t w, uint32_t h, double out[4])
{
    double e = SHC_ANNOT_EDGE_EPS;
    if (b[0] < -e || b[1] < -e || b[2] > w + e || b[3] > h + e)
        return 0;
    out[0] = b[0] < 0 ? 0 : b[0];
    out[1] = b[1] < 0 ? 0 : b[1];
    out[2] = b[2] > w ? w : b[2];
    out[3] = b[3] > h ? h : b[3];
    return 1;
}

int shc_annot_encode(const fmt_target *t, const char *where, uint8_t **buf, size_t *cap,
                     uint32_t *len, fmt_msg *why)
{
    uint32_t size = fmt_target_record_size(t);
    if (!size)
        return fmt_fail(why, FMT_ECORRUPT, "%s: its target record would exceed 4 GiB", where);
    if (*cap < size) {
        uint8_t *nb = realloc(*buf, size);
        if (!nb)
            return ENOMEM;
        *buf = nb;
        *cap = size;
    }
    *len = fmt_target_encode(t, *buf, *cap);
    return 0;
}

int shc_annot_target(const shc_annot *a, size_t pos, uint32_t src_w, uint32_t src_h,
                     const fmt_geom_plan *p, uint8_t **buf, size_t *cap, uint32_t *len,
                     uint32_t *dropped, fmt_msg *why)
{
    const shc_annot_image *im = &a->images[pos];
    *len = 0;
    *dropped = 0;
    if (a->kind == SHC_ANNOT_MAPS)
        return shc_segmap_target(a, pos, src_w, src_h, p, buf, cap, len, why);
    if (im->count > FMT_TARGET_MAX_BOXES)
        return fmt_fail(why, FMT_ECORRUPT, "%s: %zu boxes, more than the %u a sample holds",
                        im->where, im->count, FMT_TARGET_MAX_BOXES);
    if (a->kind == SHC_ANNOT_COCO && (im->width != src_w || im->height != src_h))
        return fmt_fail(why, FMT_ECORRUPT, "%s: annotated as %" PRIu32 "x%" PRIu32 ", the image "
                        "is %" PRIu32 "x%" PRIu32, im->where, im->width, im->height, src_w, src_h);
    uint32_t n = (uint32_t)im->count, kept = 0;
    /* one allocation for the decoded arrays: boxes, labels, areas, flags */
    size_t need = (size_t)n * (16 + 8 + 4 + 1) + 8;
    uint8_t *tmp = malloc(need);
    /* the extension: keypoints, mask offsets, runs */
    float *kps = a->ext & FMT_TARGET_EXT_KEYPOINTS
                 ? malloc(((size_t)n * a->nkp * 3 + 1) * sizeof *kps) : NULL;
    uint32_t *moff = a->ext & FMT_TARGET_EXT_MASKS ? malloc(((size_t)n + 1) * sizeof *moff) : NULL;
    uint8_t *runs = NULL;
    size_t nruns = 0, capruns = 0;
    shc_segm_scratch ss = {0};
    if (!tmp || (a->ext & FMT_TARGET_EXT_KEYPOINTS && !kps) ||
        (a->ext & FMT_TARGET_EXT_MASKS && !moff)) {
        free(tmp);
        free(kps);
        free(moff);
        return ENOMEM;
    }
    float *boxes = (float *)(void *)tmp;
    int64_t *labels = (int64_t *)(void *)(tmp + 16 * (size_t)n);
    float *area = (float *)(void *)(tmp + 24 * (size_t)n);
    uint8_t *crowd = tmp + 28 * (size_t)n;
    int rc = 0;
    for (uint32_t i = 0; i < n; i++) {
        const shc_annot_box *b = &a->boxes[im->first + i];
        double src[4], scale;
        if ((rc = source_box(a, im, b, src_w, src_h, src, why)) != 0)
            goto leave;
        if (!fmt_target_map_box(p, src_w, src_h, src, boxes + 4 * (size_t)kept, &scale)) {
            (*dropped)++;
            continue;
        }
        if (a->ext & FMT_TARGET_EXT_MASKS) {
            /* an instance whose mask vanishes goes with its box */
            size_t before = nruns;
            int empty;
            if ((rc = shc_segm_mask(a, b, src_w, src_h, src, p, &ss, &runs, &nruns, &capruns,
                                    &empty)) != 0)
                goto leave;
            if (empty || nruns > UINT32_MAX) {
                nruns = before;
                (*dropped)++;
                continue;
            }
            moff[kept] = (uint32_t)before;
            moff[kept + 1] = (uint32_t)nruns;
        }
        if (kps)
            shc_segm_keypoints(a, b, src_w, src_h, p, kps + 3 * (size_t)a->nkp * kept);
        double ar = a->kind == SHC_ANNOT_COCO ? b->area : (src[2] - src[0]) * (src[3] - src[1]);
        if (!(ar * scale <= FLT_MAX)) {
            /* a record holding inf is one every reader refuses */
            rc = fmt_fail(why, FMT_ECORRUPT, "%s: annotation id %" PRId64 ": area %g, %g once "
                          "scaled to the sample, is beyond a float's range", im->where, b->id, ar,
                          ar * scale);
            goto leave;
        }
        labels[kept] = b->category;
        area[kept] = (float)(ar * scale);
        crowd[kept] = b->iscrowd;
        kept++;
    }
    fmt_target t = {.count = kept, .image_id = im->image_id, .orig_width = src_w,
                    .orig_height = src_h, .dropped = *dropped, .boxes = boxes, .labels = labels,
                    .area = area, .iscrowd = crowd, .ext = a->ext, .num_keypoints = a->nkp,
                    .map_width = p->out_w, .map_height = p->out_h, .keypoints = kps,
                    .mask_offsets = moff, .mask_runs = runs};
    if (moff) {
        moff[0] = 0;
        moff[kept] = (uint32_t)nruns;
    }
    rc = shc_annot_encode(&t, im->where, buf, cap, len, why);
leave:
    free(tmp);
    free(kps);
    free(moff);
    free(runs);
    shc_segm_scratch_free(&ss);
    return rc;
}
