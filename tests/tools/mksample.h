/* mksample.h - the sample-data generator: synthetic class-folder image datasets made on the spot,
 * so demos, tests and benchmarks never need data from outside the machine.
 *
 * A dataset is OUT/<class-name>/NNNNN.<ext>. Each class has its own shape or texture ("circle",
 * "stripes", ...) drawn in its own hue band over a noisy background, so a simple model can learn
 * the classes. Sizes, positions and colours are drawn from a seeded generator: the same options
 * always give byte-identical files. Files are a fixed mix of JPEG variants (baseline 4:2:0, 4:2:2,
 * 4:4:4, progressive, restart markers, grayscale, one CMYK), PNG and BMP; optionally a handful of
 * deliberately broken files ("broken-*.jpg" and so on) for the reject path; or, with photo, only
 * photo-sized JPEGs whose size and texture resemble real photographs, for benchmarks.
 *
 * The broken files, in this order, the k-th in the folder of class k mod classes:
 *   broken-zero-bytes.jpg           empty
 *   broken-text-not-image.jpg       a line of text
 *   broken-truncated-half.jpg       first half of a baseline JPEG
 *   broken-corrupt-scan.jpg         32 bytes of entropy-coded data replaced ("bad Huffman code")
 *   broken-truncated-half.png       first half of a PNG
 *   broken-bad-crc.png              the stored CRC of the IDAT chunk flipped, the data intact
 *   broken-truncated-half.bmp       first half of a 24-bit BMP
 *   broken-header-60000x60000.bmp   valid header claiming 60000x60000, pixels of a small image
 *   broken-header-60000x60000.png   IHDR (with a correct CRC) claiming 60000x60000
 *
 * The library never prints; errors are returned as in fmt.h (0, errno, FMT_E*).
 * All functions are thread-safe: no global state.
 */
#ifndef MKS_MKSAMPLE_H
#define MKS_MKSAMPLE_H

#include <stdint.h>

#include "image.h"

/* splitmix64's finaliser, and its stream: the next number from the state at st. The generator,
 * its COCO mode and the tests that want the same numbers draw from these. */
static inline uint64_t mks_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline uint64_t mks_splitmix(uint64_t *st)
{
    return mks_mix64(*st += 0x9e3779b97f4a7c15ull);
}

#define MKS_MAX_CLASSES      16u
#define MKS_MIN_SIDE_LIMIT   8u        /* smallest min_side accepted */
#define MKS_MAX_SIDE_LIMIT   8192u     /* largest max_side accepted */
#define MKS_MAX_PER_CLASS    1000000u

#define MKS_BROKEN_FILES     9         /* broken files written unless disabled */
/* Photo mode: 500x375, 375x500 or 500x400 JPEGs at this quality, 4:2:0. */
#define MKS_PHOTO_QUALITY    90
#define MKS_PHOTO_MIN_LONG   360     /* photo mode: long side range */
#define MKS_PHOTO_MAX_LONG   640

typedef struct {
    unsigned classes;       /* 1..MKS_MAX_CLASSES (default 4) */
    unsigned per_class;     /* valid images per class, 1..MKS_MAX_PER_CLASS (default 24) */
    uint64_t seed;          /* default 1 */
    unsigned min_side;      /* each side drawn uniformly from min_side..max_side (default 48..160); */
    unsigned max_side;      /* ignored in photo mode */
    int broken;             /* non-zero: also write the broken files (default 1; never in photo mode) */
    int photo;              /* non-zero: photo-like JPEGs only (default 0) */
    const char *list_path;  /* non-NULL: also write this file (opened as given, not under the
                             * output folder): "class/NNNNN.ext label\n" per valid image, paths
                             * relative to the output folder, labels as mks_class_label, sorted by
                             * label then index; broken files are not listed */
} mks_opts;

/* What was written; on failure, which path failed and why. */
typedef struct {
    unsigned images;        /* valid images written */
    unsigned classes;
    unsigned broken;        /* broken files written */
    unsigned jpeg, png, bmp;    /* valid images per format */
    uint64_t bytes;         /* bytes written, broken files included, list file excluded */
    fmt_msg msg;            /* on error: "cannot write PATH: reason" naming the file or folder
                             * that could not be written, or what is wrong with the options;
                             * "" on success */
} mks_report;

/* The plan for one valid image: everything mks_generate decides before rendering it. */
typedef struct {
    uint32_t width, height;
    uint32_t channels;      /* rendered channels: 1 (gray variants) or 3 */
    fmt_image_type type;
    fmt_jpeg_opts jpeg;     /* JPEG only; jpeg.cmyk marks the single CMYK file */
    int png_level;          /* PNG only */
    char name[32];          /* file name inside the class folder, e.g. "00007.jpg" */
} mks_item;

/* Defaults listed above, list_path NULL. */
void mks_opts_init(mks_opts *o);

/* NULL if o is acceptable, else a static one-line reason (for the CLI's usage error). */
const char *mks_opts_error(const mks_opts *o);

/* Name of class cls (generation order, 0..MKS_MAX_CLASSES-1); NULL beyond. Static storage.
 * A dataset of N classes uses the first N names. */
const char *mks_class_name(unsigned cls);

/* The label shardc gives class cls in a dataset of `classes` classes: its rank among the
 * dataset's class names in strcmp order. -1 if cls >= classes or classes is out of range. */
int mks_class_label(unsigned cls, unsigned classes);

/* Plan of image `index` of class cls under o (index < o->per_class). Returns 0 or FMT_EINVAL.
 * The format mix depends on (cls, index) only, never on the seed, so file names are stable. */
int mks_plan(const mks_opts *o, unsigned cls, unsigned index, mks_item *it);

/* Render the content of image `index` of class cls at w x h (1..65535) with 1 or 3 channels into
 * img, which is allocated here (free with fmt_image_free; zeroed on error). Gray is the ITU-R 601
 * luma of the RGB picture, (19595 R + 38470 G + 7471 B + 32768) >> 16. Same arguments, same
 * pixels; the PNG and BMP files mks_generate writes hold exactly these pixels. Returns 0, ENOMEM
 * or FMT_EINVAL. */
int mks_render(unsigned cls, unsigned index, uint64_t seed, uint32_t w, uint32_t h,
               uint32_t channels, fmt_image *img);

/* As mks_render, but the photo-mode look: the class shape over smooth gradients, soft blobs and
 * fine texture, so that JPEG compresses it about as well as a real photograph. RGB only. */
int mks_render_photo(unsigned cls, unsigned index, uint64_t seed, uint32_t w, uint32_t h,
                     fmt_image *img);

/* Write the dataset into out_dir (created if missing; files already there with the same names are
 * overwritten, others are left alone). r may be NULL. Returns 0, FMT_EINVAL for bad options, an
 * errno value when a file or directory cannot be written, or an encoder's error; r->msg says
 * which and why. Stops at the first error; what was written stays. */
int mks_generate(const char *out_dir, const mks_opts *o, mks_report *r);

#endif
