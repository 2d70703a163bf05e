/* inputs.c - listing a build's inputs from class folders or a list file. */
#include "inputs.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

static int add_item(fmt_inputs *in, char *path, int32_t label)
{
    if (in->n == in->cap) {
        size_t cap = in->cap ? in->cap * 2 : 256;
        fmt_input *p = realloc(in->items, cap * sizeof *p);
        if (!p)
            return ENOMEM;
        in->items = p;
        in->cap = cap;
    }
    in->items[in->n].path = path;
    in->items[in->n].label = label;
    in->n++;
    return 0;
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

int fmt_inputs_from_dirs(char *const *srcs, size_t nsrc, fmt_inputs *in, fmt_msg *msg)
{
    memset(in, 0, sizeof *in);
    int rc = 0;
    /* classes: the union of the subfolder names of every SRC, sorted */
    char **all = NULL;
    size_t nall = 0, capall = 0;
    for (size_t s = 0; s < nsrc && !rc; s++) {
        char **names;
        size_t n;
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
            if (nall == capall) {
                capall = capall ? capall * 2 : 64;
                char **q = realloc(all, capall * sizeof *q);
                if (!q) {
                    rc = ENOMEM;
                    free(names[i]);
                    continue;
                }
                all = q;
            }
            all[nall++] = names[i];
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
    free_names(all, nall);
    if (rc)
        fmt_inputs_free(in);
    return rc;
}

int fmt_inputs_from_list(const char *list, char *const *srcs, size_t nsrc, fmt_inputs *in,
                         fmt_msg *msg)
{
    memset(in, 0, sizeof *in);
    FILE *f = fopen(list, "r");
    if (!f) {
        int e = errno;
        return fmt_fail(msg, e, "cannot open list file %s: %s", list, strerror(e));
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    unsigned long lineno = 0;
    int32_t maxlabel = -1;
    int rc = 0;
    while ((len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        if ((size_t)len != strlen(line)) {
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
    free(in->items);
    free(in->skipped);
    free(in->classes);
    memset(in, 0, sizeof *in);
}
