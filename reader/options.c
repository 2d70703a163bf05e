/* options.c - the reader's options (shardread.h, shr_options): every field's default, a
 * caller's shr_options of any size over them, the checks shr_open makes before it opens
 * anything, and shr_draw_params, which draws one sample's parameters from checked options alone.
 * The numeric options' defaults and ranges (scalars and pairs) are options.def's rows.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assemble.h"
#include "augment_read.h"
#include "erase_noise.h"
#include "mix.h"
#include "reader.h"
#include "scale.h"
#include "transform.h"

#define SHR_MAX_THREADS 1024u         /* options.def: threads at most */

/* The rows of options.def, as shardread.h publishes them. */
static const shr_option_info option_table[] = {
#define SHR_OPT(field, ctype, name, pydef, form, def, lo, hi, cond, when, doc)                    \
    {#field, name, pydef, (ctype)0.5 != 0, 1, 0, form, {(double)(def), (double)(def)},          \
     (double)(lo), (double)(hi), when, doc, NULL},
/* a pair row's field: a double[2], or double[4], two pairs (the shear's x, then y) */
#define PAIR_COUNT(field) ((int)(sizeof(((shr_options *)0)->field) / sizeof(double)))
#define SHR_OPT_PAIR(field, ordered, name, pydef, form, min, max, lo, hi, cond, when, doc)        \
    {#field, name, pydef, 1, PAIR_COUNT(field), ordered, form, {(min), (max)}, (lo), (hi),      \
     when, doc, NULL},
/* hi: the last value, one less than the names */
#define SHR_OPT_CHOICE(field, ctype, name, pydef, def, cond, when, doc, ...)                      \
    {#field, name, pydef, 0, 1, 0, SHR_OPT_CHOICE, {(double)(def), (double)(def)}, 0,           \
     (double)(sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *) - 1), when,     \
     doc, (const char *const[]){__VA_ARGS__, NULL}},
#include "options.def"
#undef SHR_OPT
#undef SHR_OPT_PAIR
#undef SHR_OPT_CHOICE
};

#define OPTION_ROWS (sizeof option_table / sizeof option_table[0])

const shr_option_info *shr_option_table(size_t *count)
{
    if (count)
        *count = OPTION_ROWS;
    return option_table;
}

const shr_option_info *shr_option_find(const char *field)
{
    for (size_t i = 0; field && i < OPTION_ROWS; i++)
        if (strcmp(option_table[i].field, field) == 0)
            return &option_table[i];
    return NULL;
}

/* The defaults of every field of this library's shr_options: options.def's rows, then the
 * fields the table does not describe yet (rank, pinning, normalisation and per-channel
 * values). */
static void options_defaults(shr_options *o)
{
    memset(o, 0, sizeof *o);
    o->size = (uint32_t)sizeof *o;
#define SHR_OPT(field, ctype, name, pydef, form, def, lo, hi, cond, when, doc) o->field = (def);
#define SHR_OPT_PAIR(field, ordered, name, pydef, form, min, max, lo, hi, cond, when, doc)        \
    for (int k = 0; k < PAIR_COUNT(field); k += 2) {                                            \
        o->field[k] = (min);                                                                    \
        o->field[k + 1] = (max);                                                                \
    }
#define SHR_OPT_CHOICE(field, ctype, name, pydef, def, cond, when, doc, ...) o->field = (def);
#include "options.def"
#undef SHR_OPT
#undef SHR_OPT_PAIR
#undef SHR_OPT_CHOICE
    o->pin = SHR_PIN_AUTO;
    o->normalize = SHR_NORM_NONE;
    for (int c = 0; c < 4; c++)
        o->std[c] = 1.0f;
}

void shr_options_init_size(shr_options *o, size_t size)
{
    if (!o || size < sizeof o->size)
        return;
    shr_options d;
    options_defaults(&d);
    /* a caller's struct from a newer header: its fields beyond ours are zero (shr_open refuses
     * such a caller, saying why, whatever they hold) */
    size_t n = size < sizeof d ? size : sizeof d;
    memcpy(o, &d, n);
    if (size > n)
        memset((char *)o + n, 0, size - n);
    o->size = (uint32_t)(size > UINT32_MAX ? UINT32_MAX : size);
}

int shr_options_full(const shr_options *o, shr_options *full, fmt_msg *why)
{
    options_defaults(full);
    if (!o)
        return 0;
    if (o->size < 2 * sizeof(uint32_t))
        return fmt_fail(why, SHR_EINVAL, "shr_options.size is %u: initialise the options with "
                        "shr_options_init", o->size);
    if (o->size > sizeof *full)
        return fmt_fail(why, SHR_EINVAL, "shr_options.size is %u, larger than this library's "
                        "%zu: the caller was built against a newer shardread.h (library %d.%d)",
                        o->size, sizeof *full, SHR_VERSION_MAJOR, SHR_VERSION_MINOR);
    memcpy(full, o, o->size);
    full->size = (uint32_t)sizeof *full;
    return 0;
}

/* ---- checks ---- */

static int in_range(const shr_option_info *r, double v)
{
    switch (r->form) {
    case SHR_OPT_AT_LEAST:
        return v >= r->lo;
    case SHR_OPT_BELOW:
        return v >= r->lo && v < r->hi;
    case SHR_OPT_ABOVE:
        return v > r->lo && v <= r->hi;
    case SHR_OPT_OPEN:
        return v > r->lo && v < r->hi;
    case SHR_OPT_ZERO_OR_RANGE:
        return v == 0 || (v >= r->lo && v <= r->hi);
    case SHR_OPT_CHOICE:
        return v >= 0 && v <= r->hi && v == (int)v && r->choices[(int)v][0] != '\0';
    case SHR_OPT_RANGE:
    default:
        return v >= r->lo && v <= r->hi;
    }
}

/* every (min, max) pair of v (r->count values) */
static int pair_ok(const shr_option_info *r, const double *v)
{
    for (int k = 0; k + 1 < r->count; k += 2)
        if (!(in_range(r, v[k]) && in_range(r, v[k + 1]) && (!r->ordered || v[k] <= v[k + 1])))
            return 0;
    return 1;
}

/* v as its shortest decimal of up to 17 digits */
static void number(char *buf, size_t n, double v)
{
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(buf, n, "%.*g", digits, v);
        if (strtod(buf, NULL) == v)
            return;
    }
}

/* "NAME (FIELD)", or the name alone where it is the field: the name is r's public one, or a
 * front end's keyword where given */
static void who(char *buf, size_t n, const shr_option_info *r, const char *name)
{
    if (!name)
        name = r->name;
    if (strcmp(name, r->field) == 0)
        snprintf(buf, n, "%s", name);
    else
        snprintf(buf, n, "%s (%s)", name, r->field);
}

/* "WHO must be one of A, B, C, not VALUE": a choice's accepted names, in the enum's order */
static void choice_refusal(char *buf, size_t n, const shr_option_info *r, const char *whom,
                           const char *value)
{
    int at = snprintf(buf, n, "%s must be one of ", whom);
    const char *sep = "";
    for (int i = 0; r->choices[i] && at >= 0 && (size_t)at < n; i++) {
        if (!r->choices[i][0])
            continue;
        at += snprintf(buf + at, n - (size_t)at, "%s%s", sep, r->choices[i]);
        sep = ", ";
    }
    if (at >= 0 && (size_t)at < n)
        snprintf(buf + at, n - (size_t)at, ", not %s", value);
}

/* "NAME (FIELD) must be in LO..HI, not V" or, for a pair, "must satisfy LO <= min <= max <= HI,
 * not [MIN, MAX]": the public name (or `name`, where given), the field where it differs, the
 * accepted range in the row's form, and the value refused; into buf (n bytes). */
static void refusal(char *buf, size_t n, const shr_option_info *r, const char *name,
                    const double *v)
{
    char whom[160], lo[32], hi[32], val[136], range[128], first[32];
    who(whom, sizeof whom, r, name);
    if (r->form == SHR_OPT_CHOICE) {
        number(first, sizeof first, v[0]);
        choice_refusal(buf, n, r, whom, first);
        return;
    }
    number(lo, sizeof lo, r->lo);
    number(hi, sizeof hi, r->hi);
    number(first, sizeof first, v[0]);
    snprintf(val, sizeof val, "%s", first);
    for (int k = 1; k < r->count; k++) {
        char next[32];
        size_t at = strlen(val);
        number(next, sizeof next, v[k]);
        snprintf(val + at, sizeof val - at, ", %s", next);
    }
    if (r->count > 1) {
        char list[136];
        snprintf(list, sizeof list, "[%s]", val);
        snprintf(val, sizeof val, "%s", list);
    }
    int lo_open = r->form == SHR_OPT_ABOVE || r->form == SHR_OPT_OPEN;
    int hi_open = r->form == SHR_OPT_BELOW || r->form == SHR_OPT_OPEN;
    if (r->count >= 2 && r->ordered) {
        snprintf(range, sizeof range, "%s %s min <= max %s %s", lo, lo_open ? "<" : "<=",
                 hi_open ? "<" : "<=", hi);
        if (r->count == 2)
            snprintf(buf, n, "%s must satisfy %s, not %s", whom, range, val);
        else
            snprintf(buf, n, "%s must be %d (min, max) pairs, each satisfying %s, not %s", whom,
                     r->count / 2, range, val);
        return;
    }
    switch (r->form) {
    case SHR_OPT_AT_LEAST:
        snprintf(range, sizeof range, "at least %s", lo);
        break;
    case SHR_OPT_ZERO_OR_RANGE:
        snprintf(range, sizeof range, "0 or in %s..%s", lo, hi);
        break;
    case SHR_OPT_RANGE:
        snprintf(range, sizeof range, "in %s..%s", lo, hi);
        break;
    default:
        snprintf(range, sizeof range, "%s %s and %s %s", lo_open ? "above" : "at least", lo,
                 hi_open ? "below" : "at most", hi);
        break;
    }
    snprintf(buf, n, "%s must be %s%s, not %s", whom, r->count == 2 ? "two values, each " : "",
             range, val);
}

static int refuse(fmt_msg *m, const shr_option_info *r, const double *v)
{
    char text[sizeof m->text];
    refusal(text, sizeof text, r, NULL, v);
    return fmt_fail(m, SHR_EINVAL, "%s", text);
}

static int value_ok(const shr_option_info *r, const double *v)
{
    return r->count >= 2 ? pair_ok(r, v) : in_range(r, v[0]);
}

int shr_option_check(const shr_option_info *r, const char *name, const double *v, shr_msg *msg)
{
    if (!r || !v)
        return fmt_fail(msg, SHR_EINVAL, "no row or value given");
    if (value_ok(r, v))
        return 0;
    if (msg)
        refusal(msg->text, sizeof msg->text, r, name, v);
    return SHR_EINVAL;
}

int shr_option_choose(const shr_option_info *r, const char *name, const char *given, int *value,
                      shr_msg *msg)
{
    if (!r || r->form != SHR_OPT_CHOICE || !r->choices || !given || !value)
        return fmt_fail(msg, SHR_EINVAL, "no choice row, name or value given");
    for (int i = 0; r->choices[i]; i++)
        if (r->choices[i][0] && strcmp(r->choices[i], given) == 0) {
            *value = i;
            return 0;
        }
    if (msg) {
        char whom[160], shown[160];
        who(whom, sizeof whom, r, name);
        snprintf(shown, sizeof shown, "'%s'", given);
        choice_refusal(msg->text, sizeof msg->text, r, whom, shown);
    }
    return SHR_EINVAL;
}

/* Every row of options.def whose condition holds, in the table's order. */
static int check_table(const shr_options *o, fmt_msg *m)
{
    const shr_option_info *r = option_table;
#define SHR_OPT(field, ctype, name, pydef, form, def, lo, hi, cond, when, doc)                    \
    if ((cond) && !in_range(r, (double)o->field))                                               \
        return refuse(m, r, (const double[1]){(double)o->field});                              \
    r++;
#define SHR_OPT_PAIR(field, ordered, name, pydef, form, min, max, lo, hi, cond, when, doc)        \
    if ((cond) && !pair_ok(r, o->field))                                                        \
        return refuse(m, r, o->field);                                                          \
    r++;
#define SHR_OPT_CHOICE(field, ctype, name, pydef, def, cond, when, doc, ...)                      \
    if ((cond) && !in_range(r, (double)o->field))                                               \
        return refuse(m, r, (const double[1]){(double)o->field});                              \
    r++;
#include "options.def"
#undef SHR_OPT
#undef SHR_OPT_PAIR
#undef SHR_OPT_CHOICE
    return 0;
}

int shr_check_option_value(const char *field, const char *name, double v, fmt_msg *m)
{
    const shr_option_info *r = shr_option_find(field);
    if (!r || r->count != 1)
        return fmt_fail(m, SHR_EINVAL, "no scalar row %s in the options table", field);
    return shr_option_check(r, name, &v, m);
}

int shr_check_options(const shr_options *o, fmt_msg *m)
{
    int rc = check_table(o, m);
    if (rc)
        return rc;
    /* world: options.def's row, checked before */
    if (o->rank >= o->world)
        return fmt_fail(m, SHR_EINVAL, "rank %" PRIu32 " is not in [0, world %" PRIu32 ")",
                        o->rank, o->world);
    if (o->consumed && o->cursor)
        return fmt_fail(m, SHR_EINVAL, "give either consumed (any world size) or cursor (the "
                        "same world size), not both");
    if ((o->width == 0) != (o->height == 0))
        return fmt_fail(m, SHR_EINVAL, "width and height must both be given, or neither");
    if (o->label_map_bytes > 2)
        return fmt_fail(m, SHR_EINVAL, "label_map_bytes must be 1 (uint8) or 2 (uint16), not "
                        "%" PRIu64, o->label_map_bytes);
    if (o->width > SHR_MAX_SIDE || o->height > SHR_MAX_SIDE ||
        (uint64_t)o->width * o->height > SHR_MAX_PIXELS)
        return fmt_fail(m, SHR_EINVAL, "width x height %" PRIu32 "x%" PRIu32 " is past the "
                        "output size limit: each side at most %u, width x height at most %u "
                        "pixels (SHR_MAX_SIDE, SHR_MAX_PIXELS)", o->width, o->height,
                        SHR_MAX_SIDE, SHR_MAX_PIXELS);
    if ((unsigned)o->pin > SHR_PIN_OFF)
        return fmt_fail(m, SHR_EINVAL, "unknown pin mode %d", (int)o->pin);
    if (o->pin_device > 65536)
        return fmt_fail(m, SHR_EINVAL, "pin_device must be 0 (the current device) or a device "
                        "index + 1, at most 65536, not %" PRIu64, o->pin_device);
    if (o->rrc) {
        if (!o->width)
            return fmt_fail(m, SHR_EINVAL, "rrc needs an output width and height");
        if (o->random_crop)
            return fmt_fail(m, SHR_EINVAL, "rrc and random_crop exclude each other: the "
                            "RandomResizedCrop draws its own box");
        /* rrc_scale, rrc_ratio and filter: options.def's rows, checked before */
    }
    if ((rc = shr_aug_check(o, m)) != 0 || (rc = shr_mix_check(o, m)) != 0 ||
        (rc = shr_erase_noise_check(o, m)) != 0 || (rc = shr_scale_check(o, m)) != 0)
        return rc;
    /* multi-scale without width and height: the canvas is scale_max on both sides */
    if (o->scale == SHR_SCALE_MULTI && !o->width &&
        (uint64_t)o->scale_max * o->scale_max > SHR_MAX_PIXELS)
        return fmt_fail(m, SHR_EINVAL, "scale_max %" PRIu32 " makes a %" PRIu32 "x%" PRIu32
                        " canvas, past the output size limit of %u pixels (SHR_MAX_PIXELS): "
                        "at most 16384 without width and height", o->scale_max, o->scale_max,
                        o->scale_max, SHR_MAX_PIXELS);
    if ((unsigned)o->normalize > SHR_NORM_DATASET)
        return fmt_fail(m, SHR_EINVAL, "unknown normalisation %d", (int)o->normalize);
    if (o->normalize != SHR_NORM_NONE && o->dtype == SHR_DTYPE_U8)
        return fmt_fail(m, SHR_EINVAL, "normalisation needs a float dtype (float32 or float16): "
                        "uint8 cannot hold the normalised values");
    if (!(o->unit == 0.0f || (o->unit >= 1.0f && isfinite(o->unit))))
        return fmt_fail(m, SHR_EINVAL, "unit must be 0 or a finite number >= 1, not %g",
                        (double)o->unit);
    if (o->unit > 1.0f && o->dtype == SHR_DTYPE_U8)
        return fmt_fail(m, SHR_EINVAL, "unit %g needs a float dtype (float32 or float16)",
                        (double)o->unit);
    if (o->normalize == SHR_NORM_GIVEN)
        for (int c = 0; c < 4; c++)
            if (!isfinite(o->mean[c]) || !(o->std[c] > 0) || !isfinite(o->std[c]))
                return fmt_fail(m, SHR_EINVAL, "channel %d: mean must be finite and std positive "
                                "and finite (mean %g, std %g)", c, o->mean[c], o->std[c]);
    return 0;
}

/* ---- a sample's parameters ---- */

int shr_draw_params(const shr_options *o, uint64_t epoch, uint64_t index, uint32_t src_w,
                    uint32_t src_h, shr_params *p)
{
    fmt_msg msg;
    shr_options full;
    if (!o || !p || !src_w || !src_h || shr_options_full(o, &full, &msg) != 0)
        return SHR_EINVAL;
    o = &full;
    if (shr_check_options(o, &msg) != 0)
        return SHR_EINVAL;
    shr_tf_rrc rrc;
    if (o->rrc)
        shr_tf_rrc_init(&rrc, o->rrc_scale, o->rrc_ratio);
    shr_aug aug;
    shr_aug_init(&aug, o);
    uint32_t ow = o->width ? o->width : o->scale == SHR_SCALE_MULTI ? o->scale_max : src_w;
    uint32_t oh = o->height ? o->height : o->scale == SHR_SCALE_MULTI ? o->scale_max : src_h;
    shr_draw(o, &rrc, &aug, ow, oh, epoch, index, src_w, src_h, p);
    return 0;
}
