/* inputs_wds.c - listing a build's inputs from WebDataset shards (members grouped by key, the
 * label from a .cls, .txt or .json member). */
#include "inputs.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "arcwalk.h"
#include "inputs_int.h"

typedef struct {
    fmt_inputs *in;
    const char *path;
    uint32_t arc;
    const char *label_ext;      /* "cls", "txt" or "json" */
    const char *field;          /* json: the field */
    int32_t maxlabel;
    /* the group being read */
    char *key;
    char *image;                /* its image member */
    uint64_t seq, size;
    int have_label;             /* 1 label read, -1 a label member that does not parse */
    int32_t label;
    char bad[1024];
} wds_state;

/* A group is done: its sample, or a skipped entry saying why not. */
static int wds_flush(wds_state *w)
{
    int rc = 0;
    if (!w->key)
        return 0;
    if (w->image && w->have_label == 1) {
        char *p;
        if (asprintf(&p, "%s!%s", w->path, w->image) < 0)
            rc = ENOMEM;
        else if ((rc = shc_inputs_add_member(w->in, p, w->label, w->arc, w->seq, w->size)))
            free(p);
        if (!rc && w->label > w->maxlabel)
            w->maxlabel = w->label;
    } else if (w->image) {
        char why[1100];
        if (w->have_label < 0)
            snprintf(why, sizeof why, "%s", w->bad);
        else if (w->field)
            snprintf(why, sizeof why, "no .json member with the label field \"%s\"", w->field);
        else
            snprintf(why, sizeof why, "no .%s member (the label)", w->label_ext);
        rc = shc_inputs_skip_member(w->in, w->path, w->image, why);
    } else if (w->have_label) {
        rc = shc_inputs_skip_member(w->in, w->path, w->key, "no image member in the sample");
    }
    free(w->key);
    free(w->image);
    w->key = w->image = NULL;
    w->have_label = 0;
    return rc;
}

/* The label in a .cls/.txt/.json member's bytes, or a reason in w->bad. */
static int wds_parse(wds_state *w, const char *name, const uint8_t *data, size_t len, int32_t *out)
{
    long v = -1;
    if (w->field) {
        json_error_t je;
        json_t *j = json_loadb((const char *)data, len, JSON_DECODE_ANY, &je);
        json_t *f = j && json_is_object(j) ? json_object_get(j, w->field) : NULL;
        if (f && json_is_integer(f) && json_integer_value(f) >= 0 &&
            json_integer_value(f) <= FMT_MAX_LABEL)
            v = (long)json_integer_value(f);
        json_decref(j);
        if (v < 0) {
            snprintf(w->bad, sizeof w->bad, "%.400s: no integer field \"%s\" (0..%d)", name,
                     w->field, FMT_MAX_LABEL);
            return -1;
        }
    } else {
        char text[32];
        size_t a = 0, b = len;
        while (a < b && isspace(data[a]))
            a++;
        while (b > a && isspace(data[b - 1]))
            b--;
        char *end = NULL;
        if (b - a > 0 && b - a < sizeof text && isdigit(data[a])) {
            memcpy(text, data + a, b - a);
            text[b - a] = '\0';
            errno = 0;
            v = strtol(text, &end, 10);
            if (errno || *end || v > FMT_MAX_LABEL)
                v = -1;
        }
        if (v < 0) {
            snprintf(w->bad, sizeof w->bad, "%.400s: bad label (expected an integer 0..%d)", name,
                     FMT_MAX_LABEL);
            return -1;
        }
    }
    *out = (int32_t)v;
    return 0;
}

static int wds_visit(void *ctx, const shc_arc_member *m, shc_arc_reader *r)
{
    wds_state *w = ctx;
    if (m->type == SHC_ARC_DIR || m->type == SHC_ARC_ERROR)
        return 0;
    if (m->type == SHC_ARC_BADNAME)
        return shc_inputs_skip_member(w->in, w->path, m->name, m->error);
    /* webdataset's split: key = path up to the first '.' of the last component */
    const char *base = strrchr(m->name, '/');
    base = base ? base + 1 : m->name;
    const char *dot = strchr(base, '.');
    if (base[0] == '.' || !dot) {
        w->in->ignored++;
        return 0;
    }
    size_t klen = (size_t)(dot - m->name);
    const char *ext = dot + 1;
    int rc = 0;
    if (!w->key || strlen(w->key) != klen || strncmp(w->key, m->name, klen) != 0) {
        if ((rc = wds_flush(w)))
            return rc;
        if (!(w->key = strndup(m->name, klen)))
            return ENOMEM;
    }
    if (!shc_arc_name_safe(m->name)) {
        if (fmt_is_image_name(m->name))
            return shc_inputs_skip_member(w->in, w->path, m->name, "unsafe member name "
                                          "(absolute or with '..'): not an input");
        return 0;
    }
    if (fmt_is_image_name(m->name) && !w->image) {
        if (m->type != SHC_ARC_FILE)
            return shc_inputs_skip_member(w->in, w->path, m->name,
                                          "a link (links in archives are not followed)");
        if (!(w->image = strdup(m->name)))
            return ENOMEM;
        w->seq = m->seq;
        w->size = m->size > 0 ? (uint64_t)m->size : 0;
        return 0;
    }
    if (strcasecmp(ext, w->label_ext) == 0 && m->type == SHC_ARC_FILE && !w->have_label) {
        uint8_t *data;
        size_t len;
        fmt_msg why = {{0}};
        rc = shc_arc_read(r, FMT_LIST_LINE_MAX, &data, &len, &why);
        if (rc == ENOMEM)
            return rc;
        if (rc) {
            snprintf(w->bad, sizeof w->bad, "%.400s: %.500s", m->name, why.text);
            w->have_label = -1;
            return 0;
        }
        w->have_label = wds_parse(w, m->name, data, len, &w->label) == 0 ? 1 : -1;
        free(data);
        return 0;
    }
    w->in->ignored++;
    return 0;
}

int fmt_inputs_from_wds(char *const *srcs, size_t nsrc, const char *label, fmt_inputs *in,
                        fmt_msg *msg)
{
    memset(in, 0, sizeof *in);
    wds_state w = {.in = in, .maxlabel = -1, .label_ext = "cls"};
    if (label && (strcmp(label, "cls") == 0 || strcmp(label, "txt") == 0)) {
        w.label_ext = label;
    } else if (label) {
        w.label_ext = "json";
        w.field = strncmp(label, "json:", 5) == 0 ? label + 5 : label;
        if (!*w.field)
            return fmt_fail(msg, EINVAL, "bad WebDataset label '%s' (cls, txt or json:FIELD)",
                            label);
    }
    int rc = 0;
    for (size_t s = 0; s < nsrc && !rc; s++) {
        if (!shc_inputs_is_archive_src(srcs[s])) {
            rc = fmt_fail(msg, EINVAL, "%s: not a WebDataset shard (a .tar, .tar.gz, ... file)",
                          srcs[s]);
            break;
        }
        w.path = srcs[s];
        if (!(w.arc = shc_inputs_add_archive(in, srcs[s], 0))) {
            rc = ENOMEM;
            break;
        }
        size_t before = in->n + in->nskipped;
        fmt_msg why = {{0}};
        shc_arc_id aid = {0};
        rc = shc_arc_walk_id(srcs[s], 0, NULL, &aid, wds_visit, &w, &why);
        shc_inputs_set_archive_id(in, w.arc, &aid);
        int frc = wds_flush(&w);
        if (rc == ENOMEM || frc) {
            rc = rc ? rc : frc;
            fmt_fail(msg, rc, "cannot list %s: %s", srcs[s], strerror(rc));
        } else if ((rc && in->n + in->nskipped == before) || shc_inputs_arc_condemned(rc)) {
            fmt_fail(msg, rc, "cannot read %s", why.text);
        } else if (rc) {
            rc = shc_inputs_add_skip(in, srcs[s], shc_inputs_reason_of(srcs[s], why.text));
        }
    }
    free(w.key);
    free(w.image);
    if (!rc)
        rc = shc_inputs_number_classes(in, w.maxlabel);
    if (rc)
        fmt_inputs_free(in);
    return rc;
}
