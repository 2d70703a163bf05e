/* codec-bench - how the payload codecs do on a dataset's own samples: for each codec spec, the
 * compress ratio and single-thread compress and decompress rates over every sample of a dataset
 * (any backend), each sample on its own as shardc stores it. The measurement behind the choice of
 * LZ4 and Zstandard and their default levels (docs/FORMATS.md, "Compressed raw shards"; the
 * figures: docs/BENCHMARKS.md).
 *
 *   codec-bench [--reps N] DATASET SPEC...       e.g. codec-bench ds lz4 lz4:9 zstd:1 zstd:3
 *
 * Prints one markdown row per spec: stored / raw bytes, MB/s of raw bytes in and out (median of N
 * reps). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "benchutil.h"
#include "compress.h"
#include "dataset.h"

int main(int argc, char **argv)
{
    int reps = 3, first = 1;
    if (argc > 2 && strcmp(argv[1], "--reps") == 0) {
        reps = atoi(argv[2]);
        first = 3;
    }
    if (argc - first < 2 || reps < 1) {
        fprintf(stderr, "usage: codec-bench [--reps N] DATASET SPEC...\n");
        return 2;
    }
    fmt_dataset *ds;
    fmt_msg msg;
    int rc = fmt_dataset_open(&ds, argv[first], &msg);
    if (rc) {
        fprintf(stderr, "codec-bench: %s: %s\n", argv[first], fmt_reason(&msg, rc));
        return 1;
    }
    uint64_t n = fmt_dataset_count(ds), total = 0;
    uint8_t **px = calloc(n ? n : 1, sizeof *px);
    size_t *len = calloc(n ? n : 1, sizeof *len), maxlen = 0;
    for (uint64_t i = 0; i < n; i++) {
        fmt_sample s;
        fmt_dataset_get(ds, i, &s);
        len[i] = (size_t)s.length;
        px[i] = malloc(len[i]);
        if (!px[i] || fmt_dataset_read(ds, i, px[i], NULL)) {
            fprintf(stderr, "codec-bench: cannot read sample %llu\n", (unsigned long long)i);
            return 1;
        }
        total += len[i];
        if (len[i] > maxlen)
            maxlen = len[i];
    }
    fmt_dataset_close(ds);
    printf("| codec | stored / raw | compress MB/s | decompress MB/s |\n|---|---:|---:|---:|\n");
    for (int a = first + 1; a < argc; a++) {
        fmt_codec_spec spec;
        if (fmt_codec_parse(argv[a], &spec, &msg) || spec.codec == FMT_CODEC_NONE) {
            fprintf(stderr, "codec-bench: %s\n", msg.text);
            return 2;
        }
        size_t cap = fmt_compress_bound(spec.codec, maxlen);
        uint8_t **enc = calloc(n ? n : 1, sizeof *enc);
        size_t *elen = calloc(n ? n : 1, sizeof *elen);
        uint8_t *back = malloc(maxlen ? maxlen : 1);
        double *tc = calloc((size_t)reps, sizeof *tc), *td = calloc((size_t)reps, sizeof *td);
        uint64_t stored = 0;
        for (uint64_t i = 0; i < n; i++)
            enc[i] = malloc(cap);
        for (int r = 0; r < reps; r++) {
            double t0 = now();
            stored = 0;
            for (uint64_t i = 0; i < n; i++) {
                if (fmt_compress(&spec, px[i], len[i], enc[i], cap, &elen[i]))
                    return 1;
                stored += elen[i];
            }
            double t1 = now();
            for (uint64_t i = 0; i < n; i++)
                if (fmt_decompress(spec.codec, enc[i], elen[i], back, len[i]) ||
                    memcmp(back, px[i], len[i]) != 0) {
                    fprintf(stderr, "codec-bench: %s does not round-trip\n", argv[a]);
                    return 1;
                }
            double t2 = now();
            tc[r] = t1 - t0;
            td[r] = t2 - t1;
        }
        qsort(tc, (size_t)reps, sizeof *tc, cmp_dbl);
        qsort(td, (size_t)reps, sizeof *td, cmp_dbl);
        printf("| %s | %.3f | %.0f | %.0f |\n", argv[a], (double)stored / (double)total,
               (double)total / tc[reps / 2] / 1e6, (double)total / td[reps / 2] / 1e6);
        for (uint64_t i = 0; i < n; i++)
            free(enc[i]);
        free(enc);
        free(elen);
        free(back);
        free(tc);
        free(td);
    }
    return 0;
}
