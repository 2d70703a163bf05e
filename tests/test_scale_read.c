/* test_scale_read.c - the read-time detection geometry of libshardread (shardread.h, "Scale"):
 * multi-scale resize, large-scale jitter and letterbox. The draws against the documented
 * arithmetic recomputed here from shr_mix; every delivered sample's parameters against
 * shr_draw_params, its boxes against an independent computation from the stored target, the
 * canvas padding zero, 1 and 4 threads giving the same bytes, and the options refused.
 * (Pixels against torchvision: tests/python/test_detect_scale.py.)
 *
 * Fixtures are datasets built at run time by the shardc binaries of the same build directory. */
#include "shardread.h"
#include "progs.h"
#include "testutil.h"

#include <check.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char g_var[1100];                /* detection, samples of many sizes */
#define TOL 1e-4

static int build_fixtures(void)
{
    if (tu_progs_root() != 0)
        return -1;
    if (tu_mksample_coco("--per-class 12 --min-side 30 --max-side 120 --seed 9") != 0)
        return -1;
    char cmd[8192];
    snprintf(g_var, sizeof g_var, "%s/var", g_root);
    snprintf(cmd, sizeof cmd, "'%s/shardc' build '%s/img' --coco '%s/inst.json' -o '%s' "
             "--max-side 72 --shard-samples 7 -j 2 --no-progress", g_bin, g_root, g_root, g_var);
    return run_quiet(cmd);
}

/* ---- the draws, recomputed ---- */

static uint32_t word(const shr_options *o, uint64_t epoch, uint64_t idx, int k)
{
    uint64_t h = shr_mix(o->seed, epoch, idx, SHR_SALT_SCALE);
    return (uint32_t)(k ? h >> 32 : h);
}

static float rand24(uint32_t w)
{
    return (float)(w & 0xffffffu) * 0x1p-24f;
}

START_TEST(test_draws)
{
    shr_options o;
    shr_options_init(&o);
    o.seed = 5;
    o.scale = SHR_SCALE_MULTI;
    const uint32_t sizes[] = {32, 47, 64, 800};
    memcpy(o.scale_sizes, sizes, sizeof sizes);
    o.scale_nsizes = 4;
    o.scale_max = 1333;
    int hit[4] = {0};
    for (uint32_t W = 1; W < 700; W += 37)
        for (uint32_t H = 1; H < 700; H += 41)
            for (uint64_t i = 0; i < 8; i++) {
                shr_params p;
                ck_assert_int_eq(shr_draw_params(&o, 1, i, W, H, &p), 0);
                uint32_t k = word(&o, 1, i, 0) % 4, s = sizes[k];
                hit[k]++;
                double r = fmin((double)s / (W < H ? W : H), 1333.0 / (W < H ? H : W));
                uint32_t w = (uint32_t)floor(W * r), h = (uint32_t)floor(H * r);
                ck_assert_uint_eq(p.scale_w, w ? w : 1);
                ck_assert_uint_eq(p.scale_h, h ? h : 1);
                ck_assert_uint_eq(p.image_w, p.scale_w);
                ck_assert_uint_eq(p.image_h, p.scale_h);
                ck_assert_uint_eq(p.crop_x + p.crop_y + p.pad_x + p.pad_y, 0);
                ck_assert(p.x == 0 && p.y == 0 && p.w == W && p.h == H);
            }
    for (uint64_t i = 0; i < 200; i++)
        hit[word(&o, 1, i, 0) % 4]++;
    for (int k = 0; k < 4; k++)
        ck_assert_int_gt(hit[k], 8);
    /* the one-pixel-short case the doc names: 480 * (800 / 480) truncates as Python's does */
    shr_params p;
    o.scale_sizes[0] = o.scale_sizes[1] = o.scale_sizes[2] = o.scale_sizes[3] = 800;
    ck_assert_int_eq(shr_draw_params(&o, 0, 0, 640, 480, &p), 0);
    ck_assert_uint_eq(p.scale_h, (uint32_t)(480 * (800.0 / 480)));

    shr_options_init(&o);
    o.seed = 2;
    o.scale = SHR_SCALE_JITTER;
    o.width = 64;
    o.height = 48;
    o.scale_range[0] = 0.3;
    o.scale_range[1] = 2.5;
    int cropped = 0, padded = 0;
    for (uint32_t W = 5; W < 300; W += 29)
        for (uint32_t H = 5; H < 300; H += 31)
            for (uint64_t i = 0; i < 8; i++) {
                ck_assert_int_eq(shr_draw_params(&o, 3, i, W, H, &p), 0);
                float span = (float)(2.5 - 0.3), t = rand24(word(&o, 3, i, 0)) * span;
                float scale = (float)0.3 + t;
                float r = (float)fmin(48.0 / H, 64.0 / W) * scale;
                uint32_t w = (uint32_t)((float)W * r), h = (uint32_t)((float)H * r);
                w = w ? w : 1;
                h = h ? h : 1;
                ck_assert_uint_eq(p.scale_w, w);
                ck_assert_uint_eq(p.scale_h, h);
                ck_assert_float_eq(p.scale_factor, r);
                ck_assert_uint_eq(p.image_w, w < 64 ? w : 64);
                ck_assert_uint_eq(p.image_h, h < 48 ? h : 48);
                float r2 = rand24(word(&o, 3, i, 1));
                uint32_t cx = w > 64 ? (uint32_t)((float)(w - 64) * r2) : 0;
                uint32_t cy = h > 48 ? (uint32_t)((float)(h - 48) * r2) : 0;
                ck_assert_uint_eq(p.crop_x, cx);
                ck_assert_uint_eq(p.crop_y, cy);
                ck_assert_uint_eq(p.pad_x + p.pad_y, 0);
                cropped += cx || cy;
                padded += w < 64 || h < 48;
            }
    ck_assert(cropped > 0 && padded > 0);

    shr_options_init(&o);
    o.scale = SHR_SCALE_LETTERBOX;
    o.width = 56;
    o.height = 40;
    for (uint32_t W = 3; W < 400; W += 13)
        for (uint32_t H = 3; H < 400; H += 17) {
            ck_assert_int_eq(shr_draw_params(&o, 0, 0, W, H, &p), 0);
            /* inside and centered (left (56 - w) / 2); the sizes themselves are the build's
             * --fit pad plan, which test_detect_scale.py holds to detect_ref.plan */
            ck_assert(p.image_w <= 56 && p.image_h <= 40);
            ck_assert_uint_eq(p.pad_x, (56 - p.image_w) / 2);
            ck_assert_uint_eq(p.pad_y, (40 - p.image_h) / 2);
            ck_assert(p.scale_w == p.image_w && p.scale_h == p.image_h);
            ck_assert(p.crop_x == 0 && p.crop_y == 0);
        }
}
END_TEST

/* ---- the reader ---- */

/* Every delivered sample of an epoch: params as shr_draw_params gives them, boxes as the stored
 * ones moved by the documented arithmetic, the canvas outside a multi-scale image zero. */
static void check_epoch(const shr_options *o, uint32_t threads, uint8_t **bytes, size_t *len)
{
    shr_options oo = *o;
    oo.threads = threads;
    shr_reader *r;
    ck_assert_msg(shr_open(&r, g_var, &oo, tu_fresh()) == 0, "%s", tu_msg.text);
    shr_dataset *d;
    ck_assert_int_eq(shr_dataset_open(&d, g_var, SHR_ACCESS_MMAP, tu_fresh()), 0);
    shr_info info;
    shr_get_info(r, &info);
    const shr_batch *b;
    size_t cap = 0, n = 0, seen = 0;
    uint8_t *all = NULL;
    int multi = o->scale == SHR_SCALE_MULTI, rc;
    while ((rc = shr_next(r, &b)) == 0) {
        size_t sample = (size_t)b->width * b->height * b->channels;
        for (uint32_t i = 0; i < b->n; i++) {
            shr_sample s;
            ck_assert_int_eq(shr_dataset_sample(d, (uint64_t)b->indices[i], &s, tu_fresh()), 0);
            shr_params q;
            ck_assert_int_eq(shr_draw_params(o, b->epoch, (uint64_t)b->indices[i], s.width,
                                             s.height, &q), 0);
            const shr_params *p = &b->params[i];
            ck_assert(memcmp(&q, p, sizeof q) == 0);
            shr_target st, t;
            ck_assert_int_eq(shr_dataset_target(d, (uint64_t)b->indices[i], &st, tu_fresh()), 0);
            ck_assert_int_eq(shr_batch_target(b, i, &t), 0);
            double sx = (double)p->scale_w / s.width, sy = (double)p->scale_h / s.height;
            double x0 = p->pad_x, y0 = p->pad_y, x1 = x0 + p->image_w, y1 = y0 + p->image_h;
            double fw = multi ? p->image_w : b->width;
            uint32_t kept = 0;
            for (uint32_t k = 0; k < st.count; k++) {
                const float *v = st.boxes + 4 * k;
                double u[4] = {v[0] * sx + x0 - p->crop_x, v[1] * sy + y0 - p->crop_y,
                               v[2] * sx + x0 - p->crop_x, v[3] * sy + y0 - p->crop_y};
                double whole = (u[2] - u[0]) * (u[3] - u[1]);
                for (int j = 0; j < 4; j++) {
                    double lo = j % 2 ? y0 : x0, hi = j % 2 ? y1 : x1;
                    u[j] = u[j] < lo ? lo : u[j] > hi ? hi : u[j];
                }
                if (p->flip) {
                    double m = fw - u[2];
                    u[2] = fw - u[0];
                    u[0] = m;
                }
                if (!((float)u[0] < (float)u[2] && (float)u[1] < (float)u[3]) ||
                    (u[2] - u[0]) * (u[3] - u[1]) < o->min_box_area_fraction * whole)
                    continue;
                ck_assert_uint_lt(kept, t.count);
                for (int j = 0; j < 4; j++)
                    ck_assert_double_eq_tol(t.boxes[4 * kept + j], u[j], TOL);
                ck_assert_int_eq(t.labels[kept], st.labels[k]);
                kept++;
            }
            ck_assert_uint_eq(kept, t.count);
            ck_assert_uint_eq(t.dropped, st.count - kept);
            if (multi && b->dtype == SHR_DTYPE_U8) {
                const uint8_t *px = b->data + i * sample;
                for (uint32_t y = 0; y < b->height; y++)
                    for (uint32_t x = 0; x < b->width; x++)
                        if (y >= p->image_h || x >= p->image_w)
                            for (uint32_t c = 0; c < b->channels; c++)
                                ck_assert_uint_eq(px[((size_t)y * b->width + x) * b->channels
                                                     + c], 0);
            }
            seen++;
        }
        size_t add = (size_t)b->n * sample * (b->dtype == SHR_DTYPE_U8 ? 1 : 4);
        if (n + add + 16 * b->n > cap) {
            cap = 2 * (n + add + 16 * b->n);
            all = realloc(all, cap);
            ck_assert_ptr_nonnull(all);
        }
        memcpy(all + n, b->data, add);
        n += add;
        for (uint32_t i = 0; i < b->n; i++) {
            memcpy(all + n, &b->target_offsets[i + 1], 8);
            memcpy(all + n + 8, &b->params[i].scale_w, 8);
            n += 16;
        }
        shr_release(r, b);
    }
    ck_assert_int_eq(rc, SHR_EEND);
    ck_assert_uint_eq(seen, info.samples);
    shr_dataset_close(d);
    shr_close(r);
    *bytes = all;
    *len = n;
}

static void check_both(const shr_options *o)
{
    uint8_t *a, *b;
    size_t na, nb;
    check_epoch(o, 1, &a, &na);
    check_epoch(o, 4, &b, &nb);
    ck_assert_uint_eq(na, nb);
    ck_assert(memcmp(a, b, na) == 0);
    free(a);
    free(b);
}

static void base(shr_options *o)
{
    shr_options_init(o);
    o->batch_size = 5;
    o->order = SHR_ORDER_RANDOM;
    o->seed = 17;
    o->flip = 1;
    o->epoch = 2;
}

START_TEST(test_reader_multi)
{
    shr_options o;
    base(&o);
    o.scale = SHR_SCALE_MULTI;
    const uint32_t sizes[] = {24, 40, 56};
    memcpy(o.scale_sizes, sizes, sizeof sizes);
    o.scale_nsizes = 3;
    o.scale_max = 90;
    check_both(&o);
    o.min_box_area_fraction = 0.5;
    o.dtype = SHR_DTYPE_F32;
    o.layout = SHR_LAYOUT_NCHW;
    o.normalize = SHR_NORM_GIVEN;
    for (int c = 0; c < 4; c++) {
        o.mean[c] = 120;
        o.std[c] = 60;
    }
    o.jitter_brightness[0] = 0.5;
    o.jitter_brightness[1] = 1.5;
    o.erase_p = 0.5;
    check_both(&o);
}
END_TEST

START_TEST(test_reader_jitter_letterbox)
{
    shr_options o;
    base(&o);
    o.scale = SHR_SCALE_JITTER;
    o.width = 48;
    o.height = 40;
    o.scale_range[0] = 0.5;
    o.scale_range[1] = 2.5;
    o.min_box_area_fraction = 0.3;
    check_both(&o);
    base(&o);
    o.scale = SHR_SCALE_LETTERBOX;
    o.width = 40;
    o.height = 56;
    o.grayscale_p = 0.5;
    o.access = SHR_ACCESS_PREAD;
    check_both(&o);
}
END_TEST

/* shr_open of g_var with o is refused, no reader made, the message naming words where given. */
static void refused(const shr_options *o, const char *words)
{
    shr_reader *r = NULL;
    ck_assert_int_eq(shr_open(&r, g_var, o, tu_fresh()), SHR_EINVAL);
    ck_assert_ptr_null(r);
    if (words)
        ck_assert_msg(strstr(tu_msg.text, words), "%s", tu_msg.text);
}

START_TEST(test_refused)
{
    shr_options o;
    shr_params p;
    base(&o);
    o.scale = SHR_SCALE_MULTI;          /* no sizes */
    o.scale_max = 64;
    refused(&o, NULL);
    o.scale_nsizes = 1;
    o.scale_sizes[0] = 32;
    o.scale_max = 0;
    ck_assert_int_eq(shr_draw_params(&o, 0, 0, 10, 10, &p), SHR_EINVAL);
    o.scale_max = 64;
    o.rrc = 1;
    o.width = o.height = 32;
    refused(&o, "rrc");
    o.rrc = 0;
    o.random_crop = 1;
    refused(&o, NULL);
    o.random_crop = 0;
    o.width = o.height = 20;            /* a canvas too small for the largest size */
    refused(&o, "canvas");
    base(&o);
    o.scale = SHR_SCALE_JITTER;         /* no target size */
    refused(&o, NULL);
    o.width = o.height = 32;
    o.scale_range[0] = 0;
    refused(&o, NULL);
    o.scale_range[0] = 3;
    o.scale_range[1] = 2;
    refused(&o, NULL);
    base(&o);
    o.scale = (shr_scale)9;
    ck_assert_int_eq(shr_draw_params(&o, 0, 0, 10, 10, &p), SHR_EINVAL);
    o.scale = SHR_SCALE_LETTERBOX;
    refused(&o, NULL);
    base(&o);
    o.scale = SHR_SCALE_RESIZE;         /* no size */
    o.width = o.height = 16;
    ck_assert_int_eq(shr_draw_params(&o, 0, 0, 10, 10, &p), SHR_EINVAL);
    o.scale_nsizes = 1;
    o.scale_sizes[0] = 20;
    o.scale_max = 20;                   /* max_size must be above the size */
    ck_assert_int_eq(shr_draw_params(&o, 0, 0, 10, 10, &p), SHR_EINVAL);
    o.scale_max = 0;
    o.width = 0;                        /* no crop */
    ck_assert_int_eq(shr_draw_params(&o, 0, 0, 10, 10, &p), SHR_EINVAL);
    o.width = 16;
    ck_assert_int_eq(shr_draw_params(&o, 0, 0, 10, 10, &p), 0);
}
END_TEST

/* Resize(S[, max_size]) then CenterCrop: torchvision's arithmetic (F.resize's
 * _compute_resized_output_size, F.center_crop's padding and int(round(.)) offsets); the pixels
 * against torchvision: tests/python/test_pipeline.py */
START_TEST(test_resize_center_crop)
{
    shr_options o;
    shr_options_init(&o);
    o.scale = SHR_SCALE_RESIZE;
    o.scale_nsizes = 1;
    shr_params p;
    int cropped = 0, padded = 0, capped = 0;
    for (uint32_t S = 7; S < 90; S += 41)
        for (uint32_t M = 0; M < 2; M++)
            for (uint32_t W = 3; W < 300; W += 23)
                for (uint32_t H = 2; H < 300; H += 29) {
                    o.scale_sizes[0] = S;
                    o.scale_max = M ? S + 9 : 0;
                    o.width = 24;
                    o.height = 17;
                    ck_assert_int_eq(shr_draw_params(&o, 1, 2, W, H, &p), 0);
                    uint32_t sh = W <= H ? W : H, lg = W <= H ? H : W;
                    uint32_t ns = S, nl = (uint32_t)((double)S * lg / sh);
                    if (o.scale_max && nl > o.scale_max) {
                        ns = (uint32_t)((double)o.scale_max * ns / nl);
                        nl = o.scale_max;
                        capped++;
                    }
                    ns = ns ? ns : 1;           /* a side is at least 1 */
                    uint32_t rw = W <= H ? ns : nl, rh = W <= H ? nl : ns;
                    ck_assert_uint_eq(p.scale_w, rw);
                    ck_assert_uint_eq(p.scale_h, rh);
                    ck_assert_uint_eq(p.image_w, rw < 24 ? rw : 24);
                    ck_assert_uint_eq(p.image_h, rh < 17 ? rh : 17);
                    /* Python's round(): halves to even */
                    uint32_t cx = rw > 24 ? (uint32_t)nearbyint((rw - 24) / 2.0) : 0;
                    uint32_t cy = rh > 17 ? (uint32_t)nearbyint((rh - 17) / 2.0) : 0;
                    ck_assert_uint_eq(p.crop_x, cx);
                    ck_assert_uint_eq(p.crop_y, cy);
                    ck_assert_uint_eq(p.pad_x, rw < 24 ? (24 - rw) / 2 : 0);
                    ck_assert_uint_eq(p.pad_y, rh < 17 ? (17 - rh) / 2 : 0);
                    cropped += rw > 24 || rh > 17;
                    padded += rw < 24 || rh < 17;
                }
    ck_assert(cropped > 0 && padded > 0 && capped > 0);
}
END_TEST

int main(void)
{
    int rc = build_fixtures();
    Suite *s = TU_SUITE("scale_read", "core", 300, test_draws, test_resize_center_crop,
                        test_reader_multi, test_reader_jitter_letterbox, test_refused);
    return tu_run_fixtures(rc, s);
}
