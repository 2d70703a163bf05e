/* test_feed.c - shardbench's folder feed (programs/shardbench/feed.c): decoding threads and its
 * own ordered queue deliver every epoch's batches in stream order, in the reader's order of the
 * files (shr_epoch_order), the same bytes whatever the threads and the queue's depth; a consumer
 * holding every slot is told, not hung; closing with batches held or mid-epoch returns. */
#include "bench.h"
#include "mksample.h"
#include "testutil.h"

#include <check.h>

#define BATCH 4
#define SIDE 16

static void make_folder(char *src, size_t len)
{
    tu_mks_src(src, len, 3, 7, 20, 40, 0);
}

/* epochs of the folder through a feed of threads decoders and depth slots: every batch checked
 * against the folder's order for its epoch; returns a digest of the pixels, labels and indices
 * in delivery order. */
static uint64_t run_feed(char *src, uint32_t threads, uint32_t depth, shr_order order,
                         uint64_t seed, uint32_t epochs)
{
    sb_feed f;
    ck_assert_int_eq(sb_feed_open(&f, src, BATCH, threads, depth, order, seed, SIDE, SIDE, 3,
                                  SHR_PIN_OFF), 0);
    size_t n = shc_input_list_count(f.in);
    ck_assert_uint_eq(n, 21);
    size_t *want = malloc(n * sizeof *want);
    ck_assert_ptr_nonnull(want);
    XXH3_state_t *h = XXH3_createState();
    XXH3_64bits_reset(h);
    for (uint32_t e = 0; e < epochs; e++) {
        ck_assert_int_eq(sb_folder_order(want, n, order, seed, e), 0);
        size_t at = 0;
        uint64_t number = 0;
        const shr_batch *b;
        int rc;
        while ((rc = sb_feed_next(&f, &b)) == 0) {
            ck_assert_uint_eq(b->epoch, e);
            ck_assert_uint_eq(b->number, number++);
            ck_assert_uint_eq(b->n, at + BATCH <= n ? BATCH : n - at);
            for (uint32_t i = 0; i < b->n; i++, at++) {
                ck_assert_int_eq(b->indices[i], (int64_t)want[at]);
                ck_assert_int_eq(b->sources[i], (int64_t)want[at]);
                ck_assert_int_eq(b->labels[i], shc_input_list_label(f.in, want[at]));
            }
            XXH3_64bits_update(h, b->data, (size_t)b->n * SIDE * SIDE * 3);
            XXH3_64bits_update(h, b->labels, b->n * sizeof *b->labels);
            XXH3_64bits_update(h, b->indices, b->n * sizeof *b->indices);
            sb_feed_release(&f, b);
        }
        ck_assert_int_eq(rc, SHR_EEND);
        ck_assert_ptr_null(b);
        ck_assert_uint_eq(at, n);
    }
    ck_assert_uint_eq(atomic_load(&f.job.errors), 0);
    uint64_t d = XXH3_64bits_digest(h);
    XXH3_freeState(h);
    free(want);
    sb_feed_close(&f);
    return d;
}

START_TEST(test_feed_stream_order)
{
    char src[700];
    make_folder(src, sizeof src);
    const shr_order orders[] = {SHR_ORDER_SEQUENTIAL, SHR_ORDER_RANDOM, SHR_ORDER_QUASI};
    for (int o = 0; o < 3; o++) {
        uint64_t one = run_feed(src, 1, 2, orders[o], 5, 3);
        ck_assert_uint_eq(run_feed(src, 3, 2, orders[o], 5, 3), one);
        ck_assert_uint_eq(run_feed(src, 4, 7, orders[o], 5, 3), one);
    }
    /* the files' order is the reader's: sequential is the listing, random a permutation of it
     * that changes with the epoch */
    size_t a[21], b[21];
    ck_assert_int_eq(sb_folder_order(a, 21, SHR_ORDER_SEQUENTIAL, 5, 1), 0);
    for (size_t i = 0; i < 21; i++)
        ck_assert_uint_eq(a[i], i);
    ck_assert_int_eq(sb_folder_order(a, 21, SHR_ORDER_RANDOM, 5, 0), 0);
    ck_assert_int_eq(sb_folder_order(b, 21, SHR_ORDER_RANDOM, 5, 1), 0);
    ck_assert(memcmp(a, b, sizeof a) != 0);
    uint64_t idx[21];
    shr_order_spec sp = {.n = 21, .order = SHR_ORDER_RANDOM, .seed = 5, .world = 1};
    ck_assert_int_eq(shr_epoch_order(&sp, 1, idx, NULL, NULL), 0);
    for (size_t i = 0; i < 21; i++)
        ck_assert_uint_eq(b[i], idx[i]);
}
END_TEST

/* A consumer that holds every slot is told so at once; released, the stream goes on where it
 * was. Closing with a batch held, mid-epoch, returns. */
START_TEST(test_feed_slots_held)
{
    char src[700];
    make_folder(src, sizeof src);
    sb_feed f;
    ck_assert_int_eq(sb_feed_open(&f, src, BATCH, 2, 2, SHR_ORDER_RANDOM, 9, SIDE, SIDE, 3,
                                  SHR_PIN_OFF), 0);
    const shr_batch *b0, *b1, *b2;
    ck_assert_int_eq(sb_feed_next(&f, &b0), 0);
    ck_assert_int_eq(sb_feed_next(&f, &b1), 0);
    ck_assert_uint_eq(b0->number, 0);
    ck_assert_uint_eq(b1->number, 1);
    ck_assert_int_eq(sb_feed_next(&f, &b2), SHR_EINVAL);
    ck_assert_ptr_null(b2);
    ck_assert_str_eq(sb_feed_error(&f), "every batch slot is held by the consumer: nothing can "
                     "arrive");
    sb_feed_release(&f, b0);
    ck_assert_int_eq(sb_feed_next(&f, &b2), 0);
    ck_assert_uint_eq(b2->number, 2);
    ck_assert_uint_eq(b2->epoch, 0);
    sb_feed_release(&f, b1);
    sb_feed_close(&f);              /* b2 held, the workers filling or waiting */

    /* closed right after open: no epoch drawn, the workers wait at the limit */
    ck_assert_int_eq(sb_feed_open(&f, src, BATCH, 3, 4, SHR_ORDER_SEQUENTIAL, 0, SIDE, SIDE, 3,
                                  SHR_PIN_OFF), 0);
    sb_feed_close(&f);
}
END_TEST

int main(void)
{
    return tu_run(TU_TEMP_SUITE("feed", "feed", 120, test_feed_stream_order, test_feed_slots_held));
}
