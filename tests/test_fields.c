/* test_fields.c - the fields record (formats/fields.h, raw.md "Fields record"): the bytes of a
 * known record, a round trip of every type, each corruption refused with its reason, the schema
 * check naming the field, and the manifest's "fields" object through dump and parse. */
#include <string.h>

#include "dataset.h"
#include "fields.h"
#include "le.h"
#include "manifest.h"
#include "target.h"
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

/* A one-shard raw manifest of schema's fields (source "jsonl"); sh: its shard. */
static void fields_manifest(fmt_manifest *m, fmt_manifest_shard *sh)
{
    *sh = (fmt_manifest_shard){.file = "shard-00000.raw", .samples = 1, .bytes = 4096};
    *m = (fmt_manifest){0};
    m->backend = "raw";
    m->backend_version = 2;
    m->tool = "shardc test";
    m->samples = m->inputs = 1;
    m->channels = 3;
    m->geom.mode = FMT_GEOM_KEEP;
    m->nshards = 1;
    m->shards = sh;
    m->nfields = 4;
    m->fields = (fmt_field_def *)schema;
    m->fields_source = "jsonl";
}

START_TEST(test_manifest_round_trip)
{
    fmt_manifest m, back = {0};
    fmt_manifest_shard sh;
    fields_manifest(&m, &sh);
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

/* The target both pair-record tests carry: two boxes of an 8x6 image, image id 42. */
static fmt_target two_boxes(void)
{
    static const float boxes[8] = {1, 2, 5, 6, 0, 0, 8, 4};
    static const int64_t labels[2] = {3, 7};
    static const float area[2] = {16, 32};
    static const uint8_t crowd[2] = {0, 1};
    return (fmt_target){.count = 2, .image_id = 42, .orig_width = 8, .orig_height = 6,
                        .boxes = boxes, .labels = labels, .area = area, .iscrowd = crowd};
}

/* A target of two boxes and the sample fields record in one pair record: the layout of raw.md
 * "Pair record", both parts back byte for byte (the target 8-aligned and readable in place), and
 * every damaged header refused. */
START_TEST(test_pair_record)
{
    fmt_target t = two_boxes();
    _Alignas(8) uint8_t tg[128], fl[256], rec[512];
    uint32_t tlen = fmt_target_encode(&t, tg, sizeof tg);
    uint32_t flen = sample_record(fl, sizeof fl);
    ck_assert_uint_eq(tlen, 96);                            /* 32 + 29 * 2 rounded up to 8 */
    uint32_t len = fmt_pair_encode(tg, tlen, fl, flen, rec, sizeof rec);
    ck_assert_uint_eq(len, 16 + tlen + flen);
    ck_assert_uint_eq(fmt_pair_size(tlen, flen), len);
    ck_assert_uint_eq(fmt_le_get32(rec), 0x31524150u);     /* "PAR1" */
    ck_assert_uint_eq(fmt_le_get32(rec + 4), tlen);
    ck_assert_uint_eq(fmt_le_get32(rec + 8), flen);
    ck_assert_uint_eq(fmt_le_get32(rec + 12), 0);
    ck_assert_uint_eq(fmt_pair_encode(tg, tlen, fl, flen, rec, len - 1), 0);
    ck_assert_uint_eq(fmt_pair_size(tlen + 4, flen), 0);   /* not a multiple of 8 */

    const uint8_t *pt, *pf;
    size_t ptl, pfl;
    fmt_msg msg = {{0}};
    ck_assert_int_eq(fmt_pair_view(rec, len, &pt, &ptl, &pf, &pfl, &msg), 0);
    ck_assert_ptr_eq(pt, rec + 16);
    ck_assert_uint_eq(ptl, tlen);
    ck_assert_uint_eq(pfl, flen);
    ck_assert_mem_eq(pt, tg, tlen);
    ck_assert_mem_eq(pf, fl, flen);
    fmt_target back;
    ck_assert_int_eq(fmt_target_view(pt, ptl, 8, 6, &back, &msg), 0);
    ck_assert_uint_eq(back.count, 2);
    ck_assert_int_eq(back.image_id, 42);
    ck_assert_int_eq(back.labels[1], 7);
    ck_assert_int_eq(fmt_fields_check(pf, pfl, schema, 4, &msg), 0);

    /* not a pair: a plain target or fields record, a short one */
    ck_assert_int_eq(fmt_pair_view(tg, tlen, &pt, &ptl, &pf, &pfl, &msg), FMT_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(msg.text, "PAR1"));
    ck_assert_int_eq(fmt_pair_view(fl, flen, &pt, &ptl, &pf, &pfl, &msg), FMT_ECORRUPT);
    ck_assert_int_eq(fmt_pair_view(rec, 8, &pt, &ptl, &pf, &pfl, &msg), FMT_ECORRUPT);
    /* every single flipped bit of the header is refused */
    for (int i = 0; i < 16; i++) {
        for (int b = 0; b < 8; b++) {
            rec[i] ^= (uint8_t)(1u << b);
            ck_assert_int_eq(fmt_pair_view(rec, len, &pt, &ptl, &pf, &pfl, &msg), FMT_ECORRUPT);
            rec[i] ^= (uint8_t)(1u << b);
        }
    }
    /* lengths moved by 8 between the parts still add up: the parts' own checks refuse them */
    fmt_le_put32(rec + 4, tlen + 8);
    fmt_le_put32(rec + 8, flen - 8);
    ck_assert_int_eq(fmt_pair_view(rec, len, &pt, &ptl, &pf, &pfl, &msg), 0);
    ck_assert_int_eq(fmt_target_view(pt, ptl, 8, 6, &back, &msg), FMT_ECORRUPT);
    ck_assert_int_eq(fmt_fields_check(pf, pfl, schema, 4, &msg), FMT_ECORRUPT);
    /* and one byte short of the lengths */
    fmt_le_put32(rec + 4, tlen);
    fmt_le_put32(rec + 8, flen);
    ck_assert_int_eq(fmt_pair_view(rec, len - 8, &pt, &ptl, &pf, &pfl, &msg), FMT_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(msg.text, "bytes"));
}
END_TEST

/* With targets the manifest's fields say record version 2 (pair records), and the two versions
 * are refused the other way round. */
START_TEST(test_manifest_with_targets)
{
    fmt_manifest m, back = {0};
    fmt_manifest_shard sh;
    fmt_category cat = {.id = 1, .name = "thing"};
    fields_manifest(&m, &sh);
    m.targets = 1;
    m.target_source = "coco";
    m.ncategories = 1;
    m.categories = &cat;
    char *json = NULL;
    ck_assert_int_eq(fmt_manifest_dump(&m, &json), 0);
    char *fv = strstr(json, "\"fields\"");
    ck_assert_ptr_nonnull(fv);
    char *ver = strstr(fv, "\"record_version\": 2");
    ck_assert_ptr_nonnull(ver);
    fmt_msg msg = {{0}};
    ck_assert_int_eq(fmt_manifest_parse(json, strlen(json), &back, &msg), 0);
    ck_assert(back.targets);
    ck_assert_uint_eq(back.nfields, 4);
    fmt_manifest_free(&back);
    ver[strlen("\"record_version\": ")] = '1';
    ck_assert_int_eq(fmt_manifest_parse(json, strlen(json), &back, &msg), FMT_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(msg.text, "record version 1 with 'targets'"));
    fmt_manifest_free(&back);
    free(json);
    /* without targets: version 1, and 2 is refused */
    m.targets = 0;
    m.ncategories = 0;
    m.categories = NULL;
    ck_assert_int_eq(fmt_manifest_dump(&m, &json), 0);
    ver = strstr(strstr(json, "\"fields\""), "\"record_version\": 1");
    ck_assert_ptr_nonnull(ver);
    ver[strlen("\"record_version\": ")] = '2';
    ck_assert_int_eq(fmt_manifest_parse(json, strlen(json), &back, &msg), FMT_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(msg.text, "record version 2 without 'targets'"));
    fmt_manifest_free(&back);
    free(json);
}
END_TEST

/* A pair record against the manifest at open (fmt_manifest_check_sample): accepted aligned or
 * not, and a missing record, a bad header, a category the manifest does not name and a damaged
 * fields part each refused with the sample and the reason. */
START_TEST(test_check_sample_pair)
{
    fmt_target t = two_boxes();
    _Alignas(8) uint8_t tg[128], fl[256], rec[512], odd[520];
    uint32_t tlen = fmt_target_encode(&t, tg, sizeof tg);
    uint32_t flen = sample_record(fl, sizeof fl);
    uint32_t len = fmt_pair_encode(tg, tlen, fl, flen, rec, sizeof rec);
    ck_assert_uint_gt(len, 0);
    fmt_manifest m;
    fmt_manifest_shard sh;
    fmt_category cats[2] = {{.id = 3, .name = "three"}, {.id = 7, .name = "seven"}};
    fields_manifest(&m, &sh);
    m.targets = 1;
    m.ncategories = 2;
    m.categories = cats;
    fmt_sample s = {.index = 5, .label = -1, .width = 8, .height = 6, .channels = 3,
                    .aux = rec, .aux_len = len};
    fmt_msg msg = {{0}};
    ck_assert_int_eq(fmt_manifest_check_sample(&m, &s, &msg), 0);
    memcpy(odd + 1, rec, len);          /* the target part misaligned */
    s.aux = odd + 1;
    ck_assert_int_eq(fmt_manifest_check_sample(&m, &s, &msg), 0);

    s.aux = NULL;
    ck_assert_int_eq(fmt_manifest_check_sample(&m, &s, &msg), FMT_ECORRUPT);
    ck_assert_str_eq(msg.text, "sample 5 has no target record, the manifest says the dataset "
                     "has targets (field 'targets')");
    s.aux = tg;                         /* a plain target record where a pair is due */
    s.aux_len = tlen;
    ck_assert_int_eq(fmt_manifest_check_sample(&m, &s, &msg), FMT_ECORRUPT);
    ck_assert_str_eq(msg.text, "sample 5: its aux record is not a pair record (no magic 'PAR1')");
    s.aux = rec;
    s.aux_len = len;
    m.ncategories = 1;
    ck_assert_int_eq(fmt_manifest_check_sample(&m, &s, &msg), FMT_ECORRUPT);
    ck_assert_str_eq(msg.text, "sample 5: box 1 has category 7, which the manifest does not "
                     "name (field 'targets.categories')");
    m.ncategories = 2;
    rec[16 + tlen] ^= 0x01;             /* the fields record's magic */
    ck_assert_int_eq(fmt_manifest_check_sample(&m, &s, &msg), FMT_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(msg.text, "sample 5: "));
    rec[16 + tlen] ^= 0x01;
    ck_assert_int_eq(fmt_manifest_check_sample(&m, &s, &msg), 0);
}
END_TEST

int main(void)
{
    return tu_run_suite(TU_SUITE("fields", "fields", 0, test_layout_and_round_trip,
                                 test_corrupt_refused, test_schema_check, test_manifest_round_trip,
                                 test_pair_record, test_manifest_with_targets,
                                 test_check_sample_pair));
}
