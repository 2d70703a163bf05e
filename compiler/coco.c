/* coco.c - COCO instances JSON as a detection build's annotations (annot.h).
 *
 * Read: "categories" (id, name), "images" (id, file_name relative to IMAGES, width, height),
 * "annotations" (id, image_id, category_id, bbox [x, y, w, h] in pixels, iscrowd 0/1, area);
 * iscrowd defaults to 0 and area to w * h when absent; "segmentation" (polygons or RLE) and
 * "keypoints" with the categories' "keypoints" and "skeleton" as segm.c reads them; the other
 * members are ignored. Errors (the whole build stops, naming the file and the entry): JSON that does not
 * parse, a member of the wrong type, duplicate ids (images, annotations, categories) or file
 * names, an annotation naming an image or a category that is not listed, a file name that is
 * absolute or has a ".." component, iscrowd other than 0 or 1, a negative area, an area or
 * coordinate that is not finite or lies beyond a float's range (a record stores them as float32).
 * The boxes themselves are checked against the image when it is rendered.
 */
#include "annot.h"
#include "segm.h"

#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int64_t id;
    const char *file;
    uint32_t w, h;
    size_t count, fill;         /* its annotations, and how many are placed */
} coco_image;

static int by_file(const void *x, const void *y)
{
    return strcmp(((const coco_image *)x)->file, ((const coco_image *)y)->file);
}

typedef struct {
    int64_t id;
    size_t pos;                 /* index into the sorted images, or into the annotations */
} id_pos;

static int by_id(const void *x, const void *y)
{
    int64_t a = ((const id_pos *)x)->id, b = ((const id_pos *)y)->id;
    return a < b ? -1 : a > b;
}

static int by_cat(const void *x, const void *y)
{
    int64_t a = ((const fmt_category *)x)->id, b = ((const fmt_category *)y)->id;
    return a < b ? -1 : a > b;
}

static const id_pos *find_id(const id_pos *v, size_t n, int64_t id)
{
    id_pos key = {.id = id};
    return bsearch(&key, v, n, sizeof *v, by_id);
}

/* Sort v by id (for find_id); 0, or EINVAL with msg naming the first id that appears twice in
 * the file's list what ("images", "annotations"). */
static int sort_ids(id_pos *v, size_t n, const char *file, const char *what, fmt_msg *msg)
{
    qsort(v, n, sizeof *v, by_id);
    for (size_t i = 1; i < n; i++)
        if (v[i].id == v[i - 1].id)
            return fmt_fail(msg, EINVAL, "%s: %s: id %" PRId64 " appears twice", file, what,
                            v[i].id);
    return 0;
}

/* An integer member of o: 0, or EINVAL with msg naming it. */
static int get_int(const char *file, const char *what, size_t i, json_t *o, const char *key,
                   int64_t *v, fmt_msg *msg)
{
    json_t *j = json_object_get(o, key);
    if (!json_is_integer(j))
        return fmt_fail(msg, EINVAL, "%s: %s[%zu]: '%s' missing or not an integer", file, what, i,
                        key);
    *v = (int64_t)json_integer_value(j);
    return 0;
}

/* Finite and within a float's range: what a target record stores (area and boxes as float32;
 * a larger value would become inf there, and readers refuse a record holding one). */
static int in_float_range(double v)
{
    return isfinite(v) && fabs(v) <= FLT_MAX;
}

/* A relative path that stays inside IMAGES. */
static int safe_name(const char *s)
{
    if (!*s || *s == '/')
        return 0;
    for (const char *p = s; p; p = strchr(p, '/')) {
        if (*p == '/')
            p++;
        if (strncmp(p, "..", 2) == 0 && (p[2] == '/' || p[2] == '\0'))
            return 0;
    }
    return 1;
}

int shc_coco_load(const shc_annot_opts *o, shc_annot *a, fmt_inputs *in, fmt_msg *msg)
{
    const char *file = o->coco;
    json_error_t err;
    int rc = 0;
    coco_image *imgs = NULL;
    id_pos *img_ids = NULL, *ann_ids = NULL;
    size_t *ann_img = NULL, *slot = NULL;
    a->kind = SHC_ANNOT_COCO;
    fmt_msg why = {""};
    FILE *f = fmt_fopen_file(file, &rc, &why);
    if (!f)
        return fmt_fail(msg, rc, "cannot read %s: %s", file, why.text);
    json_t *root = json_loadf(f, JSON_REJECT_DUPLICATES, &err);
    int read_error = ferror(f);
    fclose(f);
    if (!root && read_error)
        return fmt_fail(msg, EIO, "cannot read %s: %s", file, strerror(EIO));
    if (!root)
        return fmt_fail(msg, EINVAL, "%s:%d:%d: malformed JSON: %s", file, err.line, err.column,
                        err.text);
    json_t *cats = json_object_get(root, "categories"), *ims = json_object_get(root, "images"),
           *anns = json_object_get(root, "annotations");
    if (!json_is_array(cats) || !json_is_array(ims) || !json_is_array(anns)) {
        rc = fmt_fail(msg, EINVAL, "%s: not COCO instances JSON ('images', 'annotations' and "
                      "'categories' must be arrays)", file);
        goto leave;
    }
    /* categories */
    a->ncats = json_array_size(cats);
    a->cats = calloc(a->ncats ? a->ncats : 1, sizeof *a->cats);
    if (!a->cats) {
        rc = ENOMEM;
        goto leave;
    }
    for (size_t i = 0; i < a->ncats; i++) {
        json_t *c = json_array_get(cats, i), *name = json_object_get(c, "name");
        if ((rc = get_int(file, "categories", i, c, "id", &a->cats[i].id, msg)))
            goto leave;
        if (!json_is_string(name) || json_string_length(name) != strlen(json_string_value(name))) {
            rc = fmt_fail(msg, EINVAL, "%s: categories[%zu]: 'name' missing or not a string",
                          file, i);
            goto leave;
        }
        if (!(a->cats[i].name = strdup(json_string_value(name)))) {
            rc = ENOMEM;
            goto leave;
        }
    }
    qsort(a->cats, a->ncats, sizeof *a->cats, by_cat);
    for (size_t i = 1; i < a->ncats; i++)
        if (a->cats[i].id == a->cats[i - 1].id) {
            rc = fmt_fail(msg, EINVAL, "%s: categories: id %" PRId64 " appears twice", file,
                          a->cats[i].id);
            goto leave;
        }
    if ((rc = shc_segm_coco_categories(file, cats, a, msg)))
        goto leave;
    /* images, by file name */
    size_t ni = json_array_size(ims), na = json_array_size(anns);
    imgs = calloc(ni ? ni : 1, sizeof *imgs);
    img_ids = calloc(ni ? ni : 1, sizeof *img_ids);
    ann_ids = calloc(na ? na : 1, sizeof *ann_ids);
    ann_img = calloc(na ? na : 1, sizeof *ann_img);
    if (!imgs || !img_ids || !ann_ids || !ann_img) {
        rc = ENOMEM;
        goto leave;
    }
    for (size_t i = 0; i < ni; i++) {
        json_t *im = json_array_get(ims, i), *fn = json_object_get(im, "file_name");
        int64_t w = 0, h = 0;
        if ((rc = get_int(file, "images", i, im, "id", &imgs[i].id, msg)) ||
            (rc = get_int(file, "images", i, im, "width", &w, msg)) ||
            (rc = get_int(file, "images", i, im, "height", &h, msg)))
            goto leave;
        if (!json_is_string(fn) || json_string_length(fn) != strlen(json_string_value(fn)) ||
            !safe_name(json_string_value(fn))) {
            rc = fmt_fail(msg, EINVAL, "%s: images[%zu] (id %" PRId64 "): 'file_name' missing, "
                          "not a string, or not a relative path inside the image folder", file, i,
                          imgs[i].id);
            goto leave;
        }
        if (w < 1 || h < 1 || w > INT32_MAX || h > INT32_MAX) {
            rc = fmt_fail(msg, EINVAL, "%s: images[%zu] (id %" PRId64 "): size %" PRId64 "x%"
                          PRId64 " is not positive", file, i, imgs[i].id, w, h);
            goto leave;
        }
        imgs[i].file = json_string_value(fn);
        imgs[i].w = (uint32_t)w;
        imgs[i].h = (uint32_t)h;
    }
    qsort(imgs, ni, sizeof *imgs, by_file);
    for (size_t i = 0; i < ni; i++) {
        if (i && strcmp(imgs[i].file, imgs[i - 1].file) == 0) {
            rc = fmt_fail(msg, EINVAL, "%s: images: file_name '%s' appears twice (ids %" PRId64
                          " and %" PRId64 ")", file, imgs[i].file, imgs[i - 1].id, imgs[i].id);
            goto leave;
        }
        img_ids[i] = (id_pos){imgs[i].id, i};
    }
    if ((rc = sort_ids(img_ids, ni, file, "images", msg)) != 0)
        goto leave;
    /* annotations: checked, then counted per image */
    for (size_t i = 0; i < na; i++) {
        json_t *an = json_array_get(anns, i);
        int64_t id, image_id, cat;
        if ((rc = get_int(file, "annotations", i, an, "id", &id, msg)) ||
            (rc = get_int(file, "annotations", i, an, "image_id", &image_id, msg)) ||
            (rc = get_int(file, "annotations", i, an, "category_id", &cat, msg)))
            goto leave;
        const id_pos *ip = find_id(img_ids, ni, image_id);
        if (!ip) {
            rc = fmt_fail(msg, EINVAL, "%s: annotations[%zu] (id %" PRId64 "): image_id %" PRId64
                          " is not in 'images'", file, i, id, image_id);
            goto leave;
        }
        fmt_category key = {.id = cat};
        if (!bsearch(&key, a->cats, a->ncats, sizeof key, by_cat)) {
            rc = fmt_fail(msg, EINVAL, "%s: annotations[%zu] (id %" PRId64 "): category_id %"
                          PRId64 " is not in 'categories'", file, i, id, cat);
            goto leave;
        }
        ann_ids[i] = (id_pos){id, i};
        ann_img[i] = ip->pos;
        imgs[ip->pos].count++;
    }
    if ((rc = sort_ids(ann_ids, na, file, "annotations", msg)) != 0)
        goto leave;
    /* the table: images in file-name order, each with its boxes in file order */
    slot = calloc(ni ? ni : 1, sizeof *slot);
    shc_annot_box *boxes = calloc(na ? na : 1, sizeof *boxes);
    if (!slot || !boxes) {
        free(boxes);
        rc = ENOMEM;
        goto leave;
    }
    a->boxes = boxes;
    for (size_t i = 0, at = 0; i < ni; i++) {
        slot[i] = at;
        at += imgs[i].count;
    }
    for (size_t i = 0; i < na; i++) {
        json_t *an = json_array_get(anns, i), *bb = json_object_get(an, "bbox"),
               *cr = json_object_get(an, "iscrowd"), *ar = json_object_get(an, "area");
        shc_annot_box b = {0};
        json_t *cat = json_object_get(an, "category_id");
        b.id = (int64_t)json_integer_value(json_object_get(an, "id"));
        b.category = (int64_t)json_integer_value(cat);
        int ok = json_is_array(bb) && json_array_size(bb) == 4;
        for (size_t k = 0; ok && k < 4; k++) {
            json_t *v = json_array_get(bb, k);
            ok = json_is_number(v) && in_float_range(b.v[k] = json_number_value(v));
        }
        if (!ok) {
            rc = fmt_fail(msg, EINVAL, "%s: annotations[%zu] (id %" PRId64 "): 'bbox' is not 4 "
                          "finite numbers within +-%g", file, i, b.id, (double)FLT_MAX);
            goto leave;
        }
        if (cr && (!json_is_integer(cr) || (json_integer_value(cr) != 0 &&
                                             json_integer_value(cr) != 1))) {
            rc = fmt_fail(msg, EINVAL, "%s: annotations[%zu] (id %" PRId64 "): 'iscrowd' is not "
                          "0 or 1", file, i, b.id);
            goto leave;
        }
        b.iscrowd = cr ? (uint8_t)json_integer_value(cr) : 0;
        b.area = ar ? json_number_value(ar) : b.v[2] * b.v[3];
        if (ar && (!json_is_number(ar) || !in_float_range(b.area) || b.area < 0)) {
            rc = fmt_fail(msg, EINVAL, "%s: annotations[%zu] (id %" PRId64 "): 'area' is not a "
                          "number from 0 to %g", file, i, b.id, (double)FLT_MAX);
            goto leave;
        }
        if ((rc = shc_segm_coco_annotation(file, i, an, imgs[ann_img[i]].w, imgs[ann_img[i]].h, a,
                                           &b, msg)))
            goto leave;
        boxes[slot[ann_img[i]] + imgs[ann_img[i]].fill++] = b;
    }
    a->nboxes = 0;
    for (size_t i = 0; i < ni; i++) {
        if (o->skip_empty && imgs[i].count == 0) {
            a->skipped_empty++;
            continue;
        }
        char *where = NULL, *path = NULL;
        if (asprintf(&where, "%s: image id %" PRId64 " (%s)", file, imgs[i].id, imgs[i].file) < 0)
            where = NULL;
        if ((rc = shc_annot_add_image(a, imgs[i].id, imgs[i].w, imgs[i].h, where)))
            goto leave;
        /* the boxes are already in place: slot[i] .. + count */
        a->images[a->nimages - 1].first = slot[i];
        a->images[a->nimages - 1].count = imgs[i].count;
        path = fmt_path_join(o->images, imgs[i].file, "");
        if (!path || fmt_inputs_add(in, path, -1) != 0) {
            free(path);
            rc = ENOMEM;
            goto leave;
        }
    }
    a->nboxes = na;
leave:
    free(imgs);
    free(img_ids);
    free(ann_ids);
    free(ann_img);
    free(slot);
    json_decref(root);
    return rc;
}
