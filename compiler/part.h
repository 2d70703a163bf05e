/* part.h - building one dataset in parts: `shardc build --part I/N` builds one contiguous slice of
 * the sorted input list into OUT/parts/IIIII-of-NNNNN/, and `shardc merge OUT` (merge.h) joins the
 * parts into the dataset a one-machine build gives.
 *
 * Parts count from 0: part I of N (0 <= I < N) takes input positions [floor(n*I/N),
 * floor(n*(I+1)/N)) of the n inputs, so the slices are contiguous, in order, cover the list once,
 * and differ in size by at most one input (parts past the inputs are empty when N > n). A part
 * directory is a complete dataset of its own (manifest, shards, rejects.tsv, inputs.tsv) whose
 * samples are numbered from 0 and whose `source` fields are positions in the whole list; its
 * manifest's build object carries a "part" record (shc_part_record) with everything the merge
 * checks and adds up: the hash of the whole input list, the whole build's fingerprint, the slice,
 * and exact per-channel sums.
 *
 * Nothing here prints; errors are errno values with a one-line reason in a fmt_msg (fmt.h; the
 * pointer may be NULL).
 */
#ifndef SHC_PART_H
#define SHC_PART_H

#include <stddef.h>
#include <stdint.h>

#include "fmt.h"
#include "inputs.h"
#include "shardc.h"

/* shc_part, SHC_PARTS_DIR, SHC_PART_MAX, SHC_PART_NAME_LEN, shc_part_parse, shc_part_from_env
 * and shc_part_name are public: shardc.h. */

/* The slice [*lo, *hi) of n inputs part p takes (the whole list when p->count is 0). */
void shc_part_range(uint64_t n, const shc_part *p, uint64_t *lo, uint64_t *hi);

/* Parse a folder name made by shc_part_name. 0, or EINVAL when it is not one. */
int shc_part_name_parse(const char *name, shc_part *p);

/* XXH3-64 of the whole input list: class names, paths with labels in order, and the entries
 * skipped while listing. Parts of one dataset must agree on it. */
uint64_t shc_inputs_hash(const fmt_inputs *in);

/* The class names, then each input's path and label, of in into the XXH3 state st: what the
 * list gives a build's fingerprint (shc_fingerprint) and shc_inputs_hash. */
void shc_inputs_hash_items(void *st, const fmt_inputs *in);

/* Get OUT ready for a part and give the part's folder OUT/parts/IIIII-of-NNNNN (*dir, malloc'd;
 * not created here). OUT and OUT/parts are created when missing (concurrent parts may race on
 * that: both win). OUT must not hold files other than a dataset's unless force. A merged
 * manifest in OUT is removed first when force is set or when resume is set and this part is not
 * complete: the part's shards are about to change under it. Errors: EEXIST (OUT holds a merged
 * dataset or foreign files; no force), ENOTDIR, errno values; msg says what (ENOMEM: nothing). */
int shc_part_prepare(const char *out, const shc_part *p, int force, int resume, char **dir,
                     fmt_msg *msg);

/* What a part records in its manifest's build object under "part". */
typedef struct {
    shc_part part;
    uint64_t inputs;                    /* length of the whole input list */
    uint64_t first_input, end_input;    /* its slice */
    uint64_t listing_skips;             /* entries skipped while listing (whole list) */
    uint64_t rejects;                   /* inputs of its slice that failed to decode */
    uint64_t list_hash;                 /* shc_inputs_hash */
    uint64_t fingerprint;               /* the whole build's fingerprint */
    uint64_t pixels, sum[3], sumsq[3];  /* exact sums over its stored pixels, per channel */
    int quality;                        /* --quality (jpeg sets) */
} shc_part_record;

/* The build object build_json (a JSON object, may be NULL) with r added under "part", into
 * *out (malloc'd). 0, ENOMEM or EINVAL (build_json is not an object). */
int shc_part_record_add(const char *build_json, const shc_part_record *r, char **out);

/* The "part" record of a build object, and the object without it (*rest malloc'd; rest may be
 * NULL). ENOENT when there is none, EINVAL when it is malformed. */
int shc_part_record_get(const char *build_json, shc_part_record *r, char **rest);

/* Per-channel mean and std from exact sums, with the arithmetic of a one-machine build. */
void shc_channel_stats(const uint64_t sum[3], const uint64_t sumsq[3], uint64_t pixels,
                       uint32_t channels, double mean[3], double std[3]);

#endif
