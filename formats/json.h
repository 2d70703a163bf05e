/* json.h - JSON string literals, for the machine-readable output of the programs (shardc info
 * --json, shardbench --json). */
#ifndef FMT_JSON_H
#define FMT_JSON_H

#include <stdio.h>

/* Write str as a JSON string, quotes included, to f. '"' and '\' are escaped with a backslash,
 * the control characters U+0000..U+001F and DEL as \u00XX; valid UTF-8 passes through as it is.
 * Names on disk are bytes: each byte that is not part of valid UTF-8 is written as the escaped
 * lone surrogate U+DC00 + byte, \udcXX (Python's "surrogateescape": os.fsencode(json.loads(...))
 * gives the original bytes back). str NULL is written as null. Returns 0, or EOF when a write to
 * f fails. */
int fmt_json_string(FILE *f, const char *str);
/* The same for len bytes at data (NUL bytes among them written as \u0000). */
int fmt_json_bytes(FILE *f, const void *data, size_t len);

#endif
