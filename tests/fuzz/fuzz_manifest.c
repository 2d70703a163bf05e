/* fuzz_manifest - manifest.json text (formats/manifest.md) from untrusted bytes.
 *
 * Beyond not crashing: a manifest that parses must survive a round trip (dump, parse again, dump
 * again gives the same text), and fmt_manifest_find_shard must name a shard that holds the index
 * asked for.
 */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "manifest.h"

static void fz_find(const fmt_manifest *m, uint64_t idx)
{
    long k = fmt_manifest_find_shard(m, idx);
    if (idx >= m->samples) {
        FZ_ASSERT(k == -1);
        return;
    }
    FZ_ASSERT(k >= 0 && (size_t)k < m->nshards);
    const fmt_manifest_shard *s = &m->shards[k];
    FZ_ASSERT(s->first <= idx && idx - s->first < s->samples);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fmt_manifest m, m2;
    fmt_msg msg;
    if (fmt_manifest_parse((const char *)data, size, &m, &msg) != 0)
        return 0;
    FZ_ASSERT(m.channels == 1 || m.channels == 3);
    FZ_ASSERT(m.nshards == 0 || m.shards != NULL);
    uint64_t probes[] = {0, 1, m.samples / 2, m.samples ? m.samples - 1 : 0, m.samples,
                         UINT64_MAX};
    for (size_t i = 0; i < sizeof probes / sizeof *probes; i++)
        fz_find(&m, probes[i]);
    for (size_t i = 0; i < m.nshards && i < 64; i++)
        if (m.shards[i].samples)
            fz_find(&m, m.shards[i].first + m.shards[i].samples - 1);

    char *text = NULL, *text2 = NULL;
    FZ_ASSERT(fmt_manifest_dump(&m, &text) == 0);
    int rc = fmt_manifest_parse(text, strlen(text), &m2, &msg);
    if (rc != 0)
        fprintf(stderr, "re-parse failed: %s\n", fmt_reason(&msg, rc));
    FZ_ASSERT(rc == 0);
    FZ_ASSERT(fmt_manifest_dump(&m2, &text2) == 0);
    FZ_ASSERT(strcmp(text, text2) == 0);
    free(text);
    free(text2);
    fmt_manifest_free(&m2);
    fmt_manifest_free(&m);
    return 0;
}
