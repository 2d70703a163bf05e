/* images.c - per-image sets (png0, bmp, jpeg) at URLs (docs/REMOTE.md "Per-image sets"):
 * rmt_resolve's download of their shards, each an index and the image files it names.
 *
 * A shard is complete in the cache when its index has its final name (formats/imageset.md), so
 * the index is renamed into place last: it arrives as a .part, is checked against the manifest,
 * names the images, which are fetched (each into a .part, checked against the index's size and
 * file hash, fsynced and renamed into place; one already there with that size and hash is kept),
 * then every sample is checked as for any shard (decoded, its pixel hash), and only then the
 * index is renamed. The shards go in groups, each shard of a group under its exclusive lock, so
 * that another process sharing the cache waits for a shard and then finds it complete, and a
 * dataset of any number of shards holds a few descriptors at a time. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache.h"
#include "imageset.h"

#define GROUP 32                /* shards fetched together */

typedef struct {
    char *name, *part, *final;  /* the object, its download, its place */
    uint64_t size, hash;        /* the index's file size and hash */
} image_job;

int rmt_is_imageset(const fmt_backend *be)
{
    return be == &fmt_backend_png0 || be == &fmt_backend_bmp || be == &fmt_backend_jpeg;
}

/* an image file that arrived (ctx: the rmt_cache_ctx): its size and hash those of the index,
 * fsynced, renamed into place */
static int image_done(rmt_job *j, void *ctx)
{
    const rmt_cache_ctx *x = ctx;
    image_job *ij = j->user;
    if (j->rc)
        return j->rc;
    uint64_t h = 0, size = 0;
    int rc = fmt_hash_file(ij->part, 0, 0, NULL, &h, &size);
    if (rc)
        fmt_fail(&j->msg, rc, "%s: %s", ij->part, fmt_strerror(rc));
    else if (size != j->size || h != ij->hash)
        rc = fmt_fail(&j->msg, size != j->size ? FMT_ETRUNC : FMT_EHASH, "%s/%s: the object "
                      "fails its check against its shard's index: %s", x->c->url, ij->name,
                      size != j->size ? "size" : "file hash mismatch");
    if (!rc) {
        rmt_fsync_file(ij->part);
        if (rename(ij->part, ij->final) != 0)
            rc = fmt_fail(&j->msg, errno, "cannot rename %s: %s", ij->part, strerror(errno));
        else    /* (durable before the index that names it is renamed into place) */
            (void)fmt_fsync_parent(ij->final);
    }
    if (rc)
        unlink(ij->part);
    return rc;
}

/* the file at path has size bytes hashing to hash */
static int image_there(const char *path, uint64_t size, uint64_t hash)
{
    struct stat st;
    uint64_t h = 0;
    return stat(path, &st) == 0 && (uint64_t)st.st_size == size &&
           fmt_hash_file(path, 0, 0, NULL, &h, NULL) == 0 && h == hash;
}

/* Shard sj's index (its .part, checked against the manifest) read for the images it names: those
 * the folder lacks appended to *ij (grown as needed, *n of them). */
static int list_images(const rmt_cache_ctx *x, rmt_shard_job *sj, image_job **ij, size_t *n,
                       size_t *cap, fmt_msg *msg)
{
    const char *file = x->m->shards[sj->k].file, *slash = strrchr(file, '/');
    int fl = slash ? (int)(slash - file + 1) : 0;     /* the shard's folder in the dataset */
    void *s = NULL;
    fmt_msg why = {{0}};
    int rc = rmt_shard_check(x, sj->k, sj->part, sj->sdir, 0, &why);
    if (!rc)
        rc = x->be->r_open(&s, sj->sdir, sj->part, FMT_ACCESS_PREAD, &why);
    if (rc)
        return fmt_fail(msg, rc == FMT_ETRUNC ? rc : FMT_ECORRUPT, "%s/%s: the object fails its "
                        "check against the manifest: %s", x->c->url, file, fmt_reason(&why, rc));
    uint64_t samples = x->be->r_info(s)->samples;
    for (uint64_t i = 0; !rc && i < samples; i++) {
        char rel[PATH_MAX];
        uint64_t size, hash;
        rc = fmt_imageset_sample_object(s, i, rel, sizeof rel, &size, &hash);
        if (rc) {
            fmt_fail(msg, rc, "%s/%s: sample %" PRIu64 ": %s", x->c->url, file, i,
                     fmt_strerror(rc));
            break;
        }
        char *final = NULL;
        if (asprintf(&final, "%s/%s", sj->sdir, rel) < 0) {
            rc = fmt_fail(msg, ENOMEM, "out of memory");
            break;
        }
        if (image_there(final, size, hash)) {
            free(final);
            continue;
        }
        if (*n == *cap) {
            size_t c2 = *cap ? *cap * 2 : 256;
            image_job *i2 = realloc(*ij, c2 * sizeof *i2);
            if (!i2) {
                free(final);
                rc = fmt_fail(msg, ENOMEM, "out of memory");
                break;
            }
            *ij = i2;
            *cap = c2;
        }
        const char *base = strrchr(rel, '/');
        image_job *e = &(*ij)[*n];
        memset(e, 0, sizeof *e);
        e->final = final;
        e->size = size;
        e->hash = hash;
        if (asprintf(&e->name, "%.*s%s", fl, file, rel) < 0 ||
            asprintf(&e->part, "%s/%.*s.%s.part", sj->sdir, (int)(base - rel + 1), rel,
                     base + 1) < 0) {
            free(e->name);
            free(final);
            rc = fmt_fail(msg, ENOMEM, "out of memory");
            break;
        }
        (*n)++;
        if ((rc = rmt_make_parents(e->part)) != 0)
            fmt_fail(msg, rc, "cannot make the folder of %s: %s", e->part, strerror(rc));
        unlink(e->part);        /* a download cut short: fetched whole */
    }
    x->be->r_close(s);
    return rc;
}

/* One group of shards, each locked: those not complete fetched, checked and placed. */
static int fetch_group(const rmt_cache_ctx *x, rmt_shard_job *sj, size_t n, unsigned parallel,
                       unsigned tries, fmt_msg *msg)
{
    rmt_job *jobs = calloc(n ? n : 1, sizeof *jobs), *ijobs = NULL;
    rmt_shard_job **todo = calloc(n ? n : 1, sizeof *todo);
    image_job *ij = NULL;
    size_t ntodo = 0, nimg = 0, cap = 0;
    int rc = jobs && todo ? 0 : fmt_fail(msg, ENOMEM, "out of memory");
    for (size_t i = 0; !rc && i < n; i++) {
        if ((sj[i].lockfd = rmt_lock_file(sj[i].lockp, LOCK_EX)) < 0) {
            rc = fmt_fail(msg, errno, "cannot lock %s: %s", sj[i].lockp, strerror(errno));
            break;
        }
        fmt_msg why;
        if (rmt_shard_check(x, sj[i].k, sj[i].final, sj[i].sdir, 0, &why) == 0) {
            x->st->cached++;    /* complete: its index is renamed last */
            continue;
        }
        unlink(sj[i].part);
        /* (the manifest's size is the index's and the images' together) */
        jobs[ntodo] = (rmt_job){.name = x->m->shards[sj[i].k].file, .path = sj[i].part};
        todo[ntodo++] = &sj[i];
    }
    if (!rc && ntodo)
        rc = rmt_fetch(x->c, jobs, ntodo, parallel, tries, NULL, NULL, NULL, x->st, msg);
    for (size_t i = 0; !rc && i < ntodo; i++)
        rc = list_images(x, todo[i], &ij, &nimg, &cap, msg);
    if (!rc && nimg && !(ijobs = calloc(nimg, sizeof *ijobs)))
        rc = fmt_fail(msg, ENOMEM, "out of memory");
    for (size_t i = 0; !rc && i < nimg; i++)
        ijobs[i] = (rmt_job){.name = ij[i].name, .path = ij[i].part, .size = ij[i].size,
                             .user = &ij[i]};
    if (!rc && nimg)
        rc = rmt_fetch(x->c, ijobs, nimg, parallel, tries, NULL, image_done, (void *)x, x->st,
                       msg);
    /* every sample checked (decoded, its pixel hash), then the index renamed into place */
    for (size_t i = 0; !rc && i < ntodo; i++)
        if ((rc = rmt_shard_publish(x, todo[i], x->m->shards[todo[i]->k].file, todo[i]->part,
                                    msg)) == 0)
            x->st->fetched++;
    for (size_t i = 0; i < ntodo; i++)
        if (rc)
            unlink(todo[i]->part);
    for (size_t i = 0; i < nimg; i++) {
        if (rc)
            unlink(ij[i].part);
        free(ij[i].name);
        free(ij[i].part);
        free(ij[i].final);
    }
    for (size_t i = 0; i < n; i++)
        rmt_shard_unlock(&sj[i]);
    free(ij);
    free(ijobs);
    free(todo);
    free(jobs);
    return rc;
}

int rmt_images_fetch(const rmt_cache_ctx *x, rmt_shard_job *sj, size_t n, unsigned parallel,
                     unsigned tries, fmt_msg *msg)
{
    int rc = 0;
    for (size_t g = 0; !rc && g < n; g += GROUP)
        rc = fetch_group(x, sj + g, n - g < GROUP ? n - g : GROUP, parallel, tries, msg);
    return rc;
}
