/* replay.c - run a fuzz target without libFuzzer: every file named on the command line, and every
 * regular file inside a directory named there (sorted by name, not recursive), is passed to
 * LLVMFuzzerTestOneInput once. Arguments starting with '-' are ignored, so a libFuzzer command line
 * can be reused. Linked with the normal compiler and sanitizer flags (make fuzz-replay), it checks
 * seed corpora and regression inputs under gcc's ASan/UBSan too.
 *
 * Exit status: 0 when every input ran (a crash aborts the process, as under libFuzzer), 1 when
 * an input could not be read, 2 on usage errors.
 */
#include "common.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* libFuzzer calls this once before the first input when a target defines it. */
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int rp_read(const char *path, uint8_t **buf, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return errno;
    uint8_t *b = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? cap * 2 : 4096;
            uint8_t *p = realloc(b, cap);
            if (!p) {
                rc = ENOMEM;
                break;
            }
            b = p;
        }
        size_t r = fread(b + n, 1, cap - n, f);
        n += r;
        if (r == 0) {
            if (ferror(f))
                rc = EIO;
            break;
        }
    }
    fclose(f);
    if (rc) {
        free(b);
        return rc;
    }
    *buf = b;
    *len = n;
    return 0;
}

static int rp_one(const char *path, unsigned long *runs)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc = rp_read(path, &buf, &len);
    if (rc) {
        fprintf(stderr, "replay: cannot read %s: %s\n", path, strerror(rc));
        return 1;
    }
    /* a copy of exactly len bytes, as libFuzzer passes: ASan then sees any read past the end */
    uint8_t *exact = malloc(len ? len : 1);
    if (!exact) {
        free(buf);
        fprintf(stderr, "replay: out of memory for %s\n", path);
        return 1;
    }
    if (len)
        memcpy(exact, buf, len);
    free(buf);
    if (getenv("REPLAY_VERBOSE"))
        fprintf(stderr, "replay: %s (%zu bytes)\n", path, len);
    LLVMFuzzerTestOneInput(exact, len);
    free(exact);
    (*runs)++;
    return 0;
}

static int rp_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int rp_dir(const char *dir, unsigned long *runs)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "replay: cannot open %s: %s\n", dir, strerror(errno));
        return 1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    int bad = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **p = realloc(names, cap * sizeof *p);
            if (!p) {
                bad = 1;
                break;
            }
            names = p;
        }
        size_t l = strlen(dir) + strlen(e->d_name) + 2;
        if (!(names[n] = malloc(l))) {
            bad = 1;
            break;
        }
        snprintf(names[n], l, "%s/%s", dir, e->d_name);
        n++;
    }
    closedir(d);
    if (n > 1)
        qsort(names, n, sizeof *names, rp_cmp);
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        if (!bad && stat(names[i], &st) == 0 && S_ISREG(st.st_mode))
            bad |= rp_one(names[i], runs);
        free(names[i]);
    }
    free(names);
    if (bad)
        fprintf(stderr, "replay: failed inside %s\n", dir);
    return bad;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
        return 2;
    }
    if (LLVMFuzzerInitialize)
        LLVMFuzzerInitialize(&argc, &argv);
    unsigned long runs = 0;
    int bad = 0;
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-')
            continue;
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
            bad = 1;
        } else if (S_ISDIR(st.st_mode)) {
            bad |= rp_dir(argv[i], &runs);
        } else {
            bad |= rp_one(argv[i], &runs);
        }
    }
    printf("%s: %lu inputs replayed\n", argv[0], runs);
    return bad;
}
