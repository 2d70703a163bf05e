/* fdcache.c - descriptors opened on demand from a bounded process-wide cache (fdcache.h). */
#include "fdcache.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fmt.h"

struct fmt_fdfile {
    char *path;
    int oflags;
    dev_t dev;
    ino_t ino;
    int fd;                     /* -1 while closed */
    unsigned pins;
    fmt_fdfile *prev, *next;    /* in the idle list while open and unpinned */
};

static pthread_mutex_t fc_lock = PTHREAD_MUTEX_INITIALIZER;
static fmt_fdfile *fc_head, *fc_tail;   /* idle descriptors, most recently used first */
static unsigned fc_idle, fc_pinned;     /* open descriptors: unpinned, pinned */

static void idle_unlink(fmt_fdfile *f)
{
    if (f->prev)
        f->prev->next = f->next;
    else
        fc_head = f->next;
    if (f->next)
        f->next->prev = f->prev;
    else
        fc_tail = f->prev;
    f->prev = f->next = NULL;
    fc_idle--;
}

static void idle_push(fmt_fdfile *f)
{
    f->prev = NULL;
    f->next = fc_head;
    if (fc_head)
        fc_head->prev = f;
    else
        fc_tail = f;
    fc_head = f;
    fc_idle++;
}

/* Close idle descriptors, least recently used first, until at most keep are idle. Called with
 * the lock held; returns the descriptors to close after unlocking, in out[0..n). */
static unsigned trim(unsigned keep, int *out, unsigned cap)
{
    unsigned n = 0;
    while (fc_idle > keep && fc_tail && n < cap) {
        fmt_fdfile *f = fc_tail;
        idle_unlink(f);
        out[n++] = f->fd;
        f->fd = -1;
    }
    return n;
}

static void close_all(const int *fds, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        close(fds[i]);
}

int fmt_fdfile_new(fmt_fdfile **out, const char *path, int oflags, int fd)
{
    *out = NULL;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int rc = errno;
        close(fd);
        return rc;
    }
    fmt_fdfile *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(path))) {
        free(f);
        close(fd);
        return ENOMEM;
    }
    f->oflags = oflags;
    f->dev = st.st_dev;
    f->ino = st.st_ino;
    f->fd = fd;
    int drop[4];
    pthread_mutex_lock(&fc_lock);
    idle_push(f);
    unsigned n = trim(FMT_FDCACHE_MAX, drop, 4);
    pthread_mutex_unlock(&fc_lock);
    close_all(drop, n);
    *out = f;
    return 0;
}

/* One more pin on f, whose descriptor is open (off the idle list at its first pin); the
 * descriptor. Under fc_lock. */
static int pin_open(fmt_fdfile *f)
{
    if (f->pins++ == 0) {
        idle_unlink(f);
        fc_pinned++;
    }
    return f->fd;
}

int fmt_fdfile_get(fmt_fdfile *f, int bounded, int *fd)
{
    *fd = -1;
    pthread_mutex_lock(&fc_lock);
    if (f->fd >= 0) {
        *fd = pin_open(f);
        pthread_mutex_unlock(&fc_lock);
        return 0;
    }
    if (bounded && fc_pinned >= FMT_FDCACHE_MAX) {
        pthread_mutex_unlock(&fc_lock);
        return EBUSY;
    }
    /* make room first, so that the new descriptor never takes the process past the bound */
    int drop[4];
    unsigned n = trim(FMT_FDCACHE_MAX > 0 ? FMT_FDCACHE_MAX - 1 : 0, drop, 4);
    pthread_mutex_unlock(&fc_lock);
    close_all(drop, n);

    /* open outside the lock (it may block on a slow filesystem); two threads may race to
     * reopen the same file: the loser closes its descriptor and takes the winner's */
    int nfd = open(f->path, f->oflags | O_CLOEXEC);
    if (nfd < 0)
        return errno;
    struct stat st;
    if (fstat(nfd, &st) != 0) {
        int rc = errno;
        close(nfd);
        return rc;
    }
    if (st.st_dev != f->dev || st.st_ino != f->ino) {
        close(nfd);
        return FMT_ECORRUPT;
    }
    pthread_mutex_lock(&fc_lock);
    if (f->fd >= 0) {
        *fd = pin_open(f);
        pthread_mutex_unlock(&fc_lock);
        close(nfd);
        return 0;
    }
    f->fd = nfd;
    f->pins = 1;
    fc_pinned++;
    *fd = nfd;
    pthread_mutex_unlock(&fc_lock);
    return 0;
}

void fmt_fdfile_put(fmt_fdfile *f)
{
    int drop[4];
    pthread_mutex_lock(&fc_lock);
    unsigned n = 0;
    if (f->pins && --f->pins == 0) {
        fc_pinned--;
        idle_push(f);
        n = trim(FMT_FDCACHE_MAX, drop, 4);
    }
    pthread_mutex_unlock(&fc_lock);
    close_all(drop, n);
}

void fmt_fdfile_free(fmt_fdfile *f)
{
    if (!f)
        return;
    int fd;
    pthread_mutex_lock(&fc_lock);
    if (f->fd >= 0 && f->pins == 0)
        idle_unlink(f);
    else if (f->fd >= 0)
        fc_pinned--;
    fd = f->fd;
    pthread_mutex_unlock(&fc_lock);
    if (fd >= 0)
        close(fd);
    free(f->path);
    free(f);
}

unsigned fmt_fdcache_open(void)
{
    pthread_mutex_lock(&fc_lock);
    unsigned n = fc_idle + fc_pinned;
    pthread_mutex_unlock(&fc_lock);
    return n;
}

static atomic_size_t fc_mapped;
static atomic_size_t fc_map_cap;     /* the cap plus one; 0 until first needed */

size_t fmt_map_cap(void)
{
    size_t cap = atomic_load(&fc_map_cap);
    if (cap)
        return cap - 1;
    unsigned long max = 65530;
    FILE *f = fopen("/proc/sys/vm/max_map_count", "re");
    if (f) {
        if (fscanf(f, "%lu", &max) != 1 || max < 1024)
            max = 65530;
        fclose(f);
    }
    cap = (size_t)(max / 4);
    atomic_store(&fc_map_cap, cap + 1);
    return cap;
}

void fmt_map_cap_set(size_t cap)
{
    atomic_store(&fc_map_cap, cap < SIZE_MAX ? cap + 1 : cap);
}

int fmt_map_reserve(void)
{
    if (atomic_fetch_add(&fc_mapped, 1) < fmt_map_cap())
        return 1;
    atomic_fetch_sub(&fc_mapped, 1);
    return 0;
}

void fmt_map_unreserve(void)
{
    atomic_fetch_sub(&fc_mapped, 1);
}
