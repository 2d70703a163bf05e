/* fields.c - the fields record (fields.h, raw.md "Fields record"). */
#include "fields.h"

#include <inttypes.h>
#include <string.h>

#include "le.h"

const char *fmt_field_type_name(uint32_t type)
{
    static const char *const names[] = {[FMT_FIELD_INT] = "int", [FMT_FIELD_FLOAT] = "float",
                                        [FMT_FIELD_STR] = "str", [FMT_FIELD_BYTES] = "bytes"};
    return FMT_NAME_IN(names, type, NULL);
}

uint32_t fmt_field_type_parse(const char *s)
{
    for (uint32_t t = FMT_FIELD_INT; t <= FMT_FIELD_BYTES; t++)
        if (strcmp(s, fmt_field_type_name(t)) == 0)
            return t;
    return 0;
}

int fmt_field_name_ok(const char *s, size_t len)
{
    if (len == 0 || len > FMT_FIELDS_MAX_NAME || (s[0] >= '0' && s[0] <= '9') || s[0] == '.')
        return 0;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.'))
            return 0;
    }
    return 1;
}

int fmt_fields_schema_check(const fmt_field_def *defs, size_t n, fmt_msg *msg)
{
    if (n == 0 || n > FMT_FIELDS_MAX)
        return fmt_fail(msg, FMT_EINVAL, "%zu fields (1..%u)", n, FMT_FIELDS_MAX);
    for (size_t i = 0; i < n; i++) {
        const fmt_field_def *d = &defs[i];
        if (!d->name || !fmt_field_name_ok(d->name, strlen(d->name)))
            return fmt_fail(msg, FMT_EINVAL, "field %zu: name '%.80s' is not 1..%u letters, "
                            "digits, '_', '-' or '.' (not starting with a digit or '.')", i,
                            d->name ? d->name : "", FMT_FIELDS_MAX_NAME);
        if (!fmt_field_type_name(d->type))
            return fmt_fail(msg, FMT_EINVAL, "field '%s': unknown type %" PRIu32, d->name,
                            d->type);
        int numeric = d->type == FMT_FIELD_INT || d->type == FMT_FIELD_FLOAT;
        if ((!numeric && d->count) || d->count > FMT_FIELDS_MAX_COUNT)
            return fmt_fail(msg, FMT_EINVAL, "field '%s': count %" PRIu32 " (%s)", d->name,
                            d->count, numeric ? "0..65536" : "0 for str and bytes");
        for (size_t j = 0; j < i; j++)
            if (strcmp(defs[j].name, d->name) == 0)
                return fmt_fail(msg, FMT_EINVAL, "field '%s' named twice", d->name);
    }
    return 0;
}

static uint64_t value_bytes(uint32_t type, uint32_t count)
{
    uint64_t b = type == FMT_FIELD_INT || type == FMT_FIELD_FLOAT ? 8ull * count : count;
    return (b + 7) & ~7ull;
}

uint32_t fmt_fields_size(const fmt_field_value *v, size_t n)
{
    if (n == 0 || n > FMT_FIELDS_MAX)
        return 0;
    uint64_t len = FMT_FIELDS_HEADER + 8ull * n;
    for (size_t i = 0; i < n; i++) {
        if (!fmt_field_type_name(v[i].type) || v[i].count > FMT_FIELDS_MAX_COUNT)
            return 0;
        len += value_bytes(v[i].type, v[i].count);
    }
    return len > FMT_FIELDS_MAX_RECORD ? 0 : (uint32_t)len;
}

uint32_t fmt_fields_encode(const fmt_field_value *v, size_t n, uint8_t *out, size_t cap)
{
    uint32_t len = fmt_fields_size(v, n);
    if (!len || cap < len)
        return 0;
    memset(out, 0, len);
    fmt_le_put32(out, FMT_FIELDS_MAGIC);
    fmt_le_put32(out + 4, (uint32_t)n);
    fmt_le_put32(out + 8, len);
    size_t off = FMT_FIELDS_HEADER + 8 * n;
    for (size_t i = 0; i < n; i++) {
        uint8_t *d = out + FMT_FIELDS_HEADER + 8 * i;
        d[0] = (uint8_t)v[i].type;
        fmt_le_put32(d + 4, v[i].count);
        uint64_t raw = v[i].type == FMT_FIELD_INT || v[i].type == FMT_FIELD_FLOAT
                       ? 8ull * v[i].count : v[i].count;
        if (raw)
            memcpy(out + off, v[i].data, raw);
        off += value_bytes(v[i].type, v[i].count);
    }
    return len;
}

/* Is s[0..n) valid UTF-8 (no overlong forms, no surrogates, at most U+10FFFF)? */
static int utf8_ok(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        size_t k;
        uint32_t cp;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xe0) == 0xc0) {
            k = 1;
            cp = c & 0x1f;
        } else if ((c & 0xf0) == 0xe0) {
            k = 2;
            cp = c & 0x0f;
        } else if ((c & 0xf8) == 0xf0) {
            k = 3;
            cp = c & 0x07;
        } else {
            return 0;
        }
        if (n - i <= k)
            return 0;
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xc0) != 0x80)
                return 0;
            cp = cp << 6 | (s[i + j] & 0x3f);
        }
        static const uint32_t least[4] = {0, 0x80, 0x800, 0x10000};
        if (cp < least[k] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        i += k + 1;
    }
    return 1;
}

int fmt_fields_view(const uint8_t *rec, size_t len, fmt_field_value *vals, size_t cap, size_t *n,
                    fmt_msg *msg)
{
    *n = 0;
    if (!rec || len < FMT_FIELDS_HEADER || fmt_le_get32(rec) != FMT_FIELDS_MAGIC)
        return fmt_fail(msg, FMT_ECORRUPT, "not a fields record (%zu bytes, bad magic)", len);
    uint32_t nf = fmt_le_get32(rec + 4), declared = fmt_le_get32(rec + 8);
    if (declared != len)
        return fmt_fail(msg, FMT_ECORRUPT, "fields record of %zu bytes says it has %" PRIu32,
                        len, declared);
    if (fmt_le_get32(rec + 12) != 0)
        return fmt_fail(msg, FMT_ECORRUPT, "fields record: reserved field not zero");
    if (nf == 0 || nf > FMT_FIELDS_MAX || nf > cap)
        return fmt_fail(msg, FMT_ECORRUPT, "fields record with %" PRIu32 " fields (1..%u)", nf,
                        FMT_FIELDS_MAX);
    if (len > FMT_FIELDS_MAX_RECORD || (len & 7u) || FMT_FIELDS_HEADER + 8ull * nf > len)
        return fmt_fail(msg, FMT_ECORRUPT, "fields record of %zu bytes for %" PRIu32 " fields",
                        len, nf);
    uint64_t off = FMT_FIELDS_HEADER + 8ull * nf;
    for (uint32_t i = 0; i < nf; i++) {
        const uint8_t *d = rec + FMT_FIELDS_HEADER + 8 * (size_t)i;
        uint32_t type = d[0], count = fmt_le_get32(d + 4);
        if (!fmt_field_type_name(type) || d[1] || d[2] || d[3])
            return fmt_fail(msg, FMT_ECORRUPT, "fields record: value %" PRIu32 " has type %u%s",
                            i, d[0], d[1] || d[2] || d[3] ? " and non-zero reserved bytes" : "");
        if (count > FMT_FIELDS_MAX_COUNT)
            return fmt_fail(msg, FMT_ECORRUPT, "fields record: value %" PRIu32 " has %" PRIu32
                            " elements (at most %u)", i, count, FMT_FIELDS_MAX_COUNT);
        uint64_t raw = type == FMT_FIELD_INT || type == FMT_FIELD_FLOAT ? 8ull * count : count,
                 padded = value_bytes(type, count);
        if (off + padded > len)
            return fmt_fail(msg, FMT_ECORRUPT, "fields record: value %" PRIu32 " runs past its "
                            "end (%zu bytes)", i, len);
        for (uint64_t k = off + raw; k < off + padded; k++)
            if (rec[k])
                return fmt_fail(msg, FMT_ECORRUPT, "fields record: padding of value %" PRIu32
                                " not zero", i);
        if (type == FMT_FIELD_STR && !utf8_ok(rec + off, raw))
            return fmt_fail(msg, FMT_ECORRUPT, "fields record: value %" PRIu32 " is not valid "
                            "UTF-8", i);
        vals[i] = (fmt_field_value){.type = type, .count = count, .data = rec + off};
        off += padded;
    }
    if (off != len)
        return fmt_fail(msg, FMT_ECORRUPT, "fields record of %zu bytes, its values end at %" PRIu64,
                        len, off);
    *n = nf;
    return 0;
}

int fmt_fields_check(const uint8_t *rec, size_t len, const fmt_field_def *defs, size_t ndefs,
                     fmt_msg *msg)
{
    fmt_field_value v[FMT_FIELDS_MAX];
    size_t n;
    int rc = fmt_fields_view(rec, len, v, FMT_FIELDS_MAX, &n, msg);
    if (rc)
        return rc;
    if (n != ndefs)
        return fmt_fail(msg, FMT_ECORRUPT, "fields record holds %zu fields, the schema names %zu",
                        n, ndefs);
    for (size_t i = 0; i < n; i++) {
        const fmt_field_def *d = &defs[i];
        if (v[i].type != d->type)
            return fmt_fail(msg, FMT_ECORRUPT, "field '%s' is %s, the schema says %s", d->name,
                            fmt_field_type_name(v[i].type), fmt_field_type_name(d->type));
        if ((d->type == FMT_FIELD_INT || d->type == FMT_FIELD_FLOAT) &&
            v[i].count != (d->count ? d->count : 1))
            return fmt_fail(msg, FMT_ECORRUPT, "field '%s' has %" PRIu32 " values, the schema "
                            "says %" PRIu32, d->name, v[i].count, d->count ? d->count : 1);
    }
    return 0;
}

uint32_t fmt_pair_size(size_t tlen, size_t flen)
{
    if (tlen % 8 || flen % 8 || tlen > UINT32_MAX || flen > UINT32_MAX ||
        (uint64_t)tlen + flen > UINT32_MAX - FMT_PAIR_HEADER)
        return 0;
    return (uint32_t)(FMT_PAIR_HEADER + tlen + flen);
}

uint32_t fmt_pair_encode(const uint8_t *target, size_t tlen, const uint8_t *fields, size_t flen,
                         uint8_t *out, size_t cap)
{
    uint32_t len = fmt_pair_size(tlen, flen);
    if (!len || cap < len)
        return 0;
    fmt_le_put32(out, FMT_PAIR_MAGIC);
    fmt_le_put32(out + 4, (uint32_t)tlen);
    fmt_le_put32(out + 8, (uint32_t)flen);
    fmt_le_put32(out + 12, 0);
    if (tlen)
        memcpy(out + FMT_PAIR_HEADER, target, tlen);
    if (flen)
        memcpy(out + FMT_PAIR_HEADER + tlen, fields, flen);
    return len;
}

int fmt_pair_view(const uint8_t *rec, size_t len, const uint8_t **target, size_t *tlen,
                  const uint8_t **fields, size_t *flen, fmt_msg *msg)
{
    if (!rec || len < FMT_PAIR_HEADER || fmt_le_get32(rec) != FMT_PAIR_MAGIC)
        return fmt_fail(msg, FMT_ECORRUPT, "its aux record is not a pair record (no magic 'PAR1')");
    uint32_t t = fmt_le_get32(rec + 4), f = fmt_le_get32(rec + 8);
    if (fmt_le_get32(rec + 12) != 0)
        return fmt_fail(msg, FMT_ECORRUPT, "its pair record has non-zero reserved bytes");
    if (t % 8 || f % 8 || (uint64_t)FMT_PAIR_HEADER + t + f != len)
        return fmt_fail(msg, FMT_ECORRUPT, "its pair record says a %" PRIu32 "-byte target and "
                        "a %" PRIu32 "-byte fields record, it is %zu bytes", t, f, len);
    *target = rec + FMT_PAIR_HEADER;
    *tlen = t;
    *fields = rec + FMT_PAIR_HEADER + t;
    *flen = f;
    return 0;
}
