/* lmdb.c - the lmdb backend (spec: formats/lmdb.md): one LMDB environment per shard, keys the
 * 8-byte big-endian sample index, values a 48-byte header, the pixels and the aux record, the
 * shard's metadata under the reserved key "__shardc__/meta".
 *
 * Writer: samples are appended (MDB_APPEND, so leaf pages fill completely) into space LMDB
 * reserves in its own pages (MDB_RESERVE, so each pixel byte is copied once), in transactions of
 * about LM_BATCH_BYTES, with MDB_NOSYNC: durability comes once, from the forced sync in finish.
 * The map grows between transactions, always ahead of the projected size, because an
 * MDB_MAP_FULL inside a transaction would lose the samples already put in it.
 *
 * The reader is lmdbread.c; the value and metadata layout is shared with it through lmdb_int.h.
 *
 * LMDB error codes (MDB_KEYEXIST .. MDB_BAD_DBI, -30799 .. -30780) overlap the library's FMT_E*
 * range, so none is ever returned as it is: fmt_lm_code translates them.
 */
#include <errno.h>
#include <fcntl.h>
#include <lmdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <xxhash.h>

#include "backend.h"
#include "le.h"
#include "lmdb_int.h"
#include "lmdbcheck.h"

#define LM_BATCH_BYTES ((uint64_t)64 << 20)
#define LM_MAP_STEP ((uint64_t)16 << 20)

/* ---- byte order helpers ---- */

static void put_be64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (56 - 8 * i));
}

/* ---- shared helpers ---- */

/* An LMDB return code as a library error code (see the top of this file). */
int fmt_lm_code(int mrc)
{
    if (mrc >= 0)
        return mrc;
    switch (mrc) {
    case MDB_INVALID:
        return FMT_EFORMAT;
    case MDB_VERSION_MISMATCH:
        return FMT_EVERSION;
    case MDB_MAP_FULL:
    case MDB_TXN_FULL:
    case MDB_PAGE_FULL:
    case MDB_CURSOR_FULL:
        return ENOSPC;
    case MDB_CORRUPTED:
    case MDB_PAGE_NOTFOUND:
    case MDB_MAP_RESIZED:
    case MDB_INCOMPATIBLE:
    case MDB_BAD_DBI:
        return FMT_ECORRUPT;
    default:
        return EIO;
    }
}

uint64_t fmt_lm_round_up(uint64_t x, uint64_t a)
{
    return (x + a - 1) / a * a;
}

/* Remove an environment directory: data.mdb, lock.mdb (if a tool left one), the directory. A
 * plain file of that name is removed too. 0 if nothing is left (or nothing was there). */
static int lm_remove_env(const char *dir)
{
    int rc = 0;
    char *data = fmt_path_join(dir, "data.mdb", ""), *lock = fmt_path_join(dir, "lock.mdb", "");
    if (!data || !lock) {
        rc = ENOMEM;
        goto leave;
    }
    unlink(data);
    unlink(lock);
    if (rmdir(dir) != 0) {
        if (errno == ENOTDIR)
            rc = unlink(dir) != 0 ? errno : 0;
        else if (errno != ENOENT)
            rc = errno;
    }
leave:
    free(data);
    free(lock);
    return rc;
}

/* fsync a file or directory by path; *size (if not NULL) receives its size. */
static int lm_fsync_path(const char *path, int dir, uint64_t *size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | (dir ? O_DIRECTORY : 0));
    if (fd < 0)
        return errno;
    int rc = 0;
    struct stat st;
    if (size) {
        if (fstat(fd, &st) != 0)
            rc = errno;
        else
            *size = (uint64_t)st.st_size;
    }
    if (!rc && fsync(fd) != 0 && !(dir && errno == EINVAL))
        rc = errno;
    close(fd);
    return rc;
}

/* ---- value and metadata codecs ---- */

static void lm_encode_header(const fmt_sample_meta *m, uint32_t aux_len, uint8_t *out)
{
    memset(out, 0, LM_VALUE_HEADER);
    memcpy(out, LM_VALUE_MAGIC, 4);
    out[4] = LM_VALUE_VERSION;
    out[6] = LM_VALUE_HEADER;
    fmt_le_put32(out + 8, (uint32_t)m->label);
    fmt_le_put32(out + 12, m->height);
    fmt_le_put32(out + 16, m->width);
    fmt_le_put32(out + 20, m->channels);
    fmt_le_put64(out + 24, m->hash);
    fmt_le_put64(out + 32, m->source);
    fmt_le_put32(out + 40, aux_len);
}

/* The metadata record; its meta_hash is the shard's content hash. */
static void lm_encode_meta(const fmt_shard_info *in, uint64_t index_hash, uint8_t *out)
{
    memset(out, 0, LM_META_SIZE);
    memcpy(out, LM_META_MAGIC, 8);
    out[8] = LM_META_MAJOR;
    out[10] = LM_META_MINOR;
    fmt_le_put32(out + 12, LM_META_SIZE);
    fmt_le_put64(out + 16, in->samples);
    fmt_le_put64(out + 24, in->first_index);
    fmt_le_put64(out + 32, in->fingerprint);
    fmt_le_put64(out + 40, in->input_end);
    for (int c = 0; c < 3; c++) {
        fmt_le_put64(out + 48 + 8 * c, in->sum[c]);
        fmt_le_put64(out + 72 + 8 * c, in->sumsq[c]);
    }
    fmt_le_put64(out + 96, index_hash);
    fmt_le_put64(out + LM_META_HASHED, XXH3_64bits(out, LM_META_HASHED));
}

/* ---- writing ---- */

typedef struct {
    MDB_env *env;
    MDB_txn *txn;               /* the open batch, or NULL */
    MDB_dbi dbi;
    char *path, *tmp, *data;    /* NAME.lmdb, NAME.lmdb.tmp, NAME.lmdb.tmp/data.mdb */
    int err;                    /* first LMDB or I/O error: the writer is failed */
    uint64_t first_index, fingerprint;
    uint64_t size;              /* projected size of data.mdb (w_size) */
    uint64_t mapsize;
    uint64_t batch;             /* value bytes put in the open transaction */
    fmt_writer_stats st;        /* count, sums */
    /* the __shardc__/index value: room for the metadata, then every sample's value header and
     * aux record in key order (the bytes index_hash covers) */
    uint8_t *index;
    size_t index_len, index_cap;
} lm_writer;

/* Fixed part of the projection: two meta pages, the main database's root, and room for the
 * pages each commit copies and frees (a handful per transaction, reused by later ones). */
static uint64_t lm_base_size(void)
{
    return 8 * fmt_lmdb_page_size();
}

/* What a finished shard holds besides its samples' costs: the two meta pages, the root page,
 * and the index value's metadata and its last page (lm_w_cost counts each sample's record in
 * it). */
static uint64_t lm_w_base(void)
{
    return 4 * fmt_lmdb_page_size() + LM_META_SIZE;
}

static uint64_t lm_w_cost(uint64_t payload_len, uint32_t aux_len, uint32_t align)
{
    (void)align;
    uint64_t v, ps = fmt_lmdb_page_size();
    if (__builtin_add_overflow(payload_len, (uint64_t)LM_VALUE_HEADER + aux_len, &v) ||
        v > UINT32_MAX)
        return UINT64_MAX;
    /* LMDB moves a value out of the leaf when node header (8) + key (8) + data exceed
     * me_nodemax, about half a page */
    uint64_t nodemax = (((ps - LM_PAGE_HEADER) / 2) & ~(uint64_t)1) - 2;
    /* (plus its record in the __shardc__/index value: header and aux) */
    uint64_t rec = LM_VALUE_HEADER + (uint64_t)aux_len;
    if (16 + v > nodemax)
        return fmt_lm_round_up(LM_PAGE_HEADER + v, ps) + 64 + rec;     /* 26-byte leaf entry,
                                                                         * branches */
    uint64_t node = ((16 + v + 1) & ~(uint64_t)1) + 2;      /* even, plus its index slot */
    uint64_t per_page = (ps - LM_PAGE_HEADER) / node;       /* >= 2: node <= nodemax + 2 */
    return (ps + per_page - 1) / per_page + 16 + rec;       /* a share of the branch pages */
}

/* LMDB turns a short write into EIO, and the usual cause of a short write is a full filesystem
 * or the file size limit (RLIMIT_FSIZE): name those, so a full disk does not read as a failing
 * one. */
static int lm_write_error(const lm_writer *w, int rc)
{
    if (rc != EIO)
        return rc;
    struct statvfs v;
    if (statvfs(w->tmp, &v) == 0 && v.f_bavail == 0)
        return ENOSPC;
    struct rlimit rl;
    struct stat st;
    if (getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        stat(w->data, &st) == 0 && (uint64_t)st.st_size >= (uint64_t)rl.rlim_cur)
        return EFBIG;
    return rc;
}

static int lm_commit(lm_writer *w)
{
    if (!w->txn)
        return 0;
    int mrc = mdb_txn_commit(w->txn);       /* frees the transaction, also on failure */
    w->txn = NULL;
    w->batch = 0;
    return lm_write_error(w, fmt_lm_code(mrc));
}

static int lm_begin(lm_writer *w)
{
    if (w->txn)
        return 0;
    int mrc = mdb_txn_begin(w->env, NULL, 0, &w->txn);
    if (mrc == 0) {
        mrc = mdb_dbi_open(w->txn, NULL, 0, &w->dbi);
        if (mrc) {
            mdb_txn_abort(w->txn);
            w->txn = NULL;
        }
    }
    return fmt_lm_code(mrc);
}

/* The map size to set for a projected size: room to grow before the next resize. */
static uint64_t lm_map_for(uint64_t projected)
{
    return fmt_lm_round_up(2 * projected + LM_MAP_STEP, LM_MAP_STEP);
}

/* Make sure the map holds `projected` bytes plus slack for the pages LMDB copies and frees within
 * a transaction; growing it needs the open batch committed first. */
static int lm_room(lm_writer *w, uint64_t projected)
{
    if (projected > UINT64_MAX / 4)
        return FMT_ETOOBIG;
    if (projected + projected / 8 + LM_MAP_STEP / 2 <= w->mapsize)
        return 0;
    int rc = lm_commit(w);
    if (rc)
        return rc;
    uint64_t map = lm_map_for(projected);
    if (map > SIZE_MAX)
        return FMT_ETOOBIG;
    rc = fmt_lm_code(mdb_env_set_mapsize(w->env, (size_t)map));
    if (rc == 0)
        w->mapsize = map;
    return rc;
}

/* Abort the open batch, if any, and close the environment: what a finish or an abort does before
 * the files are installed or removed. */
static void lm_close_env(lm_writer *w)
{
    if (w->txn) {
        mdb_txn_abort(w->txn);
        w->txn = NULL;
    }
    if (w->env) {
        mdb_env_close(w->env);
        w->env = NULL;
    }
}

static void lm_writer_free(lm_writer *w)
{
    if (w->txn)
        mdb_txn_abort(w->txn);
    if (w->env)
        mdb_env_close(w->env);
    free(w->index);
    free(w->path);
    free(w->tmp);
    free(w->data);
    free(w);
}

static int lm_w_open(void **out, const fmt_writer_opts *o)
{
    *out = NULL;
    int rc = 0, made = 0;
    lm_writer *w = calloc(1, sizeof *w);
    if (!w)
        return ENOMEM;
    w->first_index = o->first_index;
    w->fingerprint = o->fingerprint;
    w->size = lm_base_size();
    w->path = fmt_path_join(o->dir, o->name, ".lmdb");
    w->tmp = fmt_path_join(o->dir, o->name, ".lmdb.tmp");
    w->data = w->tmp ? fmt_path_join(w->tmp, "data.mdb", "") : NULL;
    w->index_cap = 4096;
    w->index_len = LM_META_SIZE;
    w->index = malloc(w->index_cap);
    if (!w->path || !w->tmp || !w->data || !w->index) {
        rc = ENOMEM;
        goto leave;
    }
    /* a killed build may have left a temporary environment behind */
    rc = lm_remove_env(w->tmp);
    if (rc)
        goto leave;
    if (mkdir(w->tmp, 0755) != 0) {
        rc = errno;
        goto leave;
    }
    made = 1;
    w->mapsize = lm_map_for(w->size);
    int mrc = mdb_env_create(&w->env);
    if (mrc == 0)
        mrc = mdb_env_set_mapsize(w->env, (size_t)w->mapsize);
    /* MDB_NOLOCK: this process is the environment's only user, and no lock.mdb is left behind */
    if (mrc == 0)
        mrc = mdb_env_open(w->env, w->tmp, MDB_NOLOCK | MDB_NOSYNC, 0644);
    rc = fmt_lm_code(mrc);
leave:
    if (rc) {
        if (w->env) {
            mdb_env_close(w->env);
            w->env = NULL;
        }
        if (made)
            lm_remove_env(w->tmp);
        lm_writer_free(w);
    } else {
        *out = w;
    }
    return rc;
}

/* the sample's header and aux record appended to the index value's records */
static int index_add(lm_writer *w, const uint8_t *head, const void *aux, uint32_t aux_len)
{
    size_t need = w->index_len + LM_VALUE_HEADER + aux_len;
    if (need > w->index_cap) {
        size_t cap = w->index_cap * 2;
        while (cap < need)
            cap *= 2;
        uint8_t *b = realloc(w->index, cap);
        if (!b)
            return ENOMEM;
        w->index = b;
        w->index_cap = cap;
    }
    memcpy(w->index + w->index_len, head, LM_VALUE_HEADER);
    if (aux_len)
        memcpy(w->index + w->index_len + LM_VALUE_HEADER, aux, aux_len);
    w->index_len = need;
    return 0;
}

static int lm_w_add(void *p, const fmt_sample_meta *m, const void *pixels, uint64_t *stored_hash)
{
    lm_writer *w = p;
    if (w->err)
        return FMT_ESTATE;
    if (fmt_sample_meta_check(m))
        return FMT_EINVAL;
    uint32_t aux_len = m->aux ? m->aux_len : 0;
    uint64_t len, cost, size, index;
    if (fmt_shape_bytes(m->height, m->width, m->channels, &len) || len > SIZE_MAX)
        return FMT_ETOOBIG;
    cost = lm_w_cost(len, aux_len, 0);
    if (cost == UINT64_MAX || __builtin_add_overflow(w->size, cost, &size) ||
        __builtin_add_overflow(w->first_index, w->st.count, &index))
        return FMT_ETOOBIG;

    int rc = lm_room(w, size + LM_META_SIZE + fmt_lmdb_page_size());
    if (rc == FMT_ETOOBIG)
        return rc;
    if (!rc)
        rc = lm_begin(w);
    if (rc)
        goto fail;

    uint8_t kb[8];
    put_be64(kb, index);
    uint8_t head[LM_VALUE_HEADER];
    lm_encode_header(m, aux_len, head);
    size_t vlen = (size_t)(LM_VALUE_HEADER + len + aux_len);
    MDB_val key = {.mv_size = sizeof kb, .mv_data = kb};
    MDB_val val = {.mv_size = vlen, .mv_data = NULL};
    int mrc = mdb_put(w->txn, w->dbi, &key, &val, MDB_APPEND | MDB_RESERVE);
    if (mrc) {
        rc = fmt_lm_code(mrc);
        goto fail;
    }
    uint8_t *dst = val.mv_data;
    memcpy(dst, head, LM_VALUE_HEADER);
    memcpy(dst + LM_VALUE_HEADER, pixels, (size_t)len);
    if (aux_len)
        memcpy(dst + LM_VALUE_HEADER + len, m->aux, aux_len);
    if ((rc = index_add(w, head, m->aux, aux_len)) != 0)
        goto fail;
    fmt_writer_stats_add(&w->st, m);
    w->size = size;
    w->batch += vlen;
    if (stored_hash)
        *stored_hash = m->hash;
    if (w->batch >= LM_BATCH_BYTES) {
        rc = lm_commit(w);
        if (rc)
            goto fail;
    }
    return 0;
fail:
    /* a failed put or commit leaves the transaction unusable: the batch is lost */
    if (w->txn) {
        mdb_txn_abort(w->txn);
        w->txn = NULL;
    }
    w->err = rc;
    return rc;
}

static uint64_t lm_w_count(const void *w)
{
    return ((const lm_writer *)w)->st.count;
}

static uint64_t lm_w_size(const void *w)
{
    return ((const lm_writer *)w)->size;
}

/* Put tmp in place of path. A shard of that name from an earlier build is exchanged atomically
 * with the new one and then removed; where the filesystem cannot exchange, it is removed first
 * (a crash in between leaves no shard of that name, never a partial one). */
static int lm_install(const char *tmp, const char *path)
{
    if (rename(tmp, path) == 0)
        return 0;
    int rc = errno;
    if (rc != ENOTEMPTY && rc != EEXIST && rc != ENOTDIR)
        return rc;
    if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_EXCHANGE) == 0) {
        lm_remove_env(tmp);     /* the old shard; a leftover .tmp is harmless */
        return 0;
    }
    if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
        return errno;
    rc = lm_remove_env(path);
    if (rc)
        return rc;
    return rename(tmp, path) != 0 ? errno : 0;
}

static int lm_w_finish(void *p, uint64_t input_end, fmt_shard_info *info)
{
    lm_writer *w = p;
    int renamed = 0, rc = w->err;
    if (rc)
        goto leave;
    fmt_shard_info h = {
        .samples = w->st.count, .first_index = w->first_index, .fingerprint = w->fingerprint,
        .input_end = input_end,
    };
    memcpy(h.sum, w->st.sum, sizeof h.sum);
    memcpy(h.sumsq, w->st.sumsq, sizeof h.sumsq);
    /* the metadata value, and the skeleton: the metadata again, then the records, in one value
     * that a reader of a shard not yet arrived fetches */
    uint8_t *meta = w->index;
    lm_encode_meta(&h, XXH3_64bits(w->index + LM_META_SIZE, w->index_len - LM_META_SIZE), meta);
    h.hash = fmt_le_get64(meta + LM_META_HASHED);
    rc = lm_room(w, w->size + 2 * LM_META_SIZE + 4 * fmt_lmdb_page_size());
    if (!rc)
        rc = lm_begin(w);
    MDB_val key = {.mv_size = strlen(LM_META_KEY), .mv_data = LM_META_KEY};
    MDB_val val = {.mv_size = LM_META_SIZE, .mv_data = meta};
    MDB_val ikey = {.mv_size = strlen(LM_INDEX_KEY), .mv_data = LM_INDEX_KEY};
    MDB_val ival = {.mv_size = w->index_len, .mv_data = w->index};
    if (!rc)
        rc = fmt_lm_code(mdb_put(w->txn, w->dbi, &ikey, &ival, 0));
    if (!rc)
        rc = fmt_lm_code(mdb_put(w->txn, w->dbi, &key, &val, 0));
    if (rc)
        goto leave;
    rc = lm_commit(w);
    if (!rc)
        rc = lm_write_error(w, fmt_lm_code(mdb_env_sync(w->env, 1)));
    if (rc)
        goto leave;
    mdb_env_close(w->env);
    w->env = NULL;
    /* the sync above covered the data; this also makes the size and the directory entry
     * durable before the rename publishes them */
    rc = lm_fsync_path(w->data, 0, &h.bytes);
    if (!rc)
        rc = lm_fsync_path(w->tmp, 1, NULL);
    /* the pins of the manifest: what LMDB trusts (checked at every open), and the whole file */
    fmt_lmdb_value skel = {0, 0};
    if (!rc)
        rc = fmt_lmdb_tree_check(w->data, &h.pin_hash, &skel, NULL);
    h.skel_off = skel.off;      /* the manifest's skeleton range: the index value */
    h.skel_len = skel.size;
    if (!rc)
        rc = fmt_hash_file(w->data, 0, 0, NULL, &h.file_hash, NULL);
    h.pins = FMT_PIN_FILE | FMT_PIN_OPEN;
    if (!rc)
        rc = lm_install(w->tmp, w->path);
    if (rc)
        goto leave;
    renamed = 1;
    rc = fmt_fsync_parent(w->path);
    if (!rc && info)
        *info = h;
leave:
    lm_close_env(w);
    if (!renamed)
        lm_remove_env(w->tmp);
    lm_writer_free(w);
    return rc;
}

static void lm_w_abort(void *p)
{
    lm_writer *w = p;
    if (!w)
        return;
    lm_close_env(w);
    lm_remove_env(w->tmp);
    lm_writer_free(w);
}

/* ---- the backend table: the writer above, the reader in lmdbread.c ---- */

const fmt_backend fmt_backend_lmdb = {
    .name = "lmdb",
    .version = 1,
    .suffix = ".lmdb",
    .w_open = lm_w_open,
    .w_add = lm_w_add,
    .w_count = lm_w_count,
    .w_size = lm_w_size,
    .w_cost = lm_w_cost,
    .w_base = lm_w_base,
    .w_finish = lm_w_finish,
    .w_abort = lm_w_abort,
    .r_precheck = fmt_lmr_precheck,
    .r_pins = fmt_lmr_pins,
    .data_file = "data.mdb",
    .r_open = fmt_lmr_open,
    .r_close = fmt_lmr_close,
    .r_info = fmt_lmr_info,
    .r_get = fmt_lmr_get,
    .r_read = fmt_lmr_read,
    .r_check = fmt_lmr_check,
    .r_advise = fmt_lmr_advise,
    .r_head_of = fmt_lmr_head_of,
    .r_tail = fmt_lmr_tail,
    .r_open_parts = fmt_lmr_open_parts,
    /* r_direct, r_sample_path: none (every access mode reads through the map; one directory per
     * shard, not per sample) */
};
