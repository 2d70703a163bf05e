/* merge.c - join the parts of a build made with --part I/N (see merge.h). */
#include "merge.h"
#include "build.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"
#include "dataset.h"
#include "fmt.h"
#include "manifest.h"
#include "part.h"
#include "publish.h"
#include "remote.h"
#include "util.h"

/* inputs.tsv of a whole list can be large (a line per input): no small cap */
#define MERGE_MAX_TSV ((size_t)1 << 40)

typedef struct {
    shc_part part;
    char name[SHC_PART_NAME_LEN];
    char *dir;                  /* OUT/parts/NAME */
    fmt_manifest m;
    shc_part_record rec;
    char *rest;                 /* the build object without its part record */
    int complete;
} part_t;

/* Append to msg (for lists of parts); msg may be NULL. */
static void append(fmt_msg *msg, const char *fmt, ...)
{
    if (!msg)
        return;
    size_t used = strlen(msg->text);
    if (used + 1 >= sizeof msg->text)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg->text + used, sizeof msg->text - used, fmt, ap);
    va_end(ap);
}

/* N from the folder names in OUT/parts: 0 with *count set, or an error naming the disagreement. */
static int find_count(const char *parts, uint32_t *count, fmt_msg *msg)
{
    DIR *d = opendir(parts);
    if (!d)
        return fmt_fail(msg, SHC_MERGE_ENOPARTS, "no parts in %s: %s (build them first with "
                        "shardc build --part I/N)", parts, strerror(errno));
    *count = 0;
    char first[SHC_PART_NAME_LEN] = "";
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        shc_part p;
        if (shc_part_name_parse(e->d_name, &p) != 0)
            continue;
        if (*count == 0) {
            *count = p.count;
            shc_part_name(&p, first);
        } else if (p.count != *count) {
            rc = fmt_fail(msg, SHC_MERGE_EMISMATCH, "%s holds parts of different splits: %s and "
                          "%s (remove the stale ones)", parts, first, e->d_name);
            break;
        }
    }
    closedir(d);
    if (!rc && *count == 0)
        rc = fmt_fail(msg, SHC_MERGE_ENOPARTS, "no parts in %s (build them first with shardc "
                      "build --part I/N)", parts);
    return rc;
}

/* A real folder, not a link that could lead out of OUT. */
static int real_dir(const char *path)
{
    struct stat sb;
    if (lstat(path, &sb) != 0)
        return errno;
    return S_ISDIR(sb.st_mode) ? 0 : ENOTDIR;
}

/* Lines of a TSV text (each ending in '\n'): pointers to their starts; *n lines. */
static int split_lines(char *buf, size_t len, char ***lines, size_t *n)
{
    size_t cap = 64, k = 0;
    char **v = malloc(cap * sizeof *v);
    if (!v)
        return ENOMEM;
    for (size_t i = 0; i < len;) {
        char *nl = memchr(buf + i, '\n', len - i);
        if (!nl) {
            free(v);
            return FMT_ETRUNC;      /* a file we wrote always ends in a newline */
        }
        if (k == cap) {
            char **w = realloc(v, (cap *= 2) * sizeof *v);
            if (!w) {
                free(v);
                return ENOMEM;
            }
            v = w;
        }
        v[k++] = buf + i;
        i = (size_t)(nl - buf) + 1;
    }
    *lines = v;
    *n = k;
    return 0;
}

static size_t line_len(const char *line)
{
    return (size_t)((const char *)strchr(line, '\n') - line) + 1;
}

/* Read one part's manifest and record; p->complete says whether it has a manifest. */
static int load_part(part_t *p, fmt_msg *msg)
{
    int rc = real_dir(p->dir);
    if (rc == ENOENT)
        return 0;
    if (rc)
        return fmt_fail(msg, SHC_MERGE_EMISMATCH, "%s: %s", p->dir,
                        rc == ENOTDIR ? "not a folder (a link or a file)" : strerror(rc));
    fmt_msg why = {{0}};
    rc = fmt_manifest_read(p->dir, &p->m, &why);
    if (rc == ENOENT)
        return 0;
    if (rc)
        return fmt_fail(msg, SHC_MERGE_EMISMATCH, "part %s: %s", p->name, fmt_reason(&why, rc));
    rc = shc_part_record_get(p->m.build_json, &p->rec, &p->rest);
    if (rc == ENOMEM)
        return rc;
    if (rc)
        return fmt_fail(msg, SHC_MERGE_EMISMATCH, "%s/%s: %s", p->dir, FMT_MANIFEST_NAME,
                        rc == ENOENT ? "not the manifest of a part (no part record)"
                                     : "the part record is damaged");
    if (p->rec.part.index != p->part.index || p->rec.part.count != p->part.count)
        return fmt_fail(msg, SHC_MERGE_EMISMATCH, "%s: its manifest says it is part %u of %u",
                        p->dir, p->rec.part.index, p->rec.part.count);
    p->complete = 1;
    return 0;
}

/* p against the reference part ref (the first one). */
static int check_part(const part_t *p, const part_t *ref, fmt_msg *msg)
{
    const shc_part_record *a = &p->rec, *b = &ref->rec;
    if (a->list_hash != b->list_hash || a->inputs != b->inputs ||
        a->listing_skips != b->listing_skips)
        return fmt_fail(msg, SHC_MERGE_EMISMATCH, "part %s was built from another input list "
                        "than part %s (%" PRIu64 " and %" PRIu64 " inputs, list hashes %016" PRIx64
                        " and %016" PRIx64 ")", p->name, ref->name, a->inputs, b->inputs,
                        a->list_hash, b->list_hash);
    if (strcmp(p->m.backend, ref->m.backend) != 0 ||
        p->m.backend_version != ref->m.backend_version || a->quality != b->quality)
        return fmt_fail(msg, SHC_MERGE_EMISMATCH, "part %s was built with other options than "
                        "part %s (format %s, not %s)", p->name, ref->name, p->m.backend,
                        ref->m.backend);
    if (a->fingerprint != b->fingerprint)
        return fmt_fail(msg, SHC_MERGE_EMISMATCH, "part %s was built with other options than "
                        "part %s (fingerprints %016" PRIx64 " and %016" PRIx64 ")", p->name,
                        ref->name, a->fingerprint, b->fingerprint);
    if (strcmp(p->m.tool, ref->m.tool) != 0)
        return fmt_fail(msg, SHC_MERGE_EMISMATCH, "part %s was built by %s, part %s by %s",
                        p->name, p->m.tool, ref->name, ref->m.tool);
    uint64_t lo, hi;
    shc_part_range(a->inputs, &p->part, &lo, &hi);
    if (a->first_input != lo || a->end_input != hi ||
        p->m.fingerprint != a->fingerprint)
        return fmt_fail(msg, SHC_MERGE_EMISMATCH, "part %s: its manifest does not describe "
                        "inputs %" PRIu64 "-%" PRIu64 " of this build", p->name, lo, hi);
    return 0;
}

static int same_build(const part_t *a, const part_t *b)
{
    return a->rec.list_hash == b->rec.list_hash && a->rec.fingerprint == b->rec.fingerprint &&
           a->rec.quality == b->rec.quality && strcmp(a->m.backend, b->m.backend) == 0 &&
           strcmp(a->m.tool, b->m.tool) == 0;
}

/* The part whose build most parts share (majority vote; part 0 when no build has a majority). */
static const part_t *majority(const part_t *parts, uint32_t n)
{
    const part_t *cand = &parts[0];
    uint32_t votes = 0, agree = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (votes == 0)
            cand = &parts[i];
        votes += same_build(&parts[i], cand) ? 1 : -1u;
    }
    for (uint32_t i = 0; i < n; i++)
        agree += same_build(&parts[i], cand);
    return 2 * (uint64_t)agree > n ? cand : &parts[0];
}

/* Every shard of the part opens and is the one its manifest names. */
static int check_shards(const part_t *p, const fmt_backend *be, shc_merge_shard_fn elsewhere,
                        void *ctx, fmt_msg *msg)
{
    for (size_t k = 0; k < p->m.nshards; k++) {
        const fmt_manifest_shard *ms = &p->m.shards[k];
        if (elsewhere) {
            fmt_msg why = {{0}};
            int rc = strchr(ms->file, '/') || ms->offset
                         ? fmt_fail(&why, FMT_ECORRUPT, "%s: not a shard of its own", ms->file)
                         : elsewhere(ctx, p->name, ms, &why);
            if (rc == ENOMEM)
                return rc;
            if (rc)
                return fmt_fail(msg, SHC_MERGE_EMISMATCH, "part %s: %s", p->name,
                                fmt_reason(&why, rc));
            continue;
        }
        char *path = NULL, *sdir = fmt_manifest_shard_dir(p->dir, ms);
        if (!sdir || asprintf(&path, "%s/%s", p->dir, ms->file) < 0) {
            free(sdir);
            return ENOMEM;
        }
        void *s = NULL;
        fmt_msg why = {{0}};
        int rc = strchr(ms->file, '/') || ms->offset ? FMT_ECORRUPT
                                                      : be->r_open(&s, sdir, path,
                                                                   FMT_ACCESS_MMAP, &why);
        const fmt_shard_info *h = rc ? NULL : be->r_info(s);
        if (h && (h->hash != ms->hash || h->samples != ms->samples ||
                  h->first_index != ms->first || h->bytes != ms->bytes))
            rc = fmt_fail(&why, FMT_ECORRUPT, "does not match its part's manifest");
        if (rc)
            fmt_fail(msg, SHC_MERGE_EMISMATCH, "part %s: %s: %s", p->name, path,
                     fmt_reason(&why, rc));
        be->r_close(s);
        free(path);
        free(sdir);
        if (rc)
            return SHC_MERGE_EMISMATCH;
    }
    return 0;
}

static int read_tsv(const char *dir, const char *name, char **buf, size_t *blen, char ***lines,
                    size_t *n)
{
    char *path;
    if (asprintf(&path, "%s/%s", dir, name) < 0)
        return ENOMEM;
    int rc = fmt_read_file(path, MERGE_MAX_TSV, (uint8_t **)buf, blen);
    free(path);
    if (rc == 0 && (rc = split_lines(*buf, *blen, lines, n)) != 0) {
        free(*buf);
        *buf = NULL;
    }
    return rc;
}

/* OUT/rejects.tsv, OUT/inputs.tsv and OUT/warnings.tsv from the parts': the header once, the
 * listing's skips once (every part lists them), then each part's own lines in part order. */
static int write_tsvs(const char *out, const part_t *parts, uint32_t n, fmt_msg *msg)
{
    static const char *const names[3] = {"rejects.tsv", "inputs.tsv", "warnings.tsv"};
    for (int t = 0; t < 3; t++) {
        char *obuf = NULL, *path = NULL;
        size_t olen = 0;
        FILE *f = open_memstream(&obuf, &olen);
        if (!f)
            return ENOMEM;
        int rc = 0;
        for (uint32_t i = 0; i < n && !rc; i++) {
            const shc_part_record *r = &parts[i].rec;
            char *buf = NULL, **lines = NULL;
            size_t blen, nl;
            rc = read_tsv(parts[i].dir, names[t], &buf, &blen, &lines, &nl);
            if (rc == ENOENT && t == 2) {
                rc = 0;     /* a part built before warnings were listed: none */
                continue;
            }
            if (rc) {
                fmt_fail(msg, rc, "part %s: cannot read %s/%s: %s", parts[i].name, parts[i].dir,
                         names[t], fmt_strerror(rc));
                break;
            }
            /* header, then (rejects) the listing's skips and this part's rejects, or (inputs)
             * one line per input of its slice */
            size_t skips = t == 0 ? (size_t)r->listing_skips : 0;
            size_t own = t == 0 ? (size_t)r->rejects : (size_t)(r->end_input - r->first_input);
            if (t == 2) {
                /* warnings: the header once, then each part's own (no count is recorded) */
                static const char head[] = "path\twarning\n";
                if (ftell(f) == 0)
                    fwrite(head, 1, sizeof head - 1, f);
                for (size_t k = 1; k < nl; k++)
                    fwrite(lines[k], 1, line_len(lines[k]), f);
            } else if (nl != 1 + skips + own) {
                rc = fmt_fail(msg, SHC_MERGE_EMISMATCH, "part %s: %s/%s has %zu lines, its "
                              "manifest says %zu", parts[i].name, parts[i].dir, names[t], nl,
                              1 + skips + own);
            } else {
                size_t from = i == 0 ? 0 : 1 + skips;
                for (size_t k = from; k < nl; k++)
                    fwrite(lines[k], 1, line_len(lines[k]), f);
            }
            free(lines);
            free(buf);
        }
        if (fclose(f) != 0 && !rc)
            rc = ENOMEM;
        if (!rc && asprintf(&path, "%s/%s", out, names[t]) < 0)
            rc = ENOMEM;
        if (!rc && (rc = fmt_write_file_atomic(path, obuf, olen)) != 0)
            fmt_fail(msg, rc, "cannot write %s: %s", path, fmt_strerror(rc));
        free(path);
        free(obuf);
        if (rc)
            return rc;
    }
    return 0;
}

static int write_manifest(const char *out, const part_t *parts, uint32_t n,
                          shc_merge_result *res, fmt_msg *msg)
{
    const part_t *ref = &parts[0];
    fmt_manifest mm = ref->m;       /* shares part 0's strings; only shards are our own */
    mm.nshards = 0;
    for (uint32_t i = 0; i < n; i++)
        mm.nshards += parts[i].m.nshards;
    mm.shards = calloc(mm.nshards ? mm.nshards : 1, sizeof *mm.shards);
    if (!mm.shards)
        return ENOMEM;
    uint64_t sum[3] = {0}, sumsq[3] = {0}, pixels = 0, samples = 0, rejects = 0, bytes = 0;
    size_t k = 0;
    int rc = 0;
    for (uint32_t i = 0; i < n && !rc; i++) {
        const part_t *p = &parts[i];
        for (size_t j = 0; j < p->m.nshards; j++, k++) {
            const fmt_manifest_shard *s = &p->m.shards[j];
            fmt_manifest_shard *d = &mm.shards[k];
            *d = *s;
            d->first = samples + s->first;
            d->offset = samples;
            d->file = NULL;
            if (asprintf(&d->file, "%s/%s/%s", SHC_PARTS_DIR, p->name, s->file) < 0) {
                d->file = NULL;
                rc = ENOMEM;
                break;
            }
            bytes += s->bytes;
        }
        samples += p->m.samples;
        rejects += p->rec.rejects;
        pixels += p->rec.pixels;
        for (int c = 0; c < 3; c++) {
            sum[c] += p->rec.sum[c];
            sumsq[c] += p->rec.sumsq[c];
        }
    }
    if (!rc) {
        mm.samples = samples;
        mm.inputs = ref->rec.inputs + ref->rec.listing_skips;
        mm.rejects = rejects + ref->rec.listing_skips;
        mm.pixels = pixels;
        shc_channel_stats(sum, sumsq, pixels, mm.channels, mm.mean, mm.std);
        mm.fingerprint = ref->rec.fingerprint;
        mm.build_json = ref->rest;
        rc = fmt_manifest_stage(out, &mm);      /* published once it opens */
        if (rc)
            fmt_fail(msg, rc, "cannot write %s/%s: %s", out, FMT_MANIFEST_NAME,
                     fmt_strerror(rc));
    }
    if (!rc && res) {
        res->parts = n;
        res->samples = samples;
        res->inputs = mm.inputs;
        res->rejects = mm.rejects;
        res->shards = mm.nshards;
        res->bytes = bytes;
    }
    for (size_t j = 0; j < mm.nshards; j++)
        free(mm.shards[j].file);
    free(mm.shards);
    return rc;
}

SHC_MERGE_ERRORS(FMT_ERROR_CHECK)
_Static_assert(SHC_MERGE_ELAST == SHC_MERGE_EBUSY + 1, "a code of merge.h is not in fmt.h's list");

int shc_merge_exit(int rc)
{
    if (rc == 0)
        return SHC_EXIT_OK;
    return (rc >= SHC_MERGE_ENOPARTS && rc < SHC_MERGE_ELAST) ||
                   rc == FMT_EINVAL     /* an OUT that cannot be written: http(s):// */
               ? SHC_EXIT_USAGE : SHC_EXIT_IO;
}

int shc_merge(const char *out, const shc_merge_opts *o, shc_merge_result *res, fmt_msg *msg)
{
    if (rmt_is_url(out))
        return shc_merge_upload(out, o, res, msg);
    return shc_merge_with(out, NULL, NULL, res, msg);
}

int shc_merge_with(const char *out, shc_merge_shard_fn elsewhere, void *ctx,
                   shc_merge_result *res, fmt_msg *msg)
{
    if (res)
        memset(res, 0, sizeof *res);
    if (msg)
        msg->text[0] = '\0';
    char *pdir = NULL;
    if (asprintf(&pdir, "%s/%s", out, SHC_PARTS_DIR) < 0)
        return fmt_fail(msg, ENOMEM, "out of memory");
    uint32_t n = 0;
    part_t *parts = NULL;
    int lock_fd = -1;
    int rc = real_dir(pdir);
    if (rc) {
        rc = fmt_fail(msg, SHC_MERGE_ENOPARTS, "no parts in %s: %s (build them first with "
                      "shardc build --part I/N)", pdir,
                      rc == ENOTDIR ? "not a folder" : strerror(rc));
        goto leave;
    }
    /* one writer of OUT at a time, merges and whole builds alike: the lock build takes */
    long holder;
    rc = shc_lock_dir(out, SHC_LOCK_NAME, &lock_fd, &holder);
    if (rc == EWOULDBLOCK) {
        rc = fmt_fail(msg, SHC_MERGE_EBUSY, "%s is being written by another shardc merge or "
                      "build", out);
        if (holder > 0)
            append(msg, ", pid %ld", holder);
        goto leave;
    }
    if (rc) {
        rc = fmt_fail(msg, rc, "cannot lock %s/%s: %s", out, SHC_LOCK_NAME, strerror(rc));
        goto leave;
    }
    if ((rc = find_count(pdir, &n, msg)))
        goto leave;
    parts = calloc(n, sizeof *parts);
    if (!parts) {
        rc = ENOMEM;
        goto leave;
    }
    uint32_t missing = 0, unfinished = 0;
    for (uint32_t i = 0; i < n && !rc; i++) {
        part_t *p = &parts[i];
        p->part = (shc_part){i, n};
        shc_part_name(&p->part, p->name);
        if (asprintf(&p->dir, "%s/%s", pdir, p->name) < 0) {
            p->dir = NULL;
            rc = ENOMEM;
            break;
        }
        rc = load_part(p, msg);
        if (!rc && !p->complete)
            access(p->dir, F_OK) == 0 ? unfinished++ : missing++;
    }
    if (rc)
        goto leave;
    if (missing || unfinished) {
        /* a long folder name is shortened to its last 200 characters, so that the message
         * always has room to name at least the first part at fault */
        size_t plen = strlen(pdir);
        rc = fmt_fail(msg, SHC_MERGE_EMISSING, "%u of %u parts in %s%s are not ready:",
                      missing + unfinished, n, plen > 200 ? "..." : "",
                      plen > 200 ? pdir + plen - 197 : pdir);
        uint32_t listed = 0;
        for (uint32_t i = 0; msg && i < n; i++) {
            if (parts[i].complete)
                continue;
            char one[128];
            snprintf(one, sizeof one, "%s part %s %s", listed++ ? ";" : "", parts[i].name,
                     access(parts[i].dir, F_OK) == 0
                         ? "is unfinished (no manifest: running, failed or killed; finish it "
                           "with --resume)"
                         : "is missing");
            /* the parts that do not fit in the message, with room kept for the ellipsis */
            if (strlen(msg->text) + strlen(one) + sizeof " ..." > sizeof msg->text) {
                append(msg, " ...");
                break;
            }
            append(msg, "%s", one);
        }
        goto leave;
    }
    /* the parts are checked against the build most of them agree on, so that the odd one out
     * is the one named */
    const part_t *ref = majority(parts, n);
    const fmt_backend *be = fmt_backend_find(ref->m.backend);
    if (!be) {
        rc = fmt_fail(msg, SHC_MERGE_EMISMATCH, "part %s: unknown backend '%s'", ref->name,
                      ref->m.backend);
        goto leave;
    }
    for (uint32_t i = 0; i < n && !rc; i++)
        if (!(rc = check_part(&parts[i], ref, msg)))
            rc = check_shards(&parts[i], be, elsewhere, ctx, msg);
    if (rc)
        goto leave;

    /* a previous merge's manifest goes first: none may stand beside the new tables */
    char *top;
    if (asprintf(&top, "%s/%s", out, FMT_MANIFEST_NAME) < 0) {
        rc = ENOMEM;
        goto leave;
    }
    if (unlink(top) != 0 && errno != ENOENT)
        rc = fmt_fail(msg, errno, "cannot remove %s: %s", top, strerror(errno));
    else
        fmt_fsync_parent(top);
    free(top);
    if (!rc)
        rc = write_tsvs(out, parts, n, msg);
    if (!rc)
        rc = write_manifest(out, parts, n, res, msg);
    if (!rc) {
        /* what was written opens as a reader opens it, or the merge failed and publishes no
         * manifest */
        fmt_msg probe = {{0}};
        fmt_dataset *d = NULL;
        rc = elsewhere ? 0
                       : fmt_dataset_open_flags(&d, out, FMT_ACCESS_PREAD, FMT_OPEN_STAGED, &probe);
        fmt_dataset_close(d);
        if (rc) {
            char *staged = fmt_path_join(out, FMT_MANIFEST_STAGED_NAME, "");
            if (staged)
                unlink(staged);
            free(staged);
            fmt_fail(msg, rc, "the merged dataset does not open: %s", fmt_reason(&probe, rc));
        } else if ((rc = fmt_manifest_publish(out)) != 0) {
            fmt_fail(msg, rc, "cannot write %s/%s: %s", out, FMT_MANIFEST_NAME, fmt_strerror(rc));
        }
    }
leave:
    if (rc == ENOMEM && msg && !msg->text[0])
        fmt_fail(msg, rc, "out of memory");
    for (uint32_t i = 0; parts && i < n; i++) {
        free(parts[i].dir);
        free(parts[i].rest);
        fmt_manifest_free(&parts[i].m);
    }
    free(parts);
    free(pdir);
    if (lock_fd >= 0) {
        /* no stale pid left behind, as build leaves none */
        if (ftruncate(lock_fd, 0) != 0) {
            /* harmless: the next writer truncates it too */
        }
        close(lock_fd);
    }
    return rc;
}
