/* cli.h - the shardc command line (shardc.c), for programs that wrap it (shardc-mpi). */
#ifndef SHC_CLI_H
#define SHC_CLI_H

#include "build.h"

/* Parse the arguments of `shardc build` (argv[0] is "build") into *o, which points into argv.
 * 0, or SHC_EXIT_USAGE after printing what is wrong on stderr. */
int shc_build_args(int argc, char **argv, shc_build_opts *o);

/* How shardc prints a build: shc_build's callbacks writing shardc's lines (messages, rejects and
 * the progress line on stderr; the summary or dry-run projection on stderr, and with json also
 * on stdout). out holds what they share; fill it before the build. */
typedef struct {
    int progress, json, strict;
    int showing;                /* a progress line is on the screen */
} shc_cli_out;

void shc_cli_callbacks(shc_build_cb *cb, shc_cli_out *out);

/* shardc's main, in the copy of shardc.c compiled with SHARDC_NO_MAIN (shardc-mpi shows
 * `shardc build --help` through it). */
int shardc_main(int argc, char **argv);

#ifdef SHARDC_NO_MAIN
#define main shardc_main
#endif

#endif
