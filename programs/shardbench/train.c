/* train.c - `shardbench train`: batches (from libshardread or a folder feed) through a training
 * step (step.h), timed per epoch: input stall, step busy, loss, accuracy. */
#include "bench.h"
#include "gpu_api.h"

const char sb_usage_train[] =
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
    "      --device D      auto, cpu or gpu (default auto: the GPU where one is usable; auto\n"
    "                      says on stderr why it fell back to the CPU, gpu fails with the reason)\n"
    "  the reader:\n"
    "  -b, --batch B       samples per batch (default 256)\n"
    "  -j, --threads N     reader workers or decoding threads (default: all cores)\n"
    "      --prefetch D    batches in the ring, 2..65536 (default threads + 2)\n"
    "  -e, --epochs E      epochs (default 2); with E > 1 the summary is the steady state,\n"
    "                      epochs 2..E; every epoch is listed\n"
    "      --order ORDER   seq, random or quasi (default random)\n"
    "      --seed S        seed of the order and of the model's initial weights (default 0)\n"
    "      --size WxH      output size, N for NxN (default: the dataset's; folders 224x224; a\n"
    "                      RandomResizedCrop of samples of many sizes 224x224)\n"
    "      --on-error A    a sample that cannot be read: fail (default), skip it (a shorter batch)\n"
    "                      or substitute a deterministic other sample; the count is reported\n"
    "      --verify-samples hash every sample as it is read (a mismatch is a damaged sample)\n"
    "  read-time transforms, done by the reader's threads (shardc datasets only; float or NCHW\n"
    "  batches need --device cpu: the GPU step takes uint8 NHWC and normalises on the device):\n"
    SB_TF_USAGE
    "  output:\n"
    "      --timeline FILE one line per batch: epoch, batch, images, wait ms, step ms, time ms\n"
    "      --json          one JSON object on stdout instead of the table\n"
    "\n"
    "Batches are in CUDA pinned memory where the step may use a GPU and a device is present\n"
    "(\"pinned\" in --json, with \"ring_bytes\"); a GPU step fed from pageable memory is warned\n"
    "of. After the epochs a GPU run times plain cudaMemcpyAsync copies of one batch from pinned\n"
    "and from pageable memory: the yardsticks of its host-to-device GB/s.\n"
    "\n"
    "exit status: 0 success, 1 the dataset or the step failed, 2 usage error\n";

/* Folders are normalised with these (a uniform 0..255 distribution's mean and std): there is no
 * manifest to give the real ones, and a pass over the images would cost an epoch. */
#define SB_FOLDER_MEAN 127.5
#define SB_FOLDER_STD 73.6

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

static const char *step_name(const sb_step_opts *o)
{
    if (o->kind == SB_STEP_EMULATED)
        return "emulated";
    return o->model == SB_MODEL_MLP ? "mlp" : "softmax";
}

/* The epochs: next -> step -> release, timed. Prints its errors. */
static int train_loop(sb_source *src, sb_step *step, const char *dir, const sb_train_opts *to,
                      FILE *timeline, sb_epoch *ep)
{
    double t_start = sb_now_s();
    for (uint32_t e = 0; e < to->epochs; e++) {
        sb_epoch *x = &ep[e];
        double t_epoch = sb_now_s();
        for (;;) {
            const shr_batch *b;
            double t0 = sb_now_s();
            int rc = src->next(src->ctx, &b);
            double t1 = sb_now_s();
            x->wait_s += t1 - t0;
            if (rc == SHR_EEND)
                break;
            if (rc) {
                const char *why = src->last_error(src->ctx);
                fprintf(stderr, "shardbench: cannot read %s: %s\n", dir,
                        why && *why ? why : shr_strerror(rc));
                return rc;
            }
            rc = sb_step_run(step, b);
            double t2 = sb_now_s();
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
        int rc = sb_step_sync(step, &x->st);
        if (rc) {
            fprintf(stderr, "shardbench: the training step failed: %s\n", shr_strerror(rc));
            return rc;
        }
        x->wall_s = sb_now_s() - t_epoch;
    }
    return 0;
}

/* What the report adds about memory and transfers. */
typedef struct {
    int pinned;                 /* every batch buffer is pinned */
    uint64_t ring_bytes;        /* the batch buffers */
    const char *gpu_status;     /* sb_gpu_status(), NULL under --device cpu */
    double base_pinned, base_pageable;      /* GB/s of the copy baselines, NAN if not run */
} sb_train_mem;

/* Host-to-device copies of one batch's pixels without the ring: from pinned and from pageable
 * memory, so that h2d_gb_per_s has its yardstick from the same run and device. Prints a warning
 * and leaves NANs where it fails: the training itself went well. */
static void h2d_baselines(sb_step *step, uint64_t bytes, sb_train_mem *mem)
{
    const sb_gpu_api *api = sb_step_gpu(step, NULL);
    if (!api || bytes == 0)
        return;
    /* about 2 GB per kind, 8 copies at least and 200 at most: long enough to time */
    uint64_t reps = 2000000000ull / bytes;
    reps = reps < 8 ? 8 : reps > 200 ? 200 : reps;
    shr_msg why = {""};
    int rc = api->h2d_baseline((size_t)bytes, (uint32_t)reps, &mem->base_pinned,
                               &mem->base_pageable, &why);
    if (rc) {
        mem->base_pinned = mem->base_pageable = NAN;
        fprintf(stderr, "shardbench: cannot time the copy baseline: %s\n", sb_reason(&why, rc));
    }
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

static void train_report(const char *dir, const char *format, const sb_train_opts *to,
                         uint32_t prefetch, const shr_info *info, const sb_epoch *ep,
                         uint64_t errors, shr_recovery rec, const sb_train_mem *mem)
{
    int learns = to->step.kind == SB_STEP_MODEL;
    uint32_t from = to->epochs > 1 ? 1 : 0;
    sb_epoch m = epoch_sum(ep, from, to->epochs);
    int gpu = m.st.on_gpu;
    double h2d = gpu && m.st.h2d_s > 0 ? (double)m.st.h2d_bytes / m.st.h2d_s / 1e9 : NAN;
    double base_pinned = gpu ? mem->base_pinned : NAN, base_pageable = gpu ? mem->base_pageable
                                                                               : NAN;
    double vs_base = isfinite(h2d) && isfinite(base_pinned) && base_pinned > 0
                     ? h2d / base_pinned : NAN;
    char measured[32];
    if (to->epochs > 2)
        snprintf(measured, sizeof measured, "2-%u", to->epochs);
    else
        snprintf(measured, sizeof measured, "%u", to->epochs);
    if (to->json) {
        printf("{\"dataset\": ");
        shc_json_string(stdout, dir);
        printf(", \"format\": \"%s\", \"device\": \"%s\", \"step\": \"%s\", \"step_ms\": ",
               format, gpu ? "gpu" : "cpu", step_name(&to->step));
        if (learns)
            printf("null");
        else
            printf("%.6g", to->step.step_ms);
        printf(", \"batch\": %u, \"threads\": %u, \"prefetch\": %u, \"order\": \"%s\", "
               "\"seed\": %" PRIu64 ", \"epochs\": %u, \"width\": %u, \"height\": %u, "
               "\"channels\": %u, \"classes\": %u, \"errors\": %" PRIu64 ", "
               "\"replaced\": %" PRIu64 ", \"skipped\": %" PRIu64 ", "
               "\"measured_epochs\": \"%s\", \"measured_images\": %" PRIu64 ", \"wall_s\": %.6f, "
               "\"images_per_s\": %.1f, \"stall_pct\": %.3f, \"busy_pct\": %.3f, "
               "\"h2d_gb_per_s\": ",
               to->batch, to->threads, prefetch, sb_order_name(to->order), to->seed, to->epochs,
               info->width, info->height, info->channels, info->classes, errors, rec.replaced,
               rec.skipped, measured,
               m.images, m.wall_s, sb_rate((double)m.images, m.wall_s), sb_pct(m.wait_s, m.wall_s),
               sb_pct(m.st.busy_s, m.wall_s));
        sb_print_json_double(h2d, "%.3f");
        printf(", \"h2d_baseline_pinned_gb_per_s\": ");
        sb_print_json_double(base_pinned, "%.3f");
        printf(", \"h2d_pageable_gb_per_s\": ");
        sb_print_json_double(base_pageable, "%.3f");
        printf(", \"h2d_vs_baseline\": ");
        sb_print_json_double(vs_base, "%.4f");
        printf(", \"pinned\": %s, \"ring_bytes\": %" PRIu64 ", \"gpu_status\": ",
               mem->pinned ? "true" : "false", mem->ring_bytes);
        if (mem->gpu_status)
            shc_json_string(stdout, mem->gpu_status);
        else
            printf("null");
        printf(", \"loss\": [");
        for (uint32_t e = 0; learns && e < to->epochs; e++) {
            fputs(e ? ", " : "", stdout);
            sb_print_json_double(epoch_loss(&ep[e]), "%.6f");
        }
        printf("], \"accuracy\": [");
        for (uint32_t e = 0; learns && e < to->epochs; e++) {
            fputs(e ? ", " : "", stdout);
            sb_print_json_double(epoch_acc(&ep[e]), "%.6f");
        }
        printf("], \"per_epoch\": [");
        for (uint32_t e = 0; e < to->epochs; e++) {
            const sb_epoch *x = &ep[e];
            printf("%s{\"epoch\": %u, \"images\": %" PRIu64 ", \"wall_s\": %.6f, "
                   "\"images_per_s\": %.1f, \"stall_pct\": %.3f, \"busy_pct\": %.3f, "
                   "\"step_call_s\": %.6f}", e ? ", " : "", e, x->images, x->wall_s,
                   sb_rate((double)x->images, x->wall_s), sb_pct(x->wait_s, x->wall_s),
                   sb_pct(x->st.busy_s, x->wall_s), x->step_s);
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
           to->batch, to->threads, prefetch, sb_order_name(to->order));
    printf("batches in %s host memory, ring %.1f MiB\n", mem->pinned ? "pinned" : "pageable",
           (double)mem->ring_bytes / (1024.0 * 1024.0));
    printf("%5s %9s %8s %10s %8s %7s", "epoch", "images", "wall s", "images/s", "stall %",
           "busy %");
    if (learns)
        printf(" %8s %9s", "loss", "accuracy");
    printf("\n");
    for (uint32_t e = 0; e < to->epochs; e++) {
        const sb_epoch *x = &ep[e];
        printf("%5u %9" PRIu64 " %8.3f %10.1f %8.2f %7.2f", e + 1, x->images, x->wall_s,
               sb_rate((double)x->images, x->wall_s), sb_pct(x->wait_s, x->wall_s),
               sb_pct(x->st.busy_s, x->wall_s));
        if (learns)
            printf(" %8.4f %9.4f", epoch_loss(x), epoch_acc(x));
        printf("\n");
    }
    printf("%s: %.1f images/s, input stall %.2f%%, step busy %.2f%%",
           to->epochs > 1 ? "steady state (epochs 2..)" : "one epoch",
           sb_rate((double)m.images, m.wall_s), sb_pct(m.wait_s, m.wall_s),
           sb_pct(m.st.busy_s, m.wall_s));
    if (gpu)
        printf(", host-to-device %.2f GB/s", isfinite(h2d) ? h2d : 0);
    printf("\n");
    if (gpu && isfinite(base_pinned))
        printf("cudaMemcpyAsync of one batch alone: %.2f GB/s from pinned memory (the ring: "
               "%.2fx of it), %.2f GB/s from pageable\n", base_pinned,
               isfinite(vs_base) ? vs_base : 0, base_pageable);
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
    sb_step *step = NULL;
    FILE *timeline = NULL;
    sb_epoch *ep = calloc(to.epochs, sizeof *ep);
    sb_source src;
    shr_info info = {0};
    sb_train_mem mem = {.base_pinned = NAN, .base_pageable = NAN};
    /* a CPU step needs no pinned memory: asking for it would load CUDA and make a context */
    shr_pin pin = to.step.device == SB_DEVICE_CPU ? SHR_PIN_OFF : SHR_PIN_AUTO;
    char format[32];
    uint32_t prefetch = to.prefetch ? to.prefetch : to.threads + 2;
    int rc = ep ? 0 : sb_no_memory();
    if (rc)
        goto leave;
    char *mpath;
    if (asprintf(&mpath, "%s/%s", dir, SB_MANIFEST) < 0) {
        rc = sb_no_memory();
        goto leave;
    }
    int shards = access(mpath, F_OK) == 0;
    free(mpath);
    if (shards) {
        sb_backend_name(dir, format, sizeof format);
        shr_options o;
        shr_options_init(&o);
        o.batch_size = to.batch;
        o.order = to.order;
        o.seed = to.seed;
        o.threads = to.threads;
        o.prefetch = to.prefetch;
        o.on_error = to.on_error;
        o.verify_samples = to.verify_samples;
        o.pin = pin;
        o.pin_device = shr_pin_device_from_env(getenv);     /* $LOCAL_RANK */
        if (to.have_size) {
            o.width = to.width;
            o.height = to.height;
        } else if (to.tf.rrc) {
            /* a RandomResizedCrop to the dataset's own size, or 224x224 when sizes vary */
            shr_manifest_summary m;
            o.width = o.height = 224;
            if (shr_manifest_peek(dir, &m, NULL) == 0 && m.width && m.height) {
                o.width = m.width;
                o.height = m.height;
            }
        }
        sb_tf_apply(&to.tf, &o);
        shr_msg why = {{0}};
        rc = shr_open(&r, dir, &o, &why);
        if (rc) {
            fprintf(stderr, "shardbench: cannot open %s: %s\n", dir,
                    sb_open_reason(why.text, dir, rc));
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
        rc = sb_feed_open(&feed, dir, to.batch, to.threads, prefetch, to.order, to.seed, to.width,
                       to.height, 3, pin);
        have_feed = 1;
        if (rc)
            goto leave;
        info.samples = shc_input_list_count(feed.in);
        info.classes = (uint32_t)shc_input_list_classes(feed.in);
        info.width = to.width;
        info.height = to.height;
        info.channels = 3;
        info.pinned = feed.pinned;
        info.ring_bytes = feed.ring_bytes;
        info.batch_bytes = (uint64_t)to.batch * to.width * to.height * 3;
        for (int c = 0; c < 3; c++) {
            info.mean[c] = SB_FOLDER_MEAN;
            info.std[c] = SB_FOLDER_STD;
        }
        src = (sb_source){sb_feed_next, sb_feed_release, sb_feed_error, &feed};
    }
    to.step.classes = info.classes;
    for (int c = 0; c < 3; c++) {
        /* batches the reader normalised already pass the step's normalisation unchanged */
        to.step.mean[c] = to.tf.normalize != SHR_NORM_NONE ? 0.0 : info.mean[c];
        to.step.std[c] = to.tf.normalize != SHR_NORM_NONE ? 1.0 : info.std[c];
    }
    if (to.step.kind == SB_STEP_MODEL && info.classes < 2) {
        fprintf(stderr, "shardbench: %s: a model needs at least 2 classes, the dataset has %u\n",
                dir, info.classes);
        rc = SHR_EINVAL;
        goto leave;
    }
    rc = sb_step_create(&step, &to.step);
    if (rc) {
        if (to.step.device == SB_DEVICE_GPU && !sb_step_gpu_available())
            fprintf(stderr, "shardbench: cannot create the training step on the GPU: %s\n",
                    sb_gpu_status());
        else
            fprintf(stderr, "shardbench: cannot create the training step: %s\n",
                    shr_strerror(rc));
        goto leave;
    }
    mem.pinned = info.pinned;
    mem.ring_bytes = info.ring_bytes;
    mem.gpu_status = to.step.device == SB_DEVICE_CPU ? NULL : sb_gpu_status();
    if (!sb_step_gpu(step, NULL) && to.step.device == SB_DEVICE_AUTO)
        fprintf(stderr, "shardbench: the training step runs on the CPU: %s\n", sb_gpu_status());
    if (sb_step_gpu(step, NULL) && !info.pinned) {
        shr_msg why = {""};
        if (r)
            shr_pinned(r, &why);
        else if (feed.unpinned.text[0])
            why = feed.unpinned;
        else
            snprintf(why.text, sizeof why.text, "no CUDA device: %s",
                     shr_cuda_status((char[400]){0}, 400));
        fprintf(stderr, "shardbench: warning: the batches are in pageable memory, host-to-device "
                "copies are staged: %s\n", why.text);
    }
    if (r && sb_step_gpu(step, NULL) &&
        (info.dtype != SHR_DTYPE_U8 || (info.layout == SHR_LAYOUT_NCHW && info.channels > 1))) {
        fprintf(stderr, "shardbench: the GPU step takes uint8 NHWC batches and normalises them on "
                "the device (the CUDA feed): train on --device cpu for the reader's float or "
                "NCHW output\n");
        rc = SHR_EINVAL;
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
    shr_recovery rec = shr_get_recovery(r);
    if (r)
        sb_report_recovery(dir, r, to.epochs);
    if (rc)
        goto leave;
    uint64_t errors = have_feed ? atomic_load(&feed.job.errors) : 0;
    if (errors)
        fprintf(stderr, "shardbench: %s: %" PRIu64 " decodes failed over %u epoch(s) (skipped; "
                "first: %s)\n", dir, errors, to.epochs, feed.job.first_error);
    h2d_baselines(step, info.batch_bytes, &mem);
    train_report(dir, format, &to, prefetch, &info, ep, errors, rec, &mem);
leave:
    if (timeline && fclose(timeline) != 0 && !rc) {
        rc = errno;
        fprintf(stderr, "shardbench: cannot write %s: %s\n", to.timeline, strerror(rc));
    }
    sb_step_free(step);
    shr_close(r);
    if (have_feed)
        sb_feed_close(&feed);
    free(ep);
    return rc;
}

int sb_cmd_train(int argc, char **argv)
{
    sb_train_opts to = {
        .threads = sb_default_threads(),
        .batch = 256,
        .epochs = 2,
        .order = SHR_ORDER_RANDOM,
        .step = {.kind = SB_STEP_EMULATED, .step_ms = SB_DEFAULT_STEP_MS, .model_side = 16,
                 .hidden = 128, .lr = 0.05f, .device = SB_DEVICE_AUTO},
    };
    int have_model = 0, have_step = 0;
    const sb_common common = SB_COMMON_OF(to);
    uint64_t v;
    double d;
    int c, rc;
    sb_tf_init(&to.tf);
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":j:b:e:", sb_longopts(SB_CMD_TRAIN), NULL)) != -1) {
        switch (c) {
        case OPT_MODEL:
            if (strcmp(optarg, "softmax") == 0)
                to.step.model = SB_MODEL_SOFTMAX;
            else if (strcmp(optarg, "mlp") == 0)
                to.step.model = SB_MODEL_MLP;
            else
                return sb_usage_error(sb_usage_train, "bad --model '%s' (softmax or mlp)", optarg);
            to.step.kind = SB_STEP_MODEL;
            have_model = 1;
            break;
        case OPT_STEP_MS:
            if (sb_parse_double(optarg, 0, 3600000, &d))
                return sb_usage_error(sb_usage_train, "bad --step-ms '%s' (0..3600000)", optarg);
            to.step.step_ms = d;
            have_step = 1;
            break;
        case OPT_SIDE:
            if (shc_parse_uint(optarg, 1, 512, &v))
                return sb_usage_error(sb_usage_train, "bad --side '%s' (1..512)", optarg);
            to.step.model_side = (uint32_t)v;
            break;
        case OPT_HIDDEN:
            if (shc_parse_uint(optarg, 1, 65536, &v))
                return sb_usage_error(sb_usage_train, "bad --hidden '%s' (1..65536)", optarg);
            to.step.hidden = (uint32_t)v;
            break;
        case OPT_LR:
            if (sb_parse_double(optarg, 1e-9, 1e3, &d))
                return sb_usage_error(sb_usage_train, "bad --lr '%s' (a positive number)", optarg);
            to.step.lr = (float)d;
            break;
        case OPT_DEVICE:
            if (strcmp(optarg, "auto") == 0)
                to.step.device = SB_DEVICE_AUTO;
            else if (strcmp(optarg, "cpu") == 0)
                to.step.device = SB_DEVICE_CPU;
            else if (strcmp(optarg, "gpu") == 0)
                to.step.device = SB_DEVICE_GPU;
            else
                return sb_usage_error(sb_usage_train, "bad --device '%s' (auto, cpu or gpu)", optarg);
            break;
        case OPT_PREFETCH:
            if (shc_parse_uint(optarg, 2, 65536, &v))
                return sb_usage_error(sb_usage_train, "bad --prefetch '%s' (2..65536)", optarg);
            to.prefetch = (uint32_t)v;
            break;
        case OPT_TIMELINE: to.timeline = optarg; break;
        default:
            if ((rc = sb_common_option(c, argc, argv, sb_usage_train, &common)) != 0)
                return rc;
        }
    }
    if (have_model && have_step)
        return sb_usage_error(sb_usage_train, "%s", "--model and --step-ms exclude each other");
    if (!have_step)
        to.step.step_ms = SB_DEFAULT_STEP_MS * to.batch / SB_DEFAULT_STEP_BATCH;
    if (optind >= argc)
        return sb_usage_error(sb_usage_train, "%s", "no DATASET given");
    if (optind + 1 < argc)
        return sb_usage_error(sb_usage_train, "unexpected argument '%s' (one DATASET)",
                           argv[optind + 1]);
    to.step.seed = to.seed;
    sb_target t = {.path = argv[optind]};
    /* sb_classify only checks that DATASET is a directory */
    sb_read_opts ro = {.have_size = 1};
    if (sb_classify(&t, &ro) != 0)
        return SB_EXIT_FAIL;
    if (t.kind == SB_FOLDER && sb_tf_any(&to.tf))
        return sb_usage_error(sb_usage_train, "the read-time transforms are the reader's: %s is an "
                           "image folder, not a shardc dataset", t.path);
    return run_train(t.path, &to) ? SB_EXIT_FAIL : SB_EXIT_OK;
}

/* ---- compare: every format from one source ---- */
