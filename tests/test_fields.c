/* test_fields.c - the fields record (formats/fields.h, raw.md "Fields record"): the bytes of a
 * known record, a round trip of every type, each corruption refused with its reason, the schema
 * check naming the field, and the manifest's "fields" object through dump and parse. */
#include <string.h>

#include "fields.h"
#include "le.h"
#include "manifest.h"
#include "testutil.h"

static const int64_t ints[3] = {0, 1, -7};
static const double score = 0.5;

/* multi: int[3], score: float, caption: str "a cat", raw: bytes 00 ff */
static uint32_t sample_record(uint8_t *out, size_t cap)
{
    fmt_field_value v[4] = {{FMT_FIELD_INT, 3, ints}, {FMT_FIELD_FLOAT, 1, &score},
                            {FMT_FIELD_STR, 5, "a cat"}, {FMT_FIELD_BYTES, 2, "\x00\xff"}};
    return fmt_fields_encode(v, 4, out, cap);
}

static const fmt_field_def schema[4] = {{"multi", FMT_FIELD_INT, 3}, {"score", FMT_FIELD_FLOAT, 0},
                                        {"caption", FMT_FIELD_STR, 0},
                                        {"raw", FMT_FIELD_BYTES, 0}};

START_TEST(test_layout_and_round_trip)
{
    uint8_t rec[256];
    uint32_t len = sample_record(rec, sizeof rec);
    /* 16 header + 4 * 8 descriptors + 24 + 8 + 8 + 8 */
    ck_assert_uint_eq(len, 16 + 32 + 24 + 8 + 8 + 8);
    ck_assert_uint_eq(fmt_le_get32(rec), 0x31444c46u);
    ck_assert_uint_eq(fmt_le_get32(rec + 4), 4);
    ck_assert_uint_eq(fmt_le_get32(rec + 8), len);
    ck_assert_uint_eq(rec[16], FMT_FIELD_INT);
    ck_assert_uint_eq(fmt_le_get32(rec + 20), 3);
    ck_assert_uint_eq(fmt_le_get64(rec + 48 + 16), (uint64_t)-7);
    ck_assert_mem_eq(rec + 48 + 32, "a cat\0\0\0", 8);
    fmt_field_value v[FMT_FIELDS_MAX];
    size_t n;
    fmt_msg msg = {{0}};
    ck_assert_int_eq(fmt_fields_view(rec, len, v, FMT_FIELDS_MAX, &n, &msg), 0);
    ck_assert_uint_eq(n, 4);
    ck_assert_mem_eq(v[0].data, ints, sizeof ints);
    ck_assert_mem_eq(v[1].data, &score, 8);
    ck_assert_uint_eq(v[2].count, 5);
    ck_assert_mem_eq(v[3].data, "\x00\xff", 2);
    ck_assert_int_eq(fmt_fields_check(rec, len, schema, 4, &msg), 0);
    /* unaligned records read the same */
    uint8_t odd[260];
    memcpy(odd + 1, rec, len);
    ck_assert_int_eq(fmt_fields_check(odd + 1, len, schema, 4, &msg), 0);
    ck_assert_uint_eq(fmt_fields_encode(v, 4, rec, len - 1), 0);     /* too small */
}
END_TEST

/* One byte at off set to val: refused with a reason containing want. */
static void corrupt(size_t off, uint8_t val, const char *want)
{
    uint8_t rec[256];
    uint32_t len = sample_record(rec, sizeof rec);
    rec[off] = val;
    fmt_msg msg = {{0}};
    ck_assert_int_eq(fmt_fields_check(rec, len, schema, 4, &msg), FMT_ECORRUPT);
    ck_assert_msg(strstr(msg.text, want), "%zu: '%s' lacks '%s'", off, msg.text, want);
}

START_TEST(test_corrupt_refused)
{
    corrupt(0, 'X', "bad magic");
    corrupt(8, 0, "says it has");
    corrupt(12, 1, "reserved");
    corrupt(4, 65, "fields (1..64)");
    corrupt(16, 9, "value 0 has type 9");
    corrupt(17, 1, "non-zero reserved");
    corrupt(20, 200, "runs past");              /* multi: 200 values where 3 are stored */
    corrupt(48 + 24 + 8 + 6, 1, "padding of value 2");
    corrupt(48 + 32, 0xff, "not valid UTF-8");
    corrupt(32, FMT_FIELD_BYTES, "field 'caption' is bytes, the schema says str");
    uint8_t rec[256];
    uint32_t len = sample_record(rec, sizeof rec);
    fmt_msg msg = {{0}};
    ck_assert_int_eq(fmt_fields_check(rec, len - 8, schema, 4, &msg), FMT_ECORRUPT);
    ck_assert_int_eq(fmt_fields_check(rec, len, schema, 3, &msg), FMT_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(msg.text, "holds 4 fields, the schema names 3"));
    fmt_field_def other[4];
    memcpy(other, schema, sizeof other);
    other[0].count = 2;
    ck_assert_int_eq(fmt_fields_check(rec, len, other, 4, &msg), FMT_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(msg.text, "field 'multi' has 3 values, the schema says 2"));
    ck_assert_int_eq(fmt_fields_view(rec, 8, NULL, 0, &(size_t){0}, &msg), FMT_ECORRUPT);
}
END_TEST

START_TEST(test_schema_check)
{
    fmt_msg msg = {{0}};
    ck_assert_int_eq(fmt_fields_schema_check(schema, 4, &msg), 0);
    fmt_field_def d[2] = {{"a", FMT_FIELD_INT, 0}, {"a", FMT_FIELD_FLOAT, 0}};
    ck_assert_int_eq(fmt_fields_schema_check(d, 2, &msg), FMT_EINVAL);
    ck_assert_ptr_nonnull(strstr(msg.text, "field 'a' named twice"));
    d[1] = (fmt_field_def){"b", FMT_FIELD_STR, 4};
    ck_assert_int_eq(fmt_fields_schema_check(d, 2, &msg), FMT_EINVAL);
    ck_assert_ptr_nonnull(strstr(msg.text, "field 'b': count 4"));
    d[1] = (fmt_field_def){"9x", FMT_FIELD_STR, 0};
    ck_assert_int_eq(fmt_fields_schema_check(d, 2, &msg), FMT_EINVAL);
    ck_assert_int_eq(fmt_fields_schema_check(d, 0, &msg), FMT_EINVAL);
    fmt_field_value big = {FMT_FIELD_INT, FMT_FIELDS_MAX_COUNT + 1, ints};
    ck_assert_uint_eq(fmt_fields_size(&big, 1), 0);
}
END_TEST

START_TEST(test_manifest_round_trip)
{
    fmt_manifest m = {0}, back = {0};
    fmt_manifest_shard sh = {.file = "shard-00000.raw", .samples = 1, .bytes = 4096};
    m.backend = "raw";
    m.backend_version = 2;
    m.tool = "shardc test";
    m.samples = m.inputs = 1;
    m.channels = 3;
    m.geom.mode = FMT_GEOM_KEEP;
    m.nshards = 1;
    m.shards = &sh;
    m.nfields = 4;
    m.fields = (fmt_field_def *)schema;
    m.fields_source = "jsonl";
    m.fields_hash = 0x0123456789abcdefull;
    char *json = NULL;
    ck_assert_int_eq(fmt_manifest_dump(&m, &json), 0);
    fmt_msg msg = {{0}};
    ck_assert_int_eq(fmt_manifest_parse(json, strlen(json), &back, &msg), 0);
    ck_assert_uint_eq(back.nfields, 4);
    for (int i = 0; i < 4; i++) {
        ck_assert_str_eq(back.fields[i].name, schema[i].name);
        ck_assert_uint_eq(back.fields[i].type, schema[i].type);
        ck_assert_uint_eq(back.fields[i].count, schema[i].count);
    }
    ck_assert_str_eq(back.fields_source, "jsonl");
    ck_assert_uint_eq(back.fields_hash, m.fields_hash);
    fmt_manifest_free(&back);
    /* a schema the record check would refuse is refused by name */
    char *bad = strstr(json, "\"caption\"");
    ck_assert_ptr_nonnull(bad);
    memcpy(bad, "\"9aption\"", 9);
    ck_assert_int_eq(fmt_manifest_parse(json, strlen(json), &back, &msg), FMT_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(msg.text, "fields.schema"));
    fmt_manifest_free(&back);
    free(json);
}
END_TEST

static Suite *fields_suite(void)
{
    Suite *s = suite_create("fields");
    TCase *tc = tcase_create("fields");
    tcase_add_test(tc, test_layout_and_round_trip);
    tcase_add_test(tc, test_corrupt_refused);
    tcase_add_test(tc, test_schema_check);
    tcase_add_test(tc, test_manifest_round_trip);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(fields_suite());
}
