/* target.c - the target record (target.h, raw.md "Target record"). */
#include "target.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "le.h"

uint32_t fmt_target_size(uint32_t n)
{
    if (n > FMT_TARGET_MAX_BOXES)
        return 0;
    return (FMT_TARGET_HEADER + 29u * n + 7u) & ~7u;
}

static void put_f32(uint8_t *p, float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    fmt_le_put32(p, u);
}

uint32_t fmt_target_record_size(const fmt_target *t)
{
    uint64_t base = fmt_target_size(t->count);
    if (!base || !t->ext)
        return (uint32_t)base;
    uint64_t e = fmt_target_ext_size(t);
    return e && base + e <= UINT32_MAX ? (uint32_t)(base + e) : 0;
}

uint32_t fmt_target_encode(const fmt_target *t, uint8_t *out, size_t cap)
{
    uint32_t n = t->count, len = fmt_target_record_size(t);
    if (!len || cap < len)
        return 0;
    memset(out, 0, len);
    fmt_le_put32(out, t->ext ? FMT_TARGET_MAGIC2 : FMT_TARGET_MAGIC);
    fmt_le_put32(out + 4, n);
    fmt_le_put64(out + 8, (uint64_t)t->image_id);
    fmt_le_put32(out + 16, t->orig_width);
    fmt_le_put32(out + 20, t->orig_height);
    fmt_le_put32(out + 24, t->dropped);
    uint8_t *b = out + FMT_TARGET_HEADER, *l = b + 16 * (size_t)n, *a = l + 8 * (size_t)n,
            *c = a + 4 * (size_t)n;
    for (uint32_t i = 0; i < n; i++) {
        for (int k = 0; k < 4; k++)
            put_f32(b + 16 * (size_t)i + 4 * k, t->boxes[4 * (size_t)i + k]);
        fmt_le_put64(l + 8 * (size_t)i, (uint64_t)t->labels[i]);
        put_f32(a + 4 * (size_t)i, t->area[i]);
        c[i] = t->iscrowd[i];
    }
    if (t->ext)
        fmt_target_encode_ext(t, out + fmt_target_size(n));
    return len;
}

int fmt_target_view(const uint8_t *rec, size_t len, uint32_t width, uint32_t height,
                    fmt_target *t, fmt_msg *msg)
{
    memset(t, 0, sizeof *t);
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
    (void)rec;
    (void)len;
    (void)width;
    (void)height;
    return fmt_fail(msg, FMT_EUNSUPPORTED, "target records are read in place on little-endian "
                    "hosts only");
#else
    if (!rec || ((uintptr_t)rec & 7u))
        return fmt_fail(msg, FMT_EINVAL, "target record not 8-byte aligned");
    uint32_t magic = len >= FMT_TARGET_HEADER ? fmt_le_get32(rec) : 0;
    if (magic != FMT_TARGET_MAGIC && magic != FMT_TARGET_MAGIC2)
        return fmt_fail(msg, FMT_ECORRUPT, "not a target record (%zu bytes, bad magic)", len);
    uint32_t n = fmt_le_get32(rec + 4), want = fmt_target_size(n);
    if (want && magic == FMT_TARGET_MAGIC2 && len >= want)
        want = (uint32_t)len;       /* the extension's own length is checked below */
    if (!want || want != len)
        return fmt_fail(msg, FMT_ECORRUPT, "target record of %zu bytes for %" PRIu32 " boxes "
                        "(%" PRIu32 " expected)", len, n, want);
    if (fmt_le_get32(rec + 28) != 0)
        return fmt_fail(msg, FMT_ECORRUPT, "target record: reserved field not zero");
    for (size_t k = FMT_TARGET_HEADER + 29u * (size_t)n; k < fmt_target_size(n); k++)
        if (rec[k])
            return fmt_fail(msg, FMT_ECORRUPT, "target record: padding not zero");
    t->count = n;
    t->image_id = (int64_t)fmt_le_get64(rec + 8);
    t->orig_width = fmt_le_get32(rec + 16);
    t->orig_height = fmt_le_get32(rec + 20);
    t->dropped = fmt_le_get32(rec + 24);
    const uint8_t *b = rec + FMT_TARGET_HEADER;
    t->boxes = (const float *)(const void *)b;
    t->labels = (const int64_t *)(const void *)(b + 16 * (size_t)n);
    t->area = (const float *)(const void *)(b + 24 * (size_t)n);
    t->iscrowd = b + 28 * (size_t)n;
    if (t->orig_width == 0 || t->orig_height == 0)
        return fmt_fail(msg, FMT_ECORRUPT, "target record: original size %" PRIu32 "x%" PRIu32,
                        t->orig_width, t->orig_height);
    for (uint32_t i = 0; i < n; i++) {
        const float *x = t->boxes + 4 * (size_t)i;
        int ok = isfinite(x[0]) && isfinite(x[1]) && isfinite(x[2]) && isfinite(x[3]) &&
                 x[0] >= 0 && x[1] >= 0 && x[0] < x[2] && x[1] < x[3];
        if (ok && width && height)
            ok = x[2] <= (float)width && x[3] <= (float)height;
        if (!ok)
            return fmt_fail(msg, FMT_ECORRUPT, "target record: box %" PRIu32 " (%g, %g, %g, %g) "
                            "is not inside the %" PRIu32 "x%" PRIu32 " sample or has no area", i,
                            x[0], x[1], x[2], x[3], width, height);
        if (!isfinite(t->area[i]) || t->area[i] < 0)
            return fmt_fail(msg, FMT_ECORRUPT, "target record: box %" PRIu32 " has area %g", i,
                            t->area[i]);
        if (t->iscrowd[i] > 1)
            return fmt_fail(msg, FMT_ECORRUPT, "target record: box %" PRIu32 " has iscrowd %u",
                            i, t->iscrowd[i]);
    }
    if (magic == FMT_TARGET_MAGIC2)
        return fmt_target_view_ext(rec, len, fmt_target_size(n), width, height, t, msg);
    return 0;
#endif
}

static double clampd(double v, double lo, double hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

uint32_t fmt_target_nearest(uint32_t i, uint32_t in, uint32_t out)
{
    if (in == out)
        return i;
    if (out == 2 * in)          /* torch's nearest_idx: a shift there */
        return i >> 1;
    float scale = (float)in / (float)out;
    int64_t s = (int64_t)floorf((float)i * scale);
    return s > (int64_t)in - 1 ? in - 1 : (uint32_t)s;
}

int fmt_target_map_box(const fmt_geom_plan *p, uint32_t src_w, uint32_t src_h, const double in[4],
                       float out[4], double *area_scale)
{
    double sx = (double)p->rs_w / src_w, sy = (double)p->rs_h / src_h;
    double ox = (double)p->dst_x - p->win_x, oy = (double)p->dst_y - p->win_y;
    double lx = p->dst_x, hx = (double)p->dst_x + p->dst_w;
    double ly = p->dst_y, hy = (double)p->dst_y + p->dst_h;
    out[0] = (float)clampd(in[0] * sx + ox, lx, hx);
    out[1] = (float)clampd(in[1] * sy + oy, ly, hy);
    out[2] = (float)clampd(in[2] * sx + ox, lx, hx);
    out[3] = (float)clampd(in[3] * sy + oy, ly, hy);
    if (area_scale)
        *area_scale = sx * sy;
    return out[0] < out[2] && out[1] < out[3];
}
