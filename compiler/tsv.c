/* tsv.c - rejects.tsv, warnings.tsv and inputs.tsv: their writers, and the one reader of
 * inputs.tsv (tsv.h).
 */
#include "tsv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "fmt.h"
#include "util.h"

/* ---- fields ---- */

/* TSV field: tabs, newlines and backslashes escaped so every line is one record. */
static void put_tsv(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '\t': fputs("\\t", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\\': fputs("\\\\", f); break;
        default: fputc(*s, f);
        }
    }
}

/* Undo put_tsv's escaping (\t \n \r \\). */
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

/* ---- writing a table: built in memory, then written atomically ---- */

/* The table so far in f (open_memstream of *buf, *len) closed and written as out/name. */
static int table_commit(FILE *f, char **buf, size_t *len, const char *out, const char *name)
{
    if (fclose(f) != 0) {
        free(*buf);
        return ENOMEM;
    }
    char *path = fmt_path_join(out, name, "");
    int rc = path ? fmt_write_file_atomic(path, *buf, *len) : ENOMEM;
    free(path);
    free(*buf);
    return rc;
}

/* A row "a<TAB>b" of escaped fields. */
static void put_pair(FILE *f, const char *a, const char *b)
{
    put_tsv(f, a);
    fputc('\t', f);
    put_tsv(f, b);
    fputc('\n', f);
}

/* ---- rejects.tsv, warnings.tsv ---- */

/* out/name: the header line, then a row "path<TAB>reason" for each input in skipped (when not
 * NULL: the inputs dropped while listing) and each of list. */
static int write_path_table(const char *out, const char *name, const char *header,
                            const fmt_inputs *skipped, const shc_reject_list *list)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return ENOMEM;
    fputs(header, f);
    for (size_t i = 0; skipped && i < skipped->nskipped; i++)
        put_pair(f, skipped->skipped[i].path, skipped->skipped[i].reason);
    for (size_t i = 0; i < list->n; i++)
        put_pair(f, list->v[i].path, list->v[i].reason);
    return table_commit(f, &buf, &len, out, name);
}

int shc_write_rejects(const char *out, const fmt_inputs *in, const shc_reject_list *rej)
{
    return write_path_table(out, SHC_REJECTS_NAME, "path\treason\n", in, rej);
}

/* warnings.tsv: the inputs stored although their decoder warned, with the warning. */
int shc_write_warnings(const char *out, const shc_reject_list *warn)
{
    return write_path_table(out, SHC_WARNINGS_NAME, "path\twarning\n", NULL, warn);
}

/* ---- inputs.tsv ---- */

/* inputs.tsv: every input position in [lo, hi) with its label and path, so each sample's
 * `source` can be traced back to its file (and replayed: shardc cat --replay). */
int shc_write_inputs(const char *out, const fmt_inputs *in, uint64_t lo, uint64_t hi)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return ENOMEM;
    fputs("source\tlabel\tpath\n", f);
    for (size_t i = (size_t)lo; i < hi; i++) {
        fprintf(f, "%zu\t%d\t", i, (int)in->items[i].label);
        put_tsv(f, in->items[i].path);
        fputc('\n', f);
    }
    return table_commit(f, &buf, &len, out, SHC_INPUTS_NAME);
}

/* Bytes of inputs.tsv, as shc_write_inputs writes it (paths are short enough never to be
 * escaped in a way that matters for a projection). */
uint64_t shc_inputs_tsv_bytes(const fmt_inputs *in, uint64_t lo, uint64_t hi)
{
    uint64_t b = strlen("source\tlabel\tpath\n");
    char num[64];
    for (size_t i = (size_t)lo; i < hi; i++)
        b += (uint64_t)snprintf(num, sizeof num, "%zu\t%d\t\n", i, (int)in->items[i].label) +
             strlen(in->items[i].path);
    return b;
}

int shc_inputs_tsv_read(const char *dir, int (*each)(void *ctx, const shc_inputs_row *row),
                        void *ctx)
{
    char *p;
    if (asprintf(&p, "%s/" SHC_INPUTS_NAME, dir) < 0)
        return ENOMEM;
    int rc;
    FILE *f = fmt_fopen_file(p, &rc, NULL);
    free(p);
    if (!f)
        return rc;
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int first = 1;
    while (!rc && (n = getline(&line, &cap, f)) > 0) {
        if (line[n - 1] == '\n')
            line[--n] = '\0';
        if (first) {
            first = 0;
            continue;
        }
        char *t1 = strchr(line, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
        if (!t2) {
            rc = FMT_ECORRUPT;
            break;
        }
        *t1 = *t2 = '\0';
        shc_inputs_row row;
        if (shc_parse_uint(line, 0, UINT64_MAX, &row.source) != 0) {
            rc = FMT_ECORRUPT;
            break;
        }
        unescape(t2 + 1);
        row.label = (int32_t)strtol(t1 + 1, NULL, 10);
        row.path = t2 + 1;
        rc = each(ctx, &row);
    }
    free(line);
    fclose(f);
    return rc;
}
