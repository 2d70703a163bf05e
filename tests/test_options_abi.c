/* test_options_abi.c - shr_options carries its size, so a caller built against an earlier
 * shardread.h keeps working with a later library: shr_options_init writes only the caller's
 * bytes, shr_open and shr_draw_params read only those and take the defaults for the fields
 * the caller's header did not have (here: every field from mixup_alpha on, which a garbage
 * fill would otherwise turn on and make shr_open refuse uint8 output), and the batches are the
 * ones a caller with the full struct gets. Uninitialised options (size 0) and a caller built
 * against a newer header (a size larger than the library's) are refused with the reason. */
#include <check.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardread.h"

#include "progs.h"
#include "testutil.h"

static char g_ds[1100];

/* an older caller's view: its shr_options ended before mixup_alpha */
#define OLD_SIZE offsetof(shr_options, mixup_alpha)
#define GARBAGE 0xA5

/* A buffer as a caller's struct would be, with room past it, aligned for shr_options. */
typedef union {
    shr_options o;
    unsigned char bytes[sizeof(shr_options) + 64];
} callerbuf;

static int build_fixture(void)
{
    return tu_build_ds(g_ds, "--classes 3 --per-class 5 --min-side 24 --max-side 48", "--size 20x16");
}

/* The bytes of the first batch of o's reader (RandomResizedCrop + flip + jitter, shuffled). */
static unsigned char *first_batch(const shr_options *o, size_t *len)
{
    shr_reader *r = NULL;
    int rc = shr_open(&r, g_ds, o, tu_fresh());
    ck_assert_msg(rc == 0, "shr_open: %d %s", rc, tu_msg.text);
    const shr_batch *b;
    ck_assert_int_eq(shr_next(r, &b), 0);
    ck_assert_ptr_null(b->soft_labels);
    *len = (size_t)b->n * b->width * b->height * b->channels;
    unsigned char *copy = malloc(*len);
    ck_assert_ptr_nonnull(copy);
    memcpy(copy, b->data, *len);
    shr_release(r, b);
    shr_close(r);
    return copy;
}

static void set_common(shr_options *o)
{
    o->batch_size = 6;
    o->order = SHR_ORDER_RANDOM;
    o->seed = 11;
    o->width = 16;
    o->height = 12;
    o->rrc = 1;
    o->flip = 1;
    o->jitter_hue[0] = -0.2;
    o->jitter_hue[1] = 0.2;
    o->threads = 2;
}

START_TEST(test_older_caller)
{
    callerbuf c;
    memset(c.bytes, GARBAGE, sizeof c.bytes);
    shr_options_init_size(&c.o, OLD_SIZE);
    ck_assert_uint_eq(c.o.size, OLD_SIZE);
    for (size_t i = OLD_SIZE; i < sizeof c.bytes; i++)
        ck_assert_msg(c.bytes[i] == GARBAGE, "shr_options_init wrote byte %zu of a %zu-byte "
                      "struct", i, (size_t)OLD_SIZE);
    ck_assert_uint_eq(c.o.batch_size, 256);    /* the defaults in the caller's part */
    set_common(&c.o);
    shr_options full;
    shr_options_init(&full);
    ck_assert_uint_eq(full.size, sizeof full);
    set_common(&full);
    size_t la, lb;
    unsigned char *a = first_batch(&c.o, &la);
    unsigned char *b = first_batch(&full, &lb);
    ck_assert_uint_eq(la, lb);
    ck_assert_mem_eq(a, b, la);
    free(a);
    free(b);
    /* the parameters of one sample too */
    shr_params pa, pb;
    ck_assert_int_eq(shr_draw_params(&c.o, 0, 3, 40, 30, &pa), 0);
    ck_assert_int_eq(shr_draw_params(&full, 0, 3, 40, 30, &pb), 0);
    ck_assert_mem_eq(&pa, &pb, sizeof pa);
}
END_TEST

/* The last field ends the struct: a field added in the tail padding would not change the size,
 * and an older caller's padding would be read as it. */
START_TEST(test_no_tail_padding)
{
    ck_assert_uint_eq(offsetof(shr_options, pin_device) + sizeof(uint64_t),
                      sizeof(shr_options));
}
END_TEST

START_TEST(test_refused_sizes)
{
    callerbuf c;
    shr_reader *r = NULL;
    /* not initialised */
    memset(&c, 0, sizeof c);
    ck_assert_int_eq(shr_open(&r, g_ds, &c.o, tu_fresh()), SHR_EINVAL);
    ck_assert_ptr_null(r);
    ck_assert_ptr_nonnull(strstr(tu_msg.text, "shr_options_init"));
    shr_params p;
    ck_assert_int_eq(shr_draw_params(&c.o, 0, 0, 10, 10, &p), SHR_EINVAL);
    /* a caller built against a newer header: its extra bytes are zeroed, and it is refused */
    memset(c.bytes, GARBAGE, sizeof c.bytes);
    shr_options_init_size(&c.o, sizeof(shr_options) + 16);
    for (size_t i = sizeof(shr_options); i < sizeof(shr_options) + 16; i++)
        ck_assert_uint_eq(c.bytes[i], 0);
    ck_assert_uint_eq(c.bytes[sizeof(shr_options) + 16], GARBAGE);
    ck_assert_int_eq(shr_open(&r, g_ds, &c.o, tu_fresh()), SHR_EINVAL);
    ck_assert_ptr_nonnull(strstr(tu_msg.text, "newer shardread.h"));
    /* NULL options are the defaults */
    ck_assert_int_eq(shr_open(&r, g_ds, NULL, tu_fresh()), 0);
    shr_close(r);
}
END_TEST

int main(void)
{
    int rc = build_fixture();
    Suite *s = TU_SUITE("options_abi", "core", 120, test_older_caller, test_refused_sizes,
                        test_no_tail_padding);
    return tu_run_fixtures(rc, s);
}
