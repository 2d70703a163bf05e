/* dataset.h - read access to a dataset directory written by shardc: its manifest and shards.
 *
 * fmt_dataset_open reads and validates the manifest, then opens (maps) every shard and checks that
 * each matches its manifest entry (sample count, first index, size, header hash). Samples are then
 * addressed by dataset-wide index.
 *
 * Thread-safety: after open, a dataset is immutable; fmt_dataset_get and fmt_dataset_check may be
 * called from any number of threads at once.
 */
#ifndef FMT_DATASET_H
#define FMT_DATASET_H

#include "manifest.h"

typedef struct fmt_dataset fmt_dataset;

/* One sample as stored. pixels (and aux) point into the dataset's mapping: read-only, valid until
 * fmt_dataset_close. */
typedef struct {
    uint64_t index;             /* dataset-wide index */
    int32_t label;
    uint32_t height, width, channels;
    uint64_t source;            /* input position of the source image */
    uint64_t hash;              /* recorded hash of the pixels */
    const uint8_t *pixels;
    uint64_t length;
    const uint8_t *aux;
    uint32_t aux_len;
} fmt_sample;

/* Open the dataset in dir. Errors: those of fmt_manifest_read (ENOENT: no manifest), of
 * fmt_raw_open for a shard, FMT_ECORRUPT when a shard disagrees with the manifest,
 * FMT_EUNSUPPORTED for a backend this build cannot read. msg names the file at fault. */
int fmt_dataset_open(fmt_dataset **d, const char *dir, fmt_msg *msg);
void fmt_dataset_close(fmt_dataset *d);                 /* accepts NULL */

const fmt_manifest *fmt_dataset_manifest(const fmt_dataset *d);   /* valid until close */
uint64_t fmt_dataset_count(const fmt_dataset *d);

/* Sample idx. Returns 0, or FMT_EINVAL if idx >= count. */
int fmt_dataset_get(const fmt_dataset *d, uint64_t idx, fmt_sample *s);

/* Re-hash sample idx: 0 if it matches its recorded hash, FMT_EHASH if not, FMT_EINVAL bad idx. */
int fmt_dataset_check(const fmt_dataset *d, uint64_t idx);

#endif
