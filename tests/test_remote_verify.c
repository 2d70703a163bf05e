/* test_remote_verify.c - rmt_lazy's check thread (remote/lazy.c): a shard's transfer ends and is
 * handed on while another shard's check is held; a cancel while a check runs and another
 * download waits in its queue leaves no partial file and no unchecked shard; a download that
 * fails its check fails its acquire naming the object, and the others arrive; a partial
 * download left by an earlier process that is no prefix of the object is resumed, fails its
 * check, and is fetched again whole; a plan of two epochs starts the next epoch's shard only once
 * the shards of this one have arrived.
 *
 * The dataset (3 raw shards of 8 samples) is built by the build's own shardc (tests/progs.h)
 * before the tests fork; each test serves it over HTTP from a small server of its own (a thread
 * per connection, keep-alive, whole objects or one range), which can hold the answer for
 * shard-00001.raw until shard 0's check has begun, so that its transfer can only end while that check runs. */
#include "remote.h"
#include "progs.h"
#include "testutil.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NSHARDS 3
#define GUARD_S 30              /* a wait that cannot end on the code tested: a failure, not a hang */

static char g_www[600];         /* the served folder: ds/ (good) and bad/ (shard 1 damaged) */

/* ---- what the test, the server and the session's hooks share ---- */

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static int g_hold;              /* the server holds shard-00001.raw until g_checking0 */
static int g_checking0;         /* shard 0's check has begun */
static int g_arrived1;          /* shard 1's transfer has ended */
static int g_seen1;             /* ... and shard 0's check saw that while it was held */
static int g_block0;            /* shard 0's check waits for g_release */
static int g_release;
static int g_arrivals1;         /* times shard 1's transfer ended */
static int g_hold1;             /* the server holds shard-00001.raw until g_release */
static int g_early2;            /* ... and was asked for shard-00002.raw before that */
static int g_epochs;            /* the session's plan: epoch 0 reads shards 0 and 1, epoch 1
                                 * shard 2 (its hooks' epoch_end) */

static void deadline(struct timespec *t)
{
    clock_gettime(CLOCK_REALTIME, t);
    t->tv_sec += GUARD_S;
}

/* wait (g_mu held) until *flag, or the guard: the flag */
static int wait_flag(const int *flag)
{
    struct timespec t;
    deadline(&t);
    while (!*flag && pthread_cond_timedwait(&g_cv, &g_mu, &t) != ETIMEDOUT)
        ;
    return *flag;
}

static void set_flag(int *flag)
{
    pthread_mutex_lock(&g_mu);
    *flag = 1;
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
}

/* ---- the server ---- */

static int send_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

/* path's object, or bytes [from, to] of it (a Range request: to UINT64_MAX for its end) */
static void answer(int fd, const char *path, uint64_t from, uint64_t to)
{
    char file[2100];
    snprintf(file, sizeof file, "%s%s", g_www, path);
    uint8_t *body = NULL;
    size_t len = 0;
    char head[200];
    if (strstr(path, "..") || fmt_read_file(file, 1u << 30, &body, &len) != 0) {
        snprintf(head, sizeof head, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
        send_all(fd, head, strlen(head));
        return;
    }
    size_t pl = strlen(path);
    if (pl >= 15 && strcmp(path + pl - 15, "shard-00001.raw") == 0) {
        pthread_mutex_lock(&g_mu);
        if (g_hold)
            (void)wait_flag(&g_checking0);
        if (g_hold1)
            (void)wait_flag(&g_release);
        pthread_mutex_unlock(&g_mu);
    }
    if (pl >= 15 && strcmp(path + pl - 15, "shard-00002.raw") == 0) {
        pthread_mutex_lock(&g_mu);
        if (g_hold1 && !g_release)
            g_early2 = 1;
        pthread_mutex_unlock(&g_mu);
    }
    if (from == 0 && to == UINT64_MAX) {
        snprintf(head, sizeof head, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n", len);
    } else {
        if (to >= len)
            to = len - 1;
        if (from > to) {
            snprintf(head, sizeof head, "HTTP/1.1 416 Range Not Satisfiable\r\n"
                     "Content-Length: 0\r\n\r\n");
            send_all(fd, head, strlen(head));
            free(body);
            return;
        }
        snprintf(head, sizeof head, "HTTP/1.1 206 Partial Content\r\nContent-Length: %" PRIu64
                 "\r\nContent-Range: bytes %" PRIu64 "-%" PRIu64 "/%zu\r\n\r\n",
                 to - from + 1, from, to, len);
    }
    if (send_all(fd, head, strlen(head)) == 0)
        send_all(fd, body + from, (size_t)(to == UINT64_MAX ? len : to - from + 1));
    free(body);
}

static void *conn_main(void *arg)
{
    int fd = (int)(intptr_t)arg;
    char buf[8192];
    size_t have = 0;
    for (;;) {
        char *end = NULL;
        while (!(end = strstr(buf, "\r\n\r\n"))) {
            if (have + 1 >= sizeof buf)
                goto out;
            ssize_t r = recv(fd, buf + have, sizeof buf - 1 - have, 0);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                goto out;
            have += (size_t)r;
            buf[have] = '\0';
        }
        char path[1024];
        if (sscanf(buf, "GET %1023s HTTP/1.1", path) != 1)
            goto out;
        uint64_t from = 0, to = UINT64_MAX;
        const char *rg = strcasestr(buf, "\r\nRange: bytes=");
        if (rg && rg < end) {
            char *e = NULL;
            from = strtoull(rg + 15, &e, 10);
            if (e && *e == '-' && e[1] >= '0' && e[1] <= '9')
                to = strtoull(e + 1, NULL, 10);
        }
        answer(fd, path, from, to);
        size_t used = (size_t)(end + 4 - buf);
        memmove(buf, buf + used, have - used);
        have -= used;
        buf[have] = '\0';
    }
out:
    close(fd);
    return NULL;
}

static void *accept_main(void *arg)
{
    int lfd = (int)(intptr_t)arg;
    for (;;) {
        int c = accept(lfd, NULL, NULL);
        if (c < 0 && errno == EINTR)
            continue;
        if (c < 0)
            return NULL;
        pthread_t t;
        if (pthread_create(&t, NULL, conn_main, (void *)(intptr_t)c) == 0)
            pthread_detach(t);
        else
            close(c);
    }
}

/* a server of g_www on 127.0.0.1 (for the forked test's life): its port */
static int serve(void)
{
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(lfd, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    ck_assert_int_eq(bind(lfd, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(listen(lfd, 16), 0);
    ck_assert_int_eq(getsockname(lfd, (struct sockaddr *)&a, &al), 0);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, accept_main, (void *)(intptr_t)lfd), 0);
    pthread_detach(t);
    return ntohs(a.sin_port);
}

/* ---- the session ---- */

static size_t plan_one(void *ctx, uint64_t b, size_t *out)
{
    (void)ctx;
    if (b >= NSHARDS)
        return 0;
    out[0] = (size_t)b;         /* batch b reads shard b */
    return 1;
}

/* g_epochs: batches 0 and 1 are epoch 0, batch 2 epoch 1 */
static uint64_t epoch_end_two(void *ctx, uint64_t b)
{
    (void)ctx;
    return b < 2 ? 2 : UINT64_MAX;
}

static void unload_none(void *ctx, size_t k)
{
    (void)ctx;
    (void)k;
}

static void stage(void *ctx, size_t k, int what)
{
    (void)ctx;
    if (what == RMT_STAGE_ARRIVED && k == 1) {
        pthread_mutex_lock(&g_mu);
        g_arrivals1++;
        pthread_mutex_unlock(&g_mu);
        set_flag(&g_arrived1);
    }
    if (what != RMT_STAGE_CHECK || k != 0)
        return;
    pthread_mutex_lock(&g_mu);
    if (g_hold1) {              /* next_epoch_waits_for_this_one: no check waits */
        pthread_mutex_unlock(&g_mu);
        return;
    }
    g_checking0 = 1;
    pthread_cond_broadcast(&g_cv);
    if (g_block0)
        (void)wait_flag(&g_release);
    else
        g_seen1 = wait_flag(&g_arrived1);
    pthread_mutex_unlock(&g_mu);
}

/* a session on g_www/name with its cache in g_dir, ahead shards ahead, 2 transfers; the shared
 * flags as hold and block0 say (all others clear: CK_FORK=no runs the tests in one process) */
static rmt_lazy *session(const char *name, uint32_t ahead, int hold, int block0, char *url,
                         size_t ul, const char *junk_part)
{
    pthread_mutex_lock(&g_mu);
    g_hold = hold;
    g_block0 = block0;
    g_checking0 = g_arrived1 = g_seen1 = g_release = g_arrivals1 = 0;
    pthread_mutex_unlock(&g_mu);
    snprintf(url, ul, "http://127.0.0.1:%d/%s", serve(), name);
    char cache[700];
    snprintf(cache, sizeof cache, "%s/cache", g_dir);
    rmt_options o;
    memset(&o, 0, sizeof o);
    o.cache = cache;
    o.parallel = 2;
    rmt_lazy *z = NULL;
    char *dir = NULL;
    uint8_t *man = NULL;
    size_t mlen = 0;
    fmt_msg msg = {{0}};
    int rc = rmt_lazy_open(&z, url, &o, &dir, &man, &mlen, &msg);
    ck_assert_msg(rc == 0, "rmt_lazy_open: %s", msg.text);
    if (junk_part) {            /* a partial download left by an earlier process, not a prefix */
        char p[1300];
        snprintf(p, sizeof p, "%s/%s", dir, junk_part);
        FILE *f = fopen(p, "wb");
        ck_assert_ptr_nonnull(f);
        for (int i = 0; i < 100; i++)
            fputc(0xa5, f);
        ck_assert_int_eq(fclose(f), 0);
    }
    free(dir);
    free(man);
    ck_assert_uint_eq(rmt_lazy_manifest(z)->nshards, NSHARDS);
    rmt_lazy_stage_hook(z, stage, NULL);
    rmt_lazy_hooks h = {.plan = plan_one, .unload = unload_none,
                        .epoch_end = g_epochs ? epoch_end_two : NULL};
    rc = rmt_lazy_start(z, &h, 0, ahead, 1, NSHARDS, &msg);
    ck_assert_msg(rc == 0, "rmt_lazy_start: %s", msg.text);
    return z;
}

/* shard k's file in the session's folder has the served bytes */
static void same_as_served(const rmt_lazy *z, size_t k)
{
    char a[1300], b[1300];
    const char *f = rmt_lazy_manifest(z)->shards[k].file;
    snprintf(a, sizeof a, "%s/%s", rmt_lazy_dir(z), f);
    snprintf(b, sizeof b, "%s/ds/%s", g_www, f);
    uint8_t *x = NULL, *y = NULL;
    size_t xl = 0, yl = 0;
    ck_assert_int_eq(fmt_read_file(a, 1u << 30, &x, &xl), 0);
    ck_assert_int_eq(fmt_read_file(b, 1u << 30, &y, &yl), 0);
    ck_assert_uint_eq(xl, yl);
    ck_assert_int_eq(memcmp(x, y, xl), 0);
    free(x);
    free(y);
}

static int exists_in(const rmt_lazy *z, const char *name)
{
    char p[1300];
    snprintf(p, sizeof p, "%s/%s", rmt_lazy_dir(z), name);
    return file_exists(p);
}

/* Every shard of z acquired, each acquisition succeeding. */
static void acquire_all(rmt_lazy *z)
{
    fmt_msg msg = {{0}};
    for (size_t k = 0; k < NSHARDS; k++) {
        int rc = rmt_lazy_acquire(z, k, RMT_WAIT, &msg);
        ck_assert_msg(rc == 0, "shard %zu: %s", k, msg.text);
    }
}

/* Every shard fetched once, each file as served; all released, the session closed. */
static void close_all_served(rmt_lazy *z)
{
    rmt_stats st;
    rmt_lazy_stats(z, &st, NULL, NULL);
    ck_assert_uint_eq(st.fetched, NSHARDS);
    for (size_t k = 0; k < NSHARDS; k++) {
        same_as_served(z, k);
        rmt_lazy_release(z, k);
    }
    rmt_lazy_close(z);
}

/* *v read under g_mu. */
static int locked_get(const int *v)
{
    pthread_mutex_lock(&g_mu);
    int x = *v;
    pthread_mutex_unlock(&g_mu);
    return x;
}

START_TEST(transfer_ends_while_a_check_is_held)
{
    char url[200];          /* shard 1's body only once shard 0's check has begun */
    rmt_lazy *z = session("ds", NSHARDS, 1, 0, url, sizeof url, NULL);
    acquire_all(z);
    int seen = locked_get(&g_seen1);
    ck_assert_msg(seen, "shard 1's transfer did not end while shard 0's check was held");
    close_all_served(z);
}
END_TEST

START_TEST(cancel_while_checking_with_a_queue)
{
    char url[200];          /* and shard 0's check waits until the session is cancelled */
    rmt_lazy *z = session("ds", 2, 1, 1, url, sizeof url, NULL);
    pthread_mutex_lock(&g_mu);
    int arrived = wait_flag(&g_arrived1);     /* shard 1 queued behind shard 0's check */
    pthread_mutex_unlock(&g_mu);
    ck_assert_msg(arrived, "shard 1's transfer did not end while shard 0's check was held");
    ck_assert_int_eq(rmt_lazy_acquire(z, 1, RMT_NOWAIT, NULL), EAGAIN);   /* not checked yet */
    ck_assert(!exists_in(z, "shard-00001.raw"));
    rmt_lazy_cancel(z);
    set_flag(&g_release);
    char dir[1100];
    snprintf(dir, sizeof dir, "%s", rmt_lazy_dir(z));
    const fmt_manifest *m = rmt_lazy_manifest(z);
    ck_assert_str_eq(m->shards[1].file, "shard-00001.raw");
    rmt_lazy_close(z);
    /* shard 0's check, under way at the cancel, put it into place; shard 1, never checked, is
     * gone with its .part; nothing of shard 2 */
    char p[1300];
    const char *gone[] = {"shard-00001.raw", ".shard-00001.raw.part", "shard-00002.raw",
                          ".shard-00002.raw.part", ".shard-00000.raw.part"};
    for (size_t i = 0; i < sizeof gone / sizeof gone[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, gone[i]);
        ck_assert_msg(!file_exists(p), "%s is left", gone[i]);
    }
    snprintf(p, sizeof p, "%s/shard-00000.raw", dir);
    ck_assert(file_exists(p));
}
END_TEST

START_TEST(failed_check_names_the_object)
{
    char url[200];
    rmt_lazy *z = session("bad", NSHARDS, 0, 0, url, sizeof url, NULL);
    fmt_msg msg = {{0}};
    ck_assert_int_eq(rmt_lazy_acquire(z, 0, RMT_WAIT, &msg), 0);
    int rc = rmt_lazy_acquire(z, 1, RMT_WAIT, &msg);
    ck_assert_msg(rc == FMT_EHASH || rc == FMT_ECORRUPT, "rc %d: %s", rc, msg.text);
    char want[400];
    snprintf(want, sizeof want, "%s/shard-00001.raw: the object fails its check against the "
             "manifest: ", url);
    ck_assert_msg(strncmp(msg.text, want, strlen(want)) == 0, "%s", msg.text);
    ck_assert_int_eq(rmt_lazy_acquire(z, 2, RMT_WAIT, &msg), 0);
    ck_assert(!exists_in(z, "shard-00001.raw"));
    ck_assert(!exists_in(z, ".shard-00001.raw.part"));
    rmt_stats st;
    rmt_lazy_stats(z, &st, NULL, NULL);
    ck_assert_uint_eq(st.fetched, 2);
    rmt_lazy_release(z, 0);
    rmt_lazy_release(z, 2);
    rmt_lazy_close(z);
}
END_TEST

START_TEST(stale_part_fetched_again_whole)
{
    char url[200];
    rmt_lazy *z = session("ds", NSHARDS, 0, 0, url, sizeof url, ".shard-00001.raw.part");
    acquire_all(z);
    int arrivals = locked_get(&g_arrivals1);
    ck_assert_int_eq(arrivals, 2);      /* resumed, failed its check, then fetched whole */
    ck_assert(!exists_in(z, ".shard-00001.raw.part"));
    close_all_served(z);
}
END_TEST

START_TEST(next_epoch_waits_for_this_one)
{
    char url[200];          /* shard 1's body held until the test lets it go */
    pthread_mutex_lock(&g_mu);
    g_hold1 = 1;
    g_early2 = 0;
    g_epochs = 1;
    pthread_mutex_unlock(&g_mu);
    /* a window of every shard, 2 transfers: shards 0 and 1 start; as shard 0 ends, its
     * connection would take shard 2, the next epoch's, while shard 1 is still under way */
    rmt_lazy *z = session("ds", NSHARDS, 0, 0, url, sizeof url, NULL);
    fmt_msg msg = {{0}};
    ck_assert_int_eq(rmt_lazy_acquire(z, 0, RMT_WAIT, &msg), 0);
    struct timespec pause = {0, 200 * 1000 * 1000};   /* time for shard 2's request to come */
    nanosleep(&pause, NULL);
    set_flag(&g_release);
    ck_assert_int_eq(rmt_lazy_acquire(z, 1, RMT_WAIT, &msg), 0);
    ck_assert_int_eq(rmt_lazy_acquire(z, 2, RMT_WAIT, &msg), 0);
    pthread_mutex_lock(&g_mu);
    int early = g_early2;
    g_hold1 = g_epochs = 0;
    pthread_mutex_unlock(&g_mu);
    ck_assert_msg(!early, "the next epoch's shard was asked for before this epoch's last one "
                  "arrived");
    close_all_served(z);
}
END_TEST

static Suite *verify_suite(void)
{
    Suite *s = suite_create("remote_verify");
    TCase *tc = tcase_create("check_thread");
    tu_temp_fixtures(tc);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, transfer_ends_while_a_check_is_held);
    tcase_add_test(tc, cancel_while_checking_with_a_queue);
    tcase_add_test(tc, failed_check_names_the_object);
    tcase_add_test(tc, stale_part_fetched_again_whole);
    tcase_add_test(tc, next_epoch_waits_for_this_one);
    suite_add_tcase(s, tc);
    return s;
}

/* ds/: 24 samples in 3 shards of 8; bad/: the same, one byte of shard 1's middle changed */
static int build_fixtures(void)
{
    if (tu_progs_root() != 0)
        return -1;
    snprintf(g_www, sizeof g_www, "%s/www", g_root);
    char ds[1300], cmd[4096];
    snprintf(ds, sizeof ds, "%s/ds", g_www);
    snprintf(cmd, sizeof cmd, "cp -r '%s' '%s/bad'", ds, g_www);
    if (mkdir(g_www, 0755) != 0 ||
        tu_mksample("src", "--classes 3 --per-class 8 --min-side 20 --max-side 40") != 0 ||
        tu_build("src", ds, "--size 16x12 --shard-samples 8") != 0 || run_quiet(cmd) != 0)
        return -1;
    char p[1300];
    snprintf(p, sizeof p, "%s/bad/shard-00001.raw", g_www);
    struct stat st;
    FILE *f = fopen(p, "r+b");
    if (!f || stat(p, &st) != 0 || fseek(f, st.st_size / 2, SEEK_SET) != 0) {
        if (f)
            fclose(f);
        return -1;
    }
    int c = fgetc(f);
    int ok = c != EOF && fseek(f, st.st_size / 2, SEEK_SET) == 0 && fputc(c ^ 0x5a, f) != EOF;
    return fclose(f) == 0 && ok ? 0 : -1;
}

int main(void)
{
    int rc = build_fixtures();
    return tu_run_fixtures(rc, verify_suite());
}
