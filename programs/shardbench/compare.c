/* compare.c - `shardbench compare`: every format built from one image folder, each read as
 * `read` does, turned into what a training run pays. */
#include "bench.h"

const char sb_usage_compare[] =
    "usage: shardbench compare SRC --work DIR [options]\n"
    "\n"
    "Build every format from the image folder SRC into DIR with shardc's build (libshardcomp)\n"
    "(raw, hdf5, lmdb, png0, bmp, jpeg, and raw's stored forms raw+lz4, raw+zstd (--compress)\n"
    "and raw+jpeg50 (--jpeg-fraction 0.5): DIR/<row>, its log in DIR/<row>.log), read each, and\n"
    "SRC itself through the decode path, with the same threads and batch size, warm and cold\n"
    "(files evicted from the page cache before the epoch), and print one table: bytes on disk\n"
    "and per sample, the RAM that would hold ImageNet's 1,281,167 images stored so (GiB, from\n"
    "the bytes per sample), images/s warm and cold, CPU-seconds per image, the cores needed to\n"
    "feed a step of X ms per batch (batch / X x CPU-s per image), the decode work removed versus\n"
    "the source (CPU-seconds per epoch), and the step's utilisation (images/s / its demand).\n"
    "The row raw+rrc reads the raw shards again with the augmentation and normalisation done by\n"
    "the reader on the CPU (RandomResizedCrop, flip, float32 NCHW normalised with the dataset's\n"
    "statistics), against raw's uint8 batches that a GPU step normalises on the device.\n"
    "\n"
    "  -w, --work DIR      where the datasets are built (created; formats in it are replaced)\n"
    "      --size WxH      output size of every format and of the source's decode (N: NxN;\n"
    "                      default 224x224)\n"
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

/* rows: the source, then every format compiled in (shc_build_formats), then raw's stored forms */
#define SB_MAX_FORMATS 16

/* ImageNet-1k's training set: the scale the "fits in RAM" column projects to */
#define SB_IMAGENET_IMAGES 1281167.0

/* Raw's stored forms, each a row of its own: name, --compress, --jpeg-fraction. */
static const struct {
    const char *name, *codec;
    double jpeg_fraction;
} sb_raw_forms[] = {{"raw+lz4", "lz4", 0}, {"raw+zstd", "zstd", 0}, {"raw+jpeg50", NULL, 0.5}};
#define SB_NFORMS (sizeof sb_raw_forms / sizeof *sb_raw_forms)

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
static void add_size(const char *file, const struct stat *st, void *ctx)
{
    *(uint64_t *)ctx += (uint64_t)st->st_size;
}

static uint64_t tree_bytes(const char *path)
{
    uint64_t sum = 0;
    sb_walk_files(path, add_size, &sum);
    return sum;
}

/* The build's messages, as shardc would print them, go to the format's log file. */
static void log_message(void *ctx, const char *text)
{
    fprintf(ctx, "shardc: %s\n", text);
}

static void log_reject(void *ctx, const char *path, const char *reason)
{
    fprintf(ctx, "shardc: cannot decode %s: %s (skipped)\n", path, reason);
}

static void log_summary(void *ctx, const shc_summary *s)
{
    fprintf(ctx, "shardc: wrote %" PRIu64 " samples (%zu classes) in %zu shard(s), %" PRIu64
            " bytes, to %s; %zu rejected; %.2f s\n", s->samples, s->classes, s->shards, s->bytes,
            s->out, s->rejects, s->seconds);
}

/* `shardc build SRC -o OUT --format FORMAT --size WxH -j THREADS --force` (and for raw's forms
 * `--compress CODEC` or `--jpeg-fraction F`), through libshardcomp, its messages in OUT.log.
 * Prints its errors. */
static int build_format(char *src, const sb_cmp_opts *co, const char *format, const char *codec,
                        double jpeg_fraction, const char *out)
{
    char *log;
    if (asprintf(&log, "%s.log", out) < 0)
        return sb_no_memory();
    FILE *f = fopen(log, "w");
    if (!f) {
        int rc = errno;
        fprintf(stderr, "shardbench: cannot write %s: %s\n", log, strerror(rc));
        free(log);
        return rc;
    }
    /* the flags as shardc takes them, through shardc.h */
    char size[32], threads[16], fraction[40];
    snprintf(size, sizeof size, "%" PRIu32 "x%" PRIu32, co->width, co->height);
    snprintf(threads, sizeof threads, "%" PRIu32, co->threads);
    snprintf(fraction, sizeof fraction, "%.17g", jpeg_fraction);
    shc_build_opts *o = shc_build_opts_new();
    if (!o) {
        fclose(f);
        free(log);
        return sb_no_memory();
    }
    shc_build_sources(o, &src, 1);
    shc_msg why = {{0}};
    int rc = shc_build_set(o, "output", out, &why);
    if (!rc)
        rc = shc_build_set(o, "format", format, &why);
    if (!rc)
        rc = shc_build_set(o, "size", size, &why);
    if (!rc)
        rc = shc_build_set(o, "threads", threads, &why);
    if (!rc)
        rc = shc_build_set(o, "force", NULL, &why);
    if (!rc && jpeg_fraction > 0)
        rc = shc_build_set(o, "jpeg-fraction", fraction, &why);
    if (!rc && codec)
        rc = shc_build_set(o, "compress", codec, &why);
    if (!rc)
        rc = shc_build_check(o, &why);
    if (rc) {
        fprintf(stderr, "shardbench: building --format %s failed: %s\n", format,
                why.text[0] ? why.text : shc_strerror(rc));
        shc_build_opts_free(o);
        fclose(f);
        free(log);
        return rc;
    }
    shc_build_cb cb = {.ctx = f, .message = log_message, .reject = log_reject,
                       .summary = log_summary};
    rc = shc_build(o, &cb);
    shc_build_opts_free(o);
    if (fclose(f) != 0 && (rc == 0 || rc == SHC_EREJECTS))
        rc = errno;
    /* rejects (broken inputs) finish the build, and the source has them as well */
    if (rc == SHC_EREJECTS)
        rc = 0;
    if (rc)
        fprintf(stderr, "shardbench: building --format %s failed: %s; see %s\n", format,
                shc_strerror(rc), log);
    free(log);
    return rc;
}

/* Read a built dataset (or the source folder) like `read` does and fill the row's speed: warm
 * (co->epochs, the steady state), then cold (one epoch with every file evicted first). tf: the
 * reader's transforms (NULL: none). Prints its errors. */
static int measure(sb_cmp_row *row, const sb_cmp_opts *co, int folder, const sb_tf_opts *tf)
{
    for (int cold = 0; cold < 2; cold++) {
        uint32_t epochs = cold ? 1 : co->epochs;
        sb_read_opts ro = {
            .threads = co->threads, .batch = co->batch, .epochs = epochs,
            .order = SHR_ORDER_SEQUENTIAL, .access = SHR_ACCESS_MMAP,
            .width = co->width, .height = co->height, .channels = 3, .cold = cold,
        };
        sb_tf_init(&ro.tf);
        if (tf)
            ro.tf = *tf;
        sb_row r;
        int rc = sb_row_init(&r, row->dir, folder ? "folder" : row->format, epochs);
        if (rc)
            return rc;
        rc = folder ? sb_run_folder(row->dir, &ro, &r) : sb_run_reader(row->dir, &ro, &r, NULL);
        if (rc == 0) {
            sb_span m = sb_row_measured(&r);
            if (cold) {
                row->cold_ips = sb_rate((double)m.images, m.wall_s);
            } else {
                row->ips = sb_rate((double)m.images, m.wall_s);
                row->cpu = sb_rate(m.cpu_s, (double)m.images);
                row->images_per_epoch = r.spans[co->epochs - 1].images;
            }
        }
        sb_row_free(&r);
        if (rc)
            return rc;
    }
    return 0;
}

static void compare_report(const sb_cmp_opts *co, const char *src, const sb_cmp_row *rows,
                           size_t nrows, double demand)
{
    if (co->json) {
        printf("{\"source\": ");
        shc_json_string(stdout, src);
        printf(", \"work\": ");
        shc_json_string(stdout, co->work);
        printf(", \"width\": %u, \"height\": %u, \"threads\": %u, \"batch\": %u, \"epochs\": %u, "
               "\"step_ms\": %.6g, \"demand_images_per_s\": %.1f, \"formats\": [", co->width,
               co->height, co->threads, co->batch, co->epochs, co->step_ms, demand);
        for (size_t i = 0; i < nrows; i++) {
            const sb_cmp_row *r = &rows[i];
            printf("%s{\"format\": \"%s\", \"dir\": ", i ? ", " : "", r->format);
            shc_json_string(stdout, r->dir);
            printf(", \"bytes\": %" PRIu64 ", \"images_per_epoch\": %" PRIu64 ", "
                   "\"bytes_per_sample\": %.1f, \"ram_gib_at_imagenet\": %.2f, "
                   "\"images_per_s\": %.1f, \"cold_images_per_s\": %.1f, "
                   "\"cpu_s_per_image\": %.6g, \"cores_needed\": %.4g, "
                   "\"decode_cpu_s_saved_per_epoch\": %.6g, \"step_util\": %.4f}", r->bytes,
                   r->images_per_epoch, r->per_sample, r->gib, r->ips, r->cold_ips, r->cpu,
                   r->cores, r->saved, r->util);
        }
        printf("]}\n");
        fflush(stdout);
        return;
    }
    printf("%-10s %12s %9s %9s %11s %11s %10s %8s %10s %7s\n", "format", "bytes", "B/sample",
           "GiB@1.28M", "images/s", "cold img/s", "CPU-s/img", "cores", "CPU-s svd", "util");
    for (size_t i = 0; i < nrows; i++) {
        const sb_cmp_row *r = &rows[i];
        printf("%-10s %12" PRIu64 " %9.0f %9.1f %11.1f %11.1f %10.3g %8.3g %10.3g %6.1f%%\n",
               r->format, r->bytes, r->per_sample, r->gib, r->ips, r->cold_ips, r->cpu, r->cores,
               r->saved, r->util * 100);
    }
    printf("\nGiB@1.28M: bytes per sample x 1,281,167 (ImageNet), the RAM that would cache it;\n"
           "cold: one epoch with every file evicted first; ");
    printf("step: %.3g ms per batch of %u = %.0f images/s to feed; cores needed = that x "
           "CPU-s/img;\nCPU-s svd (saved per epoch) = (source - format) CPU-s/img x %" PRIu64 " images; "
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
        sb_no_memory();
        status = SB_EXIT_FAIL;
        goto leave;
    }
    FILE *f = fopen(tsv, "w");
    if (!f) {
        fprintf(stderr, "shardbench: cannot write %s: %s\n", tsv, strerror(errno));
        status = SB_EXIT_FAIL;
        goto leave;
    }
    fprintf(f, "# format\timages_per_s\tcpu_s_per_image\tbytes\tcores_needed\tstep_util"
            "\tcold_images_per_s\tbytes_per_sample\tram_gib_at_imagenet\n");
    for (size_t i = 0; i < nrows; i++)
        fprintf(f, "%s\t%.1f\t%.6g\t%" PRIu64 "\t%.4g\t%.4f\t%.1f\t%.1f\t%.3f\n",
                rows[i].format, rows[i].ips, rows[i].cpu, rows[i].bytes, rows[i].cores,
                rows[i].util, rows[i].cold_ips, rows[i].per_sample, rows[i].gib);
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
    if (st < 0) {
        fprintf(stderr, "shardbench: cannot plot to %s: cannot run %s: %s\n", co->plot, script,
                strerror(errno));
        status = SB_EXIT_FAIL;
    } else if (st == SB_PLOT_NO_GNUPLOT) {
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
    char bindir[PATH_MAX];
    sb_cmp_row rows[2 + SB_MAX_FORMATS + SB_NFORMS];  /* source, formats, raw's forms, raw+rrc */
    const char *const *formats = shc_build_formats();
    size_t nrows = 0;
    int status = SB_EXIT_OK;
    memset(rows, 0, sizeof rows);
    if (exe_dir(bindir, sizeof bindir) != 0) {
        fprintf(stderr, "shardbench: cannot find my own directory in /proc/self/exe\n");
        return SB_EXIT_FAIL;
    }
    int created = mkdir(co->work, 0755) == 0;
    if (!created && errno != EEXIST) {
        fprintf(stderr, "shardbench: cannot create %s: %s\n", co->work, strerror(errno));
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
        return SB_EXIT_FAIL;
    }
    /* the source first: every other row is measured against it (when it cannot be read,
     * measure has said why and there is nothing to compare with) */
    rows[0].format = "source";
    rows[0].dir = strdup(src);
    if (!rows[0].dir)
        sb_no_memory();
    if (!rows[0].dir || measure(&rows[0], co, 1, NULL) != 0) {
        status = SB_EXIT_FAIL;
        goto leave;
    }
    rows[0].bytes = tree_bytes(src);
    nrows = 1;
    size_t nformats = 0;
    while (formats[nformats] && nformats < SB_MAX_FORMATS)
        nformats++;
    for (size_t i = 0; i < nformats + SB_NFORMS; i++) {
        sb_cmp_row *r = &rows[nrows];
        /* the backends, then raw's stored forms */
        int form = i >= nformats;
        const char *backend = form ? "raw" : formats[i];
        r->format = form ? sb_raw_forms[i - nformats].name : formats[i];
        if (asprintf(&r->dir, "%s/%s", co->work, r->format) < 0) {
            r->dir = NULL;
            sb_no_memory();
            status = SB_EXIT_FAIL;
            break;
        }
        if (!co->json)
            fprintf(stderr, "shardbench: building and reading %s\n", r->dir);
        if (build_format(src, co, backend, form ? sb_raw_forms[i - nformats].codec : NULL,
                         form ? sb_raw_forms[i - nformats].jpeg_fraction : 0, r->dir) != 0 ||
            measure(r, co, 0, NULL) != 0) {
            status = SB_EXIT_FAIL;
            free(r->dir);
            r->dir = NULL;
            continue;
        }
        r->bytes = tree_bytes(r->dir);
        nrows++;
    }
    /* the raw shards with the CPU-side transforms: where augmentation and normalisation cost */
    for (size_t i = 1; i < nrows; i++) {
        if (strcmp(rows[i].format, "raw") != 0)
            continue;
        sb_cmp_row *r = &rows[nrows];
        sb_tf_opts tf;
        sb_tf_init(&tf);
        tf.rrc = tf.flip = 1;
        tf.dtype = SHR_DTYPE_F32;
        tf.layout = SHR_LAYOUT_NCHW;
        tf.normalize = SHR_NORM_DATASET;
        r->format = "raw+rrc";
        r->dir = strdup(rows[i].dir);
        if (!r->dir)
            sb_no_memory();
        if (!r->dir || measure(r, co, 0, &tf) != 0) {
            status = SB_EXIT_FAIL;
            break;
        }
        r->bytes = rows[i].bytes;
        nrows++;
        break;
    }
    double demand = co->batch / (co->step_ms / 1000.0);
    for (size_t i = 0; i < nrows; i++) {
        sb_cmp_row *r = &rows[i];
        r->cores = demand * r->cpu;
        r->saved = (rows[0].cpu - r->cpu) * (double)rows[0].images_per_epoch;
        r->util = demand > 0 && r->ips < demand ? r->ips / demand : 1.0;
        r->per_sample = r->images_per_epoch ? (double)r->bytes / (double)r->images_per_epoch : 0;
        r->gib = r->per_sample * SB_IMAGENET_IMAGES / (1024.0 * 1024 * 1024);
    }
    compare_report(co, src, rows, nrows, demand);
    if (co->plot) {
        int st = compare_plot(co, bindir, rows, nrows, demand);
        if (st != SB_EXIT_OK)
            status = st;
    }
leave:
    for (size_t i = 0; i < 2 + SB_MAX_FORMATS + SB_NFORMS; i++)
        free(rows[i].dir);
    return status;
}

int sb_cmd_compare(int argc, char **argv)
{
    sb_cmp_opts co = {
        .width = 224, .height = 224, .threads = sb_default_threads(), .batch = 256,
        .epochs = 2,
    };
    const sb_common common = {
        .threads = &co.threads, .batch = &co.batch, .epochs = &co.epochs, .width = &co.width,
        .height = &co.height, .json = &co.json,
    };
    double d;
    int c, rc, have_step = 0;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":w:j:b:e:", sb_longopts(SB_CMD_COMPARE), NULL)) != -1) {
        switch (c) {
        case 'w': co.work = optarg; break;
        case OPT_STEP_MS:
            if (sb_parse_double(optarg, 1e-6, 3600000, &d))
                return sb_usage_error(sb_usage_compare, "bad --step-ms '%s' (more than 0, at most "
                                   "3600000)", optarg);
            co.step_ms = d;
            have_step = 1;
            break;
        case OPT_PLOT: co.plot = optarg; break;
        default:
            if ((rc = sb_common_option(c, argc, argv, sb_usage_compare, &common)) != 0)
                return rc;
        }
    }
    if (optind >= argc)
        return sb_usage_error(sb_usage_compare, "%s", "no SRC given");
    if (optind + 1 < argc)
        return sb_usage_error(sb_usage_compare, "unexpected argument '%s' (one SRC)",
                           argv[optind + 1]);
    if (!co.work)
        return sb_usage_error(sb_usage_compare, "%s", "no --work DIR given");
    if (!have_step)
        co.step_ms = SB_DEFAULT_STEP_MS * co.batch / SB_DEFAULT_STEP_BATCH;
    sb_target t = {.path = argv[optind]};
    sb_read_opts ro = {.have_size = 1};
    if (sb_classify(&t, &ro) != 0)
        return SB_EXIT_FAIL;
    if (t.kind != SB_FOLDER) {
        fprintf(stderr, "shardbench: %s is a shardc dataset; compare needs the image folder it "
                "was built from\n", t.path);
        return SB_EXIT_FAIL;
    }
    return run_compare(t.path, &co);
}
