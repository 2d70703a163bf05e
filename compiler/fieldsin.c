/* fieldsin.c - `shardc build --fields FILE.jsonl` (fieldsin.h). */
#include "fieldsin.h"
#include "util.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#define FIELDS_FILE_MAX (1ull << 32)

typedef struct {
    const char *key;            /* into the file's buffer */
    size_t line;
    uint8_t *rec;
    uint32_t len;
} entry;

static int by_key(const void *a, const void *b)
{
    return strcmp(((const entry *)a)->key, ((const entry *)b)->key);
}

/* The type and count a JSON value gives (0: none of ours). */
static uint32_t infer(json_t *v, uint32_t *count)
{
    *count = 0;
    if (json_is_integer(v))
        return FMT_FIELD_INT;
    if (json_is_real(v))
        return FMT_FIELD_FLOAT;
    if (json_is_string(v))
        return FMT_FIELD_STR;
    if (!json_is_array(v) || json_array_size(v) == 0 || json_array_size(v) > FMT_FIELDS_MAX_COUNT)
        return 0;
    uint32_t t = FMT_FIELD_INT;
    for (size_t i = 0; i < json_array_size(v); i++) {
        json_t *e = json_array_get(v, i);
        if (json_is_real(e))
            t = FMT_FIELD_FLOAT;
        else if (!json_is_integer(e))
            return 0;
    }
    *count = (uint32_t)json_array_size(v);
    return t;
}

/* The record of one line's "fields" object against the schema (set from it when ndefs is 0). */
static int line_record(json_t *obj, shc_fields_in *f, const char *path, size_t line, entry *e,
                       fmt_msg *msg)
{
    size_t n = json_object_size(obj);
    if (f->ndefs == 0) {
        if (n == 0 || n > FMT_FIELDS_MAX)
            return fmt_fail(msg, EINVAL, "%s, line %zu: 'fields' names %zu fields (1..%u)", path,
                            line, n, FMT_FIELDS_MAX);
        if (!(f->defs = calloc(n, sizeof *f->defs)))
            return ENOMEM;
        const char *k;
        json_t *v;
        json_object_foreach(obj, k, v) {
            fmt_field_def *d = &f->defs[f->ndefs];
            uint32_t count;
            if (!(d->type = infer(v, &count)))
                return fmt_fail(msg, EINVAL, "%s, line %zu, field '%s': not an integer, a "
                                "number, a string or an array of 1..%u numbers", path, line, k,
                                FMT_FIELDS_MAX_COUNT);
            d->count = count;
            if (!(d->name = strdup(k)))
                return ENOMEM;
            f->ndefs++;
        }
        fmt_msg why = {{0}};
        if (fmt_fields_schema_check(f->defs, f->ndefs, &why))
            return fmt_fail(msg, EINVAL, "%s, line %zu: %s", path, line, why.text);
    }
    fmt_field_value vals[FMT_FIELDS_MAX];
    void *bufs[FMT_FIELDS_MAX] = {0};
    int rc = 0;
    if (n != f->ndefs) {
        const char *k;
        json_t *v;
        json_object_foreach(obj, k, v) {
            size_t j = 0;
            while (j < f->ndefs && strcmp(f->defs[j].name, k) != 0)
                j++;
            if (j == f->ndefs)
                return fmt_fail(msg, EINVAL, "%s, line %zu, field '%s': not in the schema of "
                                "line 1 (fields differ between lines)", path, line, k);
        }
    }
    for (size_t i = 0; rc == 0 && i < f->ndefs; i++) {
        const fmt_field_def *d = &f->defs[i];
        json_t *v = json_object_get(obj, d->name);
        uint32_t count, t = v ? infer(v, &count) : 0;
        if (!v) {
            rc = fmt_fail(msg, EINVAL, "%s, line %zu, field '%s': missing (every line names the "
                          "fields of the first)", path, line, d->name);
            break;
        }
        int fits = t == d->type || (t == FMT_FIELD_INT && d->type == FMT_FIELD_FLOAT);
        if (!fits || count != d->count) {
            char want[32], got[32];
            snprintf(want, sizeof want, d->count ? "%s[%u]" : "%s", fmt_field_type_name(d->type),
                     d->count);
            snprintf(got, sizeof got, count ? "%s[%u]" : "%s",
                     t ? fmt_field_type_name(t) : "another JSON value", count);
            rc = fmt_fail(msg, EINVAL, "%s, line %zu, field '%s': %s where the schema (line 1) "
                          "says %s", path, line, d->name, got, want);
            break;
        }
        vals[i].type = d->type;
        if (d->type == FMT_FIELD_STR) {
            vals[i].count = (uint32_t)json_string_length(v);
            vals[i].data = json_string_value(v);
            if (vals[i].count > FMT_FIELDS_MAX_COUNT)
                rc = fmt_fail(msg, EINVAL, "%s, line %zu, field '%s': a string of %u bytes (at "
                              "most %u)", path, line, d->name, vals[i].count,
                              FMT_FIELDS_MAX_COUNT);
            continue;
        }
        uint32_t k = d->count ? d->count : 1;
        uint8_t *b = malloc(8 * (size_t)k);
        if (!(bufs[i] = b)) {
            rc = ENOMEM;
            break;
        }
        for (uint32_t j = 0; j < k; j++) {
            json_t *x = d->count ? json_array_get(v, j) : v;
            if (d->type == FMT_FIELD_INT) {
                int64_t iv = (int64_t)json_integer_value(x);
                memcpy(b + 8 * (size_t)j, &iv, 8);
            } else {
                double dv = json_number_value(x);
                memcpy(b + 8 * (size_t)j, &dv, 8);
            }
        }
        vals[i].count = k;
        vals[i].data = b;
    }
    if (rc == 0) {
        uint32_t len = fmt_fields_size(vals, f->ndefs);
        if (!len)
            rc = fmt_fail(msg, EINVAL, "%s, line %zu: the fields exceed a record's %u bytes",
                          path, line, FMT_FIELDS_MAX_RECORD);
        else if (!(e->rec = malloc(len)))
            rc = ENOMEM;
        else
            e->len = fmt_fields_encode(vals, f->ndefs, e->rec, len);
    }
    for (size_t i = 0; i < f->ndefs; i++)
        free(bufs[i]);
    return rc;
}

/* in's item path relative to the SRC holding it, or NULL. */
static const char *relative(const char *p, char *const *srcs, size_t nsrc)
{
    for (size_t s = 0; s < nsrc; s++) {
        size_t k = strlen(srcs[s]);
        while (k > 1 && srcs[s][k - 1] == '/')
            k--;
        if (strncmp(p, srcs[s], k) == 0 && p[k] == '/')
            return p + k + 1;
    }
    return NULL;
}

static entry *find(entry *v, size_t n, const char *key)
{
    entry k = {.key = key};
    return key ? bsearch(&k, v, n, sizeof *v, by_key) : NULL;
}

int shc_fields_load(const char *path, const fmt_inputs *in, char *const *srcs, size_t nsrc,
                    shc_fields_in *out, fmt_msg *msg)
{
    memset(out, 0, sizeof *out);
    uint8_t *buf;
    size_t len;
    int rc = fmt_read_file(path, FIELDS_FILE_MAX, &buf, &len);
    if (rc)
        return fmt_fail(msg, rc, "cannot read %s: %s", path, fmt_strerror(rc));
    entry *ents = NULL;
    size_t nent = 0, cap = 0, line = 0;
    char *text = (char *)buf;
    for (char *p = text; rc == 0 && p < text + len; line++) {
        char *nl = memchr(p, '\n', (size_t)(text + len - p)), *end = nl ? nl : text + len;
        char *q = p;
        p = nl ? nl + 1 : text + len;
        while (q < end && (*q == ' ' || *q == '\t' || *q == '\r'))
            q++;
        if (q == end)
            continue;
        json_error_t je;
        json_t *o = json_loadb(q, (size_t)(end - q), JSON_REJECT_DUPLICATES, &je);
        json_t *jp = o ? json_object_get(o, "path") : NULL, *jf = o ? json_object_get(o, "fields")
                                                                     : NULL;
        if (!o || !json_is_string(jp) || !json_is_object(jf)) {
            rc = fmt_fail(msg, EINVAL, "%s, line %zu: %s", path, line + 1, o ? "not an object "
                          "with a string 'path' and an object 'fields'" : je.text);
            json_decref(o);
            break;
        }
        if (nent == cap) {
            cap = cap ? 2 * cap : 64;
            entry *g = realloc(ents, cap * sizeof *g);
            if (!g) {
                json_decref(o);
                rc = ENOMEM;
                break;
            }
            ents = g;
        }
        entry *e = &ents[nent];
        memset(e, 0, sizeof *e);
        e->line = line + 1;
        /* the key lives in the file's buffer: copy it over this line's own bytes */
        size_t kl = json_string_length(jp);
        if (memchr(json_string_value(jp), 0, kl)) {
            rc = fmt_fail(msg, EINVAL, "%s, line %zu: a path with a NUL character", path,
                          line + 1);
        } else {
            memcpy(q, json_string_value(jp), kl);
            q[kl] = '\0';
            e->key = q;
            rc = line_record(jf, out, path, line + 1, e, msg);
        }
        json_decref(o);
        if (rc == 0)
            nent++;
        else
            free(e->rec);
    }
    if (rc == 0 && nent == 0)
        rc = fmt_fail(msg, EINVAL, "%s: no lines", path);
    if (rc == 0) {
        qsort(ents, nent, sizeof *ents, by_key);
        for (size_t i = 1; rc == 0 && i < nent; i++)
            if (strcmp(ents[i].key, ents[i - 1].key) == 0)
                rc = fmt_fail(msg, EINVAL, "%s, line %zu: path '%s' also on line %zu", path,
                              ents[i].line > ents[i - 1].line ? ents[i].line : ents[i - 1].line,
                              ents[i].key, ents[i].line > ents[i - 1].line ? ents[i - 1].line
                                                                           : ents[i].line);
    }
    uint8_t *used = rc == 0 ? calloc(nent, 1) : NULL;
    if (rc == 0 && !used)
        rc = ENOMEM;
    if (rc == 0) {
        out->n = in->n;
        out->recs = calloc(in->n ? in->n : 1, sizeof *out->recs);
        out->lens = calloc(in->n ? in->n : 1, sizeof *out->lens);
        if (!out->recs || !out->lens)
            rc = ENOMEM;
    }
    for (size_t i = 0; rc == 0 && i < in->n; i++) {
        const char *p = in->items[i].path;
        entry *e = find(ents, nent, relative(p, srcs, nsrc));
        if (!e)
            e = find(ents, nent, p);
        if (!e) {
            rc = fmt_fail(msg, EINVAL, "%s: no line for input %s", path, p);
            break;
        }
        if (used[e - ents]) {
            rc = fmt_fail(msg, EINVAL, "%s, line %zu: names input %s, which another line also "
                          "names", path, e->line, p);
            break;
        }
        used[e - ents] = 1;
        out->recs[i] = e->rec;
        out->lens[i] = e->len;
        e->rec = NULL;
    }
    for (size_t i = 0; rc == 0 && i < nent; i++)
        if (!used[i])
            rc = fmt_fail(msg, EINVAL, "%s, line %zu: path '%s' is not among the inputs", path,
                          ents[i].line, ents[i].key);
    if (rc == 0) {
        XXH3_state_t *st = XXH3_createState();
        if (!st) {
            rc = ENOMEM;
        } else {
            XXH3_64bits_reset(st);
            for (size_t i = 0; i < out->ndefs; i++) {
                shc_hash_str(st, out->defs[i].name);
                XXH3_64bits_update(st, &out->defs[i].type, 4);
                XXH3_64bits_update(st, &out->defs[i].count, 4);
            }
            for (size_t i = 0; i < out->n; i++)
                XXH3_64bits_update(st, out->recs[i], out->lens[i]);
            out->hash = XXH3_64bits_digest(st);
            XXH3_freeState(st);
        }
    }
    for (size_t i = 0; i < nent; i++)
        free(ents[i].rec);
    free(ents);
    free(used);
    free(buf);
    if (rc)
        shc_fields_free(out);
    return rc;
}

void shc_fields_free(shc_fields_in *f)
{
    for (size_t i = 0; f->recs && i < f->n; i++)
        free(f->recs[i]);
    free(f->recs);
    free(f->lens);
    for (size_t i = 0; f->defs && i < f->ndefs; i++)
        free(f->defs[i].name);
    free(f->defs);
    memset(f, 0, sizeof *f);
}
