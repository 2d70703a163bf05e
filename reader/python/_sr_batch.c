/* _sr_batch.c - a batch's memory, from the ring to Python and back (part of the _shardread
 * module; _sr.h): _View (one array's memory, exported through the buffer protocol), _Ring (one
 * shr_reader and the batches collected while their device copies may still be queued), _Batch
 * (gives its buffer back when its last view goes), and delivery: the tuple next() yields, as
 * views of the ring buffer or as copies, with the targets, the params (return_params="ops":
 * each sample's ops in torchvision's terms) and the recovery record. "Holding batches" and
 * "Copies still in flight" at the top of _shardread.c say why it is done this way.
 */
#include "_sr.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- _View ---- */

/* A _View of data (C-contiguous, ndim <= 4 dimensions of shape, items of format). With an owner,
 * data belongs to it and the view holds a reference; without, data was malloc'd and the view
 * takes it (freed with the view, or here if the view cannot be made). */
PyObject *sr_new_view(void *data, PyObject *owner, const char *format, Py_ssize_t itemsize,
                      int ndim, const Py_ssize_t *shape)
{
    ViewObject *v = PyObject_New(ViewObject, ViewType);
    if (!v) {
        if (!owner)
            free(data);
        return NULL;
    }
    v->data = data;
    v->owner = owner;
    Py_XINCREF(owner);
    v->ndim = ndim;
    v->itemsize = itemsize;
    snprintf(v->format, sizeof v->format, "%s", format);
    Py_ssize_t step = itemsize;
    for (int d = ndim - 1; d >= 0; d--) {
        v->shape[d] = shape[d];
        v->strides[d] = step;
        step *= shape[d];
    }
    v->len = step;
    return (PyObject *)v;
}

/* A _View holding a copy of len bytes at src. */
PyObject *sr_view_copy(const void *src, const char *format, Py_ssize_t itemsize, int ndim,
                       const Py_ssize_t *shape)
{
    size_t len = (size_t)itemsize;
    for (int d = 0; d < ndim; d++)
        len *= (size_t)shape[d];
    void *p = malloc(len ? len : 1);
    if (!p)
        return PyErr_NoMemory();
    if (src && len)
        memcpy(p, src, len);
    return sr_new_view(p, NULL, format, itemsize, ndim, shape);
}

static int View_getbuffer(ViewObject *self, Py_buffer *view, int flags)
{
    view->buf = self->data;
    view->obj = Py_NewRef((PyObject *)self);
    view->len = self->len;
    view->readonly = 0;
    view->itemsize = self->itemsize;
    view->format = (flags & PyBUF_FORMAT) ? self->format : NULL;
    view->ndim = self->ndim;
    view->shape = (flags & PyBUF_ND) == PyBUF_ND ? self->shape : NULL;
    view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? self->strides : NULL;
    view->suboffsets = NULL;
    view->internal = NULL;
    return 0;
}

static void View_dealloc(ViewObject *self)
{
    if (self->owner)
        Py_DECREF(self->owner);
    else
        free(self->data);
    sr_free_object((PyObject *)self);
}

static PyObject *View_get_batch(ViewObject *self, void *closure)
{
    return Py_NewRef(self->owner ? self->owner : Py_None);
}

static PyGetSetDef View_getset[] = {
    {"batch", (getter)View_get_batch, NULL,
     "The _Batch whose ring buffer this memory is, or None for memory of its own.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot View_slots[] = {
    {Py_tp_doc, "The memory of one array of a batch or sample, exported through the buffer\n"
                "protocol (internal: the package makes numpy arrays of it)."},
    {Py_tp_dealloc, View_dealloc},
    {Py_tp_getset, View_getset},
    {Py_bf_getbuffer, View_getbuffer},
    {0, NULL},
};

PyType_Spec View_spec = {
    .name = "shardread._View",
    .basicsize = sizeof(ViewObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = View_slots,
};

/* ---- what views are made of ---- */

/* The package's form of parts (a tuple of _Views and plain objects): wrap(parts, torch). Without
 * the package's hook (the extension imported on its own) the parts as they are. */
PyObject *sr_wrap(PyObject *parts, int torch)
{
    if (!parts || !sr_wrap_hook)
        return parts;
    PyObject *out = PyObject_CallFunction(sr_wrap_hook, "OO", parts, torch ? Py_True : Py_False);
    Py_DECREF(parts);
    return out;
}

/* A detection target as torchvision's detection models take it (arrays as _Views, copies):
 * {"boxes": (n, 4) float32 x1 y1 x2 y2, "labels": (n,) int64, "area": (n,) float32,
 *  "iscrowd": (n,) int64, "image_id": int, "orig_size": (height, width), "dropped": int}. */
PyObject *sr_target_dict(const shr_target *t)
{
    Py_ssize_t n = t->count, d2[2] = {n, 4}, d1[1] = {n};
    PyObject *boxes = sr_view_copy(t->boxes, "f", 4, 2, d2);
    PyObject *labels = boxes ? sr_view_copy(t->labels, "q", 8, 1, d1) : NULL;
    PyObject *area = labels ? sr_view_copy(t->area, "f", 4, 1, d1) : NULL;
    PyObject *crowd = area ? sr_view_copy(NULL, "q", 8, 1, d1) : NULL;
    if (!crowd) {
        Py_XDECREF(boxes);
        Py_XDECREF(labels);
        Py_XDECREF(area);
        return NULL;
    }
    int64_t *c = ((ViewObject *)crowd)->data;
    for (uint32_t i = 0; i < t->count; i++)
        c[i] = t->iscrowd[i];
    return Py_BuildValue("{s:N,s:N,s:N,s:N,s:L,s:(II),s:I}", "boxes", boxes, "labels", labels,
                         "area", area, "iscrowd", crowd, "image_id", (long long)t->image_id,
                         "orig_size", t->orig_height, t->orig_width, "dropped", t->dropped);
}

/* A segmentation batch's sample i: its target dict td gets "masks" (n, H, W) uint8 and
 * "keypoints" (n, K, 3) float32 where the dataset has them: the keypoints a copy, the masks a
 * view of the batch's buffer held by base as the images are (a copy where base is NULL: a
 * batch copied out). 0, or -1 with an error. */
static int batch_segm(const shr_batch *b, uint32_t i, uint32_t n, PyObject *td,
                      PyObject *base)
{
    uint32_t k = 0, w = 0, h = 0;
    const float *kp = NULL;
    const uint8_t *m = NULL;
    if (shr_batch_segm(b, i, &k, &kp, &m, &w, &h) != 0)
        return 0;
    if (kp) {
        Py_ssize_t dims[3] = {n, k, 3};
        PyObject *v = sr_view_copy(kp, "f", 4, 3, dims);
        int rc = v ? PyDict_SetItemString(td, "keypoints", v) : -1;
        Py_XDECREF(v);
        if (rc < 0)
            return -1;
    }
    if (m) {
        Py_ssize_t dims[3] = {n, h, w};
        PyObject *v = base ? sr_new_view((void *)m, base, "B", 1, 3, dims)
                           : sr_view_copy(m, "B", 1, 3, dims);
        int rc = v ? PyDict_SetItemString(td, "masks", v) : -1;
        Py_XDECREF(v);
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* ---- _Ring and _Batch ---- */

/* Give back fenced batch k of ring (its event completed, or waited for). */
static void unfence(RingObject *ring, uint32_t k)
{
    shr_release(ring->r, ring->fenced[k].b);
    Py_DECREF(ring->fenced[k].event);
    memmove(&ring->fenced[k], &ring->fenced[k + 1],
            (ring->nfenced - k - 1) * sizeof ring->fenced[0]);
    ring->nfenced--;
}

/* Wait for fenced batch k's event (a failed wait is taken as done: the error is reported where
 * it can be, then cleared). */
static void fence_wait(RingObject *ring, uint32_t k)
{
    PyObject *r = PyObject_CallMethod(ring->fenced[k].event, "synchronize", NULL);
    if (!r)
        PyErr_WriteUnraisable(ring->fenced[k].event);
    Py_XDECREF(r);
}

/* Give back the fenced batches whose events have completed; then wait for the oldest until at
 * most `keep` buffers are out of the workers' hands (held by Python or fenced). */
int sr_drain_fenced(RingObject *ring, uint32_t keep)
{
    for (uint32_t k = 0; k < ring->nfenced;) {
        PyObject *done = PyObject_CallMethod(ring->fenced[k].event, "query", NULL);
        if (!done)
            return -1;
        int yes = PyObject_IsTrue(done);
        Py_DECREF(done);
        if (yes < 0)
            return -1;
        if (yes)
            unfence(ring, k);
        else
            k++;
    }
    while (ring->nfenced && ring->held + ring->nfenced > keep) {
        PyObject *r = PyObject_CallMethod(ring->fenced[0].event, "synchronize", NULL);
        if (!r)
            return -1;
        Py_DECREF(r);
        unfence(ring, 0);
    }
    return 0;
}

static void Ring_dealloc(RingObject *self)
{
    if (self->r && self->pid == getpid()) {
        /* the buffers are freed below: the copies still reading them must be done first */
        while (self->nfenced) {
            fence_wait(self, 0);
            unfence(self, 0);
        }
        shr_reader *r = self->r;
        /* joins the workers, each finishing the batch in hand */
        Py_BEGIN_ALLOW_THREADS
        shr_close(r);
        Py_END_ALLOW_THREADS
    }
    /* in a forked child the parent's reader is left alone: its threads are gone and its mutex
     * may be locked; the child's memory is discarded at exit anyway */
    self->r = NULL;
    for (uint32_t k = 0; k < self->nfenced; k++)
        Py_DECREF(self->fenced[k].event);
    free(self->fenced);
    sr_free_object((PyObject *)self);
}

static PyType_Slot Ring_slots[] = {
    {Py_tp_doc, "A libshardread reader and its ring of batch buffers (internal)."},
    {Py_tp_dealloc, Ring_dealloc},
    {0, NULL},
};

PyType_Spec Ring_spec = {
    .name = "shardread._Ring",
    .basicsize = sizeof(RingObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = Ring_slots,
};

typedef struct {
    PyObject_HEAD
    RingObject *ring;
    const shr_batch *b;
} BatchObject;

/* The event fencing a pinned batch collected now, or NULL (none needed: give it back now). */
static PyObject *fence_for(RingObject *ring, const shr_batch *b)
{
    if (!sr_fence_hook || !(b->pinned || sr_fence_all) || ring->nslots == 0)
        return NULL;
    /* a dealloc may run while an exception is being raised: keep it */
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    PyObject *event = PyObject_CallNoArgs(sr_fence_hook);
    if (!event) {
        PyErr_WriteUnraisable(sr_fence_hook);
    } else if (event == Py_None) {
        Py_CLEAR(event);
    }
    if (event && !ring->fenced) {
        ring->fenced = calloc(ring->nslots, sizeof *ring->fenced);
        if (!ring->fenced) {
            /* no room to wait asynchronously: wait now */
            PyObject *r = PyObject_CallMethod(event, "synchronize", NULL);
            if (!r)
                PyErr_WriteUnraisable(event);
            Py_XDECREF(r);
            Py_CLEAR(event);
        }
    }
    PyErr_Restore(et, ev, tb);
    return event;
}

static void Batch_dealloc(BatchObject *self)
{
    RingObject *ring = self->ring;
    if (ring) {
        PyObject *event = ring->pid == getpid() ? fence_for(ring, self->b) : NULL;
        if (event) {
            ring->fenced[ring->nfenced].b = self->b;
            ring->fenced[ring->nfenced].event = event;
            ring->nfenced++;
        } else if (ring->pid == getpid()) {
            shr_release(ring->r, self->b);
        }
        ring->held--;
        Py_DECREF(ring);
    }
    sr_free_object((PyObject *)self);
}

static PyType_Slot Batch_slots[] = {
    {Py_tp_doc, "The ring buffer under a batch's arrays: gives it back to the reader when the\n"
                "last array (or tensor) using it is collected (internal)."},
    {Py_tp_dealloc, Batch_dealloc},
    {0, NULL},
};

PyType_Spec Batch_spec = {
    .name = "shardread._Batch",
    .basicsize = sizeof(BatchObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = Batch_slots,
};

/* ---- delivery ---- */

/* A scaled sample's target gets "size": (height, width) of its image in the delivered sample
 * (DETR's key; with multi-scale, the part of the canvas that is the image). 0 or -1. */
static int scale_size(PyObject *td, const shr_batch *b, uint32_t i)
{
    const shr_params *p = &b->params[i];
    PyObject *sz = Py_BuildValue("(II)", p->image_h, p->image_w);
    int rc = sz ? PyDict_SetItemString(td, "size", sz) : -1;
    Py_XDECREF(sz);
    return rc;
}

/* return_params' columns 5 .. 12 with scale: scale_w, scale_h, crop_x, crop_y, pad_x, pad_y,
 * image_w, image_h (shr_params). */
static void scale_columns(const shr_params *p, int64_t *col)
{
    const uint32_t v[8] = {p->scale_w, p->scale_h, p->crop_x, p->crop_y, p->pad_x, p->pad_y,
                           p->image_w, p->image_h};
    for (int k = 0; k < 8; k++)
        col[k] = v[k];
}

/* ---- return_params="ops": each sample's ops in torchvision's terms ----
 * One list per sample of (name, kwargs) pairs, in the order they were applied; name is the
 * torchvision.transforms.functional function (or, for the automatic augmentations' ops,
 * "auto_augment_op": torchvision.transforms.autoaugment._apply_op) and kwargs its arguments, so
 * shardread.replay(Dataset[i] image, ops) reproduces the delivered uint8 sample. */

static const char *const g_filter_names[] = {"nearest", "box", "bilinear", "hamming",
                                             "bicubic", "lanczos"};

static const char *filter_name(shr_filter f)
{
    return (unsigned)f <= SHR_FILTER_LANCZOS ? g_filter_names[f] : "bilinear";
}

/* Append (name, kwargs) to list (steals kw). 0 or -1. */
static int add_op(PyObject *list, const char *name, PyObject *kw)
{
    PyObject *t = kw ? Py_BuildValue("(sN)", name, kw) : NULL;
    int rc = t ? PyList_Append(list, t) : -1;
    Py_XDECREF(t);
    return rc;
}

/* The fill of the geometric augmentations, one int per channel. New reference or NULL. */
static PyObject *fill_list(const shr_options *o, uint32_t channels)
{
    PyObject *l = PyList_New(channels);
    for (uint32_t c = 0; l && c < channels; c++)
        PyList_SetItem(l, c, PyLong_FromLong(o->aug_fill[c]));
    return l;
}

static PyObject *sample_ops(const LoaderObject *self, const shr_batch *b, uint32_t i)
{
    static const char *const aa_names[] = {
        "Identity", "ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate", "Brightness",
        "Color", "Contrast", "Sharpness", "Posterize", "Solarize", "AutoContrast", "Equalize",
        "Identity", "Invert"};
    static const char *const jit_fn[4] = {"adjust_brightness", "adjust_contrast",
                                          "adjust_saturation", "adjust_hue"};
    static const char *const jit_kw[4] = {"brightness_factor", "contrast_factor",
                                          "saturation_factor", "hue_factor"};
    const shr_options *o = &self->o;
    const shr_params *p = &b->params[i];
    uint32_t W = b->width, H = b->height, C = b->channels;
    const char *ai = filter_name(o->aug_interpolation);
    PyObject *ops = PyList_New(0);
    if (!ops)
        return NULL;
    int rc = 0;
    if (o->rrc) {
        rc = add_op(ops, "resized_crop",
                    Py_BuildValue("{s:I,s:I,s:I,s:I,s:[II],s:s}", "top", p->y, "left", p->x,
                                  "height", p->h, "width", p->w, "size", H, W,
                                  "interpolation", filter_name(o->filter)));
    } else if (o->scale != SHR_SCALE_NONE) {
        /* natural sizes: no resize */
        if (o->scale != SHR_SCALE_NATURAL)
            rc = add_op(ops, "resize", Py_BuildValue("{s:[II],s:s}", "size", p->scale_h,
                                                     p->scale_w, "interpolation",
                                                     filter_name(o->filter)));
        if (rc == 0 && (p->crop_x || p->crop_y || p->image_w != p->scale_w ||
                        p->image_h != p->scale_h))
            rc = add_op(ops, "crop", Py_BuildValue("{s:I,s:I,s:I,s:I}", "top", p->crop_y,
                                                   "left", p->crop_x, "height", p->image_h,
                                                   "width", p->image_w));
        /* multi-scale, natural: the image is its own size (the canvas around it is the
         * batch's) */
        if (rc == 0 && o->scale != SHR_SCALE_MULTI && o->scale != SHR_SCALE_NATURAL &&
            (p->image_w != W || p->image_h != H))
            rc = add_op(ops, "pad", Py_BuildValue("{s:[IIII]}", "padding", p->pad_x, p->pad_y,
                                                  W - p->pad_x - p->image_w,
                                                  H - p->pad_y - p->image_h));
    } else if (p->x || p->y || p->w != p->src_w || p->h != p->src_h || W != p->src_w ||
               H != p->src_h) {
        /* the crop/pad: Pillow's crop fills outside the image with zeros, as the reader pads
         * (centered where smaller) */
        long top = (long)p->y - (long)((H - p->h) / 2), left = (long)p->x - (long)((W - p->w) / 2);
        rc = add_op(ops, "crop", Py_BuildValue("{s:l,s:l,s:I,s:I}", "top", top, "left", left,
                                               "height", H, "width", W));
    }
    if (rc == 0 && p->flip)
        rc = add_op(ops, "hflip", PyDict_New());
    if (rc == 0 && p->rotate)
        rc = add_op(ops, "rotate", Py_BuildValue("{s:d,s:s,s:N}", "angle",
                                                 (double)p->rotate_angle, "interpolation", ai,
                                                 "fill", fill_list(o, C)));
    if (rc == 0 && p->affine)
        rc = add_op(ops, "affine",
                    Py_BuildValue("{s:d,s:[ii],s:d,s:[dd],s:s,s:N}", "angle",
                                  (double)p->affine_angle, "translate", (int)p->affine_tx,
                                  (int)p->affine_ty, "scale", (double)p->affine_scale, "shear",
                                  (double)p->affine_shear_x, (double)p->affine_shear_y,
                                  "interpolation", ai, "fill", fill_list(o, C)));
    for (uint32_t k = 0; rc == 0 && k < p->aa_ops && k < SHR_AA_MAX_OPS; k++) {
        unsigned op = p->aa_op[k] < sizeof aa_names / sizeof *aa_names ? p->aa_op[k] : 0;
        rc = add_op(ops, "auto_augment_op",
                    Py_BuildValue("{s:s,s:d,s:s,s:N}", "op_name", aa_names[op], "magnitude",
                                  (double)p->aa_magnitude[k], "interpolation", ai, "fill",
                                  fill_list(o, C)));
    }
    const float factors[4] = {p->brightness, p->contrast, p->saturation, p->hue};
    for (int k = 0; rc == 0 && k < 4; k++) {
        unsigned fn = p->jitter_order[k] & 3;
        if (p->jitter & (1u << fn))
            rc = add_op(ops, jit_fn[fn], Py_BuildValue("{s:d}", jit_kw[fn], (double)factors[fn]));
    }
    if (rc == 0 && p->gray)
        rc = add_op(ops, "rgb_to_grayscale", Py_BuildValue("{s:I}", "num_output_channels", C));
    if (rc == 0 && p->erase) {
        PyObject *v;
        if (o->erase_random) {
            v = PyUnicode_FromString("random");
        } else {
            v = PyList_New(C);
            for (uint32_t c = 0; v && c < C; c++)
                PyList_SetItem(v, c, PyFloat_FromDouble(o->erase_value[c]));
        }
        rc = add_op(ops, "erase", v ? Py_BuildValue("{s:I,s:I,s:I,s:I,s:N}", "i", p->erase_y,
                                                    "j", p->erase_x, "h", p->erase_h, "w",
                                                    p->erase_w, "v", v) : NULL);
    }
    if (rc < 0)
        Py_CLEAR(ops);
    return ops;
}

/* The arrays (or tensors) of batch b of ring: views of the ring buffer kept by a _Batch, or
 * copies when the caller already holds the most zero-copy batches allowed. */
/* label maps of the given shape (bytes 1: uint8, 2: uint16 values) widened into a new int64
 * array (label_dtype='int64': what a cross-entropy loss takes, without a conversion in Python) */
static PyObject *label_maps_wide(const uint8_t *src, uint32_t bytes, const Py_ssize_t *dims,
                                 int ndim)
{
    PyObject *v = sr_view_copy(NULL, "q", 8, ndim, dims);
    if (!v)
        return NULL;
    int64_t *dst = ((ViewObject *)v)->data;
    size_t n = (size_t)((ViewObject *)v)->len / sizeof *dst;
    const uint16_t *src16 = (const uint16_t *)(const void *)src;
    Py_BEGIN_ALLOW_THREADS
    if (bytes == 2)
        for (size_t i = 0; i < n; i++)
            dst[i] = src16[i];
    else
        for (size_t i = 0; i < n; i++)
            dst[i] = src[i];
    Py_END_ALLOW_THREADS
    return v;
}

PyObject *sr_deliver(LoaderObject *self, RingObject *ring, const shr_batch *b)
{
    BatchObject *base = PyObject_New(BatchObject, BatchType);
    if (!base) {
        shr_release(ring->r, b);
        return NULL;
    }
    base->ring = (RingObject *)Py_NewRef((PyObject *)ring);
    base->b = b;
    ring->held++;
    /* keep two buffers for the workers (see "Holding batches" in _shardread.c) */
    int copy = ring->held + ring->nfenced + 2 > ring->nslots;
    Py_ssize_t dims[4] = {b->n, b->height, b->width, b->channels};
    if (b->layout == SHR_LAYOUT_NCHW) {
        dims[1] = b->channels;
        dims[2] = b->height;
        dims[3] = b->width;
    }
    const char *fmt = b->dtype == SHR_DTYPE_F32 ? "f" : b->dtype == SHR_DTYPE_F16 ? "e" : "B";
    Py_ssize_t isz = b->dtype == SHR_DTYPE_F32 ? 4 : b->dtype == SHR_DTYPE_F16 ? 2 : 1;
    Py_ssize_t n1[1] = {b->n};
    int want_idx = self->return_indices || self->return_params;
    PyObject *img, *lab, *idx = NULL, *prm = NULL, *rec = NULL, *mix = NULL, *sts = NULL;
    int want_sts = self->return_streams && b->streams;
    /* MixUp / CutMix: (n, num_classes) float32 soft labels in place of the labels */
    Py_ssize_t soft_dims[2] = {b->n, b->num_classes};
    int soft = b->soft_labels != NULL && !self->targets;
    if (soft && self->return_params) {
        /* the batch's record, with each sample's own label (a copy: read before the batch
         * goes back) */
        static const char *const ops[] = {"none", "mixup", "cutmix"};
        PyObject *hard = sr_view_copy(b->labels, "q", 8, 1, n1);
        mix = hard ? Py_BuildValue("{s:s,s:d,s:d,s:(IIII),s:N}", "op",
                                   ops[(unsigned)b->mix.op <= SHR_MIX_CUTMIX ? b->mix.op : 0],
                                   "lam", b->mix.lam, "lam_drawn", b->mix.lam_drawn, "box",
                                   b->mix.x1, b->mix.y1, b->mix.x2, b->mix.y2, "labels", hard)
                   : NULL;
    }
    if (self->return_recovery) {
        /* a list of (index, position, code, reason), read before a copied batch goes back */
        rec = PyList_New(b->nbad);
        for (uint32_t i = 0; rec && i < b->nbad; i++) {
            PyObject *t = Py_BuildValue("(Liis)", (long long)b->bad_indices[i],
                                        (int)b->bad_positions[i], (int)b->bad_errors[i],
                                        shr_strerror(b->bad_errors[i]));
            if (!t || PyList_SetItem(rec, i, t) < 0)
                Py_CLEAR(rec);
        }
    }
    if (copy) {
        img = sr_view_copy(b->data, fmt, isz, 4, dims);
        lab = !img || self->targets ? NULL
              : soft ? sr_view_copy(b->soft_labels, "f", 4, 2, soft_dims)
                     : sr_view_copy(b->labels, "q", 8, 1, n1);
        if (img && want_idx)
            idx = sr_view_copy(b->indices, "q", 8, 1, n1);
        if (img && want_sts)
            sts = sr_view_copy(b->streams, "q", 8, 1, n1);
        self->copies++;
    } else {
        img = sr_new_view(b->data, (PyObject *)base, fmt, isz, 4, dims);
        lab = !img || self->targets ? NULL
              : soft ? sr_new_view((void *)b->soft_labels, (PyObject *)base, "f", 4, 2, soft_dims)
                     : sr_new_view(b->labels, (PyObject *)base, "q", 8, 1, n1);
        if (img && want_idx)
            idx = sr_new_view(b->indices, (PyObject *)base, "q", 8, 1, n1);
        if (img && want_sts)
            sts = sr_new_view((void *)b->streams, (PyObject *)base, "q", 8, 1, n1);
    }
    if (img && self->label_elem && !(self->targets && b->label_map)) {
        Py_CLEAR(img);
        PyErr_SetString(sr_argument_error, "label_dtype= is for the label maps of a semantic "
                        "segmentation dataset (shardc build --masks), read with targets=True");
    }
    if (img && self->targets && b->label_map) {
        /* (images, masks, ...): a label-map dataset's moved maps, (n, H, W) uint8 (int64 with
         * label_dtype='int64', widened here), or a list of (h, w) ones where each image has its
         * own size (scale_dense) */
        int wide = self->label_elem == 8;
        if (!self->o.scale_dense && !wide) {
            Py_ssize_t md[3] = {b->n, b->height, b->width};
            lab = copy ? sr_view_copy(b->target_masks, "B", 1, 3, md)
                       : sr_new_view((void *)b->target_masks, (PyObject *)base, "B", 1, 3, md);
        } else if (!self->o.scale_dense) {
            Py_ssize_t md[3] = {b->n, b->height, b->width};
            lab = label_maps_wide(b->target_masks, b->label_map_bytes, md, 3);
        } else {
            lab = PyList_New(b->n);
            for (uint32_t i = 0; lab && i < b->n; i++) {
                Py_ssize_t md[2] = {b->target_mask_sizes[2 * (size_t)i + 1],
                                    b->target_mask_sizes[2 * (size_t)i]};
                const uint8_t *src = b->target_masks + b->target_mask_offsets[i];
                PyObject *v = wide ? label_maps_wide(src, b->label_map_bytes, md, 2)
                                   : sr_view_copy(src, "B", 1, 2, md);
                if (!v || PyList_SetItem(lab, i, v) < 0)
                    Py_CLEAR(lab);
            }
        }
    } else if (img && self->targets) {
        /* (images, targets, ...): the labels of a detection dataset are -1, its targets say it */
        lab = b->target_offsets ? PyList_New(b->n) : NULL;
        if (!b->target_offsets && !PyErr_Occurred())
            PyErr_SetString(sr_argument_error, "targets=True: this dataset has no targets (it "
                            "was not built with --coco or --yolo)");
        for (uint32_t i = 0; lab && i < b->n; i++) {
            shr_target t;
            PyObject *td = shr_batch_target(b, i, &t) == 0 ? sr_target_dict(&t) : NULL;
            if (td && batch_segm(b, i, t.count, td, copy ? NULL : (PyObject *)base) < 0)
                Py_CLEAR(td);
            if (td && self->o.scale != SHR_SCALE_NONE && scale_size(td, b, i) < 0)
                Py_CLEAR(td);
            if (!td || PyList_SetItem(lab, i, td) < 0)
                Py_CLEAR(lab);
        }
    }
    if (lab && self->return_params == 2) {
        prm = PyList_New(b->n);
        for (uint32_t i = 0; prm && i < b->n; i++) {
            PyObject *ops = sample_ops(self, b, i);
            if (!ops || PyList_SetItem(prm, i, ops) < 0)
                Py_CLEAR(prm);
        }
    } else if (lab && self->return_params) {
        /* a small copy: (n, 5) int64 columns x, y, w, h, flip; with scale, 8 more (see
         * scale_columns) */
        int scaled = self->o.scale != SHR_SCALE_NONE;
        Py_ssize_t d2[2] = {b->n, scaled ? 13 : 5};
        prm = sr_view_copy(NULL, "q", 8, 2, d2);
        int64_t *row = prm ? (int64_t *)((ViewObject *)prm)->data : NULL;
        for (uint32_t i = 0; row && i < b->n; i++, row += d2[1]) {
            const shr_params *p = &b->params[i];
            row[0] = p->x;
            row[1] = p->y;
            row[2] = p->w;
            row[3] = p->h;
            row[4] = p->flip;
            if (scaled)
                scale_columns(p, row + 5);
        }
    }
    Py_DECREF(base);    /* the views hold it now; for copies this gives the buffer back */
    if (!img || !lab || (want_idx && !idx) || (want_sts && !sts) ||
        (self->return_params && !prm) ||
        (self->return_recovery && !rec) || (soft && self->return_params && !mix))
        goto fail;
    /* (images, labels[, indices][, streams][, params[, mix]][, recovery]) */
    PyObject *out = PyTuple_New(2 + (idx != NULL) + (sts != NULL) + (prm != NULL) +
                                (mix != NULL) + (rec != NULL));
    if (!out)
        goto fail;
    PyObject *parts[7] = {img, lab, idx, sts, prm, mix, rec};
    Py_ssize_t k = 0;
    for (int j = 0; j < 7; j++)
        if (parts[j])
            PyTuple_SetItem(out, k++, parts[j]);
    return sr_wrap(out, self->framework == FW_TORCH);
fail:
    Py_XDECREF(img);
    Py_XDECREF(lab);
    Py_XDECREF(idx);
    Py_XDECREF(prm);
    Py_XDECREF(mix);
    Py_XDECREF(rec);
    Py_XDECREF(sts);
    return NULL;
}
