/* inputs.c - listing a build's inputs from class folders, archives or a list file. */
#include "inputs.h"

#include <ctype.h>
#include <jansson.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "arcwalk.h"
#include "util.h"

static int add_member(fmt_inputs *in, char *path, int32_t label, uint32_t archive, uint64_t seq,
                      uint64_t size)
{
    if (in->n == in->cap) {
        size_t cap = in->cap ? in->cap * 2 : 256;
        fmt_input *p = realloc(in->items, cap * sizeof *p);
        if (!p)
            return ENOMEM;
        in->items = p;
        in->cap = cap;
    }
    in->items[in->n] = (fmt_input){.path = path, .label = label, .archive = archive,
                                   .seq = seq, .size = size};
    in->n++;
    return 0;
}

static int add_item(fmt_inputs *in, char *path, int32_t label)
{
    return add_member(in, path, label, 0, 0, 0);
}

int fmt_inputs_add(fmt_inputs *in, char *path, int32_t label)
{
    return add_item(in, path, label);
}

/* The archive's number (1-based) in in->archives, added if new. 0: out of memory. */
static uint32_t add_archive(fmt_inputs *in, const char *path, int nest)
{
    for (size_t i = 0; i < in->narchives; i++)
        if (strcmp(in->archives[i].path, path) == 0 && in->archives[i].nest == nest)
            return (uint32_t)i + 1;
    fmt_archive_src *p = realloc(in->archives, (in->narchives + 1) * sizeof *p);
    if (!p)
        return 0;
    in->archives = p;
    if (!(p[in->narchives].path = strdup(path)))
        return 0;
    p[in->narchives].nest = nest;
    p[in->narchives].have_id = 0;
    return (uint32_t)++in->narchives;
}

/* The file archive a (1-based) was listed from: later walks must find that one. */
static void set_archive_id(fmt_inputs *in, uint32_t a, const shc_arc_id *id)
{
    in->archives[a - 1].id = *id;
    in->archives[a - 1].have_id = 1;
}

/* Does a walk's error condemn the whole archive (its compressed stream fails its check, or the
 * file changed while it was listed), so that none of its members may be listed? */
static int arc_condemned(int rc)
{
    return rc == FMT_EHASH || rc == ESTALE;
}

static int add_skip(fmt_inputs *in, const char *path, const char *reason)
{
    if (in->nskipped == in->skipcap) {
        size_t cap = in->skipcap ? in->skipcap * 2 : 16;
        fmt_skip *p = realloc(in->skipped, cap * sizeof *p);
        if (!p)
            return ENOMEM;
        in->skipped = p;
        in->skipcap = cap;
    }
    char *a = strdup(path), *b = strdup(reason);
    if (!a || !b) {
        free(a);
        free(b);
        return ENOMEM;
    }
    in->skipped[in->nskipped].path = a;
    in->skipped[in->nskipped].reason = b;
    in->nskipped++;
    return 0;
}

int fmt_is_image_name(const char *name)
{
    static const char *const exts[] = {".jpg", ".jpeg", ".jpe", ".png", ".bmp", ".dib"};
    const char *dot = strrchr(name, '.');
    if (!dot)
        return 0;
    for (size_t i = 0; i < sizeof exts / sizeof *exts; i++)
        if (strcasecmp(dot, exts[i]) == 0)
            return 1;
    return 0;
}

static char *join(const char *a, const char *b)
{
    char *p;
    size_t la = strlen(a);
    int slash = la > 0 && a[la - 1] == '/';
    if (asprintf(&p, "%s%s%s", a, slash ? "" : "/", b) < 0)
        return NULL;
    return p;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted names in dir, hidden entries left out. */
static int list_dir(const char *dir, char ***names, size_t *n)
{
    *names = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return errno;
    size_t cap = 0;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 64;
            char **p = realloc(*names, cap * sizeof *p);
            if (!p) {
                rc = ENOMEM;
                break;
            }
            *names = p;
        }
        if (!((*names)[*n] = strdup(e->d_name))) {
            rc = ENOMEM;
            break;
        }
        (*n)++;
    }
    closedir(d);
    if (*n > 1)
        qsort(*names, *n, sizeof **names, cmp_str);
    return rc;
}

static void free_names(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

/* The directories on the path from the class folder down, to catch symlink cycles. */
typedef struct {
    dev_t dev[64];
    ino_t ino[64];
    int depth;
} dir_stack;

static int walk(fmt_inputs *in, const char *dir, int32_t label, dir_stack *st)
{
    char **names;
    size_t n;
    int rc = list_dir(dir, &names, &n);
    if (rc == ENOMEM)
        return rc;
    if (rc)
        return add_skip(in, dir, strerror(rc));
    for (size_t i = 0; i < n && !rc; i++) {
        char *p = join(dir, names[i]);
        if (!p) {
            rc = ENOMEM;
            break;
        }
        struct stat sb;
        if (stat(p, &sb) != 0) {
            int e = errno;
            rc = add_skip(in, p, e == ELOOP ? "symbolic link loop" : strerror(e));
            free(p);
            continue;
        }
        if (S_ISDIR(sb.st_mode)) {
            int cycle = 0;
            for (int k = 0; k < st->depth; k++)
                cycle |= st->dev[k] == sb.st_dev && st->ino[k] == sb.st_ino;
            if (cycle || st->depth >= 64) {
                rc = add_skip(in, p, cycle ? "symbolic link loop (directory cycle)"
                                           : "directory nesting too deep");
            } else {
                st->dev[st->depth] = sb.st_dev;
                st->ino[st->depth] = sb.st_ino;
                st->depth++;
                rc = walk(in, p, label, st);
                st->depth--;
            }
            free(p);
        } else if (fmt_is_image_name(names[i])) {
            rc = add_item(in, p, label); /* takes p */
            if (rc)
                free(p);
        } else {
            in->ignored++;
            free(p);
        }
    }
    free_names(names, n);
    return rc;
}

/* ---- archives as class-folder trees ---- */

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

typedef struct {
    char *cls;          /* class name */
    char *rel;          /* path within the class folder, for the order */
    char *name;         /* the member's name in the archive */
    uint64_t seq, size;
} arc_entry;

typedef struct {
    fmt_inputs *in;
    const char *path;
    arc_entry *v;
    size_t n, cap;
    char **classes;     /* class names met (folders, inner tars), unsorted, with repeats */
    size_t ncls, capcls;
    shc_arc_id id;      /* the file listed */
} arc_tree;

static int cmp_entry(const void *a, const void *b)
{
    const arc_entry *x = a, *y = b;
    int c = strcmp(x->cls, y->cls);
    if (!c)
        c = cmp_path(x->rel, y->rel);
    if (!c)
        c = (x->seq > y->seq) - (x->seq < y->seq);
    return c;
}

static int tree_class(arc_tree *t, const char *name, size_t len)
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

static int skip_member(fmt_inputs *in, const char *arc, const char *name, const char *why)
{
    char *p;
    if (asprintf(&p, "%s!%s", arc, name) < 0)
        return ENOMEM;
    int rc = add_skip(in, p, why);
    free(p);
    return rc;
}

static int tree_visit(void *ctx, const shc_arc_member *m, shc_arc_reader *r)
{
    (void)r;
    arc_tree *t = ctx;
    if (m->type == SHC_ARC_ERROR || m->type == SHC_ARC_BADNAME)
        return skip_member(t->in, t->path, m->name, m->error);
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
        return skip_member(t->in, t->path, m->name, "a link (links in archives are not followed)");
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 256;
        arc_entry *p = realloc(t->v, cap * sizeof *p);
        if (!p)
            return ENOMEM;
        t->v = p;
        t->cap = cap;
    }
    arc_entry *e = &t->v[t->n];
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
        return skip_member(t->in, t->path, m->name,
                           "unsafe member name (absolute or with '..'): not an input");
    return 0;
}

static void tree_free(arc_tree *t)
{
    for (size_t i = 0; i < t->n; i++) {
        free(t->v[i].cls);
        free(t->v[i].name);
    }
    free(t->v);
    free_names(t->classes, t->ncls);
    memset(t, 0, sizeof *t);
}

/* msg's text less its leading "path: " (the skipped entry names the path already) */
static const char *reason_of(const char *path, const char *text)
{
    size_t n = strlen(path);
    return strncmp(text, path, n) == 0 && text[n] == ':' && text[n + 1] == ' ' ? text + n + 2
                                                                              : text;
}

/* Is path an archive file (by name)? */
static int is_archive_src(const char *path)
{
    struct stat sb;
    return shc_arc_is_archive_name(path) && stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* List the archive at path as a class-folder tree into t (entries sorted by class, then the walk
 * order; of two entries with one path only the later one kept). A damaged archive keeps the
 * members before the damage and a skipped entry saying where; one that is no archive at all is
 * an error. */
static int tree_list(fmt_inputs *in, const char *path, arc_tree *t, fmt_msg *msg)
{
    memset(t, 0, sizeof *t);
    t->in = in;
    t->path = path;
    fmt_msg why = {{0}};
    int rc = shc_arc_walk_id(path, 1, NULL, &t->id, tree_visit, t, &why);
    if (rc == ENOMEM)
        return fmt_fail(msg, rc, "cannot list %s: out of memory", path);
    if ((rc && t->n == 0 && t->ncls == 0) || arc_condemned(rc))
        return fmt_fail(msg, rc, "cannot read %s", why.text);
    if (rc && (rc = add_skip(in, path, reason_of(path, why.text))))
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

/* Append name (owned) to the growing array *v of *n (capacity *cap); on ENOMEM name is freed. */
static int push_name(char ***v, size_t *n, size_t *cap, char *name)
{
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 64;
        char **q = realloc(*v, c * sizeof *q);
        if (!q) {
            free(name);
            return ENOMEM;
        }
        *v = q;
        *cap = c;
    }
    (*v)[(*n)++] = name;
    return 0;
}

int fmt_inputs_from_dirs(char *const *srcs, size_t nsrc, fmt_inputs *in, fmt_msg *msg)
{
    memset(in, 0, sizeof *in);
    int rc = 0;
    /* classes: the union of the subfolder names of every SRC, sorted */
    char **all = NULL;
    size_t nall = 0, capall = 0;
    /* archives among the SRCs: listed first, their classes join the others */
    arc_tree *trees = calloc(nsrc ? nsrc : 1, sizeof *trees);
    size_t *cursor = calloc(nsrc ? nsrc : 1, sizeof *cursor);
    if (!trees || !cursor)
        rc = ENOMEM;
    for (size_t s = 0; s < nsrc && !rc; s++) {
        char **names;
        size_t n;
        if (is_archive_src(srcs[s])) {
            if ((rc = tree_list(in, srcs[s], &trees[s], msg)))
                goto leave;
            names = trees[s].classes;
            n = trees[s].ncls;
            trees[s].classes = NULL;
            trees[s].ncls = 0;
            uint32_t a = add_archive(in, srcs[s], 1);
            if (!a)
                rc = ENOMEM;
            else
                set_archive_id(in, a, &trees[s].id);
            for (size_t i = 0; i < n; i++)
                if (push_name(&all, &nall, &capall, names[i]))
                    rc = ENOMEM;
            free(names);
            continue;
        }
        rc = list_dir(srcs[s], &names, &n);
        if (rc) {
            fmt_fail(msg, rc, "cannot read %s: %s", srcs[s], strerror(rc));
            break;
        }
        for (size_t i = 0; i < n; i++) {
            char *p = join(srcs[s], names[i]);
            struct stat sb;
            int isdir = p && stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
            free(p);
            if (!isdir) {
                in->ignored += fmt_is_image_name(names[i]) ? 1 : 0;
                free(names[i]);
                continue;
            }
            if (push_name(&all, &nall, &capall, names[i]))
                rc = ENOMEM;
        }
        free(names);
    }
    if (rc)
        goto leave;
    if (nall > 1)
        qsort(all, nall, sizeof *all, cmp_str);
    /* dedupe */
    size_t k = 0;
    for (size_t i = 0; i < nall; i++) {
        if (k && strcmp(all[k - 1], all[i]) == 0)
            free(all[i]);
        else
            all[k++] = all[i];
    }
    nall = k;
    if (nall > INT32_MAX) {
        rc = EOVERFLOW;
        goto leave;
    }
    in->classes = all;
    in->nclasses = nall;
    all = NULL;
    nall = 0;
    for (size_t c = 0; c < in->nclasses && !rc; c++) {
        for (size_t s = 0; s < nsrc && !rc; s++) {
            if (trees[s].path) {
                arc_tree *t = &trees[s];
                uint32_t a = add_archive(in, srcs[s], 1);
                for (; !rc && cursor[s] < t->n && strcmp(t->v[cursor[s]].cls, in->classes[c]) <= 0;
                     cursor[s]++) {
                    arc_entry *e = &t->v[cursor[s]];
                    char *p;
                    if (!a || asprintf(&p, "%s!%s", srcs[s], e->name) < 0) {
                        rc = ENOMEM;
                        break;
                    }
                    if ((rc = add_member(in, p, (int32_t)c, a, e->seq, e->size)))
                        free(p);
                }
                continue;
            }
            char *p = join(srcs[s], in->classes[c]);
            struct stat sb;
            if (!p) {
                rc = ENOMEM;
                break;
            }
            if (stat(p, &sb) == 0 && S_ISDIR(sb.st_mode)) {
                dir_stack st = {.depth = 1};
                st.dev[0] = sb.st_dev;
                st.ino[0] = sb.st_ino;
                rc = walk(in, p, (int32_t)c, &st);
            }
            free(p);
        }
    }
    if (rc)
        fmt_fail(msg, rc, "cannot list inputs: %s", strerror(rc));
leave:
    for (size_t s = 0; trees && s < nsrc; s++)
        tree_free(&trees[s]);
    free(trees);
    free(cursor);
    free_names(all, nall);
    if (rc)
        fmt_inputs_free(in);
    return rc;
}

/* ---- list files ---- */

/* The members of one archive a list file names, sorted by name (for lookups). */
typedef struct {
    char *name;
    uint64_t seq;
    int64_t size;
    int type;
} mem_ent;

typedef struct {
    char *path;
    mem_ent *v;
    size_t n, cap;
    shc_arc_id id;      /* the file indexed */
} mem_index;

static int index_visit(void *ctx, const shc_arc_member *m, shc_arc_reader *r)
{
    (void)r;
    mem_index *x = ctx;
    if (m->type == SHC_ARC_ERROR || m->type == SHC_ARC_BADNAME)
        return 0;
    if (x->n == x->cap) {
        size_t cap = x->cap ? x->cap * 2 : 256;
        mem_ent *p = realloc(x->v, cap * sizeof *p);
        if (!p)
            return ENOMEM;
        x->v = p;
        x->cap = cap;
    }
    if (!(x->v[x->n].name = strdup(m->name)))
        return ENOMEM;
    x->v[x->n].seq = m->seq;
    x->v[x->n].size = m->size;
    x->v[x->n].type = m->type;
    x->n++;
    return 0;
}

static int cmp_mem(const void *a, const void *b)
{
    const mem_ent *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->seq > y->seq) - (x->seq < y->seq);
}

static void index_free(mem_index *x)
{
    for (size_t i = 0; i < x->n; i++)
        free(x->v[i].name);
    free(x->v);
    free(x->path);
}

/* The member called name of the archive at path (indexes cached in *cache), the last one of
 * that name as extraction keeps it; NULL when there is none. Errors in rc/msg. */
static const mem_ent *find_member(mem_index **cache, size_t *ncache, const char *path,
                                  const char *name, int *rc, fmt_msg *why, shc_arc_id *id)
{
    mem_index *x = NULL;
    for (size_t i = 0; i < *ncache; i++)
        if (strcmp((*cache)[i].path, path) == 0)
            x = &(*cache)[i];
    if (!x) {
        mem_index *p = realloc(*cache, (*ncache + 1) * sizeof *p);
        if (!p) {
            *rc = ENOMEM;
            return NULL;
        }
        *cache = p;
        x = &p[(*ncache)++];
        memset(x, 0, sizeof *x);
        if (!(x->path = strdup(path))) {
            *rc = ENOMEM;
            return NULL;
        }
        int wr = shc_arc_walk_id(path, 1, NULL, &x->id, index_visit, x, why);
        if (wr == ENOMEM || (wr && x->n == 0) || arc_condemned(wr)) {
            *rc = wr;
            return NULL;
        }
        if (x->n > 1)
            qsort(x->v, x->n, sizeof *x->v, cmp_mem);
    }
    *id = x->id;
    char norm[4097];
    if (shc_arc_norm_name(name, norm) <= 0)
        return NULL;
    name = norm;
    size_t lo = 0, hi = x->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(x->v[mid].name, name) <= 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo > 0 && strcmp(x->v[lo - 1].name, name) == 0 ? &x->v[lo - 1] : NULL;
}

int fmt_inputs_from_list(const char *list, char *const *srcs, size_t nsrc, fmt_inputs *in,
                         fmt_msg *msg)
{
    memset(in, 0, sizeof *in);
    fmt_msg fwhy = {""};
    int frc;
    FILE *f = fmt_fopen_file(list, &frc, &fwhy);  /* a FIFO or device: refused, never read */
    if (!f)
        return fmt_fail(msg, frc, "cannot open list file %s: %s", list, fwhy.text);
    char *line = malloc(FMT_LIST_LINE_MAX + 1);
    long len;
    unsigned long lineno = 0;
    int32_t maxlabel = -1;
    int rc = line ? 0 : ENOMEM;
    mem_index *cache = NULL;
    size_t ncache = 0;
    int nul;
    while (!rc && (len = shc_read_line(f, line, FMT_LIST_LINE_MAX + 1, &nul)) != -1) {
        lineno++;
        if (len == -2) {
            rc = fmt_fail(msg, EINVAL, "%s:%lu: line longer than %d bytes", list, lineno,
                          FMT_LIST_LINE_MAX);
            break;
        }
        if (nul) {
            rc = fmt_fail(msg, EINVAL, "%s:%lu: line contains a NUL byte", list, lineno);
            break;
        }
        while (len > 0 && isspace((unsigned char)line[len - 1]))
            line[--len] = '\0';
        char *s = line;
        /* a UTF-8 byte order mark (editors on Windows write one) is not part of the first path */
        if (lineno == 1 && (unsigned char)s[0] == 0xEF && (unsigned char)s[1] == 0xBB &&
            (unsigned char)s[2] == 0xBF)
            s += 3;
        while (isspace((unsigned char)*s))
            s++;
        if (!*s || *s == '#')
            continue;
        char *sp = s + strlen(s);
        while (sp > s && !isspace((unsigned char)sp[-1]))
            sp--;
        if (sp == s) {
            rc = fmt_fail(msg, EINVAL, "%s:%lu: expected \"path label\"", list, lineno);
            break;
        }
        char *lab = sp, *end;
        char *pe = sp;
        while (pe > s && isspace((unsigned char)pe[-1]))
            pe--;
        *pe = '\0';
        errno = 0;
        long v = strtol(lab, &end, 10);
        if (errno || *end || end == lab || v < 0 || v > FMT_MAX_LABEL || !isdigit((unsigned char)*lab)) {
            rc = fmt_fail(msg, EINVAL, "%s:%lu: bad label '%s' (expected an integer 0..%d)", list,
                          lineno, lab, FMT_MAX_LABEL);
            break;
        }
        char *found = NULL;
        int why = ENOENT;   /* the most telling reason met: a loop or a permission beats ENOENT */
        for (size_t k = 0; k < nsrc && !found; k++) {
            char *p = s[0] == '/' ? strdup(s) : join(srcs[k], s);
            struct stat sb;
            if (p && stat(p, &sb) == 0)
                found = p;
            else {
                if (p && errno != ENOENT && errno != ENOTDIR)
                    why = errno;
                free(p);
            }
        }
        if (!found && strchr(s, '!')) {
            /* ARCHIVE!MEMBER: the archive in one of the SRCs, the member in its listing */
            for (char *bang = strchr(s, '!'); bang && !found && !rc; bang = strchr(bang + 1, '!')) {
                *bang = '\0';
                for (size_t k = 0; k < nsrc && !found && !rc; k++) {
                    char *p = s[0] == '/' ? strdup(s) : join(srcs[k], s);
                    if (!p) {
                        rc = ENOMEM;
                        break;
                    }
                    if (!is_archive_src(p)) {
                        free(p);
                        continue;
                    }
                    fmt_msg awhy = {{0}};
                    int arc_rc = 0;
                    shc_arc_id aid;
                    const mem_ent *e = find_member(&cache, &ncache, p, bang + 1, &arc_rc, &awhy,
                                                   &aid);
                    uint32_t a = e ? add_archive(in, p, 1) : 1;
                    if (e && a)
                        set_archive_id(in, a, &aid);
                    if (arc_rc || !a) {
                        rc = fmt_fail(msg, arc_rc ? arc_rc : ENOMEM, "%s:%lu: cannot read %s",
                                      list, lineno, arc_rc ? awhy.text : "out of memory");
                    } else if (!e) {
                        rc = fmt_fail(msg, ENOENT, "%s:%lu: no member %s in %s", list, lineno,
                                      bang + 1, p);
                    } else if (e->type != SHC_ARC_FILE) {
                        rc = fmt_fail(msg, EINVAL, "%s:%lu: member %s of %s is not a file", list,
                                      lineno, e->name, p);
                    } else if (!shc_arc_name_safe(e->name)) {
                        rc = fmt_fail(msg, EINVAL, "%s:%lu: unsafe member name %s in %s", list,
                                      lineno, e->name, p);
                    } else if (asprintf(&found, "%s!%s", p, e->name) < 0) {
                        found = NULL;
                        rc = ENOMEM;
                    } else if ((rc = add_member(in, found, (int32_t)v, a, e->seq,
                                                e->size > 0 ? (uint64_t)e->size : 0))) {
                        free(found);
                    }
                    free(p);
                }
                *bang = '!';
            }
            if (rc)
                break;
            if (found) {
                if (v > maxlabel)
                    maxlabel = (int32_t)v;
                continue;
            }
        }
        if (!found) {
            rc = fmt_fail(msg, why, "%s:%lu: %s: %s", list, lineno,
                          why == ELOOP ? "symbolic link loop" : why == ENOENT ? "no such file" :
                          strerror(why), s);
            break;
        }
        if ((rc = add_item(in, found, (int32_t)v))) {
            free(found);
            break;
        }
        if (v > maxlabel)
            maxlabel = (int32_t)v;
    }
    if (!rc && ferror(f)) {
        rc = fmt_fail(msg, EIO, "cannot read list file %s", list);
    }
    for (size_t i = 0; i < ncache; i++)
        index_free(&cache[i]);
    free(cache);
    free(line);
    fclose(f);
    if (!rc && maxlabel >= 0) {
        /* classes of a list file are the labels themselves */
        in->nclasses = (size_t)maxlabel + 1;
        in->classes = calloc(in->nclasses, sizeof *in->classes);
        if (!in->classes)
            rc = ENOMEM;
        for (size_t i = 0; !rc && i < in->nclasses; i++)
            if (asprintf(&in->classes[i], "%zu", i) < 0) {
                in->classes[i] = NULL;
                rc = ENOMEM;
            }
    }
    if (rc)
        fmt_inputs_free(in);
    return rc;
}

/* ---- WebDataset shards ---- */

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
        else if ((rc = add_member(w->in, p, w->label, w->arc, w->seq, w->size)))
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
        rc = skip_member(w->in, w->path, w->image, why);
    } else if (w->have_label) {
        rc = skip_member(w->in, w->path, w->key, "no image member in the sample");
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
        return skip_member(w->in, w->path, m->name, m->error);
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
            return skip_member(w->in, w->path, m->name,
                               "unsafe member name (absolute or with '..'): not an input");
        return 0;
    }
    if (fmt_is_image_name(m->name) && !w->image) {
        if (m->type != SHC_ARC_FILE)
            return skip_member(w->in, w->path, m->name,
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
        if (!is_archive_src(srcs[s])) {
            rc = fmt_fail(msg, EINVAL, "%s: not a WebDataset shard (a .tar, .tar.gz, ... file)",
                          srcs[s]);
            break;
        }
        w.path = srcs[s];
        if (!(w.arc = add_archive(in, srcs[s], 0))) {
            rc = ENOMEM;
            break;
        }
        size_t before = in->n + in->nskipped;
        fmt_msg why = {{0}};
        shc_arc_id aid = {0};
        rc = shc_arc_walk_id(srcs[s], 0, NULL, &aid, wds_visit, &w, &why);
        set_archive_id(in, w.arc, &aid);
        int frc = wds_flush(&w);
        if (rc == ENOMEM || frc) {
            rc = rc ? rc : frc;
            fmt_fail(msg, rc, "cannot list %s: %s", srcs[s], strerror(rc));
        } else if ((rc && in->n + in->nskipped == before) || arc_condemned(rc)) {
            fmt_fail(msg, rc, "cannot read %s", why.text);
        } else if (rc) {
            rc = add_skip(in, srcs[s], reason_of(srcs[s], why.text));
        }
    }
    free(w.key);
    free(w.image);
    if (!rc && w.maxlabel >= 0) {
        in->nclasses = (size_t)w.maxlabel + 1;
        in->classes = calloc(in->nclasses, sizeof *in->classes);
        if (!in->classes)
            rc = ENOMEM;
        for (size_t i = 0; !rc && i < in->nclasses; i++)
            if (asprintf(&in->classes[i], "%zu", i) < 0) {
                in->classes[i] = NULL;
                rc = ENOMEM;
            }
    }
    if (rc)
        fmt_inputs_free(in);
    return rc;
}

void fmt_inputs_free(fmt_inputs *in)
{
    for (size_t i = 0; i < in->n; i++)
        free(in->items[i].path);
    for (size_t i = 0; i < in->nskipped; i++) {
        free(in->skipped[i].path);
        free(in->skipped[i].reason);
    }
    for (size_t i = 0; in->classes && i < in->nclasses; i++)
        free(in->classes[i]);
    for (size_t i = 0; i < in->narchives; i++)
        free(in->archives[i].path);
    free(in->archives);
    free(in->items);
    free(in->skipped);
    free(in->classes);
    memset(in, 0, sizeof *in);
}
