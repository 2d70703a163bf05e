/* fields.h - a sample's fields record: named values beyond its one int label (multi-hot
 * labels, several ints, floats, strings, bytes), and the dataset's schema of them (spec: the
 * "Fields record" section of formats/raw.md; the schema: manifest.md "fields").
 *
 * A fields record travels as the sample's aux record, so every backend stores, hashes and checks
 * it wherever it stores an aux record. The schema (names, types, counts) is the manifest's and
 * is fixed across the dataset; the record holds the values in schema order with each one's type
 * and count, so a record is checked against the schema without the names. Little-endian,
 * a multiple of 8 bytes, each value 8-aligned within the record; a reader needs no alignment of
 * the record itself (the values are read with memcpy).
 */
#ifndef FMT_FIELDS_H
#define FMT_FIELDS_H

#include <stddef.h>
#include <stdint.h>

#include "fmt.h"

#define FMT_FIELDS_MAGIC 0x31444c46u   /* "FLD1" little-endian */
#define FMT_FIELDS_HEADER 16u
#define FMT_FIELDS_MAX 64u              /* fields per dataset */
#define FMT_FIELDS_MAX_COUNT 65536u     /* elements of a numeric field, bytes of a str or bytes */
#define FMT_FIELDS_MAX_RECORD (1u << 20)    /* bytes of one record */
#define FMT_FIELDS_MAX_NAME 64u         /* bytes of a field's name */

typedef enum {
    FMT_FIELD_INT = 1,      /* int64 values */
    FMT_FIELD_FLOAT = 2,    /* float64 values */
    FMT_FIELD_STR = 3,      /* UTF-8 text (count: bytes) */
    FMT_FIELD_BYTES = 4     /* opaque bytes (count: bytes) */
} fmt_field_type;

/* One field of a dataset's schema. count: for int and float, 0 for a scalar or N >= 1 for a
 * vector of exactly N values (a multi-hot label of N classes); for str and bytes always 0 (each
 * sample's own length). */
typedef struct {
    char *name;
    uint32_t type;          /* fmt_field_type */
    uint32_t count;
} fmt_field_def;

/* One value, to encode or as fmt_fields_view found it. data: count int64 / float64 values or
 * count bytes, little-endian, no alignment (in a view: a pointer into the record). */
typedef struct {
    uint32_t type;
    uint32_t count;         /* values stored: a scalar is 1 */
    const void *data;
} fmt_field_value;

/* "int", "float", "str", "bytes", or NULL; and back (0 if unknown). */
const char *fmt_field_type_name(uint32_t type);
uint32_t fmt_field_type_parse(const char *s);

/* Is s (len bytes) a usable field name: 1..FMT_FIELDS_MAX_NAME bytes of letters, digits, '_',
 * '-' and '.', not starting with a digit or '.'? */
int fmt_field_name_ok(const char *s, size_t len);

/* Check a schema: 1..FMT_FIELDS_MAX fields, names usable and distinct, types known, counts as
 * fmt_field_def says and at most FMT_FIELDS_MAX_COUNT. 0 or FMT_EINVAL, msg naming the field. */
int fmt_fields_schema_check(const fmt_field_def *defs, size_t n, fmt_msg *msg);

/* Bytes of a record of these n values (the header, the descriptors, each value padded to 8);
 * 0 when n or a count is out of bounds or the record would exceed FMT_FIELDS_MAX_RECORD. */
uint32_t fmt_fields_size(const fmt_field_value *v, size_t n);

/* Write the record of v[0..n) into out (cap bytes); padding is zero. Returns its length, or 0
 * when it does not fit or fmt_fields_size is 0. */
uint32_t fmt_fields_encode(const fmt_field_value *v, size_t n, uint8_t *out, size_t cap);

/* Check a record and point vals[0..*n) into it (cap entries at least; FMT_FIELDS_MAX always
 * suffice). Checked: magic, the length field against len and against the descriptors, zero
 * reserved and padding bytes, known types, counts in bounds, text valid UTF-8. 0, or
 * FMT_ECORRUPT with msg saying which field. */
int fmt_fields_view(const uint8_t *rec, size_t len, fmt_field_value *vals, size_t cap, size_t *n,
                    fmt_msg *msg);

/* fmt_fields_view, then the values against a schema: as many, each of the field's type, numeric
 * fields with the schema's count (1 for a scalar). msg names the field by name. */
int fmt_fields_check(const uint8_t *rec, size_t len, const fmt_field_def *defs, size_t ndefs,
                     fmt_msg *msg);

/* ---- the pair record: a target and a fields record in one aux record ----
 * A sample of a dataset with both targets and fields (manifest: "targets" and "fields" with
 * record_version 2) carries this as its aux record (spec: raw.md "Pair record"):
 *   0  u32 magic FMT_PAIR_MAGIC    4  u32 target_len    8  u32 fields_len    12  u32 reserved 0
 *   16 the target record (target_len bytes), then the fields record (fields_len bytes)
 * Both lengths are multiples of 8, so the target stays 8-aligned where the record is. A record
 * of any other magic is not a pair (a target-only or fields-only dataset's record, as before). */
#define FMT_PAIR_MAGIC 0x31524150u      /* "PAR1" little-endian */
#define FMT_PAIR_HEADER 16u

/* Bytes of the pair of a tlen-byte target and an flen-byte fields record (0: not multiples of 8,
 * or over UINT32_MAX). */
uint32_t fmt_pair_size(size_t tlen, size_t flen);

/* Write the pair into out (cap bytes, at least fmt_pair_size); returns its length or 0. */
uint32_t fmt_pair_encode(const uint8_t *target, size_t tlen, const uint8_t *fields, size_t flen,
                         uint8_t *out, size_t cap);

/* Split a pair record: *target, *tlen and *fields, *flen point into rec. Checked: magic, zero
 * reserved bytes, both lengths multiples of 8 adding up to len less the header. 0, or
 * FMT_ECORRUPT with msg saying what is wrong (the parts themselves are not checked here). */
int fmt_pair_view(const uint8_t *rec, size_t len, const uint8_t **target, size_t *tlen,
                  const uint8_t **fields, size_t *flen, fmt_msg *msg);

#endif
