/* inputs_int.h - what the listers of a build's inputs share (internal to inputs.c,
 * inputs_folder.c, inputs_archive.c, inputs_list.c and inputs_wds.c; the rest of the compiler
 * uses inputs.h).
 *
 * inputs.c holds the shared helpers below; each input kind is a file of its own: class folders
 * (inputs_folder.c), an archive as a class-folder tree (inputs_archive.c, for inputs_folder.c),
 * list files (inputs_list.c), WebDataset shards (inputs_wds.c).
 */
#ifndef SHC_INPUTS_INT_H
#define SHC_INPUTS_INT_H

#include <stddef.h>
#include <stdint.h>

#include "arcwalk.h"
#include "fmt.h"
#include "inputs.h"

/* ---- inputs.c ---- */

/* Append an input (path taken over on success) that is member seq, of the given size, of
 * archive (1-based; 0: a plain file). 0 or ENOMEM (path is then the caller's). */
int shc_inputs_add_member(fmt_inputs *in, char *path, int32_t label, uint32_t archive,
                          uint64_t seq, uint64_t size);

/* The archive's number (1-based) in in->archives, added if new. 0: out of memory. */
uint32_t shc_inputs_add_archive(fmt_inputs *in, const char *path, int nest);

/* The file archive a (1-based) was listed from: later walks must find that one. */
void shc_inputs_set_archive_id(fmt_inputs *in, uint32_t a, const shc_arc_id *id);

/* Does a walk's error condemn the whole archive (its compressed stream fails its check, or the
 * file changed while it was listed), so that none of its members may be listed? */
int shc_inputs_arc_condemned(int rc);

/* The classes of inputs labelled by number (list files, WebDataset): "0" .. "maxlabel", the
 * labels themselves; none when maxlabel < 0. 0 or ENOMEM. */
int shc_inputs_number_classes(fmt_inputs *in, int32_t maxlabel);

/* A skipped entry (both strings copied): 0 or ENOMEM. */
int shc_inputs_add_skip(fmt_inputs *in, const char *path, const char *reason);

/* A skipped member, named "ARC!NAME": 0 or ENOMEM. */
int shc_inputs_skip_member(fmt_inputs *in, const char *arc, const char *name,
                           const char *why);

/* "a/b" (one '/' between them), or NULL when out of memory. */
char *shc_inputs_join(const char *a, const char *b);

/* Free n names and the array. */
void shc_inputs_free_names(char **names, size_t n);

/* msg's text less its leading "path: " (the skipped entry names the path already) */
const char *shc_inputs_reason_of(const char *path, const char *text);

/* Is path an archive file (by name)? */
int shc_inputs_is_archive_src(const char *path);

/* ---- inputs_archive.c: an archive listed as a class-folder tree ---- */

typedef struct {
    char *cls;          /* class name */
    char *rel;          /* path within the class folder, for the order */
    char *name;         /* the member's name in the archive */
    uint64_t seq, size;
} shc_inputs_tree_entry;

typedef struct {
    fmt_inputs *in;
    const char *path;
    shc_inputs_tree_entry *v;
    size_t n, cap;
    char **classes;     /* class names met (folders, inner tars), unsorted, with repeats */
    size_t ncls, capcls;
    shc_arc_id id;      /* the file listed */
} shc_inputs_tree;

/* List the archive at path as a class-folder tree into t (entries sorted by class, then the walk
 * order; of two entries with one path only the later one kept). A damaged archive keeps the
 * members before the damage and a skipped entry (in in) saying where; one that is no archive at
 * all is an error (msg says which). */
int shc_inputs_tree_list(fmt_inputs *in, const char *path, shc_inputs_tree *t,
                         fmt_msg *msg);

void shc_inputs_tree_free(shc_inputs_tree *t);

#endif
