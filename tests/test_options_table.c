/* test_options_table.c - the scalar numeric options are one table (reader/options.def,
 * shr_option_table): every row's default is what shr_options_init sets, every row's range
 * check accepts its bounds and refuses the value just outside them (and NaN), and the refusal
 * names the public name, the field and the range. A row whose check is removed, loosened or
 * tightened, or whose default drifts from the table, fails here; so does a row dropped from
 * the table (the fields it must describe are listed). */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "reader.h"
#include "shardread.h"

#include "testutil.h"

/* the fields the table describes: a row dropped from options.def fails test_rows_present */
static const char *const g_fields[] = {
    "batch_size", "quasi_window", "threads", "prefetch", "flip_p", "grayscale_p", "erase_p",
    "min_box_area_fraction", "mixup_alpha", "cutmix_alpha", "aa_bins", "aa_num_ops",
};

/* the field named f of o, read and written through the table's own rows */
static double get_field(const shr_options *o, const char *f)
{
#define SHR_OPT(field, ctype, ...)                                                  \
    if (strcmp(f, #field) == 0)                                                     \
        return (double)o->field;
#include "options.def"
#undef SHR_OPT
    ck_abort_msg("no field %s", f);
    return 0;
}

static void set_field(shr_options *o, const char *f, double v)
{
#define SHR_OPT(field, ctype, ...)                                                  \
    if (strcmp(f, #field) == 0) {                                                   \
        o->field = (ctype)v;                                                        \
        return;                                                                     \
    }
#include "options.def"
#undef SHR_OPT
    ck_abort_msg("no field %s", f);
}

/* options under which every row's condition holds and every row's bounds are otherwise valid:
 * order quasi (quasi_window), RandAugment (aa_bins, aa_num_ops; magnitude 0 so that 2 bins
 * are enough), a float dtype (MixUp and CutMix need one) */
static void base(shr_options *o)
{
    shr_options_init(o);
    o->order = SHR_ORDER_QUASI;
    o->auto_augment = SHR_AUTO_AUGMENT_RAND;
    o->aa_magnitude = 0;
    o->dtype = SHR_DTYPE_F32;
}

static int check(const shr_option_info *r, double v, fmt_msg *m)
{
    shr_options o;
    base(&o);
    set_field(&o, r->field, v);
    m->text[0] = '\0';
    return shr_check_options(&o, m);
}

static void accepts(const shr_option_info *r, double v)
{
    fmt_msg m;
    int rc = check(r, v, &m);
    ck_assert_msg(rc == 0, "%s = %.17g refused: %s", r->field, v, m.text);
}

static void refuses(const shr_option_info *r, double v)
{
    fmt_msg m;
    int rc = check(r, v, &m);
    ck_assert_msg(rc == SHR_EINVAL, "%s = %.17g accepted (%d)", r->field, v, rc);
    /* the public name, the field, and the words of the range */
    ck_assert_msg(strncmp(m.text, r->name, strlen(r->name)) == 0, "%s: %s", r->field, m.text);
    ck_assert_msg(strstr(m.text, r->field) != NULL, "%s: %s", r->field, m.text);
    ck_assert_msg(strstr(m.text, " must be ") != NULL, "%s: %s", r->field, m.text);
}

/* the value just below v and just above it, in the field's type */
static double below(const shr_option_info *r, double v)
{
    return r->is_float ? nextafter(v, -INFINITY) : v - 1;
}

static double above(const shr_option_info *r, double v)
{
    return r->is_float ? nextafter(v, INFINITY) : v + 1;
}

START_TEST(test_rows_present)
{
    size_t n = 0;
    const shr_option_info *t = shr_option_table(&n);
    ck_assert_ptr_nonnull(t);
    ck_assert_uint_ge(n, sizeof g_fields / sizeof g_fields[0]);
    for (size_t k = 0; k < sizeof g_fields / sizeof g_fields[0]; k++) {
        size_t i = 0;
        while (i < n && strcmp(t[i].field, g_fields[k]) != 0)
            i++;
        ck_assert_msg(i < n, "%s has no row", g_fields[k]);
    }
    for (size_t i = 0; i < n; i++) {
        ck_assert_ptr_nonnull(t[i].name);
        ck_assert_ptr_nonnull(t[i].when);
        ck_assert_msg(t[i].doc && t[i].doc[0], "%s has no doc", t[i].field);
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
        ck_assert_msg(get_field(&o, t[i].field) == t[i].def, "%s: init %.17g, table %.17g",
                      t[i].field, get_field(&o, t[i].field), t[i].def);
        /* the default is a value the check accepts */
        accepts(&t[i], t[i].def);
    }
    fmt_msg m;
    base(&o);
    ck_assert_msg(shr_check_options(&o, &m) == 0, "%s", m.text);
}
END_TEST

START_TEST(test_bounds)
{
    size_t n = 0;
    const shr_option_info *t = shr_option_table(&n);
    for (size_t i = 0; i < n; i++) {
        const shr_option_info *r = &t[i];
        accepts(r, r->lo);
        if (r->lo > 0 || r->is_float)
            refuses(r, below(r, r->lo));
        switch (r->form) {
        case SHR_OPT_RANGE:
            accepts(r, r->hi);
            refuses(r, above(r, r->hi));
            break;
        case SHR_OPT_BELOW:
            accepts(r, below(r, r->hi));
            refuses(r, r->hi);
            break;
        case SHR_OPT_ZERO_OR_RANGE:
            accepts(r, 0);
            accepts(r, r->hi);
            refuses(r, above(r, r->hi));
            ck_assert_double_gt(r->lo, 1);      /* else "just below lo" would be 0 */
            break;
        case SHR_OPT_AT_LEAST:
            accepts(r, r->is_float ? 1e300 : UINT32_MAX);
            break;
        default:
            ck_abort_msg("%s: form %d", r->field, (int)r->form);
        }
        if (r->is_float)
            refuses(r, NAN);
        else
            ck_assert_double_ge(r->lo, 0);
    }
}
END_TEST

/* the messages, word for word, one per form */
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
        {"mixup_alpha", 1e6, "mixup (mixup_alpha) must be at least 0 and below 1000000, not "
                             "1000000"},
        {"aa_bins", 1, "auto_augment num_magnitude_bins (aa_bins) must be in 2..1024, not 1"},
        {"aa_num_ops", 5, "auto_augment num_ops (aa_num_ops) must be in 1..4, not 5"},
        {"erase_p", 1.1, "erasing p (erase_p) must be in 0..1, not 1.1"},
    };
    size_t n = 0;
    const shr_option_info *t = shr_option_table(&n);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        size_t i = 0;
        while (i < n && strcmp(t[i].field, cases[k].field) != 0)
            i++;
        ck_assert_uint_lt(i, n);
        fmt_msg m;
        ck_assert_int_eq(check(&t[i], cases[k].v, &m), SHR_EINVAL);
        ck_assert_str_eq(m.text, cases[k].want);
    }
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

int main(void)
{
    Suite *s = suite_create("options_table");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_rows_present);
    tcase_add_test(tc, test_defaults);
    tcase_add_test(tc, test_bounds);
    tcase_add_test(tc, test_messages);
    tcase_add_test(tc, test_conditions);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
