/* single.c - shardc.h's single inputs: a folder's listing as a build makes it, and one input
 * rendered as a build's worker renders it (a benchmark's decode path). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "build.h"
#include "inputs.h"
#include "render.h"

struct shc_input_list {
    fmt_inputs in;
};

struct shc_renderer {
    shc_render_opts ro;
    fmt_resizer *rz;
};

int shc_input_list_dirs(char *const *srcs, size_t nsrc, shc_input_list **out, shc_msg *msg)
{
    if (!out)
        return EINVAL;
    *out = NULL;
    shc_input_list *l = calloc(1, sizeof *l);
    if (!l)
        return ENOMEM;
    int rc = fmt_inputs_from_dirs(srcs, nsrc, &l->in, msg);
    if (rc) {
        free(l);
        return rc;
    }
    *out = l;
    return 0;
}

void shc_input_list_free(shc_input_list *l)
{
    if (!l)
        return;
    fmt_inputs_free(&l->in);
    free(l);
}

size_t shc_input_list_count(const shc_input_list *l)
{
    return l->in.n;
}

size_t shc_input_list_classes(const shc_input_list *l)
{
    return l->in.nclasses;
}

const char *shc_input_list_path(const shc_input_list *l, size_t i)
{
    return l->in.items[i].path;
}

int32_t shc_input_list_label(const shc_input_list *l, size_t i)
{
    return l->in.items[i].label;
}

shc_renderer *shc_renderer_new(const shc_build_opts *o)
{
    shc_renderer *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->ro = o->r;
    r->ro.augment = 0;          /* the plain sample: one output */
    if (fmt_resizer_create(&r->rz) != 0) {
        free(r);
        return NULL;
    }
    return r;
}

void shc_renderer_free(shc_renderer *r)
{
    if (!r)
        return;
    fmt_resizer_free(r->rz);
    free(r);
}

int shc_render_file(shc_renderer *r, const char *path, uint64_t index, void *dst, size_t len,
                    uint32_t *w, uint32_t *h, uint32_t *c, shc_msg *msg)
{
    fmt_image out = {0};
    int rc = shc_render(&r->ro, path, index, r->rz, &out, NULL, msg);
    if (rc)
        return rc;
    size_t n = (size_t)out.width * out.height * out.channels;
    if (n > len) {
        rc = fmt_fail(msg, EMSGSIZE, "%s: rendered to %ux%ux%u, %zu bytes: room for %zu", path,
                      out.width, out.height, out.channels, n, len);
    } else {
        memcpy(dst, out.pixels, n);
        if (w)
            *w = out.width;
        if (h)
            *h = out.height;
        if (c)
            *c = out.channels;
    }
    fmt_image_free(&out);
    return rc;
}
