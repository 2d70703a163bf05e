/* masks.c - the segmentation extension of the target record: instance masks and a label map as
 * runs, keypoints as float32 triples (target.h, raw.md "Target record, version 2"). */
#include "target.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "le.h"

static size_t pad8(size_t v)
{
    return (v + 7u) & ~(size_t)7u;
}

/* ---- varints ---- */

static size_t put_varint(uint8_t *out, uint32_t v)
{
    size_t k = 0;
    while (v >= 0x80) {
        out[k++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    out[k++] = (uint8_t)v;
    return k;
}

/* Read a minimal varint of at most 32 bits from p[*at .. end): 0, or -1 when it is cut off,
 * longer than 5 bytes, past 32 bits or not minimal. */
static int get_varint(const uint8_t *p, size_t *at, size_t end, uint32_t *v)
{
    uint64_t x = 0;
    for (unsigned sh = 0, k = 0; k < 5; k++, sh += 7) {
        if (*at >= end)
            return -1;
        uint8_t b = p[(*at)++];
        x |= (uint64_t)(b & 0x7f) << sh;
        if (!(b & 0x80)) {
            if ((k > 0 && b == 0) || x > UINT32_MAX)
                return -1;
            *v = (uint32_t)x;
            return 0;
        }
    }
    return -1;
}

size_t fmt_mask_encode_bound(size_t npix)
{
    /* runs <= npix + 1; a run of L pixels takes at most 1 + L / 128 * ... <= L + 1 bytes */
    return 2 * npix + 8;
}

size_t fmt_map_encode_bound(size_t npix)
{
    /* a pair: value (<= 3 bytes) and run (<= run + 1 bytes) */
    return 5 * npix + 8;
}

size_t fmt_mask_encode(const uint8_t *mask, size_t npix, uint8_t *out)
{
    size_t k = 0, i = 0;
    int cur = 0;
    while (i < npix) {
        size_t j = i;
        while (j < npix && (mask[j] != 0) == cur)
            j++;
        k += put_varint(out + k, (uint32_t)(j - i));
        i = j;
        cur = !cur;
    }
    if (npix == 0)
        k += put_varint(out + k, 0);
    return k;
}

size_t fmt_map_encode(const uint16_t *map, size_t npix, uint8_t *out, uint32_t *max)
{
    size_t k = 0, i = 0;
    uint32_t m = 0;
    while (i < npix) {
        size_t j = i + 1;
        while (j < npix && map[j] == map[i])
            j++;
        if (map[i] > m)
            m = map[i];
        k += put_varint(out + k, map[i]);
        k += put_varint(out + k, (uint32_t)(j - i));
        i = j;
    }
    *max = m;
    return k;
}

/* ---- layout ---- */

/* Section sizes of t's extension (padded). */
static void sections(const fmt_target *t, uint64_t *kp, uint64_t *masks, uint64_t *map)
{
    uint64_t n = t->count;
    *kp = t->ext & FMT_TARGET_EXT_KEYPOINTS ? pad8(12u * n * t->num_keypoints) : 0;
    *masks = t->ext & FMT_TARGET_EXT_MASKS
             ? pad8(4u * (n + 1) + (t->mask_offsets ? t->mask_offsets[n] : 0)) : 0;
    *map = t->ext & FMT_TARGET_EXT_MAP ? pad8(t->map_len) : 0;
}

uint64_t fmt_target_ext_size(const fmt_target *t)
{
    if (t->num_keypoints > FMT_TARGET_MAX_KEYPOINTS)
        return 0;
    uint64_t kp, masks, map;
    sections(t, &kp, &masks, &map);
    uint64_t total = FMT_TARGET_EXT_HEADER + kp + masks + map;
    return total <= UINT32_MAX ? total : 0;
}

static void put_f32(uint8_t *p, float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    fmt_le_put32(p, u);
}

void fmt_target_encode_ext(const fmt_target *t, uint8_t *out)
{
    uint64_t kp, masks, map, n = t->count;
    sections(t, &kp, &masks, &map);
    uint32_t runs = t->ext & FMT_TARGET_EXT_MASKS ? t->mask_offsets[n] : 0;
    fmt_le_put32(out, t->ext);
    fmt_le_put32(out + 4, t->ext & FMT_TARGET_EXT_KEYPOINTS ? t->num_keypoints : 0);
    fmt_le_put32(out + 8, t->map_width);
    fmt_le_put32(out + 12, t->map_height);
    fmt_le_put32(out + 16, runs);
    fmt_le_put32(out + 20, t->ext & FMT_TARGET_EXT_MAP ? t->map_len : 0);
    fmt_le_put32(out + 24, t->ext & FMT_TARGET_EXT_MAP ? t->map_max : 0);
    uint8_t *p = out + FMT_TARGET_EXT_HEADER;
    if (t->ext & FMT_TARGET_EXT_KEYPOINTS)
        for (uint64_t i = 0; i < 3 * n * t->num_keypoints; i++)
            put_f32(p + 4 * i, t->keypoints[i]);
    p += kp;
    if (t->ext & FMT_TARGET_EXT_MASKS) {
        for (uint64_t i = 0; i <= n; i++)
            fmt_le_put32(p + 4 * i, t->mask_offsets[i]);
        if (runs)
            memcpy(p + 4 * (n + 1), t->mask_runs, runs);
    }
    p += masks;
    if ((t->ext & FMT_TARGET_EXT_MAP) && t->map_len)
        memcpy(p, t->map_runs, t->map_len);
}

/* ---- checks ---- */

/* Instance i's runs at p[at .. end): 0 when they alternate as a mask's do and add up to npix. */
static int check_mask(const uint8_t *p, size_t at, size_t end, uint64_t npix)
{
    uint64_t sum = 0;
    for (size_t k = 0; at < end; k++) {
        uint32_t v;
        if (get_varint(p, &at, end, &v) || (k > 0 && v == 0))
            return -1;
        sum += v;
        if (sum > npix)
            return -1;
    }
    return sum == npix ? 0 : -1;
}

static int zero_from(const uint8_t *p, size_t from, size_t to)
{
    for (size_t k = from; k < to; k++)
        if (p[k])
            return 0;
    return 1;
}

int fmt_target_view_ext(const uint8_t *rec, size_t len, size_t off, uint32_t width,
                        uint32_t height, fmt_target *t, fmt_msg *msg)
{
    const char *w = "target record (version 2)";
    if (len - off < FMT_TARGET_EXT_HEADER)
        return fmt_fail(msg, FMT_ECORRUPT, "%s: %zu bytes, too short for its extension", w, len);
    const uint8_t *h = rec + off;
    t->ext = fmt_le_get32(h);
    t->num_keypoints = fmt_le_get32(h + 4);
    t->map_width = fmt_le_get32(h + 8);
    t->map_height = fmt_le_get32(h + 12);
    uint32_t runs = fmt_le_get32(h + 16);
    t->map_len = fmt_le_get32(h + 20);
    t->map_max = fmt_le_get32(h + 24);
    uint32_t all = FMT_TARGET_EXT_MASKS | FMT_TARGET_EXT_KEYPOINTS | FMT_TARGET_EXT_MAP;
    if (!t->ext || (t->ext & ~all) || fmt_le_get32(h + 28) != 0)
        return fmt_fail(msg, FMT_ECORRUPT, "%s: extension flags %#x or reserved field not valid",
                        w, t->ext);
    if (!(t->ext & FMT_TARGET_EXT_KEYPOINTS) ? t->num_keypoints != 0
        : t->num_keypoints == 0 || t->num_keypoints > FMT_TARGET_MAX_KEYPOINTS)
        return fmt_fail(msg, FMT_ECORRUPT, "%s: %" PRIu32 " keypoints per instance", w,
                        t->num_keypoints);
    if ((!(t->ext & FMT_TARGET_EXT_MASKS) && runs) ||
        (!(t->ext & FMT_TARGET_EXT_MAP) && (t->map_len || t->map_max)) ||
        t->map_max > FMT_TARGET_MAX_LABEL)
        return fmt_fail(msg, FMT_ECORRUPT, "%s: section lengths do not match its flags", w);
    if (t->map_width == 0 || t->map_height == 0 ||
        (width && height && (t->map_width != width || t->map_height != height)))
        return fmt_fail(msg, FMT_ECORRUPT, "%s: masks of %" PRIu32 "x%" PRIu32 " for a %" PRIu32
                        "x%" PRIu32 " sample", w, t->map_width, t->map_height, width, height);
    t->mask_offsets = NULL;
    t->mask_runs = NULL;
    t->map_runs = NULL;
    t->keypoints = NULL;
    if (!(t->ext & FMT_TARGET_EXT_MAP))
        t->map_len = 0;
    uint64_t n = t->count;
    uint64_t kp = t->ext & FMT_TARGET_EXT_KEYPOINTS ? pad8(12u * n * t->num_keypoints) : 0;
    uint64_t masks = t->ext & FMT_TARGET_EXT_MASKS ? pad8(4u * (n + 1) + (uint64_t)runs) : 0;
    uint64_t map = pad8(t->map_len);
    if ((uint64_t)off + FMT_TARGET_EXT_HEADER + kp + masks + map != len)
        return fmt_fail(msg, FMT_ECORRUPT, "%s: %zu bytes, its sections need %" PRIu64, w, len,
                        (uint64_t)off + FMT_TARGET_EXT_HEADER + kp + masks + map);
    const uint8_t *p = h + FMT_TARGET_EXT_HEADER;
    uint64_t npix = (uint64_t)t->map_width * t->map_height;
    if (t->ext & FMT_TARGET_EXT_KEYPOINTS) {
        t->keypoints = (const float *)(const void *)p;
        uint64_t nk = n * t->num_keypoints;
        if (!zero_from(p, 12 * nk, kp))
            return fmt_fail(msg, FMT_ECORRUPT, "%s: keypoint padding not zero", w);
        for (uint64_t j = 0; j < nk; j++) {
            const float *k = t->keypoints + 3 * j;
            int ok = isfinite(k[0]) && isfinite(k[1]) && (k[2] == 0 || k[2] == 1 || k[2] == 2);
            if (ok && k[2] == 0)
                ok = k[0] == 0 && k[1] == 0;
            else if (ok)
                ok = k[0] >= 0 && k[1] >= 0 && k[0] <= (float)t->map_width &&
                     k[1] <= (float)t->map_height;
            if (!ok)
                return fmt_fail(msg, FMT_ECORRUPT, "%s: instance %" PRIu64 " keypoint %" PRIu64
                                " (%g, %g, v %g) is not inside the %" PRIu32 "x%" PRIu32
                                " sample, or v is not 0, 1 or 2 (v 0 with x = y = 0)", w,
                                j / t->num_keypoints, j % t->num_keypoints, k[0], k[1], k[2],
                                t->map_width, t->map_height);
        }
    }
    p += kp;
    if (t->ext & FMT_TARGET_EXT_MASKS) {
        t->mask_offsets = (const uint32_t *)(const void *)p;
        t->mask_runs = p + 4 * (n + 1);
        if (t->mask_offsets[0] != 0 || t->mask_offsets[n] != runs)
            return fmt_fail(msg, FMT_ECORRUPT, "%s: mask offsets do not span the runs", w);
        for (uint64_t i = 0; i < n; i++) {
            uint32_t a = t->mask_offsets[i], b = t->mask_offsets[i + 1];
            if (a > b || check_mask(t->mask_runs, a, b, npix))
                return fmt_fail(msg, FMT_ECORRUPT, "%s: the mask of instance %" PRIu64 " is not "
                                "runs adding up to %" PRIu32 "x%" PRIu32 " pixels", w, i,
                                t->map_width, t->map_height);
        }
        if (!zero_from(p, 4 * (n + 1) + runs, masks))
            return fmt_fail(msg, FMT_ECORRUPT, "%s: mask padding not zero", w);
    }
    p += masks;
    if (t->ext & FMT_TARGET_EXT_MAP) {
        t->map_runs = p;
        size_t at = 0;
        uint64_t sum = 0;
        uint32_t max = 0;
        while (at < t->map_len) {
            uint32_t v, r;
            if (get_varint(p, &at, t->map_len, &v) || get_varint(p, &at, t->map_len, &r) ||
                r == 0 || v > FMT_TARGET_MAX_LABEL || (sum += r) > npix)
                return fmt_fail(msg, FMT_ECORRUPT, "%s: label map runs malformed at byte %zu",
                                w, at);
            if (v > max)
                max = v;
        }
        if (sum != npix || max != t->map_max)
            return fmt_fail(msg, FMT_ECORRUPT, "%s: label map of %" PRIu64 " pixels, largest "
                            "value %" PRIu32 " (%" PRIu64 " and %" PRIu32 " expected)", w, sum,
                            max, npix, t->map_max);
        if (!zero_from(p, t->map_len, map))
            return fmt_fail(msg, FMT_ECORRUPT, "%s: label map padding not zero", w);
    }
    return 0;
}

/* ---- decoding ---- */

int fmt_target_mask(const fmt_target *t, uint32_t i, uint8_t *out)
{
    fmt_mask_runs r;
    if (fmt_target_mask_runs(t, i, &r) != 0)
        return FMT_EINVAL;
    size_t k = 0;
    uint8_t cur = 0;
    for (uint32_t v; fmt_mask_run(&r, &v); cur ^= 1) {
        memset(out + k, cur, v);
        k += v;
    }
    return 0;
}

int fmt_target_mask_runs(const fmt_target *t, uint32_t i, fmt_mask_runs *r)
{
    if (!(t->ext & FMT_TARGET_EXT_MASKS) || i >= t->count)
        return FMT_EINVAL;
    r->p = t->mask_runs;
    r->at = t->mask_offsets[i];
    r->end = t->mask_offsets[i + 1];
    return 0;
}

int fmt_mask_run(fmt_mask_runs *r, uint32_t *len)
{
    if (r->at >= r->end)
        return 0;
    const uint8_t *p = r->p;
    uint8_t b = p[r->at++];
    if (b < 0x80) {             /* the common case: a run below 128 */
        *len = b;
        return 1;
    }
    *len = 0;
    r->at--;
    (void)get_varint(p, &r->at, r->end, len);
    return 1;
}

int fmt_target_map_runs(const fmt_target *t, fmt_mask_runs *r)
{
    if (!(t->ext & FMT_TARGET_EXT_MAP))
        return FMT_EINVAL;
    r->p = t->map_runs;
    r->at = 0;
    r->end = t->map_len;
    return 0;
}

int fmt_map_run(fmt_mask_runs *r, uint32_t *value, uint32_t *len)
{
    if (r->at >= r->end)
        return 0;
    *value = *len = 0;
    (void)get_varint(r->p, &r->at, r->end, value);
    (void)get_varint(r->p, &r->at, r->end, len);
    return 1;
}

int fmt_target_label_map(const fmt_target *t, void *out, int elem)
{
    fmt_mask_runs runs;
    if ((elem != 1 && elem != 2 && elem != 8) || (elem == 1 && t->map_max > 255) ||
        fmt_target_map_runs(t, &runs) != 0)
        return FMT_EINVAL;
    size_t k = 0;
    for (uint32_t v, r; fmt_map_run(&runs, &v, &r);) {
        if (elem == 1) {
            memset((uint8_t *)out + k, (int)v, r);
        } else if (elem == 2) {
            uint16_t *o = (uint16_t *)out + k;
            for (uint32_t j = 0; j < r; j++)
                o[j] = (uint16_t)v;
        } else {
            int64_t *o = (int64_t *)out + k;
            for (uint32_t j = 0; j < r; j++)
                o[j] = v;
        }
        k += r;
    }
    return 0;
}
