/* test_detect_read.c - detection targets through libshardread: every delivered box, for every
 * read-time geometric op (center crop, zero pad, random crop, RandomResizedCrop + resize, the
 * flip, the rotation, affine and auto_augment warps, and their combinations with colour ops and
 * output conversions), against an independent computation from the stored boxes (read through
 * the formats layer) and the parameters the reader reports, to 1e-4 pixel; drop counts,
 * min_box_area_fraction, threads 1 vs 4, resumption, the single-sample API, refused options,
 * and classification datasets left as they were.
 *
 * Fixtures are datasets built at run time by the shardc binaries of the same build directory
 * (shardc-mksample --coco draws shapes and writes their boxes). */
#include "dataset.h"
#include "shardread.h"
#include "progs.h"
#include "testutil.h"

#include <check.h>
#include <ftw.h>
#include <inttypes.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_var[1100];                /* detection, samples of many sizes (short side 40) */
static char g_fixed[1100];              /* detection, every sample 48x40 (letterboxed) */
static char g_cls[1100];                /* classification, many sizes */
#define N_IMAGES 40
#define TOL 1e-4

/* ---- fixtures ---- */

static int build_fixtures(void)
{
    if (tu_progs_root() != 0)
        return -1;
    char cmd[4096], args[128];
    snprintf(args, sizeof args, "--per-class %d --min-side 40 --max-side 120 --seed 7", N_IMAGES);
    if (tu_mksample_coco(args) != 0 ||
        tu_mksample("cimg", "--classes 3 --per-class 6 --min-side 30 --max-side 90") != 0)
        return -1;
    snprintf(g_var, sizeof g_var, "%s/var", g_root);
    snprintf(g_fixed, sizeof g_fixed, "%s/fixed", g_root);
    snprintf(g_cls, sizeof g_cls, "%s/cls", g_root);
    const char *sets[][3] = {
        {g_var, "img", "--short-side 40 --max-side 64"},
        {g_fixed, "img", "--size 48x40 --fit pad"},
        {g_cls, "cimg", "--short-side 40 --max-side 64"},
    };
    for (size_t i = 0; i < 3; i++) {
        char coco[1200] = "";
        if (i < 2)
            snprintf(coco, sizeof coco, "--coco '%s/inst.json'", g_root);
        snprintf(cmd, sizeof cmd, "'%s/shardc' build '%s/%s' %s -o '%s' %s --shard-samples 7 "
                 "-j 2 --no-progress", g_bin, g_root, sets[i][1], coco, sets[i][0], sets[i][2]);
        if (run_quiet(cmd) != 0) {
            fprintf(stderr, "test_detect_read: failed: %s\n", cmd);
            return -1;
        }
    }
    return 0;
}

/* ---- the reference: the documented arithmetic, written apart from the reader's ---- */

typedef struct {
    uint32_t count, dropped;
    float boxes[4 * 4096];
    int64_t labels[4096];
    float area[4096];
    uint8_t crowd[4096];
} ref_target;

/* One axis of the geometry: the position of stored coordinate v in the output. rrc: the box
 * [off, off + len) of the stored image is resized onto [0, out]; otherwise the used extent sits
 * at (out - len) / 2 (a pad: len = the stored extent < out, off = 0) or at 0 (a crop: len =
 * out). */
static double ref_axis(double v, uint32_t off, uint32_t len, uint32_t out, int rrc)
{
    if (rrc)
        return (v - off) / len * out;
    uint32_t at = len < out ? (out - len) / 2 : 0;
    return v - off + at;
}

static double clip(double v, double hi)
{
    return v < 0 ? 0 : v > hi ? hi : v;
}

/* A warp's forward map x' = m[0] x + m[1] y + m[2], y' = m[3] x + m[4] y + m[5], in the closed
 * forms shardread.h documents (written apart from the reader's, which inverts Pillow's
 * matrices). */
typedef struct {
    double m[6];
} ref_warp;

static const double ref_pi = 3.14159265358979323846;

/* torchvision's forward affine map (its inverted=False matrix): x' = cx + tx + s (A (x - cx) +
 * B (y - cy)), y' = cy + ty + s (C (x - cx) + D (y - cy)) */
static ref_warp ref_affine(double cx, double cy, double angle, double tx, double ty, double s,
                           double shx, double shy)
{
    double a = angle * ref_pi / 180, sx = shx * ref_pi / 180, sy = shy * ref_pi / 180;
    double A = cos(a - sy) / cos(sy), B = -cos(a - sy) * tan(sx) / cos(sy) - sin(a);
    double C = sin(a - sy) / cos(sy), D = -sin(a - sy) * tan(sx) / cos(sy) + cos(a);
    ref_warp w = {{s * A, s * B, cx + tx - s * (A * cx + B * cy), s * C, s * D,
                   cy + ty - s * (C * cx + D * cy)}};
    return w;
}

/* Pillow's rotate, counter-clockwise about (W / 2, H / 2) */
static ref_warp ref_rotate(double angle, double W, double H)
{
    double a = angle * ref_pi / 180, c = cos(a), s = sin(a), cx = W / 2, cy = H / 2;
    ref_warp w = {{c, s, cx - c * cx - s * cy, -s, c, cy + s * cx - c * cy}};
    return w;
}

/* The sample's warps in order: rotation, affine, the automatic augmentations' geometric ops. */
static int ref_warps(const shr_params *p, double W, double H, ref_warp *w)
{
    int n = 0;
    if (p->rotate)
        w[n++] = ref_rotate(p->rotate_angle, W, H);
    if (p->affine)
        w[n++] = ref_affine(W / 2, H / 2, p->affine_angle, p->affine_tx, p->affine_ty,
                            p->affine_scale, p->affine_shear_x, p->affine_shear_y);
    for (uint32_t k = 0; k < p->aa_ops; k++) {
        double m = p->aa_magnitude[k];
        ref_warp v = {{1, 0, 0, 0, 1, 0}};
        switch (p->aa_op[k]) {
        case SHR_AA_SHEAR_X:
            v.m[1] = -m;            /* x' = x - m y */
            break;
        case SHR_AA_SHEAR_Y:
            v.m[3] = -m;            /* y' = y - m x */
            break;
        case SHR_AA_TRANSLATE_X:
            v.m[2] = trunc(m);
            break;
        case SHR_AA_TRANSLATE_Y:
            v.m[5] = trunc(m);
            break;
        case SHR_AA_ROTATE:
            v = ref_rotate(m, W, H);
            break;
        default:
            continue;
        }
        w[n++] = v;
    }
    return n;
}

/* the box enclosing b's corners through w */
static void ref_enclose(const ref_warp *w, double b[4])
{
    double xs[4] = {b[0], b[2], b[2], b[0]}, ys[4] = {b[1], b[1], b[3], b[3]};
    double x[4], y[4];
    for (int k = 0; k < 4; k++) {
        x[k] = w->m[0] * xs[k] + w->m[1] * ys[k] + w->m[2];
        y[k] = w->m[3] * xs[k] + w->m[4] * ys[k] + w->m[5];
    }
    b[0] = fmin(fmin(x[0], x[1]), fmin(x[2], x[3]));
    b[2] = fmax(fmax(x[0], x[1]), fmax(x[2], x[3]));
    b[1] = fmin(fmin(y[0], y[1]), fmin(y[2], y[3]));
    b[3] = fmax(fmax(y[0], y[1]), fmax(y[2], y[3]));
}

static void ref_move(const fmt_target *t, const shr_params *p, uint32_t W, uint32_t H, int rrc,
                     double min_fraction, ref_target *out)
{
    ck_assert_uint_le(t->count, 4096);
    memset(out, 0, sizeof *out);
    double sx = rrc ? (double)W / p->w : 1, sy = rrc ? (double)H / p->h : 1;
    ref_warp warp[2 + SHR_AA_MAX_OPS];
    int nw = ref_warps(p, W, H, warp);
    for (int k = 0; k < nw; k++)     /* the area scales as |det| */
        sx *= fabs(warp[k].m[0] * warp[k].m[4] - warp[k].m[1] * warp[k].m[3]);
    for (uint32_t i = 0; i < t->count; i++) {
        const float *b = t->boxes + 4 * i;
        double x1 = ref_axis(b[0], p->x, p->w, W, rrc), x2 = ref_axis(b[2], p->x, p->w, W, rrc);
        double y1 = ref_axis(b[1], p->y, p->h, H, rrc), y2 = ref_axis(b[3], p->y, p->h, H, rrc);
        double cx1 = clip(x1, W), cx2 = clip(x2, W), cy1 = clip(y1, H), cy2 = clip(y2, H);
        if (p->flip) {
            double a = W - cx2, z = W - cx1;
            cx1 = a;
            cx2 = z;
            a = W - x2;
            x2 = W - x1;
            x1 = a;
        }
        /* the warps: the clipped box (c) and the whole one (u), the clipped one clipped again
         * after each, gone once it has no area */
        double c[4] = {cx1, cy1, cx2, cy2}, u[4] = {x1, y1, x2, y2};
        int alive = 1;
        for (int k = 0; k < nw && alive; k++) {
            alive = c[0] < c[2] && c[1] < c[3];
            ref_enclose(&warp[k], c);
            ref_enclose(&warp[k], u);
            c[0] = clip(c[0], W);
            c[2] = clip(c[2], W);
            c[1] = clip(c[1], H);
            c[3] = clip(c[3], H);
        }
        cx1 = c[0];
        cy1 = c[1];
        cx2 = c[2];
        cy2 = c[3];
        double full = (u[2] - u[0]) * (u[3] - u[1]);
        float f[4] = {(float)cx1, (float)cy1, (float)cx2, (float)cy2};
        int keep = alive && f[0] < f[2] && f[1] < f[3] &&
                   (cx2 - cx1) * (cy2 - cy1) >= min_fraction * full;
        if (!keep) {
            out->dropped++;
            continue;
        }
        memcpy(out->boxes + 4 * out->count, f, sizeof f);
        out->labels[out->count] = t->labels[i];
        out->area[out->count] = (float)(t->area[i] * sx * sy);
        out->crowd[out->count] = t->iscrowd[i];
        out->count++;
    }
}

/* What a run saw, for the tests' own assertions. */
typedef struct {
    uint64_t samples, boxes, dropped, flipped, cropped, padded;
} run_stats;

/* The parameters of a crop/pad run, as shardread.h documents them. */
static void check_place(const shr_options *o, const shr_params *p, uint32_t W, uint32_t H)
{
    uint32_t sw = p->src_w, sh = p->src_h;
    if (sw >= W) {
        ck_assert_uint_eq(p->w, W);
        if (o->random_crop)
            ck_assert_uint_le(p->x, sw - W);
        else
            ck_assert_uint_eq(p->x, (sw - W) / 2);
    } else {
        ck_assert_uint_eq(p->x, 0);
        ck_assert_uint_eq(p->w, sw);
    }
    if (sh >= H) {
        ck_assert_uint_eq(p->h, H);
        if (o->random_crop)
            ck_assert_uint_le(p->y, sh - H);
        else
            ck_assert_uint_eq(p->y, (sh - H) / 2);
    } else {
        ck_assert_uint_eq(p->y, 0);
        ck_assert_uint_eq(p->h, sh);
    }
}

/* Every sample of batch b against the reference, from the stored targets of ds. */
static void check_batch(const fmt_dataset *ds, const shr_options *o, const shr_batch *b,
                        run_stats *st)
{
    static ref_target want;
    ck_assert_ptr_nonnull(b->target_offsets);
    ck_assert_int_eq(b->target_offsets[0], 0);
    for (uint32_t i = 0; i < b->n; i++) {
        const shr_params *p = &b->params[i];
        fmt_target t;
        fmt_msg m = {{0}};
        ck_assert_int_eq(fmt_dataset_target(ds, (uint64_t)b->indices[i], &t, &m), 0);
        fmt_sample s;
        ck_assert_int_eq(fmt_dataset_get(ds, (uint64_t)b->indices[i], &s), 0);
        ck_assert_uint_eq(p->src_w, s.width);
        ck_assert_uint_eq(p->src_h, s.height);
        if (!o->rrc)
            check_place(o, p, b->width, b->height);
        ref_move(&t, p, b->width, b->height, o->rrc, o->min_box_area_fraction, &want);
        shr_target got;
        ck_assert_int_eq(shr_batch_target(b, i, &got), 0);
        ck_assert_uint_eq(got.count, want.count);
        ck_assert_uint_eq(got.dropped, want.dropped);
        ck_assert_uint_eq(got.count + got.dropped, t.count);
        ck_assert_int_eq(got.image_id, t.image_id);
        ck_assert_uint_eq(got.orig_width, t.orig_width);
        ck_assert_uint_eq(got.orig_height, t.orig_height);
        ck_assert_int_eq(b->target_offsets[i + 1] - b->target_offsets[i], got.count);
        ck_assert_ptr_eq(got.boxes, b->target_boxes + 4 * b->target_offsets[i]);
        ck_assert_ptr_nonnull(got.boxes);
        for (uint32_t k = 0; k < got.count; k++) {
            for (int c = 0; c < 4; c++)
                ck_assert_msg(fabs((double)got.boxes[4 * k + c] - want.boxes[4 * k + c]) <= TOL,
                              "sample %" PRId64 " box %u coord %d: %.6f, want %.6f (params x %u "
                              "y %u w %u h %u flip %u)", b->indices[i], k, c,
                              (double)got.boxes[4 * k + c], (double)want.boxes[4 * k + c], p->x,
                              p->y, p->w, p->h, p->flip);
            ck_assert(got.boxes[4 * k] >= 0 && got.boxes[4 * k] < got.boxes[4 * k + 2] &&
                      got.boxes[4 * k + 2] <= (float)b->width);
            ck_assert(got.boxes[4 * k + 1] >= 0 && got.boxes[4 * k + 1] < got.boxes[4 * k + 3] &&
                      got.boxes[4 * k + 3] <= (float)b->height);
            ck_assert_int_eq(got.labels[k], want.labels[k]);
            ck_assert_uint_eq(got.iscrowd[k], want.crowd[k]);
            ck_assert_msg(fabs((double)got.area[k] - want.area[k]) <=
                              1e-6 * fabs((double)want.area[k]) + 1e-6,
                          "area %g, want %g", (double)got.area[k], (double)want.area[k]);
        }
        st->samples++;
        st->boxes += got.count;
        st->dropped += got.dropped;
        st->flipped += p->flip;
        st->cropped += p->src_w > b->width || p->src_h > b->height;
        st->padded += p->src_w < b->width || p->src_h < b->height;
    }
}

/* Read `epochs` epochs of dir with o and check every batch; returns what it saw. */
static run_stats run(const char *dir, const shr_options *o, int epochs)
{
    fmt_dataset *ds;
    fmt_msg m = {{0}};
    ck_assert_int_eq(fmt_dataset_open_ex(&ds, dir, FMT_ACCESS_MMAP, &m), 0);
    shr_reader *r = tu_reader_open(dir, o);
    shr_info info;
    shr_get_info(r, &info);
    ck_assert_int_eq(info.targets, 1);
    run_stats st = {0};
    for (int e = 0; e < epochs; e++) {
        const shr_batch *b;
        int rc;
        while ((rc = shr_next(r, &b)) == 0) {
            check_batch(ds, o, b, &st);
            shr_release(r, b);
        }
        ck_assert_int_eq(rc, SHR_EEND);
    }
    shr_close(r);
    fmt_dataset_close(ds);
    return st;
}

static void base_options(shr_options *o)
{
    shr_options_init(o);
    o->batch_size = 6;
    o->threads = 2;
    o->seed = 11;
    o->order = SHR_ORDER_RANDOM;
    o->pin = SHR_PIN_OFF;
}

/* ---- tests ---- */

/* Center crop where larger, zero pad where smaller (48x48 crops the long side of a 40 x 40..64
 * sample and pads its short side; 24x24 crops both and drops boxes; 80x80 only pads). */
START_TEST(test_center_crop_pad)
{
    shr_options o;
    base_options(&o);
    o.width = o.height = 48;
    run_stats st = run(g_var, &o, 1);
    ck_assert_uint_eq(st.samples, N_IMAGES);
    ck_assert_uint_gt(st.cropped, 0);
    ck_assert_uint_gt(st.padded, 0);
    o.width = o.height = 24;
    st = run(g_var, &o, 1);
    ck_assert_uint_gt(st.dropped, 0);
    ck_assert_uint_gt(st.boxes, 0);
    o.width = 80;
    o.height = 72;
    st = run(g_var, &o, 1);
    ck_assert_uint_eq(st.dropped, 0);
    ck_assert_uint_eq(st.cropped, 0);
}
END_TEST

START_TEST(test_random_crop)
{
    shr_options o;
    base_options(&o);
    o.width = 32;
    o.height = 28;
    o.random_crop = 1;
    run_stats st = run(g_var, &o, 2);
    ck_assert_uint_gt(st.dropped, 0);
    ck_assert_uint_gt(st.boxes, 0);
}
END_TEST

START_TEST(test_rrc)
{
    shr_options o;
    base_options(&o);
    o.width = 40;
    o.height = 32;
    o.rrc = 1;
    run_stats st = run(g_var, &o, 2);
    ck_assert_uint_gt(st.dropped, 0);
    ck_assert_uint_gt(st.boxes, 0);
    /* the fixed-size dataset too, a whole-image scale range (boxes all kept: a pure resize) */
    o.rrc_scale[0] = o.rrc_scale[1] = 1;
    o.rrc_ratio[0] = o.rrc_ratio[1] = 48.0 / 40;
    st = run(g_fixed, &o, 1);
    ck_assert_uint_eq(st.dropped, 0);
}
END_TEST

/* The flip alone, at the dataset's own size, in every access mode (DIRECT: the batch-wide
 * engine). */
START_TEST(test_flip)
{
    shr_options o;
    base_options(&o);
    o.flip = 1;
    const shr_access modes[] = {SHR_ACCESS_MMAP, SHR_ACCESS_PREAD, SHR_ACCESS_DIRECT};
    for (size_t i = 0; i < 3; i++) {
        o.access = modes[i];
        run_stats st = run(g_fixed, &o, 2);
        ck_assert_uint_gt(st.flipped, 0);
        ck_assert_uint_lt(st.flipped, st.samples);
        ck_assert_uint_eq(st.dropped, 0);
    }
}
END_TEST

/* Combinations: crop/pad and RRC with the flip, colour ops, erasing, float outputs; and
 * min_box_area_fraction. */
START_TEST(test_combinations)
{
    shr_options o;
    base_options(&o);
    o.flip = 1;
    o.width = 36;
    o.height = 44;
    o.random_crop = 1;
    o.dtype = SHR_DTYPE_F32;
    o.layout = SHR_LAYOUT_NCHW;
    run_stats st = run(g_var, &o, 1);
    ck_assert_uint_gt(st.flipped, 0);
    base_options(&o);
    o.flip = 1;
    o.flip_p = 1;
    o.rrc = 1;
    o.width = o.height = 32;
    o.jitter_brightness[0] = 0.6;
    o.jitter_brightness[1] = 1.4;
    o.grayscale_p = 0.3;
    o.erase_p = 0.5;
    o.dtype = SHR_DTYPE_F16;
    st = run(g_var, &o, 2);
    ck_assert_uint_eq(st.flipped, st.samples);
    run_stats all = st;
    o.min_box_area_fraction = 0.5;
    st = run(g_var, &o, 2);
    ck_assert_uint_eq(st.samples, all.samples);
    ck_assert_uint_gt(st.dropped, all.dropped);
    o.min_box_area_fraction = 1;
    o.rrc = 0;
    o.random_crop = 1;
    st = run(g_var, &o, 1);
    ck_assert_uint_gt(st.dropped, 0);
}
END_TEST

/* Every batch's targets, whole, as bytes. */
typedef struct {
    size_t len, cap;
    uint8_t *p;
} bytes;

static void put(bytes *d, const void *p, size_t n)
{
    if (d->len + n > d->cap) {
        d->cap = (d->len + n) * 2;
        d->p = realloc(d->p, d->cap);
        ck_assert_ptr_nonnull(d->p);
    }
    memcpy(d->p + d->len, p, n);
    d->len += n;
}

static void put_batch(bytes *d, const shr_batch *b)
{
    int64_t nb = b->target_offsets[b->n];
    put(d, &b->n, sizeof b->n);
    put(d, b->indices, b->n * sizeof *b->indices);
    put(d, b->target_offsets, (b->n + 1) * sizeof *b->target_offsets);
    put(d, b->target_boxes, (size_t)nb * 4 * sizeof(float));
    put(d, b->target_labels, (size_t)nb * sizeof(int64_t));
    put(d, b->target_area, (size_t)nb * sizeof(float));
    put(d, b->target_iscrowd, (size_t)nb);
    put(d, b->target_image_ids, b->n * sizeof(int64_t));
    put(d, b->target_dropped, b->n * sizeof(uint32_t));
    put(d, b->target_orig_sizes, 2 * b->n * sizeof(uint32_t));
}

/* Batches from stream position (epoch, cursor) to the end of epoch `until`. */
static bytes read_all(const shr_options *o, uint64_t until)
{
    bytes d = {0};
    shr_reader *r = tu_reader_open(g_var, o);
    for (;;) {
        const shr_batch *b;
        int rc = shr_next(r, &b);
        if (rc == SHR_EEND) {
            if (shr_get_state(r).epoch > until)
                break;
            continue;
        }
        ck_assert_int_eq(rc, 0);
        put_batch(&d, b);
        shr_release(r, b);
    }
    shr_close(r);
    return d;
}

START_TEST(test_threads_resume)
{
    shr_options o;
    base_options(&o);
    o.flip = 1;
    o.rrc = 1;
    o.width = 40;
    o.height = 36;
    o.rotation = 1;                 /* and the warps */
    o.rotation_degrees[0] = -30;
    o.rotation_degrees[1] = 30;
    o.auto_augment = SHR_AUTO_AUGMENT_TRIVIAL_WIDE;
    o.threads = 1;
    bytes one = read_all(&o, 1);
    o.threads = 4;
    o.prefetch = 9;
    bytes four = read_all(&o, 1);
    ck_assert_uint_eq(one.len, four.len);
    ck_assert(memcmp(one.p, four.p, one.len) == 0);
    /* resume: skip the first three batches of epoch 1 by reading them, then open there */
    o.threads = 3;
    o.epoch = 1;
    o.cursor = 0;
    bytes e1 = read_all(&o, 1);
    o.cursor = 3;
    bytes tail = read_all(&o, 1);
    ck_assert_uint_lt(tail.len, e1.len);
    ck_assert(memcmp(e1.p + (e1.len - tail.len), tail.p, tail.len) == 0);
    ck_assert(memcmp(one.p + (one.len - e1.len), e1.p, e1.len) == 0);
    free(one.p);
    free(four.p);
    free(e1.p);
    free(tail.p);
}
END_TEST

/* The single-sample API hands back the stored records, unmoved. */
START_TEST(test_dataset_target)
{
    shr_dataset *d;
    ck_assert_int_eq(shr_dataset_open(&d, g_var, SHR_ACCESS_MMAP, tu_fresh()), 0);
    shr_dataset_info info;
    shr_dataset_get_info(d, &info);
    ck_assert_int_eq(info.targets, 1);
    fmt_dataset *ds;
    fmt_msg m = {{0}};
    ck_assert_int_eq(fmt_dataset_open_ex(&ds, g_var, FMT_ACCESS_MMAP, &m), 0);
    uint64_t boxes = 0;
    for (uint64_t i = 0; i < info.samples; i++) {
        shr_target t;
        fmt_target f;
        ck_assert_int_eq(shr_dataset_target(d, i, &t, tu_fresh()), 0);
        ck_assert_int_eq(fmt_dataset_target(ds, i, &f, &m), 0);
        ck_assert_uint_eq(t.count, f.count);
        ck_assert_uint_eq(t.dropped, f.dropped);
        ck_assert_int_eq(t.image_id, f.image_id);
        ck_assert_uint_eq(t.orig_width, f.orig_width);
        ck_assert_uint_eq(t.orig_height, f.orig_height);
        ck_assert(memcmp(t.boxes, f.boxes, 16 * (size_t)f.count) == 0);
        ck_assert(memcmp(t.labels, f.labels, 8 * (size_t)f.count) == 0);
        ck_assert(memcmp(t.area, f.area, 4 * (size_t)f.count) == 0);
        ck_assert(memcmp(t.iscrowd, f.iscrowd, f.count) == 0);
        boxes += t.count;
    }
    ck_assert_uint_gt(boxes, 0);
    /* the manifest's facts of the targets */
    const fmt_manifest *man = fmt_dataset_manifest(ds);
    shr_dataset_targets tg;
    shr_dataset_get_targets(d, &tg);
    ck_assert_uint_gt(man->ncategories, 0);
    ck_assert_uint_eq(tg.categories, man->ncategories);
    ck_assert_uint_eq(tg.record_version, man->target_ext ? 2 : 1);
    ck_assert_uint_eq(tg.num_keypoints, man->num_keypoints);
    ck_assert_uint_eq(tg.edges, man->nskeleton);
    shr_target t;
    ck_assert_int_eq(shr_dataset_target(d, info.samples, &t, tu_fresh()), SHR_EINVAL);
    ck_assert_ptr_nonnull(strstr(tu_msg.text, "out of range"));
    ck_assert_int_eq(shr_dataset_target(d, 0, NULL, tu_fresh()), SHR_EINVAL);
    ck_assert_int_eq(shr_dataset_target(NULL, 0, &t, tu_fresh()), SHR_EINVAL);
    fmt_dataset_close(ds);
    shr_dataset_close(d);
}
END_TEST

/* RandomRotation, RandomAffine and the automatic augmentations: the boxes follow the warps
 * (every box against the reference, crop/pad and RandomResizedCrop, mirrored or not), and the
 * same options still open a classification dataset. */
START_TEST(test_warps)
{
    shr_options o;
    for (int k = 0; k < 9; k++) {
        base_options(&o);
        o.width = o.height = 40;
        o.flip = 1;
        if (k == 0) {
            o.rotation = 1;
            o.rotation_degrees[0] = -40;
            o.rotation_degrees[1] = 40;
        } else if (k == 1) {
            o.rotation = 1;
            o.rotation_degrees[0] = o.rotation_degrees[1] = 90;   /* a quarter turn */
            o.width = 48;
            o.height = 32;
        } else if (k == 2) {
            o.affine = 1;
            o.affine_degrees[0] = -30;
            o.affine_degrees[1] = 30;
        } else if (k == 3) {
            o.affine = 1;
            o.affine_translate[0] = 0.3;
            o.affine_translate[1] = 0.2;
        } else if (k == 4) {
            o.affine = 1;
            o.affine_scale[0] = 0.6;
            o.affine_scale[1] = 1.4;
            o.rrc = 1;
        } else if (k == 5) {
            o.affine = 1;
            o.affine_shear[0] = -20;
            o.affine_shear[1] = 20;
            o.affine_shear[2] = -10;
            o.affine_shear[3] = 10;
        } else if (k == 6) {
            o.auto_augment = SHR_AUTO_AUGMENT_TRIVIAL_WIDE;
            o.rotation = 1;
            o.rotation_degrees[0] = -15;
            o.rotation_degrees[1] = 15;
            o.affine = 1;
            o.affine_degrees[0] = -10;
            o.affine_degrees[1] = 10;
            o.affine_translate[0] = o.affine_translate[1] = 0.1;
            o.affine_scale[0] = 0.8;
            o.affine_scale[1] = 1.2;
            o.affine_shear[0] = -5;
            o.affine_shear[1] = 5;
            o.min_box_area_fraction = 0.3;
        } else if (k == 7) {
            o.auto_augment = SHR_AUTO_AUGMENT_RAND;
            o.aa_num_ops = 3;
            o.rrc = 1;
        } else {
            o.auto_augment = SHR_AUTO_AUGMENT_IMAGENET;
            o.aug_interpolation = SHR_FILTER_BILINEAR;
            o.dtype = SHR_DTYPE_F32;
        }
        run_stats st = run(g_var, &o, 3);
        ck_assert_uint_eq(st.samples, 3 * N_IMAGES);
        ck_assert_uint_gt(st.boxes, 0);
        ck_assert_uint_gt(st.flipped, 0);
        if (k <= 3 || k == 5)
            ck_assert_uint_gt(st.dropped, 0);      /* the warps push boxes out */
        shr_reader *r = tu_reader_open(g_cls, &o);
        shr_close(r);
    }
}
END_TEST

/* Bad min_box_area_fraction values are refused. */
START_TEST(test_refused)
{
    shr_options o;
    const double bad[] = {-0.1, 1.5, NAN};
    for (size_t i = 0; i < 3; i++) {
        base_options(&o);
        o.min_box_area_fraction = bad[i];
        shr_reader *r;
        ck_assert_int_eq(shr_open(&r, g_var, &o, tu_fresh()), SHR_EINVAL);
        ck_assert_ptr_nonnull(strstr(tu_msg.text, "min_box_area_fraction"));
    }
}
END_TEST

/* A classification dataset: no targets anywhere, the rest as before. */
START_TEST(test_classification)
{
    shr_options o;
    base_options(&o);
    o.width = o.height = 32;
    o.flip = 1;
    o.min_box_area_fraction = 0.5;      /* ignored */
    shr_reader *r = tu_reader_open(g_cls, &o);
    shr_info info;
    shr_get_info(r, &info);
    ck_assert_int_eq(info.targets, 0);
    ck_assert_uint_eq(info.ring_bytes, (uint64_t)(o.threads + 2) *
                                           (info.batch_bytes +
                                            6 * (3 * sizeof(int64_t) + sizeof(shr_params))));
    const shr_batch *b;
    ck_assert_int_eq(shr_next(r, &b), 0);
    ck_assert_ptr_null(b->target_offsets);
    ck_assert_ptr_null(b->target_boxes);
    ck_assert_ptr_null(b->target_image_ids);
    shr_target t;
    ck_assert_int_eq(shr_batch_target(b, 0, &t), SHR_EINVAL);
    shr_release(r, b);
    shr_close(r);
    shr_dataset *d;
    ck_assert_int_eq(shr_dataset_open(&d, g_cls, SHR_ACCESS_MMAP, tu_fresh()), 0);
    shr_dataset_info di;
    shr_dataset_get_info(d, &di);
    ck_assert_int_eq(di.targets, 0);
    ck_assert_int_eq(shr_dataset_target(d, 0, &t, tu_fresh()), SHR_EINVAL);
    ck_assert_ptr_nonnull(strstr(tu_msg.text, "no targets"));
    shr_dataset_close(d);
}
END_TEST

/* shr_batch_target's bounds, and the flat arrays covering the batch. */
START_TEST(test_batch_view)
{
    shr_options o;
    base_options(&o);
    o.batch_size = 7;
    shr_reader *r = tu_reader_open(g_fixed, &o);
    const shr_batch *b;
    ck_assert_int_eq(shr_next(r, &b), 0);
    shr_target t;
    ck_assert_int_eq(shr_batch_target(b, b->n, &t), SHR_EINVAL);
    ck_assert_int_eq(shr_batch_target(NULL, 0, &t), SHR_EINVAL);
    ck_assert_int_eq(shr_batch_target(b, 0, NULL), SHR_EINVAL);
    int64_t sum = 0;
    for (uint32_t i = 0; i < b->n; i++) {
        ck_assert_int_eq(shr_batch_target(b, i, &t), 0);
        ck_assert_ptr_eq(t.labels, b->target_labels + sum);
        ck_assert_ptr_eq(t.area, b->target_area + sum);
        ck_assert_ptr_eq(t.iscrowd, b->target_iscrowd + sum);
        sum += t.count;
    }
    ck_assert_int_eq(sum, b->target_offsets[b->n]);
    shr_release(r, b);
    shr_close(r);
}
END_TEST

static Suite *detect_suite(void)
{
    return TU_SUITE("detect_read", "detect_read", 300, test_center_crop_pad, test_random_crop,
                    test_rrc, test_flip, test_combinations, test_threads_resume,
                    test_dataset_target, test_warps, test_refused, test_classification,
                    test_batch_view);
}

int main(void)
{
    int rc = build_fixtures();
    return tu_run_fixtures(rc, detect_suite());
}
