/* lmdbread.c - the reader of the lmdb backend (spec: formats/lmdb.md). Its entry points sit in
 * fmt_backend_lmdb (lmdb.c), which also holds the writer and the translation of LMDB's error
 * codes; the value and metadata layout both halves share is lmdb_int.h.
 *
 * LMDB's API makes no promise that one read transaction may be used by several threads
 * at once. So r_open walks the database once through LMDB, checks every key and value header, and
 * records where each value lies in the file (its offset in LMDB's map, which maps data.mdb from
 * its first byte). Then the environment is closed: an open environment holds a descriptor and a
 * mapping, and a reader may open any number of shards under a small `ulimit -n`. The shard maps
 * data.mdb itself (the descriptor closed once mapped) while the process-wide mapping cap allows
 * (fdcache.h), else it copies the value headers and aux records and reads pixels with pread on a
 * descriptor from the bounded cache, reopened on demand and checked to be the file validated.
 * After open no LMDB call is made: get, read and check are plain loads from the mapping (or
 * preads), safe from any number of threads; a mapped shard's pixel addresses stay valid until
 * r_close (data.mdb is the file the environment validated: same device and inode).
 */
#include "lmdb_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <lmdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "backend.h"
#include "fdcache.h"
#include "le.h"
#include "lmdbcheck.h"

/* ---- byte order helpers ---- */

static uint64_t get_be64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

/* ---- value codecs ---- */

typedef struct {
    int32_t label;
    uint32_t height, width, channels;
    uint64_t hash, source;
    uint32_t aux_len;
} lm_header;

static void lm_decode_header(const uint8_t *in, lm_header *h)
{
    h->label = (int32_t)fmt_le_get32(in + 8);
    h->height = fmt_le_get32(in + 12);
    h->width = fmt_le_get32(in + 16);
    h->channels = fmt_le_get32(in + 20);
    h->hash = fmt_le_get64(in + 24);
    h->source = fmt_le_get64(in + 32);
    h->aux_len = fmt_le_get32(in + 40);
}

/* Check the 48-byte header of local sample i's value, and its size into *total (lmdb.md, "What a
 * reader checks", item 5). */
static int lm_check_header(const uint8_t *v, uint64_t i, uint64_t *total, fmt_msg *msg)
{
    if (memcmp(v, LM_VALUE_MAGIC, 4) != 0)
        return fmt_fail(msg, FMT_ECORRUPT, "sample %" PRIu64 ": bad value magic", i);
    if (fmt_le_get16(v + 4) != LM_VALUE_VERSION)
        return fmt_fail(msg, FMT_EVERSION, "sample %" PRIu64 ": unsupported value version %u",
                        i, fmt_le_get16(v + 4));
    if (fmt_le_get16(v + 6) != LM_VALUE_HEADER)
        return fmt_fail(msg, FMT_ECORRUPT, "sample %" PRIu64 ": bad value header size %u", i,
                        fmt_le_get16(v + 6));
    lm_header h;
    lm_decode_header(v, &h);
    uint64_t len;
    int rc = fmt_sample_shape_check("sample", i, h.height, h.width, h.channels, h.label, msg);
    if (rc)
        return rc;
    if (fmt_shape_bytes(h.height, h.width, h.channels, &len) ||
        __builtin_add_overflow(len, (uint64_t)LM_VALUE_HEADER + h.aux_len, total) ||
        *total > UINT32_MAX)
        return fmt_fail(msg, FMT_ECORRUPT, "sample %" PRIu64 ": its header says %" PRIu32 "x%"
                        PRIu32 "x%" PRIu32 " pixels and %" PRIu32 " aux bytes, too large", i,
                        h.height, h.width, h.channels, h.aux_len);
    return 0;
}

/* Check the value of local sample i (n bytes). */
static int lm_check_value(const uint8_t *v, size_t n, uint64_t i, fmt_msg *msg)
{
    if (n < LM_VALUE_HEADER)
        return fmt_fail(msg, FMT_ECORRUPT, "sample %" PRIu64 ": value of %zu bytes is shorter "
                        "than its header", i, n);
    uint64_t total;
    int rc = lm_check_header(v, i, &total, msg);
    if (!rc && total != n) {
        lm_header h;
        lm_decode_header(v, &h);
        rc = fmt_fail(msg, FMT_ECORRUPT, "sample %" PRIu64 ": value is %zu bytes, its header "
                      "says %" PRIu32 "x%" PRIu32 "x%" PRIu32 " pixels and %" PRIu32
                      " aux bytes", i, n, h.height, h.width, h.channels, h.aux_len);
    }
    return rc;
}

/* ---- reading ---- */

typedef struct {
    uint64_t off, len;          /* the value: its offset in data.mdb, its size */
    const uint8_t *head;        /* its 48-byte header, in the mapping or in lm_shard.copy */
    const uint8_t *aux;         /* its aux record likewise (NULL without one) */
} lm_entry;

typedef struct {
    lm_entry *ent;              /* info.samples entries */
    fmt_shard_info info;
    const uint8_t *map;         /* data.mdb mapped (map_len bytes), or NULL: read with pread */
    size_t map_len;
    fmt_fdfile *file;           /* unmapped: data.mdb's descriptor, from the bounded cache */
    uint8_t *copy;              /* unmapped: every value's header and aux record */
    uint64_t lo, hi;            /* page-aligned span of data.mdb holding the values (advice) */
} lm_shard;

void fmt_lmr_close(void *p)
{
    lm_shard *s = p;
    if (!s)
        return;
    if (s->map) {
        munmap((void *)s->map, s->map_len);
        fmt_map_unreserve();
    }
    fmt_fdfile_free(s->file);
    free(s->copy);
    free(s->ent);
    free(s);
}

/* Decode and check the metadata value (lmdb.md, item 4). entries: keys in the database. */
static int lm_read_meta(lm_shard *s, const MDB_val *v, uint64_t entries, uint64_t file_size,
                        uint64_t *index_hash, fmt_msg *msg)
{
    const uint8_t *m = v->mv_data;
    if (v->mv_size < 8 || memcmp(m, LM_META_MAGIC, 8) != 0)
        return fmt_fail(msg, FMT_EFORMAT, "bad metadata magic (not a shardc lmdb shard)");
    if (v->mv_size < LM_META_SIZE)
        return fmt_fail(msg, FMT_ECORRUPT, "metadata value is %zu bytes, expected at least %u",
                        v->mv_size, LM_META_SIZE);
    if (fmt_le_get16(m + 8) != LM_META_MAJOR)
        return fmt_fail(msg, FMT_EVERSION, "unsupported version %u.%u (this reader knows %u.x)",
                        fmt_le_get16(m + 8), fmt_le_get16(m + 10), LM_META_MAJOR);
    if (XXH3_64bits(m, LM_META_HASHED) != fmt_le_get64(m + LM_META_HASHED))
        return fmt_fail(msg, FMT_EHASH, "bad metadata hash");
    uint32_t meta_size = fmt_le_get32(m + 12);
    if (meta_size < LM_META_SIZE || meta_size > v->mv_size)
        return fmt_fail(msg, FMT_ECORRUPT, "bad metadata size %" PRIu32, meta_size);
    fmt_shard_info *in = &s->info;
    in->samples = fmt_le_get64(m + 16);
    in->first_index = fmt_le_get64(m + 24);
    in->fingerprint = fmt_le_get64(m + 32);
    in->input_end = fmt_le_get64(m + 40);
    for (int c = 0; c < 3; c++) {
        in->sum[c] = fmt_le_get64(m + 48 + 8 * c);
        in->sumsq[c] = fmt_le_get64(m + 72 + 8 * c);
    }
    *index_hash = fmt_le_get64(m + 96);
    in->hash = fmt_le_get64(m + LM_META_HASHED);
    uint64_t end;
    if (__builtin_add_overflow(in->first_index, in->samples, &end))
        return fmt_fail(msg, FMT_ECORRUPT, "sample range overflows");
    /* every sample is a key, and a key takes at least 16 bytes of the file */
    if (in->samples >= entries || in->samples > file_size / 16)
        return fmt_fail(msg, FMT_ECORRUPT, "metadata says %" PRIu64 " samples, the database "
                        "holds %" PRIu64 " entries", in->samples, entries);
    return 0;
}

/* Walk every key (lmdb.md, items 5 and 6), recording where each sample's value lies. */
/* vals[0..nvals): where our own page walk (lmdbcheck.h) found the sample keys' values in the
 * file; LMDB must hand out the same values, at the same distances from each other in its map
 * (which maps the file from its first byte), for the offsets to be those of LMDB's values. */
static int lm_walk(lm_shard *s, MDB_txn *txn, MDB_dbi dbi, const fmt_lmdb_value *vals,
                   uint64_t nvals, uint64_t size, uint64_t index_hash, fmt_msg *msg)
{
    MDB_cursor *cur = NULL;
    XXH3_state_t *st = XXH3_createState();
    uint64_t got = 0, ps = fmt_lmdb_page_size();
    int rc = 0, mrc;
    if (!st) {
        rc = ENOMEM;
        goto leave;
    }
    XXH3_64bits_reset(st);
    mrc = mdb_cursor_open(txn, dbi, &cur);
    if (mrc) {
        rc = fmt_fail(msg, fmt_lm_code(mrc), "cannot open a cursor: %s", mdb_strerror(mrc));
        goto leave;
    }
    MDB_val k, v;
    MDB_cursor_op op = MDB_FIRST;
    while ((mrc = mdb_cursor_get(cur, &k, &v, op)) == 0) {
        op = MDB_NEXT;
        if (k.mv_size != 8) {
            size_t plen = strlen(LM_RESERVED_PREFIX);
            if (k.mv_size < plen || memcmp(k.mv_data, LM_RESERVED_PREFIX, plen) != 0) {
                rc = fmt_fail(msg, FMT_ECORRUPT, "unexpected key of %zu bytes", k.mv_size);
                goto leave;
            }
            continue;   /* a reserved key: the metadata, or one of a later minor version */
        }
        uint64_t idx = get_be64(k.mv_data);
        if (got >= s->info.samples) {
            rc = fmt_fail(msg, FMT_ECORRUPT, "more sample keys than the %" PRIu64 " the "
                          "metadata says", s->info.samples);
            goto leave;
        }
        if (idx != s->info.first_index + got) {
            rc = fmt_fail(msg, FMT_ECORRUPT, "key %" PRIu64 " found where %" PRIu64 " was "
                          "expected", idx, s->info.first_index + got);
            goto leave;
        }
        const uint8_t *val = v.mv_data;
        rc = lm_check_value(val, v.mv_size, got, msg);
        if (rc)
            goto leave;
        XXH3_64bits_update(st, val, LM_VALUE_HEADER);
        uint32_t aux_len = fmt_le_get32(val + 40);
        if (aux_len)
            XXH3_64bits_update(st, val + v.mv_size - aux_len, aux_len);
        uint64_t off = got < nvals ? vals[got].off : 0;
        if (got >= nvals || vals[got].size != v.mv_size || off > size || v.mv_size > size - off ||
            (got > 0 && (uintptr_t)val - (uintptr_t)s->ent[0].head != off - vals[0].off)) {
            rc = fmt_fail(msg, FMT_ECORRUPT, "sample %" PRIu64 ": lmdb and the page walk place "
                          "its value differently", got);
            goto leave;
        }
        if (got == 0)
            s->ent[0].head = val;   /* LMDB's address of the first value, until lm_settle */
        s->ent[got].off = off;
        s->ent[got].len = v.mv_size;
        uint64_t lo = off & ~(ps - 1), hi = fmt_lm_round_up(off + v.mv_size, ps);
        if (!s->hi || lo < s->lo)
            s->lo = lo;
        if (hi > s->hi)
            s->hi = hi;
        got++;
    }
    if (mrc != MDB_NOTFOUND) {
        rc = fmt_fail(msg, fmt_lm_code(mrc), "cannot walk the database: %s", mdb_strerror(mrc));
        goto leave;
    }
    if (got != s->info.samples) {
        rc = fmt_fail(msg, FMT_ECORRUPT, "%" PRIu64 " sample keys, the metadata says %" PRIu64,
                      got, s->info.samples);
        goto leave;
    }
    if (XXH3_64bits_digest(st) != index_hash)
        rc = fmt_fail(msg, FMT_EHASH, "bad index hash");
leave:
    if (cur)
        mdb_cursor_close(cur);
    XXH3_freeState(st);
    return rc;
}

/* Before LMDB sees the shard: size, structure, and the pin of the manifest. */
int fmt_lmr_precheck(const char *path, const fmt_manifest_shard *ms, fmt_msg *msg)
{
    char *data = fmt_path_join(path, "data.mdb", "");
    if (!data)
        return ENOMEM;
    struct stat st;
    int rc = 0;
    if (stat(data, &st) != 0) {
        rc = fmt_fail(msg, errno, "data.mdb: %s", fmt_strerror(errno));
    } else if ((uint64_t)st.st_size != ms->bytes) {
        rc = fmt_fail(msg, (uint64_t)st.st_size < ms->bytes ? FMT_ETRUNC : FMT_ECORRUPT,
                      "data.mdb is %" PRIu64 " bytes, the manifest says %" PRIu64,
                      (uint64_t)st.st_size, ms->bytes);
    } else {
        uint64_t pin = 0;
        fmt_lmdb_value skel = {0, 0};
        rc = fmt_lmdb_tree_check(data, &pin, &skel, msg);
        if (!rc && (ms->pins & FMT_PIN_OPEN) && pin != ms->pin_hash)
            rc = fmt_fail(msg, FMT_EHASH, "lmdb meta or B-tree pages do not match the manifest's "
                          "pin: damaged");
        if (!rc && ms->skel_len && (skel.off != ms->skel_off || skel.size != ms->skel_len))
            rc = fmt_fail(msg, FMT_ECORRUPT, "the manifest's skeleton range (%" PRIu64 " bytes at "
                          "%" PRIu64 ") is not where the index value lies", ms->skel_len,
                          ms->skel_off);
    }
    free(data);
    return rc;
}

/* Once the environment has validated the shard: map data.mdb (fd) while the mapping cap allows,
 * else copy every value's header and aux record out of LMDB's map (base) and keep fd in the
 * descriptor cache. Takes fd over. */
static int lm_settle(lm_shard *s, const char *data, int fd, const uint8_t *base, uint64_t size)
{
    uint64_t n = s->info.samples;
    if (n > 0 && fmt_map_reserve()) {
        void *map = mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED, fd, 0);
        int rc = map == MAP_FAILED ? errno : 0;
        close(fd);
        if (rc) {
            fmt_map_unreserve();
            return rc;
        }
        s->map = map;
        s->map_len = (size_t)size;
        for (uint64_t i = 0; i < n; i++) {
            const uint8_t *v = s->map + s->ent[i].off;
            uint32_t aux_len = fmt_le_get32(v + 40);
            s->ent[i].head = v;
            s->ent[i].aux = aux_len ? v + s->ent[i].len - aux_len : NULL;
        }
        return 0;
    }
    uint64_t total = 0;
    for (uint64_t i = 0; i < n; i++)
        total += LM_VALUE_HEADER + fmt_le_get32(base + s->ent[i].off + 40);
    if (total > SIZE_MAX || !(s->copy = malloc(total ? (size_t)total : 1))) {
        close(fd);
        return ENOMEM;
    }
    uint8_t *c = s->copy;
    for (uint64_t i = 0; i < n; i++) {
        const uint8_t *v = base + s->ent[i].off;
        uint32_t aux_len = fmt_le_get32(v + 40);
        memcpy(c, v, LM_VALUE_HEADER);
        s->ent[i].head = c;
        c += LM_VALUE_HEADER;
        s->ent[i].aux = NULL;
        if (aux_len) {
            memcpy(c, v + s->ent[i].len - aux_len, aux_len);
            s->ent[i].aux = c;
            c += aux_len;
        }
    }
    return fmt_fdfile_new(&s->file, data, O_RDONLY, fd);
}

int fmt_lmr_open(void **out, const char *dir, const char *path, fmt_access access,
                 fmt_msg *msg)
{
    (void)dir;
    (void)access;   /* mapped in every mode while the mapping cap allows, else read with pread */
    *out = NULL;
    if (msg)
        msg->text[0] = '\0';
    int rc = 0, mrc, fd = -1;
    fmt_lmdb_value *vals = NULL;
    uint64_t nvals = 0;
    MDB_env *env = NULL;
    MDB_txn *txn = NULL;
    char *data = fmt_path_join(path, "data.mdb", "");
    lm_shard *s = calloc(1, sizeof *s);
    if (!s || !data) {
        rc = ENOMEM;
        goto leave;
    }
    struct stat st, est;
    if (stat(path, &st) != 0) {
        rc = errno;
        fmt_fail(msg, rc, "%s", fmt_strerror(rc));
        goto leave;
    }
    if (!S_ISDIR(st.st_mode)) {
        rc = fmt_fail(msg, FMT_EFORMAT, "not a directory (an lmdb shard is an environment "
                      "directory)");
        goto leave;
    }
    /* our own descriptor first: the file LMDB then opens by name must be this one */
    if ((fd = open(data, O_RDONLY | O_CLOEXEC | O_NONBLOCK)) < 0 || fstat(fd, &st) != 0) {
        rc = errno;
        fmt_fail(msg, rc, "data.mdb: %s", fmt_strerror(rc));
        goto leave;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = fmt_fail(msg, FMT_EFORMAT, "data.mdb is not a regular file");
        goto leave;
    }
    uint64_t size = (uint64_t)st.st_size;
    if (size == 0) {
        rc = fmt_fail(msg, FMT_ETRUNC, "data.mdb is empty");
        goto leave;
    }
    if (size > SIZE_MAX / 2) {
        rc = fmt_fail(msg, FMT_ETOOBIG, "data.mdb too large to map");
        goto leave;
    }
    if ((rc = fmt_lmdb_tree_walk(fd, NULL, &vals, &nvals, NULL, msg)) != 0)
        goto leave;

    mrc = mdb_env_create(&env);
    /* a map no larger than the file: LMDB raises it to what its meta page says is in use (the
     * check below), whatever map size the writer recorded */
    if (mrc == 0)
        mrc = mdb_env_set_mapsize(env, (size_t)fmt_lm_round_up(size, fmt_lmdb_page_size()));
    if (mrc) {
        rc = fmt_fail(msg, fmt_lm_code(mrc), "%s", mdb_strerror(mrc));
        goto leave;
    }
    /* MDB_NOLOCK: a shard is immutable once it has its final name, so there is no writer for
     * the reader table to hold off, and nothing is written into the dataset */
    mrc = mdb_env_open(env, path, MDB_RDONLY | MDB_NOLOCK | MDB_NOTLS, 0);
    if (mrc) {
        if (mrc == MDB_INVALID && size < 2 * fmt_lmdb_page_size())
            rc = fmt_fail(msg, FMT_ETRUNC, "data.mdb is %" PRIu64 " bytes, too short for an "
                          "lmdb environment", size);
        else if (mrc == MDB_INVALID)
            rc = fmt_fail(msg, FMT_EFORMAT, "data.mdb is not an lmdb environment");
        else
            rc = fmt_fail(msg, fmt_lm_code(mrc), "cannot open the environment: %s",
                          mdb_strerror(mrc));
        goto leave;
    }
    mdb_filehandle_t efd;
    if (mdb_env_get_fd(env, &efd) != 0 || fstat(efd, &est) != 0 || est.st_dev != st.st_dev ||
        est.st_ino != st.st_ino) {
        rc = fmt_fail(msg, FMT_ECORRUPT, "data.mdb was replaced while being opened");
        goto leave;
    }
    MDB_envinfo ei;
    MDB_stat es;
    mdb_env_info(env, &ei);
    mdb_env_stat(env, &es);
    uint64_t used;
    if (__builtin_mul_overflow((uint64_t)ei.me_last_pgno + 1, (uint64_t)es.ms_psize, &used) ||
        used > size) {
        rc = fmt_fail(msg, FMT_ETRUNC, "data.mdb is %" PRIu64 " bytes, its meta page says %"
                      PRIu64 " pages of %u", size, (uint64_t)ei.me_last_pgno + 1, es.ms_psize);
        goto leave;
    }

    MDB_dbi dbi;
    unsigned flags = 0;
    mrc = mdb_txn_begin(env, NULL, MDB_RDONLY, &txn);
    if (mrc == 0)
        mrc = mdb_dbi_open(txn, NULL, 0, &dbi);
    if (mrc == 0)
        mrc = mdb_dbi_flags(txn, dbi, &flags);
    if (mrc == 0)
        mrc = mdb_stat(txn, dbi, &es);
    if (mrc) {
        rc = fmt_fail(msg, fmt_lm_code(mrc), "cannot read the main database: %s",
                      mdb_strerror(mrc));
        goto leave;
    }
    if (flags != 0) {
        rc = fmt_fail(msg, FMT_ECORRUPT, "main database has flags 0x%x", flags);
        goto leave;
    }
    MDB_val key = {.mv_size = strlen(LM_META_KEY), .mv_data = LM_META_KEY}, val;
    mrc = mdb_get(txn, dbi, &key, &val);
    if (mrc == MDB_NOTFOUND) {
        rc = fmt_fail(msg, FMT_EFORMAT, "no %s key (not a shardc lmdb shard)", LM_META_KEY);
        goto leave;
    }
    if (mrc) {
        rc = fmt_fail(msg, fmt_lm_code(mrc), "cannot read %s: %s", LM_META_KEY, mdb_strerror(mrc));
        goto leave;
    }
    uint64_t index_hash = 0;
    rc = lm_read_meta(s, &val, es.ms_entries, size, &index_hash, msg);
    if (rc)
        goto leave;
    s->info.bytes = size;
    s->ent = calloc(s->info.samples ? s->info.samples : 1, sizeof *s->ent);
    if (!s->ent) {
        rc = ENOMEM;
        goto leave;
    }
    if ((rc = lm_walk(s, txn, dbi, vals, nvals, size, index_hash, msg)) != 0)
        goto leave;
    if (nvals != s->info.samples) {
        rc = fmt_fail(msg, FMT_ECORRUPT, "the page walk found %" PRIu64 " sample keys, lmdb %"
                      PRIu64, nvals, s->info.samples);
        goto leave;
    }
    /* the environment's work is done: the shard keeps a mapping or a cached descriptor */
    rc = lm_settle(s, data, fd, s->info.samples ? s->ent[0].head - vals[0].off : NULL, size);
    fd = -1;
    if (rc)
        fmt_fail(msg, rc, "data.mdb: %s", fmt_strerror(rc));
leave:
    if (txn)
        mdb_txn_abort(txn);
    if (env)
        mdb_env_close(env);
    if (fd >= 0)
        close(fd);
    free(vals);
    free(data);
    if (rc)
        fmt_lmr_close(s);
    else
        *out = s;
    return rc;
}

int fmt_lmr_pins(const void *p, const char *path, fmt_shard_info *info)
{
    (void)p;
    char *data = fmt_path_join(path, "data.mdb", "");
    if (!data)
        return ENOMEM;
    info->pin_skip_off = info->pin_skip_len = 0;
    fmt_lmdb_value skel = {0, 0};
    int rc = fmt_lmdb_tree_check(data, &info->pin_hash, &skel, NULL);
    info->skel_off = skel.off;
    info->skel_len = skel.size;
    if (!rc)
        rc = fmt_hash_file(data, 0, 0, NULL, &info->file_hash, NULL);
    info->pins = rc ? 0 : FMT_PIN_FILE | FMT_PIN_OPEN;
    free(data);
    return rc;
}

const fmt_shard_info *fmt_lmr_info(const void *p)
{
    return &((const lm_shard *)p)->info;
}

int fmt_lmr_get(const void *p, uint64_t i, fmt_sample *out)
{
    const lm_shard *s = p;
    if (i >= s->info.samples)
        return FMT_EINVAL;
    const lm_entry *e = &s->ent[i];
    lm_header h;
    lm_decode_header(e->head, &h);
    out->index = i;
    out->label = h.label;
    out->height = h.height;
    out->width = h.width;
    out->channels = h.channels;
    out->source = h.source;
    out->hash = h.hash;
    out->length = e->len - LM_VALUE_HEADER - h.aux_len;
    out->pixels = s->map ? s->map + e->off + LM_VALUE_HEADER : NULL;
    out->aux = e->aux;
    out->aux_len = h.aux_len;
    return 0;
}

/* Sample i's pixels into dst (len bytes). */
static int lm_pixels(const lm_shard *s, uint64_t i, void *dst, size_t len)
{
    const lm_entry *e = &s->ent[i];
    if (!s->map && !s->file)
        return FMT_EUNSUPPORTED;    /* a skeleton (fmt_lmr_open_parts): no pixels */
    if (s->map) {
        memcpy(dst, s->map + e->off + LM_VALUE_HEADER, len);
        return 0;
    }
    int fd, rc = fmt_fdfile_get(s->file, 0, &fd);
    if (rc)
        return rc;
    rc = fmt_pread_exact(fd, dst, len, e->off + LM_VALUE_HEADER);
    fmt_fdfile_put(s->file);
    return rc;
}

static size_t lm_pixel_len(const lm_shard *s, uint64_t i)
{
    const lm_entry *e = &s->ent[i];
    return (size_t)(e->len - LM_VALUE_HEADER - fmt_le_get32(e->head + 40));
}

int fmt_lmr_read(const void *p, uint64_t i, void *dst, void *scratch, size_t scratch_len)
{
    (void)scratch;
    (void)scratch_len;
    const lm_shard *s = p;
    if (i >= s->info.samples)
        return FMT_EINVAL;
    return lm_pixels(s, i, dst, lm_pixel_len(s, i));
}

int fmt_lmr_check(const void *p, uint64_t i)
{
    const lm_shard *s = p;
    if (i >= s->info.samples)
        return FMT_EINVAL;
    size_t len = lm_pixel_len(s, i);
    uint64_t want = fmt_le_get64(s->ent[i].head + 24);
    if (s->map)
        return XXH3_64bits(s->map + s->ent[i].off + LM_VALUE_HEADER, len) == want ? 0 : FMT_EHASH;
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf)
        return ENOMEM;
    int rc = lm_pixels(s, i, buf, len);
    if (!rc && XXH3_64bits(buf, len) != want)
        rc = FMT_EHASH;
    free(buf);
    return rc;
}

int fmt_lmr_advise(const void *p, fmt_advice advice)
{
    static const int madv[] = {MADV_NORMAL, MADV_SEQUENTIAL, MADV_RANDOM};
    const lm_shard *s = p;
    if ((unsigned)advice > FMT_ADVICE_RANDOM)
        return FMT_EINVAL;
    if (!s->map || !s->hi)
        return 0;   /* read with pread: nothing mapped to advise on */
    /* the span lies inside the mapping; advice only changes read-ahead */
    return madvise((void *)(s->map + s->lo), (size_t)(s->hi - s->lo), madv[advice]) != 0 ?
           errno : 0;
}

/* ---- a shard before its file arrives (backend.h r_head_of, r_tail, r_open_parts) ----
 * The manifest's skeleton range (lmdb 1.1) locates the __shardc__/index value in data.mdb: the
 * metadata value, then every sample's header and aux record, which the metadata's index_hash
 * covers and the manifest's content hash (meta_hash) covers in turn. Nothing precedes it: the
 * head is empty. */

int fmt_lmr_head_of(const fmt_manifest_shard *ms, uint64_t *len, fmt_msg *msg)
{
    if (!ms->skel_len)
        return fmt_fail(msg, FMT_EUNSUPPORTED, "its manifest entry does not say where its index "
                        "value lies (a build before lmdb 1.1)");
    *len = 0;
    return 0;
}

int fmt_lmr_tail(const uint8_t *head, const fmt_manifest_shard *ms, uint64_t *from, uint64_t *to,
                 fmt_msg *msg)
{
    (void)head;
    (void)msg;
    *from = ms->skel_off;
    *to = ms->skel_off + ms->skel_len;      /* (the manifest's parse keeps it in the file) */
    return 0;
}

int fmt_lmr_open_parts(void **out, const fmt_manifest_shard *ms, const uint8_t *head,
                       size_t head_len, const uint8_t *tail, size_t tail_len, fmt_msg *msg)
{
    (void)head;
    (void)head_len;
    *out = NULL;
    lm_shard *s = calloc(1, sizeof *s);
    if (!s)
        return ENOMEM;
    MDB_val v = {.mv_size = tail_len, .mv_data = (void *)tail};
    uint64_t index_hash = 0;
    int rc = lm_read_meta(s, &v, UINT64_MAX, ms->bytes, &index_hash, msg);
    if (rc)
        goto leave;
    size_t meta_size = fmt_le_get32(tail + 12), rl = tail_len - meta_size;
    const uint8_t *r = tail + meta_size;
    if (XXH3_64bits(r, rl) != index_hash) {
        rc = fmt_fail(msg, FMT_EHASH, "its index value does not match its metadata's index hash");
        goto leave;
    }
    s->info.bytes = ms->bytes;
    s->ent = calloc(s->info.samples ? s->info.samples : 1, sizeof *s->ent);
    s->copy = malloc(rl ? rl : 1);
    if (!s->ent || !s->copy) {
        rc = ENOMEM;
        goto leave;
    }
    memcpy(s->copy, r, rl);
    size_t at = 0;
    for (uint64_t i = 0; i < s->info.samples; i++) {
        uint64_t total;
        if (rl - at < LM_VALUE_HEADER) {
            rc = fmt_fail(msg, FMT_ECORRUPT, "its index value ends before sample %" PRIu64, i);
            goto leave;
        }
        const uint8_t *p = s->copy + at;
        if ((rc = lm_check_header(p, i, &total, msg)) != 0)
            goto leave;
        uint32_t aux_len = fmt_le_get32(p + 40);
        if (aux_len > rl - at - LM_VALUE_HEADER) {
            rc = fmt_fail(msg, FMT_ECORRUPT, "sample %" PRIu64 ": its aux record runs past the "
                          "index value", i);
            goto leave;
        }
        s->ent[i].head = p;
        s->ent[i].aux = aux_len ? p + LM_VALUE_HEADER : NULL;
        s->ent[i].len = total;
        at += LM_VALUE_HEADER + aux_len;
    }
    if (at != rl)
        rc = fmt_fail(msg, FMT_ECORRUPT, "its index value holds %zu bytes past its last sample",
                      rl - at);
leave:
    if (rc)
        fmt_lmr_close(s);
    else
        *out = s;
    return rc;
}
