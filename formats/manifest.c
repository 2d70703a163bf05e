/* manifest.c - manifest.json through jansson. 64-bit hashes travel as 16-digit hex strings, since
 * JSON numbers are doubles for most readers. */
#include "manifest.h"
#include "target.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const mode_names[] = {"keep", "size", "short-side"};
static const char *const fit_names[] = {"crop", "pad", "stretch"};

const char *fmt_geom_mode_name(fmt_geom_mode m)
{
    return (unsigned)m < 3 ? mode_names[m] : "unknown";
}

const char *fmt_fit_name(fmt_fit f)
{
    return (unsigned)f < 3 ? fit_names[f] : "unknown";
}

int fmt_fit_parse(const char *s)
{
    for (int i = 0; i < 3; i++)
        if (strcmp(s, fit_names[i]) == 0)
            return i;
    return -1;
}

static int mode_parse(const char *s)
{
    for (int i = 0; i < 3; i++)
        if (strcmp(s, mode_names[i]) == 0)
            return i;
    return -1;
}

static json_t *hex64(uint64_t v)
{
    char buf[17];
    snprintf(buf, sizeof buf, "%016" PRIx64, v);
    return json_string(buf);
}

static json_t *dbl_array(const double *v, uint32_t n)
{
    json_t *a = json_array();
    for (uint32_t i = 0; i < n; i++)
        json_array_append_new(a, json_real(v[i]));
    return a;
}

/* ---- class names: bytes through JSON ----
 *
 * Class names are folder names, so bytes. JSON strings are Unicode: a name that is not valid
 * UTF-8 is written the way Python's "surrogateescape" writes it (and `shardc info --json` does):
 * each byte not part of valid UTF-8 as the escape \udcXX (XX = the byte, 80..ff), which
 * os.fsencode(json.load(...)[...]) turns back into that byte. jansson neither writes nor reads
 * lone surrogates, so such a byte travels through it as a marker no file name can contain: NUL
 * followed by the byte's two hex digits. */


/* A class name as a JSON string: the bytes that are not valid UTF-8 as markers. NULL: no memory */
static json_t *name_json(const char *name)
{
    const unsigned char *p = (const unsigned char *)name;
    size_t len = strlen(name);
    char *buf = malloc(3 * len + 1);
    if (!buf)
        return NULL;
    size_t o = 0;
    while (*p) {
        int n = fmt_utf8_len(p, 4);
        if (n == 0) {
            o += (size_t)sprintf(buf + o, "%c%02x", 0, *p++);
        } else {
            memcpy(buf + o, p, (size_t)n);
            o += (size_t)n;
            p += n;
        }
    }
    json_t *j = json_stringn_nocheck(buf, o);
    free(buf);
    return j;
}

/* The dumped text with each marker (jansson writes NUL as \u0000) as the escape \udcXX: in
 * place, since the escape is two characters shorter. Backslashes occur only inside strings, so
 * no string state is needed, only the pairing of a backslash with what it escapes. */
static void markers_to_escapes(char *text)
{
    char *o = text;
    for (const char *p = text; *p;) {
        if (p[0] == '\\' && strncmp(p + 1, "u0000", 5) == 0 && p[6] && p[7]) {
            o += sprintf(o, "\\udc%c%c", p[6], p[7]);
            p += 8;
        } else if (p[0] == '\\' && p[1]) {
            *o++ = *p++;
            *o++ = *p++;
        } else {
            *o++ = *p++;
        }
    }
    *o = '\0';
}

static int hex4(const char *p, unsigned *v)
{
    *v = 0;
    for (int i = 0; i < 4; i++) {
        int c = p[i], d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 :
                          c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            return -1;
        *v = *v << 4 | (unsigned)d;
    }
    return 0;
}

/* text with each escaped lone surrogate \udc80..\udcff as a marker, for jansson: a malloc'd copy
 * (*out, *olen) and the number of markers (*n); escapes it cannot turn into markers are left
 * for jansson to refuse. 0 or ENOMEM. */
static int escapes_to_markers(const char *text, size_t len, char **out, size_t *olen, size_t *n)
{
    char *buf = malloc(len + len / 3 + 1), *o = buf;
    if (!buf)
        return ENOMEM;
    *n = 0;
    int after_high = 0;         /* the previous character was an escaped high surrogate */
    for (size_t i = 0; i < len;) {
        unsigned v;
        if (text[i] == '\\' && i + 5 < len && text[i + 1] == 'u' && hex4(text + i + 2, &v) == 0) {
            if (v >= 0xDC80 && v <= 0xDCFF && !after_high) {
                o += sprintf(o, "\\u0000%02x", v & 0xff);
                (*n)++;
            } else {
                memcpy(o, text + i, 6);
                o += 6;
            }
            after_high = v >= 0xD800 && v <= 0xDBFF;
            i += 6;
        } else if (text[i] == '\\' && i + 1 < len) {
            *o++ = text[i++];
            *o++ = text[i++];
            after_high = 0;
        } else {
            *o++ = text[i++];
            after_high = 0;
        }
    }
    *out = buf;
    *olen = (size_t)(o - buf);
    return 0;
}

/* A class name from its JSON string: markers back into bytes. 0, FMT_ECORRUPT (a NUL that is not
 * a marker of a byte 80..ff), ENOMEM. */
static int name_from_json(json_t *j, char **out)
{
    const char *s = json_string_value(j);
    size_t len = json_string_length(j);
    char *buf = malloc(len + 1), *o = buf;
    if (!buf)
        return ENOMEM;
    for (size_t i = 0; i < len;) {
        unsigned v;
        if (s[i] != '\0') {
            *o++ = s[i++];
            continue;
        }
        char hex[5] = {'0', '0', i + 1 < len ? s[i + 1] : 'x', i + 2 < len ? s[i + 2] : 'x', 0};
        if (hex4(hex, &v) != 0 || v < 0x80) {
            free(buf);
            return FMT_ECORRUPT;
        }
        *o++ = (char)v;
        i += 3;
    }
    *o = '\0';
    *out = buf;
    return 0;
}

/* targets' version 2 members (manifest.md): "masks", "keypoints", "label_map". */
static int dump_target_ext(json_t *t, const fmt_manifest *m)
{
    int rc = json_object_set_new(t, "masks", json_boolean(m->target_ext & FMT_TARGET_EXT_MASKS));
    if (m->target_ext & FMT_TARGET_EXT_KEYPOINTS) {
        json_t *k = json_object(), *names = json_array(), *sk = json_array();
        if (!k || !names || !sk) {
            json_decref(k);
            json_decref(names);
            json_decref(sk);
            return ENOMEM;
        }
        for (uint32_t i = 0; i < m->num_keypoints; i++)
            rc |= json_array_append_new(names, name_json(m->keypoint_names[i]));
        for (uint32_t i = 0; i < m->nskeleton; i++)
            rc |= json_array_append_new(sk, json_pack("[II]", (json_int_t)m->skeleton[2 * i],
                                                      (json_int_t)m->skeleton[2 * i + 1]));
        rc |= json_object_set_new(k, "count", json_integer(m->num_keypoints));
        rc |= json_object_set_new(k, "names", names);
        rc |= json_object_set_new(k, "skeleton", sk);
        rc |= json_object_set_new(t, "keypoints", k);
    }
    if (m->target_ext & FMT_TARGET_EXT_MAP)
        rc |= json_object_set_new(t, "label_map", json_pack("{sI}", "ignore_index",
                                                             (json_int_t)m->ignore_index));
    return rc ? ENOMEM : 0;
}

int fmt_manifest_dump(const fmt_manifest *m, char **out)
{
    *out = NULL;
    json_t *root = json_object();
    json_t *classes = json_array(), *shards = json_array();
    if (!root || !classes || !shards)
        goto nomem;
    json_object_set_new(root, "format", json_string("shardc"));
    json_object_set_new(root, "manifest_version", json_integer(FMT_MANIFEST_VERSION));
    json_object_set_new(root, "backend", json_string(m->backend ? m->backend : "raw"));
    json_object_set_new(root, "backend_version", json_integer(m->backend_version));
    json_object_set_new(root, "tool", json_string(m->tool ? m->tool : ""));
    json_object_set_new(root, "samples", json_integer((json_int_t)m->samples));
    json_object_set_new(root, "inputs", json_integer((json_int_t)m->inputs));
    json_object_set_new(root, "rejects", json_integer((json_int_t)m->rejects));
    for (size_t i = 0; i < m->nclasses; i++)
        if (json_array_append_new(classes, name_json(m->classes[i])) != 0)
            goto nomem;
    json_object_set(root, "classes", classes);

    json_t *g = json_object();
    json_object_set_new(g, "mode", json_string(fmt_geom_mode_name(m->geom.mode)));
    json_object_set_new(g, "fit", json_string(fmt_fit_name(m->geom.fit)));
    json_object_set_new(g, "width", json_integer(m->geom.width));
    json_object_set_new(g, "height", json_integer(m->geom.height));
    json_object_set_new(g, "short_side", json_integer(m->geom.short_side));
    json_object_set_new(g, "max_side", json_integer(m->geom.max_side));
    json_object_set_new(g, "crop_width", json_integer(m->geom.crop_w));
    json_object_set_new(g, "crop_height", json_integer(m->geom.crop_h));
    json_object_set_new(g, "filter", json_string(fmt_filter_name(m->geom.filter)));
    json_object_set_new(g, "shrink_on_load", json_boolean(m->geom.shrink_on_load));
    char chain[256];
    fmt_geom_chain(&m->geom, chain, sizeof chain);
    json_object_set_new(g, "chain", json_string(chain));
    json_object_set_new(g, "channels", json_integer(m->channels));
    json_object_set_new(g, "sample_width", json_integer(m->sample_width));
    json_object_set_new(g, "sample_height", json_integer(m->sample_height));
    json_object_set_new(root, "geometry", g);

    json_t *st = json_object();
    json_object_set_new(st, "pixels", json_integer((json_int_t)m->pixels));
    json_object_set_new(st, "mean", dbl_array(m->mean, m->channels));
    json_object_set_new(st, "std", dbl_array(m->std, m->channels));
    json_object_set_new(root, "stats", st);

    json_t *aug = json_object();
    json_object_set_new(aug, "variants", json_integer(m->augment));
    json_object_set_new(aug, "spec", m->aug_spec ? json_string(m->aug_spec) : json_null());
    json_object_set_new(aug, "seed", hex64(m->seed));
    json_object_set_new(root, "augment", aug);

    if (m->targets) {
        json_t *t = json_object(), *cats = json_array();
        if (!t || !cats) {
            json_decref(t);
            json_decref(cats);
            goto nomem;
        }
        json_object_set_new(t, "kind", json_string("boxes"));
        json_object_set_new(t, "record_version", json_integer(m->target_ext ? 2 : 1));
        if (m->target_ext && dump_target_ext(t, m) != 0) {
            json_decref(t);
            json_decref(cats);
            goto nomem;
        }
        json_object_set_new(t, "source", json_string(m->target_source ? m->target_source : ""));
        json_object_set_new(t, "hash", hex64(m->target_hash));
        json_object_set_new(t, "skipped_empty", json_integer((json_int_t)m->target_skipped));
        for (size_t i = 0; i < m->ncategories; i++) {
            json_t *c = json_object();
            json_object_set_new(c, "id", json_integer((json_int_t)m->categories[i].id));
            json_object_set_new(c, "name", name_json(m->categories[i].name));
            json_array_append_new(cats, c);
        }
        json_object_set_new(t, "categories", cats);
        json_object_set_new(root, "targets", t);
    }

    if (m->nfields) {
        json_t *f = json_object(), *schema = json_array();
        if (!f || !schema) {
            json_decref(f);
            json_decref(schema);
            goto nomem;
        }
        /* 2: each record travels in a pair record with the sample's target (fields.h) */
        json_object_set_new(f, "record_version", json_integer(m->targets ? 2 : 1));
        json_object_set_new(f, "source", json_string(m->fields_source ? m->fields_source : ""));
        json_object_set_new(f, "hash", hex64(m->fields_hash));
        for (size_t i = 0; i < m->nfields; i++) {
            json_t *c = json_object();
            json_object_set_new(c, "name", json_string(m->fields[i].name));
            json_object_set_new(c, "type", json_string(fmt_field_type_name(m->fields[i].type)));
            json_object_set_new(c, "count", json_integer(m->fields[i].count));
            json_array_append_new(schema, c);
        }
        json_object_set_new(f, "schema", schema);
        json_object_set_new(root, "fields", f);
    }

    json_object_set_new(root, "fingerprint", hex64(m->fingerprint));
    for (size_t i = 0; i < m->nshards; i++) {
        const fmt_manifest_shard *s = &m->shards[i];
        json_t *o = json_object();
        json_object_set_new(o, "file", json_string(s->file));
        json_object_set_new(o, "first", json_integer((json_int_t)s->first));
        json_object_set_new(o, "samples", json_integer((json_int_t)s->samples));
        if (s->offset)
            json_object_set_new(o, "offset", json_integer((json_int_t)s->offset));
        json_object_set_new(o, "bytes", json_integer((json_int_t)s->bytes));
        json_object_set_new(o, "hash", hex64(s->hash));
        if (s->pins & FMT_PIN_FILE)
            json_object_set_new(o, "file_hash", hex64(s->file_hash));
        if (s->pins & FMT_PIN_OPEN) {
            json_t *p = json_object();
            json_object_set_new(p, "hash", hex64(s->pin_hash));
            json_object_set_new(p, "skip_offset", json_integer((json_int_t)s->pin_skip_off));
            json_object_set_new(p, "skip_bytes", json_integer((json_int_t)s->pin_skip_len));
            json_object_set_new(o, "pin", p);
        }
        if (s->skel_len) {
            json_t *k = json_object();
            json_object_set_new(k, "offset", json_integer((json_int_t)s->skel_off));
            json_object_set_new(k, "bytes", json_integer((json_int_t)s->skel_len));
            json_object_set_new(o, "skeleton", k);
        }
        json_array_append_new(shards, o);
    }
    json_object_set(root, "shards", shards);
    if (m->build_json) {
        json_t *b = json_loads(m->build_json, 0, NULL);
        if (b)
            json_object_set_new(root, "build", b);
    }
    *out = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    if (*out)
        markers_to_escapes(*out);
    json_decref(classes);
    json_decref(shards);
    json_decref(root);
    if (!*out)
        return ENOMEM;
    return 0;
nomem:
    json_decref(classes);
    json_decref(shards);
    json_decref(root);
    return ENOMEM;
}

/* ---- parsing: every accessor checks type and range and names the field on failure ---- */

static int get_u64(json_t *o, const char *key, uint64_t max, uint64_t *v, fmt_msg *msg)
{
    json_t *j = json_object_get(o, key);
    if (!json_is_integer(j) || json_integer_value(j) < 0 ||
        (uint64_t)json_integer_value(j) > max)
        return fmt_fail(msg, FMT_ECORRUPT, "manifest field '%s' missing or out of range", key);
    *v = (uint64_t)json_integer_value(j);
    return 0;
}

static int get_u32(json_t *o, const char *key, uint32_t max, uint32_t *v, fmt_msg *msg)
{
    uint64_t x;
    int rc = get_u64(o, key, max, &x, msg);
    if (rc == 0)
        *v = (uint32_t)x;
    return rc;
}

/* A field that manifests of earlier versions lack: absent reads as 0. */
static int get_opt_u32(json_t *o, const char *key, uint32_t max, uint32_t *v, fmt_msg *msg)
{
    *v = 0;
    return json_object_get(o, key) ? get_u32(o, key, max, v, msg) : 0;
}

static int get_str(json_t *o, const char *key, char **v, fmt_msg *msg)
{
    json_t *j = json_object_get(o, key);
    if (!json_is_string(j))
        return fmt_fail(msg, FMT_ECORRUPT, "manifest field '%s' missing or not a string", key);
    if (strlen(json_string_value(j)) != json_string_length(j))
        return fmt_fail(msg, FMT_ECORRUPT, "manifest field '%s' holds a NUL character", key);
    *v = strdup(json_string_value(j));
    return *v ? 0 : ENOMEM;
}

static int get_hex(json_t *o, const char *key, uint64_t *v, fmt_msg *msg)
{
    json_t *j = json_object_get(o, key);
    const char *s = json_string_value(j);
    if (!s || strlen(s) != 16 || strspn(s, "0123456789abcdef") != 16)
        return fmt_fail(msg, FMT_ECORRUPT, "manifest field '%s' is not a 16-digit hex hash", key);
    *v = strtoull(s, NULL, 16);
    return 0;
}

/* targets' version 2 members (manifest.md): at least one of "masks": true, "keypoints" (count
 * 1..1024, as many names, skeleton pairs of keypoint numbers 1..count), "label_map"
 * (ignore_index 0..65535). */
static int parse_target_ext(json_t *t, fmt_manifest *m, fmt_msg *msg)
{
    json_t *mk = json_object_get(t, "masks"), *kp = json_object_get(t, "keypoints"),
           *lm = json_object_get(t, "label_map");
    int rc;
    if (mk && !json_is_boolean(mk))
        return fmt_fail(msg, FMT_ECORRUPT, "manifest field 'targets.masks' is not a boolean");
    if (json_is_true(mk))
        m->target_ext |= FMT_TARGET_EXT_MASKS;
    if (kp) {
        json_t *names = json_object_get(kp, "names"), *sk = json_object_get(kp, "skeleton");
        if (!json_is_object(kp) ||
            (rc = get_u32(kp, "count", FMT_TARGET_MAX_KEYPOINTS, &m->num_keypoints, msg)))
            return fmt_fail(msg, FMT_ECORRUPT, "manifest field 'targets.keypoints' is not an "
                            "object with a 'count' of 1 to %u", FMT_TARGET_MAX_KEYPOINTS);
        if (m->num_keypoints == 0 || !json_is_array(names) ||
            json_array_size(names) != m->num_keypoints || !json_is_array(sk))
            return fmt_fail(msg, FMT_ECORRUPT, "manifest 'targets.keypoints' needs a count > 0, "
                            "as many 'names' and a 'skeleton' array");
        m->target_ext |= FMT_TARGET_EXT_KEYPOINTS;
        m->keypoint_names = calloc(m->num_keypoints, sizeof *m->keypoint_names);
        m->nskeleton = (uint32_t)json_array_size(sk);
        m->skeleton = calloc(2 * (size_t)m->nskeleton + 1, sizeof *m->skeleton);
        if (!m->keypoint_names || !m->skeleton)
            return ENOMEM;
        for (uint32_t i = 0; i < m->num_keypoints; i++)
            if ((rc = name_from_json(json_array_get(names, i), &m->keypoint_names[i])) != 0)
                return rc == ENOMEM ? rc : fmt_fail(msg, rc, "manifest 'targets.keypoints.names"
                                                    "[%u]' is malformed", i);
        for (uint32_t i = 0; i < m->nskeleton; i++) {
            json_t *e = json_array_get(sk, i), *a = json_array_get(e, 0), *b = json_array_get(e, 1);
            if (!json_is_array(e) || json_array_size(e) != 2 || !json_is_integer(a) ||
                !json_is_integer(b) || json_integer_value(a) < 1 || json_integer_value(b) < 1 ||
                json_integer_value(a) > m->num_keypoints || json_integer_value(b) > m->num_keypoints)
                return fmt_fail(msg, FMT_ECORRUPT, "manifest 'targets.keypoints.skeleton[%u]' is "
                                "not a pair of keypoint numbers 1..%u", i, m->num_keypoints);
            m->skeleton[2 * i] = (uint32_t)json_integer_value(a);
            m->skeleton[2 * i + 1] = (uint32_t)json_integer_value(b);
        }
    }
    if (lm) {
        if (!json_is_object(lm) ||
            (rc = get_u32(lm, "ignore_index", FMT_TARGET_MAX_LABEL, &m->ignore_index, msg)))
            return fmt_fail(msg, FMT_ECORRUPT, "manifest field 'targets.label_map' is not an "
                            "object with an 'ignore_index' of 0 to %u", FMT_TARGET_MAX_LABEL);
        m->target_ext |= FMT_TARGET_EXT_MAP;
    }
    if (!m->target_ext)
        return fmt_fail(msg, FMT_ECORRUPT, "manifest 'targets': record version 2 without "
                        "'masks', 'keypoints' or 'label_map'");
    return 0;
}

/* The "targets" object (manifest.md): kind "boxes", record version 1, categories with distinct
 * ids in increasing order. */
static int parse_targets(json_t *t, fmt_manifest *m, fmt_msg *msg)
{
    int rc;
    uint32_t version;
    json_t *kind = json_object_get(t, "kind"), *cats = json_object_get(t, "categories");
    if (!json_is_object(t) || !json_is_string(kind) ||
        strcmp(json_string_value(kind), "boxes") != 0)
        return fmt_fail(msg, FMT_ECORRUPT, "manifest field 'targets' is not an object of kind "
                        "'boxes'");
    if ((rc = get_u32(t, "record_version", UINT32_MAX, &version, msg)))
        return rc;
    if (version != 1 && version != 2)
        return fmt_fail(msg, FMT_EVERSION, "manifest 'targets': record version %u is not "
                        "supported", version);
    if (version == 2 && (rc = parse_target_ext(t, m, msg)))
        return rc;
    if ((rc = get_str(t, "source", &m->target_source, msg)) ||
        (rc = get_hex(t, "hash", &m->target_hash, msg)) ||
        (rc = get_u64(t, "skipped_empty", UINT64_MAX >> 11, &m->target_skipped, msg)))
        return rc;
    if (!json_is_array(cats))
        return fmt_fail(msg, FMT_ECORRUPT, "manifest field 'targets.categories' is not an array");
    m->targets = 1;
    m->ncategories = json_array_size(cats);
    m->categories = calloc(m->ncategories ? m->ncategories : 1, sizeof *m->categories);
    if (!m->categories)
        return ENOMEM;
    for (size_t i = 0; i < m->ncategories; i++) {
        json_t *c = json_array_get(cats, i), *id = json_object_get(c, "id"),
               *name = json_object_get(c, "name");
        if (!json_is_integer(id) || !json_is_string(name))
            return fmt_fail(msg, FMT_ECORRUPT, "manifest 'targets.categories[%zu]' needs an "
                            "integer 'id' and a string 'name'", i);
        m->categories[i].id = (int64_t)json_integer_value(id);
        if (i && m->categories[i].id <= m->categories[i - 1].id)
            return fmt_fail(msg, FMT_ECORRUPT, "manifest 'targets.categories': ids not in "
                            "increasing order at entry %zu", i);
        if ((rc = name_from_json(name, &m->categories[i].name)) != 0)
            return rc == ENOMEM ? rc : fmt_fail(msg, rc, "manifest 'targets.categories[%zu]"
                                                ".name' is malformed", i);
    }
    return 0;
}

/* The "fields" object (manifest.md): record version 1 (2 with "targets": pair records), a schema
 * fields.h accepts. */
static int parse_fields(json_t *f, fmt_manifest *m, fmt_msg *msg)
{
    int rc;
    uint32_t version;
    json_t *schema = json_object_get(f, "schema");
    if (!json_is_object(f))
        return fmt_fail(msg, FMT_ECORRUPT, "manifest field 'fields' is not an object");
    if ((rc = get_u32(f, "record_version", UINT32_MAX, &version, msg)))
        return rc;
    if (version != 1 && version != 2)
        return fmt_fail(msg, FMT_EVERSION, "manifest 'fields': record version %u is not "
                        "supported", version);
    /* 1: the fields record is the aux record; 2: it shares a pair record with the target */
    if (version != (m->targets ? 2u : 1u))
        return fmt_fail(msg, FMT_ECORRUPT, "manifest 'fields': record version %u %s 'targets'",
                        version, m->targets ? "with" : "without");
    if ((rc = get_str(f, "source", &m->fields_source, msg)) ||
        (rc = get_hex(f, "hash", &m->fields_hash, msg)))
        return rc;
    if (!json_is_array(schema) || json_array_size(schema) == 0 ||
        json_array_size(schema) > FMT_FIELDS_MAX)
        return fmt_fail(msg, FMT_ECORRUPT, "manifest field 'fields.schema' is not an array of "
                        "1..%u fields", FMT_FIELDS_MAX);
    size_t n = json_array_size(schema);
    if (!(m->fields = calloc(n, sizeof *m->fields)))
        return ENOMEM;
    m->nfields = n;
    for (size_t i = 0; i < n; i++) {
        json_t *c = json_array_get(schema, i), *name = json_object_get(c, "name"),
               *type = json_object_get(c, "type"), *count = json_object_get(c, "count");
        if (!json_is_string(name) || !json_is_string(type) || !json_is_integer(count) ||
            json_integer_value(count) < 0 || json_integer_value(count) > FMT_FIELDS_MAX_COUNT)
            return fmt_fail(msg, FMT_ECORRUPT, "manifest 'fields.schema[%zu]' needs a string "
                            "'name', a string 'type' and an integer 'count'", i);
        if (!(m->fields[i].name = strdup(json_string_value(name))))
            return ENOMEM;
        m->fields[i].type = fmt_field_type_parse(json_string_value(type));
        m->fields[i].count = (uint32_t)json_integer_value(count);
    }
    fmt_msg why = {{0}};
    if (fmt_fields_schema_check(m->fields, n, &why) != 0)
        return fmt_fail(msg, FMT_ECORRUPT, "manifest 'fields.schema': %s", why.text);
    if (m->augment)
        return fmt_fail(msg, FMT_ECORRUPT, "manifest has 'fields' with 'augment': a sample's aux "
                        "record holds its variant's parameters");
    return 0;
}

long fmt_manifest_find_category(const fmt_manifest *m, int64_t id)
{
    size_t lo = 0, hi = m->ncategories;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->categories[mid].id == id)
            return (long)mid;
        if (m->categories[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

static int get_dbls(json_t *o, const char *key, uint32_t n, double *v, fmt_msg *msg)
{
    json_t *a = json_object_get(o, key);
    if (!json_is_array(a) || json_array_size(a) != n)
        return fmt_fail(msg, FMT_ECORRUPT, "manifest field '%s' is not an array of %u numbers", key,
                        n);
    for (uint32_t i = 0; i < n; i++) {
        json_t *x = json_array_get(a, i);
        if (!json_is_number(x) || !isfinite(json_number_value(x)))
            return fmt_fail(msg, FMT_ECORRUPT, "manifest field '%s' holds a non-number", key);
        v[i] = json_number_value(x);
    }
    return 0;
}

/* A shard path must stay inside the dataset directory: relative, at most 4 components, none
 * empty or starting with '.' (so no "..", no hidden names). */
static int safe_name(const char *s)
{
    size_t len = strlen(s);
    if (len == 0 || len >= 1024)
        return 0;
    int parts = 0;
    for (const char *p = s;;) {
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 0 || n >= 256 || p[0] == '.' || ++parts > 4)
            return 0;
        if (!e)
            return 1;
        p = e + 1;
    }
}

int fmt_manifest_parse(const char *text, size_t len, fmt_manifest *m, fmt_msg *msg)
{
    memset(m, 0, sizeof *m);
    json_error_t jerr;
    /* escaped bytes of class names as markers (see "class names" above); only then are NULs
     * allowed, and only class names may hold them */
    char *marked = NULL;
    size_t mlen = 0, markers = 0;
    if (escapes_to_markers(text, len, &marked, &mlen, &markers) != 0)
        return ENOMEM;
    json_t *root = json_loadb(marked, mlen, JSON_REJECT_DUPLICATES | (markers ? JSON_ALLOW_NUL : 0),
                              &jerr);
    free(marked);
    if (!root)
        return fmt_fail(msg, FMT_ECORRUPT, "manifest is not valid JSON: %s (line %d)", jerr.text,
                        jerr.line);
    int rc = 0;
    uint32_t version = 0;
    const uint64_t big = (uint64_t)1 << 53;
    if (!json_is_object(root)) {
        rc = fmt_fail(msg, FMT_ECORRUPT, "manifest is not a JSON object");
        goto leave;
    }
    if (!json_is_string(json_object_get(root, "format")) ||
        strcmp(json_string_value(json_object_get(root, "format")), "shardc") != 0) {
        rc = fmt_fail(msg, FMT_EFORMAT, "not a shardc manifest");
        goto leave;
    }
    if ((rc = get_u32(root, "manifest_version", UINT32_MAX, &version, msg)))
        goto leave;
    if (version != FMT_MANIFEST_VERSION) {
        rc = fmt_fail(msg, FMT_EVERSION, "manifest version %u not supported (this is %d)", version,
                      FMT_MANIFEST_VERSION);
        goto leave;
    }
    if ((rc = get_str(root, "backend", &m->backend, msg)) ||
        (rc = get_u32(root, "backend_version", UINT32_MAX, &m->backend_version, msg)) ||
        (rc = get_str(root, "tool", &m->tool, msg)) ||
        (rc = get_u64(root, "samples", big, &m->samples, msg)) ||
        (rc = get_u64(root, "inputs", big, &m->inputs, msg)) ||
        (rc = get_u64(root, "rejects", big, &m->rejects, msg)) ||
        (rc = get_hex(root, "fingerprint", &m->fingerprint, msg)))
        goto leave;

    json_t *classes = json_object_get(root, "classes");
    if (!json_is_array(classes)) {
        rc = fmt_fail(msg, FMT_ECORRUPT, "manifest field 'classes' is not an array");
        goto leave;
    }
    m->nclasses = json_array_size(classes);
    m->classes = calloc(m->nclasses ? m->nclasses : 1, sizeof *m->classes);
    if (!m->classes) {
        rc = ENOMEM;
        goto leave;
    }
    for (size_t i = 0; i < m->nclasses; i++) {
        json_t *c = json_array_get(classes, i);
        if (!json_is_string(c)) {
            rc = fmt_fail(msg, FMT_ECORRUPT, "manifest class %zu is not a string", i);
            goto leave;
        }
        if ((rc = name_from_json(c, &m->classes[i])) != 0) {
            if (rc == FMT_ECORRUPT)
                fmt_fail(msg, rc, "manifest class %zu holds a NUL character", i);
            goto leave;
        }
    }

    json_t *g = json_object_get(root, "geometry");
    const char *mode = json_string_value(json_object_get(g, "mode"));
    const char *fit = json_string_value(json_object_get(g, "fit"));
    int mi = mode ? mode_parse(mode) : -1, fi = fit ? fmt_fit_parse(fit) : -1;
    if (!json_is_object(g) || mi < 0 || fi < 0) {
        rc = fmt_fail(msg, FMT_ECORRUPT, "manifest 'geometry' missing or has a bad mode or fit");
        goto leave;
    }
    m->geom.mode = (fmt_geom_mode)mi;
    m->geom.fit = (fmt_fit)fi;
    if ((rc = get_u32(g, "width", 1u << 20, &m->geom.width, msg)) ||
        (rc = get_u32(g, "height", 1u << 20, &m->geom.height, msg)) ||
        (rc = get_u32(g, "short_side", 1u << 20, &m->geom.short_side, msg)) ||
        (rc = get_u32(g, "max_side", 1u << 20, &m->geom.max_side, msg)) ||
        (rc = get_opt_u32(g, "crop_width", 1u << 20, &m->geom.crop_w, msg)) ||
        (rc = get_opt_u32(g, "crop_height", 1u << 20, &m->geom.crop_h, msg)) ||
        (rc = get_u32(g, "channels", 3, &m->channels, msg)) ||
        (rc = get_u32(g, "sample_width", 1u << 20, &m->sample_width, msg)) ||
        (rc = get_u32(g, "sample_height", 1u << 20, &m->sample_height, msg)))
        goto leave;
    /* filter and shrink_on_load: absent in manifests of earlier versions (bilinear, off) */
    json_t *filt = json_object_get(g, "filter"), *sol = json_object_get(g, "shrink_on_load");
    if (filt && (!json_is_string(filt) ||
                 fmt_filter_parse(json_string_value(filt), &m->geom.filter) != 0)) {
        rc = fmt_fail(msg, FMT_ECORRUPT, "manifest 'geometry' has a bad filter");
        goto leave;
    }
    if (sol && !json_is_boolean(sol)) {
        rc = fmt_fail(msg, FMT_ECORRUPT, "manifest 'shrink_on_load' is not a boolean");
        goto leave;
    }
    m->geom.shrink_on_load = sol && json_is_true(sol);
    if (m->channels != 1 && m->channels != 3) {
        rc = fmt_fail(msg, FMT_ECORRUPT, "manifest 'channels' must be 1 or 3");
        goto leave;
    }

    json_t *st = json_object_get(root, "stats");
    if ((rc = get_u64(st, "pixels", UINT64_MAX >> 1, &m->pixels, msg)) ||
        (rc = get_dbls(st, "mean", m->channels, m->mean, msg)) ||
        (rc = get_dbls(st, "std", m->channels, m->std, msg)))
        goto leave;

    json_t *aug = json_object_get(root, "augment");
    if (aug) {
        if ((rc = get_u32(aug, "variants", 1u << 20, &m->augment, msg)) ||
            (rc = get_hex(aug, "seed", &m->seed, msg)))
            goto leave;
        json_t *spec = json_object_get(aug, "spec");
        if (m->augment && (rc = get_str(aug, "spec", &m->aug_spec, msg)))
            goto leave;
        if (!m->augment && !json_is_null(spec) && spec) {
            rc = fmt_fail(msg, FMT_ECORRUPT, "manifest 'augment' has a spec but no variants");
            goto leave;
        }
    }

    json_t *tg = json_object_get(root, "targets");
    if (tg && (rc = parse_targets(tg, m, msg)))
        goto leave;
    json_t *fl = json_object_get(root, "fields");
    if (fl && (rc = parse_fields(fl, m, msg)))
        goto leave;

    json_t *shards = json_object_get(root, "shards");
    if (!json_is_array(shards)) {
        rc = fmt_fail(msg, FMT_ECORRUPT, "manifest field 'shards' is not an array");
        goto leave;
    }
    m->nshards = json_array_size(shards);
    m->shards = calloc(m->nshards ? m->nshards : 1, sizeof *m->shards);
    if (!m->shards) {
        rc = ENOMEM;
        goto leave;
    }
    uint64_t next = 0;
    for (size_t i = 0; i < m->nshards; i++) {
        json_t *o = json_array_get(shards, i);
        fmt_manifest_shard *s = &m->shards[i];
        if (!json_is_object(o)) {
            rc = fmt_fail(msg, FMT_ECORRUPT, "manifest shard %zu is not an object", i);
            goto leave;
        }
        if ((rc = get_str(o, "file", &s->file, msg)) ||
            (rc = get_u64(o, "first", big, &s->first, msg)) ||
            (rc = get_u64(o, "samples", big, &s->samples, msg)) ||
            (rc = get_u64(o, "bytes", UINT64_MAX >> 1, &s->bytes, msg)) ||
            (rc = get_hex(o, "hash", &s->hash, msg)))
            goto leave;
        if (json_object_get(o, "file_hash")) {
            if ((rc = get_hex(o, "file_hash", &s->file_hash, msg)))
                goto leave;
            s->pins |= FMT_PIN_FILE;
        }
        json_t *pin = json_object_get(o, "pin");
        if (pin) {
            if (!json_is_object(pin)) {
                rc = fmt_fail(msg, FMT_ECORRUPT, "manifest shard %zu: 'pin' is not an object", i);
                goto leave;
            }
            if ((rc = get_hex(pin, "hash", &s->pin_hash, msg)) ||
                (rc = get_u64(pin, "skip_offset", UINT64_MAX >> 1, &s->pin_skip_off, msg)) ||
                (rc = get_u64(pin, "skip_bytes", UINT64_MAX >> 1, &s->pin_skip_len, msg)))
                goto leave;
            if (s->pin_skip_off + s->pin_skip_len > s->bytes) {
                rc = fmt_fail(msg, FMT_ECORRUPT, "manifest shard %zu: pin range past the file", i);
                goto leave;
            }
            s->pins |= FMT_PIN_OPEN;
        }
        json_t *skel = json_object_get(o, "skeleton");
        if (skel) {
            if (!json_is_object(skel)) {
                rc = fmt_fail(msg, FMT_ECORRUPT, "manifest shard %zu: 'skeleton' is not an "
                              "object", i);
                goto leave;
            }
            if ((rc = get_u64(skel, "offset", UINT64_MAX >> 1, &s->skel_off, msg)) ||
                (rc = get_u64(skel, "bytes", UINT64_MAX >> 1, &s->skel_len, msg)))
                goto leave;
            if (!s->skel_len || s->skel_off + s->skel_len > s->bytes) {
                rc = fmt_fail(msg, FMT_ECORRUPT, "manifest shard %zu: skeleton range empty or "
                              "past the file", i);
                goto leave;
            }
        }
        if (json_object_get(o, "offset") && (rc = get_u64(o, "offset", big, &s->offset, msg)))
            goto leave;
        if (s->offset > s->first) {
            rc = fmt_fail(msg, FMT_ECORRUPT, "manifest shard %zu has an offset past its first "
                          "sample", i);
            goto leave;
        }
        if (!safe_name(s->file)) {
            rc = fmt_fail(msg, FMT_ECORRUPT, "manifest shard %zu has an unsafe file name", i);
            goto leave;
        }
        if (s->first != next) {
            rc = fmt_fail(msg, FMT_ECORRUPT, "manifest shard %zu starts at %" PRIu64
                          ", expected %" PRIu64, i, s->first, next);
            goto leave;
        }
        next += s->samples;
    }
    if (next != m->samples) {
        rc = fmt_fail(msg, FMT_ECORRUPT, "manifest shards hold %" PRIu64 " samples, not %" PRIu64,
                      next, m->samples);
        goto leave;
    }
    json_t *b = json_object_get(root, "build");
    if (json_is_object(b)) {
        m->build_json = json_dumps(b, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (!m->build_json) {
            rc = ENOMEM;
            goto leave;
        }
    }
leave:
    json_decref(root);
    if (rc)
        fmt_manifest_free(m);
    return rc;
}

int fmt_manifest_stage(const char *dir, const fmt_manifest *m)
{
    char *text = NULL, *path = fmt_path_join(dir, FMT_MANIFEST_STAGED_NAME, "");
    int rc = path ? fmt_manifest_dump(m, &text) : ENOMEM;
    if (rc == 0) {
        size_t n = strlen(text);
        char *t2 = realloc(text, n + 2);
        if (!t2) {
            rc = ENOMEM;
        } else {
            text = t2;
            text[n] = '\n';
            rc = fmt_write_file_synced(path, text, n + 1);
        }
    }
    free(text);
    free(path);
    return rc;
}

int fmt_manifest_publish(const char *dir)
{
    char *from = fmt_path_join(dir, FMT_MANIFEST_STAGED_NAME, ""),
         *to = fmt_path_join(dir, FMT_MANIFEST_NAME, "");
    int rc = from && to ? 0 : ENOMEM;
    if (rc == 0 && rename(from, to) != 0)
        rc = errno;
    if (rc == 0)
        rc = fmt_fsync_parent(to);
    free(from);
    free(to);
    return rc;
}

int fmt_manifest_write(const char *dir, const fmt_manifest *m)
{
    int rc = fmt_manifest_stage(dir, m);
    return rc ? rc : fmt_manifest_publish(dir);
}

int fmt_manifest_read_named(const char *dir, const char *name, fmt_manifest *m, fmt_msg *msg)
{
    memset(m, 0, sizeof *m);
    char *path = fmt_path_join(dir, name, "");
    if (!path)
        return ENOMEM;
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc = fmt_read_file(path, FMT_MANIFEST_MAX_BYTES, &buf, &len);
    if (rc == 0)
        rc = fmt_manifest_parse((const char *)buf, len, m, msg);
    else
        fmt_fail(msg, rc, "cannot read %s: %s", path, fmt_strerror(rc));
    free(buf);
    free(path);
    return rc;
}

int fmt_manifest_read(const char *dir, fmt_manifest *m, fmt_msg *msg)
{
    return fmt_manifest_read_named(dir, FMT_MANIFEST_NAME, m, msg);
}

void fmt_manifest_free(fmt_manifest *m)
{
    if (!m)
        return;
    for (size_t i = 0; m->classes && i < m->nclasses; i++)
        free(m->classes[i]);
    for (size_t i = 0; m->shards && i < m->nshards; i++)
        free(m->shards[i].file);
    free(m->classes);
    free(m->shards);
    free(m->backend);
    free(m->tool);
    free(m->build_json);
    free(m->aug_spec);
    for (size_t i = 0; m->categories && i < m->ncategories; i++)
        free(m->categories[i].name);
    free(m->categories);
    free(m->target_source);
    for (uint32_t i = 0; m->keypoint_names && i < m->num_keypoints; i++)
        free(m->keypoint_names[i]);
    free(m->keypoint_names);
    free(m->skeleton);
    for (size_t i = 0; m->fields && i < m->nfields; i++)
        free(m->fields[i].name);
    free(m->fields);
    free(m->fields_source);
    memset(m, 0, sizeof *m);
}

long fmt_manifest_find_shard(const fmt_manifest *m, uint64_t idx)
{
    if (idx >= m->samples)
        return -1;
    size_t lo = 0, hi = m->nshards;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->shards[mid].first <= idx)
            lo = mid;
        else
            hi = mid;
    }
    /* skip empty shards sharing the same first index */
    while (lo < m->nshards && idx >= m->shards[lo].first + m->shards[lo].samples)
        lo++;
    return lo < m->nshards ? (long)lo : -1;
}

char *fmt_manifest_shard_dir(const char *dir, const fmt_manifest_shard *s)
{
    const char *slash = strrchr(s->file, '/');
    if (!slash)
        return strdup(dir);
    char *p;
    return asprintf(&p, "%s/%.*s", dir, (int)(slash - s->file), s->file) < 0 ? NULL : p;
}
