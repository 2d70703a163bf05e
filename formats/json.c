/* json.c - JSON string literals (json.h). */
#include "json.h"

#include <string.h>

#include "fmt.h"

int fmt_json_bytes(FILE *f, const void *data, size_t len)
{
    const unsigned char *s = data, *end = s + len;
    int bad = fputc('"', f) == EOF;
    while (s < end && !bad) {
        size_t left = (size_t)(end - s);
        int n = fmt_utf8_len(s, left < 4 ? left : 4);
        if (n == 0) {
            bad = fprintf(f, "\\udc%02x", *s++) < 0;
        } else if (n > 1) {
            bad = fwrite(s, 1, (size_t)n, f) != (size_t)n;
            s += n;
        } else if (*s == '"' || *s == '\\') {
            bad = fprintf(f, "\\%c", *s++) < 0;
        } else if (*s < 0x20 || *s == 0x7f) {
            bad = fprintf(f, "\\u%04x", *s++) < 0;
        } else {
            bad = fputc(*s++, f) == EOF;
        }
    }
    if (!bad)
        bad = fputc('"', f) == EOF;
    return bad ? EOF : 0;
}

int fmt_json_string(FILE *f, const char *str)
{
    if (!str)
        return fputs("null", f) < 0 ? EOF : 0;
    return fmt_json_bytes(f, str, strlen(str));
}
