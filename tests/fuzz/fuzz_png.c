/* fuzz_png - fmt_image_probe and fmt_image_decode on PNG files from untrusted bytes. Byte 0 of an
 * input chooses the decode options (channels, shrink hint, limits: see fz_image in common.c); the
 * rest is the file. */
#include "common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_image(FMT_IMG_PNG, data, size);
    return 0;
}
