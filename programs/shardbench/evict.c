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

static void evict_tree(const char *path, int depth, uint64_t *resident, uint64_t *total)
{
    struct stat st;
    if (depth > SB_MAX_DEPTH || lstat(path, &st) != 0)
        return;
    if (S_ISREG(st.st_mode)) {
        evict_file(path, resident, total);
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
        evict_tree(sub, depth + 1, resident, total);
        free(sub);
    }
    closedir(d);
}

/* Evict every regular file under dir; record the fraction still resident in row->resident. */
void sb_evict_dataset(const char *dir, sb_row *row)
{
    uint64_t resident = 0, total = 0;
    evict_tree(dir, 0, &resident, &total);
    double f = total ? (double)resident / (double)total : 0;
    if (f > row->resident)
        row->resident = f;
}

/* ---- shardc datasets through libshardread ---- */
