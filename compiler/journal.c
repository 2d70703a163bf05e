/* journal.c - the reject journal (OUT/.rejects.journal) and the crash points of a build: the
 * list of rejects kept while a build runs, the journal lines that put them on disk and reload
 * them on --resume, and the hook that kills a build at a chosen point for the crash tests.
 * journal.h describes both.
 */
#include "journal.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "fmt.h"
#include "report.h"
#include "util.h"

/* ---- the list of rejects ---- */

int shc_reject_add(shc_reject_list *l, uint64_t pos, const char *path, const char *reason)
{
    if (shc_grow_array(&l->v, &l->cap, l->n, sizeof *l->v, 32))
        return ENOMEM;
    shc_reject *r = &l->v[l->n];
    r->pos = pos;
    r->path = strdup(path);
    r->reason = strdup(reason);
    if (!r->path || !r->reason) {
        free(r->path);
        free(r->reason);
        return ENOMEM;
    }
    l->n++;
    return 0;
}

void shc_reject_list_free(shc_reject_list *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].path);
        free(l->v[i].reason);
    }
    free(l->v);
    memset(l, 0, sizeof *l);
}

/* ---- crash points (the list is at the top of build.c) ---- */

static uint64_t env_uint(char *(*get)(const char *), const char *name)
{
    const char *v = get(name);
    uint64_t n;
    return v && shc_parse_uint(v, 1, UINT64_MAX, &n) == 0 ? n : 0;
}

void shc_crash_from_env(char *(*get)(const char *), shc_crash_opts *c)
{
    c->at = env_uint(get, "SHARDC_CRASH_AT");
    c->after = env_uint(get, "SHARDC_CRASH_AFTER");
    c->report = env_uint(get, "SHARDC_CRASH_POINTS");
}

void shc_crash_init(shc_crash_hook *c, const shc_crash_opts *o, const shc_build_cb *cb)
{
    memset(c, 0, sizeof *c);
    c->o = *o;
    c->cb = cb;
}

/* Pass one crash point: what and name say where, for report 2. */
void shc_crash_point(shc_crash_hook *c, int sample, const char *what, const char *name)
{
    c->passed++;
    c->samples += sample != 0;
    if (c->o.report >= 2)
        shc_say(c->cb, "crash point %" PRIu64 ": %s %s", c->passed, what, name);
    if ((c->o.at && c->passed == c->o.at) ||
        (sample && c->o.after && c->samples == c->o.after))
        raise(SIGKILL);
}

/* ---- the journal ---- */

void shc_journal_add(FILE *journal, int warning, uint64_t pos, const char *path,
                     const char *reason)
{
    fprintf(journal, "%s%" PRIu64 "\t%s\t%s\n", warning ? "W" : "", pos, path, reason);
}

/* Reload the journal's rejects (and warnings: lines "W<pos>...") below next_input. */
int shc_journal_load(const char *out, uint64_t next_input, shc_reject_list *rej,
                     shc_reject_list *warn)
{
    char *path = fmt_path_join(out, SHC_JOURNAL_NAME, "");
    if (!path)
        return ENOMEM;
    int e;
    FILE *f = fmt_fopen_file(path, &e, NULL);     /* none (or not a file): nothing to reload */
    int rc = 0;
    if (f) {
        char *line = NULL;
        size_t cap = 0;
        ssize_t n;
        while ((n = getline(&line, &cap, f)) > 0) {
            if (line[n - 1] != '\n')
                break; /* torn last line */
            line[n - 1] = '\0';
            char *t1 = strchr(line, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
            if (!t2)
                continue;
            *t1 = *t2 = '\0';
            uint64_t pos;
            int w = line[0] == 'W';
            if (shc_parse_uint(line + w, 0, UINT64_MAX, &pos) == 0 && pos < next_input)
                if ((rc = shc_reject_add(w ? warn : rej, pos, t1 + 1, t2 + 1)))
                    break;
        }
        free(line);
        fclose(f);
    }
    free(path);
    return rc;
}
