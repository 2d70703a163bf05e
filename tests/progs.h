/* progs.h - for the suites that build their fixtures with the programs of the same build
 * directory (shardc, shardc-mksample): where those programs are, running a command quietly,
 * and removing a fixture tree (nftw callback). */
#ifndef PROGS_H
#define PROGS_H

#include <ftw.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define PROGS_UNUSED __attribute__((unused))

static char g_bin[1024];                /* directory holding shardc and shardc-mksample */

static PROGS_UNUSED int remove_entry(const char *path, const struct stat *st, int flag,
                                     struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* cmd through the shell (a list too: `a && b`), its output discarded: its exit status, -1 if it
 * did not exit */
static PROGS_UNUSED int run_quiet(const char *cmd)
{
    char full[8300];
    snprintf(full, sizeof full, "( %s ) >/dev/null 2>&1", cmd);
    int st = system(full);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static PROGS_UNUSED int file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* g_bin: <this program>/../bin when shardc is there, else $BUILD/bin (default build/bin).
 * 0, or -1 when shardc is not found. */
static PROGS_UNUSED int find_bins(void)
{
    char exe[1024], probe[1200];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        snprintf(g_bin, sizeof g_bin, "%s/../bin", dirname(exe));
        snprintf(probe, sizeof probe, "%s/shardc", g_bin);
        if (file_exists(probe))
            return 0;
    }
    const char *build = getenv("BUILD");
    snprintf(g_bin, sizeof g_bin, "%s/bin", build && *build ? build : "build");
    snprintf(probe, sizeof probe, "%s/shardc", g_bin);
    return file_exists(probe) ? 0 : -1;
}

#endif
