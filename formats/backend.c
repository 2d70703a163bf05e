/* backend.c - the table of storage backends. */
#include <string.h>

#include "backend.h"

static const fmt_backend *const backends[] = {
    &fmt_backend_raw,  &fmt_backend_hdf5, &fmt_backend_lmdb,
    &fmt_backend_png0, &fmt_backend_bmp,  &fmt_backend_jpeg,
};

static const char *const names[] = {"raw", "hdf5", "lmdb", "png0", "bmp", "jpeg", NULL};

const fmt_backend *fmt_backend_find(const char *name)
{
    for (size_t i = 0; i < sizeof backends / sizeof *backends; i++)
        if (strcmp(backends[i]->name, name) == 0)
            return backends[i];
    return NULL;
}

const char *const *fmt_backend_names(void)
{
    return names;
}
