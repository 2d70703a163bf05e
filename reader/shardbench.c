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
 *   shardbench train DATASET [options]
 *
 * The consumer side: batches from libshardread (or, for an image folder, from a ring that decoding
 * threads fill, presented as the same shr_batch) go through shr_step_run (step.h: an emulated step
 * of a given time, or a small model learning) and back with shr_release. Per epoch: wall time,
 * time the consumer waited for batches (input stall), the step's own busy time, loss, accuracy,
 * and the host-to-device rate where the step runs on a GPU.
 *
 *   shardbench compare SRC --work DIR [options]
 *
 * Builds every format from one image folder with the shardc installed next to shardbench, reads
 * each (and the folder itself) exactly as `read` does, and turns the figures into what a training
 * run pays: cores needed to keep a step of a given time fed, CPU-seconds of decoding removed per
 * epoch, and the step's utilisation.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dataset.h"
#include "geometry.h"
#include "image.h"
#include "inputs.h"
#include "manifest.h"
#include "shardread.h"
#include "step.h"

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
    "  train DATASET [options]     a training step fed by the reader (or by decoding a folder):\n"
    "                              images/s, input stall %, step busy %, loss per epoch\n"
    "  compare SRC --work DIR      build every format from the folder SRC, read each and SRC:\n"
    "                              one table of speed, CPU per image, cores needed, decode work\n"
    "                              removed and step utilisation\n"
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

/* --order for every command */
static int parse_order(const char *s, shr_order *o)
{
    if (strcmp(s, "seq") == 0 || strcmp(s, "sequential") == 0)
        *o = SHR_ORDER_SEQUENTIAL;
    else if (strcmp(s, "random") == 0)
        *o = SHR_ORDER_RANDOM;
    else if (strcmp(s, "quasi") == 0)
        *o = SHR_ORDER_QUASI;
    else
        return -1;
    return 0;
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
            if (parse_order(optarg, &ro.order))
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

/* ---- train: the reader feeding a training step ---- */

static const char usage_train[] =
    "usage: shardbench train DATASET [options]\n"
    "\n"
    "Feed a training step from DATASET (shr_next -> step -> shr_release) and measure the input\n"
    "pipeline against the step's demand: images/s, step busy % (the step's working time / wall),\n"
    "input stall % (time the consumer waited for a batch / wall), and, where a model learns, the\n"
    "loss and accuracy per epoch. A DATASET without manifest.json is an image folder: its files are\n"
    "decoded by --threads threads into a ring of batches, the decode path shards remove.\n"
    "\n"
    "  the step (one of):\n"
    "      --step-ms X     an emulated step of X ms per batch (default 11.7 x batch / 256: ResNet-50\n"
    "                      on an A100); on the GPU a kernel spinning X ms, on the CPU a sleep\n"
    "      --model M       train softmax or mlp (2 layers, ReLU) by SGD on pixels box-averaged to\n"
    "                      --side x --side and normalised with the dataset's mean/std\n"
    "      --side N        model input side (default 16)\n"
    "      --hidden N      MLP hidden units (default 128)\n"
    "      --lr X          learning rate (default 0.05)\n"
    "      --device D      auto, cpu or gpu (default auto: the GPU where one is usable)\n"
    "  the reader:\n"
    "  -b, --batch B       samples per batch (default 256)\n"
    "  -j, --threads N     reader workers or decoding threads (default: all cores)\n"
    "      --prefetch D    batches in the ring, 2..65536 (default threads + 2)\n"
    "  -e, --epochs E      epochs (default 2); with E > 1 the summary is the steady state,\n"
    "                      epochs 2..E; every epoch is listed\n"
    "      --order ORDER   seq, random or quasi (default random)\n"
    "      --seed S        seed of the order and of the model's initial weights (default 0)\n"
    "      --size WxH      output size (default: the dataset's; folders 224x224)\n"
    "  output:\n"
    "      --timeline FILE one line per batch: epoch, batch, images, wait ms, step ms, time ms\n"
    "      --json          one JSON object on stdout instead of the table\n"
    "\n"
    "exit status: 0 success, 1 the dataset or the step failed, 2 usage error\n";

/* Folders are normalised with these (a uniform 0..255 distribution's mean and std): there is no
 * manifest to give the real ones, and a pass over the images would cost an epoch. */
#define SB_FOLDER_MEAN 127.5
#define SB_FOLDER_STD 73.6

/* ResNet-50 training on an A100: 11.7 ms per batch of 256. The default step keeps that rate
 * (about 21,900 images/s) whatever the batch size. */
#define SB_DEFAULT_STEP_MS 11.7
#define SB_DEFAULT_STEP_BATCH 256.0

/* Where batches come from: libshardread, or the folder feed below. */
typedef struct {
    int (*next)(void *ctx, const shr_batch **b);
    void (*release)(void *ctx, const shr_batch *b);
    const char *(*last_error)(void *ctx);
    void *ctx;
} sb_source;

static int reader_next(void *ctx, const shr_batch **b)
{
    return shr_next(ctx, b);
}

static void reader_release(void *ctx, const shr_batch *b)
{
    shr_release(ctx, b);
}

static const char *reader_error(void *ctx)
{
    return shr_last_error(ctx);
}

/* The folder feed: the decode path as a batch source with the reader's shape. Worker threads
 * claim the epoch's batches in order and decode each into the ring slot it maps to (batch k into
 * slot k % depth, once the consumer has released that slot's previous batch); the consumer takes
 * them in order. One mutex guards the ring: a claim and a hand-over are rare next to a batch's
 * decoding. An epoch's order is drawn when the consumer starts it, after every batch of the
 * previous one has been delivered, so no worker reads an order while it changes; the price is
 * that prefetch does not cross epoch boundaries (the reader's does). Samples that fail to decode
 * are left out of their batch and counted; a batch left empty is skipped. */

enum { SB_SLOT_FREE = 0, SB_SLOT_FILLING, SB_SLOT_READY, SB_SLOT_HELD };

typedef struct {
    shr_batch b;
    int state;
} sb_slot;

typedef struct sb_feed sb_feed;

typedef struct {
    sb_feed *feed;
    size_t id;
    pthread_t tid;
} sb_feed_worker;

struct sb_feed {
    sb_job job;                 /* fill_decode's context */
    fmt_inputs in;
    int have_inputs;
    fmt_geom geom;
    size_t *order;
    fmt_resizer **rz;
    shr_order kind;
    uint64_t seed;
    sb_slot *slots;
    uint32_t depth;
    sb_feed_worker *ws;
    uint32_t nthreads, started;
    pthread_mutex_t mu;
    pthread_cond_t work, ready;
    uint64_t epoch, nb;         /* the current epoch; batches per epoch */
    uint64_t claim, take;       /* next batch to fill, next to deliver */
    int open;                   /* the epoch's order is drawn: workers may claim */
    int quit;
};

static void feed_fill(sb_feed *f, size_t worker, sb_slot *sl, uint64_t k)
{
    sb_job *job = &f->job;
    size_t lo = (size_t)k * job->batch;
    size_t hi = lo + job->batch < job->n ? lo + job->batch : job->n;
    uint32_t filled = 0;
    for (size_t i = lo; i < hi; i++) {
        fmt_msg msg = {{0}};
        int rc = job->fill(job, worker, i, sl->b.data + filled * job->slot, &msg);
        if (rc) {
            atomic_fetch_add(&job->errors, 1);
            pthread_mutex_lock(&job->mu);
            if (!job->first_error[0])
                snprintf(job->first_error, sizeof job->first_error, "%s: %s",
                         job->in->items[job->order[i]].path, fmt_reason(&msg, rc));
            pthread_mutex_unlock(&job->mu);
            continue;
        }
        size_t item = job->order[i];
        sl->b.labels[filled] = job->in->items[item].label;
        sl->b.indices[filled] = (int64_t)item;
        sl->b.sources[filled] = (int64_t)item;
        filled++;
    }
    sl->b.n = filled;
}

static void *feed_main(void *arg)
{
    sb_feed_worker *w = arg;
    sb_feed *f = w->feed;
    pthread_mutex_lock(&f->mu);
    for (;;) {
        while (!f->quit && !(f->open && f->claim < f->nb &&
                             f->slots[f->claim % f->depth].state == SB_SLOT_FREE))
            pthread_cond_wait(&f->work, &f->mu);
        if (f->quit)
            break;
        uint64_t k = f->claim++;
        sb_slot *sl = &f->slots[k % f->depth];
        sl->state = SB_SLOT_FILLING;
        sl->b.epoch = f->epoch;
        sl->b.number = k;
        pthread_mutex_unlock(&f->mu);
        feed_fill(f, w->id, sl, k);
        pthread_mutex_lock(&f->mu);
        sl->state = SB_SLOT_READY;
        pthread_cond_broadcast(&f->ready);
    }
    pthread_mutex_unlock(&f->mu);
    return NULL;
}

static void feed_close(sb_feed *f)
{
    if (f->ws) {
        pthread_mutex_lock(&f->mu);
        f->quit = 1;
        pthread_cond_broadcast(&f->work);
        pthread_mutex_unlock(&f->mu);
        for (uint32_t i = 0; i < f->started; i++)
            pthread_join(f->ws[i].tid, NULL);
        free(f->ws);
    }
    for (uint32_t i = 0; f->slots && i < f->depth; i++) {
        free(f->slots[i].b.data);
        free(f->slots[i].b.labels);
        free(f->slots[i].b.indices);
        free(f->slots[i].b.sources);
    }
    free(f->slots);
    for (uint32_t i = 0; f->rz && i < f->nthreads; i++)
        fmt_resizer_free(f->rz[i]);
    free(f->rz);
    free(f->order);
    if (f->have_inputs)
        fmt_inputs_free(&f->in);
    pthread_cond_destroy(&f->ready);
    pthread_cond_destroy(&f->work);
    pthread_mutex_destroy(&f->mu);
    pthread_mutex_destroy(&f->job.mu);
    memset(f, 0, sizeof *f);
}

/* Open the folder dir as a batch source: list its images, allocate `depth` slots of `batch`
 * samples of width x height x channels, start `threads` decoders. Prints its errors. */
static int feed_open(sb_feed *f, char *dir, uint32_t batch, uint32_t threads, uint32_t depth,
                     shr_order kind, uint64_t seed, uint32_t width, uint32_t height,
                     uint32_t channels)
{
    memset(f, 0, sizeof *f);
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->work, NULL);
    pthread_cond_init(&f->ready, NULL);
    pthread_mutex_init(&f->job.mu, NULL);
    f->kind = kind;
    f->seed = seed;
    f->depth = depth;
    f->nthreads = threads;
    char err[512] = "";
    int rc = fmt_inputs_from_dirs(&dir, 1, &f->in, err, sizeof err);
    if (rc) {
        fprintf(stderr, "shardbench: cannot open %s: %s\n", dir, strerror(rc));
        return rc;
    }
    f->have_inputs = 1;
    if (f->in.n == 0) {
        fprintf(stderr, "shardbench: cannot open %s: no manifest.json and no images in class "
                "folders\n", dir);
        return ENOENT;
    }
    f->geom = (fmt_geom){.mode = FMT_GEOM_SIZE, .fit = FMT_FIT_CROP, .width = width,
                         .height = height};
    f->job.batch = batch;
    f->job.fill = fill_decode;
    f->job.geom = &f->geom;
    f->job.channels = channels;
    f->job.slot = (size_t)width * height * channels;
    f->job.in = &f->in;
    f->job.n = f->in.n;
    f->nb = (f->in.n + batch - 1) / batch;
    f->order = malloc(f->in.n * sizeof *f->order);
    f->rz = calloc(threads, sizeof *f->rz);
    f->slots = calloc(depth, sizeof *f->slots);
    f->ws = calloc(threads, sizeof *f->ws);
    rc = f->order && f->rz && f->slots && f->ws ? 0 : ENOMEM;
    for (uint32_t i = 0; !rc && i < threads; i++)
        rc = fmt_resizer_create(&f->rz[i]);
    size_t len = ((size_t)batch * f->job.slot + SB_PAGE - 1) / SB_PAGE * SB_PAGE;
    for (uint32_t i = 0; !rc && i < depth; i++) {
        shr_batch *b = &f->slots[i].b;
        b->data = aligned_alloc(SB_PAGE, len);
        b->labels = malloc(batch * sizeof *b->labels);
        b->indices = malloc(batch * sizeof *b->indices);
        b->sources = malloc(batch * sizeof *b->sources);
        if (!b->data || !b->labels || !b->indices || !b->sources)
            rc = ENOMEM;
        else
            memset(b->data, 0, len);    /* faulted in now, before any clock runs */
        b->width = width;
        b->height = height;
        b->channels = channels;
    }
    if (rc) {
        fprintf(stderr, "shardbench: %s: %s\n", dir, strerror(rc));
        return rc;
    }
    f->job.order = f->order;
    f->job.rz = f->rz;
    for (; f->started < threads; f->started++) {
        sb_feed_worker *w = &f->ws[f->started];
        w->feed = f;
        w->id = f->started;
        rc = pthread_create(&w->tid, NULL, feed_main, w);
        if (rc) {
            fprintf(stderr, "shardbench: cannot start %u threads: %s\n", threads, strerror(rc));
            return rc;
        }
    }
    return 0;
}

static int feed_next(void *ctx, const shr_batch **b)
{
    sb_feed *f = ctx;
    *b = NULL;
    pthread_mutex_lock(&f->mu);
    if (!f->open) {
        folder_order(f->order, f->in.n, f->kind, f->seed, f->epoch);
        f->claim = f->take = 0;
        f->open = 1;
        pthread_cond_broadcast(&f->work);
    }
    int rc = 0;
    for (;;) {
        if (f->take == f->nb) {
            f->open = 0;
            f->epoch++;
            rc = SHR_EEND;
            break;
        }
        sb_slot *sl = &f->slots[f->take % f->depth];
        if (sl->state == SB_SLOT_HELD) {
            rc = SHR_EINVAL;    /* the consumer holds every slot: nothing can arrive */
            break;
        }
        while (!(sl->state == SB_SLOT_READY && sl->b.number == f->take))
            pthread_cond_wait(&f->ready, &f->mu);
        f->take++;
        if (sl->b.n == 0) {
            sl->state = SB_SLOT_FREE;
            pthread_cond_broadcast(&f->work);
            continue;
        }
        sl->state = SB_SLOT_HELD;
        *b = &sl->b;
        break;
    }
    pthread_mutex_unlock(&f->mu);
    return rc;
}

static void feed_release(void *ctx, const shr_batch *b)
{
    sb_feed *f = ctx;
    pthread_mutex_lock(&f->mu);
    for (uint32_t i = 0; b && i < f->depth; i++) {
        if (&f->slots[i].b == b && f->slots[i].state == SB_SLOT_HELD) {
            f->slots[i].state = SB_SLOT_FREE;
            pthread_cond_broadcast(&f->work);
        }
    }
    pthread_mutex_unlock(&f->mu);
}

static const char *feed_error(void *ctx)
{
    return "";
}

typedef struct {
    uint32_t threads, batch, epochs, prefetch;
    shr_order order;
    uint64_t seed;
    uint32_t width, height;
    int have_size;
    shr_step_opts step;
    const char *timeline;
    int json;
} sb_train_opts;

typedef struct {
    uint64_t images;
    double wall_s, wait_s, step_s;      /* epoch; inside next; inside the step's run call */
    shr_step_stats st;                  /* busy_s, H2D and the learning counters */
} sb_epoch;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const char *step_name(const shr_step_opts *o)
{
    if (o->kind == SHR_STEP_EMULATED)
        return "emulated";
    return o->model == SHR_MODEL_MLP ? "mlp" : "softmax";
}

/* The epochs: next -> step -> release, timed. Prints its errors. */
static int train_loop(sb_source *src, shr_step *step, const char *dir, const sb_train_opts *to,
                      FILE *timeline, sb_epoch *ep)
{
    double t_start = now_s();
    for (uint32_t e = 0; e < to->epochs; e++) {
        sb_epoch *x = &ep[e];
        double t_epoch = now_s();
        for (;;) {
            const shr_batch *b;
            double t0 = now_s();
            int rc = src->next(src->ctx, &b);
            double t1 = now_s();
            x->wait_s += t1 - t0;
            if (rc == SHR_EEND)
                break;
            if (rc) {
                const char *why = src->last_error(src->ctx);
                fprintf(stderr, "shardbench: cannot read %s: %s\n", dir,
                        why && *why ? why : shr_strerror(rc));
                return rc;
            }
            rc = shr_step_run(step, b);
            double t2 = now_s();
            x->step_s += t2 - t1;
            uint32_t n = b->n;
            uint64_t number = b->number;
            src->release(src->ctx, b);
            if (rc) {
                fprintf(stderr, "shardbench: the training step failed: %s\n", shr_strerror(rc));
                return rc;
            }
            x->images += n;
            if (timeline)
                fprintf(timeline, "%u\t%" PRIu64 "\t%u\t%.4f\t%.4f\t%.4f\n", e, number, n,
                        (t1 - t0) * 1e3, (t2 - t1) * 1e3, (t0 - t_start) * 1e3);
        }
        /* the epoch ends when the device has finished its work, not when it was queued */
        int rc = shr_step_sync(step, &x->st);
        if (rc) {
            fprintf(stderr, "shardbench: the training step failed: %s\n", shr_strerror(rc));
            return rc;
        }
        x->wall_s = now_s() - t_epoch;
    }
    return 0;
}

static void print_json_double(double v, const char *fmt)
{
    if (isfinite(v))
        printf(fmt, v);
    else
        printf("null");
}

static double epoch_loss(const sb_epoch *x)
{
    return x->st.loss_batches ? x->st.loss_sum / (double)x->st.loss_batches : NAN;
}

static double epoch_acc(const sb_epoch *x)
{
    return x->st.seen ? (double)x->st.correct / (double)x->st.seen : NAN;
}

/* The summary over epochs [from, to). */
static sb_epoch epoch_sum(const sb_epoch *ep, uint32_t from, uint32_t to)
{
    sb_epoch s = {0};
    for (uint32_t e = from; e < to; e++) {
        s.images += ep[e].images;
        s.wall_s += ep[e].wall_s;
        s.wait_s += ep[e].wait_s;
        s.step_s += ep[e].step_s;
        s.st.busy_s += ep[e].st.busy_s;
        s.st.h2d_s += ep[e].st.h2d_s;
        s.st.h2d_bytes += ep[e].st.h2d_bytes;
        s.st.on_gpu |= ep[e].st.on_gpu;
    }
    return s;
}

static double pct(double x, double of)
{
    return of > 0 ? 100.0 * x / of : 0;
}

static void train_report(const char *dir, const char *format, const sb_train_opts *to,
                         uint32_t prefetch, const shr_info *info, const sb_epoch *ep,
                         uint64_t errors)
{
    int learns = to->step.kind == SHR_STEP_MODEL;
    uint32_t from = to->epochs > 1 ? 1 : 0;
    sb_epoch m = epoch_sum(ep, from, to->epochs);
    int gpu = m.st.on_gpu;
    double h2d = gpu && m.st.h2d_s > 0 ? (double)m.st.h2d_bytes / m.st.h2d_s / 1e9 : NAN;
    char measured[32];
    if (to->epochs > 2)
        snprintf(measured, sizeof measured, "2-%u", to->epochs);
    else
        snprintf(measured, sizeof measured, "%u", to->epochs);
    if (to->json) {
        printf("{\"dataset\": ");
        print_json_string(stdout, dir);
        printf(", \"format\": \"%s\", \"device\": \"%s\", \"step\": \"%s\", \"step_ms\": ",
               format, gpu ? "gpu" : "cpu", step_name(&to->step));
        if (learns)
            printf("null");
        else
            printf("%.6g", to->step.step_ms);
        printf(", \"batch\": %u, \"threads\": %u, \"prefetch\": %u, \"order\": \"%s\", "
               "\"seed\": %" PRIu64 ", \"epochs\": %u, \"width\": %u, \"height\": %u, "
               "\"channels\": %u, \"classes\": %u, \"errors\": %" PRIu64 ", "
               "\"measured_epochs\": \"%s\", \"measured_images\": %" PRIu64 ", \"wall_s\": %.6f, "
               "\"images_per_s\": %.1f, \"stall_pct\": %.3f, \"busy_pct\": %.3f, "
               "\"h2d_gb_per_s\": ",
               to->batch, to->threads, prefetch, order_name(to->order), to->seed, to->epochs,
               info->width, info->height, info->channels, info->classes, errors, measured,
               m.images, m.wall_s, rate((double)m.images, m.wall_s), pct(m.wait_s, m.wall_s),
               pct(m.st.busy_s, m.wall_s));
        print_json_double(h2d, "%.3f");
        printf(", \"loss\": [");
        for (uint32_t e = 0; learns && e < to->epochs; e++) {
            fputs(e ? ", " : "", stdout);
            print_json_double(epoch_loss(&ep[e]), "%.6f");
        }
        printf("], \"accuracy\": [");
        for (uint32_t e = 0; learns && e < to->epochs; e++) {
            fputs(e ? ", " : "", stdout);
            print_json_double(epoch_acc(&ep[e]), "%.6f");
        }
        printf("], \"per_epoch\": [");
        for (uint32_t e = 0; e < to->epochs; e++) {
            const sb_epoch *x = &ep[e];
            printf("%s{\"epoch\": %u, \"images\": %" PRIu64 ", \"wall_s\": %.6f, "
                   "\"images_per_s\": %.1f, \"stall_pct\": %.3f, \"busy_pct\": %.3f, "
                   "\"step_call_s\": %.6f}", e ? ", " : "", e, x->images, x->wall_s,
                   rate((double)x->images, x->wall_s), pct(x->wait_s, x->wall_s),
                   pct(x->st.busy_s, x->wall_s), x->step_s);
        }
        printf("]}\n");
        fflush(stdout);
        return;
    }
    printf("%s (%s): %ux%ux%u, %u classes; step %s", dir, format, info->width, info->height,
           info->channels, info->classes, step_name(&to->step));
    if (!learns)
        printf(" %.3g ms", to->step.step_ms);
    printf(" on the %s; batch %u, %u thread(s), prefetch %u, order %s\n", gpu ? "GPU" : "CPU",
           to->batch, to->threads, prefetch, order_name(to->order));
    printf("%5s %9s %8s %10s %8s %7s", "epoch", "images", "wall s", "images/s", "stall %",
           "busy %");
    if (learns)
        printf(" %8s %9s", "loss", "accuracy");
    printf("\n");
    for (uint32_t e = 0; e < to->epochs; e++) {
        const sb_epoch *x = &ep[e];
        printf("%5u %9" PRIu64 " %8.3f %10.1f %8.2f %7.2f", e + 1, x->images, x->wall_s,
               rate((double)x->images, x->wall_s), pct(x->wait_s, x->wall_s),
               pct(x->st.busy_s, x->wall_s));
        if (learns)
            printf(" %8.4f %9.4f", epoch_loss(x), epoch_acc(x));
        printf("\n");
    }
    printf("%s: %.1f images/s, input stall %.2f%%, step busy %.2f%%",
           to->epochs > 1 ? "steady state (epochs 2..)" : "one epoch",
           rate((double)m.images, m.wall_s), pct(m.wait_s, m.wall_s), pct(m.st.busy_s, m.wall_s));
    if (gpu)
        printf(", host-to-device %.2f GB/s", isfinite(h2d) ? h2d : 0);
    printf("\n");
    if (!learns && to->step.step_ms > 0)
        printf("the step alone could take %.1f images/s (batch %u every %.3g ms)\n",
               to->batch / (to->step.step_ms / 1000.0), to->batch, to->step.step_ms);
    fflush(stdout);
}

static int run_train(char *dir, const sb_train_opts *opts)
{
    sb_train_opts to = *opts;
    shr_reader *r = NULL;
    sb_feed feed;
    int have_feed = 0;
    shr_step *step = NULL;
    FILE *timeline = NULL;
    sb_epoch *ep = calloc(to.epochs, sizeof *ep);
    sb_source src;
    shr_info info = {0};
    char format[32];
    uint32_t prefetch = to.prefetch ? to.prefetch : to.threads + 2;
    int rc = ep ? 0 : ENOMEM;
    if (rc) {
        fprintf(stderr, "shardbench: %s\n", strerror(rc));
        goto leave;
    }
    char *mpath;
    if (asprintf(&mpath, "%s/%s", dir, FMT_MANIFEST_NAME) < 0) {
        rc = ENOMEM;
        goto leave;
    }
    int shards = access(mpath, F_OK) == 0;
    free(mpath);
    if (shards) {
        backend_name(dir, format, sizeof format);
        shr_options o;
        shr_options_init(&o);
        o.batch_size = to.batch;
        o.order = to.order;
        o.seed = to.seed;
        o.threads = to.threads;
        o.prefetch = to.prefetch;
        if (to.have_size) {
            o.width = to.width;
            o.height = to.height;
        }
        rc = shr_open(&r, dir, &o);
        if (rc) {
            fprintf(stderr, "shardbench: cannot open %s: %s\n", dir,
                    open_reason(shr_last_error(NULL), dir, rc));
            goto leave;
        }
        shr_get_info(r, &info);
        src = (sb_source){reader_next, reader_release, reader_error, r};
    } else {
        snprintf(format, sizeof format, "folder");
        if (!to.have_size) {
            to.width = 224;
            to.height = 224;
        }
        rc = feed_open(&feed, dir, to.batch, to.threads, prefetch, to.order, to.seed, to.width,
                       to.height, 3);
        have_feed = 1;
        if (rc)
            goto leave;
        info.samples = feed.in.n;
        info.classes = (uint32_t)feed.in.nclasses;
        info.width = to.width;
        info.height = to.height;
        info.channels = 3;
        for (int c = 0; c < 3; c++) {
            info.mean[c] = SB_FOLDER_MEAN;
            info.std[c] = SB_FOLDER_STD;
        }
        src = (sb_source){feed_next, feed_release, feed_error, &feed};
    }
    to.step.classes = info.classes;
    for (int c = 0; c < 3; c++) {
        to.step.mean[c] = info.mean[c];
        to.step.std[c] = info.std[c];
    }
    if (to.step.kind == SHR_STEP_MODEL && info.classes < 2) {
        fprintf(stderr, "shardbench: %s: a model needs at least 2 classes, the dataset has %u\n",
                dir, info.classes);
        rc = SHR_EINVAL;
        goto leave;
    }
    rc = shr_step_create(&step, &to.step);
    if (rc) {
        fprintf(stderr, "shardbench: cannot create the training step: %s%s\n", shr_strerror(rc),
                to.step.device == SHR_DEVICE_GPU && !shr_step_gpu_available()
                ? " (no usable CUDA device)" : "");
        goto leave;
    }
    if (to.timeline) {
        timeline = fopen(to.timeline, "w");
        if (!timeline) {
            rc = errno;
            fprintf(stderr, "shardbench: cannot write %s: %s\n", to.timeline, strerror(rc));
            goto leave;
        }
        fprintf(timeline, "# epoch\tbatch\timages\twait_ms\tstep_ms\tt_ms\n");
    }
    rc = train_loop(&src, step, dir, &to, timeline, ep);
    if (rc)
        goto leave;
    uint64_t errors = have_feed ? atomic_load(&feed.job.errors) : 0;
    if (errors)
        fprintf(stderr, "shardbench: %s: %" PRIu64 " decodes failed over %u epoch(s) (skipped; "
                "first: %s)\n", dir, errors, to.epochs, feed.job.first_error);
    train_report(dir, format, &to, prefetch, &info, ep, errors);
leave:
    if (timeline && fclose(timeline) != 0 && !rc) {
        rc = errno;
        fprintf(stderr, "shardbench: cannot write %s: %s\n", to.timeline, strerror(rc));
    }
    shr_step_free(step);
    shr_close(r);
    if (have_feed)
        feed_close(&feed);
    free(ep);
    return rc;
}

/* A decimal number in [min, max]. 0 on success, -1 on error. */
static int parse_double(const char *s, double min, double max, double *out)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v) || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

enum { OPT_MODEL = 512, OPT_STEP_MS, OPT_SIDE, OPT_HIDDEN, OPT_LR, OPT_DEVICE, OPT_PREFETCH,
       OPT_TIMELINE, OPT_TORDER, OPT_TSEED, OPT_TSIZE, OPT_TJSON, OPT_WORK, OPT_PLOT };

static int cmd_train(int argc, char **argv)
{
    static const struct option opts[] = {
        {"model", required_argument, 0, OPT_MODEL}, {"step-ms", required_argument, 0, OPT_STEP_MS},
        {"side", required_argument, 0, OPT_SIDE}, {"hidden", required_argument, 0, OPT_HIDDEN},
        {"lr", required_argument, 0, OPT_LR}, {"device", required_argument, 0, OPT_DEVICE},
        {"batch", required_argument, 0, 'b'}, {"threads", required_argument, 0, 'j'},
        {"prefetch", required_argument, 0, OPT_PREFETCH}, {"epochs", required_argument, 0, 'e'},
        {"order", required_argument, 0, OPT_TORDER}, {"seed", required_argument, 0, OPT_TSEED},
        {"size", required_argument, 0, OPT_TSIZE}, {"timeline", required_argument, 0, OPT_TIMELINE},
        {"json", no_argument, 0, OPT_TJSON}, {0, 0, 0, 0}};
    long nproc = sysconf(_SC_NPROCESSORS_ONLN);
    sb_train_opts to = {
        .threads = nproc > 0 ? (uint32_t)nproc : 1,
        .batch = 256,
        .epochs = 2,
        .order = SHR_ORDER_RANDOM,
        .step = {.kind = SHR_STEP_EMULATED, .step_ms = SB_DEFAULT_STEP_MS, .model_side = 16,
                 .hidden = 128, .lr = 0.05f, .device = SHR_DEVICE_AUTO},
    };
    int have_model = 0, have_step = 0;
    uint64_t v;
    double d;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":j:b:e:", opts, NULL)) != -1) {
        switch (c) {
        case OPT_MODEL:
            if (strcmp(optarg, "softmax") == 0)
                to.step.model = SHR_MODEL_SOFTMAX;
            else if (strcmp(optarg, "mlp") == 0)
                to.step.model = SHR_MODEL_MLP;
            else
                return usage_error(usage_train, "bad --model '%s' (softmax or mlp)", optarg);
            to.step.kind = SHR_STEP_MODEL;
            have_model = 1;
            break;
        case OPT_STEP_MS:
            if (parse_double(optarg, 0, 3600000, &d))
                return usage_error(usage_train, "bad --step-ms '%s' (0..3600000)", optarg);
            to.step.step_ms = d;
            have_step = 1;
            break;
        case OPT_SIDE:
            if (parse_uint(optarg, 1, 512, &v))
                return usage_error(usage_train, "bad --side '%s' (1..512)", optarg);
            to.step.model_side = (uint32_t)v;
            break;
        case OPT_HIDDEN:
            if (parse_uint(optarg, 1, 65536, &v))
                return usage_error(usage_train, "bad --hidden '%s' (1..65536)", optarg);
            to.step.hidden = (uint32_t)v;
            break;
        case OPT_LR:
            if (parse_double(optarg, 1e-9, 1e3, &d))
                return usage_error(usage_train, "bad --lr '%s' (a positive number)", optarg);
            to.step.lr = (float)d;
            break;
        case OPT_DEVICE:
            if (strcmp(optarg, "auto") == 0)
                to.step.device = SHR_DEVICE_AUTO;
            else if (strcmp(optarg, "cpu") == 0)
                to.step.device = SHR_DEVICE_CPU;
            else if (strcmp(optarg, "gpu") == 0)
                to.step.device = SHR_DEVICE_GPU;
            else
                return usage_error(usage_train, "bad --device '%s' (auto, cpu or gpu)", optarg);
            break;
        case 'j':
            if (parse_uint(optarg, 1, 1024, &v))
                return usage_error(usage_train, "bad --threads '%s' (1..1024)", optarg);
            to.threads = (uint32_t)v;
            break;
        case 'b':
            if (parse_uint(optarg, 1, 1u << 20, &v))
                return usage_error(usage_train, "bad --batch '%s' (1..1048576)", optarg);
            to.batch = (uint32_t)v;
            break;
        case 'e':
            if (parse_uint(optarg, 1, 1000000, &v))
                return usage_error(usage_train, "bad --epochs '%s' (1..1000000)", optarg);
            to.epochs = (uint32_t)v;
            break;
        case OPT_PREFETCH:
            if (parse_uint(optarg, 2, 65536, &v))
                return usage_error(usage_train, "bad --prefetch '%s' (2..65536)", optarg);
            to.prefetch = (uint32_t)v;
            break;
        case OPT_TORDER:
            if (parse_order(optarg, &to.order))
                return usage_error(usage_train, "bad --order '%s' (seq, random or quasi)", optarg);
            break;
        case OPT_TSEED:
            if (parse_uint(optarg, 0, UINT64_MAX, &to.seed))
                return usage_error(usage_train, "bad --seed '%s'", optarg);
            break;
        case OPT_TSIZE:
            if (parse_wxh(optarg, &to.width, &to.height))
                return usage_error(usage_train, "bad --size '%s' (expected WxH, e.g. 224x224)",
                                   optarg);
            to.have_size = 1;
            break;
        case OPT_TIMELINE: to.timeline = optarg; break;
        case OPT_TJSON: to.json = 1; break;
        case ':':
            return usage_error(usage_train, "option '%s' needs a value", argv[optind - 1]);
        default:
            return usage_error(usage_train, "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (have_model && have_step)
        return usage_error(usage_train, "%s", "--model and --step-ms exclude each other");
    if (!have_step)
        to.step.step_ms = SB_DEFAULT_STEP_MS * to.batch / SB_DEFAULT_STEP_BATCH;
    if (optind >= argc)
        return usage_error(usage_train, "%s", "no DATASET given");
    if (optind + 1 < argc)
        return usage_error(usage_train, "unexpected argument '%s' (one DATASET)", argv[optind + 1]);
    to.step.seed = to.seed;
    sb_target t = {.path = argv[optind]};
    sb_read_opts ro = {.have_size = 1};     /* classify only checks that DATASET is a directory */
    if (classify(&t, &ro) != 0)
        return SB_EXIT_FAIL;
    return run_train(t.path, &to) ? SB_EXIT_FAIL : SB_EXIT_OK;
}

/* ---- compare: every format from one source ---- */

static const char usage_compare[] =
    "usage: shardbench compare SRC --work DIR [options]\n"
    "\n"
    "Build every format from the image folder SRC into DIR with the shardc next to shardbench\n"
    "(raw, hdf5, lmdb, png0, bmp, jpeg: DIR/<format>, its log in DIR/<format>.log), read each,\n"
    "and SRC itself through the decode path, with the same threads and batch size, and print one\n"
    "table: bytes on disk, images/s, CPU-seconds per image, the cores needed to feed a step of\n"
    "X ms per batch (batch / X x CPU-s per image), the decode work removed versus the source\n"
    "(CPU-seconds per epoch), and the step's utilisation (images/s / its demand, at most 1).\n"
    "\n"
    "  -w, --work DIR      where the datasets are built (created; formats in it are replaced)\n"
    "      --size WxH      output size of every format and of the source's decode (default\n"
    "                      224x224)\n"
    "  -j, --threads N     build, reader and decoding threads (default: all cores)\n"
    "  -b, --batch B       samples per batch (default 256)\n"
    "      --step-ms X     the step's time per batch (default 11.7 x batch / 256: ResNet-50 on\n"
    "                      an A100, 11.7 ms per 256 images)\n"
    "  -e, --epochs E      epochs read per format (default 2; E > 1: steady state, epochs 2..E)\n"
    "      --json          {\"formats\": [...]} on stdout instead of the table\n"
    "      --plot FILE     a PNG bar chart by scripts/plot-compare.sh (gnuplot); without gnuplot\n"
    "                      the plot is skipped with a message\n"
    "\n"
    "exit status: 0 success, 1 a build or a read failed, 2 usage error\n";

static const char *const sb_formats[] = {"raw", "hdf5", "lmdb", "png0", "bmp", "jpeg"};
#define SB_NFORMATS (sizeof sb_formats / sizeof *sb_formats)

/* The directory this program lives in (from /proc/self/exe). */
static int exe_dir(char *out, size_t len)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return -1;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash)
        return -1;
    *slash = '\0';
    return snprintf(out, len, "%s", exe) < (int)len ? 0 : -1;
}

/* Run argv (argv[0] a path) with its stdout and stderr going to the file log (truncated), or
 * both to our stderr when log is NULL (our stdout may be JSON). Returns its exit status, 128 + the
 * signal that killed it, or -1 with errno when it could not be started (127: exec failed). */
static int run_child(char *const argv[], const char *log)
{
    int fd = -1;
    if (log) {
        fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0)
            return -1;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        errno = e;
        return -1;
    }
    if (pid == 0) {
        if (fd >= 0) {
            dup2(fd, STDOUT_FILENO);
            dup2(fd, STDERR_FILENO);
        } else {
            dup2(STDERR_FILENO, STDOUT_FILENO);
        }
        execv(argv[0], argv);
        _exit(127);
    }
    if (fd >= 0)
        close(fd);
    int st;
    while (waitpid(pid, &st, 0) < 0) {
        if (errno != EINTR)
            return -1;
    }
    if (WIFEXITED(st))
        return WEXITSTATUS(st);
    return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
}

/* Bytes of every regular file under path (apparent sizes: what the files hold, independent of
 * the filesystem's block size). */
static uint64_t tree_bytes(const char *path, int depth)
{
    struct stat st;
    if (depth > SB_MAX_DEPTH || lstat(path, &st) != 0)
        return 0;
    if (S_ISREG(st.st_mode))
        return (uint64_t)st.st_size;
    if (!S_ISDIR(st.st_mode))
        return 0;
    DIR *d = opendir(path);
    if (!d)
        return 0;
    uint64_t sum = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char *sub;
        if (asprintf(&sub, "%s/%s", path, de->d_name) < 0)
            break;
        sum += tree_bytes(sub, depth + 1);
        free(sub);
    }
    closedir(d);
    return sum;
}

typedef struct {
    const char *format;         /* "source" or a shardc format */
    char *dir;
    uint64_t bytes;
    uint64_t images_per_epoch;  /* what an epoch delivered */
    double ips, cpu;            /* steady state: images/s, CPU-s per image */
    double cores, saved, util;
} sb_cmp_row;

typedef struct {
    char *work;
    uint32_t width, height, threads, batch, epochs;
    double step_ms;
    int json;
    const char *plot;
} sb_cmp_opts;

static int build_format(const char *shardc, const char *src, const sb_cmp_opts *co,
                        const char *format, const char *out)
{
    char size[32], threads[16], *log;
    snprintf(size, sizeof size, "%ux%u", co->width, co->height);
    snprintf(threads, sizeof threads, "%u", co->threads);
    if (asprintf(&log, "%s.log", out) < 0)
        return ENOMEM;
    char *const argv[] = {(char *)shardc, "build", (char *)src, "-o", (char *)out, "--format",
                          (char *)format, "--size", size, "-j", threads, "--force",
                          "--no-progress", NULL};
    int st = run_child(argv, log);
    int rc = 0;
    if (st < 0) {
        rc = errno ? errno : EIO;
        fprintf(stderr, "shardbench: cannot run %s: %s\n", shardc, strerror(rc));
    } else if (st > 1) {
        /* 1 is a finished build with rejects (broken inputs), which the source has as well */
        fprintf(stderr, "shardbench: shardc build --format %s failed (exit %d); see %s\n", format,
                st, log);
        rc = EIO;
    }
    free(log);
    return rc;
}

/* Read a built dataset (or the source folder) like `read` does and fill the row's speed. */
static int measure(sb_cmp_row *row, const sb_cmp_opts *co, int folder)
{
    sb_read_opts ro = {
        .threads = co->threads, .batch = co->batch, .epochs = co->epochs,
        .order = SHR_ORDER_SEQUENTIAL, .access = SHR_ACCESS_MMAP,
        .width = co->width, .height = co->height, .channels = 3,
    };
    sb_row r;
    int rc = row_init(&r, row->dir, folder ? "folder" : row->format, co->epochs);
    if (rc) {
        fprintf(stderr, "shardbench: %s\n", strerror(rc));
        return rc;
    }
    rc = folder ? run_folder(row->dir, &ro, &r) : run_reader(row->dir, &ro, &r, NULL);
    if (rc == 0) {
        sb_span m = row_measured(&r);
        row->ips = rate((double)m.images, m.wall_s);
        row->cpu = rate(m.cpu_s, (double)m.images);
        row->images_per_epoch = r.spans[co->epochs - 1].images;
    }
    row_free(&r);
    return rc;
}

static void compare_report(const sb_cmp_opts *co, const char *src, const sb_cmp_row *rows,
                           size_t nrows, double demand)
{
    if (co->json) {
        printf("{\"source\": ");
        print_json_string(stdout, src);
        printf(", \"work\": ");
        print_json_string(stdout, co->work);
        printf(", \"width\": %u, \"height\": %u, \"threads\": %u, \"batch\": %u, \"epochs\": %u, "
               "\"step_ms\": %.6g, \"demand_images_per_s\": %.1f, \"formats\": [", co->width,
               co->height, co->threads, co->batch, co->epochs, co->step_ms, demand);
        for (size_t i = 0; i < nrows; i++) {
            const sb_cmp_row *r = &rows[i];
            printf("%s{\"format\": \"%s\", \"dir\": ", i ? ", " : "", r->format);
            print_json_string(stdout, r->dir);
            printf(", \"bytes\": %" PRIu64 ", \"images_per_epoch\": %" PRIu64 ", "
                   "\"images_per_s\": %.1f, \"cpu_s_per_image\": %.6g, \"cores_needed\": %.4g, "
                   "\"decode_cpu_s_saved_per_epoch\": %.6g, \"step_util\": %.4f}", r->bytes,
                   r->images_per_epoch, r->ips, r->cpu, r->cores, r->saved, r->util);
        }
        printf("]}\n");
        fflush(stdout);
        return;
    }
    printf("%-7s %12s %11s %11s %13s %18s %10s\n", "format", "bytes", "images/s", "CPU-s/img",
           "cores needed", "CPU-s saved/epoch", "step util");
    for (size_t i = 0; i < nrows; i++) {
        const sb_cmp_row *r = &rows[i];
        printf("%-7s %12" PRIu64 " %11.1f %11.3g %13.3g %18.3g %9.1f%%\n", r->format, r->bytes,
               r->ips, r->cpu, r->cores, r->saved, r->util * 100);
    }
    printf("\nstep: %.3g ms per batch of %u = %.0f images/s to feed; cores needed = that x "
           "CPU-s/img;\nCPU-s saved/epoch = (source - format) CPU-s/img x %" PRIu64 " images; "
           "%u thread(s), %ux%u, %s\n", co->step_ms, co->batch, demand,
           rows[0].images_per_epoch, co->threads, co->width, co->height,
           co->epochs > 2 ? "steady state (epochs 2..)" : co->epochs == 2 ? "steady state (epoch 2)"
                                                                         : "one epoch");
    fflush(stdout);
}

/* scripts/plot-compare.sh exits with this when gnuplot is not installed */
#define SB_PLOT_NO_GNUPLOT 3

/* The plot script: next to shardbench, in the source tree above the build directory, or where an
 * install would put it. */
static char *find_plot_script(const char *bindir)
{
    static const char *const rel[] = {"/plot-compare.sh", "/../../scripts/plot-compare.sh",
                                       "/../share/shardc/plot-compare.sh"};
    for (size_t i = 0; i < sizeof rel / sizeof *rel; i++) {
        char *p;
        if (asprintf(&p, "%s%s", bindir, rel[i]) < 0)
            return NULL;
        if (access(p, X_OK) == 0)
            return p;
        free(p);
    }
    return NULL;
}

/* Write DIR/compare.tsv and run the plot script on it. Returns the exit status for the run: a
 * missing gnuplot or script is not a failure (the table is the result; the plot is a view). */
static int compare_plot(const sb_cmp_opts *co, const char *bindir, const sb_cmp_row *rows,
                        size_t nrows, double demand)
{
    char *tsv = NULL, *script = NULL, dem[32];
    int status = SB_EXIT_OK;
    if (asprintf(&tsv, "%s/compare.tsv", co->work) < 0) {
        tsv = NULL;
        status = SB_EXIT_FAIL;
        goto leave;
    }
    FILE *f = fopen(tsv, "w");
    if (!f) {
        fprintf(stderr, "shardbench: cannot write %s: %s\n", tsv, strerror(errno));
        status = SB_EXIT_FAIL;
        goto leave;
    }
    fprintf(f, "# format\timages_per_s\tcpu_s_per_image\tbytes\tcores_needed\tstep_util\n");
    for (size_t i = 0; i < nrows; i++)
        fprintf(f, "%s\t%.1f\t%.6g\t%" PRIu64 "\t%.4g\t%.4f\n", rows[i].format, rows[i].ips,
                rows[i].cpu, rows[i].bytes, rows[i].cores, rows[i].util);
    if (fclose(f) != 0) {
        fprintf(stderr, "shardbench: cannot write %s: %s\n", tsv, strerror(errno));
        status = SB_EXIT_FAIL;
        goto leave;
    }
    script = find_plot_script(bindir);
    if (!script) {
        fprintf(stderr, "shardbench: plot skipped: plot-compare.sh not found next to %s or in "
                "%s/../../scripts (the data is in %s)\n", bindir, bindir, tsv);
        goto leave;
    }
    snprintf(dem, sizeof dem, "%.1f", demand);
    char *const argv[] = {script, tsv, (char *)co->plot, dem, NULL};
    int st = run_child(argv, NULL);
    if (st == SB_PLOT_NO_GNUPLOT) {
        fprintf(stderr, "shardbench: plot skipped: gnuplot is not installed (Debian: apt-get "
                "install gnuplot-nox); the data is in %s\n", tsv);
    } else if (st != 0) {
        fprintf(stderr, "shardbench: cannot plot to %s: %s exited with %d\n", co->plot, script,
                st);
        status = SB_EXIT_FAIL;
    } else if (!co->json) {
        printf("plot: %s\n", co->plot);
    }
leave:
    free(script);
    free(tsv);
    return status;
}

static int run_compare(char *src, const sb_cmp_opts *co)
{
    char bindir[PATH_MAX], *shardc = NULL;
    sb_cmp_row rows[1 + SB_NFORMATS];
    size_t nrows = 0;
    int status = SB_EXIT_OK;
    memset(rows, 0, sizeof rows);
    if (exe_dir(bindir, sizeof bindir) != 0 || asprintf(&shardc, "%s/shardc", bindir) < 0) {
        fprintf(stderr, "shardbench: cannot find my own directory in /proc/self/exe\n");
        return SB_EXIT_FAIL;
    }
    if (access(shardc, X_OK) != 0) {
        fprintf(stderr, "shardbench: cannot run %s: %s (compare builds with the shardc next to "
                "shardbench)\n", shardc, strerror(errno));
        free(shardc);
        return SB_EXIT_FAIL;
    }
    int created = mkdir(co->work, 0755) == 0;
    if (!created && errno != EEXIST) {
        fprintf(stderr, "shardbench: cannot create %s: %s\n", co->work, strerror(errno));
        free(shardc);
        return SB_EXIT_FAIL;
    }
    /* datasets written inside SRC would become classes of the next build */
    char *rs = realpath(src, NULL), *rw = realpath(co->work, NULL);
    size_t ls = rs ? strlen(rs) : 0;
    int inside = rs && rw && strncmp(rw, rs, ls) == 0 && (rw[ls] == '/' || rw[ls] == '\0');
    free(rs);
    free(rw);
    if (inside) {
        if (created)
            rmdir(co->work);
        fprintf(stderr, "shardbench: --work %s is inside SRC %s; choose a directory outside it\n",
                co->work, src);
        free(shardc);
        return SB_EXIT_FAIL;
    }
    /* the source first: every other row is measured against it */
    rows[0].format = "source";
    rows[0].dir = strdup(src);
    if (!rows[0].dir || measure(&rows[0], co, 1) != 0) {
        fprintf(stderr, "shardbench: cannot read the source %s: nothing to compare with\n", src);
        status = SB_EXIT_FAIL;
        goto leave;
    }
    rows[0].bytes = tree_bytes(src, 0);
    nrows = 1;
    for (size_t i = 0; i < SB_NFORMATS; i++) {
        sb_cmp_row *r = &rows[nrows];
        r->format = sb_formats[i];
        if (asprintf(&r->dir, "%s/%s", co->work, sb_formats[i]) < 0) {
            r->dir = NULL;
            status = SB_EXIT_FAIL;
            break;
        }
        if (!co->json)
            fprintf(stderr, "shardbench: building and reading %s\n", r->dir);
        if (build_format(shardc, src, co, sb_formats[i], r->dir) != 0 ||
            measure(r, co, 0) != 0) {
            status = SB_EXIT_FAIL;
            free(r->dir);
            r->dir = NULL;
            continue;
        }
        r->bytes = tree_bytes(r->dir, 0);
        nrows++;
    }
    double demand = co->batch / (co->step_ms / 1000.0);
    for (size_t i = 0; i < nrows; i++) {
        sb_cmp_row *r = &rows[i];
        r->cores = demand * r->cpu;
        r->saved = (rows[0].cpu - r->cpu) * (double)rows[0].images_per_epoch;
        r->util = demand > 0 && r->ips < demand ? r->ips / demand : 1.0;
    }
    compare_report(co, src, rows, nrows, demand);
    if (co->plot) {
        int st = compare_plot(co, bindir, rows, nrows, demand);
        if (st != SB_EXIT_OK)
            status = st;
    }
leave:
    for (size_t i = 0; i < 1 + SB_NFORMATS; i++)
        free(rows[i].dir);
    free(shardc);
    return status;
}

static int cmd_compare(int argc, char **argv)
{
    static const struct option opts[] = {
        {"work", required_argument, 0, 'w'}, {"size", required_argument, 0, OPT_TSIZE},
        {"threads", required_argument, 0, 'j'}, {"batch", required_argument, 0, 'b'},
        {"step-ms", required_argument, 0, OPT_STEP_MS}, {"epochs", required_argument, 0, 'e'},
        {"json", no_argument, 0, OPT_TJSON}, {"plot", required_argument, 0, OPT_PLOT},
        {0, 0, 0, 0}};
    long nproc = sysconf(_SC_NPROCESSORS_ONLN);
    sb_cmp_opts co = {
        .width = 224, .height = 224, .threads = nproc > 0 ? (uint32_t)nproc : 1, .batch = 256,
        .epochs = 2,
    };
    uint64_t v;
    double d;
    int c, have_step = 0;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":w:j:b:e:", opts, NULL)) != -1) {
        switch (c) {
        case 'w': co.work = optarg; break;
        case OPT_TSIZE:
            if (parse_wxh(optarg, &co.width, &co.height))
                return usage_error(usage_compare, "bad --size '%s' (expected WxH, e.g. 224x224)",
                                   optarg);
            break;
        case 'j':
            if (parse_uint(optarg, 1, 1024, &v))
                return usage_error(usage_compare, "bad --threads '%s' (1..1024)", optarg);
            co.threads = (uint32_t)v;
            break;
        case 'b':
            if (parse_uint(optarg, 1, 1u << 20, &v))
                return usage_error(usage_compare, "bad --batch '%s' (1..1048576)", optarg);
            co.batch = (uint32_t)v;
            break;
        case OPT_STEP_MS:
            if (parse_double(optarg, 1e-6, 3600000, &d))
                return usage_error(usage_compare, "bad --step-ms '%s' (more than 0, at most "
                                   "3600000)", optarg);
            co.step_ms = d;
            have_step = 1;
            break;
        case 'e':
            if (parse_uint(optarg, 1, 1000000, &v))
                return usage_error(usage_compare, "bad --epochs '%s' (1..1000000)", optarg);
            co.epochs = (uint32_t)v;
            break;
        case OPT_TJSON: co.json = 1; break;
        case OPT_PLOT: co.plot = optarg; break;
        case ':':
            return usage_error(usage_compare, "option '%s' needs a value", argv[optind - 1]);
        default:
            return usage_error(usage_compare, "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind >= argc)
        return usage_error(usage_compare, "%s", "no SRC given");
    if (optind + 1 < argc)
        return usage_error(usage_compare, "unexpected argument '%s' (one SRC)", argv[optind + 1]);
    if (!co.work)
        return usage_error(usage_compare, "%s", "no --work DIR given");
    if (!have_step)
        co.step_ms = SB_DEFAULT_STEP_MS * co.batch / SB_DEFAULT_STEP_BATCH;
    sb_target t = {.path = argv[optind]};
    sb_read_opts ro = {.have_size = 1};
    if (classify(&t, &ro) != 0)
        return SB_EXIT_FAIL;
    if (t.kind != SB_FOLDER) {
        fprintf(stderr, "shardbench: %s is a shardc dataset; compare needs the image folder it "
                "was built from\n", t.path);
        return SB_EXIT_FAIL;
    }
    return run_compare(t.path, &co);
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
    } cmds[] = {{"read", cmd_read, usage_read},
                 {"train", cmd_train, usage_train},
                 {"compare", cmd_compare, usage_compare}};
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
