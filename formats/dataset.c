/* dataset.c - a dataset directory: the manifest plus its mapped raw shards. */
#include "dataset.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "raw.h"

struct fmt_dataset {
    fmt_manifest man;
    fmt_raw_shard **shards;     /* one per manifest shard */
};

int fmt_dataset_open(fmt_dataset **out, const char *dir, fmt_msg *msg)
{
    *out = NULL;
    fmt_dataset *d = calloc(1, sizeof *d);
    if (!d)
        return ENOMEM;
    char *path = NULL;
    int rc = fmt_manifest_read(dir, &d->man, msg);
    if (rc)
        goto leave;
    if (strcmp(d->man.backend, "raw") != 0) {
        rc = fmt_fail(msg, FMT_EUNSUPPORTED, "%s/manifest.json: backend '%s' is not supported",
                      dir, d->man.backend);
        goto leave;
    }
    d->shards = calloc(d->man.nshards ? d->man.nshards : 1, sizeof *d->shards);
    if (!d->shards) {
        rc = ENOMEM;
        goto leave;
    }
    for (size_t i = 0; i < d->man.nshards; i++) {
        const fmt_manifest_shard *ms = &d->man.shards[i];
        free(path);
        if (asprintf(&path, "%s/%s", dir, ms->file) < 0) {
            path = NULL;
            rc = ENOMEM;
            goto leave;
        }
        fmt_msg sub = {{0}};
        rc = fmt_raw_open(&d->shards[i], path, &sub);
        if (rc) {
            fmt_fail(msg, rc, "%s: %s", path, fmt_reason(&sub, rc));
            goto leave;
        }
        const fmt_raw_header *h = fmt_raw_get_header(d->shards[i]);
        if (h->header_hash != ms->hash || h->sample_count != ms->samples ||
            h->first_index != ms->first || h->file_size != ms->bytes) {
            rc = fmt_fail(msg, FMT_ECORRUPT, "%s: does not match the manifest (%s)", path,
                          h->header_hash != ms->hash ? "header hash differs" : "counts differ");
            goto leave;
        }
    }
    *out = d;
    d = NULL;
leave:
    free(path);
    fmt_dataset_close(d);
    return rc;
}

void fmt_dataset_close(fmt_dataset *d)
{
    if (!d)
        return;
    for (size_t i = 0; d->shards && i < d->man.nshards; i++)
        fmt_raw_close(d->shards[i]);
    free(d->shards);
    fmt_manifest_free(&d->man);
    free(d);
}

const fmt_manifest *fmt_dataset_manifest(const fmt_dataset *d)
{
    return &d->man;
}

uint64_t fmt_dataset_count(const fmt_dataset *d)
{
    return d->man.samples;
}

int fmt_dataset_get(const fmt_dataset *d, uint64_t idx, fmt_sample *s)
{
    long si = fmt_manifest_find_shard(&d->man, idx);
    if (si < 0)
        return FMT_EINVAL;
    const fmt_raw_shard *sh = d->shards[si];
    uint64_t local = idx - d->man.shards[si].first;
    fmt_raw_entry e;
    fmt_raw_get_entry(sh, local, &e);
    s->index = idx;
    s->label = e.label;
    s->height = e.height;
    s->width = e.width;
    s->channels = e.channels;
    s->source = e.source;
    s->hash = e.hash;
    s->length = e.length;
    s->pixels = fmt_raw_pixels(sh, local);
    s->aux = fmt_raw_aux(sh, local, &s->aux_len);
    return 0;
}

int fmt_dataset_check(const fmt_dataset *d, uint64_t idx)
{
    long si = fmt_manifest_find_shard(&d->man, idx);
    if (si < 0)
        return FMT_EINVAL;
    return fmt_raw_check_sample(d->shards[si], idx - d->man.shards[si].first);
}
