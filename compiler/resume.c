/* resume.c - a build's output directory: the names of its files, which entries are ours (and
 * may go with --force), and --resume, which keeps the finished shards of an interrupted build
 * whose fingerprint, position and sample hashes check out (resume.h).
 */
#include "resume.h"

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fmt.h"
#include "journal.h"
#include "report.h"
#include "tsv.h"
#include "util.h"

/* ---- names ---- */

/* Shard k's name without the backend's suffix, and with it (the manifest's file name). */
char *shc_shard_stem(uint64_t k)
{
    char *p;
    return asprintf(&p, "shard-%05" PRIu64, k) < 0 ? NULL : p;
}

char *shc_shard_name(const fmt_backend *be, uint64_t k)
{
    char *p;
    return asprintf(&p, "shard-%05" PRIu64 "%s", k, be->suffix) < 0 ? NULL : p;
}

/* Remove a file or a whole directory tree (LMDB shards, per-image class folders). */
static int rm_entry(const char *fpath, const struct stat *sb, int type, struct FTW *ftw)
{
    (void)sb;
    (void)ftw;
    int r = type == FTW_DP ? rmdir(fpath) : unlink(fpath);
    return r != 0 && errno != ENOENT ? errno : 0;
}

static int rm_tree(const char *path)
{
    struct stat sb;
    if (lstat(path, &sb) != 0)
        return errno == ENOENT ? 0 : errno;
    if (!S_ISDIR(sb.st_mode))
        return unlink(path) != 0 && errno != ENOENT ? errno : 0;
    return nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---- what the build may remove ---- */

/* Class folders of per-image sets are ours too. */
static int is_class(const fmt_inputs *in, const char *name)
{
    for (size_t i = 0; in && i < in->nclasses; i++)
        if (strcmp(in->classes[i], name) == 0)
            return 1;
    return 0;
}

static int is_ours(const char *name)
{
    return strcmp(name, FMT_MANIFEST_NAME) == 0 || strcmp(name, SHC_REJECTS_NAME) == 0 ||
           strcmp(name, SHC_WARNINGS_NAME) == 0 || strcmp(name, SHC_WARNINGS_NAME ".tmp") == 0 ||
           strcmp(name, SHC_INPUTS_NAME) == 0 || strcmp(name, SHC_INPUTS_NAME ".tmp") == 0 ||
           strcmp(name, SHC_JOURNAL_NAME) == 0 || strncmp(name, "shard-", 6) == 0 ||
           strcmp(name, SHC_PARTS_DIR) == 0 || strcmp(name, FMT_MANIFEST_NAME ".tmp") == 0 ||
           strcmp(name, SHC_REJECTS_NAME ".tmp") == 0;
}

/* 1 if dir holds anything; 2 if it holds something that is not ours (class folders are ours
 * when the backend writes per-image sets). */
int shc_dir_contents(const char *dir, const fmt_inputs *sets)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int any = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
            strcmp(e->d_name, SHC_LOCK_NAME) == 0)
            continue;
        if (!is_ours(e->d_name) && !is_class(sets, e->d_name)) {
            any = 2;
            break;
        }
        any = 1;
    }
    closedir(d);
    return any;
}

/* Remove our files: the manifest first, so no manifest ever names a removed shard. With
 * keep_from >= 0, shards numbered below keep_from (and the journal) are kept. Class folders of
 * per-image sets (sets != NULL) go only when everything goes: kept shards' images live there, and
 * a resumed build rewrites the others under the same names. */
int shc_clear_output(const char *dir, long keep_from, const fmt_inputs *sets)
{
    char *p = fmt_path_join(dir, FMT_MANIFEST_NAME, "");
    if (!p)
        return ENOMEM;
    if (unlink(p) != 0 && errno != ENOENT) {
        int e = errno;
        free(p);
        return e;
    }
    free(p);
    fmt_fsync_parent(dir);
    DIR *d = opendir(dir);
    if (!d)
        return errno;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
            strcmp(e->d_name, SHC_LOCK_NAME) == 0)
            continue;   /* the lock we hold stays (see shc_lock_dir) */
        int cls = is_class(sets, e->d_name);
        if (!is_ours(e->d_name) && !(cls && keep_from < 0))
            continue;
        unsigned long k;
        int n = 0;
        if (keep_from >= 0 && strcmp(e->d_name, SHC_JOURNAL_NAME) == 0)
            continue;
        /* parts of a build in parts go with --force only */
        if (keep_from >= 0 && strcmp(e->d_name, SHC_PARTS_DIR) == 0)
            continue;
        /* shard-NNNNN followed by a suffix, not a temporary */
        if (keep_from >= 0 && sscanf(e->d_name, "shard-%lu%n", &k, &n) == 1 &&
            !strstr(e->d_name + n, ".tmp") && (long)k < keep_from)
            continue;
        char *q = fmt_path_join(dir, e->d_name, "");
        int r = q ? rm_tree(q) : ENOMEM;
        if (r && !rc)
            rc = r;
        free(q);
    }
    closedir(d);
    return rc;
}

/* ---- resume ---- */

/* Backends whose shards keep their images in class folders. */
int shc_is_set(const fmt_backend *be)
{
    return strcmp(be->suffix, ".idx") == 0;
}

int shc_shard_list_add(shc_shard_list *l, const char *name, const fmt_shard_info *h)
{
    if (shc_grow_array(&l->v, &l->cap, l->n, sizeof *l->v, 16))
        return ENOMEM;
    fmt_manifest_shard *s = &l->v[l->n];
    memset(s, 0, sizeof *s);
    if (!(s->file = strdup(name)))
        return ENOMEM;
    s->first = h->first_index;
    s->samples = h->samples;
    s->bytes = h->bytes;
    s->hash = h->hash;
    s->pins = h->pins;
    s->file_hash = h->file_hash;
    s->pin_hash = h->pin_hash;
    s->pin_skip_off = h->pin_skip_off;
    s->pin_skip_len = h->pin_skip_len;
    s->skel_off = h->skel_off;
    s->skel_len = h->skel_len;
    for (int c = 0; c < 3; c++) {
        l->sum[c] += h->sum[c];
        l->sumsq[c] += h->sumsq[c];
    }
    l->n++;
    return 0;
}

void shc_shard_list_free(shc_shard_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i].file);
    free(l->v);
    memset(l, 0, sizeof *l);
}

/* Keep finished shards 0, 1, ... while each opens, carries this build's fingerprint, continues
 * where the previous one ended and has every sample hash intact. Sets *next_input and
 * *next_index to where the build continues. */
int shc_resume_scan(const shc_build_opts *o, const shc_build_cb *cb, const fmt_inputs *in,
                    uint64_t fp, uint64_t first_input, shc_shard_list *kept,
                    uint64_t *next_input, uint64_t *next_index)
{
    const fmt_backend *be = o->backend;
    *next_input = first_input;
    *next_index = 0;
    for (uint64_t k = 0;; k++) {
        char *name = shc_shard_name(be, k), *path = name ? fmt_path_join(o->out, name, "") : NULL;
        if (!path) {
            free(name);
            return ENOMEM;
        }
        void *s = NULL;
        fmt_msg msg = {{0}};
        int ok = 0;
        uint64_t px = 0;
        if (access(path, F_OK) == 0) {
            int rc = be->r_open(&s, o->out, path, FMT_ACCESS_MMAP, &msg);
            const fmt_shard_info *h = rc ? NULL : be->r_info(s);
            if (h && h->fingerprint == fp && h->first_index == *next_index &&
                h->input_end > *next_input) {
                ok = 1;
                for (uint64_t i = 0; ok && i < h->samples; i++) {
                    fmt_sample e;
                    ok = be->r_get(s, i, &e) == 0 && be->r_check(s, i) == 0;
                    px += (uint64_t)e.height * e.width;
                }
            }
            fmt_shard_info hp;
            if (ok) {
                hp = *h;
                ok = !be->r_pins || be->r_pins(s, path, &hp) == 0;
            }
            if (ok) {
                *next_input = h->input_end;
                *next_index += h->samples;
                kept->pixels += px;
                ok = shc_shard_list_add(kept, name, &hp) == 0;
            } else {
                shc_say(cb, "%s: not reusable (%s), rebuilding from here", path,
                        rc ? fmt_reason(&msg, rc) : "different build or damaged");
            }
        }
        be->r_close(s);
        free(path);
        free(name);
        if (!ok)
            return shc_clear_output(o->out, (long)k, shc_is_set(be) ? in : NULL);
    }
}
