/* evict.c - page-cache eviction for cold runs: fdatasync + POSIX_FADV_DONTNEED on every file of
 * a dataset, then mincore to check how much stayed resident. */
#include "bench.h"

/* Evict one file and count its pages still resident afterwards (mincore on a fresh mapping,
 * which faults nothing in). Errors are ignored: an unreadable file is not part of the run. */
static void evict_file(const char *path, uint64_t *resident, uint64_t *total)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0)
        goto leave;
    /* dirty or writeback pages are skipped by DONTNEED: a freshly written dataset must be
     * written back first or it would stay cached */
    fdatasync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    size_t len = (size_t)st.st_size;
    size_t pages = (len + SB_PAGE - 1) / SB_PAGE;
    void *map = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
    unsigned char *vec = malloc(pages);
    if (map != MAP_FAILED && vec && mincore(map, len, vec) == 0) {
        for (size_t i = 0; i < pages; i++)
            *resident += vec[i] & 1;
        *total += pages;
    }
    free(vec);
    if (map != MAP_FAILED)
        munmap(map, len);
leave:
    close(fd);
}

static void walk(const char *path, int depth,
                 void (*fn)(const char *file, const struct stat *st, void *ctx), void *ctx)
{
    struct stat st;
    if (depth > SB_MAX_DEPTH || lstat(path, &st) != 0)
        return;
    if (S_ISREG(st.st_mode)) {
        fn(path, &st, ctx);
        return;
    }
    if (!S_ISDIR(st.st_mode))
        return;
    DIR *d = opendir(path);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char *sub;
        if (asprintf(&sub, "%s/%s", path, de->d_name) < 0)
            break;
        walk(sub, depth + 1, fn, ctx);
        free(sub);
    }
    closedir(d);
}

void sb_walk_files(const char *path, void (*fn)(const char *file, const struct stat *st,
                                                void *ctx), void *ctx)
{
    walk(path, 0, fn, ctx);
}

typedef struct {
    uint64_t resident, total;
} evict_count;

static void evict_one(const char *file, const struct stat *st, void *ctx)
{
    evict_count *n = ctx;
    evict_file(file, &n->resident, &n->total);
}

/* Evict every regular file under dir; record the fraction still resident in row->resident. */
void sb_evict_dataset(const char *dir, sb_row *row)
{
    evict_count n = {0, 0};
    sb_walk_files(dir, evict_one, &n);
    double f = n.total ? (double)n.resident / (double)n.total : 0;
    if (f > row->resident)
        row->resident = f;
}

/* ---- shardc datasets through libshardread ---- */
