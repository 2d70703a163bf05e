/* inspect.c - sample provenance and replay. */
#include "inspect.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* Undo the TSV escaping of build.c (\t \n \r \\). */
static void unescape(char *s)
{
    char *w = s;
    for (; *s; s++) {
        if (*s == '\\' && s[1]) {
            s++;
            *w++ = *s == 't' ? '\t' : *s == 'n' ? '\n' : *s == 'r' ? '\r' : *s;
        } else {
            *w++ = *s;
        }
    }
    *w = '\0';
}

int shc_input_path(const char *dir, uint64_t source, char **path)
{
    *path = NULL;
    char *p;
    if (asprintf(&p, "%s/inputs.tsv", dir) < 0)
        return ENOMEM;
    FILE *f = fopen(p, "r");
    free(p);
    if (!f)
        return errno;
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int rc = ENOENT;
    while ((n = getline(&line, &cap, f)) > 0) {
        if (line[n - 1] == '\n')
            line[--n] = '\0';
        char *t1 = strchr(line, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
        if (!t2)
            continue;
        *t1 = '\0';
        uint64_t pos;
        if (shc_parse_uint(line, 0, UINT64_MAX, &pos) == 0 && pos == source) {
            unescape(t2 + 1);
            *path = strdup(t2 + 1);
            rc = *path ? 0 : ENOMEM;
            break;
        }
    }
    free(line);
    fclose(f);
    return rc;
}

int shc_render_opts_from_manifest(const fmt_manifest *m, shc_render_opts *o, fmt_msg *msg)
{
    memset(o, 0, sizeof *o);
    o->geom = m->geom;
    o->channels = m->channels;
    o->limits.max_side = FMT_DEFAULT_MAX_SIDE;
    o->limits.max_pixels = FMT_DEFAULT_MAX_PIXELS;
    o->max_file_bytes = 1ull << 30;
    o->augment = m->augment;
    o->seed = m->seed;
    json_t *b = m->build_json ? json_loads(m->build_json, 0, NULL) : NULL;
    if (b) {
        json_t *v;
        if (json_is_integer(v = json_object_get(b, "max_side_limit")) && json_integer_value(v) > 0)
            o->limits.max_side = (uint32_t)json_integer_value(v);
        if (json_is_integer(v = json_object_get(b, "max_pixels")) && json_integer_value(v) > 0)
            o->limits.max_pixels = (uint64_t)json_integer_value(v);
        if (json_is_integer(v = json_object_get(b, "max_file_bytes")) && json_integer_value(v) > 0)
            o->max_file_bytes = (uint64_t)json_integer_value(v);
        json_decref(b);
    }
    if (m->augment)
        return fmt_aug_parse(m->aug_spec, &o->aug, msg);
    return 0;
}

int shc_replay(const fmt_dataset *d, const fmt_sample *s, const char *path, fmt_image *out,
               char *reason, size_t rlen)
{
    shc_render_opts o;
    fmt_msg msg = {{0}};
    fmt_resizer *rz = NULL;
    fmt_image dec = {0};
    memset(out, 0, sizeof *out);
    int rc = shc_render_opts_from_manifest(fmt_dataset_manifest(d), &o, &msg);
    if (rc == 0)
        rc = fmt_resizer_create(&rz);
    if (rc) {
        snprintf(reason, rlen, "%s", fmt_reason(&msg, rc));
        return rc;
    }
    if (s->aux) {
        fmt_aug_params p;
        if ((rc = fmt_aug_decode(s->aux, s->aux_len, &p)) != 0) {
            snprintf(reason, rlen, "the sample's augmentation record is damaged");
            goto leave;
        }
        /* the source at full size, as the build decoded it for augmentation */
        shc_render_opts full = o;
        full.augment = 0;
        full.geom = (fmt_geom){.mode = FMT_GEOM_KEEP};
        rc = shc_render(&full, path, s->source, rz, &dec, NULL, reason, rlen);
        if (rc == 0 && (rc = fmt_aug_apply(rz, &dec, &p, s->width, s->height, out, &msg)) != 0)
            snprintf(reason, rlen, "%s", fmt_reason(&msg, rc));
    } else {
        o.augment = 0;
        rc = shc_render(&o, path, s->source, rz, out, NULL, reason, rlen);
    }
leave:
    fmt_image_free(&dec);
    fmt_resizer_free(rz);
    if (rc)
        fmt_image_free(out);
    return rc;
}
