/* lmdbcheck.c - our own check of what LMDB trusts: the page structure of a shard's data.mdb,
 * walked before liblmdb opens it (lmdbcheck.h; formats/lmdb.md, "What a reader checks before
 * LMDB").
 *
 * LMDB trusts its file: a page size of 0 in a meta page divides by zero inside mdb_env_open, a
 * second meta page naming a larger page size makes it read past the file, a root page number of 0
 * or 1 fails an assertion, and one flipped byte in the header of a branch or leaf page (its key
 * count, a node offset, a node's sizes) sends mdb_cursor_get out of bounds (SIGSEGV). So before
 * LMDB sees a shard, fmt_lmdb_tree_check walks the same structure with bounds checks of its own,
 * from the newer meta page down every branch and leaf page of the main database, and refuses
 * anything LMDB could not have written. The walk also hashes what it read (both meta pages, every
 * branch and leaf page, every overflow page header), which is the pin the manifest records:
 * damage that keeps the structure plausible still differs from the pin.
 *
 * Offsets are those of liblmdb's structures (MDB_page, MDB_meta, MDB_db, MDB_node) on a 64-bit
 * little-endian host, the only kind this backend writes and reads. */
#include "lmdbcheck.h"
#include "lmdb_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "le.h"

uint64_t fmt_lmdb_page_size(void)
{
    long ps = sysconf(_SC_PAGESIZE);
    if (ps <= 0)
        return 4096;
    return (uint64_t)ps > LM_MAX_PAGE ? LM_MAX_PAGE : (uint64_t)ps;
}

_Static_assert(sizeof(void *) == 8 && sizeof(size_t) == 8, "meta page offsets assume 64 bits");
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the lmdb page checks assume a little-endian host"
#endif

enum {
    LM_P_BRANCH = 0x01, LM_P_LEAF = 0x02, LM_P_OVERFLOW = 0x04,
    LM_F_BIGDATA = 0x01,
    LM_MAX_DEPTH = 32,          /* liblmdb's CURSOR_STACK */
    /* in a meta page (after the 16-byte page header): */
    LM_M_MAGIC = 16, LM_M_VERSION = 20, LM_M_PSIZE = 40, LM_M_MAIN = 88, LM_M_LAST = 136,
    LM_M_TXNID = 144, LM_M_END = 152,
    /* in MDB_db: */
    LM_DB_FLAGS = 4, LM_DB_DEPTH = 6, LM_DB_ENTRIES = 32, LM_DB_ROOT = 40,
};

typedef struct {
    const uint8_t *map;
    uint64_t size, psize, npages;
    uint8_t *seen;              /* one bit per page: each tree page is met once */
    XXH3_state_t *st;
    uint64_t entries;
    fmt_lmdb_value *vals;       /* NULL: not collected */
    uint64_t nvals, vcap;
    int want_vals;
    fmt_lmdb_value skel;        /* the __shardc__/index value (size 0: none met) */
    fmt_msg *msg;
} lm_tree;

/* Record a sample key's value (an 8-byte key; reserved keys are never 8 bytes long), or the
 * index key's. */
static int lm_tree_value(lm_tree *t, const uint8_t *key, uint64_t ksize, uint64_t off,
                         uint64_t size)
{
    if (ksize == strlen(LM_INDEX_KEY) && memcmp(key, LM_INDEX_KEY, ksize) == 0)
        t->skel = (fmt_lmdb_value){off, size};
    if (!t->want_vals || ksize != 8)
        return 0;
    if (t->nvals == t->vcap) {
        uint64_t cap = t->vcap ? 2 * t->vcap : 64;
        fmt_lmdb_value *v = cap <= SIZE_MAX / sizeof *v ? realloc(t->vals, (size_t)cap * sizeof *v)
                                                        : NULL;
        if (!v)
            return ENOMEM;
        t->vals = v;
        t->vcap = cap;
    }
    t->vals[t->nvals++] = (fmt_lmdb_value){off, size};
    return 0;
}

static int lm_tree_page(lm_tree *t, uint64_t pgno, unsigned depth, unsigned leaf_depth)
{
    if (pgno < 2 || pgno >= t->npages)
        return fmt_fail(t->msg, FMT_ECORRUPT, "lmdb page %" PRIu64 ": page number out of range "
                        "(pages 2..%" PRIu64 ")", pgno, t->npages - 1);
    if (t->seen[pgno / 8] & (1u << (pgno % 8)))
        return fmt_fail(t->msg, FMT_ECORRUPT, "lmdb page %" PRIu64 ": reached twice", pgno);
    t->seen[pgno / 8] |= (uint8_t)(1u << (pgno % 8));
    const uint8_t *p = t->map + pgno * t->psize;
    uint16_t flags = fmt_le_get16(p + 10), lower = fmt_le_get16(p + 12);
    uint16_t upper = fmt_le_get16(p + 14);
    int leaf = depth == leaf_depth;
    if (fmt_le_get64(p) != pgno || flags != (leaf ? LM_P_LEAF : LM_P_BRANCH))
        return fmt_fail(t->msg, FMT_ECORRUPT, "lmdb page %" PRIu64 ": bad page header (number %"
                        PRIu64 ", flags 0x%x at depth %u of %u)", pgno, fmt_le_get64(p), flags,
                        depth, leaf_depth);
    if (lower < LM_PAGE_HEADER + 2 || (lower - LM_PAGE_HEADER) % 2 || lower > upper ||
        upper > t->psize)
        return fmt_fail(t->msg, FMT_ECORRUPT, "lmdb page %" PRIu64 ": bad free-space bounds (%u, "
                        "%u)", pgno, lower, upper);
    XXH3_64bits_update(t->st, p, (size_t)t->psize);
    unsigned nkeys = (lower - LM_PAGE_HEADER) / 2u;
    for (unsigned i = 0; i < nkeys; i++) {
        uint64_t off = fmt_le_get16(p + LM_PAGE_HEADER + 2 * i);
        if (off < upper || off + 8 > t->psize)
            return fmt_fail(t->msg, FMT_ECORRUPT, "lmdb page %" PRIu64 ": node %u at bad offset %"
                            PRIu64, pgno, i, off);
        const uint8_t *n = p + off;
        uint64_t lo = fmt_le_get16(n), hi = fmt_le_get16(n + 2);
        uint64_t nflags = fmt_le_get16(n + 4), ksize = fmt_le_get16(n + 6);
        uint64_t data = off + 8 + ksize;
        if (data > t->psize)
            return fmt_fail(t->msg, FMT_ECORRUPT, "lmdb page %" PRIu64 ": node %u: key runs past "
                            "the page", pgno, i);
        if (!leaf) {
            int rc = lm_tree_page(t, lo | hi << 16 | nflags << 32, depth + 1, leaf_depth);
            if (rc)
                return rc;
            continue;
        }
        uint64_t dsize = lo | hi << 16;
        t->entries++;
        if (nflags == 0) {
            if (data + dsize > t->psize)
                return fmt_fail(t->msg, FMT_ECORRUPT, "lmdb page %" PRIu64 ": node %u: value "
                                "runs past the page", pgno, i);
            if (lm_tree_value(t, n + 8, ksize, pgno * t->psize + data, dsize) != 0)
                return ENOMEM;
            continue;
        }
        if (nflags != LM_F_BIGDATA || data + 8 > t->psize)
            return fmt_fail(t->msg, FMT_ECORRUPT, "lmdb page %" PRIu64 ": node %u: bad flags 0x%"
                            PRIx64, pgno, i, nflags);
        uint64_t ov = fmt_le_get64(p + data), pages = (LM_PAGE_HEADER - 1 + dsize) / t->psize + 1;
        if (ov < 2 || ov >= t->npages || pages > t->npages - ov)
            return fmt_fail(t->msg, FMT_ECORRUPT, "lmdb page %" PRIu64 ": node %u: overflow "
                            "value (page %" PRIu64 ", %" PRIu64 " bytes) outside the file", pgno,
                            i, ov, dsize);
        const uint8_t *o = t->map + ov * t->psize;
        uint32_t opages;
        memcpy(&opages, o + 12, 4);
        if (fmt_le_get64(o) != ov || fmt_le_get16(o + 10) != LM_P_OVERFLOW || opages < pages ||
            opages > t->npages - ov)
            return fmt_fail(t->msg, FMT_ECORRUPT, "lmdb page %" PRIu64 ": bad overflow page "
                            "header", ov);
        XXH3_64bits_update(t->st, o, LM_PAGE_HEADER);
        if (lm_tree_value(t, n + 8, ksize, ov * t->psize + LM_PAGE_HEADER, dsize) != 0)
            return ENOMEM;
    }
    return 0;
}

int fmt_lmdb_tree_check(const char *data, uint64_t *pin, fmt_lmdb_value *skel, fmt_msg *msg)
{
    int fd = open(data, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return fmt_fail(msg, errno, "data.mdb: %s", fmt_strerror(errno));
    int rc = fmt_lmdb_tree_walk(fd, pin, NULL, NULL, skel, msg);
    close(fd);
    return rc;
}

int fmt_lmdb_tree_walk(int fd, uint64_t *pin, fmt_lmdb_value **vals, uint64_t *nvals,
                       fmt_lmdb_value *skel, fmt_msg *msg)
{
    const uint32_t magic = 0xBEEFC0DEu;    /* MDB_MAGIC */
    struct stat st;
    lm_tree t = {.msg = msg, .want_vals = vals != NULL};
    if (vals) {
        *vals = NULL;
        *nvals = 0;
    }
    void *map = MAP_FAILED;
    int rc = 0;
    if (fstat(fd, &st) != 0) {
        rc = fmt_fail(msg, errno, "data.mdb: %s", fmt_strerror(errno));
        goto leave;
    }
    t.size = (uint64_t)st.st_size;
    if (t.size == 0) {
        rc = fmt_fail(msg, FMT_ETRUNC, "data.mdb is empty");
        goto leave;
    }
    if (t.size < LM_M_END || t.size > SIZE_MAX / 2) {
        rc = fmt_fail(msg, FMT_ETRUNC, "data.mdb is %" PRIu64 " bytes, too short for an lmdb "
                      "environment", t.size);
        goto leave;
    }
    map = mmap(NULL, (size_t)t.size, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        rc = fmt_fail(msg, errno, "data.mdb: cannot map: %s", fmt_strerror(errno));
        goto leave;
    }
    t.map = map;
    /* meta page 0 names the page size, which places meta page 1 */
    uint32_t ps[2], m;
    memcpy(&m, t.map + LM_M_MAGIC, 4);
    memcpy(&ps[0], t.map + LM_M_PSIZE, 4);
    if (m != magic || (2 * (uint64_t)ps[0] > t.size && ps[0] <= LM_MAX_PAGE)) {
        if (t.size < 2 * fmt_lmdb_page_size() || m == magic)
            rc = fmt_fail(msg, FMT_ETRUNC, "data.mdb is %" PRIu64 " bytes, too short for an "
                          "lmdb environment", t.size);
        else
            rc = fmt_fail(msg, FMT_EFORMAT, "data.mdb is not an lmdb environment");
        goto leave;
    }
    if (ps[0] < 512 || ps[0] > LM_MAX_PAGE || (ps[0] & (ps[0] - 1)) != 0) {
        rc = fmt_fail(msg, FMT_ECORRUPT, "lmdb meta page 0: bad page size %" PRIu32, ps[0]);
        goto leave;
    }
    const uint8_t *meta[2] = {t.map, t.map + ps[0]};
    memcpy(&m, meta[1] + LM_M_MAGIC, 4);
    memcpy(&ps[1], meta[1] + LM_M_PSIZE, 4);
    if (m != magic || ps[1] != ps[0]) {
        rc = fmt_fail(msg, FMT_ECORRUPT, "lmdb meta page 1: bad magic or page size");
        goto leave;
    }
    t.psize = ps[0];
    const uint8_t *cur = fmt_le_get64(meta[0] + LM_M_TXNID) < fmt_le_get64(meta[1] + LM_M_TXNID)
                             ? meta[1] : meta[0];
    int which = cur == meta[1];
    const uint8_t *db = cur + LM_M_MAIN;
    uint64_t last = fmt_le_get64(cur + LM_M_LAST), root = fmt_le_get64(db + LM_DB_ROOT);
    unsigned depth = fmt_le_get16(db + LM_DB_DEPTH);
    if (last < 1 || last >= t.size / t.psize) {
        rc = fmt_fail(msg, FMT_ETRUNC, "data.mdb is %" PRIu64 " bytes, its meta page %d says %"
                      PRIu64 " pages of %" PRIu64, t.size, which, last + 1, t.psize);
        goto leave;
    }
    t.npages = last + 1;
    if (fmt_le_get16(db + LM_DB_FLAGS) != 0) {
        rc = fmt_fail(msg, FMT_ECORRUPT, "main database has flags 0x%x",
                      fmt_le_get16(db + LM_DB_FLAGS));
        goto leave;
    }
    if (!(t.seen = calloc((size_t)(t.npages / 8 + 1), 1)) || !(t.st = XXH3_createState())) {
        rc = ENOMEM;
        goto leave;
    }
    XXH3_64bits_reset(t.st);
    XXH3_64bits_update(t.st, t.map, 2 * (size_t)t.psize);
    if (root == UINT64_MAX) {
        if (depth != 0)
            rc = fmt_fail(msg, FMT_ECORRUPT, "lmdb meta page %d: empty database of depth %u",
                          which, depth);
    } else if (depth < 1 || depth > LM_MAX_DEPTH) {
        rc = fmt_fail(msg, FMT_ECORRUPT, "lmdb meta page %d: bad tree depth %u", which, depth);
    } else {
        rc = lm_tree_page(&t, root, 1, depth);
    }
    if (!rc && t.entries != fmt_le_get64(db + LM_DB_ENTRIES))
        rc = fmt_fail(msg, FMT_ECORRUPT, "lmdb tree holds %" PRIu64 " entries, its meta page %"
                      PRIu64, t.entries, fmt_le_get64(db + LM_DB_ENTRIES));
    if (!rc && pin)
        *pin = XXH3_64bits_digest(t.st);
    if (!rc && skel)
        *skel = t.skel;
    if (!rc && vals) {
        *vals = t.vals;
        *nvals = t.nvals;
        t.vals = NULL;
    }
leave:
    if (map != MAP_FAILED)
        munmap(map, (size_t)t.size);
    XXH3_freeState(t.st);
    free(t.seen);
    free(t.vals);
    return rc;
}
