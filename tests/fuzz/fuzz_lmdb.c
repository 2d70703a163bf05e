/* fuzz_lmdb - an lmdb shard (formats/lmdb.md) from untrusted bytes: the input is the data.mdb of a
 * shard-00000.lmdb directory, opened through fmt_backend_lmdb's r_open, then every sample through
 * r_get, r_read and r_check.
 *
 * The metadata value is hash-protected. Each input therefore runs twice: as it is, and, when it
 * holds the metadata magic "SHARDLMD" with 128 bytes after it, with meta_hash recomputed over the
 * mutated metadata, so that the fuzzer reaches the checks behind the hash.
 *
 * LMDB reads its B-tree pages trusting their contents: a damaged branch or leaf page (node
 * offsets, node sizes, overflow page counts) would make liblmdb itself read out of bounds. lmdb.c
 * walks those pages with bounds checks of its own before LMDB sees the file (lmdb.md, "What a
 * reader checks before LMDB"), so every input is opened: a crash inside liblmdb here is a hole
 * in that walk. See tests/fuzz/README.md.
 */
#include "common.h"

#include <stdlib.h>
#include <string.h>

static void fz_lmdb_run(const uint8_t *data, size_t size)
{
    char path[4096], dir[4096];
    fz_mkdir("shard-00000.lmdb");
    fz_write("shard-00000.lmdb/data.mdb", data, size, path, sizeof path);
    fz_path(dir, sizeof dir, "shard-00000.lmdb");
    fz_backend(&fmt_backend_lmdb, fz_dir(), dir, FMT_ACCESS_MMAP);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_lmdb_run(data, size);
    const uint8_t *m = size >= 128 ? memmem(data, size, "SHARDLMD", 8) : NULL;
    if (!m || (size_t)(m - data) > size - 128)
        return 0;
    size_t at = (size_t)(m - data);
    uint8_t *fixed = malloc(size);
    if (!fixed)
        return 0;
    memcpy(fixed, data, size);
    fz_put64(fixed + at + 120, fmt_hash64(fixed + at, 120));
    if (memcmp(fixed + at + 120, data + at + 120, 8) != 0)
        fz_lmdb_run(fixed, size);
    free(fixed);
    return 0;
}
