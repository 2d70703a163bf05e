/* inputs.h - what a build reads: the ordered list of input images and their labels.
 *
 * Two sources: class-folder trees (each subfolder of a SRC is a class; class names sorted by byte
 * value give labels 0..K-1; image files found recursively, ordered by path) and list files
 * ("path label" per line, the label the last field, paths relative to the first SRC that holds
 * them). Problems with single entries that do not stop a build (an unreadable folder, a symlink
 * loop) are collected in `skipped`; problems that make the list itself wrong (a list line naming a
 * missing file, a bad label) are errors.
 *
 * Archives (archive.h) stand for the folder they extract into. A SRC that is an archive file is
 * listed as that tree: member "cat/1.jpg" is an image of class "cat", a top-level member
 * "n01440764.tar" is class "n01440764" holding the inner tar's members (ImageNet's train tar).
 * The order rule is the folder walk's: classes by name, then SRC by SRC, then paths compared
 * component by component (a folder's contents sorted by name, depth first); hidden names
 * (a component starting with '.') are left out as the walk leaves them out, and of two members
 * with one path the later one counts, as extraction would leave it. So an archive's dataset is,
 * sample for sample, that of its extracted tree, whatever order the members were written in.
 * A member's item path is "ARCHIVE!MEMBER" ("ARCHIVE!INNER.tar!MEMBER" inside an inner tar);
 * list files name members the same way. Unsafe names (absolute, or with a ".." component) and
 * links are never inputs: an image among them is a skipped entry.
 */
#ifndef FMT_INPUTS_H
#define FMT_INPUTS_H

#include <stddef.h>
#include <stdint.h>

#include "arcwalk.h"
#include "fmt.h"

/* Labels in list files are 0..FMT_MAX_LABEL (the manifest names every class up to the largest). */
#define FMT_MAX_LABEL 1000000

typedef struct {
    char *path;         /* path to open (SRC joined with the relative path), or for an archive
                         * member "ARCHIVE!MEMBER" */
    int32_t label;
    uint32_t archive;   /* 0: a file; k: a member of archives[k - 1] */
    uint64_t seq;       /* a member's ordinal in its archive's walk (archive.h) */
    uint64_t size;      /* a member's size as its header gives it (0 if unknown) */
} fmt_input;

/* An archive some inputs are members of, and how it is walked (nest: inner tars opened); id:
 * the file the listing walked (have_id), which every later walk must find again. */
typedef struct {
    char *path;
    int nest;
    int have_id;
    shc_arc_id id;
} fmt_archive_src;

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
    fmt_archive_src *archives;
    size_t narchives;
} fmt_inputs;

/* List lines are at most this long (a longer line, e.g. a stream without newlines, is an error). */
#define FMT_LIST_LINE_MAX 65536

/* Walk class-folder trees. Errors: errno of a SRC that cannot be read (msg says which). */
int fmt_inputs_from_dirs(char *const *srcs, size_t nsrc, fmt_inputs *in, fmt_msg *msg);

/* Append one input (a file path, taken over on success) with its label: 0 or ENOMEM (path is
 * then the caller's). For listings made elsewhere (annotation files). */
int fmt_inputs_add(fmt_inputs *in, char *path, int32_t label);

/* Read a list file. Errors: errno for the list file itself; EINVAL for a malformed line, a line
 * longer than FMT_LIST_LINE_MAX or a bad label; ENOENT when a named file is in none of the SRCs
 * (or a named member in none of its archive's). msg names the file and line. */
int fmt_inputs_from_list(const char *list, char *const *srcs, size_t nsrc, fmt_inputs *in,
                         fmt_msg *msg);

/* WebDataset shards: each SRC an archive, members grouped by key (the path up to the first '.'
 * of its last component: webdataset's own split), in archive order, SRC by SRC. A sample is the
 * group's image member; its label the integer in the group's ".cls" member (label "cls", the
 * default when NULL), ".txt" ("txt"), or field F of its ".json" member ("json:F", or any other
 * name F). A group without an image is left out (listed in skipped when it has a label), an
 * image without a usable label is listed in skipped. Classes are the labels, as for list files.
 * Errors as fmt_inputs_from_dirs; EINVAL for a SRC that is not an archive. */
int fmt_inputs_from_wds(char *const *srcs, size_t nsrc, const char *label, fmt_inputs *in,
                        fmt_msg *msg);

void fmt_inputs_free(fmt_inputs *in);

/* Does the name end in an image extension we read (.jpg .jpeg .jpe .png .bmp .dib, any case)? */
int fmt_is_image_name(const char *name);

#endif
