/* report.c - measurement (wall clock and rusage spans, rows of epochs) and the read report: the
 * table and the JSON rows. */
#include "bench.h"

sb_mark sb_mark_now(void)
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

void sb_span_close(sb_span *s, sb_mark from, sb_mark to)
{
    s->wall_s += to.wall - from.wall;
    s->cpu_s += to.cpu - from.cpu;
}

int sb_row_init(sb_row *row, const char *dataset, const char *format, uint32_t epochs)
{
    memset(row, 0, sizeof *row);
    row->dataset = dataset;
    snprintf(row->format, sizeof row->format, "%s", format);
    row->epochs = epochs;
    row->spans = calloc(epochs, sizeof *row->spans);
    return row->spans ? 0 : sb_no_memory();
}

void sb_row_free(sb_row *row)
{
    free(row->spans);
    row->spans = NULL;
    XXH3_freeState(row->digest);
    row->digest = NULL;
}

/* The measured span (steady state: epochs 2..E; or the only epoch) and all epochs together. */
sb_span sb_row_measured(const sb_row *row)
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

double sb_rate(double x, double s)
{
    return s > 0 ? x / s : 0;
}

/* ---- page cache eviction ---- */

static void print_span_json(const sb_span *s)
{
    printf("\"images\": %" PRIu64 ", \"wall_s\": %.6f, \"images_per_s\": %.1f, \"mb_per_s\": %.1f, "
           "\"cpu_s_per_image\": %.6g", s->images, s->wall_s, sb_rate((double)s->images, s->wall_s),
           sb_rate((double)s->bytes / 1e6, s->wall_s), sb_rate(s->cpu_s, (double)s->images));
}

void sb_report_row(sb_report *rep, const sb_read_opts *ro, const sb_row *row)
{
    sb_span m = sb_row_measured(row);
    double ips = sb_rate((double)m.images, m.wall_s);
    if (!rep->have_first) {
        rep->first_rate = ips;
        rep->have_first = 1;
    }
    const char *order = sb_order_name(ro->order);
    char measured[32];
    if (row->epochs > 2)
        snprintf(measured, sizeof measured, "2-%u", row->epochs);
    else if (row->epochs == 2)
        snprintf(measured, sizeof measured, "2");
    else
        snprintf(measured, sizeof measured, "1");
    if (rep->json) {
        printf("{\"dataset\": ");
        shc_json_string(stdout, row->dataset);
        printf(", \"format\": \"%s\", \"images\": %" PRIu64 ", \"epochs\": %u, "
               "\"measured_epochs\": \"%s\", \"measured_images\": %" PRIu64 ", \"wall_s\": %.6f, "
               "\"images_per_s\": %.1f, \"mb_per_s\": %.1f, \"cpu_s_per_image\": %.6g, "
               "\"threads\": %u, \"batch\": %u, \"order\": \"%s\", \"seed\": %" PRIu64 ", "
               "\"access\": \"%s\", \"cold\": %s, \"width\": %u, \"height\": %u, "
               "\"channels\": %u, \"errors\": %" PRIu64,
               row->format, row_images(row), row->epochs, measured,
               m.images, m.wall_s, ips, sb_rate((double)m.bytes / 1e6, m.wall_s),
               sb_rate(m.cpu_s, (double)m.images), ro->threads, ro->batch, order, ro->seed,
               strcmp(row->format, "folder") == 0 ? "read" :
               strcmp(row->format, "memcpy") == 0 ? "mmap" : sb_access_name(ro->access),
               ro->cold ? "true" : "false", row->width, row->height, row->channels, row->errors);
        printf(", \"replaced\": %" PRIu64 ", \"skipped\": %" PRIu64, row->recovery.replaced,
               row->recovery.skipped);
        if (row->have_ring)
            printf(", \"pinned\": %s, \"ring_bytes\": %" PRIu64, row->pinned ? "true" : "false",
                   row->ring_bytes);
        if (ro->cold)
            printf(", \"resident_after_evict\": %.4f", row->resident);
        if (row->digest)
            printf(", \"checksum\": \"%016" PRIx64 "\"", XXH3_64bits_digest(row->digest));
        if (sb_tf_any(&ro->tf) && strcmp(row->format, "memcpy") != 0) {
            char tf[256];
            printf(", \"transform\": ");
            shc_json_string(stdout, sb_tf_describe(&ro->tf, tf, sizeof tf));
        }
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
           m.images, m.wall_s, ips, sb_rate((double)m.bytes / 1e6, m.wall_s),
           sb_rate(m.cpu_s, (double)m.images), ratio);
    fflush(stdout);
}

/* ---- read ---- */

/* A filesystem that ignores DONTNEED (some network and overlay filesystems) would make a cold
 * run warm without a sign; say so. */
void sb_warn_resident(const sb_row *row)
{
    if (row->resident > 0.1)
        fprintf(stderr, "shardbench: warning: %s: %.0f%% of its pages stayed in the page cache "
                "after eviction; the cold figures are partly warm\n", row->dataset,
                row->resident * 100);
}

double sb_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void sb_print_json_double(double v, const char *fmt)
{
    if (isfinite(v))
        printf(fmt, v);
    else
        printf("null");
}

double sb_pct(double x, double of)
{
    return of > 0 ? 100.0 * x / of : 0;
}
