/* fieldsin.h - `shardc build --fields FILE.jsonl`: each input's fields (formats/fields.h) read from
 * a JSON-lines side file keyed by the input's path.
 *
 * One JSON object per line: {"path": P, "fields": {NAME: VALUE, ...}}. P names an input as a list
 * file does (relative to the SRC that holds it) or by the path the build lists (SRC joined with
 * it). VALUE: an integer (int), a number with a fraction or exponent (float), an array of
 * numbers (int[N] when every one is an integer, else float[N]), or a string (str). The first
 * line fixes the schema: every line names the same fields, each of the same type and count (an
 * integer where the schema says float is taken as that float). Every input has exactly one line;
 * empty lines are ignored.
 */
#ifndef SHC_FIELDSIN_H
#define SHC_FIELDSIN_H

#include <stddef.h>
#include <stdint.h>

#include "fields.h"
#include "fmt.h"
#include "inputs.h"

typedef struct {
    fmt_field_def *defs;        /* the schema */
    size_t ndefs;
    uint8_t **recs;             /* per input position: its fields record */
    uint32_t *lens;
    size_t n;
    uint64_t hash;              /* XXH3-64 of the schema and every record in input order */
} shc_fields_in;

/* Read path and give each of in's items its record. Errors: errno of the file; EINVAL for a bad
 * line, a field missing or of another type, an input without a line or a line naming no input,
 * with msg naming the file, the line and the field. */
int shc_fields_load(const char *path, const fmt_inputs *in, char *const *srcs, size_t nsrc,
                    shc_fields_in *out, fmt_msg *msg);

void shc_fields_free(shc_fields_in *f);

#endif
