/* cli.h - the shardc command line (shardc.c), for programs that wrap it (shardc-mpi). */
#ifndef SHC_CLI_H
#define SHC_CLI_H

#include "build.h"

/* Parse the arguments of `shardc build` (argv[0] is "build") into *o, which points into argv.
 * 0, or SHC_EXIT_USAGE after printing what is wrong on stderr. */
int shc_build_args(int argc, char **argv, shc_build_opts *o);

/* shardc's main, in the copy of shardc.c compiled with SHARDC_NO_MAIN (shardc-mpi shows
 * `shardc build --help` through it). */
int shardc_main(int argc, char **argv);

#ifdef SHARDC_NO_MAIN
#define main shardc_main
#endif

#endif
