/* fuzz_lmdb - an lmdb shard (formats/lmdb.md) from untrusted bytes: the input is the data.mdb of a
 * shard-00000.lmdb directory, opened through fmt_backend_lmdb's r_open, then every sample through
 * r_get, r_read and r_check.
 *
 * The metadata value is hash-protected. Each input therefore runs twice: as it is, and, when it
 * holds the metadata magic "SHARDLMD" with 128 bytes after it, with meta_hash recomputed over the
 * mutated metadata, so that the fuzzer reaches the checks behind the hash.
 *
 * LMDB reads its B-tree pages trusting their contents (lmdb.md, "Trust boundary"): a damaged branch
 * or leaf page (node offsets, node sizes, overflow page counts) makes liblmdb itself read out of
 * bounds. Those crashes are LMDB's, not ours, and would hide everything else, so inputs whose
 * B-tree fails fz_lmdb_tree_ok below are not opened (unless FUZZ_LMDB_UNFILTERED is set in the
 * environment, to look for LMDB's crashes on purpose). The check walks the pages LMDB will read:
 * everything else in the file (meta pages, keys, values with their headers, pixels and aux
 * records, the metadata value) reaches our code. See tests/fuzz/README.md.
 */
#include "common.h"

#include <stdlib.h>
#include <string.h>

/* liblmdb 0.9 on-disk layout (mdb.c), 64-bit little-endian host, as lmdb.c assumes */
#define LP_HDR 16u              /* PAGEHDRSZ: pgno u64, pad u16, flags u16, lower u16, upper u16 */
#define LP_BRANCH 0x01u
#define LP_LEAF 0x02u
#define LP_OVERFLOW 0x04u
#define LP_NODE 8u              /* NODESIZE: lo u16, hi u16, flags u16, ksize u16 */
#define LP_BIGDATA 0x01u        /* F_BIGDATA: the data is the page number of overflow pages */
#define LP_STACK 32u            /* CURSOR_STACK: deepest tree a cursor can walk */
#define LP_INVALID UINT64_MAX   /* P_INVALID: the root of an empty database */

typedef struct {
    const uint8_t *b;
    uint64_t psize, last;       /* page size, last page in use */
    uint8_t *seen;              /* pages already walked (a damaged tree may loop) */
} lp_tree;

static uint16_t lp_get16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static const uint8_t *lp_page(const lp_tree *t, uint64_t pgno)
{
    if (pgno < 2 || pgno > t->last || t->seen[pgno])
        return NULL;
    t->seen[pgno] = 1;
    return t->b + pgno * t->psize;
}

/* Page pgno and the subtree below it, as mdb_page_get / mdb_node_read / cursors use them. */
static int lp_walk(lp_tree *t, uint64_t pgno, unsigned depth)
{
    const uint8_t *p = lp_page(t, pgno);
    if (!p || depth > LP_STACK || fz_get64(p) != pgno)
        return 0;
    uint16_t flags = lp_get16(p + 10), lower = lp_get16(p + 12), upper = lp_get16(p + 14);
    if ((flags != LP_BRANCH && flags != LP_LEAF) || lower < LP_HDR + 2 || (lower - LP_HDR) % 2 ||
        lower > upper || upper > t->psize)
        return 0;
    unsigned n = (lower - LP_HDR) / 2u;
    for (unsigned i = 0; i < n; i++) {
        uint64_t off = lp_get16(p + LP_HDR + 2 * i);
        if (off < upper || off + LP_NODE > t->psize)
            return 0;
        const uint8_t *node = p + off;
        uint64_t lo = lp_get16(node), hi = lp_get16(node + 2), nflags = lp_get16(node + 4);
        uint64_t ksize = lp_get16(node + 6), end = off + LP_NODE + ksize;
        if (end > t->psize)
            return 0;
        if (flags == LP_BRANCH) {
            if (!lp_walk(t, lo | hi << 16 | nflags << 32, depth + 1))
                return 0;
            continue;
        }
        uint64_t dsize = lo | hi << 16;
        if (nflags == 0) {
            if (end + dsize > t->psize)
                return 0;
        } else if (nflags == LP_BIGDATA) {
            if (end + 8 > t->psize)
                return 0;
            uint64_t first = fz_get64(node + LP_NODE + ksize);
            const uint8_t *o = lp_page(t, first);
            if (!o || lp_get16(o + 10) != LP_OVERFLOW)
                return 0;
            uint64_t pages = fz_get32(o + 12);
            if (!pages || pages - 1 > t->last - first || dsize > pages * t->psize - LP_HDR)
                return 0;
            for (uint64_t k = 1; k < pages; k++)
                t->seen[first + k] = 1;
        } else {
            return 0;
        }
    }
    return 1;
}

/* Is the main database's B-tree one liblmdb can walk without reading outside the file? Files
 * that are not an LMDB environment at all pass: LMDB refuses them itself. */
static int fz_lmdb_tree_ok(const uint8_t *b, size_t size)
{
    if (size < 2 * (size_t)LP_HDR + 136 || fz_get32(b + 16) != 0xBEEFC0DEu)
        return 1;
    uint64_t psize = fz_get32(b + 40);
    if (psize < 512 || psize > 32768 || (psize & (psize - 1)) || size < psize + LP_HDR + 136 ||
        fz_get32(b + psize + 40) != psize)
        return 1;   /* lmdb.c refuses these before LMDB sees them (or LMDB does) */
    const uint8_t *m0 = b + LP_HDR, *m1 = b + psize + LP_HDR;
    const uint8_t *m = fz_get64(m0 + 128) < fz_get64(m1 + 128) ? m1 : m0;    /* newest txnid */
    uint64_t last = fz_get64(m + 120), root = fz_get64(m + 112);
    if (last >= size / psize)
        return 1;   /* lmdb.c refuses a file shorter than its meta page says */
    if (root == LP_INVALID || root < 2 || root > last)
        return 1;   /* an empty database, or a root lmdb.c refuses */
    lp_tree t = {.b = b, .psize = psize, .last = last,
                 .seen = calloc(last + 1, 1)};
    FZ_ASSERT(t.seen != NULL);
    int ok = lp_walk(&t, root, 1);
    free(t.seen);
    return ok;
}

static void fz_lmdb_run(const uint8_t *data, size_t size)
{
    static int unfiltered = -1;
    if (unfiltered < 0)
        unfiltered = getenv("FUZZ_LMDB_UNFILTERED") != NULL;
    if (!unfiltered && !fz_lmdb_tree_ok(data, size)) {
        fmt_msg msg;
        fz_trace("lmdb", fmt_fail(&msg, FMT_ECORRUPT, "damaged B-tree, not opened"), &msg);
        return;
    }
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
