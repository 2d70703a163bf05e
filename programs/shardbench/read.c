/* read.c - `shardbench read`: every DATASET through the public libshardread API, the batches
 * touched as a training loop would, with the memcpy and folder baselines beside them. */
#include "bench.h"

const char sb_usage_read[] =
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
    "      --size WxH      output size (N: NxN): shardc datasets are center-cropped / padded to\n"
    "                      it by the reader; folders are resized and center-cropped to it\n"
    "                      (default: the size of the first shardc dataset given, else 224x224)\n"
    "      --access MODE   how the reader reads shards: mmap, pread or direct (default mmap)\n"
    "      --on-error A    a sample that cannot be read: fail (default), skip it (a shorter batch)\n"
    "                      or substitute a deterministic other sample; the count is reported\n"
    "      --verify-samples hash every sample as it is read (a mismatch is a damaged sample)\n"
    "      --checksum      JSON: an XXH3 digest of the batches delivered (indices, labels, pixels),\n"
    "                      equal across thread counts, access paths and lossless formats\n"
    "      --memcpy        also measure plain mmap + memcpy of every shardc dataset's sample bytes,\n"
    "                      same order, threads and batch size: the physical limit (row \"memcpy\")\n"
    "      --json          one JSON object per row on stdout instead of the table\n"
    "\n"
    "Read-time transforms, done by the reader's threads (shardc datasets only):\n"
    SB_TF_USAGE
    "\n"
    "exit status: 0 success, 1 a dataset could not be opened or read, 2 usage error\n";

/* ---- small helpers ---- */

/* Read one byte per page and the last byte: the batch is really delivered, at negligible cost. */
uint64_t sb_touch(const uint8_t *p, size_t len)
{
    uint64_t s = 0;
    for (size_t i = 0; i < len; i += SB_PAGE)
        s += p[i];
    if (len)
        s += p[len - 1];
    return s;
}

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
    o->on_error = ro->on_error;
    o->verify_samples = ro->verify_samples;
    /* a RandomResizedCrop always has an output size: --size, else the dataset's, else 224x224 */
    if (ro->have_size || ro->tf.rrc) {
        o->width = ro->width;
        o->height = ro->height;
    }
    sb_tf_apply(&ro->tf, o);
    o->epoch = epoch;
    /* the programs' defaults from the environment: the cache of a dataset at a URL, and
     * SHR_DIRECT_NO_URING=1 (not 0) for the pread path of --access direct */
    const char *cache = getenv("SHARDREAD_CACHE"), *no_uring = getenv("SHR_DIRECT_NO_URING");
    o->cache = cache && *cache ? cache : NULL;
    o->direct_pread = no_uring && *no_uring && strcmp(no_uring, "0") != 0;
    o->pin_device = shr_pin_device_from_env(getenv);        /* $LOCAL_RANK */
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
            size_t bytes = (size_t)b->n * b->height * b->width * b->channels *
                           sb_elem_size(b->dtype);
            sink += sb_touch(b->data, bytes) + (uint64_t)b->labels[0];
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
            const char *why = shr_last_error(r);
            fprintf(stderr, "shardbench: cannot read %s: %s\n", dir,
                    why && *why ? why : shr_strerror(rc));
            return rc;
        }
        sb_mark to = sb_mark_now();
        sb_span_close(&row->spans[e], from, to);
        from = to;
    }
    (void)sink;
    return 0;
}

/* The reason in a library message: its message may already say "cannot open ... DIR: reason",
 * and ours names DIR itself. */
const char *sb_open_reason(const char *msg, const char *dir, int rc)
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
    shr_msg why = {{0}};
    int rc = shr_open(r, dir, &o, &why);
    if (rc)
        fprintf(stderr, "shardbench: cannot open %s: %s\n", dir, sb_open_reason(why.text, dir, rc));
    return rc;
}

/* Run the reader over E epochs. Warm: one reader across all epochs (prefetch crosses epoch
 * boundaries, as in training). Cold: evict, open at epoch e, read it, close, for every e. Prints
 * its errors. */
int sb_run_reader(const char *dir, const sb_read_opts *ro, sb_row *row, sb_trace *trace)
{
    shr_reader *r = NULL;
    int rc = 0;
    if (ro->checksum && !row->digest) {
        if (!(row->digest = XXH3_createState()))
            return sb_no_memory();
        XXH3_64bits_reset(row->digest);
    }
    for (uint32_t e = 0; e < ro->epochs; e++) {
        if (ro->cold || e == 0) {
            if (ro->cold)
                sb_evict_dataset(dir, row);
            sb_mark start = sb_mark_now();
            rc = open_reader(&r, dir, ro, e);
            if (rc)
                goto leave;
            shr_info info;
            shr_get_info(r, &info);
            row->have_ring = 1;
            row->pinned = info.pinned;
            row->ring_bytes = info.ring_bytes;
            if (trace && (rc = trace_alloc(trace, shr_samples_per_epoch(r), ro->epochs)) != 0) {
                fprintf(stderr, "shardbench: %s: %s\n", dir, strerror(rc));
                goto leave;
            }
            rc = consume(r, dir, e, ro->cold ? 1 : ro->epochs, start, row, trace);
            shr_recovery rec = shr_get_recovery(r);
            row->recovery.replaced += rec.replaced;
            row->recovery.skipped += rec.skipped;
            sb_report_recovery(dir, r, ro->cold ? 1 : ro->epochs);
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

/* Classify every DATASET before anything runs, so a typo fails at once and not after an hour of
 * measuring; pick the default output size from the first shardc dataset's manifest. 0, or
 * SB_EXIT_FAIL (printed). */
int sb_classify(sb_target *t, sb_read_opts *ro)
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
    if (asprintf(&mpath, "%s/%s", t->path, SB_MANIFEST) < 0) {
        sb_no_memory();
        return SB_EXIT_FAIL;
    }
    t->kind = access(mpath, F_OK) == 0 ? SB_SHARDS : SB_FOLDER;
    free(mpath);
    if (t->kind == SB_SHARDS && !ro->have_size && !ro->width) {
        shr_manifest_summary m;
        /* unreadable manifests are reported when the reader opens the dataset */
        if (shr_manifest_peek(t->path, &m, NULL) == 0 && m.width && m.height) {
            ro->width = m.width;
            ro->height = m.height;
            ro->channels = m.channels;
        }
    }
    return 0;
}

void sb_backend_name(const char *dir, char *out, size_t len)
{
    shr_manifest_summary m;
    snprintf(out, len, "raw");
    if (shr_manifest_peek(dir, &m, NULL) == 0)
        snprintf(out, len, "%s", m.format);
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
        sb_no_memory();
        return SB_EXIT_FAIL;
    }
    for (size_t i = 0; i < nt; i++) {
        const sb_target *t = &targets[i];
        sb_row row;
        sb_trace trace = {0};
        if (t->kind == SB_FOLDER) {
            if (sb_row_init(&row, t->path, "folder", ro.epochs) == 0 &&
                sb_run_folder(t->path, &ro, &row) == 0) {
                sb_report_row(&rep, &ro, &row);
                sb_warn_resident(&row);
            } else
                status = SB_EXIT_FAIL;
            sb_row_free(&row);
            continue;
        }
        char backend[32];
        sb_backend_name(t->path, backend, sizeof backend);
        if (sb_row_init(&row, t->path, backend, ro.epochs) != 0 ||
            sb_run_reader(t->path, &ro, &row, ro.memcpy_baseline ? &trace : NULL) != 0) {
            status = SB_EXIT_FAIL;
            sb_row_free(&row);
            trace_free(&trace);
            continue;
        }
        sb_report_row(&rep, &ro, &row);
        sb_warn_resident(&row);
        if (ro.memcpy_baseline) {
            sb_row mrow;
            size_t slot = (size_t)row.width * row.height * row.channels;
            if (sb_row_init(&mrow, t->path, "memcpy", ro.epochs) == 0 &&
                sb_run_memcpy(t->path, &ro, &trace, slot, &mrow) == 0) {
                mrow.width = row.width;
                mrow.height = row.height;
                mrow.channels = row.channels;
                sb_report_row(&rep, &ro, &mrow);
                sb_warn_resident(&mrow);
                sb_span a = sb_row_measured(&row), b = sb_row_measured(&mrow);
                double mr = sb_rate((double)b.images, b.wall_s);
                ratio[i] = mr > 0 ? sb_rate((double)a.images, a.wall_s) / mr : 0;
            } else {
                status = SB_EXIT_FAIL;
            }
            sb_row_free(&mrow);
        }
        sb_row_free(&row);
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
               ro.batch, sb_order_name(ro.order), ro.width, ro.height,
               ro.cold ? "; cold: files evicted before every epoch" : "");
        if (sb_tf_any(&ro.tf)) {
            char tf[256];
            printf("transforms by the reader: %s\n", sb_tf_describe(&ro.tf, tf, sizeof tf));
        }
        for (size_t i = 0; i < nt; i++)
            if (ratio[i] > 0)
                printf("%s: reader / memcpy = %.2fx\n", targets[i].path, ratio[i]);
    }
    free(ratio);
    return status;
}

int sb_cmd_read(int argc, char **argv)
{
    sb_read_opts ro = {
        .threads = sb_default_threads(),
        .batch = 256,
        .epochs = 2,
        .order = SHR_ORDER_SEQUENTIAL,
        .access = SHR_ACCESS_MMAP,
        .channels = 3,
    };
    const sb_common common = SB_COMMON_OF(ro);
    int c, rc;
    sb_tf_init(&ro.tf);
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":j:b:e:", sb_longopts(SB_CMD_READ), NULL)) != -1) {
        switch (c) {
        case OPT_COLD: ro.cold = 1; break;
        case OPT_ACCESS: {
            int k;
            if ((rc = sb_parse_choice(sb_usage_read, "--access", "access", optarg, NULL, 0, &k)))
                return rc;
            ro.access = (shr_access)k;
            break;
        }
        case OPT_MEMCPY: ro.memcpy_baseline = 1; break;
        case OPT_CHECKSUM: ro.checksum = 1; break;
        default:
            if ((rc = sb_common_option(c, argc, argv, sb_usage_read, &common)) != 0)
                return rc;
        }
    }
    if (optind >= argc)
        return sb_usage_error(sb_usage_read, "%s", "no DATASET given");
    size_t nt = (size_t)(argc - optind);
    sb_target *targets = calloc(nt, sizeof *targets);
    if (!targets) {
        sb_no_memory();
        return SB_EXIT_FAIL;
    }
    int status = SB_EXIT_OK;
    for (size_t i = 0; i < nt && status == SB_EXIT_OK; i++) {
        targets[i].path = argv[optind + (int)i];
        status = sb_classify(&targets[i], &ro);
        if (status == SB_EXIT_OK && targets[i].kind == SB_FOLDER && sb_tf_any(&ro.tf)) {
            free(targets);
            return sb_usage_error(sb_usage_read, "the read-time transforms are the reader's: %s is an "
                               "image folder, not a shardc dataset", argv[optind + (int)i]);
        }
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
