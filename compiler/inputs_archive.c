/* inputs_archive.c - an archive listed as the class-folder tree it extracts into (inputs.h
 * says the order rule). */
#include "inputs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "arcwalk.h"
#include "inputs_int.h"
#include "util.h"

/* strcmp with '/' below every other byte: the order of a depth-first walk of sorted folders
 * ("a/x" before "a.jpg", as the folder "a" sorts before the file "a.jpg") */
static int cmp_path(const char *a, const char *b)
{
    for (;; a++, b++) {
        unsigned char x = *a == '/' ? 1 : (unsigned char)*a, y = *b == '/' ? 1 : (unsigned char)*b;
        if (x != y || !x)
            return (x > y) - (x < y);
    }
}

static int cmp_entry(const void *a, const void *b)
{
    const shc_inputs_tree_entry *x = a, *y = b;
    int c = strcmp(x->cls, y->cls);
    if (!c)
        c = cmp_path(x->rel, y->rel);
    if (!c)
        c = (x->seq > y->seq) - (x->seq < y->seq);
    return c;
}

static int tree_class(shc_inputs_tree *t, const char *name, size_t len)
{
    if (t->ncls == t->capcls) {
        size_t cap = t->capcls ? t->capcls * 2 : 64;
        char **p = realloc(t->classes, cap * sizeof *p);
        if (!p)
            return ENOMEM;
        t->classes = p;
        t->capcls = cap;
    }
    if (!(t->classes[t->ncls] = strndup(name, len)))
        return ENOMEM;
    t->ncls++;
    return 0;
}

/* A hidden component (the folder walk leaves those out)? */
static int has_hidden(const char *p)
{
    for (;;) {
        if (*p == '.')
            return 1;
        const char *s = strchr(p, '/');
        if (!s)
            return 0;
        p = s + 1;
    }
}

static int tree_visit(void *ctx, const shc_arc_member *m, shc_arc_reader *r)
{
    (void)r;
    shc_inputs_tree *t = ctx;
    if (m->type == SHC_ARC_ERROR || m->type == SHC_ARC_BADNAME)
        return shc_inputs_skip_member(t->in, t->path, m->name, m->error);
    const char *cls, *rel;
    size_t clen;
    if (m->inner) {
        /* a member of an inner tar: the class is the tar's name less ".tar" */
        if (!shc_arc_name_safe(m->inner))
            goto unsafe;
        cls = m->outer;
        clen = strlen(cls) - 4;
        rel = m->inner;
    } else {
        if (!shc_arc_name_safe(m->name))
            goto unsafe;
        cls = m->name;
        const char *slash = strchr(cls, '/');
        if (!slash) {
            size_t n = strlen(cls);
            int tar = m->type == SHC_ARC_FILE && n > 4 && strcasecmp(cls + n - 4, ".tar") == 0;
            if (cls[0] == '.')
                return 0;
            if (m->type == SHC_ARC_DIR || tar)
                return tree_class(t, cls, tar ? n - 4 : n);
            t->in->ignored += fmt_is_image_name(cls) ? 1 : 0;
            return 0;
        }
        clen = (size_t)(slash - cls);
        rel = slash + 1;
    }
    if (cls[0] == '.')
        return 0;
    /* any member under cls/, a hidden one too, makes cls a folder and so a class (a folder holding
     * only .DS_Store, with no entry of its own, is a class of the extracted tree) */
    int rc = tree_class(t, cls, clen);
    if (rc || has_hidden(rel) || m->type == SHC_ARC_DIR || m->type == SHC_ARC_OTHER)
        return rc;
    if (!fmt_is_image_name(rel)) {
        t->in->ignored += m->type == SHC_ARC_FILE;
        return 0;
    }
    if (m->type == SHC_ARC_LINK)
        return shc_inputs_skip_member(t->in, t->path, m->name,
                                      "a link (links in archives are not followed)");
    if (shc_grow_array(&t->v, &t->cap, t->n, sizeof *t->v, 256))
        return ENOMEM;
    shc_inputs_tree_entry *e = &t->v[t->n];
    e->cls = strndup(cls, clen);
    e->name = strdup(m->name);
    /* rel is the tail of the member's name (m->inner is a copy of that tail) */
    e->rel = e->name ? e->name + strlen(m->name) - strlen(rel) : NULL;
    e->seq = m->seq;
    e->size = m->size > 0 ? (uint64_t)m->size : 0;
    if (!e->cls || !e->name) {
        free(e->cls);
        free(e->name);
        return ENOMEM;
    }
    t->n++;
    return 0;
unsafe:
    if (m->type == SHC_ARC_FILE || m->type == SHC_ARC_LINK)
        return shc_inputs_skip_member(t->in, t->path, m->name,
                                      "unsafe member name (absolute or with '..'): not an input");
    return 0;
}

void shc_inputs_tree_free(shc_inputs_tree *t)
{
    for (size_t i = 0; i < t->n; i++) {
        free(t->v[i].cls);
        free(t->v[i].name);
    }
    free(t->v);
    shc_inputs_free_names(t->classes, t->ncls);
    memset(t, 0, sizeof *t);
}

/* List the archive at path as a class-folder tree into t (entries sorted by class, then the walk
 * order; of two entries with one path only the later one kept). A damaged archive keeps the
 * members before the damage and a skipped entry saying where; one that is no archive at all is
 * an error. */
int shc_inputs_tree_list(fmt_inputs *in, const char *path, shc_inputs_tree *t,
                         fmt_msg *msg)
{
    memset(t, 0, sizeof *t);
    t->in = in;
    t->path = path;
    fmt_msg why = {{0}};
    int rc = shc_arc_walk_id(path, 1, NULL, &t->id, tree_visit, t, &why);
    if (rc == ENOMEM)
        return fmt_fail(msg, rc, "cannot list %s: out of memory", path);
    if ((rc && t->n == 0 && t->ncls == 0) || shc_inputs_arc_condemned(rc))
        return fmt_fail(msg, rc, "cannot read %s", why.text);
    if (rc && (rc = shc_inputs_add_skip(in, path, shc_inputs_reason_of(path, why.text))))
        return rc;
    if (t->n > 1)
        qsort(t->v, t->n, sizeof *t->v, cmp_entry);
    size_t k = 0;
    for (size_t i = 0; i < t->n; i++) {
        if (i + 1 < t->n && strcmp(t->v[i].cls, t->v[i + 1].cls) == 0 &&
            cmp_path(t->v[i].rel, t->v[i + 1].rel) == 0) {
            free(t->v[i].cls);
            free(t->v[i].name);
        } else {
            t->v[k++] = t->v[i];
        }
    }
    t->n = k;
    return 0;
}
