/* fuzz_aug - the augmentation spec and the aux record (formats/augment.h) from untrusted bytes.
 *
 * The bytes are parsed as a spec (up to the first NUL): a spec that parses must format to a
 * canonical text that parses again to exactly the same spec (the manifest records that text, the
 * build fingerprint hashes it, and shardc re-parses it to replay a variant). They are also decoded as a 64-byte
 * aux record: a record that decodes must encode to one that decodes to the same parameters, and
 * applying it (as shardc inspect does, to reproduce a variant from its source) to a source of the
 * recorded size, when that is small, must either refuse a crop outside the source or produce an
 * image of the size asked for.
 */
#include "common.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "augment.h"

static void fz_spec(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    FZ_ASSERT(text != NULL);
    memcpy(text, data, size);
    text[size] = '\0';
    fmt_aug_spec s, s2;
    fmt_msg msg;
    int rc = fmt_aug_parse(text, &s, &msg);
    free(text);
    if (rc) {
        FZ_ASSERT(rc == FMT_EINVAL || rc == ENOMEM);
        return;
    }
    char canon[512], canon2[512];
    fmt_aug_format(&s, canon, sizeof canon);
    rc = fmt_aug_parse(canon, &s2, &msg);
    if (rc)
        fprintf(stderr, "canonical spec '%s' does not parse: %s\n", canon, fmt_reason(&msg, rc));
    FZ_ASSERT(rc == 0);
    FZ_ASSERT(s2.rrc == s.rrc && s2.scale_min == s.scale_min && s2.scale_max == s.scale_max &&
              s2.ratio_min == s.ratio_min && s2.ratio_max == s.ratio_max &&
              s2.flip_p == s.flip_p && s2.brightness == s.brightness &&
              s2.contrast == s.contrast && s2.saturation == s.saturation && s2.hue == s.hue &&
              s2.gray_p == s.gray_p && s2.rotate == s.rotate &&
              s2.rotate_bilinear == s.rotate_bilinear && s2.affine == s.affine &&
              s2.affine_degrees == s.affine_degrees &&
              s2.affine_translate == s.affine_translate &&
              s2.affine_scale_min == s.affine_scale_min &&
              s2.affine_scale_max == s.affine_scale_max && s2.affine_shear == s.affine_shear);
    fmt_aug_format(&s2, canon2, sizeof canon2);
    FZ_ASSERT(strcmp(canon, canon2) == 0);
}

static void fz_record(const uint8_t *data, size_t size)
{
    static fmt_resizer *rz;
    fmt_aug_params p, q;
    if (fmt_aug_decode(data, size, &p) != 0)
        return;
    FZ_ASSERT(size == (p.affine ? FMT_AUG_RECORD_SIZE_AFFINE : FMT_AUG_RECORD_SIZE));
    uint8_t rec[FMT_AUG_RECORD_MAX];
    FZ_ASSERT(fmt_aug_encode(&p, rec) == size);
    FZ_ASSERT(fmt_aug_decode(rec, size, &q) == 0);
    FZ_ASSERT(p.source == q.source && p.variant == q.variant && p.src_w == q.src_w &&
              p.src_h == q.src_h && p.crop_x == q.crop_x && p.crop_y == q.crop_y &&
              p.crop_w == q.crop_w && p.crop_h == q.crop_h && p.flip == q.flip &&
              p.gray == q.gray && p.hue_on == q.hue_on && p.filter == q.filter &&
              p.rotate_bilinear == q.rotate_bilinear && p.affine == q.affine &&
              p.affine_tx == q.affine_tx && p.affine_ty == q.affine_ty);
    FZ_ASSERT(memcmp(&p.brightness, &q.brightness, sizeof p.brightness) == 0 &&
              memcmp(&p.contrast, &q.contrast, sizeof p.contrast) == 0 &&
              memcmp(&p.saturation, &q.saturation, sizeof p.saturation) == 0 &&
              memcmp(&p.hue, &q.hue, sizeof p.hue) == 0 &&
              memcmp(&p.angle, &q.angle, sizeof p.angle) == 0 &&
              memcmp(&p.affine_scale, &q.affine_scale, sizeof p.affine_scale) == 0 &&
              memcmp(&p.affine_shear_x, &q.affine_shear_x, sizeof p.affine_shear_x) == 0 &&
              memcmp(&p.affine_shear_y, &q.affine_shear_y, sizeof p.affine_shear_y) == 0);

    if (!p.src_w || !p.src_h || (uint64_t)p.src_w * p.src_h > 4096)
        return;
    if (!rz)
        FZ_ASSERT(fmt_resizer_create(&rz) == 0);
    fmt_image src, dst;
    uint32_t ch = (p.variant & 1) ? 1 : 3;
    FZ_ASSERT(fmt_image_alloc(&src, p.src_w, p.src_h, ch) == 0);
    for (size_t i = 0; i < (size_t)p.src_w * p.src_h * ch; i++)
        src.pixels[i] = (uint8_t)(i * 37 + p.source);
    uint32_t out_w = 1 + (uint32_t)(p.source % 24), out_h = 1 + (uint32_t)((p.source >> 8) % 24);
    fmt_msg msg;
    int inside = p.crop_w && p.crop_h && p.crop_w <= p.src_w && p.crop_h <= p.src_h &&
                 p.crop_x <= p.src_w - p.crop_w && p.crop_y <= p.src_h - p.crop_h;
    int rc = fmt_aug_apply(rz, &src, &p, out_w, out_h, &dst, &msg);
    if (!inside)
        FZ_ASSERT(rc == FMT_EINVAL);
    if (rc == 0) {
        FZ_ASSERT(dst.width == out_w && dst.height == out_h && dst.channels == ch);
        fz_touch(dst.pixels, (size_t)out_w * out_h * ch);
        fmt_image_free(&dst);
    }
    fmt_image_free(&src);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_spec(data, size);
    fz_record(data, size);
    return 0;
}
