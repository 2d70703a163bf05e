/* test_options_table.c - the numeric options and the choices are one table
 * (reader/options.def, shr_option_table): every row's default is what shr_options_init sets,
 * every row's range check accepts its bounds and refuses the value just outside them (and NaN;
 * a pair, also min > max where it is ordered; a choice, a value without a name), and the
 * refusal names the public name, the field and the range or names (shr_option_check and
 * shr_option_choose, the row's check for a front end, in the same words). A row whose check is
 * removed, loosened or tightened, or whose default drifts from the table, fails here; so does
 * a row dropped from the table (the fields it must describe are listed). */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "reader.h"
#include "shardread.h"

#include "testutil.h"

/* what the table must say, written out here once more: a row dropped from options.def, or
 * whose default, range or form changes, fails test_rows_present until this list is changed
 * with it (the bounds tests below take the ranges from the table) */
static const struct {
    const char *field;
    int count, ordered;
    shr_opt_form form;
    double def0, def1, lo, hi;
} g_rows[] = {
    {"batch_size", 1, 0, SHR_OPT_AT_LEAST, 256, 256, 1, 0},
    {"quasi_window", 1, 0, SHR_OPT_AT_LEAST, 4, 4, 1, 0},
    {"threads", 1, 0, SHR_OPT_RANGE, 2, 2, 1, 1024},
    {"prefetch", 1, 0, SHR_OPT_ZERO_OR_RANGE, 0, 0, 2, 65536},
    {"flip_p", 1, 0, SHR_OPT_RANGE, 0.5, 0.5, 0, 1},
    {"grayscale_p", 1, 0, SHR_OPT_RANGE, 0, 0, 0, 1},
    {"erase_p", 1, 0, SHR_OPT_RANGE, 0, 0, 0, 1},
    {"min_box_area_fraction", 1, 0, SHR_OPT_RANGE, 0, 0, 0, 1},
    {"mixup_alpha", 1, 0, SHR_OPT_BELOW, 0, 0, 0, 1e6},
    {"cutmix_alpha", 1, 0, SHR_OPT_BELOW, 0, 0, 0, 1e6},
    {"aa_bins", 1, 0, SHR_OPT_RANGE, 31, 31, 2, 1024},
    {"aa_num_ops", 1, 0, SHR_OPT_RANGE, 2, 2, 1, 4},
    {"aa_magnitude", 1, 0, SHR_OPT_RANGE, 9, 9, 0, 1023},
    {"jitter_brightness", 2, 1, SHR_OPT_BELOW, 1, 1, 0, INFINITY},
    {"jitter_contrast", 2, 1, SHR_OPT_BELOW, 1, 1, 0, INFINITY},
    {"jitter_saturation", 2, 1, SHR_OPT_BELOW, 1, 1, 0, INFINITY},
    {"jitter_hue", 2, 1, SHR_OPT_RANGE, 0, 0, -0.5, 0.5},
    {"rrc_scale", 2, 1, SHR_OPT_ABOVE, 0.08, 1, 0, 1},
    {"rrc_ratio", 2, 1, SHR_OPT_OPEN, 3.0 / 4.0, 4.0 / 3.0, 0, 1e6},
    {"rotation_degrees", 2, 1, SHR_OPT_RANGE, 0, 0, -1e6, 1e6},
    {"affine_degrees", 2, 1, SHR_OPT_RANGE, 0, 0, -1e6, 1e6},
    {"affine_translate", 2, 0, SHR_OPT_RANGE, 0, 0, 0, 1},
    {"affine_scale", 2, 1, SHR_OPT_OPEN, 1, 1, 0, 1e6},
    {"affine_shear", 4, 1, SHR_OPT_RANGE, 0, 0, -1e6, 1e6},
    {"erase_scale", 2, 1, SHR_OPT_RANGE, 0.02, 0.33, 0, 1},
    {"erase_ratio", 2, 1, SHR_OPT_OPEN, 0.3, 3.3, 0, 1e6},
    {"scale_range", 2, 1, SHR_OPT_ABOVE, 0.1, 2.0, 0, 16},
    {"cache_limit", 1, 0, SHR_OPT_AT_LEAST, 0, 0, 0, 0},
    {"prefetch_shards", 1, 0, SHR_OPT_AT_LEAST, 0, 0, 0, 0},
    {"seed", 1, 0, SHR_OPT_AT_LEAST, 0, 0, 0, 0},
    {"world", 1, 0, SHR_OPT_AT_LEAST, 1, 1, 1, 0},
    {"num_classes", 1, 0, SHR_OPT_AT_LEAST, 0, 0, 0, 0},
    /* the choices: hi is the last value */
    {"order", 1, 0, SHR_OPT_CHOICE, SHR_ORDER_SEQUENTIAL, SHR_ORDER_SEQUENTIAL, 0, 2},
    {"uneven", 1, 0, SHR_OPT_CHOICE, SHR_UNEVEN_PAD, SHR_UNEVEN_PAD, 0, 1},
    {"on_error", 1, 0, SHR_OPT_CHOICE, SHR_ON_ERROR_FAIL, SHR_ON_ERROR_FAIL, 0, 2},
    {"access", 1, 0, SHR_OPT_CHOICE, SHR_ACCESS_MMAP, SHR_ACCESS_MMAP, 0, 2},
    {"filter", 1, 0, SHR_OPT_CHOICE, SHR_FILTER_BILINEAR, SHR_FILTER_BILINEAR, 0, 5},
    {"dtype", 1, 0, SHR_OPT_CHOICE, SHR_DTYPE_U8, SHR_DTYPE_U8, 0, 2},
    {"layout", 1, 0, SHR_OPT_CHOICE, SHR_LAYOUT_NHWC, SHR_LAYOUT_NHWC, 0, 1},
    {"aug_interpolation", 1, 0, SHR_OPT_CHOICE, SHR_FILTER_NEAREST, SHR_FILTER_NEAREST, 0, 2},
    {"auto_augment", 1, 0, SHR_OPT_CHOICE, SHR_AUTO_AUGMENT_NONE, SHR_AUTO_AUGMENT_NONE, 0, 3},
};

/* each choice's names by value, as the Loader takes them ("" a value not accepted) */
static const struct {
    const char *field, *names;
} g_choices[] = {
    {"order", "sequential random quasi"},
    {"uneven", "pad drop"},
    {"on_error", "fail skip substitute"},
    {"access", "mmap pread direct"},
    {"filter", "nearest box bilinear hamming bicubic lanczos"},
    {"dtype", "uint8 float32 float16"},
    {"layout", "NHWC NCHW"},
    {"aug_interpolation", "nearest - bilinear"},
    {"auto_augment", "none trivialaugment_wide randaugment imagenet"},
};

#define NROWS (sizeof g_rows / sizeof g_rows[0])

#define FIELD_COUNT(field) ((int)(sizeof o->field / sizeof o->field[0]))

/* the field named f of o, read and written through the table's rows: read, its values into
 * v[4] (a scalar: in each; a pair: [min, max] twice; two pairs: x, then y); written, each of its
 * pairs set to [v[0], v[1]] (a scalar: to v[0]) */
static void get_field(const shr_options *o, const char *f, double v[4])
{
#define SHR_OPT(field, ctype, ...)                                                  \
    if (strcmp(f, #field) == 0) {                                                   \
        v[0] = v[1] = v[2] = v[3] = (double)o->field;                               \
        return;                                                                     \
    }
#define SHR_OPT_PAIR(field, ...)                                                    \
    if (strcmp(f, #field) == 0) {                                                   \
        for (int k = 0; k < 4; k++)                                                 \
            v[k] = o->field[k % FIELD_COUNT(field)];                                \
        return;                                                                     \
    }
#define SHR_OPT_CHOICE(field, ...)                                                  \
    if (strcmp(f, #field) == 0) {                                                   \
        v[0] = v[1] = v[2] = v[3] = (double)o->field;                               \
        return;                                                                     \
    }
#include "options.def"
#undef SHR_OPT
#undef SHR_OPT_PAIR
#undef SHR_OPT_CHOICE
    ck_abort_msg("no field %s", f);
}

static void set_field(shr_options *o, const char *f, const double v[2])
{
#define SHR_OPT(field, ctype, ...)                                                  \
    if (strcmp(f, #field) == 0) {                                                   \
        o->field = (ctype)v[0];                                                     \
        return;                                                                     \
    }
#define SHR_OPT_PAIR(field, ...)                                                    \
    if (strcmp(f, #field) == 0) {                                                   \
        for (int k = 0; k < FIELD_COUNT(field); k++)                                \
            o->field[k] = v[k % 2];                                                 \
        return;                                                                     \
    }
#define SHR_OPT_CHOICE(field, ctype, ...)                                           \
    if (strcmp(f, #field) == 0) {                                                   \
        o->field = (ctype)v[0];                                                     \
        return;                                                                     \
    }
#include "options.def"
#undef SHR_OPT
#undef SHR_OPT_PAIR
#undef SHR_OPT_CHOICE
    ck_abort_msg("no field %s", f);
}

/* options under which the row's condition holds and its bounds are otherwise valid: order
 * quasi (quasi_window), RandAugment (aa_bins, aa_num_ops, aa_magnitude; magnitude 0 and
 * 1024 bins, so that each can take its bounds), a float dtype (MixUp and CutMix need one), rotation, affine, erasing and the
 * RandomResizedCrop on (an output size for it); scale_range's scale jitter in place of the
 * RandomResizedCrop, which it excludes */
static void base(shr_options *o, const char *field)
{
    shr_options_init(o);
    o->order = SHR_ORDER_QUASI;
    o->auto_augment = SHR_AUTO_AUGMENT_RAND;
    o->aa_magnitude = 0;
    o->aa_bins = 1024;
    o->dtype = SHR_DTYPE_F32;
    o->rotation = o->affine = 1;
    o->erase_p = 0.5;
    o->width = o->height = 16;
    if (field && strcmp(field, "scale_range") == 0)
        o->scale = SHR_SCALE_JITTER;
    else
        o->rrc = 1;
}

static int check2(const shr_option_info *r, double a, double b, fmt_msg *m)
{
    shr_options o;
    base(&o, r->field);
    set_field(&o, r->field, (const double[2]){a, b});
    m->text[0] = '\0';
    return shr_check_options(&o, m);
}

static int check(const shr_option_info *r, double v, fmt_msg *m)
{
    return check2(r, v, v, m);
}

/* the value [a, b] as the field holds it (a scalar: a, in its C type) */
static void held(const shr_option_info *r, double a, double b, double v[4])
{
    shr_options o;
    base(&o, r->field);
    set_field(&o, r->field, (const double[2]){a, b});
    get_field(&o, r->field, v);
}

static void accepts(const shr_option_info *r, double a, double b)
{
    fmt_msg m;
    int rc = check2(r, a, b, &m);
    ck_assert_msg(rc == 0, "%s = [%.17g, %.17g] refused: %s", r->field, a, b, m.text);
    /* shr_option_check, the row's check for a front end, agrees */
    double v[4];
    shr_msg why = {"x"};
    held(r, a, b, v);
    ck_assert_int_eq(shr_option_check(r, NULL, v, &why), 0);
    ck_assert_str_eq(why.text, "x");
}

static void refuses(const shr_option_info *r, double a, double b)
{
    fmt_msg m;
    int rc = check2(r, a, b, &m);
    ck_assert_msg(rc == SHR_EINVAL, "%s = [%.17g, %.17g] accepted (%d)", r->field, a, b, rc);
    /* shr_option_check refuses it in the same words */
    double v[4];
    shr_msg why;
    held(r, a, b, v);
    ck_assert_int_eq(shr_option_check(r, NULL, v, &why), SHR_EINVAL);
    ck_assert_str_eq(why.text, m.text);
    /* the public name, the field, and the words of the range */
    ck_assert_msg(strncmp(m.text, r->name, strlen(r->name)) == 0, "%s: %s", r->field, m.text);
    ck_assert_msg(strstr(m.text, r->field) != NULL, "%s: %s", r->field, m.text);
    ck_assert_msg(strstr(m.text, " must ") != NULL, "%s: %s", r->field, m.text);
}

/* the next value toward `to` in the field's type */
static double step(const shr_option_info *r, double v, double to)
{
    return r->is_float ? nextafter(v, to) : to > v ? v + 1 : v - 1;
}

START_TEST(test_rows_present)
{
    size_t n = 0;
    const shr_option_info *t = shr_option_table(&n);
    ck_assert_ptr_nonnull(t);
    ck_assert_uint_eq(n, NROWS);
    for (size_t k = 0; k < NROWS; k++) {
        size_t i = 0;
        while (i < n && strcmp(t[i].field, g_rows[k].field) != 0)
            i++;
        ck_assert_msg(i < n, "%s has no row", g_rows[k].field);
        const shr_option_info *r = &t[i];
        ck_assert_ptr_eq(shr_option_find(g_rows[k].field), r);
        ck_assert_msg(r->count == g_rows[k].count && r->ordered == g_rows[k].ordered &&
                      r->form == g_rows[k].form && r->def[0] == g_rows[k].def0 &&
                      r->def[1] == g_rows[k].def1 && r->lo == g_rows[k].lo &&
                      (r->form == SHR_OPT_AT_LEAST || r->hi == g_rows[k].hi),
                      "%s: the table's row changed", r->field);
    }
    for (size_t i = 0; i < n; i++) {
        ck_assert_ptr_nonnull(t[i].name);
        ck_assert_ptr_nonnull(t[i].when);
        ck_assert_msg(t[i].doc && t[i].doc[0], "%s has no doc", t[i].field);
        ck_assert(t[i].count == 1 || ((t[i].count == 2 || t[i].count == 4) && t[i].is_float));
        for (size_t j = 0; j < i; j++)
            ck_assert_str_ne(t[i].field, t[j].field);
    }
}
END_TEST

START_TEST(test_defaults)
{
    shr_options o;
    shr_options_init(&o);
    size_t n = 0;
    const shr_option_info *t = shr_option_table(&n);
    for (size_t i = 0; i < n; i++) {
        double v[4];
        get_field(&o, t[i].field, v);
        ck_assert_msg(v[0] == t[i].def[0] && v[1] == t[i].def[1] && v[2] == t[i].def[0] &&
                      v[3] == t[i].def[1], "%s: init [%.17g, %.17g, %.17g, %.17g], table "
                      "[%.17g, %.17g]", t[i].field, v[0], v[1], v[2], v[3], t[i].def[0],
                      t[i].def[1]);
        /* the default is a value the check accepts */
        accepts(&t[i], t[i].def[0], t[i].def[1]);
    }
    fmt_msg m;
    base(&o, NULL);
    ck_assert_msg(shr_check_options(&o, &m) == 0, "%s", m.text);
    base(&o, "scale_range");
    ck_assert_msg(shr_check_options(&o, &m) == 0, "%s", m.text);
}
END_TEST

START_TEST(test_bounds)
{
    size_t n = 0;
    const shr_option_info *t = shr_option_table(&n);
    for (size_t i = 0; i < n; i++) {
        const shr_option_info *r = &t[i];
        int lo_open = r->form == SHR_OPT_ABOVE || r->form == SHR_OPT_OPEN;
        int hi_open = r->form == SHR_OPT_BELOW || r->form == SHR_OPT_OPEN;
        int no_hi = r->form == SHR_OPT_AT_LEAST;
        /* the values just inside and just outside each bound */
        double lo_in = lo_open ? step(r, r->lo, INFINITY) : r->lo;
        double lo_out = lo_open ? r->lo : step(r, r->lo, -INFINITY);
        double hi_in = no_hi ? (r->is_float ? DBL_MAX : UINT32_MAX)
                             : hi_open ? step(r, r->hi, -INFINITY) : r->hi;
        double hi_out = hi_open ? r->hi : step(r, r->hi, INFINITY);
        accepts(r, lo_in, lo_in);
        accepts(r, hi_in, hi_in);
        accepts(r, lo_in, hi_in);
        if (r->is_float || r->lo > 0 || lo_open) {
            refuses(r, lo_out, r->count >= 2 ? hi_in : lo_out);
            if (r->count >= 2)
                refuses(r, lo_in, lo_out);
        }
        if (!no_hi) {
            refuses(r, r->count >= 2 ? lo_in : hi_out, hi_out);
            if (r->count >= 2)
                refuses(r, hi_out, hi_in);
        }
        if (r->form == SHR_OPT_ZERO_OR_RANGE) {
            accepts(r, 0, 0);
            ck_assert_double_gt(r->lo, 1);      /* else "just below lo" would be 0 */
        }
        if (r->count >= 2) {
            if (r->ordered)
                refuses(r, hi_in, lo_in);       /* min > max */
            else
                accepts(r, hi_in, lo_in);
            refuses(r, lo_in, NAN);
        }
        if (r->is_float)
            refuses(r, NAN, NAN);
        else
            ck_assert_double_ge(r->lo, 0);
    }
}
END_TEST

START_TEST(test_messages)
{
    static const struct {
        const char *field;
        double v;
        const char *want;
    } cases[] = {
        {"grayscale_p", 1.5, "grayscale (grayscale_p) must be in 0..1, not 1.5"},
        {"flip_p", -0.25, "flip (flip_p) must be in 0..1, not -0.25"},
        {"batch_size", 0, "batch_size must be at least 1, not 0"},
        {"threads", 1025, "threads must be in 1..1024, not 1025"},
        {"prefetch", 1, "prefetch must be 0 or in 2..65536, not 1"},
        {"world", 0, "world must be at least 1, not 0"},
        {"mixup_alpha", 1e6, "mixup (mixup_alpha) must be at least 0 and below 1000000, not "
                             "1000000"},
        {"aa_bins", 1, "auto_augment num_magnitude_bins (aa_bins) must be in 2..1024, not 1"},
        {"aa_num_ops", 5, "auto_augment num_ops (aa_num_ops) must be in 1..4, not 5"},
        {"erase_p", 1.1, "erasing p (erase_p) must be in 0..1, not 1.1"},
        {"jitter_hue", 0.75, "color_jitter hue (jitter_hue) must satisfy -0.5 <= min <= max <= "
                             "0.5, not [0.75, 0.75]"},
        {"jitter_brightness", INFINITY, "color_jitter brightness (jitter_brightness) must "
                                        "satisfy 0 <= min <= max < inf, not [inf, inf]"},
        {"rrc_scale", 0, "rrc (rrc_scale) must satisfy 0 < min <= max <= 1, not [0, 0]"},
        {"affine_scale", 0, "affine scale (affine_scale) must satisfy 0 < min <= max < "
                            "1000000, not [0, 0]"},
        {"affine_translate", 2, "affine translate (affine_translate) must be two values, each "
                                "in 0..1, not [2, 2]"},
        {"order", 3, "order must be one of sequential, random, quasi, not 3"},
        {"filter", 6, "interpolation (filter) must be one of nearest, box, bilinear, hamming, "
                      "bicubic, lanczos, not 6"},
        {"aug_interpolation", SHR_FILTER_BOX, "augment_interpolation (aug_interpolation) must "
                                              "be one of nearest, bilinear, not 1"},
        {"layout", 2, "layout must be one of NHWC, NCHW, not 2"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const shr_option_info *r = shr_option_find(cases[k].field);
        ck_assert_ptr_nonnull(r);
        fmt_msg m;
        ck_assert_int_eq(check(r, cases[k].v, &m), SHR_EINVAL);
        ck_assert_str_eq(m.text, cases[k].want);
    }
}
END_TEST

/* the shear's two pairs, x then y, each checked: either one outside refuses, naming all four */
START_TEST(test_two_pairs)
{
    shr_options o;
    fmt_msg m;
    base(&o, "affine_shear");
    const double ok[4] = {1, 2, -1e6, 1e6};
    memcpy(o.affine_shear, ok, sizeof ok);
    ck_assert_msg(shr_check_options(&o, &m) == 0, "%s", m.text);
    static const double bad[][4] = {{0, 0, 2, 1}, {0, 0, -1e6, 1.5e6}, {2, 1, 0, 0},
                                    {NAN, 0, 0, 0}, {0, 0, 0, NAN}};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        memcpy(o.affine_shear, bad[k], sizeof bad[k]);
        ck_assert_int_eq(shr_check_options(&o, &m), SHR_EINVAL);
        static const char want[] = "affine shear (affine_shear) must be 2 (min, max) pairs, "
                                   "each satisfying -1000000 <= min <= max <= 1000000, not [";
        ck_assert_msg(strncmp(m.text, want, strlen(want)) == 0, "%s", m.text);
    }
    memcpy(o.affine_shear, bad[0], sizeof bad[0]);
    ck_assert_int_eq(shr_check_options(&o, &m), SHR_EINVAL);
    ck_assert_str_eq(m.text, "affine shear (affine_shear) must be 2 (min, max) pairs, each "
                             "satisfying -1000000 <= min <= max <= 1000000, not [0, 0, 2, 1]");
    o.affine = 0;               /* its condition: affine given */
    ck_assert_msg(shr_check_options(&o, &m) == 0, "%s", m.text);
}
END_TEST

/* a conditional row is checked only where its condition holds (its `when`) */
START_TEST(test_conditions)
{
    shr_options o;
    fmt_msg m;
    shr_options_init(&o);
    o.quasi_window = 0;             /* not the quasi order: unused */
    o.aa_num_ops = 9;               /* no auto_augment: unused */
    o.aa_bins = 1;
    o.rrc_scale[0] = 2;             /* no rrc, rotation, affine, erasing, scale jitter */
    o.rotation_degrees[0] = 1e9;
    o.affine_scale[1] = 0;
    o.erase_ratio[0] = -1;
    o.scale_range[1] = 17;
    ck_assert_msg(shr_check_options(&o, &m) == 0, "%s", m.text);
    o.auto_augment = SHR_AUTO_AUGMENT_TRIVIAL_WIDE;     /* bins, not num_ops */
    ck_assert_int_eq(shr_check_options(&o, &m), SHR_EINVAL);
    ck_assert_ptr_nonnull(strstr(m.text, "num_magnitude_bins"));
    o.aa_bins = 31;
    ck_assert_msg(shr_check_options(&o, &m) == 0, "%s", m.text);
    o.order = SHR_ORDER_QUASI;
    ck_assert_int_eq(shr_check_options(&o, &m), SHR_EINVAL);
    ck_assert_str_eq(m.text, "quasi_window must be at least 1, not 0");
}
END_TEST

/* shr_option_check: a front end's keyword for a row's field, refused in its own name with the
 * row's range (the Loader's max_threads sets threads with threads='auto') */
START_TEST(test_option_check)
{
    const shr_option_info *r = shr_option_find("threads");
    ck_assert_ptr_nonnull(r);
    ck_assert_ptr_null(shr_option_find("no_such_field"));
    shr_msg why;
    ck_assert_int_eq(shr_option_check(r, "max_threads", (const double[1]){2000}, &why),
                     SHR_EINVAL);
    ck_assert_str_eq(why.text, "max_threads (threads) must be in 1..1024, not 2000");
    ck_assert_int_eq(shr_option_check(r, NULL, (const double[1]){0}, &why), SHR_EINVAL);
    ck_assert_str_eq(why.text, "threads must be in 1..1024, not 0");
    snprintf(why.text, sizeof why.text, "untouched");
    ck_assert_int_eq(shr_option_check(r, "max_threads", (const double[1]){1024}, &why), 0);
    ck_assert_str_eq(why.text, "untouched");
    ck_assert_int_eq(shr_option_check(r, NULL, (const double[1]){NAN}, NULL), SHR_EINVAL);
    ck_assert_int_eq(shr_option_check(NULL, NULL, (const double[1]){1}, &why), SHR_EINVAL);
    ck_assert_str_eq(why.text, "no row or value given");
    ck_assert_int_eq(shr_option_check(r, NULL, NULL, &why), SHR_EINVAL);
}
END_TEST

/* a choice's names, by value: each accepted (by the open's check and by name through
 * shr_option_choose, which gives its value), "" refused; a name not the table's refused with
 * the names */
START_TEST(test_choices)
{
    size_t n = 0;
    const shr_option_info *t = shr_option_table(&n);
    size_t seen = 0;
    for (size_t i = 0; i < n; i++)
        seen += t[i].form == SHR_OPT_CHOICE;
    ck_assert_uint_eq(seen, sizeof g_choices / sizeof g_choices[0]);
    for (size_t k = 0; k < sizeof g_choices / sizeof g_choices[0]; k++) {
        const shr_option_info *r = shr_option_find(g_choices[k].field);
        ck_assert_ptr_nonnull(r);
        ck_assert_int_eq(r->form, SHR_OPT_CHOICE);
        ck_assert_ptr_nonnull(r->choices);
        char names[256] = "";
        int count = 0;
        for (; r->choices[count]; count++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s",
                     count ? " " : "", r->choices[count][0] ? r->choices[count] : "-");
        ck_assert_str_eq(names, g_choices[k].names);
        ck_assert_int_eq(count, (int)r->hi + 1);
        shr_msg why;
        int value = -1;
        for (int v = 0; v < count; v++) {
            if (r->choices[v][0]) {
                accepts(r, v, v);
                ck_assert_int_eq(shr_option_choose(r, NULL, r->choices[v], &value, &why), 0);
                ck_assert_int_eq(value, v);
            } else {
                refuses(r, v, v);
            }
        }
        refuses(r, count, count);
        ck_assert_int_eq(shr_option_choose(r, NULL, "", &value, &why), SHR_EINVAL);
        ck_assert_int_eq(shr_option_choose(r, "kw", "Nope", &value, &why), SHR_EINVAL);
        ck_assert_msg(strncmp(why.text, "kw (", 4) == 0 && strstr(why.text, " must be one of ") &&
                      strstr(why.text, ", not 'Nope'"), "%s", why.text);
    }
    shr_msg why;
    int value = 7;
    ck_assert_int_eq(shr_option_choose(&t[0], NULL, "x", &value, &why), SHR_EINVAL);
    ck_assert_int_eq(value, 7);     /* batch_size: not a choice */
}
END_TEST

/* the names a front end gives, refused in its words */
START_TEST(test_choose_messages)
{
    const shr_option_info *r = shr_option_find("order");
    ck_assert_ptr_nonnull(r);
    shr_msg why;
    int value = -1;
    ck_assert_int_eq(shr_option_choose(r, NULL, "shuffle", &value, &why), SHR_EINVAL);
    ck_assert_str_eq(why.text, "order must be one of sequential, random, quasi, not 'shuffle'");
    ck_assert_int_eq(shr_option_choose(r, NULL, "Random", &value, &why),
                     SHR_EINVAL);  /* exactly the table's spelling */
    ck_assert_int_eq(value, -1);
    snprintf(why.text, sizeof why.text, "untouched");
    ck_assert_int_eq(shr_option_choose(r, NULL, "quasi", &value, &why), 0);
    ck_assert_int_eq(value, SHR_ORDER_QUASI);
    ck_assert_str_eq(why.text, "untouched");
    ck_assert_int_eq(shr_option_choose(r, NULL, "shuffle", &value, NULL), SHR_EINVAL);
    ck_assert_int_eq(shr_option_choose(r, NULL, NULL, &value, &why), SHR_EINVAL);
    ck_assert_str_eq(why.text, "no choice row, name or value given");
    ck_assert_int_eq(shr_option_choose(r, NULL, "random", NULL, &why), SHR_EINVAL);
}
END_TEST

int main(void)
{
    Suite *s = TU_SUITE("options_table", "core", 0, test_rows_present, test_defaults, test_bounds,
                        test_messages, test_conditions, test_option_check, test_two_pairs,
                        test_choices, test_choose_messages);
    return tu_run(s);
}
