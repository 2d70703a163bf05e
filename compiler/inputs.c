/* inputs.c - a build's input list: what the listers share (entries added, archives noted,
 * skipped entries, paths joined) and the public helpers of inputs.h. The listers are files of
 * their own, one per input kind: inputs_folder.c (class folders), inputs_archive.c (an archive as
 * a class-folder tree), inputs_list.c (list files), inputs_wds.c (WebDataset shards); what they
 * share is declared in inputs_int.h. */
#include "inputs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "arcwalk.h"
#include "inputs_int.h"
#include "util.h"

int shc_inputs_add_member(fmt_inputs *in, char *path, int32_t label, uint32_t archive,
                          uint64_t seq, uint64_t size)
{
    if (shc_grow_array(&in->items, &in->cap, in->n, sizeof *in->items, 256))
        return ENOMEM;
    in->items[in->n] = (fmt_input){.path = path, .label = label, .archive = archive,
                                   .seq = seq, .size = size};
    in->n++;
    return 0;
}

int fmt_inputs_add(fmt_inputs *in, char *path, int32_t label)
{
    return shc_inputs_add_member(in, path, label, 0, 0, 0);
}

/* The archive's number (1-based) in in->archives, added if new. 0: out of memory. */
uint32_t shc_inputs_add_archive(fmt_inputs *in, const char *path, int nest)
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
void shc_inputs_set_archive_id(fmt_inputs *in, uint32_t a, const shc_arc_id *id)
{
    in->archives[a - 1].id = *id;
    in->archives[a - 1].have_id = 1;
}

/* Does a walk's error condemn the whole archive (its compressed stream fails its check, or the
 * file changed while it was listed), so that none of its members may be listed? */
int shc_inputs_arc_condemned(int rc)
{
    return rc == FMT_EHASH || rc == ESTALE;
}

int shc_inputs_number_classes(fmt_inputs *in, int32_t maxlabel)
{
    if (maxlabel < 0)
        return 0;
    in->nclasses = (size_t)maxlabel + 1;
    in->classes = calloc(in->nclasses, sizeof *in->classes);
    if (!in->classes)
        return ENOMEM;
    for (size_t i = 0; i < in->nclasses; i++)
        if (asprintf(&in->classes[i], "%zu", i) < 0) {
            in->classes[i] = NULL;
            return ENOMEM;
        }
    return 0;
}

int shc_inputs_add_skip(fmt_inputs *in, const char *path, const char *reason)
{
    if (shc_grow_array(&in->skipped, &in->skipcap, in->nskipped, sizeof *in->skipped, 16))
        return ENOMEM;
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

int shc_inputs_skip_member(fmt_inputs *in, const char *arc, const char *name,
                           const char *why)
{
    char *p;
    if (asprintf(&p, "%s!%s", arc, name) < 0)
        return ENOMEM;
    int rc = shc_inputs_add_skip(in, p, why);
    free(p);
    return rc;
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

char *shc_inputs_join(const char *a, const char *b)
{
    char *p;
    size_t la = strlen(a);
    int slash = la > 0 && a[la - 1] == '/';
    if (asprintf(&p, "%s%s%s", a, slash ? "" : "/", b) < 0)
        return NULL;
    return p;
}

void shc_inputs_free_names(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

/* msg's text less its leading "path: " (the skipped entry names the path already) */
const char *shc_inputs_reason_of(const char *path, const char *text)
{
    size_t n = strlen(path);
    return strncmp(text, path, n) == 0 && text[n] == ':' && text[n + 1] == ' ' ? text + n + 2
                                                                              : text;
}

/* Is path an archive file (by name)? */
int shc_inputs_is_archive_src(const char *path)
{
    struct stat sb;
    return shc_arc_is_archive_name(path) && stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
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
