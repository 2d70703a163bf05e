/* journal.h - a build's reject journal and its crash points (internal to the build: build.c).
 *
 * The journal, OUT/.rejects.journal, holds one line per reject, "<pos>\tpath\treason", and one
 * per stored input its decoder warned about, "W<pos>\tpath\twarning". The build appends to it as
 * inputs are refused and fsyncs it before each shard is renamed into place, so a finished
 * shard's input range always has its rejects on disk; a resumed build reloads them from it.
 *
 * Crash points: the places a build may be killed by a test (SHARDC_CRASH_AT, SHARDC_CRASH_AFTER,
 * SHARDC_CRASH_POINTS), in the order listed at the top of build.c.
 */
#ifndef SHC_JOURNAL_H
#define SHC_JOURNAL_H

#include <stdint.h>
#include <stdio.h>

#include "build.h"

#define SHC_JOURNAL_NAME ".rejects.journal"

/* One reject: input position, path, reason. */
typedef struct {
    uint64_t pos;
    char *path, *reason;
} shc_reject;

typedef struct {
    shc_reject *v;
    size_t n, cap;
} shc_reject_list;

/* Append a copy of (pos, path, reason) to l. 0 or ENOMEM. */
int shc_reject_add(shc_reject_list *l, uint64_t pos, const char *path, const char *reason);

/* Free l's entries and empty it. */
void shc_reject_list_free(shc_reject_list *l);

/* Append one line to the open journal: a reject, or (warning non-zero) a warning. The caller
 * flushes and syncs it (before a shard is finished). */
void shc_journal_add(FILE *journal, int warning, uint64_t pos, const char *path,
                     const char *reason);

/* Reload the journal of the build in out: its rejects into rej and its warnings into warn, those
 * of input positions below next_input. A missing journal adds nothing; a torn last line is
 * ignored. 0 or ENOMEM. */
int shc_journal_load(const char *out, uint64_t next_input, shc_reject_list *rej,
                     shc_reject_list *warn);

typedef struct {
    shc_crash_opts o;           /* what the build was asked for */
    uint64_t passed, samples;
    const shc_build_cb *cb;     /* where the report goes */
} shc_crash_hook;

/* The build's crash settings (o); reports go to cb. */
void shc_crash_init(shc_crash_hook *c, const shc_crash_opts *o, const shc_build_cb *cb);

/* Pass one crash point (sample: a sample point): what and name say where, for report 2. Kills
 * the process (SIGKILL) when it is the point asked for. */
void shc_crash_point(shc_crash_hook *c, int sample, const char *what, const char *name);

#endif
