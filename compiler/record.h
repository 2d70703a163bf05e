/* record.h - what a finished build records about itself (record.c): its manifest, its options
 * as JSON, and the check of what it staged. */
#ifndef SHC_RECORD_H
#define SHC_RECORD_H

#include "annot.h"
#include "build.h"
#include "fieldsin.h"
#include "inputs.h"
#include "manifest.h"
#include "resume.h"

/* The build options a dataset keeps (the manifest's "build"): malloc'd JSON, NULL when out of
 * memory. */
char *shc_build_options_json(const shc_build_opts *o);

/* Open the dataset in dir under its staged manifest as a reader opens it (which checks every
 * target record), and count the boxes stored and dropped over every sample. 0, or the error of
 * the open or of a record, with msg saying why. */
int shc_check_staged(const char *dir, uint64_t *boxes, uint64_t *dropped, fmt_msg *msg);

/* Add the boxes stored and dropped in shard `name` of dir to *boxes and *dropped (pairs: its aux
 * records are pair records, fields.h): what shc_check_staged counts, one shard at a time, for a
 * build whose dataset is never staged whole (a build to a URL uploads each shard as it closes).
 * 0, or the error with msg saying why. */
int shc_count_shard_boxes(const fmt_backend *be, const char *dir, const char *name, int pairs,
                          uint64_t *boxes, uint64_t *dropped, fmt_msg *msg);

/* What a build wrote, for its manifest. */
typedef struct {
    const shc_build_opts *o;
    const shc_annot *annot;     /* detection builds, else NULL */
    const fmt_inputs *in;
    const shc_fields_in *fin;
    const shc_shard_list *shards;
    uint64_t lo, hi;            /* the inputs written: [lo, hi) */
    uint64_t samples, fingerprint;
    size_t rejects;             /* inputs rejected (the listing's skips apart) */
} shc_record_in;

/* The manifest of what was written, into *m (zeroed by the caller). Its strings point into r's
 * data, tool (tool_len bytes) and spec (spec_len bytes, the augmentation spec); m->build_json is
 * malloc'd (the caller frees it), NULL when out of memory. */
void shc_record_manifest(const shc_record_in *r, fmt_manifest *m, char *tool, size_t tool_len,
                         char *spec, size_t spec_len);

#endif
