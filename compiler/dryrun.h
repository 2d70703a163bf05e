/* dryrun.h - `shardc build --dry-run` and the size warning of a build: what a build would write,
 * projected without writing it. Internal to the build's files (dryrun.c also holds
 * shc_fingerprint, which build.h declares). */
#ifndef SHC_DRYRUN_H
#define SHC_DRYRUN_H

#include <stdint.h>

#include "annot.h"
#include "build.h"
#include "inputs.h"

/* The projection of a build of input positions [lo, hi) of in (annot: a detection build's
 * annotations, else NULL), reported through cb->projection; nothing is written. 0 or ENOMEM. */
int shc_dry_run(const shc_build_opts *o, const shc_build_cb *cb, const fmt_inputs *in,
                const shc_annot *annot, uint64_t lo, uint64_t hi);

/* For fixed-size geometry: a line through cb when the output of ninputs inputs is large or does
 * not fit on the output filesystem. */
void shc_warn_projection(const shc_build_opts *o, const shc_build_cb *cb, uint64_t ninputs);

#endif
