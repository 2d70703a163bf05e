/* inputs.h - what a build reads: the ordered list of input images and their labels.
 *
 * Two sources: class-folder trees (each subfolder of a SRC is a class; class names sorted by byte
 * value give labels 0..K-1; image files found recursively, ordered by path) and list files
 * ("path label" per line, the label the last field, paths relative to the first SRC that holds
 * them). Problems with single entries that do not stop a build (an unreadable folder, a symlink
 * loop) are collected in `skipped`; problems that make the list itself wrong (a list line naming a
 * missing file, a bad label) are errors.
 */
#ifndef FMT_INPUTS_H
#define FMT_INPUTS_H

#include <stddef.h>
#include <stdint.h>

#include "fmt.h"

/* Labels in list files are 0..FMT_MAX_LABEL (the manifest names every class up to the largest). */
#define FMT_MAX_LABEL 1000000

typedef struct {
    char *path;         /* path to open (SRC joined with the relative path) */
    int32_t label;
} fmt_input;

typedef struct {
    char *path;
    char *reason;
} fmt_skip;

typedef struct {
    fmt_input *items;
    size_t n, cap;
    char **classes;     /* label L is named classes[L] */
    size_t nclasses;
    fmt_skip *skipped;
    size_t nskipped, skipcap;
    size_t ignored;     /* non-image files left out (by extension) */
} fmt_inputs;

/* Walk class-folder trees. Errors: errno of a SRC that cannot be read (msg says which). */
int fmt_inputs_from_dirs(char *const *srcs, size_t nsrc, fmt_inputs *in, fmt_msg *msg);

/* Read a list file. Errors: errno for the list file itself; EINVAL for a malformed line or bad
 * label; ENOENT when a named file is in none of the SRCs. msg names the file and line. */
int fmt_inputs_from_list(const char *list, char *const *srcs, size_t nsrc, fmt_inputs *in,
                         fmt_msg *msg);

void fmt_inputs_free(fmt_inputs *in);

/* Does the name end in an image extension we read (.jpg .jpeg .jpe .png .bmp .dib, any case)? */
int fmt_is_image_name(const char *name);

#endif
