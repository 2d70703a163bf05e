/* augment.c - pre-augmentation: SPEC parsing, counter-based draws, and their exact application. */
#include "augment.h"
#include "enhance.h"
#include "hsv.h"
#include "warp.h"
#include "le.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

/* ---- the generator ---- */

double fmt_aug_uniform(uint64_t seed, uint64_t source, uint32_t variant, uint32_t draw)
{
    uint8_t key[20];
    fmt_le_put64(key, source);
    fmt_le_put32(key + 8, variant);
    fmt_le_put32(key + 12, draw);
    memcpy(key + 16, "aug1", 4);
    uint64_t h = XXH3_64bits_withSeed(key, sizeof key, seed);
    return (double)(h >> 11) * (1.0 / 9007199254740992.0); /* 53 bits -> [0, 1) */
}

/* ---- SPEC ---- */

static int parse_num(const char *s, const char **end, double *v)
{
    char *e;
    errno = 0;
    *v = strtod(s, &e);
    /* subnormals too: strtod flags most of them ERANGE, and the canonical text of one that got
     * through (a hex float such as 0x1p-1074) would not parse again */
    if (e == s || errno || !isfinite(*v) || (*v != 0 && fabs(*v) < DBL_MIN))
        return -1;
    *end = e;
    return 0;
}

/* Parse "a:b:..." into up to max numbers; returns the count or -1. */
static int parse_list(const char *s, double *v, int max)
{
    int n = 0;
    for (;;) {
        const char *e;
        if (n == max || parse_num(s, &e, &v[n]) != 0)
            return -1;
        n++;
        if (*e == '\0')
            return n;
        if (*e != ':')
            return -1;
        s = e + 1;
    }
}

int fmt_aug_parse(const char *spec, fmt_aug_spec *out, fmt_msg *msg)
{
    memset(out, 0, sizeof *out);
    if (!spec || !*spec)
        return fmt_fail(msg, FMT_EINVAL, "empty augmentation spec (try '%s')",
                        FMT_AUG_DEFAULT_SPEC);
    char *copy = strdup(spec), *save = NULL;
    if (!copy)
        return ENOMEM;
    int rc = 0;
    for (char *tok = strtok_r(copy, ",", &save); tok && !rc; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        const char *val = eq ? eq + 1 : NULL;
        if (eq)
            *eq = '\0';
        double v[4];
        int n;
        if (strcmp(tok, "none") == 0 && !val) {
            continue;
        } else if (strcmp(tok, "rrc") == 0) {
            n = val ? parse_list(val, v, 4) : -1;
            if (n != 2 && n != 4) {
                rc = fmt_fail(msg, FMT_EINVAL, "rrc expects SMIN:SMAX or SMIN:SMAX:RMIN:RMAX, "
                              "e.g. rrc=0.08:1:0.75:1.3333");
                break;
            }
            out->rrc = 1;
            out->scale_min = v[0];
            out->scale_max = v[1];
            out->ratio_min = n == 4 ? v[2] : 3.0 / 4.0;
            out->ratio_max = n == 4 ? v[3] : 4.0 / 3.0;
            if (!(out->scale_min > 0 && out->scale_min <= out->scale_max && out->scale_max <= 1))
                rc = fmt_fail(msg, FMT_EINVAL, "rrc scale range must satisfy 0 < SMIN <= SMAX <= 1");
            else if (!(out->ratio_min > 0 && out->ratio_min <= out->ratio_max &&
                       out->ratio_max < 1e6))
                rc = fmt_fail(msg, FMT_EINVAL, "rrc ratio range must satisfy 0 < RMIN <= RMAX");
        } else if (strcmp(tok, "flip") == 0) {
            out->flip_p = 0.5;
            if (val && (parse_list(val, v, 1) != 1 || v[0] < 0 || v[0] > 1)) {
                rc = fmt_fail(msg, FMT_EINVAL, "flip expects a probability in 0..1, e.g. flip=0.5");
                break;
            }
            if (val)
                out->flip_p = v[0];
        } else if (strcmp(tok, "jitter") == 0 || strcmp(tok, "brightness") == 0 ||
                   strcmp(tok, "contrast") == 0 || strcmp(tok, "saturation") == 0) {
            if (!val || parse_list(val, v, 1) != 1 || v[0] < 0 || v[0] > 1) {
                rc = fmt_fail(msg, FMT_EINVAL, "%s expects a strength in 0..1, e.g. %s=0.4", tok,
                              tok);
                break;
            }
            if (tok[0] == 'j' || tok[0] == 'b')
                out->brightness = v[0];
            if (tok[0] == 'j' || tok[0] == 'c')
                out->contrast = v[0];
            if (tok[0] == 'j' || tok[0] == 's')
                out->saturation = v[0];
        } else if (strcmp(tok, "rotate") == 0) {
            /* rotate=D or rotate=D:nearest|bilinear */
            char *colon = val ? strchr((char *)val, ':') : NULL;
            const char *how = colon ? colon + 1 : "nearest";
            if (colon)
                *colon = '\0';
            if (!val || parse_list(val, v, 1) != 1 || v[0] < 0 || v[0] > 180 ||
                (strcmp(how, "nearest") != 0 && strcmp(how, "bilinear") != 0)) {
                rc = fmt_fail(msg, FMT_EINVAL, "rotate expects degrees in 0..180 and optionally "
                              ":nearest or :bilinear, e.g. rotate=15 or rotate=15:bilinear");
                break;
            }
            out->rotate = v[0];
            /* rotate=0 is no rotation: its interpolation means nothing, and must not change
             * the canonical spec (or an affine's interpolation given before it) */
            if (v[0] > 0)
                out->rotate_bilinear = how[0] == 'b';
        } else if (strcmp(tok, "affine") == 0) {
            /* affine=D:T:SMIN:SMAX:SH[:nearest|:bilinear]: RandomAffine(D, (T, T), (SMIN,
             * SMAX), SH) */
            char *colon = val ? strrchr((char *)val, ':') : NULL;
            const char *how = "nearest";
            if (colon && (strcmp(colon + 1, "nearest") == 0 || strcmp(colon + 1, "bilinear") == 0)) {
                how = colon + 1;
                *colon = '\0';
            }
            double a[5] = {0};
            n = val ? parse_list(val, a, 5) : -1;
            if (n != 5 || !(a[0] >= 0 && a[0] <= 180) || !(a[1] >= 0 && a[1] <= 1) ||
                !(a[2] > 0 && a[2] <= a[3] && a[3] <= 10) || !(a[4] >= 0 && a[4] < 90)) {
                rc = fmt_fail(msg, FMT_EINVAL, "affine expects D:T:SMIN:SMAX:SH (degrees in "
                              "0..180, translation fraction in 0..1, 0 < SMIN <= SMAX <= 10, shear "
                              "degrees 0 <= SH < 90) and optionally :nearest or :bilinear, e.g. "
                              "affine=15:0.1:0.9:1.1:10");
                break;
            }
            out->affine = 1;
            out->affine_degrees = a[0];
            out->affine_translate = a[1];
            out->affine_scale_min = a[2];
            out->affine_scale_max = a[3];
            out->affine_shear = a[4];
            out->rotate_bilinear = how[0] == 'b';
        } else if (strcmp(tok, "hue") == 0) {
            if (!val || parse_list(val, v, 1) != 1 || v[0] < 0 || v[0] > 0.5) {
                rc = fmt_fail(msg, FMT_EINVAL, "hue expects a strength in 0..0.5, e.g. hue=0.1");
                break;
            }
            out->hue = v[0];
        } else if (strcmp(tok, "gray") == 0) {
            out->gray_p = 0.1;
            if (val && (parse_list(val, v, 1) != 1 || v[0] < 0 || v[0] > 1)) {
                rc = fmt_fail(msg, FMT_EINVAL, "gray expects a probability in 0..1, e.g. gray=0.1");
                break;
            }
            if (val)
                out->gray_p = v[0];
        } else {
            rc = fmt_fail(msg, FMT_EINVAL, "unknown augmentation '%s' (expected rrc, flip, jitter, "
                          "brightness, contrast, saturation, rotate, affine, hue, gray or none)",
                          tok);
        }
    }
    if (!rc && out->affine && out->rotate > 0)
        rc = fmt_fail(msg, FMT_EINVAL, "rotate and affine are alternatives: affine=D:... rotates "
                      "by up to D degrees itself");
    free(copy);
    if (rc)
        memset(out, 0, sizeof *out);
    return rc;
}

/* v in the fewest significant digits (6 or more, like %g) that strtod turns back into v, so that
 * the canonical text parses to the very spec it came from (and specs that differ give different
 * texts, hence different build fingerprints). */
static const char *exact_num(char out[32], double v)
{
    for (int prec = 6; prec < 17; prec++) {
        snprintf(out, 32, "%.*g", prec, v);
        if (strtod(out, NULL) == v)
            return out;
    }
    snprintf(out, 32, "%.17g", v);
    return out;
}

void fmt_aug_format(const fmt_aug_spec *s, char *buf, size_t len)
{
    char a[32], b[32], c[32], d[32];
    int n = 0;
    buf[0] = '\0';
#define ADD(...)                                                                       \
    do {                                                                               \
        if (n >= 0 && (size_t)n < len)                                                 \
            n += snprintf(buf + n, len - (size_t)n, "%s", n ? "," : "");               \
        if (n >= 0 && (size_t)n < len)                                                 \
            n += snprintf(buf + n, len - (size_t)n, __VA_ARGS__);                      \
    } while (0)
    if (s->rrc)
        ADD("rrc=%s:%s:%s:%s", exact_num(a, s->scale_min), exact_num(b, s->scale_max),
            exact_num(c, s->ratio_min), exact_num(d, s->ratio_max));
    if (s->flip_p > 0)
        ADD("flip=%s", exact_num(a, s->flip_p));
    if (s->rotate > 0)
        ADD("rotate=%s%s", exact_num(a, s->rotate), s->rotate_bilinear ? ":bilinear" : "");
    if (s->affine) {
        char e[32];
        ADD("affine=%s:%s:%s:%s:%s%s", exact_num(a, s->affine_degrees),
            exact_num(b, s->affine_translate), exact_num(c, s->affine_scale_min),
            exact_num(d, s->affine_scale_max), exact_num(e, s->affine_shear),
            s->rotate_bilinear ? ":bilinear" : "");
    }
    if (s->brightness > 0)
        ADD("brightness=%s", exact_num(a, s->brightness));
    if (s->contrast > 0)
        ADD("contrast=%s", exact_num(a, s->contrast));
    if (s->saturation > 0)
        ADD("saturation=%s", exact_num(a, s->saturation));
    if (s->hue > 0)
        ADD("hue=%s", exact_num(a, s->hue));
    if (s->gray_p > 0)
        ADD("gray=%s", exact_num(a, s->gray_p));
    if (n == 0)
        ADD("none");
#undef ADD
}

/* ---- drawing ---- */

enum {
    DRAW_FLIP = 40, DRAW_BRIGHT, DRAW_CONTRAST, DRAW_SAT, DRAW_HUE, DRAW_GRAY, DRAW_ROTATE,
    DRAW_AFFINE_ANGLE, DRAW_AFFINE_TX, DRAW_AFFINE_TY, DRAW_AFFINE_SCALE, DRAW_AFFINE_SHEAR
};

static uint32_t randint(double u, uint32_t lo, uint32_t hi) /* uniform in [lo, hi] */
{
    uint64_t span = (uint64_t)hi - lo + 1;
    uint64_t k = (uint64_t)(u * (double)span);
    return lo + (uint32_t)(k < span ? k : span - 1);
}

void fmt_aug_draw(const fmt_aug_spec *s, uint64_t seed, uint64_t source, uint32_t variant,
                  uint32_t src_w, uint32_t src_h, const fmt_geom_plan *base, fmt_aug_params *p)
{
    memset(p, 0, sizeof *p);
    p->source = source;
    p->variant = variant;
    p->src_w = src_w;
    p->src_h = src_h;
    p->filter = base->filter;
    /* without rrc: the source rectangle that the plan's visible window comes from */
    uint32_t rw = base->rs_w ? base->rs_w : src_w, rh = base->rs_h ? base->rs_h : src_h;
    uint32_t ww = base->rs_w ? base->dst_w : src_w, wh = base->rs_h ? base->dst_h : src_h;
    uint64_t cx = ((uint64_t)base->win_x * src_w + rw / 2) / rw;
    uint64_t cy = ((uint64_t)base->win_y * src_h + rh / 2) / rh;
    uint64_t cw = ((uint64_t)ww * src_w + rw / 2) / rw, chh = ((uint64_t)wh * src_h + rh / 2) / rh;
    cx = cx < src_w ? cx : src_w - 1;
    cy = cy < src_h ? cy : src_h - 1;
    cw = cw < 1 ? 1 : cw > src_w - cx ? src_w - cx : cw;
    chh = chh < 1 ? 1 : chh > src_h - cy ? src_h - cy : chh;
    p->crop_x = (uint32_t)cx;
    p->crop_y = (uint32_t)cy;
    p->crop_w = (uint32_t)cw;
    p->crop_h = (uint32_t)chh;
    if (s->rrc) {
        double area = (double)src_w * src_h;
        double lr0 = log(s->ratio_min), lr1 = log(s->ratio_max);
        int found = 0;
        for (uint32_t a = 0; a < 10 && !found; a++) {
            double target = area * (s->scale_min + (s->scale_max - s->scale_min) *
                                                       fmt_aug_uniform(seed, source, variant, 4 * a));
            double ar = exp(lr0 + (lr1 - lr0) * fmt_aug_uniform(seed, source, variant, 4 * a + 1));
            double w = floor(sqrt(target * ar) + 0.5), h = floor(sqrt(target / ar) + 0.5);
            if (w >= 1 && h >= 1 && w <= src_w && h <= src_h) {
                p->crop_w = (uint32_t)w;
                p->crop_h = (uint32_t)h;
                p->crop_y = randint(fmt_aug_uniform(seed, source, variant, 4 * a + 2), 0,
                                    src_h - p->crop_h);
                p->crop_x = randint(fmt_aug_uniform(seed, source, variant, 4 * a + 3), 0,
                                    src_w - p->crop_w);
                found = 1;
            }
        }
        if (!found) {
            /* the largest centered rectangle whose ratio is clamped into the range */
            double in_ratio = (double)src_w / src_h;
            uint32_t w = src_w, h = src_h;
            if (in_ratio < s->ratio_min)
                h = (uint32_t)fmin(src_h, fmax(1, floor(w / s->ratio_min + 0.5)));
            else if (in_ratio > s->ratio_max)
                w = (uint32_t)fmin(src_w, fmax(1, floor(h * s->ratio_max + 0.5)));
            p->crop_w = w;
            p->crop_h = h;
            p->crop_x = (src_w - w) / 2;
            p->crop_y = (src_h - h) / 2;
        }
    }
    p->flip = s->flip_p > 0 && fmt_aug_uniform(seed, source, variant, DRAW_FLIP) < s->flip_p;
    if (s->rotate > 0) {
        p->angle = (float)(-s->rotate +
                           2 * s->rotate * fmt_aug_uniform(seed, source, variant, DRAW_ROTATE));
        p->rotate_bilinear = s->rotate_bilinear && p->angle != 0.0f;
    }
    if (s->affine) {
        /* RandomAffine.get_params: float32 uniforms, the translations rounded half to even as
         * Python's round() */
        double w = base->out_w ? base->out_w : src_w, h = base->out_h ? base->out_h : src_h;
        double dx = s->affine_translate * w, dy = s->affine_translate * h;
        p->affine = 1;
        p->rotate_bilinear = (uint32_t)s->rotate_bilinear;
        p->angle = (float)(-s->affine_degrees + 2 * s->affine_degrees *
                                                    fmt_aug_uniform(seed, source, variant,
                                                                    DRAW_AFFINE_ANGLE));
        p->affine_tx = (int32_t)rint((double)(float)(-dx + 2 * dx *
                                                          fmt_aug_uniform(seed, source, variant,
                                                                          DRAW_AFFINE_TX)));
        p->affine_ty = (int32_t)rint((double)(float)(-dy + 2 * dy *
                                                          fmt_aug_uniform(seed, source, variant,
                                                                          DRAW_AFFINE_TY)));
        p->affine_scale = (float)(s->affine_scale_min +
                                  (s->affine_scale_max - s->affine_scale_min) *
                                      fmt_aug_uniform(seed, source, variant, DRAW_AFFINE_SCALE));
        p->affine_shear_x = (float)(-s->affine_shear + 2 * s->affine_shear *
                                                          fmt_aug_uniform(seed, source, variant,
                                                                          DRAW_AFFINE_SHEAR));
    }
    p->brightness = 1.0f;
    p->contrast = 1.0f;
    p->saturation = 1.0f;
    if (s->brightness > 0)
        p->brightness = (float)(1 - s->brightness +
                                2 * s->brightness * fmt_aug_uniform(seed, source, variant, DRAW_BRIGHT));
    if (s->contrast > 0)
        p->contrast = (float)(1 - s->contrast +
                              2 * s->contrast * fmt_aug_uniform(seed, source, variant, DRAW_CONTRAST));
    if (s->saturation > 0)
        p->saturation = (float)(1 - s->saturation +
                                2 * s->saturation * fmt_aug_uniform(seed, source, variant, DRAW_SAT));
    p->hue_on = s->hue > 0;
    if (p->hue_on)
        p->hue = (float)(-s->hue + 2 * s->hue * fmt_aug_uniform(seed, source, variant, DRAW_HUE));
    p->gray = s->gray_p > 0 && fmt_aug_uniform(seed, source, variant, DRAW_GRAY) < s->gray_p;
}

/* ---- applying ---- */

/* brightness, contrast, saturation (16.16 fixed point: fmt_color_q16), then torchvision's
 * adjust_hue and rgb_to_grayscale(img, 3) (Pillow's HSV round trip and L conversion, exactly) */
static void colour(fmt_image *im, const fmt_aug_params *p)
{
    size_t npix = (size_t)im->width * im->height;
    uint8_t *px = im->pixels;
    fmt_color_q16(px, npix, im->channels, p->brightness, p->contrast, p->saturation);
    if (im->channels != 3)
        return;         /* hue and grayscale leave an L image as it is, as torchvision does */
    /* a shift of 0 still makes the HSV round trip, which is not the identity */
    if (p->hue_on)
        fmt_hue_row(px, npix, fmt_hue_shift((double)p->hue));
    if (p->gray)
        for (size_t i = 0; i < npix; i++, px += 3)
            px[0] = px[1] = px[2] = fmt_luma(px[0], px[1], px[2]);
}

static void flip_rows(fmt_image *im)
{
    uint32_t c = im->channels, w = im->width;
    for (uint32_t y = 0; y < im->height; y++) {
        uint8_t *row = im->pixels + (size_t)y * w * c;
        for (uint32_t a = 0, b = w - 1; a < b; a++, b--)
            for (uint32_t k = 0; k < c; k++) {
                uint8_t t = row[a * c + k];
                row[a * c + k] = row[b * c + k];
                row[b * c + k] = t;
            }
    }
}

int fmt_aug_apply(fmt_resizer *rz, const fmt_image *src, const fmt_aug_params *p, uint32_t out_w,
                  uint32_t out_h, fmt_image *dst, fmt_msg *msg)
{
    if (dst)
        memset(dst, 0, sizeof *dst);
    int rc = fmt_aug_apply_into(rz, src, p, out_w, out_h, dst, msg);
    if (rc && dst)
        fmt_image_free(dst);
    return rc;
}

int fmt_aug_apply_into(fmt_resizer *rz, const fmt_image *src, const fmt_aug_params *p,
                       uint32_t out_w, uint32_t out_h, fmt_image *dst, fmt_msg *msg)
{
    if (!rz || !src || !src->pixels || !p || !dst)
        return fmt_fail(msg, FMT_EINVAL, "invalid argument");
    if (src->width != p->src_w || src->height != p->src_h)
        return fmt_fail(msg, FMT_EINVAL, "source is %ux%u, the parameters were drawn for %ux%u",
                        src->width, src->height, p->src_w, p->src_h);
    if (!p->crop_w || !p->crop_h || p->crop_w > src->width || p->crop_h > src->height ||
        p->crop_x > src->width - p->crop_w ||
        p->crop_y > src->height - p->crop_h)
        return fmt_fail(msg, FMT_EINVAL, "crop rectangle outside the source");
    if ((unsigned)p->filter >= FMT_FILTER_COUNT)
        return fmt_fail(msg, FMT_EINVAL, "unknown filter %u", p->filter);
    if (!out_w || !out_h || out_w > FMT_GEOM_MAX_SIDE || out_h > FMT_GEOM_MAX_SIDE)
        return fmt_fail(msg, FMT_EINVAL, "bad output size %ux%u", out_w, out_h);
    /* torchvision's resized_crop: crop, then resize the crop alone (a view, no copy) */
    uint32_t ch = src->channels;
    int rc = fmt_image_reserve(dst, out_w, out_h, ch);
    if (rc)
        return fmt_fail(msg, rc, "cannot allocate a %ux%u image", out_w, out_h);
    size_t sstride = (size_t)src->width * ch;
    fmt_rs_view sv = {src->pixels + (size_t)p->crop_y * sstride + (size_t)p->crop_x * ch,
                      p->crop_w, p->crop_h, ch, sstride};
    fmt_rs_view dv = {dst->pixels, out_w, out_h, ch, (size_t)out_w * ch};
    rc = fmt_resample(fmt_resizer_scratch(rz), &sv, NULL, (fmt_filter)p->filter, &dv, msg);
    if (rc)
        return rc;
    if (p->flip)
        flip_rows(dst);
    if (p->affine || p->angle != 0.0f) {
        /* F.affine(img, angle, (tx, ty), scale, (sx, sy), interpolation, fill=0) or
         * F.rotate(img, angle, interpolation, fill=0) of the variant so far */
        size_t bytes = (size_t)out_w * out_h * ch, stride = (size_t)out_w * ch;
        uint8_t *tmp = malloc(bytes);
        if (!tmp)
            return fmt_fail(msg, ENOMEM, "cannot allocate a %ux%u image", out_w, out_h);
        memcpy(tmp, dst->pixels, bytes);
        static const uint8_t black[4] = {0, 0, 0, 0};
        fmt_warp_filter f = p->rotate_bilinear ? FMT_WARP_BILINEAR : FMT_WARP_NEAREST;
        if (p->affine) {
            double m[6];
            fmt_warp_inverse(m, out_w * 0.5, out_h * 0.5, (double)p->angle, p->affine_tx,
                             p->affine_ty, (double)p->affine_scale, (double)p->affine_shear_x,
                             (double)p->affine_shear_y);
            fmt_warp(tmp, stride, dst->pixels, stride, out_w, out_h, ch, m, f, black, 1);
        } else {
            fmt_warp_rotate(tmp, stride, dst->pixels, stride, out_w, out_h, ch,
                            (double)p->angle, f, black, 1);
        }
        free(tmp);
    }
    colour(dst, p);
    return 0;
}

/* ---- the aux record ---- */

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bitsf(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint32_t fmt_aug_record_size(const fmt_aug_spec *s)
{
    return s && s->affine ? FMT_AUG_RECORD_SIZE_AFFINE : FMT_AUG_RECORD_SIZE;
}

uint32_t fmt_aug_encode(const fmt_aug_params *p, uint8_t out[FMT_AUG_RECORD_MAX])
{
    /* version 1 unless the variant is warped or uses hue or grayscale, so that every earlier
     * record keeps its bytes and a reader that knows only version 1 refuses what it cannot
     * replay; version 3 (96 bytes) only for an affine warp, whose parameters need more room */
    uint32_t len = p->affine ? FMT_AUG_RECORD_SIZE_AFFINE : FMT_AUG_RECORD_SIZE;
    memset(out, 0, len);
    int v2 = p->hue_on || p->gray || p->angle != 0.0f || p->affine;
    memcpy(out, p->affine ? "AUG3" : v2 ? "AUG2" : "AUG1", 4);
    fmt_le_put32(out + 4, p->variant);
    fmt_le_put64(out + 8, p->source);
    fmt_le_put32(out + 16, p->src_w);
    fmt_le_put32(out + 20, p->src_h);
    fmt_le_put32(out + 24, p->crop_x);
    fmt_le_put32(out + 28, p->crop_y);
    fmt_le_put32(out + 32, p->crop_w);
    fmt_le_put32(out + 36, p->crop_h);
    if (v2)
        fmt_le_put32(out + 40, p->flip | (p->gray ? 2u : 0u) | (p->hue_on ? 4u : 0u) |
                                   (p->rotate_bilinear ? 8u : 0u) | (p->affine ? 16u : 0u) |
                                   (p->filter & 0xffu) << 8);
    else
        fmt_le_put32(out + 40, p->flip);
    fmt_le_put32(out + 44, fbits(p->brightness));
    fmt_le_put32(out + 48, fbits(p->contrast));
    fmt_le_put32(out + 52, fbits(p->saturation));
    if (v2) {
        fmt_le_put32(out + 56, fbits(p->angle));
        fmt_le_put32(out + 60, fbits(p->hue));
    } else {
        fmt_le_put32(out + 56, p->filter);
    }
    if (p->affine) {
        fmt_le_put32(out + 64, (uint32_t)p->affine_tx);
        fmt_le_put32(out + 68, (uint32_t)p->affine_ty);
        fmt_le_put32(out + 72, fbits(p->affine_scale));
        fmt_le_put32(out + 76, fbits(p->affine_shear_x));
        fmt_le_put32(out + 80, fbits(p->affine_shear_y));
    }
    return len;
}

int fmt_aug_decode(const uint8_t *in, size_t len, fmt_aug_params *p)
{
    memset(p, 0, sizeof *p);
    if (!in || len < 4 || memcmp(in, "AUG", 3) != 0 || in[3] < '1' || in[3] > '3')
        return FMT_ECORRUPT;
    int version = in[3] - '0', v2 = version >= 2;
    if (len != (version == 3 ? FMT_AUG_RECORD_SIZE_AFFINE : FMT_AUG_RECORD_SIZE))
        return FMT_ECORRUPT;
    p->variant = fmt_le_get32(in + 4);
    p->source = fmt_le_get64(in + 8);
    p->src_w = fmt_le_get32(in + 16);
    p->src_h = fmt_le_get32(in + 20);
    p->crop_x = fmt_le_get32(in + 24);
    p->crop_y = fmt_le_get32(in + 28);
    p->crop_w = fmt_le_get32(in + 32);
    p->crop_h = fmt_le_get32(in + 36);
    uint32_t flags = fmt_le_get32(in + 40);
    p->flip = flags & 1u;
    p->gray = flags >> 1 & 1u;
    p->hue_on = flags >> 2 & 1u;
    p->rotate_bilinear = flags >> 3 & 1u;
    p->affine = flags >> 4 & 1u;
    p->brightness = bitsf(fmt_le_get32(in + 44));
    p->contrast = bitsf(fmt_le_get32(in + 48));
    p->saturation = bitsf(fmt_le_get32(in + 52));
    uint32_t last = fmt_le_get32(in + 60);
    if (v2) {
        p->filter = flags >> 8 & 0xffu;
        p->angle = bitsf(fmt_le_get32(in + 56));
        p->hue = bitsf(last);
    } else {
        p->filter = fmt_le_get32(in + 56);
    }
    int tail_ok = 1;
    if (version == 3) {
        p->affine_tx = (int32_t)fmt_le_get32(in + 64);
        p->affine_ty = (int32_t)fmt_le_get32(in + 68);
        p->affine_scale = bitsf(fmt_le_get32(in + 72));
        p->affine_shear_x = bitsf(fmt_le_get32(in + 76));
        p->affine_shear_y = bitsf(fmt_le_get32(in + 80));
        for (uint32_t k = 84; k < FMT_AUG_RECORD_SIZE_AFFINE; k++)
            tail_ok = tail_ok && in[k] == 0;
        /* translations within the largest side, a positive scale, shears short of 90 degrees
         * (whose tangent the inverse matrix takes) */
        int32_t lim = (int32_t)FMT_GEOM_MAX_SIDE;
        tail_ok = tail_ok && p->affine_tx >= -lim && p->affine_tx <= lim &&
                  p->affine_ty >= -lim && p->affine_ty <= lim && isfinite(p->affine_scale) &&
                  p->affine_scale > 0 && p->affine_scale <= 10 &&
                  isfinite(p->affine_shear_x) && fabsf(p->affine_shear_x) < 90.0f &&
                  isfinite(p->affine_shear_y) && fabsf(p->affine_shear_y) < 90.0f;
    }
    uint32_t known = version == 3 ? 0xff1fu : v2 ? 0xff0fu : 1u;
    if ((flags & ~known) != 0 || (version == 3) != (p->affine == 1) || !tail_ok ||
        (!v2 && last != 0) || !isfinite(p->hue) ||
        (!p->hue_on && p->hue != 0.0f) || !isfinite(p->angle) || fabsf(p->angle) > 180.0f ||
        (p->rotate_bilinear && p->angle == 0.0f && !p->affine) ||
        fabsf(p->hue) > 0.5f || p->filter >= FMT_FILTER_COUNT || !isfinite(p->brightness) ||
        !isfinite(p->contrast) || !isfinite(p->saturation) || p->brightness < 0 ||
        p->contrast < 0 || p->saturation < 0 || p->brightness > 2 || p->contrast > 2 ||
        p->saturation > 2)
        return FMT_ECORRUPT;
    return 0;
}
