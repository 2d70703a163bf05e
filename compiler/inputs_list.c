/* inputs_list.c - listing a build's inputs from a list file ("path label" per line; archive
 * members as "ARCHIVE!MEMBER"). */
#include "inputs.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "arcwalk.h"
#include "inputs_int.h"
#include "util.h"

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
    if (shc_grow_array(&x->v, &x->cap, x->n, sizeof *x->v, 256))
        return ENOMEM;
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
        if (wr == ENOMEM || (wr && x->n == 0) || shc_inputs_arc_condemned(wr)) {
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
            char *p = s[0] == '/' ? strdup(s) : shc_inputs_join(srcs[k], s);
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
                    char *p = s[0] == '/' ? strdup(s) : shc_inputs_join(srcs[k], s);
                    if (!p) {
                        rc = ENOMEM;
                        break;
                    }
                    if (!shc_inputs_is_archive_src(p)) {
                        free(p);
                        continue;
                    }
                    fmt_msg awhy = {{0}};
                    int arc_rc = 0;
                    shc_arc_id aid;
                    const mem_ent *e = find_member(&cache, &ncache, p, bang + 1, &arc_rc, &awhy,
                                                   &aid);
                    uint32_t a = e ? shc_inputs_add_archive(in, p, 1) : 1;
                    if (e && a)
                        shc_inputs_set_archive_id(in, a, &aid);
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
                    } else if ((rc = shc_inputs_add_member(in, found, (int32_t)v, a, e->seq,
                                                           e->size > 0 ? (uint64_t)e->size
                                                                       : 0))) {
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
        if ((rc = fmt_inputs_add(in, found, (int32_t)v))) {
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
    if (!rc)
        rc = shc_inputs_number_classes(in, maxlabel);
    if (rc)
        fmt_inputs_free(in);
    return rc;
}
