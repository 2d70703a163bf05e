/* segmap.c - semantic segmentation label maps as a build's targets (annot.h, --masks DIR).
 *
 * The images are the image files under IMAGES (recursively, hidden names left out, in byte
 * order); image IMAGES/D/S.EXT has its label map in MASKS/D/S.png, or, with mask_suffix "A:B"
 * and S ending in A, in MASKS/D/S'B.png where S = S'A. The layouts this pairs:
 *   VOC:        IMAGES = JPEGImages, MASKS = SegmentationClass (--skip-empty: only the images
 *               with a map; VOC's border label 255 is the default ignore index)
 *   ADE20K:     IMAGES = images/training, MASKS = annotations/training
 *   Cityscapes: IMAGES = leftImg8bit/train, MASKS = gtFine/train,
 *               --mask-suffix _leftImg8bit:_gtFine_labelIds (the other gtFine files are ignored)
 * An image without its map is an error of the load naming both, unless skip_empty leaves it out.
 *
 * A map is a palette (colour type 3: the value is the palette index) or grey (colour type 0, 1
 * to 16 bits: the value is the sample) PNG of the image's size; the values are the labels as
 * they are (no palette colours looked up, no reduce-zero-label). When the image is rendered the
 * map is read, checked against the image's size (another size rejects the image, naming both
 * files), moved through the build geometry with torch's nearest arithmetic (as segm.c moves
 * instance masks: each axis of an output pixel in the resized window takes the source index
 * fmt_target_nearest gives), the padding filled with the ignore index, and stored as the target record's
 * label map (raw.md "Target record, version 2", flag 4), with no boxes.
 */
#include "annot.h"

#include <errno.h>
#include <inttypes.h>
#include <spng.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "target.h"

/* Label maps larger than this file size are refused (a map of 16k x 16k grey fits well). */
#define SEGMAP_FILE_MAX (1ull << 30)

/* rel with its extension replaced by ".png" and the suffix mapped (malloc'd). */
static char *map_name(const char *rel, const char *suffix)
{
    const char *slash = strrchr(rel, '/'), *dot = strrchr(rel, '.');
    size_t n = dot && (!slash || dot > slash) ? (size_t)(dot - rel) : strlen(rel);
    const char *to = "";
    if (suffix) {
        const char *colon = strchr(suffix, ':');
        size_t na = (size_t)(colon - suffix);
        if (n >= na && memcmp(rel + n - na, suffix, na) == 0) {
            n -= na;
            to = colon + 1;
        }
    }
    size_t nt = strlen(to);
    char *s = malloc(n + nt + 5);
    if (s) {
        memcpy(s, rel, n);
        memcpy(s + n, to, nt);
        memcpy(s + n + nt, ".png", 5);
    }
    return s;
}

int shc_segmap_load(const shc_annot_opts *o, shc_annot *a, fmt_inputs *in, fmt_msg *msg)
{
    a->kind = SHC_ANNOT_MAPS;
    a->ext = FMT_TARGET_EXT_MAP;
    a->ignore_index = o->ignore_index;
    char **imgs = NULL;
    size_t n = 0;
    struct stat st;
    int rc;
    if (stat(o->masks, &st) != 0) {
        rc = errno;
        return fmt_fail(msg, rc, "cannot read %s: %s", o->masks, strerror(rc));
    }
    if (!S_ISDIR(st.st_mode))
        return fmt_fail(msg, ENOTDIR, "cannot read %s: not a folder", o->masks);
    rc = shc_annot_walk(o->images, fmt_is_image_name, &imgs, &n, msg);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        char *rel = map_name(imgs[i], o->mask_suffix);
        char *map = rel ? fmt_path_join(o->masks, rel, "") : NULL;
        char *img = fmt_path_join(o->images, imgs[i], "");
        free(rel);
        if (!map || !img) {
            free(map);
            free(img);
            rc = ENOMEM;
            break;
        }
        if (stat(map, &st) != 0 || !S_ISREG(st.st_mode)) {
            if (o->skip_empty) {
                a->skipped_empty++;
                free(map);
                free(img);
                continue;
            }
            rc = fmt_fail(msg, EINVAL, "%s: no label map %s (--skip-empty leaves out the images "
                          "without one)", img, map);
            free(map);
            free(img);
            break;
        }
        char *where = strdup(img);
        if ((rc = shc_annot_add_image(a, (int64_t)a->nimages, 0, 0, where)) != 0) {
            free(map);
            free(img);
            break;
        }
        a->images[a->nimages - 1].map = map;
        if (fmt_inputs_add(in, img, -1) != 0) {
            free(img);
            rc = ENOMEM;
        }
    }
    for (size_t i = 0; i < n; i++)
        free(imgs[i]);
    free(imgs);
    return rc;
}

/* The map of im into *out (w x h values, malloc'd), checked against the image's size. */
static int read_map(const shc_annot_image *im, uint32_t w, uint32_t h, uint16_t **out,
                    fmt_msg *why)
{
    uint8_t *buf = NULL, *raw = NULL;
    size_t len = 0, size = 0;
    *out = NULL;
    int rc = fmt_read_file(im->map, SEGMAP_FILE_MAX, &buf, &len);
    if (rc)
        return fmt_fail(why, FMT_ECORRUPT, "%s: cannot read its label map %s: %s", im->where,
                        im->map, strerror(rc));
    spng_ctx *ctx = spng_ctx_new(0);
    struct spng_ihdr ih;
    int err = ctx ? spng_set_png_buffer(ctx, buf, len) : SPNG_EMEM;
    if (!err)
        err = spng_get_ihdr(ctx, &ih);
    if (err) {
        rc = err == SPNG_EMEM ? ENOMEM
             : fmt_fail(why, FMT_ECORRUPT, "%s: its label map %s is not a PNG (%s)", im->where,
                        im->map, spng_strerror(err));
    } else if (ih.color_type != SPNG_COLOR_TYPE_INDEXED &&
               ih.color_type != SPNG_COLOR_TYPE_GRAYSCALE) {
        rc = fmt_fail(why, FMT_ECORRUPT, "%s: its label map %s is a colour PNG (a label map is "
                      "a palette or grey PNG: one label a pixel)", im->where, im->map);
    } else if (ih.width != w || ih.height != h) {
        rc = fmt_fail(why, FMT_ECORRUPT, "%s: its label map %s is %" PRIu32 "x%" PRIu32 ", the "
                      "image is %" PRIu32 "x%" PRIu32, im->where, im->map, ih.width, ih.height,
                      w, h);
    } else if ((err = spng_decoded_image_size(ctx, SPNG_FMT_RAW, &size)) != 0 ||
               !(raw = malloc(size ? size : 1)) ||
               (err = spng_decode_image(ctx, raw, size, SPNG_FMT_RAW, 0)) != 0) {
        rc = !err ? ENOMEM : fmt_fail(why, FMT_ECORRUPT, "%s: its label map %s: corrupt PNG "
                                      "(%s)", im->where, im->map, spng_strerror(err));
    } else if (!(*out = malloc(((size_t)w * h + 1) * sizeof **out))) {
        rc = ENOMEM;
    } else {
        unsigned d = ih.bit_depth;
        size_t stride = ((size_t)w * d + 7) / 8;
        for (uint32_t y = 0; y < h; y++) {
            const uint8_t *r = raw + (size_t)y * stride;
            uint16_t *o = *out + (size_t)y * w;
            for (uint32_t x = 0; x < w; x++) {
                if (d == 16)
                    o[x] = (uint16_t)(r[2 * x] << 8 | r[2 * x + 1]);
                else if (d == 8)
                    o[x] = r[x];
                else    /* packed, most significant bits first */
                    o[x] = (uint16_t)(r[x * d / 8] >> (8 - d - (x * d) % 8) & ((1u << d) - 1));
            }
        }
    }
    spng_ctx_free(ctx);
    free(raw);
    free(buf);
    return rc;
}

int shc_segmap_target(const shc_annot *a, size_t pos, uint32_t src_w, uint32_t src_h,
                      const fmt_geom_plan *p, uint8_t **buf, size_t *cap, uint32_t *len,
                      fmt_msg *why)
{
    const shc_annot_image *im = &a->images[pos];
    uint16_t *src, *dst = NULL;
    uint8_t *runs = NULL;
    *len = 0;
    int rc = read_map(im, src_w, src_h, &src, why);
    if (rc)
        return rc;
    size_t npix = (size_t)p->out_w * p->out_h;
    if (!(dst = malloc((npix ? npix : 1) * sizeof *dst)) ||
        !(runs = malloc(fmt_map_encode_bound(npix) + 1))) {
        rc = ENOMEM;
        goto leave;
    }
    for (size_t k = 0; k < npix; k++)
        dst[k] = (uint16_t)a->ignore_index;
    for (uint32_t y = 0; y < p->dst_h; y++) {
        uint32_t sy = fmt_target_nearest(y + p->win_y, src_h, p->rs_h);
        const uint16_t *srow = src + (size_t)sy * src_w;
        uint16_t *drow = dst + (size_t)(y + p->dst_y) * p->out_w + p->dst_x;
        for (uint32_t x = 0; x < p->dst_w; x++)
            drow[x] = srow[fmt_target_nearest(x + p->win_x, src_w, p->rs_w)];
    }
    float nobox[4] = {0};
    int64_t nolabel = 0;
    uint8_t noflag = 0;
    fmt_target t = {.count = 0, .image_id = im->image_id, .orig_width = src_w,
                    .orig_height = src_h, .boxes = nobox, .labels = &nolabel, .area = nobox,
                    .iscrowd = &noflag, .ext = FMT_TARGET_EXT_MAP, .map_width = p->out_w,
                    .map_height = p->out_h, .map_runs = runs};
    size_t nr = fmt_map_encode(dst, npix, runs, &t.map_max);
    if (nr > UINT32_MAX) {
        rc = fmt_fail(why, FMT_ECORRUPT, "%s: its label map's record would exceed 4 GiB",
                      im->where);
        goto leave;
    }
    t.map_len = (uint32_t)nr;
    rc = shc_annot_encode(&t, im->where, buf, cap, len, why);
leave:
    free(src);
    free(dst);
    free(runs);
    return rc;
}
