/* inputs_folder.c - listing a build's inputs from class folders (an archive among the SRCs
 * listed as its tree: inputs_archive.c). */
#include "inputs.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "inputs_int.h"
#include "util.h"

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
        return shc_inputs_add_skip(in, dir, strerror(rc));
    for (size_t i = 0; i < n && !rc; i++) {
        char *p = shc_inputs_join(dir, names[i]);
        if (!p) {
            rc = ENOMEM;
            break;
        }
        struct stat sb;
        if (stat(p, &sb) != 0) {
            int e = errno;
            rc = shc_inputs_add_skip(in, p, e == ELOOP ? "symbolic link loop" : strerror(e));
            free(p);
            continue;
        }
        if (S_ISDIR(sb.st_mode)) {
            int cycle = 0;
            for (int k = 0; k < st->depth; k++)
                cycle |= st->dev[k] == sb.st_dev && st->ino[k] == sb.st_ino;
            if (cycle || st->depth >= 64) {
                rc = shc_inputs_add_skip(in, p, cycle ? "symbolic link loop (directory cycle)"
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
            rc = fmt_inputs_add(in, p, label); /* takes p */
            if (rc)
                free(p);
        } else {
            in->ignored++;
            free(p);
        }
    }
    shc_inputs_free_names(names, n);
    return rc;
}

/* Append name (owned) to the growing array *v of *n (capacity *cap); on ENOMEM name is freed. */
static int push_name(char ***v, size_t *n, size_t *cap, char *name)
{
    if (shc_grow_array(v, cap, *n, sizeof **v, 64)) {
        free(name);
        return ENOMEM;
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
    shc_inputs_tree *trees = calloc(nsrc ? nsrc : 1, sizeof *trees);
    size_t *cursor = calloc(nsrc ? nsrc : 1, sizeof *cursor);
    if (!trees || !cursor)
        rc = ENOMEM;
    for (size_t s = 0; s < nsrc && !rc; s++) {
        char **names;
        size_t n;
        if (shc_inputs_is_archive_src(srcs[s])) {
            if ((rc = shc_inputs_tree_list(in, srcs[s], &trees[s], msg)))
                goto leave;
            names = trees[s].classes;
            n = trees[s].ncls;
            trees[s].classes = NULL;
            trees[s].ncls = 0;
            uint32_t a = shc_inputs_add_archive(in, srcs[s], 1);
            if (!a)
                rc = ENOMEM;
            else
                shc_inputs_set_archive_id(in, a, &trees[s].id);
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
            char *p = shc_inputs_join(srcs[s], names[i]);
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
                shc_inputs_tree *t = &trees[s];
                uint32_t a = shc_inputs_add_archive(in, srcs[s], 1);
                for (; !rc && cursor[s] < t->n && strcmp(t->v[cursor[s]].cls, in->classes[c]) <= 0;
                     cursor[s]++) {
                    shc_inputs_tree_entry *e = &t->v[cursor[s]];
                    char *p;
                    if (!a || asprintf(&p, "%s!%s", srcs[s], e->name) < 0) {
                        rc = ENOMEM;
                        break;
                    }
                    if ((rc = shc_inputs_add_member(in, p, (int32_t)c, a, e->seq, e->size)))
                        free(p);
                }
                continue;
            }
            char *p = shc_inputs_join(srcs[s], in->classes[c]);
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
        shc_inputs_tree_free(&trees[s]);
    free(trees);
    free(cursor);
    shc_inputs_free_names(all, nall);
    if (rc)
        fmt_inputs_free(in);
    return rc;
}
