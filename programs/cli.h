/* cli.h - the `shardc build` command line (cli.c), shared by shardc and shardc-mpi: programs
 * only (it prints), not part of the compiler library. */
#ifndef SHC_CLI_H
#define SHC_CLI_H

#include <stdint.h>

#include "shardc.h"

/* The programs' defaults from their environment (the libraries read none): the cache root,
 * $SHARDREAD_CACHE (NULL when unset or empty: the libraries' ~/.cache/shardread), and the part
 * size of multipart uploads, $SHARDC_UPLOAD_PART_SIZE (0 when unset): 0, or -1 (the refusal
 * said on stderr) for a value that is not a size. */
const char *shc_cli_cache(void);
int shc_cli_part_size(uint64_t *size);

/* The usage text of `shardc build` (what `shardc build --help` prints). */
extern const char shc_usage_build[];

/* Print "shardc: " and fmt (one %s: arg) on stderr, then the first line of usage and where the
 * rest is; returns SHC_EXIT_USAGE. */
int shc_usage_error(const char *usage, const char *fmt, const char *arg);

/* Parse the arguments of `shardc build` (argv[0] is "build") into new options *o (free them
 * with shc_build_opts_free), which point into argv: every flag through shc_build_set, then
 * shc_build_check, then the program's defaults (all cores, the progress line on a terminal) and
 * what it takes from the environment. 0, or SHC_EXIT_USAGE (SHC_EXIT_IO: out of memory) after
 * printing what is wrong on stderr (*o NULL). */
int shc_build_args(int argc, char **argv, shc_build_opts **o);

/* Monotonic seconds. */
double shc_cli_now(void);

/* How shardc prints a build: shc_build's callbacks writing shardc's lines (messages, rejects and
 * the progress line on stderr; the summary or dry-run projection on stderr, and with json also
 * on stdout). out holds what they share; fill it before the build. */
typedef struct {
    int progress, json, strict;
    int showing;                /* a progress line is on the screen */
} shc_cli_out;

void shc_cli_callbacks(shc_build_cb *cb, shc_cli_out *out);

#endif
