/* transform.c - the read-time transform options of `shardbench read` and `train` (--rrc, --flip,
 * --interpolation, --dtype, --layout, --normalize, and the augmentations --color-jitter ..
 * --cutmix): parsed into an sb_tf_opts, then applied to the reader's shr_options (which checks
 * them and refuses bad combinations with its reason). */
#include "bench.h"

void sb_tf_init(sb_tf_opts *t)
{
    memset(t, 0, sizeof *t);
    shr_options o;
    shr_options_init(&o);
    memcpy(t->scale, o.rrc_scale, sizeof t->scale);
    memcpy(t->ratio, o.rrc_ratio, sizeof t->ratio);
    t->flip_p = o.flip_p;
    t->filter = o.filter;
    t->dtype = o.dtype;
    t->layout = o.layout;
    t->normalize = o.normalize;
    t->aug = o;
}

/* "V,V,..." : 1 to max numbers into v; their count, -1 when malformed */
static int parse_list(const char *s, double *v, int max)
{
    int n = 0;
    for (;;) {
        char *end;
        errno = 0;
        double x = strtod(s, &end);
        if (end == s || errno || !isfinite(x) || n == max)
            return -1;
        v[n++] = x;
        if (*end == '\0')
            return n;
        if (*end != ',')
            return -1;
        s = end + 1;
    }
}

/* --color-jitter .. --cutmix into t->aug, in torchvision's argument forms (a number v is
 * ColorJitter's [max(0, 1 - v), 1 + v], hue's [-v, v]; RandomRotation's and RandomAffine's
 * degrees [-d, d]; shear's [-s, s]). The reader checks the values at open. */
static int aug_option(sb_tf_opts *t, int opt, const char *v, const char *usage)
{
    shr_options *o = &t->aug;
    double x[5];
    int n;
    t->augment++;
    switch (opt) {
    case OPT_JITTER:
        if (parse_list(v, x, 4) != 4 || x[0] < 0 || x[1] < 0 || x[2] < 0 || x[3] < 0 ||
            x[3] > 0.5)
            return sb_usage_error(usage, "bad --color-jitter '%s' (B,C,S,H: four numbers >= 0, "
                               "H <= 0.5; e.g. 0.4,0.4,0.4,0.1)", v);
        {
            double *r[3] = {o->jitter_brightness, o->jitter_contrast, o->jitter_saturation};
            for (int k = 0; k < 3; k++) {
                r[k][0] = x[k] < 1 ? 1 - x[k] : 0;
                r[k][1] = 1 + x[k];
            }
            o->jitter_hue[0] = -x[3];
            o->jitter_hue[1] = x[3];
        }
        return 0;
    case OPT_GRAYSCALE:         /* the probabilities: the library's ranges (its options table) */
        return sb_parse_row(usage, "--grayscale", "grayscale_p", v, &o->grayscale_p);
    case OPT_ERASE:
        return sb_parse_row(usage, "--erase", "erase_p", v, &o->erase_p);
    case OPT_ROTATION:
        if (parse_list(v, x, 1) != 1 || x[0] < 0)
            return sb_usage_error(usage, "bad --rotation '%s' (degrees >= 0)", v);
        o->rotation = 1;
        o->rotation_degrees[0] = -x[0];
        o->rotation_degrees[1] = x[0];
        return 0;
    case OPT_AFFINE:
        n = parse_list(v, x, 5);
        if (n < 1 || n == 3 || x[0] < 0 || (n >= 2 && !(x[1] >= 0 && x[1] <= 1)) ||
            (n >= 4 && !(x[2] > 0 && x[2] <= x[3])) || (n == 5 && x[4] < 0))
            return sb_usage_error(usage, "bad --affine '%s' (D[,T[,SMIN,SMAX[,SH]]]: degrees >= 0, "
                               "translate 0..1, 0 < SMIN <= SMAX, shear >= 0)", v);
        o->affine = 1;
        o->affine_degrees[0] = -x[0];
        o->affine_degrees[1] = x[0];
        if (n >= 2)
            o->affine_translate[0] = o->affine_translate[1] = x[1];
        if (n >= 4) {
            o->affine_scale[0] = x[2];
            o->affine_scale[1] = x[3];
        }
        if (n == 5) {
            o->affine_shear[0] = -x[4];
            o->affine_shear[1] = x[4];
        }
        return 0;
    case OPT_AUTO_AUGMENT:
        if (strcmp(v, "ta_wide") == 0)
            o->auto_augment = SHR_AUTO_AUGMENT_TRIVIAL_WIDE;
        else if (strcmp(v, "rand_augment") == 0)
            o->auto_augment = SHR_AUTO_AUGMENT_RAND;
        else if (strcmp(v, "imagenet") == 0)
            o->auto_augment = SHR_AUTO_AUGMENT_IMAGENET;
        else
            return sb_usage_error(usage, "bad --auto-augment '%s' (ta_wide, rand_augment or "
                               "imagenet)", v);
        return 0;
    case OPT_MIXUP:
    case OPT_CUTMIX:
        if (parse_list(v, x, 1) != 1 || !(x[0] > 0))
            return sb_usage_error(usage, opt == OPT_MIXUP ? "bad --mixup '%s' (alpha > 0)"
                                                       : "bad --cutmix '%s' (alpha > 0)", v);
        *(opt == OPT_MIXUP ? &o->mixup_alpha : &o->cutmix_alpha) = x[0];
        return 0;
    }
    t->augment--;
    return sb_usage_error(usage, "unknown option '%s'", v);
}

/* "SMIN:SMAX" or "SMIN:SMAX:RMIN:RMAX": 2 or 4 numbers, -1 otherwise. */
static int parse_range(const char *s, double v[4])
{
    int n = 0;
    while (n < 4) {
        char *end;
        errno = 0;
        v[n] = strtod(s, &end);
        if (end == s || errno || !isfinite(v[n]))
            return -1;
        n++;
        if (*end == '\0')
            break;
        if (*end != ':')
            return -1;
        s = end + 1;
    }
    return n == 2 || n == 4 ? n : -1;
}

/* "M,M,M/S,S,S" (1 to 4 channels, as many stds as means) */
static int parse_stats(const char *s, float mean[4], float std[4])
{
    const char *slash = strchr(s, '/');
    if (!slash)
        return -1;
    for (int half = 0; half < 2; half++) {
        const char *p = half ? slash + 1 : s;
        float *out = half ? std : mean;
        int n = 0;
        for (;;) {
            char *end;
            errno = 0;
            double v = strtod(p, &end);
            if (end == p || errno || !isfinite(v) || n == 4)
                return -1;
            out[n++] = (float)v;
            if (*end == ',') {
                p = end + 1;
                continue;
            }
            if (*end != (half ? '\0' : '/'))
                return -1;
            break;
        }
        for (int c = n; c < 4; c++)
            out[c] = out[n - 1];
    }
    return 0;
}

/* The value of an option whose argument is optional: --opt=VALUE, or the next word when it looks
 * like one (accept says so), taken from argv. NULL when there is none. */
static const char *optional_value(int argc, char **argv, int (*accept)(const char *))
{
    if (optarg)
        return optarg;
    if (optind < argc && accept(argv[optind]))
        return argv[optind++];
    return NULL;
}

static int looks_like_range(const char *s)
{
    double v[4];
    return parse_range(s, v) > 0;
}

static int looks_like_stats(const char *s)
{
    float m[4], d[4];
    return strcmp(s, "dataset") == 0 || parse_stats(s, m, d) == 0;
}

int sb_tf_option(sb_tf_opts *t, int opt, int argc, char **argv, const char *usage)
{
    const char *v;
    double r[4];
    switch (opt) {
    case OPT_RRC:
        t->rrc = 1;
        v = optional_value(argc, argv, looks_like_range);
        if (v) {
            int n = parse_range(v, r);
            if (n < 0 || !(r[0] > 0 && r[0] <= r[1] && r[1] <= 1) ||
                (n == 4 && !(r[2] > 0 && r[2] <= r[3])))
                return sb_usage_error(usage, "bad --rrc '%s' (SMIN:SMAX[:RMIN:RMAX], 0 < SMIN <= "
                                   "SMAX <= 1, 0 < RMIN <= RMAX; e.g. 0.08:1:0.75:1.3333)", v);
            t->scale[0] = r[0];
            t->scale[1] = r[1];
            if (n == 4) {
                t->ratio[0] = r[2];
                t->ratio[1] = r[3];
            }
        }
        return 0;
    case OPT_FLIP:
        t->flip = 1;
        return optarg ? sb_parse_row(usage, "--flip", "flip_p", optarg, &t->flip_p) : 0;
    /* the choices: the library's options table's names (sb_parse_choice), and the CLI's short
     * forms of the dtypes */
    case OPT_INTERP: {
        int k, rc = sb_parse_choice(usage, "--interpolation", "filter", optarg, NULL, 0, &k);
        if (rc)
            return rc;
        t->filter = (shr_filter)k;
        return 0;
    }
    case OPT_DTYPE: {
        static const char *const alias[] = {"u8", "uint8", "f32", "float32", "f16", "float16",
                                            NULL};
        int k, rc = sb_parse_choice(usage, "--dtype", "dtype", optarg, alias, 0, &k);
        if (rc)
            return rc;
        t->dtype_given = 1;
        t->dtype = (shr_dtype)k;
        return 0;
    }
    case OPT_LAYOUT: {
        int k, rc = sb_parse_choice(usage, "--layout", "layout", optarg, NULL, 1, &k);
        if (rc)
            return rc;
        t->layout = (shr_layout)k;
        return 0;
    }
    case OPT_NORMALIZE:
        v = optional_value(argc, argv, looks_like_stats);
        if (!v || strcmp(v, "dataset") == 0) {
            t->normalize = SHR_NORM_DATASET;
        } else if (parse_stats(v, t->mean, t->std) == 0) {
            t->normalize = SHR_NORM_GIVEN;
        } else {
            return sb_usage_error(usage, "bad --normalize '%s' (dataset, or M,M,M/S,S,S on the "
                               "0..255 scale)", v);
        }
        return 0;
    case OPT_JITTER: case OPT_GRAYSCALE: case OPT_ROTATION: case OPT_AFFINE:
    case OPT_AUTO_AUGMENT: case OPT_ERASE: case OPT_MIXUP: case OPT_CUTMIX:
        return aug_option(t, opt, optarg, usage);
    }
    return sb_usage_error(usage, "unknown option '%s'", argv[optind - 1]);
}

size_t sb_elem_size(shr_dtype d)
{
    return d == SHR_DTYPE_F32 ? 4 : d == SHR_DTYPE_F16 ? 2 : 1;
}

int sb_tf_any(const sb_tf_opts *t)
{
    return t->rrc || t->flip || t->dtype != SHR_DTYPE_U8 || t->layout != SHR_LAYOUT_NHWC ||
           t->normalize != SHR_NORM_NONE || t->augment;
}

void sb_tf_apply(const sb_tf_opts *t, shr_options *o)
{
    o->rrc = t->rrc;
    memcpy(o->rrc_scale, t->scale, sizeof o->rrc_scale);
    memcpy(o->rrc_ratio, t->ratio, sizeof o->rrc_ratio);
    o->filter = t->filter;
    if (t->flip) {
        o->flip = 1;
        o->flip_p = t->flip_p;
    }
    /* normalised values need floats: --normalize alone means float32 (an explicit --dtype u8
     * reaches the reader, which refuses it with its reason) */
    o->dtype = t->normalize != SHR_NORM_NONE && !t->dtype_given ? SHR_DTYPE_F32 : t->dtype;
    o->layout = t->layout;
    o->normalize = t->normalize;
    memcpy(o->mean, t->mean, sizeof o->mean);
    memcpy(o->std, t->std, sizeof o->std);
    /* the augmentations (--color-jitter .. --cutmix), numbers and arrays alike */
    const shr_options *a = &t->aug;
#define TAKE(f) memcpy(&o->f, &a->f, sizeof o->f)
    TAKE(jitter_brightness), TAKE(jitter_contrast), TAKE(jitter_saturation), TAKE(jitter_hue);
    TAKE(grayscale_p), TAKE(erase_p), TAKE(rotation), TAKE(rotation_degrees);
    TAKE(affine), TAKE(affine_degrees), TAKE(affine_translate), TAKE(affine_scale);
    TAKE(affine_shear), TAKE(auto_augment), TAKE(mixup_alpha), TAKE(cutmix_alpha);
#undef TAKE
}

const char *sb_tf_describe(const sb_tf_opts *t, char *buf, size_t len)
{
    static const char *const filters[] = {"nearest", "box", "bilinear", "hamming", "bicubic",
                                          "lanczos"};
    shr_options o;
    shr_options_init(&o);
    sb_tf_apply(t, &o);
    int n = 0;
    buf[0] = '\0';
    if (t->rrc)
        n += snprintf(buf + n, len - (size_t)n, "RandomResizedCrop %g:%g ratio %g:%g %s, ",
                      t->scale[0], t->scale[1], t->ratio[0], t->ratio[1], filters[t->filter]);
    if (t->flip && (size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n, "flip p=%g, ", t->flip_p);
    const shr_options *a = &t->aug;
    static const char *const policies[] = {"", "TrivialAugmentWide", "RandAugment",
                                           "AutoAugment(IMAGENET)"};
    if (a->rotation && (size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n, "RandomRotation %g, ", a->rotation_degrees[1]);
    if (a->affine && (size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n, "RandomAffine %g, ", a->affine_degrees[1]);
    if (a->auto_augment && (unsigned)a->auto_augment < 4 && (size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n, "%s, ", policies[a->auto_augment]);
    if ((a->jitter_brightness[1] != 1 || a->jitter_contrast[1] != 1 ||
         a->jitter_saturation[1] != 1 || a->jitter_hue[1] != 0) && (size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n, "ColorJitter %g,%g,%g,%g, ",
                      a->jitter_brightness[1] - 1, a->jitter_contrast[1] - 1,
                      a->jitter_saturation[1] - 1, a->jitter_hue[1]);
    if (a->grayscale_p > 0 && (size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n, "RandomGrayscale %g, ", a->grayscale_p);
    if (a->erase_p > 0 && (size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n, "RandomErasing %g, ", a->erase_p);
    if (a->mixup_alpha > 0 && (size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n, "MixUp %g, ", a->mixup_alpha);
    if (a->cutmix_alpha > 0 && (size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n, "CutMix %g, ", a->cutmix_alpha);
    if ((size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n, "%s %s%s",
                      o.dtype == SHR_DTYPE_F32 ? "float32" : o.dtype == SHR_DTYPE_F16 ? "float16"
                                                                                     : "uint8",
                      o.layout == SHR_LAYOUT_NCHW ? "NCHW" : "NHWC",
                      o.normalize == SHR_NORM_DATASET ? " normalised (dataset statistics)"
                      : o.normalize == SHR_NORM_GIVEN ? " normalised (given statistics)" : "");
    return buf;
}
