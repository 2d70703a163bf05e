/* tsv.h - the tables a build writes beside its shards, one record a line, fields separated by
 * tabs (tabs, newlines, carriage returns and backslashes in a field escaped as \t \n \r \\):
 *   rejects.tsv    "path\treason": the inputs the listing skipped, then those the build refused
 *   warnings.tsv   "path\twarning": the inputs stored although their decoder warned
 *   inputs.tsv     "source\tlabel\tpath": every input position of the build (or part) with its
 *                  label, so each sample's `source` leads back to its file (shardc cat --replay,
 *                  shardc verify)
 * Each is written whole and atomically (fmt_write_file_atomic), after its header line. Internal to
 * libshardcomp. */
#ifndef SHC_TSV_H
#define SHC_TSV_H

#include <stdint.h>

#include "inputs.h"
#include "journal.h"

#define SHC_REJECTS_NAME "rejects.tsv"
#define SHC_WARNINGS_NAME "warnings.tsv"
#define SHC_INPUTS_NAME "inputs.tsv"

/* out/rejects.tsv: in's listing skips, then the rejects of rej. 0 or an errno value. */
int shc_write_rejects(const char *out, const fmt_inputs *in, const shc_reject_list *rej);

/* out/warnings.tsv: the warnings of warn. 0 or an errno value. */
int shc_write_warnings(const char *out, const shc_reject_list *warn);

/* out/inputs.tsv: input positions [lo, hi) of in. 0 or an errno value. */
int shc_write_inputs(const char *out, const fmt_inputs *in, uint64_t lo, uint64_t hi);

/* The bytes shc_write_inputs would write, for a projection (escapes not counted). */
uint64_t shc_inputs_tsv_bytes(const fmt_inputs *in, uint64_t lo, uint64_t hi);

/* One line of inputs.tsv. */
typedef struct {
    uint64_t source;            /* the input position */
    int32_t label;
    const char *path;           /* unescaped; valid during the call only */
} shc_inputs_row;

/* Read dir/inputs.tsv: each(ctx, row) for every line after the header, in order, until it
 * returns non-zero, which is then returned. 0 at the end; FMT_ECORRUPT for a line that is not
 * three fields with a decimal source; ENOMEM; the errno value of a file that does not open. */
int shc_inputs_tsv_read(const char *dir, int (*each)(void *ctx, const shc_inputs_row *row),
                        void *ctx);

#endif
