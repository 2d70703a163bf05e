/* shardbench - measure the work shards remove.
 *
 *   shardbench read DATASET... [options]
 *
 * Each DATASET is measured on its own, in command-line order, and gives one row:
 *
 *   raw (or the backend the manifest names)   a directory holding manifest.json, read through the
 *       public libshardread API exactly as a training loop would: shr_open, shr_next / touch /
 *       shr_release over E epochs. The consumer touches one byte per 4 KiB page of each batch, so
 *       the delivery cannot be optimised away but costs next to nothing.
 *   memcpy (--memcpy)   the physical limit for the same bytes: every shard mapped, every sample's
 *       payload memcpy'd into per-thread batch buffers, in the order the reader delivered (its
 *       batch indices are recorded during the reader run and replayed), with the same thread count
 *       and batch size.
 *   folder   any other directory: class folders of JPEG/PNG/BMP files, decoded per epoch the way a
 *       training-time loader does (read file, decode with the shrink-on-load hint, resize and
 *       center-crop to the output size, write into a batch buffer), with the same codecs shardc
 *       uses, the same threads, batch size and order. This is the decode work shards remove.
 *
 * The baselines' threads claim whole batches from a shared counter, each filling its own batch
 * buffer, which is the reader's worker model without the ring; there is no consumer thread.
 *
 * What a row reports: with E > 1 epochs, the steady state, i.e. epochs 2..E, after the first has
 * paid for opening the dataset and warming caches; the first epoch is reported separately in the
 * JSON output. With E = 1 the single epoch. CPU time is getrusage(RUSAGE_SELF) user + system, so it
 * counts every thread of the process, the reader's workers included.
 *
 * Cold runs (--cold) evict every file of the dataset from the page cache (fdatasync, then
 * posix_fadvise DONTNEED) before every epoch, so every epoch reads from storage. Pages that a live
 * mapping holds cannot be evicted, and the reader maps its shards, so in a cold run the reader (and
 * the memcpy baseline's mapping) is closed and reopened around every epoch, starting at that epoch:
 * the same batches as one continuous run. After each eviction the fraction of the dataset's pages
 * still resident is checked with mincore and reported, so a filesystem that ignores the advice is
 * noticed instead of passing for cold.
 *
 * Later subcommands (train, compare) plug into the command table in main().
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dataset.h"
#include "geometry.h"
#include "image.h"
#include "inputs.h"
#include "manifest.h"
#include "shardread.h"

#include <xxhash.h>

#define SB_EXIT_OK 0
#define SB_EXIT_FAIL 1
#define SB_EXIT_USAGE 2

#define SB_PAGE 4096u
#define SB_MAX_FILE ((size_t)1 << 30)   /* input files larger than this are refused, as in build */
#define SB_QUASI_BLOCK 1024u            /* folder quasi order: files per stand-in "shard" */
#define SB_QUASI_WINDOW 4u              /* blocks shuffled together, as the reader's default */
#define SB_MAX_DEPTH 64                 /* eviction walk: deeper trees are not datasets */

static const char usage_main[] =
    "usage: shardbench COMMAND [options]\n"
    "\n"
    "commands:\n"
    "  read DATASET... [options]   images/s, MB/s and CPU-seconds per image of each DATASET:\n"
    "                              shardc datasets through libshardread, image folders through\n"
    "                              the decode path they replace\n"
    "\n"
    "  shardbench COMMAND --help for a command's options; shardbench --version\n";

static const char usage_read[] =
    "usage: shardbench read DATASET... [options]\n"
    "\n"
    "A DATASET holding manifest.json is a shardc dataset, read through libshardread. Any other\n"
    "directory is an image folder (class folders of JPEG/PNG/BMP): every file is decoded with the\n"
    "same codecs as shardc (shrink-on-load, resize + center crop to --size) into batch buffers,\n"
    "the training-time work that shards remove.\n"
    "\n"
    "  -j, --threads N     worker threads: reader workers, or decoding threads (default: all cores)\n"
    "  -b, --batch B       samples per batch (default 256)\n"
    "      --order ORDER   seq, random or quasi (default seq); random shuffles every epoch from\n"
    "                      --seed; a folder's quasi order shuffles blocks of 1024 files, 4 at a time\n"
    "      --seed S        seed of the random orders (default 0)\n"
    "  -e, --epochs E      epochs per dataset (default 2); with E > 1 the figures are the steady\n"
    "                      state, epochs 2..E, and --json also reports the first epoch\n"
    "      --cold          evict the dataset's files from the page cache (posix_fadvise DONTNEED)\n"
    "                      before every epoch, so every epoch is cold; the reader is reopened at\n"
    "                      each epoch since mapped pages cannot be evicted\n"
    "      --size WxH      output size: shardc datasets are center-cropped / padded to it by the\n"
    "                      reader; folders are resized and center-cropped to it (default: the size\n"
    "                      of the first shardc dataset given, else 224x224)\n"
    "      --access MODE   how the reader reads shards: mmap, pread or direct (default mmap)\n"
    "      --checksum      JSON: an XXH3 digest of the batches delivered (indices, labels, pixels),\n"
    "                      equal across thread counts, access paths and lossless formats\n"
    "      --memcpy        also measure plain mmap + memcpy of every shardc dataset's sample bytes,\n"
    "                      same order, threads and batch size: the physical limit (row \"memcpy\")\n"
    "      --json          one JSON object per row on stdout instead of the table\n"
    "\n"
    "exit status: 0 success, 1 a dataset could not be opened or read, 2 usage error\n";

/* ---- small helpers ---- */

/* The message, then the usage's first line and where the rest is. */
static int usage_error(const char *usage, const char *fmt, const char *arg)
{
    fprintf(stderr, "shardbench: ");
    fprintf(stderr, fmt, arg);
    const char *eol = strchr(usage, '\n');
    int len = eol ? (int)(eol - usage) : (int)strlen(usage);
    fprintf(stderr, "\n%.*s\n(--help for the options)\n", len, usage);
    return SB_EXIT_USAGE;
}

static int wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return 1;
    return 0;
}

/* Unsigned decimal in [min, max], overflow-checked. 0 on success, -1 on error. */
static int parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    if (!s || *s < '0' || *s > '9')
        return -1;
    uint64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return -1;
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    if (v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

/* "WxH", both 1..65535. */
static int parse_wxh(const char *s, uint32_t *w, uint32_t *h)
{
    const char *x = strchr(s, 'x');
    if (!x)
        x = strchr(s, 'X');
    if (!x || x == s || !x[1])
        return -1;
    char wbuf[16];
    size_t wl = (size_t)(x - s);
    if (wl >= sizeof wbuf)
        return -1;
    memcpy(wbuf, s, wl);
    wbuf[wl] = '\0';
    uint64_t a, b;
    if (parse_uint(wbuf, 1, 65535, &a) || parse_uint(x + 1, 1, 65535, &b))
        return -1;
    *w = (uint32_t)a;
    *h = (uint32_t)b;
    return 0;
}

static const char *order_name(shr_order o)
{
    return o == SHR_ORDER_RANDOM ? "random" : o == SHR_ORDER_QUASI ? "quasi" : "seq";
}

static const char *access_name(shr_access a)
{
    return a == SHR_ACCESS_PREAD ? "pread" : a == SHR_ACCESS_DIRECT ? "direct" : "mmap";
}

static void print_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

/* Read one byte per page and the last byte: the batch is really delivered, at negligible cost. */
static uint64_t touch(const uint8_t *p, size_t len)
{
    uint64_t s = 0;
    for (size_t i = 0; i < len; i += SB_PAGE)
        s += p[i];
    if (len)
        s += p[len - 1];
    return s;
}

/* splitmix64: the folder orders' PRNG (the reader has its own; the folder baseline only needs
 * a seeded, per-epoch shuffle) */
static uint64_t mix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void shuffle(size_t *a, size_t n, uint64_t *state)
{
    for (size_t i = n; i > 1; i--) {
        /* modulo bias is irrelevant for a benchmark's order */
        size_t j = (size_t)(mix64(state) % i);
        size_t t = a[i - 1];
        a[i - 1] = a[j];
        a[j] = t;
    }
}

/* ---- measurement ---- */

typedef struct {
    double wall, cpu;           /* seconds: monotonic clock; user + system of the whole process */
} sb_mark;

typedef struct {
    double wall_s, cpu_s;
    uint64_t images, bytes;     /* images delivered and their pixel bytes */
} sb_span;

static sb_mark mark_now(void)
{
    sb_mark m;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    m.wall = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    m.cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
            (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
    return m;
}

static void span_close(sb_span *s, sb_mark from, sb_mark to)
{
    s->wall_s += to.wall - from.wall;
    s->cpu_s += to.cpu - from.cpu;
}

typedef enum { SB_SHARDS, SB_FOLDER } sb_kind;

typedef struct {
    uint32_t threads, batch, epochs;
    shr_order order;
    shr_access access;
    uint64_t seed;
    uint32_t width, height, channels;   /* folder output; for shardc datasets only with --size */
    int have_size;
    int cold, memcpy_baseline, json;
    int checksum;               /* digest the delivered batches (indices, labels, pixels) */
} sb_read_opts;

/* One row of the report. */
typedef struct {
    const char *dataset;
    char format[32];            /* "raw" (the manifest's backend), "folder", "memcpy" */
    uint32_t width, height, channels;
    uint32_t epochs;
    sb_span *spans;             /* one per epoch */
    uint64_t errors;            /* folder files that failed to decode (skipped) */
    double resident;            /* --cold: largest fraction of pages found cached after eviction */
    XXH3_state_t *digest;       /* --checksum: over the batch stream, in delivery order */
    uint64_t checksum;
} sb_row;

static int row_init(sb_row *row, const char *dataset, const char *format, uint32_t epochs)
{
    memset(row, 0, sizeof *row);
    row->dataset = dataset;
    snprintf(row->format, sizeof row->format, "%s", format);
    row->epochs = epochs;
    row->spans = calloc(epochs, sizeof *row->spans);
    return row->spans ? 0 : ENOMEM;
}

static void row_free(sb_row *row)
{
    free(row->spans);
    row->spans = NULL;
    XXH3_freeState(row->digest);
    row->digest = NULL;
}

/* The measured span (steady state: epochs 2..E; or the only epoch) and all epochs together. */
static sb_span row_measured(const sb_row *row)
{
    if (row->epochs == 1)
        return row->spans[0];
    sb_span s = {0};
    for (uint32_t e = 1; e < row->epochs; e++) {
        s.wall_s += row->spans[e].wall_s;
        s.cpu_s += row->spans[e].cpu_s;
        s.images += row->spans[e].images;
        s.bytes += row->spans[e].bytes;
    }
    return s;
}

static uint64_t row_images(const sb_row *row)
{
    uint64_t n = 0;
    for (uint32_t e = 0; e < row->epochs; e++)
        n += row->spans[e].images;
    return n;
}

static double rate(double x, double s)
{
    return s > 0 ? x / s : 0;
}

/* ---- page cache eviction ---- */

/* Evict one file and count its pages still resident afterwards (mincore on a fresh mapping,
 * which faults nothing in). Errors are ignored: an unreadable file is not part of the run. */
static void evict_file(const char *path, uint64_t *resident, uint64_t *total)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0)
        goto leave;
    /* dirty or writeback pages are skipped by DONTNEED: a freshly written dataset must be
     * written back first or it would stay cached */
    fdatasync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    size_t len = (size_t)st.st_size;
    size_t pages = (len + SB_PAGE - 1) / SB_PAGE;
    void *map = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
    unsigned char *vec = malloc(pages);
    if (map != MAP_FAILED && vec && mincore(map, len, vec) == 0) {
        for (size_t i = 0; i < pages; i++)
            *resident += vec[i] & 1;
        *total += pages;
    }
    free(vec);
    if (map != MAP_FAILED)
        munmap(map, len);
leave:
    close(fd);
}

static void evict_tree(const char *path, int depth, uint64_t *resident, uint64_t *total)
{
    struct stat st;
    if (depth > SB_MAX_DEPTH || lstat(path, &st) != 0)
        return;
    if (S_ISREG(st.st_mode)) {
        evict_file(path, resident, total);
        return;
    }
    if (!S_ISDIR(st.st_mode))
        return;
    DIR *d = opendir(path);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char *sub;
        if (asprintf(&sub, "%s/%s", path, de->d_name) < 0)
            break;
        evict_tree(sub, depth + 1, resident, total);
        free(sub);
    }
    closedir(d);
}

/* Evict every regular file under dir; record the fraction still resident in row->resident. */
static void evict_dataset(const char *dir, sb_row *row)
{
    uint64_t resident = 0, total = 0;
    evict_tree(dir, 0, &resident, &total);
    double f = total ? (double)resident / (double)total : 0;
    if (f > row->resident)
        row->resident = f;
}

/* ---- shardc datasets through libshardread ---- */

/* The dataset order the reader delivered, per epoch, for the memcpy baseline to replay. */
typedef struct {
    uint64_t per_epoch;         /* shr_samples_per_epoch */
    uint64_t *idx;              /* epochs * per_epoch indices */
    uint64_t *count;            /* per epoch: how many were recorded */
} sb_trace;

static void trace_free(sb_trace *t)
{
    free(t->idx);
    free(t->count);
    memset(t, 0, sizeof *t);
}

static int trace_alloc(sb_trace *t, uint64_t per_epoch, uint32_t epochs)
{
    if (t->idx)
        return 0;
    t->per_epoch = per_epoch;
    if (per_epoch > SIZE_MAX / sizeof *t->idx / epochs)
        return ENOMEM;
    t->idx = malloc((size_t)(per_epoch * epochs) * sizeof *t->idx);
    t->count = calloc(epochs, sizeof *t->count);
    return t->idx && t->count ? 0 : ENOMEM;
}

static void trace_add(sb_trace *t, uint64_t epoch, const shr_batch *b)
{
    uint64_t *c = &t->count[epoch];
    for (uint32_t i = 0; i < b->n && *c < t->per_epoch; i++)
        t->idx[epoch * t->per_epoch + (*c)++] = (uint64_t)b->indices[i];
}

static void reader_options(const sb_read_opts *ro, uint64_t epoch, shr_options *o)
{
    shr_options_init(o);
    o->batch_size = ro->batch;
    o->order = ro->order;
    o->seed = ro->seed;
    o->threads = ro->threads;
    o->access = ro->access;
    if (ro->have_size) {
        o->width = ro->width;
        o->height = ro->height;
    }
    o->epoch = epoch;
}

/* Consume epochs [first, first + count) of an open reader into row->spans; the first epoch's
 * clock started at `start` (before shr_open). Returns 0 or the error of shr_next (printed). */
static int consume(shr_reader *r, const char *dir, uint32_t first, uint32_t count, sb_mark start,
                   sb_row *row, sb_trace *trace)
{
    volatile uint64_t sink = 0;
    sb_mark from = start;
    for (uint32_t e = first; e < first + count; e++) {
        const shr_batch *b;
        int rc;
        while ((rc = shr_next(r, &b)) == 0) {
            size_t bytes = (size_t)b->n * b->height * b->width * b->channels;
            sink += touch(b->data, bytes) + (uint64_t)b->labels[0];
            if (row->digest) {
                XXH3_64bits_update(row->digest, b->indices, b->n * sizeof *b->indices);
                XXH3_64bits_update(row->digest, b->labels, b->n * sizeof *b->labels);
                XXH3_64bits_update(row->digest, b->data, bytes);
            }
            row->spans[e].images += b->n;
            row->spans[e].bytes += bytes;
            if (trace)
                trace_add(trace, e, b);
            row->width = b->width;
            row->height = b->height;
            row->channels = b->channels;
            shr_release(r, b);
        }
        if (rc != SHR_EEND) {
            fprintf(stderr, "shardbench: cannot read %s: %s\n", dir, shr_last_error(r));
            return rc;
        }
        sb_mark to = mark_now();
        span_close(&row->spans[e], from, to);
        from = to;
    }
    (void)sink;
    return 0;
}

/* The reason in a library message: its message may already say "cannot open ... DIR: reason",
 * and ours names DIR itself. */
static const char *open_reason(const char *msg, const char *dir, int rc)
{
    if (!msg || !*msg)
        return shr_strerror(rc);
    if (strncmp(msg, "cannot open", 11) == 0) {
        const char *at = strstr(msg, dir);
        size_t dl = strlen(dir);
        if (at && strncmp(at + dl, ": ", 2) == 0 && at[dl + 2])
            return at + dl + 2;
    }
    return msg;
}

static int open_reader(shr_reader **r, const char *dir, const sb_read_opts *ro, uint64_t epoch)
{
    shr_options o;
    reader_options(ro, epoch, &o);
    int rc = shr_open(r, dir, &o);
    if (rc)
        fprintf(stderr, "shardbench: cannot open %s: %s\n", dir,
                open_reason(shr_last_error(NULL), dir, rc));
    return rc;
}

/* Run the reader over E epochs. Warm: one reader across all epochs (prefetch crosses epoch
 * boundaries, as in training). Cold: evict, open at epoch e, read it, close, for every e. */
static int run_reader(const char *dir, const sb_read_opts *ro, sb_row *row, sb_trace *trace)
{
    shr_reader *r = NULL;
    int rc = 0;
    if (ro->checksum && !row->digest) {
        if (!(row->digest = XXH3_createState()))
            return ENOMEM;
        XXH3_64bits_reset(row->digest);
    }
    for (uint32_t e = 0; e < ro->epochs; e++) {
        if (ro->cold || e == 0) {
            if (ro->cold)
                evict_dataset(dir, row);
            sb_mark start = mark_now();
            rc = open_reader(&r, dir, ro, e);
            if (rc)
                goto leave;
            if (trace && (rc = trace_alloc(trace, shr_samples_per_epoch(r), ro->epochs)) != 0) {
                fprintf(stderr, "shardbench: %s: %s\n", dir, strerror(rc));
                goto leave;
            }
            rc = consume(r, dir, e, ro->cold ? 1 : ro->epochs, start, row, trace);
            if (rc)
                goto leave;
            shr_close(r);
            r = NULL;
            if (!ro->cold)
                break;
        }
    }
leave:
    shr_close(r);
    return rc;
}

/* ---- baselines: a pool of threads claiming batches ---- */

typedef struct sb_job sb_job;
typedef int (*sb_fill_fn)(sb_job *job, size_t worker, size_t item, uint8_t *dst, fmt_msg *msg);

struct sb_job {
    size_t n;                   /* items this epoch */
    uint32_t batch;
    size_t slot;                /* bytes per sample in a batch buffer */
    sb_fill_fn fill;
    atomic_size_t next_batch;
    atomic_uint_fast64_t images, bytes, errors;
    pthread_mutex_t mu;         /* guards first_error */
    char first_error[512];
    /* folder */
    const fmt_inputs *in;
    const size_t *order;
    const fmt_geom *geom;
    uint32_t channels;
    fmt_resizer **rz;           /* one per worker */
    /* memcpy */
    const fmt_dataset *ds;
    const uint64_t *idx;
};

typedef struct sb_pool sb_pool;

typedef struct {
    sb_pool *pool;
    size_t id;
    uint8_t *buf;               /* batch * slot bytes */
    uint64_t sink;
    pthread_t tid;
} sb_worker;

/* Threads that live for a whole run, as the reader's workers do, so that thread start-up is not
 * charged to every epoch: the main thread publishes an epoch by bumping `generation` and waits
 * until `busy` drops to zero. */
struct sb_pool {
    sb_job *job;
    sb_worker *ws;
    uint32_t started;
    pthread_mutex_t mu;
    pthread_cond_t go, idle;
    uint64_t generation;
    uint32_t busy;
    int quit;
};

static void run_batches(sb_worker *w, sb_job *job)
{
    for (;;) {
        size_t b = atomic_fetch_add(&job->next_batch, 1);
        size_t lo = b * job->batch;
        if (lo >= job->n)
            break;
        size_t hi = lo + job->batch < job->n ? lo + job->batch : job->n;
        size_t filled = 0;
        uint64_t bytes = 0;
        for (size_t k = lo; k < hi; k++) {
            fmt_msg msg = {{0}};
            int rc = job->fill(job, w->id, k, w->buf + filled * job->slot, &msg);
            if (rc) {
                atomic_fetch_add(&job->errors, 1);
                pthread_mutex_lock(&job->mu);
                if (!job->first_error[0])
                    snprintf(job->first_error, sizeof job->first_error, "%s: %s",
                             job->in ? job->in->items[job->order[k]].path : "sample",
                             fmt_reason(&msg, rc));
                pthread_mutex_unlock(&job->mu);
                continue;
            }
            filled++;
            bytes += job->slot;
        }
        w->sink += touch(w->buf, filled * job->slot);
        atomic_fetch_add(&job->images, filled);
        atomic_fetch_add(&job->bytes, bytes);
    }
}

static void *pool_main(void *arg)
{
    sb_worker *w = arg;
    sb_pool *p = w->pool;
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (p->generation == seen && !p->quit)
            pthread_cond_wait(&p->go, &p->mu);
        if (p->quit)
            break;
        seen = p->generation;
        pthread_mutex_unlock(&p->mu);
        run_batches(w, p->job);
        pthread_mutex_lock(&p->mu);
        if (--p->busy == 0)
            pthread_cond_signal(&p->idle);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static void pool_stop(sb_pool *p)
{
    if (!p->ws)
        return;
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    for (uint32_t i = 0; i < p->started; i++)
        pthread_join(p->ws[i].tid, NULL);
    for (uint32_t i = 0; i < p->started; i++)
        free(p->ws[i].buf);
    free(p->ws);
    p->ws = NULL;
    pthread_cond_destroy(&p->idle);
    pthread_cond_destroy(&p->go);
    pthread_mutex_destroy(&p->mu);
}

/* Start `threads` workers for job, each with a batch buffer (faulted in now, before any clock
 * runs). Returns 0, ENOMEM, or the error of pthread_create: a run with fewer threads than asked
 * would be mislabelled, so that is a failure too (and everything is undone). */
static int pool_start(sb_pool *p, sb_job *job, uint32_t threads)
{
    memset(p, 0, sizeof *p);
    p->job = job;
    size_t len = ((size_t)job->batch * job->slot + SB_PAGE - 1) / SB_PAGE * SB_PAGE;
    p->ws = calloc(threads, sizeof *p->ws);
    if (!p->ws)
        return ENOMEM;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->go, NULL);
    pthread_cond_init(&p->idle, NULL);
    int rc = 0;
    for (; p->started < threads; p->started++) {
        sb_worker *w = &p->ws[p->started];
        w->pool = p;
        w->id = p->started;
        if (len) {
            w->buf = aligned_alloc(SB_PAGE, len);
            if (!w->buf) {
                rc = ENOMEM;
                break;
            }
            memset(w->buf, 0, len);
        }
        rc = pthread_create(&w->tid, NULL, pool_main, w);
        if (rc) {
            free(w->buf);
            break;
        }
    }
    if (rc)
        pool_stop(p);
    return rc;
}

/* Run one epoch of the job (its n and inputs set by the caller) and add what was delivered to
 * span. */
static void pool_epoch(sb_pool *p, sb_span *span)
{
    sb_job *job = p->job;
    atomic_store(&job->next_batch, 0);
    atomic_store(&job->images, 0);
    atomic_store(&job->bytes, 0);
    pthread_mutex_lock(&p->mu);
    p->busy = p->started;
    p->generation++;
    pthread_cond_broadcast(&p->go);
    while (p->busy)
        pthread_cond_wait(&p->idle, &p->mu);
    pthread_mutex_unlock(&p->mu);
    span->images += atomic_load(&job->images);
    span->bytes += atomic_load(&job->bytes);
}

/* ---- memcpy baseline ---- */

static int fill_memcpy(sb_job *job, size_t worker, size_t item, uint8_t *dst, fmt_msg *msg)
{
    fmt_sample s;
    int rc = fmt_dataset_get(job->ds, job->idx[item], &s);
    if (rc)
        return fmt_fail(msg, rc, "sample %" PRIu64 ": no such sample", job->idx[item]);
    if (!s.pixels)
        return fmt_fail(msg, FMT_EUNSUPPORTED, "the %s backend does not map its pixels: no "
                        "mmap+memcpy baseline", fmt_dataset_backend(job->ds));
    /* variable-size samples: the reader crops them into slot-sized places; copy as much */
    memcpy(dst, s.pixels, s.length < job->slot ? (size_t)s.length : job->slot);
    return 0;
}

static int open_dataset(fmt_dataset **ds, const char *dir)
{
    fmt_msg msg = {{0}};
    int rc = fmt_dataset_open(ds, dir, &msg);
    if (rc)
        fprintf(stderr, "shardbench: cannot open %s: %s\n", dir, fmt_reason(&msg, rc));
    return rc;
}

static int run_memcpy(const char *dir, const sb_read_opts *ro, const sb_trace *trace,
                      size_t slot, sb_row *row)
{
    sb_job job = {.batch = ro->batch, .slot = slot, .fill = fill_memcpy};
    pthread_mutex_init(&job.mu, NULL);
    fmt_dataset *ds = NULL;
    sb_pool pool;
    int rc = pool_start(&pool, &job, ro->threads);
    if (rc) {
        fprintf(stderr, "shardbench: cannot start %u threads: %s\n", ro->threads, strerror(rc));
        goto leave;
    }
    for (uint32_t e = 0; e < ro->epochs; e++) {
        if (ro->cold) {
            fmt_dataset_close(ds);
            ds = NULL;
            evict_dataset(dir, row);
        }
        sb_mark from = mark_now();
        if (!ds && (rc = open_dataset(&ds, dir)) != 0)
            goto leave;
        job.ds = ds;
        job.idx = trace->idx + (size_t)e * trace->per_epoch;
        job.n = (size_t)trace->count[e];
        pool_epoch(&pool, &row->spans[e]);
        span_close(&row->spans[e], from, mark_now());
    }
    row->errors = atomic_load(&job.errors);
    if (row->errors)
        fprintf(stderr, "shardbench: %s: %" PRIu64 " samples could not be copied (first: %s)\n",
                dir, row->errors, job.first_error);
leave:
    pool_stop(&pool);
    fmt_dataset_close(ds);
    pthread_mutex_destroy(&job.mu);
    return rc;
}

/* ---- image folders: the decode path ---- */

static int is_identity(const fmt_geom_plan *p, const fmt_image *src)
{
    return p->out_w == src->width && p->out_h == src->height && p->src_x == 0 && p->src_y == 0 &&
           p->src_w == src->width && p->src_h == src->height && p->dst_w == p->out_w &&
           p->dst_h == p->out_h;
}

/* What shardc build does per input, minus hashing and writing: read, probe, decode with the
 * shrink-on-load hint, plan on the decoded size, resize (unless it is already the output). */
static int fill_decode(sb_job *job, size_t worker, size_t item, uint8_t *dst, fmt_msg *msg)
{
    const char *path = job->in->items[job->order[item]].path;
    uint8_t *buf = NULL;
    size_t len = 0;
    fmt_image dec = {0}, out = {0};
    int rc = fmt_read_file(path, SB_MAX_FILE, &buf, &len);
    if (rc)
        goto leave;
    fmt_image_info info;
    rc = fmt_image_probe(buf, len, &info, msg);
    if (rc)
        goto leave;
    fmt_decode_opts dopt = {.channels = job->channels};
    fmt_geom_min_decode(job->geom, info.width, info.height, &dopt.min_width, &dopt.min_height);
    rc = fmt_image_decode(buf, len, &dopt, &dec, msg);
    if (rc)
        goto leave;
    fmt_geom_plan plan;
    rc = fmt_geom_plan_decoded(job->geom, info.width, info.height, dec.width, dec.height, &plan);
    if (rc)
        goto leave;
    const fmt_image *img = &dec;
    if (!is_identity(&plan, &dec)) {
        rc = fmt_resize(job->rz[worker], &dec, &plan, &out, msg);
        if (rc)
            goto leave;
        img = &out;
    }
    size_t n = (size_t)img->width * img->height * img->channels;
    if (n != job->slot) {
        rc = fmt_fail(msg, FMT_EINVAL, "decoded to %ux%ux%u, expected %zu bytes", img->width,
                      img->height, img->channels, job->slot);
        goto leave;
    }
    memcpy(dst, img->pixels, n);
leave:
    fmt_image_free(&out);
    fmt_image_free(&dec);
    free(buf);
    return rc;
}

/* This epoch's file order. seq: as listed (class folders sorted, files by path). random: a fresh
 * shuffle from (seed, epoch). quasi: blocks of SB_QUASI_BLOCK files stand in for shards: the
 * blocks are shuffled, then files are shuffled within windows of SB_QUASI_WINDOW blocks. */
static void folder_order(size_t *order, size_t n, shr_order kind, uint64_t seed, uint64_t epoch)
{
    for (size_t i = 0; i < n; i++)
        order[i] = i;
    uint64_t state = seed ^ (0xd1b54a32d192ed03ull * (epoch + 1));
    if (kind == SHR_ORDER_RANDOM) {
        shuffle(order, n, &state);
    } else if (kind == SHR_ORDER_QUASI && n > 0) {
        size_t nblocks = (n + SB_QUASI_BLOCK - 1) / SB_QUASI_BLOCK;
        size_t *blocks = malloc(nblocks * sizeof *blocks);
        size_t *tmp = malloc(n * sizeof *tmp);
        if (!blocks || !tmp) {
            /* out of memory for the order: fall back to a plain shuffle, still a valid order */
            free(blocks);
            free(tmp);
            shuffle(order, n, &state);
            return;
        }
        for (size_t i = 0; i < nblocks; i++)
            blocks[i] = i;
        shuffle(blocks, nblocks, &state);
        size_t at = 0;
        for (size_t w = 0; w < nblocks; w += SB_QUASI_WINDOW) {
            size_t start = at;
            for (size_t k = w; k < w + SB_QUASI_WINDOW && k < nblocks; k++) {
                size_t lo = blocks[k] * SB_QUASI_BLOCK;
                size_t hi = lo + SB_QUASI_BLOCK < n ? lo + SB_QUASI_BLOCK : n;
                for (size_t i = lo; i < hi; i++)
                    tmp[at++] = i;
            }
            shuffle(tmp + start, at - start, &state);
        }
        memcpy(order, tmp, n * sizeof *order);
        free(blocks);
        free(tmp);
    }
}

static int run_folder(char *dir, const sb_read_opts *ro, sb_row *row)
{
    fmt_inputs in;
    char err[512] = "";
    fmt_geom geom = {.mode = FMT_GEOM_SIZE, .fit = FMT_FIT_CROP, .width = ro->width,
                     .height = ro->height};
    sb_job job = {.batch = ro->batch, .fill = fill_decode, .geom = &geom,
                  .channels = ro->channels,
                  .slot = (size_t)ro->width * ro->height * ro->channels};
    pthread_mutex_init(&job.mu, NULL);
    size_t *order = NULL;
    sb_pool pool = {0};
    fmt_resizer **rz = NULL;
    int rc = fmt_inputs_from_dirs(&dir, 1, &in, err, sizeof err);
    if (rc) {
        fprintf(stderr, "shardbench: cannot open %s: %s\n", dir, strerror(rc));
        pthread_mutex_destroy(&job.mu);
        return rc;
    }
    if (in.n == 0) {
        fprintf(stderr, "shardbench: cannot open %s: no manifest.json and no images in class "
                "folders\n", dir);
        rc = ENOENT;
        goto leave;
    }
    order = malloc(in.n * sizeof *order);
    rz = calloc(ro->threads, sizeof *rz);
    rc = order && rz ? 0 : ENOMEM;
    for (uint32_t i = 0; !rc && i < ro->threads; i++)
        rc = fmt_resizer_create(&rz[i]);
    if (rc) {
        fprintf(stderr, "shardbench: %s: %s\n", dir, fmt_strerror(rc));
        goto leave;
    }
    job.in = &in;
    job.order = order;
    job.rz = rz;
    job.n = in.n;
    rc = pool_start(&pool, &job, ro->threads);
    if (rc) {
        fprintf(stderr, "shardbench: cannot start %u threads: %s\n", ro->threads, strerror(rc));
        goto leave;
    }
    row->width = ro->width;
    row->height = ro->height;
    row->channels = ro->channels;
    for (uint32_t e = 0; e < ro->epochs; e++) {
        if (ro->cold)
            evict_dataset(dir, row);
        sb_mark from = mark_now();
        folder_order(order, in.n, ro->order, ro->seed, e);
        pool_epoch(&pool, &row->spans[e]);
        span_close(&row->spans[e], from, mark_now());
    }
    row->errors = atomic_load(&job.errors);
    if (row->errors)
        fprintf(stderr, "shardbench: %s: %" PRIu64 " decodes failed over %u epoch(s) (skipped; "
                "first: %s)\n", dir, row->errors, ro->epochs, job.first_error);
leave:
    pool_stop(&pool);
    for (uint32_t i = 0; rz && i < ro->threads; i++)
        fmt_resizer_free(rz[i]);
    free(rz);
    free(order);
    fmt_inputs_free(&in);
    pthread_mutex_destroy(&job.mu);
    return rc;
}

/* ---- the report ---- */

typedef struct {
    int json;
    int name_width;
    int header_done;
    double first_rate;          /* images/s of the first row, for "vs first" */
    int have_first;
} sb_report;

static void print_span_json(const sb_span *s)
{
    printf("\"images\": %" PRIu64 ", \"wall_s\": %.6f, \"images_per_s\": %.1f, \"mb_per_s\": %.1f, "
           "\"cpu_s_per_image\": %.6g", s->images, s->wall_s, rate((double)s->images, s->wall_s),
           rate((double)s->bytes / 1e6, s->wall_s), rate(s->cpu_s, (double)s->images));
}

static void report_row(sb_report *rep, const sb_read_opts *ro, const sb_row *row)
{
    sb_span m = row_measured(row);
    double ips = rate((double)m.images, m.wall_s);
    if (!rep->have_first) {
        rep->first_rate = ips;
        rep->have_first = 1;
    }
    const char *order = order_name(ro->order);
    char measured[32];
    if (row->epochs > 2)
        snprintf(measured, sizeof measured, "2-%u", row->epochs);
    else if (row->epochs == 2)
        snprintf(measured, sizeof measured, "2");
    else
        snprintf(measured, sizeof measured, "1");
    if (rep->json) {
        printf("{\"dataset\": ");
        print_json_string(stdout, row->dataset);
        printf(", \"format\": \"%s\", \"images\": %" PRIu64 ", \"epochs\": %u, "
               "\"measured_epochs\": \"%s\", \"measured_images\": %" PRIu64 ", \"wall_s\": %.6f, "
               "\"images_per_s\": %.1f, \"mb_per_s\": %.1f, \"cpu_s_per_image\": %.6g, "
               "\"threads\": %u, \"batch\": %u, \"order\": \"%s\", \"seed\": %" PRIu64 ", "
               "\"access\": \"%s\", \"cold\": %s, \"width\": %u, \"height\": %u, "
               "\"channels\": %u, \"errors\": %" PRIu64,
               row->format, row_images(row), row->epochs, measured,
               m.images, m.wall_s, ips, rate((double)m.bytes / 1e6, m.wall_s),
               rate(m.cpu_s, (double)m.images), ro->threads, ro->batch, order, ro->seed,
               strcmp(row->format, "folder") == 0 ? "read" :
               strcmp(row->format, "memcpy") == 0 ? "mmap" : access_name(ro->access),
               ro->cold ? "true" : "false", row->width, row->height, row->channels, row->errors);
        if (ro->cold)
            printf(", \"resident_after_evict\": %.4f", row->resident);
        if (row->digest)
            printf(", \"checksum\": \"%016" PRIx64 "\"", XXH3_64bits_digest(row->digest));
        printf(", \"first_epoch\": {");
        print_span_json(&row->spans[0]);
        printf("}}\n");
        fflush(stdout);
        return;
    }
    if (!rep->header_done) {
        printf("%-*s  %-6s %4s %-6s %-4s %9s %8s %10s %9s %11s %8s\n", rep->name_width, "dataset",
               "format", "thr", "order", "cold", "images", "wall s", "images/s", "MB/s",
               "CPU-s/img", "vs first");
        rep->header_done = 1;
    }
    char ratio[32];
    double r = rep->first_rate > 0 ? ips / rep->first_rate : 0;
    if (r >= 0.1)
        snprintf(ratio, sizeof ratio, "%.2fx", r);
    else if (r > 0)
        snprintf(ratio, sizeof ratio, "1/%.0f", 1 / r); /* e.g. a folder after raw shards */
    else
        snprintf(ratio, sizeof ratio, "-");
    printf("%-*s  %-6s %4u %-6s %-4s %9" PRIu64 " %8.3f %10.1f %9.1f %11.3g %8s\n",
           rep->name_width, row->dataset, row->format, ro->threads, order, ro->cold ? "yes" : "no",
           m.images, m.wall_s, ips, rate((double)m.bytes / 1e6, m.wall_s),
           rate(m.cpu_s, (double)m.images), ratio);
    fflush(stdout);
}

/* ---- read ---- */

enum { OPT_ORDER = 256, OPT_SEED, OPT_COLD, OPT_SIZE, OPT_ACCESS, OPT_MEMCPY, OPT_JSON, OPT_CHECKSUM };

typedef struct {
    char *path;
    sb_kind kind;
} sb_target;

/* Classify every DATASET before anything runs, so a typo fails at once and not after an hour of
 * measuring; pick the default output size from the first shardc dataset's manifest. */
static int classify(sb_target *t, sb_read_opts *ro)
{
    struct stat st;
    if (stat(t->path, &st) != 0) {
        fprintf(stderr, "shardbench: cannot open %s: %s\n", t->path, strerror(errno));
        return SB_EXIT_FAIL;
    }
    if (!S_ISDIR(st.st_mode)) {
        fprintf(stderr, "shardbench: cannot open %s: not a directory\n", t->path);
        return SB_EXIT_FAIL;
    }
    char *mpath;
    if (asprintf(&mpath, "%s/%s", t->path, FMT_MANIFEST_NAME) < 0)
        return SB_EXIT_FAIL;
    t->kind = access(mpath, F_OK) == 0 ? SB_SHARDS : SB_FOLDER;
    free(mpath);
    if (t->kind == SB_SHARDS && !ro->have_size && !ro->width) {
        fmt_manifest m;
        /* unreadable manifests are reported when the reader opens the dataset */
        if (fmt_manifest_read(t->path, &m, NULL) == 0) {
            if (m.sample_width && m.sample_height) {
                ro->width = m.sample_width;
                ro->height = m.sample_height;
                ro->channels = m.channels;
            }
            fmt_manifest_free(&m);
        }
    }
    return 0;
}

static void backend_name(const char *dir, char *out, size_t len)
{
    fmt_manifest m;
    snprintf(out, len, "raw");
    if (fmt_manifest_read(dir, &m, NULL) == 0) {
        snprintf(out, len, "%s", m.backend);
        fmt_manifest_free(&m);
    }
}

/* A filesystem that ignores DONTNEED (some network and overlay filesystems) would make a cold
 * run warm without a sign; say so. */
static void warn_resident(const sb_row *row)
{
    if (row->resident > 0.1)
        fprintf(stderr, "shardbench: warning: %s: %.0f%% of its pages stayed in the page cache "
                "after eviction; the cold figures are partly warm\n", row->dataset,
                row->resident * 100);
}

/* Measure every target in order, printing each row as it is done. A dataset that fails is
 * reported and skipped; the others still run. Returns the exit status. */
static int run_targets(const sb_target *targets, size_t nt, const sb_read_opts *opts)
{
    sb_read_opts ro = *opts;
    int status = SB_EXIT_OK;
    sb_report rep = {.json = ro.json, .name_width = 7};
    for (size_t i = 0; i < nt; i++) {
        int len = (int)strlen(targets[i].path);
        if (len > rep.name_width)
            rep.name_width = len;
    }
    /* ratios printed under the table: each reader row against its own memcpy row */
    double *ratio = calloc(nt, sizeof *ratio);
    if (!ratio) {
        fprintf(stderr, "shardbench: %s\n", strerror(ENOMEM));
        return SB_EXIT_FAIL;
    }
    for (size_t i = 0; i < nt; i++) {
        const sb_target *t = &targets[i];
        sb_row row;
        sb_trace trace = {0};
        if (t->kind == SB_FOLDER) {
            if (row_init(&row, t->path, "folder", ro.epochs) == 0 &&
                run_folder(t->path, &ro, &row) == 0) {
                report_row(&rep, &ro, &row);
                warn_resident(&row);
            } else
                status = SB_EXIT_FAIL;
            row_free(&row);
            continue;
        }
        char backend[32];
        backend_name(t->path, backend, sizeof backend);
        if (row_init(&row, t->path, backend, ro.epochs) != 0 ||
            run_reader(t->path, &ro, &row, ro.memcpy_baseline ? &trace : NULL) != 0) {
            status = SB_EXIT_FAIL;
            row_free(&row);
            trace_free(&trace);
            continue;
        }
        report_row(&rep, &ro, &row);
        warn_resident(&row);
        if (ro.memcpy_baseline) {
            sb_row mrow;
            size_t slot = (size_t)row.width * row.height * row.channels;
            if (row_init(&mrow, t->path, "memcpy", ro.epochs) == 0 &&
                run_memcpy(t->path, &ro, &trace, slot, &mrow) == 0) {
                mrow.width = row.width;
                mrow.height = row.height;
                mrow.channels = row.channels;
                report_row(&rep, &ro, &mrow);
                warn_resident(&mrow);
                sb_span a = row_measured(&row), b = row_measured(&mrow);
                double mr = rate((double)b.images, b.wall_s);
                ratio[i] = mr > 0 ? rate((double)a.images, a.wall_s) / mr : 0;
            } else {
                status = SB_EXIT_FAIL;
            }
            row_free(&mrow);
        }
        row_free(&row);
        trace_free(&trace);
    }
    if (!ro.json && rep.header_done) {
        if (ro.epochs > 2)
            printf("\nsteady state: epochs 2-%u of %u", ro.epochs, ro.epochs);
        else if (ro.epochs == 2)
            printf("\nsteady state: epoch 2 of 2");
        else
            printf("\none epoch");
        if (ro.cold)
            printf(" (each cold, reader opening included)");
        else if (ro.epochs > 1)
            printf(" (the first, which includes opening, is in --json)");
        else
            printf(" (opening included)");
        printf("; %u thread(s), batch %u, order %s, output %ux%u for folders%s\n", ro.threads,
               ro.batch, order_name(ro.order), ro.width, ro.height,
               ro.cold ? "; cold: files evicted before every epoch" : "");
        for (size_t i = 0; i < nt; i++)
            if (ratio[i] > 0)
                printf("%s: reader / memcpy = %.2fx\n", targets[i].path, ratio[i]);
    }
    free(ratio);
    return status;
}

static int cmd_read(int argc, char **argv)
{
    static const struct option opts[] = {
        {"threads", required_argument, 0, 'j'}, {"batch", required_argument, 0, 'b'},
        {"epochs", required_argument, 0, 'e'},  {"order", required_argument, 0, OPT_ORDER},
        {"seed", required_argument, 0, OPT_SEED}, {"cold", no_argument, 0, OPT_COLD},
        {"size", required_argument, 0, OPT_SIZE}, {"access", required_argument, 0, OPT_ACCESS},
        {"memcpy", no_argument, 0, OPT_MEMCPY}, {"json", no_argument, 0, OPT_JSON},
        {"checksum", no_argument, 0, OPT_CHECKSUM}, {0, 0, 0, 0}};
    long nproc = sysconf(_SC_NPROCESSORS_ONLN);
    sb_read_opts ro = {
        .threads = nproc > 0 ? (uint32_t)nproc : 1,
        .batch = 256,
        .epochs = 2,
        .order = SHR_ORDER_SEQUENTIAL,
        .access = SHR_ACCESS_MMAP,
        .channels = 3,
    };
    uint64_t v;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":j:b:e:", opts, NULL)) != -1) {
        switch (c) {
        case 'j':
            if (parse_uint(optarg, 1, 1024, &v))
                return usage_error(usage_read, "bad --threads '%s' (1..1024)", optarg);
            ro.threads = (uint32_t)v;
            break;
        case 'b':
            if (parse_uint(optarg, 1, 1u << 20, &v))
                return usage_error(usage_read, "bad --batch '%s' (1..1048576)", optarg);
            ro.batch = (uint32_t)v;
            break;
        case 'e':
            if (parse_uint(optarg, 1, 1000000, &v))
                return usage_error(usage_read, "bad --epochs '%s' (1..1000000)", optarg);
            ro.epochs = (uint32_t)v;
            break;
        case OPT_ORDER:
            if (strcmp(optarg, "seq") == 0 || strcmp(optarg, "sequential") == 0)
                ro.order = SHR_ORDER_SEQUENTIAL;
            else if (strcmp(optarg, "random") == 0)
                ro.order = SHR_ORDER_RANDOM;
            else if (strcmp(optarg, "quasi") == 0)
                ro.order = SHR_ORDER_QUASI;
            else
                return usage_error(usage_read, "bad --order '%s' (seq, random or quasi)", optarg);
            break;
        case OPT_SEED:
            if (parse_uint(optarg, 0, UINT64_MAX, &ro.seed))
                return usage_error(usage_read, "bad --seed '%s'", optarg);
            break;
        case OPT_COLD: ro.cold = 1; break;
        case OPT_SIZE:
            if (parse_wxh(optarg, &ro.width, &ro.height))
                return usage_error(usage_read, "bad --size '%s' (expected WxH, e.g. 224x224)",
                                   optarg);
            ro.have_size = 1;
            break;
        case OPT_ACCESS:
            if (strcmp(optarg, "mmap") == 0)
                ro.access = SHR_ACCESS_MMAP;
            else if (strcmp(optarg, "pread") == 0)
                ro.access = SHR_ACCESS_PREAD;
            else if (strcmp(optarg, "direct") == 0)
                ro.access = SHR_ACCESS_DIRECT;
            else
                return usage_error(usage_read, "bad --access '%s' (mmap, pread or direct)",
                                   optarg);
            break;
        case OPT_MEMCPY: ro.memcpy_baseline = 1; break;
        case OPT_CHECKSUM: ro.checksum = 1; break;
        case OPT_JSON: ro.json = 1; break;
        case ':':
            return usage_error(usage_read, "option '%s' needs a value", argv[optind - 1]);
        default:
            return usage_error(usage_read, "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind >= argc)
        return usage_error(usage_read, "%s", "no DATASET given");
    size_t nt = (size_t)(argc - optind);
    sb_target *targets = calloc(nt, sizeof *targets);
    if (!targets) {
        fprintf(stderr, "shardbench: %s\n", strerror(ENOMEM));
        return SB_EXIT_FAIL;
    }
    int status = SB_EXIT_OK;
    for (size_t i = 0; i < nt && status == SB_EXIT_OK; i++) {
        targets[i].path = argv[optind + (int)i];
        status = classify(&targets[i], &ro);
    }
    if (status == SB_EXIT_OK) {
        if (!ro.width) {
            ro.width = 224;
            ro.height = 224;
        }
        status = run_targets(targets, nt, &ro);
    }
    free(targets);
    return status;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage_main, stderr);
        return SB_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        fputs(usage_main, stdout);
        return SB_EXIT_OK;
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
        printf("shardbench %s (libshardread %d.%d)\n", SHARDC_VERSION, SHR_VERSION_MAJOR,
               SHR_VERSION_MINOR);
        return SB_EXIT_OK;
    }
    static const struct {
        const char *name;
        int (*fn)(int, char **);
        const char *usage;
    } cmds[] = {{"read", cmd_read, usage_read}};
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
        if (strcmp(cmd, cmds[i].name) == 0) {
            if (wants_help(argc - 1, argv + 1)) {
                fputs(cmds[i].usage, stdout);
                return SB_EXIT_OK;
            }
            return cmds[i].fn(argc - 1, argv + 1);
        }
    }
    fprintf(stderr, "shardbench: unknown command '%s'\n%s", cmd, usage_main);
    return SB_EXIT_USAGE;
}
