/* yolo.c - YOLO label files as a detection build's annotations (annot.h).
 *
 * The images are the image files under IMAGES (recursively, hidden names left out); image
 * IMAGES/D/S.EXT has its boxes in LABELS/D/S.txt, one "class cx cy w h" line per box (class an
 * integer index into the names file, the rest normalised to the image's width and height; blank
 * lines ignored). An image without a label file has no boxes. Its image id is S when S is all
 * digits, else its position in the sorted list. Errors (the whole build stops, naming the file
 * and line): a line that is not five fields, a class that is not a name's index, a value that
 * is not a finite number, a line holding a NUL byte (a file zero-filled by a crash), a label file
 * without an image, two images sharing a label file, two images with one id, an empty or
 * duplicate name in the names file. The names file and the label files must be regular files (a
 * FIFO or /dev/zero would hang the build).
 */
#include "annot.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "target.h"
#include "util.h"

typedef struct {
    char **v;
    size_t n, cap;
} strlist;

static int strlist_add(strlist *l, char *s)
{
    if (!s)
        return ENOMEM;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        char **p = realloc(l->v, cap * sizeof *p);
        if (!p) {
            free(s);
            return ENOMEM;
        }
        l->v = p;
        l->cap = cap;
    }
    l->v[l->n++] = s;
    return 0;
}

static void strlist_free(strlist *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static int by_str(const void *x, const void *y)
{
    return strcmp(*(char *const *)x, *(char *const *)y);
}

/* A folder on the path from the root to the one being walked (symbolic links followed). */
typedef struct dir_id {
    dev_t dev;
    ino_t ino;
    const struct dir_id *up;
} dir_id;

/* Relative paths under root/rel whose names pass keep(), recursively, hidden names left out.
 * A folder met again below itself (a symbolic link loop) is not entered there: no loop can make
 * the walk repeat or run away. (Two links to one folder from outside it still list its files
 * under both names, as the image list of a build does.) */
static int walk(const char *root, const char *rel, int (*keep)(const char *), strlist *out,
                const dir_id *up, int depth, fmt_msg *msg)
{
    char *dir = *rel ? fmt_path_join(root, rel, "") : strdup(root);
    if (!dir)
        return ENOMEM;
    struct stat ds;
    dir_id here = {0, 0, up};
    if (stat(dir, &ds) == 0) {
        here.dev = ds.st_dev;
        here.ino = ds.st_ino;
        for (const dir_id *a = up; a; a = a->up)
            if (a->dev == here.dev && a->ino == here.ino) {
                free(dir);
                return 0;
            }
    }
    DIR *d = opendir(dir);
    if (!d) {
        int e = errno;
        fmt_fail(msg, e, "cannot read %s: %s", dir, strerror(e));
        free(dir);
        return e;
    }
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char *sub = *rel ? fmt_path_join(rel, e->d_name, "") : strdup(e->d_name);
        char *full = sub ? fmt_path_join(root, sub, "") : NULL;
        struct stat st;
        if (!full) {
            rc = ENOMEM;
        } else if (stat(full, &st) != 0) {
            /* a dangling link is no input */
        } else if (S_ISDIR(st.st_mode) && depth < 64) {
            rc = walk(root, sub, keep, out, &here, depth + 1, msg);
        } else if (S_ISREG(st.st_mode) && keep(e->d_name)) {
            rc = strlist_add(out, sub);
            sub = NULL;
        }
        free(sub);
        free(full);
    }
    closedir(d);
    free(dir);
    return rc;
}

int shc_annot_walk(const char *root, int (*keep)(const char *), char ***out, size_t *n,
                   fmt_msg *msg)
{
    strlist l = {0};
    int rc = walk(root, "", keep, &l, NULL, 0, msg);
    if (rc) {
        strlist_free(&l);
        return rc;
    }
    if (l.n > 1)
        qsort(l.v, l.n, sizeof *l.v, by_str);
    *out = l.v;
    *n = l.n;
    return 0;
}

static int is_txt(const char *name)
{
    size_t n = strlen(name);
    return n > 4 && strcmp(name + n - 4, ".txt") == 0;
}

/* rel without its extension (malloc'd). */
static char *stem_of(const char *rel)
{
    const char *slash = strrchr(rel, '/'), *dot = strrchr(rel, '.');
    size_t n = dot && (!slash || dot > slash) ? (size_t)(dot - rel) : strlen(rel);
    char *s = malloc(n + 1);
    if (s) {
        memcpy(s, rel, n);
        s[n] = '\0';
    }
    return s;
}

enum { LINE_MAX_BYTES = 4095 };

/* The message of a line with a NUL byte (nul) or longer than LINE_MAX_BYTES. */
static int line_fail(fmt_msg *msg, const char *path, int64_t lineno, int nul)
{
    if (nul)
        return fmt_fail(msg, EINVAL, "%s:%" PRId64 ": NUL byte in the line (a damaged file, "
                        "zero-filled by a crash?)", path, lineno);
    return fmt_fail(msg, EINVAL, "%s:%" PRId64 ": line longer than %d bytes", path, lineno,
                    LINE_MAX_BYTES);
}

static int by_str_pos(const void *x, const void *y)
{
    char *const *a = *(char *const *const *)x, *const *b = *(char *const *const *)y;
    int c = strcmp(*a, *b);
    return c ? c : a < b ? -1 : a > b;
}

int shc_yolo_duplicate(char *const *names, size_t n, size_t *first, size_t *again)
{
    if (n < 2)
        return 0;
    char *const **v = malloc(n * sizeof *v);
    if (!v)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        v[i] = &names[i];
    /* by name, then position: a run of equal names starts at its first occurrence */
    qsort(v, n, sizeof *v, by_str_pos);
    size_t best = n, best_first = 0;
    for (size_t i = 1, run = 0; i < n; i++) {
        if (strcmp(*v[i], *v[i - 1]) != 0) {
            run = i;
            continue;
        }
        size_t at = (size_t)(v[i] - names);
        if (i == run + 1 && at < best) {    /* the run's second: its first repeat */
            best = at;
            best_first = (size_t)(v[run] - names);
        }
    }
    free(v);
    if (best == n)
        return 0;
    *first = best_first;
    *again = best;
    return 1;
}

/* The names file: one class name per line (a trailing "\r" ignored). */
static int read_names(const char *path, shc_annot *a, fmt_msg *msg)
{
    fmt_msg why = {""};
    int rc;
    FILE *f = fmt_fopen_file(path, &rc, &why);
    if (!f)
        return fmt_fail(msg, rc, "cannot read %s: %s", path, why.text);
    char line[LINE_MAX_BYTES + 1];
    size_t lineno = 0, blank_at = 0;
    long len;
    int nul;
    while (rc == 0 && (len = shc_read_line(f, line, sizeof line, &nul)) != -1) {
        lineno++;
        if (len < 0 || nul) {
            rc = line_fail(msg, path, (int64_t)lineno, nul);
            break;
        }
        size_t n = (size_t)len;
        while (n && line[n - 1] == '\r')
            line[--n] = '\0';
        if (n == 0) {
            blank_at = blank_at ? blank_at : lineno;
            continue;
        }
        if (blank_at) {
            rc = fmt_fail(msg, EINVAL, "%s:%zu: empty class name", path, blank_at);
            break;
        }
        fmt_category *c = realloc(a->cats, (a->ncats + 1) * sizeof *c);
        if (!c || !(c[a->ncats].name = strdup(line))) {
            if (c)
                a->cats = c;
            rc = ENOMEM;
            break;
        }
        a->cats = c;
        a->cats[a->ncats].id = (int64_t)a->ncats;
        a->ncats++;
    }
    if (rc == 0 && ferror(f))
        rc = fmt_fail(msg, EIO, "cannot read %s: %s", path, strerror(EIO));
    fclose(f);
    if (rc == 0 && a->ncats == 0)
        rc = fmt_fail(msg, EINVAL, "%s: no class names", path);
    if (rc == 0) {
        /* no blank line comes before the last name, so name i is on line i + 1 */
        char **names = malloc(a->ncats * sizeof *names);
        size_t first = 0, again = 0;
        int dup = names ? 0 : -ENOMEM;
        for (size_t i = 0; names && i < a->ncats; i++)
            names[i] = a->cats[i].name;
        if (names)
            dup = shc_yolo_duplicate(names, a->ncats, &first, &again);
        free(names);
        if (dup < 0)
            rc = ENOMEM;
        else if (dup)
            rc = fmt_fail(msg, EINVAL, "%s:%zu: class name '%s' also on line %zu", path,
                          again + 1, a->cats[again].name, first + 1);
    }
    return rc;
}

/* A label file's line may be long: a polygon of hundreds of points (YOLO segmentation). */
enum { LABEL_LINE_MAX = 1 << 20 };

/* The number in field f of a label line into *v. 0, or EINVAL naming it. */
static int label_number(fmt_msg *msg, const char *path, int64_t lineno, const char *f, double *v)
{
    char *end;
    *v = strtod(f, &end);
    if (*end || end == f || !isfinite(*v))
        return fmt_fail(msg, EINVAL, "%s:%" PRId64 ": '%s' is not a number", path, lineno, f);
    return 0;
}

/* A normalised coordinate: within 0..1 (the rounding slack of the boxes' edges allowed). */
static int normalised(double v)
{
    return v >= -1e-6 && v <= 1 + 1e-6;
}

/* One label line's numbers after the class: a box (4), a polygon (2n, n >= 3; segmentation) or
 * a box and K keypoints of D values (pose, o->kpt_k > 0) into b and a->pool. */
static int label_shape(const shc_annot_opts *o, shc_annot *a, const char *path, int64_t lineno,
                       const double *v, size_t n, shc_annot_box *b, fmt_msg *msg)
{
    b->kp_at = SIZE_MAX;
    if (o->kpt_k) {
        size_t want = 4 + (size_t)o->kpt_k * o->kpt_d;
        if (n != want)
            return fmt_fail(msg, EINVAL, "%s:%" PRId64 ": %zu fields, expected 'class cx cy w h' "
                            "and %" PRIu32 " keypoints of %" PRIu32 " values (--kpt-shape %" PRIu32
                            ",%" PRIu32 "): %zu fields", path, lineno, n + 1, o->kpt_k, o->kpt_d,
                            o->kpt_k, o->kpt_d, want + 1);
        memcpy(b->v, v, sizeof b->v);
        b->kp_at = a->npool;
        for (uint32_t k = 0; k < o->kpt_k; k++) {
            const double *q = v + 4 + (size_t)k * o->kpt_d;
            double kp[3] = {q[0], q[1], o->kpt_d == 3 ? q[2] : 2};
            if (!(kp[2] == 0 || kp[2] == 1 || kp[2] == 2))
                return fmt_fail(msg, EINVAL, "%s:%" PRId64 ": keypoint %" PRIu32 " visibility %g "
                                "is not 0, 1 or 2", path, lineno, k, kp[2]);
            if (kp[2] > 0 && (!normalised(kp[0]) || !normalised(kp[1])))
                return fmt_fail(msg, EINVAL, "%s:%" PRId64 ": keypoint %" PRIu32 " (%g, %g) is "
                                "not inside the image (normalised 0..1)", path, lineno, k, kp[0],
                                kp[1]);
            if (shc_annot_pool_add(a, kp, 3))
                return ENOMEM;
        }
        return 0;
    }
    if (n == 4) {
        memcpy(b->v, v, sizeof b->v);
        return 0;
    }
    if (n % 2 || n < 6)
        return fmt_fail(msg, EINVAL, "%s:%" PRId64 ": expected 'class cx cy w h' (5 fields) or "
                        "'class x1 y1 x2 y2 x3 y3 ...' (a polygon of at least 3 points), found %zu "
                        "fields%s", path, lineno, n + 1,
                        n % 2 ? " (an odd number of coordinates)" : "");
    /* a polygon: its box is the points' extent (as Ultralytics' segments2boxes) */
    double lo[2] = {INFINITY, INFINITY}, hi[2] = {-INFINITY, -INFINITY};
    for (size_t j = 0; j < n; j++) {
        if (!normalised(v[j]))
            return fmt_fail(msg, EINVAL, "%s:%" PRId64 ": polygon point %zu (%g, %g) is not "
                            "inside the image (normalised 0..1)", path, lineno, j / 2,
                            v[j - j % 2], v[j - j % 2 + 1]);
        lo[j % 2] = fmin(lo[j % 2], v[j]);
        hi[j % 2] = fmax(hi[j % 2], v[j]);
    }
    b->v[0] = (lo[0] + hi[0]) / 2;
    b->v[1] = (lo[1] + hi[1]) / 2;
    b->v[2] = hi[0] - lo[0];
    b->v[3] = hi[1] - lo[1];
    b->seg_kind = SHC_SEG_NPOLY;
    b->seg_at = a->npool;
    double np = (double)(n / 2);
    if (shc_annot_pool_add(a, &np, 1) || shc_annot_pool_add(a, v, n))
        return ENOMEM;
    b->seg_len = a->npool - b->seg_at;
    a->ext |= FMT_TARGET_EXT_MASKS;
    return 0;
}

/* One label file's lines into boxes of the image just added. ENOENT: no label file. */
static int read_labels(const shc_annot_opts *o, const char *path, shc_annot *a, char *line,
                       double **vals, size_t *capv, fmt_msg *msg)
{
    fmt_msg why = {""};
    int rc;
    FILE *f = fmt_fopen_file(path, &rc, &why);
    if (!f)
        return rc == ENOENT ? 0 : fmt_fail(msg, rc, "cannot read %s: %s", path, why.text);
    int64_t lineno = 0;
    long len;
    int nul;
    while (rc == 0 && (len = shc_read_line(f, line, LABEL_LINE_MAX + 1, &nul)) != -1) {
        lineno++;
        if (len < 0 || nul) {
            rc = nul ? line_fail(msg, path, lineno, nul)
                 : fmt_fail(msg, EINVAL, "%s:%" PRId64 ": line longer than %d bytes", path,
                            lineno, LABEL_LINE_MAX);
            break;
        }
        char *save = NULL, *cls_s = strtok_r(line, " \t\r\n", &save);
        if (!cls_s)
            continue;
        size_t n = 0;
        for (char *tok; rc == 0 && (tok = strtok_r(NULL, " \t\r\n", &save)); n++) {
            if (n == *capv) {
                size_t cap = *capv ? 2 * *capv : 64;
                double *p = realloc(*vals, cap * sizeof *p);
                if (!p) {
                    rc = ENOMEM;
                    break;
                }
                *vals = p;
                *capv = cap;
            }
            rc = label_number(msg, path, lineno, tok, &(*vals)[n]);
        }
        if (rc)
            break;
        shc_annot_box b = {.id = lineno};
        char *end;
        errno = 0;
        long long cls = strtoll(cls_s, &end, 10);
        if (*end || errno || cls < 0 || (uint64_t)cls >= a->ncats) {
            rc = fmt_fail(msg, EINVAL, "%s:%" PRId64 ": class '%s' is not an index of the %zu "
                          "names", path, lineno, cls_s, a->ncats);
            break;
        }
        b.category = cls;
        if ((rc = label_shape(o, a, path, lineno, *vals, n, &b, msg)) == 0)
            rc = shc_annot_add_box(a, &b);
    }
    if (rc == 0 && ferror(f))
        rc = fmt_fail(msg, EIO, "cannot read %s: %s", path, strerror(EIO));
    fclose(f);
    return rc;
}

/* A pose dataset (--kpt-shape K,D): every class has the K keypoints, named "0" .. "K-1" (a
 * label file names none), without a skeleton. */
static int pose_setup(const shc_annot_opts *o, shc_annot *a, fmt_msg *msg)
{
    if (o->kpt_k > FMT_TARGET_MAX_KEYPOINTS || (o->kpt_d != 2 && o->kpt_d != 3))
        return fmt_fail(msg, EINVAL, "--kpt-shape %" PRIu32 ",%" PRIu32 ": K keypoints (1..%u) "
                        "of D values (2: x y, 3: x y visibility)", o->kpt_k, o->kpt_d,
                        FMT_TARGET_MAX_KEYPOINTS);
    a->nkp = o->kpt_k;
    a->ext |= FMT_TARGET_EXT_KEYPOINTS;
    if (!(a->kp_names = calloc(o->kpt_k, sizeof *a->kp_names)) ||
        !(a->cat_kp = malloc(a->ncats)) || !(a->skeleton = calloc(1, sizeof *a->skeleton)))
        return ENOMEM;
    memset(a->cat_kp, 1, a->ncats);
    for (uint32_t k = 0; k < o->kpt_k; k++) {
        char name[16];
        snprintf(name, sizeof name, "%" PRIu32, k);
        if (!(a->kp_names[k] = strdup(name)))
            return ENOMEM;
    }
    return 0;
}

typedef struct {
    int64_t id;
    size_t pos;
    int numeric;                        /* the id is the name, not the position */
} yid;

/* Where image id y comes from, for messages. */
static const char *id_source(const yid *y)
{
    return y->numeric ? "by name" : "by position";
}

static int by_yid(const void *x, const void *y)
{
    int64_t a = ((const yid *)x)->id, b = ((const yid *)y)->id;
    return a < b ? -1 : a > b;
}

int shc_yolo_load(const shc_annot_opts *o, shc_annot *a, fmt_inputs *in, fmt_msg *msg)
{
    strlist imgs = {0}, stems = {0}, labels = {0};
    yid *ids = NULL;
    int64_t *idv = NULL;                /* each image's id, by position */
    a->kind = SHC_ANNOT_YOLO;
    char *line = malloc(LABEL_LINE_MAX + 1);
    double *vals = NULL;
    size_t capv = 0;
    int rc = line ? read_names(o->names, a, msg) : ENOMEM;
    if (rc == 0 && o->kpt_k)
        rc = pose_setup(o, a, msg);
    if (rc == 0)
        rc = walk(o->images, "", fmt_is_image_name, &imgs, NULL, 0, msg);
    if (rc == 0)
        rc = walk(o->yolo, "", is_txt, &labels, NULL, 0, msg);
    if (rc)
        goto leave;
    if (imgs.n > 1)                     /* an empty folder: no list to sort (v is NULL) */
        qsort(imgs.v, imgs.n, sizeof *imgs.v, by_str);
    for (size_t i = 0; i < imgs.n && rc == 0; i++)
        rc = strlist_add(&stems, stem_of(imgs.v[i]));
    if (rc)
        goto leave;
    /* every label file has exactly one image */
    char **sorted = malloc((stems.n ? stems.n : 1) * sizeof *sorted);
    if (!sorted) {
        rc = ENOMEM;
        goto leave;
    }
    if (stems.n)
        memcpy(sorted, stems.v, stems.n * sizeof *sorted);
    qsort(sorted, stems.n, sizeof *sorted, by_str);
    for (size_t i = 1; i < stems.n && rc == 0; i++)
        if (strcmp(sorted[i], sorted[i - 1]) == 0)
            rc = fmt_fail(msg, EINVAL, "%s: two images share the label file %s/%s.txt", o->images,
                          o->yolo, sorted[i]);
    for (size_t i = 0; i < labels.n && rc == 0; i++) {
        char *s = stem_of(labels.v[i]);
        if (!s)
            rc = ENOMEM;
        else if (!bsearch(&s, sorted, stems.n, sizeof *sorted, by_str))
            rc = fmt_fail(msg, EINVAL, "%s/%s: no image %s.* in %s", o->yolo, labels.v[i], s,
                          o->images);
        free(s);
    }
    free(sorted);
    if (rc)
        goto leave;
    ids = calloc(imgs.n ? imgs.n : 1, sizeof *ids);
    if (!ids) {
        rc = ENOMEM;
        goto leave;
    }
    for (size_t i = 0; i < imgs.n; i++) {
        const char *base = strrchr(stems.v[i], '/');
        base = base ? base + 1 : stems.v[i];
        char *end;
        errno = 0;
        long long v = strtoll(base, &end, 10);
        int numeric = *base >= '0' && *base <= '9' && !*end && !errno;
        ids[i] = (yid){numeric ? v : (int64_t)i, i, numeric};
    }
    qsort(ids, imgs.n, sizeof *ids, by_yid);
    for (size_t i = 1; i < imgs.n; i++)
        if (ids[i].id == ids[i - 1].id) {
            const yid *x = &ids[i - 1], *y = &ids[i];
            rc = fmt_fail(msg, EINVAL, "%s/%s and %s/%s: both have image id %" PRId64 " (an "
                          "image's id is its name when the name is a number, else its position "
                          "in the sorted list of images, from 0: %s %s, %s %s)", o->images,
                          imgs.v[x->pos], o->images, imgs.v[y->pos], y->id, imgs.v[x->pos],
                          id_source(x), imgs.v[y->pos], id_source(y));
            goto leave;
        }
    /* ids, sorted by id, back by position: the ids just checked are the ids used */
    idv = malloc((imgs.n ? imgs.n : 1) * sizeof *idv);
    if (!idv) {
        rc = ENOMEM;
        goto leave;
    }
    for (size_t i = 0; i < imgs.n; i++)
        idv[ids[i].pos] = ids[i].id;
    free(ids);
    ids = NULL;
    for (size_t i = 0; i < imgs.n; i++) {
        int64_t id = idv[i];
        char *lpath = fmt_path_join(o->yolo, stems.v[i], ".txt");
        if (!lpath) {
            rc = ENOMEM;
            goto leave;
        }
        char *where = strdup(lpath);
        if ((rc = shc_annot_add_image(a, id, 0, 0, where)) == 0)
            rc = read_labels(o, lpath, a, line, &vals, &capv, msg);
        free(lpath);
        if (rc)
            goto leave;
        shc_annot_image *im = &a->images[a->nimages - 1];
        if (o->skip_empty && im->count == 0) {
            free(im->where);
            a->nimages--;
            a->skipped_empty++;
            continue;
        }
        char *path = fmt_path_join(o->images, imgs.v[i], "");
        if (!path || fmt_inputs_add(in, path, -1) != 0) {
            free(path);
            rc = ENOMEM;
            goto leave;
        }
    }
leave:
    free(line);
    free(vals);
    free(ids);
    free(idv);
    strlist_free(&imgs);
    strlist_free(&stems);
    strlist_free(&labels);
    return rc;
}
