/* segm.c - instance masks and keypoints of a detection build (segm.h). */
#include "segm.h"

#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "target.h"
#include "util.h"

/* ---- reading ---- */

static int pool_add1(shc_annot *a, double v)
{
    return shc_annot_pool_add(a, &v, 1);
}

static int by_cat(const void *x, const void *y)
{
    int64_t p = ((const fmt_category *)x)->id, q = ((const fmt_category *)y)->id;
    return p < q ? -1 : p > q;
}

int shc_segm_coco_categories(const char *file, json_t *cats, shc_annot *a, fmt_msg *msg)
{
    a->cat_kp = calloc(a->ncats ? a->ncats : 1, 1);
    if (!a->cat_kp)
        return ENOMEM;
    json_t *first = NULL;
    for (size_t i = 0; i < json_array_size(cats); i++) {
        json_t *c = json_array_get(cats, i), *kp = json_object_get(c, "keypoints"),
               *sk = json_object_get(c, "skeleton");
        if (!kp || (json_is_array(kp) && json_array_size(kp) == 0))
            continue;
        fmt_category key = {.id = (int64_t)json_integer_value(json_object_get(c, "id"))};
        fmt_category *at = bsearch(&key, a->cats, a->ncats, sizeof key, by_cat);
        size_t k = json_is_array(kp) ? json_array_size(kp) : 0;
        int ok = at && k > 0 && k <= FMT_TARGET_MAX_KEYPOINTS;
        for (size_t j = 0; ok && j < k; j++)
            ok = json_is_string(json_array_get(kp, j));
        if (!ok)
            return fmt_fail(msg, EINVAL, "%s: categories[%zu] (id %" PRId64 "): 'keypoints' is "
                            "not a list of 1 to %u names", file, i, key.id,
                            FMT_TARGET_MAX_KEYPOINTS);
        a->cat_kp[at - a->cats] = 1;
        if (first) {
            if (!json_equal(first, kp))
                return fmt_fail(msg, EINVAL, "%s: categories[%zu] (id %" PRId64 "): its "
                                "'keypoints' differ from another category's (a dataset has one "
                                "list of keypoints)", file, i, key.id);
            continue;
        }
        first = kp;
        a->nkp = (uint32_t)k;
        a->ext |= FMT_TARGET_EXT_KEYPOINTS;
        if (!(a->kp_names = calloc(k, sizeof *a->kp_names)))
            return ENOMEM;
        for (size_t j = 0; j < k; j++)
            if (!(a->kp_names[j] = strdup(json_string_value(json_array_get(kp, j)))))
                return ENOMEM;
        size_t ns = json_is_array(sk) ? json_array_size(sk) : 0;
        if (sk && !json_is_array(sk))
            return fmt_fail(msg, EINVAL, "%s: categories[%zu]: 'skeleton' is not a list", file,
                            i);
        if (!(a->skeleton = calloc(2 * ns + 1, sizeof *a->skeleton)))
            return ENOMEM;
        for (size_t j = 0; j < ns; j++) {
            json_t *e = json_array_get(sk, j), *p = json_array_get(e, 0), *q = json_array_get(e, 1);
            if (json_array_size(e) != 2 || !json_is_integer(p) || !json_is_integer(q) ||
                json_integer_value(p) < 1 || json_integer_value(q) < 1 ||
                json_integer_value(p) > (json_int_t)k || json_integer_value(q) > (json_int_t)k)
                return fmt_fail(msg, EINVAL, "%s: categories[%zu]: skeleton[%zu] is not a pair "
                                "of keypoint numbers 1..%zu", file, i, j, k);
            a->skeleton[2 * j] = (uint32_t)json_integer_value(p);
            a->skeleton[2 * j + 1] = (uint32_t)json_integer_value(q);
        }
        a->nskeleton = (uint32_t)ns;
    }
    return 0;
}

/* Decode COCO's compressed RLE string (its counts) into out (cap entries); returns the number
 * of counts, or SIZE_MAX for a string that is malformed or has more than cap counts. */
static size_t coco_counts(const char *s, uint64_t *out, size_t cap)
{
    size_t m = 0, p = 0;
    while (s[p]) {
        int64_t x = 0;
        int k = 0, more = 1;
        while (more) {
            if (!s[p] || s[p] < 48 || s[p] > 48 + 63 || k > 6)
                return SIZE_MAX;
            int c = s[p] - 48;
            x |= (int64_t)(c & 0x1f) << 5 * k;
            more = c & 0x20;
            p++;
            k++;
            if (!more && (c & 0x10))
                x |= (int64_t)(~(uint64_t)0 << 5 * k);
        }
        if (m > 2)
            x += (int64_t)out[m - 2];
        if (x < 0 || m >= cap)
            return SIZE_MAX;
        out[m++] = (uint64_t)x;
    }
    return m;
}

static int in_image(double x, double y, uint32_t w, uint32_t h)
{
    double e = SHC_ANNOT_EDGE_EPS;
    return isfinite(x) && isfinite(y) && x >= -e && y >= -e && x <= w + e && y <= h + e;
}

static int coco_rle(const char *file, size_t i, int64_t id, json_t *sg, uint32_t w, uint32_t h,
                    shc_annot *a, shc_annot_box *b, fmt_msg *msg)
{
    json_t *size = json_object_get(sg, "size"), *counts = json_object_get(sg, "counts");
    if (!json_is_array(size) || json_array_size(size) != 2 ||
        !json_is_integer(json_array_get(size, 0)) || !json_is_integer(json_array_get(size, 1)))
        return fmt_fail(msg, EINVAL, "%s: annotations[%zu] (id %" PRId64 "): RLE 'size' is not "
                        "[height, width]", file, i, id);
    json_int_t rh = json_integer_value(json_array_get(size, 0)),
               rw = json_integer_value(json_array_get(size, 1));
    if (rh != (json_int_t)h || rw != (json_int_t)w)
        return fmt_fail(msg, EINVAL, "%s: annotations[%zu] (id %" PRId64 "): RLE of size %"
                        JSON_INTEGER_FORMAT "x%" JSON_INTEGER_FORMAT " (height x width) for a %"
                        PRIu32 "x%" PRIu32 " image", file, i, id, rh, rw, h, w);
    size_t n;
    uint64_t *c;
    if (json_is_string(counts)) {
        size_t cap = json_string_length(counts) + 1;
        if (!(c = malloc(cap * sizeof *c)))
            return ENOMEM;
        n = coco_counts(json_string_value(counts), c, cap);
        if (n == SIZE_MAX) {
            free(c);
            return fmt_fail(msg, EINVAL, "%s: annotations[%zu] (id %" PRId64 "): RLE 'counts' "
                            "string is malformed", file, i, id);
        }
    } else if (json_is_array(counts)) {
        n = json_array_size(counts);
        if (!(c = malloc((n ? n : 1) * sizeof *c)))
            return ENOMEM;
        for (size_t k = 0; k < n; k++) {
            json_t *v = json_array_get(counts, k);
            if (!json_is_integer(v) || json_integer_value(v) < 0) {
                free(c);
                return fmt_fail(msg, EINVAL, "%s: annotations[%zu] (id %" PRId64 "): RLE "
                                "counts[%zu] is not a count", file, i, id, k);
            }
            c[k] = (uint64_t)json_integer_value(v);
        }
    } else {
        return fmt_fail(msg, EINVAL, "%s: annotations[%zu] (id %" PRId64 "): RLE 'counts' is "
                        "neither a string nor a list", file, i, id);
    }
    uint64_t sum = 0;
    for (size_t k = 0; k < n && sum <= (uint64_t)w * h; k++)
        sum += c[k];
    int rc = 0;
    if (sum != (uint64_t)w * h) {
        rc = fmt_fail(msg, EINVAL, "%s: annotations[%zu] (id %" PRId64 "): RLE counts add up "
                      "to %" PRIu64 " pixels, not %" PRIu32 "x%" PRIu32 " = %" PRIu64, file, i,
                      id, sum, h, w, (uint64_t)w * h);
    } else {
        b->seg_kind = SHC_SEG_RLE;
        b->seg_at = a->npool;
        rc = pool_add1(a, (double)n);
        for (size_t k = 0; rc == 0 && k < n; k++)
            rc = pool_add1(a, (double)c[k]);
        b->seg_len = a->npool - b->seg_at;
    }
    free(c);
    return rc;
}

int shc_segm_coco_annotation(const char *file, size_t i, json_t *an, uint32_t w, uint32_t h,
                             shc_annot *a, shc_annot_box *b, fmt_msg *msg)
{
    json_t *sg = json_object_get(an, "segmentation"), *kp = json_object_get(an, "keypoints"),
           *nk = json_object_get(an, "num_keypoints");
    int64_t id = b->id;
    int rc = 0;
    b->kp_at = SIZE_MAX;
    if (json_is_object(sg)) {
        if ((rc = coco_rle(file, i, id, sg, w, h, a, b, msg)))
            return rc;
        a->ext |= FMT_TARGET_EXT_MASKS;
    } else if (json_is_array(sg) && json_array_size(sg) > 0) {
        b->seg_kind = SHC_SEG_POLY;
        b->seg_at = a->npool;
        if ((rc = pool_add1(a, (double)json_array_size(sg))))
            return rc;
        for (size_t k = 0; k < json_array_size(sg); k++) {
            json_t *poly = json_array_get(sg, k);
            size_t m = json_is_array(poly) ? json_array_size(poly) : 0;
            if (m < 6 || m % 2)
                return fmt_fail(msg, EINVAL, "%s: annotations[%zu] (id %" PRId64 "): polygon %zu "
                                "has %s (%zu numbers; at least 3 points, x and y each)", file, i,
                                id, k, m % 2 ? "an odd number of coordinates"
                                : "fewer than 3 points", m);
            if ((rc = pool_add1(a, (double)(m / 2))))
                return rc;
            for (size_t j = 0; j < m; j += 2) {
                json_t *x = json_array_get(poly, j), *y = json_array_get(poly, j + 1);
                double xy[2] = {json_number_value(x), json_number_value(y)};
                if (!json_is_number(x) || !json_is_number(y) || !in_image(xy[0], xy[1], w, h))
                    return fmt_fail(msg, EINVAL, "%s: annotations[%zu] (id %" PRId64 "): polygon "
                                    "%zu point %zu (%g, %g) is not inside the %" PRIu32 "x%"
                                    PRIu32 " image", file, i, id, k, j / 2, xy[0], xy[1], w, h);
                if ((rc = shc_annot_pool_add(a, xy, 2)))
                    return rc;
            }
        }
        b->seg_len = a->npool - b->seg_at;
        a->ext |= FMT_TARGET_EXT_MASKS;
    } else if (sg && !json_is_array(sg)) {
        return fmt_fail(msg, EINVAL, "%s: annotations[%zu] (id %" PRId64 "): 'segmentation' is "
                        "neither polygons nor RLE", file, i, id);
    }
    if (!kp)
        return 0;
    fmt_category key = {.id = b->category};
    fmt_category *cat = bsearch(&key, a->cats, a->ncats, sizeof key, by_cat);
    size_t want = cat && a->cat_kp && a->cat_kp[cat - a->cats] ? 3 * (size_t)a->nkp : 0;
    if (!json_is_array(kp) || json_array_size(kp) != want)
        return fmt_fail(msg, EINVAL, "%s: annotations[%zu] (id %" PRId64 "): %zu keypoint "
                        "values, category %" PRId64 " has %zu keypoints (x, y, v each)", file, i,
                        id, json_is_array(kp) ? json_array_size(kp) : 0, b->category, want / 3);
    if (!want)
        return 0;
    b->kp_at = a->npool;
    size_t labelled = 0;
    for (size_t j = 0; j < want; j += 3) {
        double v[3];
        for (int k = 0; k < 3; k++) {
            json_t *e = json_array_get(kp, j + k);
            v[k] = json_is_number(e) ? json_number_value(e) : NAN;
        }
        if (!(v[2] == 0 || v[2] == 1 || v[2] == 2) ||
            (v[2] > 0 && !in_image(v[0], v[1], w, h)))
            return fmt_fail(msg, EINVAL, "%s: annotations[%zu] (id %" PRId64 "): keypoint %zu "
                            "(%g, %g, v %g) is not inside the %" PRIu32 "x%" PRIu32 " image or "
                            "v is not 0, 1 or 2", file, i, id, j / 3, v[0], v[1], v[2], w, h);
        labelled += v[2] > 0;
        if ((rc = shc_annot_pool_add(a, v, 3)))
            return rc;
    }
    if (nk && (!json_is_integer(nk) || json_integer_value(nk) != (json_int_t)labelled))
        return fmt_fail(msg, EINVAL, "%s: annotations[%zu] (id %" PRId64 "): num_keypoints is "
                        "not the %zu keypoints labelled", file, i, id, labelled);
    return 0;
}

void shc_segm_hash(const shc_annot *a, void *state)
{
    XXH3_state_t *st = state;
    const char tag[] = "shardc-segm-1";
    XXH3_64bits_update(st, tag, sizeof tag);
    uint32_t v[3] = {a->ext, a->nkp, a->nskeleton};
    XXH3_64bits_update(st, v, sizeof v);
    for (uint32_t k = 0; k < a->nkp; k++)
        shc_hash_str(st, a->kp_names[k]);
    if (a->nskeleton)
        XXH3_64bits_update(st, a->skeleton, 2 * sizeof *a->skeleton * a->nskeleton);
    for (size_t k = 0; k < a->nboxes; k++) {
        const shc_annot_box *b = &a->boxes[k];
        uint64_t f[4] = {b->seg_kind, b->seg_at, b->seg_len, b->kp_at};
        XXH3_64bits_update(st, f, sizeof f);
    }
    if (a->npool)
        XXH3_64bits_update(st, a->pool, a->npool * sizeof *a->pool);
}

/* ---- rasterising and moving ---- */

static int by_double(const void *x, const void *y)
{
    double p = *(const double *)x, q = *(const double *)y;
    return p < q ? -1 : p > q;
}

/* Rasterise one polygon (n points, xy interleaved, in pixels) into mask (w x h, OR-ed with 1).
 * xs: scratch of at least n doubles. */
static void fill_polygon(const double *xy, size_t n, uint32_t w, uint32_t h, uint8_t *mask,
                         double *xs)
{
    for (uint32_t j = 0; j < h; j++) {
        double yc = j + 0.5;
        size_t m = 0;
        for (size_t k = 0; k < n; k++) {
            double x0 = xy[2 * k], y0 = xy[2 * k + 1];
            double x1 = xy[2 * ((k + 1) % n)], y1 = xy[2 * ((k + 1) % n) + 1];
            if ((y0 <= yc) != (y1 <= yc))
                xs[m++] = x0 + (yc - y0) * (x1 - x0) / (y1 - y0);
        }
        qsort(xs, m, sizeof *xs, by_double);
        uint8_t *row = mask + (size_t)j * w;
        for (size_t k = 0; k + 1 < m; k += 2) {
            /* pixels i with xs[k] <= i + 0.5 < xs[k + 1] */
            double lo = ceil(xs[k] - 0.5), hi = ceil(xs[k + 1] - 0.5);
            if (lo < 0)
                lo = 0;
            if (hi > w)
                hi = w;
            for (double i = lo; i < hi; i++)
                row[(size_t)i] = 1;
        }
    }
}

static int grow(void *pp, size_t *cap, size_t need, size_t elem)
{
    if (*cap >= need)
        return 0;
    void *p = realloc(*(void **)pp, need * elem);
    if (!p)
        return ENOMEM;
    *(void **)pp = p;
    *cap = need;
    return 0;
}

/* The source-sized mask of b into s->src (src_w x src_h, 0/1). */
static int source_mask(const shc_annot *a, const shc_annot_box *b, uint32_t w, uint32_t h,
                       const double box[4], shc_segm_scratch *s)
{
    size_t npix = (size_t)w * h;
    if (grow(&s->src, &s->src_cap, npix ? npix : 1, 1))
        return ENOMEM;
    memset(s->src, 0, npix);
    const double *p = a->pool + b->seg_at;
    if (b->seg_kind == SHC_SEG_POLY || b->seg_kind == SHC_SEG_NPOLY) {
        size_t npoly = b->seg_kind == SHC_SEG_POLY ? (size_t)*p++ : 1;
        for (size_t k = 0; k < npoly; k++) {
            size_t n = (size_t)*p++;
            if (grow(&s->xs, &s->xs_cap, n + 2 * n + 1, sizeof *s->xs))
                return ENOMEM;
            double *xy = s->xs + n;
            for (size_t j = 0; j < n; j++) {
                xy[2 * j] = b->seg_kind == SHC_SEG_NPOLY ? p[2 * j] * w : p[2 * j];
                xy[2 * j + 1] = b->seg_kind == SHC_SEG_NPOLY ? p[2 * j + 1] * h : p[2 * j + 1];
            }
            fill_polygon(xy, n, w, h, s->src, s->xs);
            p += 2 * n;
        }
    } else if (b->seg_kind == SHC_SEG_RLE) {
        size_t n = (size_t)*p++;
        uint64_t at = 0;
        for (size_t k = 0; k < n; k++) {
            uint64_t c = (uint64_t)p[k];
            if (k % 2)
                for (uint64_t q = at; q < at + c; q++)   /* column-major */
                    s->src[(size_t)(q % h) * w + (size_t)(q / h)] = 1;
            at += c;
        }
    } else {
        /* the box's pixels: centres inside it */
        double lo_x = ceil(box[0] - 0.5), hi_x = ceil(box[2] - 0.5);
        double lo_y = ceil(box[1] - 0.5), hi_y = ceil(box[3] - 0.5);
        for (double y = lo_y < 0 ? 0 : lo_y; y < hi_y && y < h; y++)
            for (double x = lo_x < 0 ? 0 : lo_x; x < hi_x && x < w; x++)
                s->src[(size_t)y * w + (size_t)x] = 1;
    }
    return 0;
}

int shc_segm_mask(const shc_annot *a, const shc_annot_box *b, uint32_t src_w, uint32_t src_h,
                  const double box[4], const fmt_geom_plan *p, shc_segm_scratch *s,
                  uint8_t **runs, size_t *len, size_t *cap, int *empty)
{
    if (source_mask(a, b, src_w, src_h, box, s))
        return ENOMEM;
    size_t npix = (size_t)p->out_w * p->out_h;
    if (grow(&s->dst, &s->dst_cap, npix ? npix : 1, 1))
        return ENOMEM;
    memset(s->dst, 0, npix);
    int any = 0;
    for (uint32_t y = 0; y < p->dst_h; y++) {
        uint32_t sy = fmt_target_nearest(y + p->win_y, src_h, p->rs_h);
        const uint8_t *srow = s->src + (size_t)sy * src_w;
        uint8_t *drow = s->dst + (size_t)(y + p->dst_y) * p->out_w + p->dst_x;
        for (uint32_t x = 0; x < p->dst_w; x++) {
            drow[x] = srow[fmt_target_nearest(x + p->win_x, src_w, p->rs_w)];
            any |= drow[x];
        }
    }
    *empty = !any;
    if (grow(runs, cap, *len + fmt_mask_encode_bound(npix), 1))
        return ENOMEM;
    *len += fmt_mask_encode(s->dst, npix, *runs + *len);
    return 0;
}

void shc_segm_keypoints(const shc_annot *a, const shc_annot_box *b, uint32_t src_w,
                        uint32_t src_h, const fmt_geom_plan *p, float *out)
{
    double sx = (double)p->rs_w / src_w, sy = (double)p->rs_h / src_h;
    double ox = (double)p->dst_x - p->win_x, oy = (double)p->dst_y - p->win_y;
    double lx = p->dst_x, hx = (double)p->dst_x + p->dst_w;
    double ly = p->dst_y, hy = (double)p->dst_y + p->dst_h;
    for (uint32_t k = 0; k < a->nkp; k++) {
        float *o = out + 3 * (size_t)k;
        o[0] = o[1] = o[2] = 0;
        if (b->kp_at == SIZE_MAX)
            continue;
        const double *v = a->pool + b->kp_at + 3 * (size_t)k;
        double x = v[0], y = v[1];
        if (a->kind == SHC_ANNOT_YOLO) {        /* normalised */
            x *= src_w;
            y *= src_h;
        }
        x = x * sx + ox;
        y = y * sy + oy;
        if (v[2] == 0 || !(x >= lx && x <= hx && y >= ly && y <= hy))
            continue;
        o[0] = (float)x;
        o[1] = (float)y;
        o[2] = (float)v[2];
    }
}

void shc_segm_scratch_free(shc_segm_scratch *s)
{
    free(s->src);
    free(s->dst);
    free(s->xs);
    memset(s, 0, sizeof *s);
}
