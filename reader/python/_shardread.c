/* _shardread.c - the C extension under the Python package `shardread`: libshardread for Python.
 *
 * Built on the public header reader/shardread.h only, with CPython's stable ABI (Py_LIMITED_API
 * 3.11): one binary serves every CPython >= 3.11. It knows nothing of numpy or torch: memory is
 * handed out as _View objects that export the buffer protocol (PEP 3118: format, shape), and the
 * package's Python layer (shardread/__init__.py) turns them into numpy arrays (np.asarray, no
 * copy) and torch tensors (torch.from_numpy, no copy), through the hook it installs with
 * _set_wrap(). So the same binary works with numpy 1 and numpy 2.
 *
 * Objects
 * -------
 * Dataset   a shr_dataset: ds[i] copies sample i into a fresh buffer.
 * Loader    the user's handle: options, the position (epoch, cursor) of the next batch, and the
 *           current _Ring. It opens a new ring whenever the position it must continue from is not
 *           where the current ring stands (load_state_dict, set_epoch, an abandoned iteration, a
 *           forked child): a reader's stream only ever moves forward.
 * _Ring     owns one shr_reader. Closed when the last reference goes: the Loader's, or that of a
 *           batch still alive after the Loader moved on to a new ring.
 * _Batch    holds its _Ring and the shr_batch, and gives the batch back (shr_release) when the
 *           last _View of it (so the last array or tensor made from one) is collected.
 * _View     one array's memory: a pointer, shape and format, kept valid by its _Batch (a view of
 *           a ring buffer) or owning a malloc'd block (a copy, a Dataset sample).
 *
 * Holding batches. A ring has `prefetch` buffers; a batch kept alive by Python keeps its buffer.
 * The module hands out at most prefetch - 2 zero-copy batches at once, so that the workers
 * always have two buffers to fill and shr_next can never find every buffer held: a batch
 * delivered while that many are already held is copied into ordinary arrays and its buffer given
 * back at once (Loader.copies counts them). Keeping old batches therefore costs a copy, never a
 * deadlock, and never changes a byte of a batch still held.
 *
 * Copies still in flight. A pinned batch's tensor may be gone while the device copy made from
 * it (images.cuda(non_blocking=True)) still waits in a CUDA stream. So, where the package has
 * installed a fence (_set_fence: torch's CUDA is in use), a pinned batch collected by Python is
 * not given back at once: it waits on its ring's "fenced" list until the event that the next
 * next() records on the current stream has completed; next() gives back every fenced batch
 * whose event is done, and waits on the oldest ones while the workers would otherwise be left
 * with fewer than two free buffers. Copies on a side stream must be joined to the current stream
 * (current_stream().wait_stream(side)), as torch itself requires of a tensor used across streams.
 *
 * Threads. The GIL is released while shr_next waits and while samples are read, so other Python
 * threads run. One thread at a time may iterate a Loader (shr_next has one consumer); a second
 * gets RuntimeError. Batches may be collected from any thread (shr_release is thread-safe).
 *
 * fork. A reader's worker threads do not survive fork(2): a child (e.g. a DataLoader worker
 * process) that iterates a Loader opens its own reader, and leaves the parent's untouched (never
 * closed or released in the child: its mutex may have been held at the fork).
 */
#define PY_SSIZE_T_CLEAN
#ifndef Py_LIMITED_API
#define Py_LIMITED_API 0x030B0000
#endif
#include <Python.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shardread.h"

/* The stable ABI has no Py_SETREF / Py_XSETREF */
#define SETREF(dst, src)                                                                          \
    do {                                                                                           \
        PyObject *old_ = (PyObject *)(dst);                                                        \
        (dst) = (src);                                                                             \
        Py_DECREF(old_);                                                                           \
    } while (0)
#define XSETREF(dst, src)                                                                         \
    do {                                                                                           \
        PyObject *old_ = (PyObject *)(dst);                                                        \
        (dst) = (src);                                                                             \
        Py_XDECREF(old_);                                                                          \
    } while (0)

/* Free an object of one of this module's heap types, and drop the reference its instance held
 * on the type. */
static void free_object(PyObject *self)
{
    PyTypeObject *t = Py_TYPE(self);
    freefunc f = (freefunc)PyType_GetSlot(t, Py_tp_free);
    f(self);
    Py_DECREF(t);
}

/* The UTF-8 text of a str (NULL, with an error set, if it has none). */
static const char *utf8(PyObject *o)
{
    return PyUnicode_AsUTF8AndSize(o, NULL);
}

/* o is the str s */
static int str_is(PyObject *o, const char *s)
{
    if (!PyUnicode_Check(o))
        return 0;
    const char *t = utf8(o);
    if (!t) {
        PyErr_Clear();
        return 0;
    }
    return strcmp(t, s) == 0;
}

/* The name of o's type, for messages (a new reference). */
static PyObject *type_name(PyObject *o)
{
    PyObject *n = PyType_GetName(Py_TYPE(o));
    if (!n) {
        PyErr_Clear();
        n = PyUnicode_FromString("?");
    }
    return n;
}

/* PyErr_Format(exc, "<prefix> %U<suffix>") with o's type name; returns NULL */
static PyObject *type_error(PyObject *exc, const char *prefix, PyObject *o, const char *suffix)
{
    PyObject *n = type_name(o);
    if (n) {
        PyErr_Format(exc, "%s%U%s", prefix, n, suffix);
        Py_DECREF(n);
    }
    return NULL;
}

/* ---- module-wide objects (created once at import) ---- */

static PyObject *g_error;           /* shardread.Error and its subclasses */
static PyObject *g_corrupt_error;
static PyObject *g_argument_error;
static PyObject *g_shape_error;
static PyObject *g_not_found_error;
static PyObject *g_read_error;
static PyObject *g_state_error;
static PyObject *g_unsupported_error;
static PyObject *g_torch_loader;    /* Loader subclassing torch's IterableDataset, made lazily */
static PyObject *g_wrap;            /* wrap(parts, torch): _Views into arrays (see _set_wrap) */
static PyObject *g_fence;           /* fence() -> event, or None (see _set_fence) */
static int g_fence_all;             /* fence every batch, pinned or not (tests) */
static PyTypeObject *DatasetType, *RingType, *BatchType, *ViewType, *LoaderType,
    *LoaderIterType;

/* ---- errors ---- */

/* Raise the Python exception for library code rc with message msg (the library's, naming the
 * file). The exception carries .code (rc) and .reason (shr_strerror(rc)). Returns NULL. */
static PyObject *raise_lib(int rc, const char *msg)
{
    if (!msg || !*msg)
        msg = shr_strerror(rc);
    PyObject *type, *exc;
    if (rc == ENOMEM)
        return PyErr_NoMemory();
    if (rc > 0) {
        type = rc == ENOENT ? g_not_found_error : g_read_error;
        exc = PyObject_CallFunction(type, "is", rc, msg);
    } else {
        switch (rc) {
        case SHR_EINVAL:
        case SHR_EFMT_INVAL:
            type = g_argument_error;
            break;
        case SHR_ESHAPE:
            type = g_shape_error;
            break;
        case SHR_ESTATE:
            type = g_state_error;
            break;
        case SHR_EUNSUPPORTED:
            type = g_unsupported_error;
            break;
        case SHR_EFORMAT:
        case SHR_ECORRUPT:
        case SHR_ETRUNC:
        case SHR_ETOOBIG:
        case SHR_EHASH:
        case SHR_EVERSION:
        case SHR_EEMPTY:
            type = g_corrupt_error;
            break;
        default:
            type = g_error;
        }
        exc = PyObject_CallFunction(type, "s", msg);
    }
    if (!exc)
        return NULL;
    PyObject *code = PyLong_FromLong(rc), *reason = PyUnicode_FromString(shr_strerror(rc));
    if (!code || !reason || PyObject_SetAttrString(exc, "code", code) < 0 ||
        PyObject_SetAttrString(exc, "reason", reason) < 0) {
        Py_XDECREF(code);
        Py_XDECREF(reason);
        Py_DECREF(exc);
        return NULL;
    }
    Py_DECREF(code);
    Py_DECREF(reason);
    PyErr_SetObject(type, exc);
    Py_DECREF(exc);
    return NULL;
}

/* ---- small helpers ---- */

static int parse_access(PyObject *s, shr_access *out)
{
    if (!s || s == Py_None) {
        *out = SHR_ACCESS_MMAP;
        return 0;
    }
    const char *a = PyUnicode_Check(s) ? utf8(s) : NULL;
    if (a && strcmp(a, "mmap") == 0)
        *out = SHR_ACCESS_MMAP;
    else if (a && strcmp(a, "pread") == 0)
        *out = SHR_ACCESS_PREAD;
    else if (a && strcmp(a, "direct") == 0)
        *out = SHR_ACCESS_DIRECT;
    else {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_ValueError, "access must be 'mmap', 'pread' or 'direct', not %R", s);
        return -1;
    }
    return 0;
}

/* A path argument (str or os.PathLike) as bytes in the filesystem encoding. */
static PyObject *fs_path(PyObject *path)
{
    PyObject *b = NULL;
    if (!PyUnicode_FSConverter(path, &b))
        return NULL;
    return b;
}

static PyObject *double_list(const double *v, uint32_t n)
{
    PyObject *l = PyList_New(n);
    for (uint32_t i = 0; l && i < n; i++) {
        PyObject *f = PyFloat_FromDouble(v[i]);
        if (!f) {
            Py_DECREF(l);
            return NULL;
        }
        PyList_SetItem(l, i, f);
    }
    return l;
}

/* A uint64 from a Python int (ValueError if negative or too large). */
static int to_u64(PyObject *o, const char *what, uint64_t *out)
{
    PyObject *i = PyNumber_Index(o);
    if (!i) {
        if (PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            char prefix[96];
            snprintf(prefix, sizeof prefix, "%s must be an integer, not ", what);
            type_error(PyExc_TypeError, prefix, o, "");
        }
        return -1;
    }
    unsigned long long v = PyLong_AsUnsignedLongLong(i);
    Py_DECREF(i);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "%s must be a non-negative 64-bit integer, not %R",
                         what, o);
        }
        return -1;
    }
    *out = v;
    return 0;
}

static int to_u32(PyObject *o, const char *what, uint32_t lo, uint32_t *out)
{
    uint64_t v;
    if (to_u64(o, what, &v) < 0)
        return -1;
    if (v < lo || v > UINT32_MAX) {
        PyErr_Format(PyExc_ValueError, "%s must be in %u..%u, not %R", what, lo, UINT32_MAX, o);
        return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

static int flag_named(PyObject *o, const char *what, int *out);

/* ======================================================================================== */
/* _View                                                                                     */
/* ======================================================================================== */

typedef struct {
    PyObject_HEAD
    void *data;
    PyObject *owner;            /* the _Batch whose memory data is, or NULL: data is ours */
    int ndim;
    Py_ssize_t shape[4];
    Py_ssize_t strides[4];
    Py_ssize_t itemsize;
    Py_ssize_t len;             /* bytes */
    char format[4];             /* struct module syntax: B uint8, e float16, f float32, q int64 */
} ViewObject;

/* A _View of data (C-contiguous, ndim <= 4 dimensions of shape, items of format). With an owner,
 * data belongs to it and the view holds a reference; without, data was malloc'd and the view
 * takes it (freed with the view, or here if the view cannot be made). */
static PyObject *new_view(void *data, PyObject *owner, const char *format, Py_ssize_t itemsize,
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
static PyObject *view_copy(const void *src, const char *format, Py_ssize_t itemsize, int ndim,
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
    return new_view(p, NULL, format, itemsize, ndim, shape);
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
    free_object((PyObject *)self);
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

static PyType_Spec View_spec = {
    .name = "shardread._View",
    .basicsize = sizeof(ViewObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = View_slots,
};

/* The package's form of parts (a tuple of _Views and plain objects): wrap(parts, torch). Without
 * the package's hook (the extension imported on its own) the parts as they are. */
static PyObject *wrap(PyObject *parts, int torch)
{
    if (!parts || !g_wrap)
        return parts;
    PyObject *out = PyObject_CallFunction(g_wrap, "OO", parts, torch ? Py_True : Py_False);
    Py_DECREF(parts);
    return out;
}

/* A detection target as torchvision's detection models take it (arrays as _Views, copies):
 * {"boxes": (n, 4) float32 x1 y1 x2 y2, "labels": (n,) int64, "area": (n,) float32,
 *  "iscrowd": (n,) int64, "image_id": int, "orig_size": (height, width), "dropped": int}. */
static PyObject *target_dict(const shr_target *t)
{
    Py_ssize_t n = t->count, d2[2] = {n, 4}, d1[1] = {n};
    PyObject *boxes = view_copy(t->boxes, "f", 4, 2, d2);
    PyObject *labels = boxes ? view_copy(t->labels, "q", 8, 1, d1) : NULL;
    PyObject *area = labels ? view_copy(t->area, "f", 4, 1, d1) : NULL;
    PyObject *crowd = area ? view_copy(NULL, "q", 8, 1, d1) : NULL;
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

/* ======================================================================================== */
/* Dataset                                                                                   */
/* ======================================================================================== */

typedef struct {
    PyObject_HEAD
    shr_dataset *d;
    PyObject *path;
    uint64_t samples;
    int targets;                /* a detection dataset: items are (image, target) */
} DatasetObject;

static int Dataset_init(DatasetObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"path", "access", "verify_samples", NULL};
    PyObject *path, *access = NULL, *verify = Py_False;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OO:Dataset", kwlist, &path, &access, &verify))
        return -1;
    int v;
    if (flag_named(verify, "verify_samples", &v) < 0)
        return -1;
    shr_access a;
    if (parse_access(access, &a) < 0)
        return -1;
    PyObject *b = fs_path(path);
    if (!b)
        return -1;
    if (self->d) {
        shr_dataset_close(self->d);
        self->d = NULL;
    }
    shr_dataset *d = NULL;
    int rc;
    char msg[1024];
    Py_BEGIN_ALLOW_THREADS
    rc = shr_dataset_open_flags(&d, PyBytes_AsString(b), a, v ? SHR_DATASET_VERIFY : 0);
    if (rc)
        snprintf(msg, sizeof msg, "%s", shr_last_error(NULL));
    Py_END_ALLOW_THREADS
    Py_DECREF(b);
    if (rc) {
        raise_lib(rc, msg);
        return -1;
    }
    self->d = d;
    shr_dataset_info info;
    shr_dataset_get_info(d, &info);
    self->samples = info.samples;
    self->targets = info.targets;
    XSETREF(self->path, PyOS_FSPath(path));
    return self->path ? 0 : -1;
}

static void Dataset_dealloc(DatasetObject *self)
{
    shr_dataset_close(self->d);
    Py_XDECREF(self->path);
    free_object((PyObject *)self);
}

static int check_open(const DatasetObject *self)
{
    if (!self->d) {
        PyErr_SetString(g_state_error, "the Dataset is not open (its __init__ failed or was not "
                        "called)");
        return -1;
    }
    return 0;
}

static Py_ssize_t Dataset_len(DatasetObject *self)
{
    if (check_open(self) < 0)
        return -1;
    if (self->samples > PY_SSIZE_T_MAX) {
        PyErr_SetString(PyExc_OverflowError, "too many samples");
        return -1;
    }
    return (Py_ssize_t)self->samples;
}

static PyObject *Dataset_getitem(DatasetObject *self, PyObject *key)
{
    if (check_open(self) < 0)
        return NULL;
    if (!PyIndex_Check(key))
        return type_error(PyExc_TypeError, "Dataset indices must be integers, not ", key, "");
    Py_ssize_t i = PyNumber_AsSsize_t(key, PyExc_IndexError);
    if (i == -1 && PyErr_Occurred())
        return NULL;
    Py_ssize_t n = (Py_ssize_t)self->samples;
    if (i < 0)
        i += n;
    if (i < 0 || i >= n)
        return PyErr_Format(PyExc_IndexError, "Dataset index %R out of range (%zd samples)", key,
                            n);
    shr_sample s;
    if (shr_dataset_sample(self->d, (uint64_t)i, &s) != 0)
        return PyErr_Format(PyExc_IndexError, "Dataset index %zd out of range", i);
    Py_ssize_t dims[3] = {s.height, s.width, s.channels};
    PyObject *arr = view_copy(NULL, "B", 1, 3, dims);
    if (!arr)
        return NULL;
    int rc;
    char msg[1024];
    void *dst = ((ViewObject *)arr)->data;
    size_t len = (size_t)((ViewObject *)arr)->len;
    Py_BEGIN_ALLOW_THREADS
    rc = shr_dataset_read(self->d, (uint64_t)i, dst, len, &s);
    if (rc)
        snprintf(msg, sizeof msg, "%s", shr_last_error(NULL));
    Py_END_ALLOW_THREADS
    if (rc) {
        Py_DECREF(arr);
        return raise_lib(rc, msg);
    }
    if (self->targets) {
        shr_target t;
        if (shr_dataset_target(self->d, (uint64_t)i, &t) != 0) {
            Py_DECREF(arr);
            return raise_lib(SHR_EINVAL, shr_last_error(NULL));
        }
        PyObject *td = target_dict(&t);
        if (!td) {
            Py_DECREF(arr);
            return NULL;
        }
        return wrap(Py_BuildValue("(NN)", arr, td), 0);
    }
    return wrap(Py_BuildValue("(NL)", arr, (long long)s.label), 0);
}

static PyObject *Dataset_sample(DatasetObject *self, PyObject *arg)
{
    if (check_open(self) < 0)
        return NULL;
    uint64_t i;
    if (to_u64(arg, "index", &i) < 0)
        return NULL;
    shr_sample s;
    if (shr_dataset_sample(self->d, i, &s) != 0)
        return PyErr_Format(PyExc_IndexError, "Dataset index %R out of range (%llu samples)", arg,
                            (unsigned long long)self->samples);
    return Py_BuildValue("{s:L,s:(III),s:K}", "label", (long long)s.label, "shape", s.height,
                         s.width, s.channels, "source", (unsigned long long)s.source);
}

static PyObject *Dataset_get_info(DatasetObject *self, void *closure)
{
    if (check_open(self) < 0)
        return NULL;
    shr_dataset_info in;
    shr_dataset_get_info(self->d, &in);
    PyObject *classes = PyList_New(in.classes);
    if (!classes)
        return NULL;
    for (uint32_t c = 0; c < in.classes; c++) {
        const char *name = shr_dataset_class(self->d, c);
        PyObject *s = PyUnicode_DecodeFSDefault(name ? name : "");
        if (!s) {
            Py_DECREF(classes);
            return NULL;
        }
        PyList_SetItem(classes, c, s);
    }
    PyObject *size;
    if (in.width && in.height)
        size = Py_BuildValue("(II)", in.height, in.width);
    else
        size = Py_NewRef(Py_None);
    if (!size) {
        Py_DECREF(classes);
        return NULL;
    }
    uint32_t nc = in.channels < 3 ? in.channels : 3;
    return Py_BuildValue(
        "{s:s,s:K,s:N,s:I,s:I,s:N,s:{s:s,s:s,s:I,s:I,s:I,s:I},s:N,s:N,s:I,s:s,s:K,s:K,s:K,s:s,s:O}",
        "format", in.format, "samples", (unsigned long long)in.samples, "classes", classes,
        "num_classes", in.classes, "channels", in.channels, "size", size, "geometry", "mode",
        in.geom_mode, "fit", in.geom_fit, "width", in.geom_width, "height", in.geom_height,
        "short_side", in.geom_short_side, "max_side", in.geom_max_side, "mean",
        double_list(in.mean, nc), "std", double_list(in.std, nc), "augment", in.augment,
        "aug_spec", in.aug_spec, "seed", (unsigned long long)in.seed, "inputs",
        (unsigned long long)in.inputs, "rejects", (unsigned long long)in.rejects, "tool", in.tool,
        "path", self->path);
}

static PyObject *Dataset_get_path(DatasetObject *self, void *closure)
{
    return Py_NewRef(self->path ? self->path : Py_None);
}

static PyObject *Dataset_repr(DatasetObject *self)
{
    if (!self->d)
        return PyUnicode_FromString("<shardread.Dataset (not open)>");
    return PyUnicode_FromFormat("<shardread.Dataset %R: %llu samples>", self->path,
                                (unsigned long long)self->samples);
}

/* Every sample's label, in order (ImageFolder's targets), and the smallest and largest stored
 * height and width: one pass over the index, no pixels read. */
static PyObject *Dataset_scan(DatasetObject *self, PyObject *unused)
{
    if (check_open(self) < 0)
        return NULL;
    PyObject *labels = PyList_New((Py_ssize_t)self->samples);
    if (!labels)
        return NULL;
    uint32_t min_h = UINT32_MAX, min_w = UINT32_MAX, max_h = 0, max_w = 0;
    for (uint64_t i = 0; i < self->samples; i++) {
        shr_sample s;
        if (shr_dataset_sample(self->d, i, &s) != 0) {
            Py_DECREF(labels);
            return PyErr_Format(PyExc_IndexError, "Dataset index %llu out of range",
                                (unsigned long long)i);
        }
        PyObject *l = PyLong_FromLongLong((long long)s.label);
        if (!l || PyList_SetItem(labels, (Py_ssize_t)i, l) < 0) {
            Py_DECREF(labels);
            return NULL;
        }
        min_h = s.height < min_h ? s.height : min_h;
        min_w = s.width < min_w ? s.width : min_w;
        max_h = s.height > max_h ? s.height : max_h;
        max_w = s.width > max_w ? s.width : max_w;
    }
    if (!self->samples)
        min_h = min_w = 0;
    return Py_BuildValue("N(II)(II)", labels, min_h, min_w, max_h, max_w);
}

static PyMethodDef Dataset_methods[] = {
    {"_scan", (PyCFunction)Dataset_scan, METH_NOARGS,
     "_scan() -> (labels, (min_height, min_width), (max_height, max_width))\n"
     "\n"
     "Every sample's label in order and the extent of the stored sizes, from the\n"
     "index alone (internal: the package's targets and Loader's size check use it)."},
    {"sample", (PyCFunction)Dataset_sample, METH_O,
     "sample(i) -> dict\n"
     "\n"
     "Metadata of sample i without reading its pixels: label, shape (height, width,\n"
     "channels) as stored, and source (the position of its source image among the\n"
     "build's inputs)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Dataset_getset[] = {
    {"info", (getter)Dataset_get_info, NULL,
     "What the dataset's manifest records, as a dict: format (storage backend),\n"
     "samples, classes (names; label L is classes[L]), num_classes, channels, size\n"
     "((height, width) when every sample shares one, else None), geometry (the\n"
     "build's mode, fit and sizes), mean and std (per channel, 0..255 scale),\n"
     "augment and aug_spec (pre-augmentation), seed, inputs and rejects (of the\n"
     "build), tool, path.",
     NULL},
    {"path", (getter)Dataset_get_path, NULL, "The dataset directory.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static const char dataset_doc[] =
    "Dataset(path, access='mmap')\n"
    "\n"
    "A dataset directory written by shardc, sample by sample (a map-style dataset,\n"
    "usable as a torch Dataset):\n"
    "\n"
    "    ds = shardread.Dataset('ds')\n"
    "    len(ds)                    # samples\n"
    "    image, label = ds[i]       # (H, W, C) uint8 ndarray (a copy), int label\n"
    "    ds.info                    # classes, mean/std, geometry, samples, format\n"
    "\n"
    "Samples are returned as stored, each at its own size. access: 'mmap'\n"
    "(default), 'pread' or 'direct' (see libshardread). Raises FileNotFoundError\n"
    "(shardread.NotFoundError) for a directory without a manifest and\n"
    "shardread.CorruptError for a damaged shard, with a message naming the file.\n"
    "Reads release the GIL; a Dataset may be read from several threads at once.";

static PyType_Slot Dataset_slots[] = {
    {Py_tp_doc, (void *)dataset_doc},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_init, Dataset_init},
    {Py_tp_dealloc, Dataset_dealloc},
    {Py_tp_repr, Dataset_repr},
    {Py_sq_length, Dataset_len},
    {Py_mp_length, Dataset_len},
    {Py_mp_subscript, Dataset_getitem},
    {Py_tp_methods, Dataset_methods},
    {Py_tp_getset, Dataset_getset},
    {0, NULL},
};

static PyType_Spec Dataset_spec = {
    .name = "shardread.Dataset",
    .basicsize = sizeof(DatasetObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .slots = Dataset_slots,
};

/* ======================================================================================== */
/* _Ring and _Batch                                                                          */
/* ======================================================================================== */

typedef struct {
    PyObject_HEAD
    shr_reader *r;
    pid_t pid;                  /* the process that opened r: only it may touch r */
    uint32_t nslots;            /* the ring's buffers (prefetch) */
    uint32_t held;              /* batches of r alive in Python (zero-copy) */
    uint32_t rank, world;       /* the share r reads */
    uint64_t start_epoch;       /* r was opened in this epoch ... */
    uint64_t start;             /* ... with these positions of it consumed (0: none) */
    int failed;                 /* shr_next failed: r is of no further use */
    /* batches collected by Python whose device copies may still be queued (see "Copies still
     * in flight" at the top): given back once their event has completed, oldest first */
    struct fenced {
        const shr_batch *b;
        PyObject *event;        /* has query() -> bool and synchronize() */
    } *fenced;
    uint32_t nfenced;
} RingObject;

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
static int drain_fenced(RingObject *ring, uint32_t keep)
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
    free_object((PyObject *)self);
}

static PyType_Slot Ring_slots[] = {
    {Py_tp_doc, "A libshardread reader and its ring of batch buffers (internal)."},
    {Py_tp_dealloc, Ring_dealloc},
    {0, NULL},
};

static PyType_Spec Ring_spec = {
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
    if (!g_fence || !(b->pinned || g_fence_all) || ring->nslots == 0)
        return NULL;
    /* a dealloc may run while an exception is being raised: keep it */
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    PyObject *event = PyObject_CallNoArgs(g_fence);
    if (!event) {
        PyErr_WriteUnraisable(g_fence);
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
    free_object((PyObject *)self);
}

static PyType_Slot Batch_slots[] = {
    {Py_tp_doc, "The ring buffer under a batch's arrays: gives it back to the reader when the\n"
                "last array (or tensor) using it is collected (internal)."},
    {Py_tp_dealloc, Batch_dealloc},
    {0, NULL},
};

static PyType_Spec Batch_spec = {
    .name = "shardread._Batch",
    .basicsize = sizeof(BatchObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = Batch_slots,
};

/* ======================================================================================== */
/* Loader                                                                                    */
/* ======================================================================================== */

enum { FW_NUMPY = 0, FW_TORCH };

/* The epochs a Loader counts: their number plus one must not wrap */
#define MAX_EPOCH ((uint64_t)INT64_MAX)

typedef struct {
    PyObject_HEAD
    PyObject *path;             /* as given (str or PathLike), for repr */
    PyObject *path_bytes;       /* filesystem encoding */
    shr_options o;              /* the options; epoch, cursor, rank and world are set per open */
    uint32_t rank, world;       /* this process's share */
    int framework;
    int return_indices;
    int return_params;
    int return_recovery;
    int targets;                /* batches are (images, targets, ...): a detection dataset */
    RingObject *ring;           /* the reader now in use (NULL until the first open) */
    uint64_t nb;                /* batches per epoch of this share */
    uint64_t epoch, cursor;     /* where the next batch comes from: cursor batches of this
                                 * share after position `start` of epoch's global sequence */
    uint64_t start;             /* positions of `epoch` consumed before cursor counts (non-zero
                                 * only in an epoch resumed from another world size) */
    uint64_t start_nb;          /* batches of this share in that resumed epoch */
    uint64_t samples;           /* in the dataset */
    int active;                 /* an iteration is under way (started, not yet finished) */
    unsigned long gen;          /* counts iterations; an iterator belongs to one */
    int busy;                   /* a thread is inside next(), iter() or load_state_dict() */
    uint64_t iter_total;        /* batches the iteration under way yields in all */
    unsigned long long copies;  /* batches copied because too many were held */
} LoaderObject;

typedef struct {
    PyObject_HEAD
    LoaderObject *loader;
    unsigned long gen;
    int done;
} LoaderIterObject;


/* The share this process reads: (rank, world). Inside a torch DataLoader worker process the
 * Loader refuses to run: a worker holds a copy of the Loader that the parent's set_epoch,
 * load_state_dict and state_dict never reach, and every batch would be copied through shared
 * memory; the Loader's own threads are the parallelism. */
static int worker_share(const LoaderObject *self, uint32_t *rank, uint32_t *world)
{
    *rank = self->rank;
    *world = self->world;
    PyObject *mods = PyImport_GetModuleDict();
    PyObject *tud = mods ? PyDict_GetItemString(mods, "torch.utils.data") : NULL;
    if (!tud)
        return 0;
    PyObject *wi = PyObject_CallMethod(tud, "get_worker_info", NULL);
    if (!wi)
        return -1;
    int rc = 0;
    if (wi != Py_None) {
        PyErr_SetString(PyExc_RuntimeError,
                        "shardread.Loader cannot run in a DataLoader worker process: a worker's "
                        "copy of the Loader never sees the parent's set_epoch, load_state_dict or "
                        "state_dict, and each batch would be copied between processes; use "
                        "DataLoader(loader, batch_size=None, num_workers=0), or iterate the "
                        "Loader itself (its threads= keyword sets the parallelism)");
        rc = -1;
    }
    Py_DECREF(wi);
    return rc;
}

/* Open a new reader at (epoch, cursor) for the share (rank, world) and make it current. The
 * previous ring lives on while batches of it are alive. */
static int open_ring(LoaderObject *self, uint64_t epoch, uint64_t cursor, uint32_t rank,
                     uint32_t world)
{
    shr_options o = self->o;
    o.epoch = epoch;
    o.cursor = cursor;
    o.rank = rank;
    o.world = world;
    int mine = rank == self->rank && world == self->world;
    if (epoch == self->epoch && self->start) {
        /* a resumed epoch: the library takes consumed positions or a cursor, not both, so the
         * batches this share has read since are folded into the positions (the same ones, as
         * every share advances alike) */
        uint64_t step = cursor * (uint64_t)o.batch_size * world, n = self->samples;
        o.consumed = step >= n - self->start ? n : self->start + step;
        o.cursor = 0;
        if (cursor) {
            self->start = o.consumed;
            self->cursor = 0;
        }
    }
    RingObject *ring = PyObject_New(RingObject, RingType);
    if (!ring)
        return -1;
    ring->r = NULL;
    ring->pid = getpid();
    ring->nslots = o.prefetch;
    ring->held = 0;
    ring->rank = rank;
    ring->world = world;
    ring->start_epoch = epoch;
    ring->start = o.consumed;
    ring->failed = 0;
    ring->fenced = NULL;
    ring->nfenced = 0;
    shr_reader *r = NULL;
    int rc;
    char msg[1024];
    Py_BEGIN_ALLOW_THREADS
    rc = shr_open(&r, PyBytes_AsString(self->path_bytes), &o);
    if (rc)
        snprintf(msg, sizeof msg, "%s", shr_last_error(NULL));
    Py_END_ALLOW_THREADS
    if (rc) {
        Py_DECREF(ring);
        if (rc == SHR_ESHAPE)
            snprintf(msg + strlen(msg), sizeof msg - strlen(msg), "; pass size=(height, width) "
                     "(or size=N for N x N) to crop or pad every sample to one size");
        raise_lib(rc, msg);
        return -1;
    }
    ring->r = r;
    XSETREF(self->ring, ring);
    if (mine) {
        shr_info info;
        shr_get_info(r, &info);
        self->samples = info.samples;
        self->nb = shr_batches_per_epoch(r);
        if (o.consumed)
            self->start_nb = shr_batches_in_epoch(r, epoch);
    }
    return 0;
}

/* Make the current ring deliver the batch at (self->epoch, self->cursor) next. */
static int sync_ring(LoaderObject *self)
{
    uint32_t rank, world;
    if (worker_share(self, &rank, &world) < 0)
        return -1;
    RingObject *ring = self->ring;
    if (ring && ring->pid == getpid() && !ring->failed && ring->rank == rank &&
        ring->world == world) {
        shr_state st = shr_get_state(ring->r);
        uint64_t ring_start = st.epoch == ring->start_epoch ? ring->start : 0;
        if (st.epoch == self->epoch && st.cursor == self->cursor && ring_start == self->start)
            return 0;
        /* an epoch read to its last batch: its end is all that stands in the way */
        uint64_t nb = shr_batches_in_epoch(ring->r, st.epoch);
        if (st.cursor == nb && self->cursor == 0 && self->start == 0 &&
            st.epoch + 1 == self->epoch) {
            const shr_batch *b;
            if (shr_next(ring->r, &b) == SHR_EEND)
                return 0;
            ring->failed = 1;
        }
    }
    return open_ring(self, self->epoch, self->cursor, rank, world);
}

/* A yes/no keyword: a bool, 0 or 1, or a numpy bool; anything else (a string, None, 2) is a
 * TypeError naming the keyword, never taken as true. */
static int flag_named(PyObject *o, const char *what, int *out)
{
    int ok = PyBool_Check(o);
    if (!ok && PyLong_Check(o)) {
        long v = PyLong_AsLong(o);
        if (v == -1 && PyErr_Occurred())
            PyErr_Clear();
        ok = v == 0 || v == 1;
    }
    if (!ok) {
        PyObject *n = type_name(o);
        ok = n && PyUnicode_CompareWithASCIIString(n, "bool_") == 0;   /* numpy.bool_ */
        Py_XDECREF(n);
    }
    if (!ok) {
        PyObject *n = type_name(o);
        if (n)
            PyErr_Format(PyExc_TypeError, "%s must be True or False, not %R (%U)", what, o, n);
        Py_XDECREF(n);
        return -1;
    }
    int v = PyObject_IsTrue(o);
    if (v < 0)
        return -1;
    *out = v;
    return 0;
}

/* rank and world when not given: torch.distributed's when it is initialised, else the RANK and
 * WORLD_SIZE environment variables, else 0 of 1. */
static int default_share(PyObject *rank_arg, PyObject *world_arg, uint32_t *rank, uint32_t *world)
{
    *rank = 0;
    *world = 1;
    int have_rank = rank_arg && rank_arg != Py_None, have_world = world_arg && world_arg != Py_None;
    if (have_rank && to_u32(rank_arg, "rank", 0, rank) < 0)
        return -1;
    if (have_world && to_u32(world_arg, "world", 1, world) < 0)
        return -1;
    if (have_rank && have_world)
        return 0;
    PyObject *mods = PyImport_GetModuleDict();
    PyObject *dist = mods ? PyDict_GetItemString(mods, "torch.distributed") : NULL;
    if (dist) {
        PyObject *avail = PyObject_CallMethod(dist, "is_available", NULL);
        int ok = avail ? PyObject_IsTrue(avail) : -1;
        Py_XDECREF(avail);
        if (ok > 0) {
            PyObject *init = PyObject_CallMethod(dist, "is_initialized", NULL);
            ok = init ? PyObject_IsTrue(init) : -1;
            Py_XDECREF(init);
        }
        if (ok < 0)
            return -1;
        if (ok) {
            PyObject *r = PyObject_CallMethod(dist, "get_rank", NULL);
            PyObject *w = r ? PyObject_CallMethod(dist, "get_world_size", NULL) : NULL;
            int bad = !w || (!have_rank && to_u32(r, "torch.distributed rank", 0, rank) < 0) ||
                      (!have_world && to_u32(w, "torch.distributed world size", 1, world) < 0);
            Py_XDECREF(r);
            Py_XDECREF(w);
            return bad ? -1 : 0;
        }
    }
    const char *names[2] = {"RANK", "WORLD_SIZE"};
    uint32_t *dst[2] = {rank, world};
    int given[2] = {have_rank, have_world};
    for (int k = 0; k < 2; k++) {
        const char *v = getenv(names[k]);
        if (given[k] || !v || !*v)
            continue;
        char *end;
        errno = 0;
        unsigned long long x = strtoull(v, &end, 10);
        if (errno || *end || v[0] == '-' || x > UINT32_MAX || (k == 1 && x == 0)) {
            PyErr_Format(PyExc_ValueError, "environment variable %s=%s is not a valid %s",
                         names[k], v, k ? "world size" : "rank");
            return -1;
        }
        *dst[k] = (uint32_t)x;
    }
    return 0;
}

static int default_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 4 ? 4 : (int)n;
}

/* Where torch is imported and has a CUDA device, initialise its CUDA state before the ring is
 * pinned: torch reports a tensor as pinned (is_pinned(), which its own copies and DataLoader
 * consult) only once it has initialised CUDA itself, and the buffers are then pinned under the
 * primary context torch uses. Best effort: pinning works without it. */
static void prepare_torch_cuda(void)
{
    PyObject *mods = PyImport_GetModuleDict();
    PyObject *torch = mods ? PyDict_GetItemString(mods, "torch") : NULL;
    if (!torch)
        return;
    PyObject *cuda = PyObject_GetAttrString(torch, "cuda");
    PyObject *avail = cuda ? PyObject_CallMethod(cuda, "is_available", NULL) : NULL;
    if (avail && PyObject_IsTrue(avail) == 1) {
        PyObject *r = PyObject_CallMethod(cuda, "init", NULL);
        Py_XDECREF(r);
    }
    Py_XDECREF(avail);
    Py_XDECREF(cuda);
    PyErr_Clear();
}

/* framework='torch' needs torch importable: ImportError at once, not at the first batch */
static int import_torch(void)
{
    PyObject *torch = PyImport_ImportModule("torch");
    if (!torch)
        return -1;
    Py_DECREF(torch);
    return 0;
}

static const char loader_doc[];

/* The Loader type to instantiate: once torch.utils.data is imported, a subclass of both Loader
 * and torch's IterableDataset, so that DataLoader(loader, batch_size=None) treats it as one. */
static PyTypeObject *loader_class(PyTypeObject *asked)
{
    if (asked != LoaderType)
        return asked;
    if (g_torch_loader)
        return (PyTypeObject *)g_torch_loader;
    PyObject *mods = PyImport_GetModuleDict();
    PyObject *tud = mods ? PyDict_GetItemString(mods, "torch.utils.data") : NULL;
    if (!tud)
        return asked;
    PyObject *itds = PyObject_GetAttrString(tud, "IterableDataset");
    if (!itds)
        return NULL;
    PyObject *cls = PyObject_CallFunction((PyObject *)&PyType_Type, "s(OO){s:s,s:s,s:()}",
                                          "Loader", (PyObject *)LoaderType, itds, "__module__",
                                          "shardread", "__doc__", loader_doc, "__slots__");
    Py_DECREF(itds);
    if (!cls)
        return NULL;
    g_torch_loader = cls;
    return (PyTypeObject *)cls;
}

/* A pair of floats (lo, hi) from a 2-sequence. */
static int float_pair(PyObject *o, const char *what, double out[2])
{
    PyObject *seq = PySequence_Check(o) && !PyUnicode_Check(o) ? PySequence_Tuple(o) : NULL;
    if (!seq || PyTuple_Size(seq) != 2) {
        Py_XDECREF(seq);
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s must be a (min, max) pair of numbers, not %R", what, o);
        return -1;
    }
    for (int i = 0; i < 2; i++) {
        out[i] = PyFloat_AsDouble(PyTuple_GetItem(seq, i));
        if (out[i] == -1.0 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return -1;
        }
    }
    Py_DECREF(seq);
    return 0;
}

/* Per-channel values (1 to 4 numbers, or one number for every channel) into out[4]. */
static int channel_values(PyObject *o, const char *what, float out[4])
{
    if (PyNumber_Check(o) && !PySequence_Check(o)) {
        double v = PyFloat_AsDouble(o);
        if (v == -1.0 && PyErr_Occurred())
            return -1;
        for (int c = 0; c < 4; c++)
            out[c] = (float)v;
        return 0;
    }
    PyObject *seq = PySequence_Check(o) && !PyUnicode_Check(o) ? PySequence_Tuple(o) : NULL;
    Py_ssize_t n = seq ? PyTuple_Size(seq) : 0;
    if (!seq || n < 1 || n > 4) {
        Py_XDECREF(seq);
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s must be a number or 1 to 4 numbers (one per channel, "
                     "on the 0..255 scale), not %R", what, o);
        return -1;
    }
    for (Py_ssize_t c = 0; c < 4; c++) {
        double v = PyFloat_AsDouble(PyTuple_GetItem(seq, c < n ? c : n - 1));
        if (v == -1.0 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return -1;
        }
        out[c] = (float)v;
    }
    Py_DECREF(seq);
    return 0;
}

/* A name among names[] (case-insensitive); also a numpy or torch dtype, by its name. */
static int choose(PyObject *o, const char *what, const char *const *names, int n, int *out)
{
    PyObject *str = NULL;
    if (PyUnicode_Check(o)) {
        str = Py_NewRef(o);
    } else if (PyType_Check(o)) {
        str = PyObject_GetAttrString(o, "__name__");        /* numpy.float32 */
    } else {
        str = PyObject_Str(o);                              /* dtype('float32'), torch.float32 */
    }
    const char *s = str ? utf8(str) : NULL;
    if (s && strncmp(s, "torch.", 6) == 0)
        s += 6;
    for (int i = 0; s && i < n; i++) {
        if (strcasecmp(s, names[i]) == 0) {
            Py_DECREF(str);
            *out = i;
            return 0;
        }
    }
    Py_XDECREF(str);
    PyErr_Clear();
    PyErr_Format(PyExc_ValueError, "unknown %s %R", what, o);
    return -1;
}

/* The read-time transform keywords into o (see the Loader's docstring). */
static int transform_options(shr_options *o, PyObject *flip, PyObject *rrc, PyObject *ratio,
                             PyObject *interpolation, PyObject *dtype, PyObject *layout,
                             PyObject *mean, PyObject *std)
{
    if (PyFloat_Check(flip)) {
        o->flip = 1;
        o->flip_p = PyFloat_AsDouble(flip);
        if (!(o->flip_p >= 0 && o->flip_p <= 1)) {
            PyErr_Format(PyExc_ValueError, "flip must be a bool or a probability in 0..1, not %R",
                         flip);
            return -1;
        }
    } else if (flag_named(flip, "flip (a bool or a probability)", &o->flip) < 0) {
        return -1;
    }
    if (rrc != Py_None && rrc != Py_False) {
        o->rrc = 1;
        if (rrc != Py_True && float_pair(rrc, "rrc", o->rrc_scale) < 0)
            return -1;
    }
    if (ratio != Py_None) {
        if (!o->rrc) {
            PyErr_SetString(PyExc_ValueError, "ratio is the RandomResizedCrop's: give rrc too");
            return -1;
        }
        if (float_pair(ratio, "ratio", o->rrc_ratio) < 0)
            return -1;
    }
    int v;
    static const char *const filters[] = {"nearest", "box", "bilinear", "hamming", "bicubic",
                                          "lanczos"};
    if (interpolation != Py_None) {
        if (choose(interpolation, "interpolation (nearest, box, bilinear, hamming, bicubic or "
                   "lanczos)", filters, 6, &v) < 0)
            return -1;
        o->filter = (shr_filter)v;
    }
    static const char *const dtypes[] = {"uint8", "float32", "float16"};
    if (dtype != Py_None) {
        if (choose(dtype, "dtype (uint8, float32 or float16)", dtypes, 3, &v) < 0)
            return -1;
        o->dtype = (shr_dtype)v;
    }
    static const char *const layouts[] = {"NHWC", "NCHW"};
    if (layout != Py_None) {
        if (choose(layout, "layout (NHWC or NCHW)", layouts, 2, &v) < 0)
            return -1;
        o->layout = (shr_layout)v;
    }
    int dataset_mean = PyUnicode_Check(mean) && str_is(mean, "dataset");
    if (dataset_mean) {
        if (std != Py_None && !(PyUnicode_Check(std) &&
                                str_is(std, "dataset"))) {
            PyErr_SetString(PyExc_ValueError, "mean='dataset' takes the dataset's std too: "
                            "leave std out");
            return -1;
        }
        o->normalize = SHR_NORM_DATASET;
    } else if (mean != Py_None || std != Py_None) {
        if (mean == Py_None || std == Py_None) {
            PyErr_SetString(PyExc_ValueError, "give both mean and std (or mean='dataset')");
            return -1;
        }
        if (channel_values(mean, "mean", o->mean) < 0 || channel_values(std, "std", o->std) < 0)
            return -1;
        o->normalize = SHR_NORM_GIVEN;
    }
    if (o->normalize != SHR_NORM_NONE && dtype == Py_None)
        o->dtype = SHR_DTYPE_F32;       /* normalised values need floats */
    return 0;
}

static PyObject *Loader_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    PyTypeObject *t = loader_class(type);
    if (!t)
        return NULL;
    allocfunc alloc = (allocfunc)PyType_GetSlot(t, Py_tp_alloc);
    return alloc(t, 0);
}

static int Loader_init(LoaderObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"path", "batch_size", "shuffle", "seed", "threads", "rank", "world",
                             "drop_last", "size", "random_crop", "flip", "access", "framework",
                             "return_indices", "order", "prefetch", "pin_memory", "uneven",
                             "quasi_window", "rrc", "ratio", "interpolation", "dtype", "layout",
                             "mean", "std", "return_params", "on_error", "verify_samples",
                             "return_recovery", "jitter_brightness", "jitter_contrast",
                             "jitter_saturation", "jitter_hue", "grayscale_p", "erase_p",
                             "erase_scale", "erase_ratio", "erase_value", "rotation_degrees",
                             "affine_degrees", "affine_translate", "affine_scale",
                             "affine_shear", "aug_interpolation", "aug_fill", "auto_augment",
                             "aa_num_ops", "aa_magnitude", "aa_bins", "targets",
                             "min_box_area_fraction", NULL};
    PyObject *path, *batch_size = NULL, *shuffle = Py_False, *seed = NULL, *threads = Py_None,
             *rank = Py_None, *world = Py_None, *drop_last = Py_False, *size = Py_None,
             *random_crop = Py_False, *flip = Py_False, *access = NULL, *framework = NULL,
             *return_indices = Py_False, *order = Py_None, *prefetch = Py_None,
             *pin_memory = Py_True, *uneven = Py_None, *quasi_window = NULL, *rrc = Py_None,
             *ratio = Py_None, *interpolation = Py_None, *dtype = Py_None, *layout = Py_None,
             *mean = Py_None, *std = Py_None, *return_params = Py_False, *on_error = Py_None,
             *verify_samples = Py_False, *return_recovery = Py_False;
    /* the read-time augmentations, in the C library's terms (the package's Loader takes
     * torchvision's forms and passes these) */
    PyObject *jit[4] = {Py_None, Py_None, Py_None, Py_None}, *gray_p = Py_None,
             *erase_p = Py_None, *erase_scale = Py_None, *erase_ratio = Py_None,
             *erase_value = Py_None, *rot = Py_None, *aff[4] = {Py_None, Py_None, Py_None, Py_None},
             *aug_interp = Py_None, *aug_fill = Py_None, *auto_aug = Py_None,
             *aa[3] = {Py_None, Py_None, Py_None}, *targets = Py_False, *min_box = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw,
                                     "O|OOOOOOOOOOOOOOOOOOOOOOOOOOOOO$OOOOOOOOOOOOOOOOOOOOOO:Loader",
                                     kwlist,
                                     &path, &batch_size, &shuffle, &seed, &threads, &rank, &world,
                                     &drop_last, &size, &random_crop, &flip, &access, &framework,
                                     &return_indices, &order, &prefetch, &pin_memory, &uneven,
                                     &quasi_window, &rrc, &ratio, &interpolation, &dtype, &layout,
                                     &mean, &std, &return_params, &on_error, &verify_samples,
                                     &return_recovery, &jit[0], &jit[1], &jit[2], &jit[3],
                                     &gray_p, &erase_p, &erase_scale, &erase_ratio,
                                     &erase_value, &rot, &aff[0], &aff[1], &aff[2], &aff[3],
                                     &aug_interp, &aug_fill, &auto_aug, &aa[0], &aa[1], &aa[2],
                                     &targets, &min_box))
        return -1;
    if (self->ring) {
        PyErr_SetString(PyExc_RuntimeError, "a Loader cannot be initialised twice");
        return -1;
    }
    shr_options *o = &self->o;
    shr_options_init(o);
    int v;
    if (batch_size && to_u32(batch_size, "batch_size", 1, &o->batch_size) < 0)
        return -1;
    if (flag_named(shuffle, "shuffle", &v) < 0)
        return -1;
    o->order = v ? SHR_ORDER_RANDOM : SHR_ORDER_SEQUENTIAL;
    if (order != Py_None) {
        const char *s = PyUnicode_Check(order) ? utf8(order) : NULL;
        if (s && strcmp(s, "sequential") == 0)
            o->order = SHR_ORDER_SEQUENTIAL;
        else if (s && strcmp(s, "random") == 0)
            o->order = SHR_ORDER_RANDOM;
        else if (s && strcmp(s, "quasi") == 0)
            o->order = SHR_ORDER_QUASI;
        else {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "order must be 'sequential', 'random' or 'quasi', "
                             "not %R", order);
            return -1;
        }
    }
    if (seed && to_u64(seed, "seed", &o->seed) < 0)
        return -1;
    if (threads == Py_None)
        o->threads = (uint32_t)default_threads();
    else if (to_u32(threads, "threads", 1, &o->threads) < 0)
        return -1;
    if (default_share(rank, world, &self->rank, &self->world) < 0)
        return -1;
    if (flag_named(drop_last, "drop_last", &o->drop_last) < 0)
        return -1;
    if (size != Py_None) {
        if (PyLong_Check(size)) {
            if (to_u32(size, "size", 1, &o->height) < 0)
                return -1;
            o->width = o->height;
        } else {
            PyObject *h, *w;
            if (!PyTuple_Check(size) || PyTuple_Size(size) != 2) {
                PyErr_Format(PyExc_ValueError, "size must be an int or a (height, width) tuple, "
                             "not %R", size);
                return -1;
            }
            h = PyTuple_GetItem(size, 0);
            w = PyTuple_GetItem(size, 1);
            if (to_u32(h, "size height", 1, &o->height) < 0 ||
                to_u32(w, "size width", 1, &o->width) < 0)
                return -1;
        }
    }
    if (flag_named(random_crop, "random_crop", &o->random_crop) < 0 ||
        transform_options(o, flip, rrc, ratio, interpolation, dtype, layout, mean, std) < 0)
        return -1;
    if (flag_named(return_params, "return_params", &self->return_params) < 0)
        return -1;
    static const char *const jit_names[4] = {"jitter_brightness", "jitter_contrast",
                                             "jitter_saturation", "jitter_hue"};
    double *jit_dst[4] = {o->jitter_brightness, o->jitter_contrast, o->jitter_saturation,
                          o->jitter_hue};
    for (int k = 0; k < 4; k++)
        if (jit[k] != Py_None && float_pair(jit[k], jit_names[k], jit_dst[k]) < 0)
            return -1;
    if (gray_p != Py_None && (o->grayscale_p = PyFloat_AsDouble(gray_p)) == -1.0 &&
        PyErr_Occurred())
        return -1;
    if (erase_p != Py_None && (o->erase_p = PyFloat_AsDouble(erase_p)) == -1.0 &&
        PyErr_Occurred())
        return -1;
    if ((erase_scale != Py_None && float_pair(erase_scale, "erase_scale", o->erase_scale) < 0) ||
        (erase_ratio != Py_None && float_pair(erase_ratio, "erase_ratio", o->erase_ratio) < 0) ||
        (erase_value != Py_None && channel_values(erase_value, "erase_value", o->erase_value) < 0))
        return -1;
    if (rot != Py_None) {
        o->rotation = 1;
        if (float_pair(rot, "rotation_degrees", o->rotation_degrees) < 0)
            return -1;
    }
    if (aff[0] != Py_None || aff[1] != Py_None || aff[2] != Py_None || aff[3] != Py_None) {
        o->affine = 1;
        if ((aff[0] != Py_None && float_pair(aff[0], "affine_degrees", o->affine_degrees) < 0) ||
            (aff[1] != Py_None &&
             float_pair(aff[1], "affine_translate", o->affine_translate) < 0) ||
            (aff[2] != Py_None && float_pair(aff[2], "affine_scale", o->affine_scale) < 0))
            return -1;
        if (aff[3] != Py_None) {
            double lo[2], hi[2];
            PyObject *t = PySequence_Check(aff[3]) ? PySequence_Tuple(aff[3]) : NULL;
            int ok = t && PyTuple_Size(t) == 4;
            if (ok) {
                PyObject *a = PyTuple_GetSlice(t, 0, 2), *b = PyTuple_GetSlice(t, 2, 4);
                ok = a && b && float_pair(a, "affine_shear", lo) == 0 &&
                     float_pair(b, "affine_shear", hi) == 0;
                Py_XDECREF(a);
                Py_XDECREF(b);
            }
            Py_XDECREF(t);
            if (!ok) {
                if (!PyErr_Occurred())
                    PyErr_Format(PyExc_ValueError, "affine_shear must be (x min, x max, y min, "
                                 "y max), not %R", aff[3]);
                return -1;
            }
            o->affine_shear[0] = lo[0];
            o->affine_shear[1] = lo[1];
            o->affine_shear[2] = hi[0];
            o->affine_shear[3] = hi[1];
        }
    }
    if (aug_interp != Py_None) {
        int fi;
        static const char *const filters[] = {"nearest", "box", "bilinear"};
        if (choose(aug_interp, "augment interpolation (nearest or bilinear)", filters, 3, &fi) < 0)
            return -1;
        o->aug_interpolation = (shr_filter)fi;
    }
    if (aug_fill != Py_None) {
        float f[4];
        if (channel_values(aug_fill, "augment fill", f) < 0)
            return -1;
        for (int c = 0; c < 4; c++) {
            if (!(f[c] >= 0 && f[c] <= 255) || f[c] != (float)(int)f[c]) {
                PyErr_Format(PyExc_ValueError, "augment fill must be whole numbers 0..255, not %R",
                             aug_fill);
                return -1;
            }
            o->aug_fill[c] = (uint8_t)f[c];
        }
    }
    if (auto_aug != Py_None) {
        int pi;
        static const char *const policies[] = {"none", "trivialaugment_wide", "randaugment"};
        if (choose(auto_aug, "auto_augment (trivialaugment_wide or randaugment)", policies, 3,
                   &pi) < 0)
            return -1;
        o->auto_augment = (shr_auto_augment)pi;
    }
    if (flag_named(targets, "targets", &self->targets) < 0)
        return -1;
    if (min_box != Py_None &&
        (o->min_box_area_fraction = PyFloat_AsDouble(min_box)) == -1.0 && PyErr_Occurred())
        return -1;
    uint32_t *aa_dst[3] = {&o->aa_num_ops, &o->aa_magnitude, &o->aa_bins};
    static const char *const aa_names[3] = {"num_ops", "magnitude", "num_magnitude_bins"};
    for (int k = 0; k < 3; k++)
        if (aa[k] != Py_None && to_u32(aa[k], aa_names[k], 0, aa_dst[k]) < 0)
            return -1;
    if (on_error != Py_None) {
        const char *s = PyUnicode_Check(on_error) ? utf8(on_error) : NULL;
        if (s && strcmp(s, "fail") == 0)
            o->on_error = SHR_ON_ERROR_FAIL;
        else if (s && strcmp(s, "skip") == 0)
            o->on_error = SHR_ON_ERROR_SKIP;
        else if (s && strcmp(s, "substitute") == 0)
            o->on_error = SHR_ON_ERROR_SUBSTITUTE;
        else {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "on_error must be 'fail', 'skip' or 'substitute', "
                             "not %R", on_error);
            return -1;
        }
    }
    if (flag_named(verify_samples, "verify_samples", &o->verify_samples) < 0 ||
        flag_named(return_recovery, "return_recovery", &self->return_recovery) < 0)
        return -1;
    shr_access a;
    if (parse_access(access, &a) < 0)
        return -1;
    o->access = a;
    self->framework = FW_NUMPY;
    if (framework && framework != Py_None) {
        const char *s = PyUnicode_Check(framework) ? utf8(framework) : NULL;
        if (s && strcmp(s, "torch") == 0)
            self->framework = FW_TORCH;
        else if (!(s && strcmp(s, "numpy") == 0)) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "framework must be 'numpy' or 'torch', not %R",
                             framework);
            return -1;
        }
    }
    if (self->framework == FW_TORCH && import_torch() < 0)
        return -1;
    if (flag_named(return_indices, "return_indices", &self->return_indices) < 0)
        return -1;
    if (prefetch == Py_None) {
        /* one more than the library's default: while next() waits, the for loop's variables
         * still hold the previous batch */
        o->prefetch = o->threads + 3 > 65536 ? 65536 : o->threads + 3;
    } else if (to_u32(prefetch, "prefetch", 2, &o->prefetch) < 0) {
        return -1;
    }
    if (flag_named(pin_memory, "pin_memory", &v) < 0)
        return -1;
    o->pin = v ? SHR_PIN_AUTO : SHR_PIN_OFF;
    if (uneven != Py_None) {
        const char *s = PyUnicode_Check(uneven) ? utf8(uneven) : NULL;
        if (s && strcmp(s, "pad") == 0)
            o->uneven = SHR_UNEVEN_PAD;
        else if (s && strcmp(s, "drop") == 0)
            o->uneven = SHR_UNEVEN_DROP;
        else {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "uneven must be 'pad' or 'drop', not %R", uneven);
            return -1;
        }
    }
    if (quasi_window && to_u32(quasi_window, "quasi_window", 1, &o->quasi_window) < 0)
        return -1;
    PyObject *b = fs_path(path);
    if (!b)
        return -1;
    XSETREF(self->path_bytes, b);
    XSETREF(self->path, PyOS_FSPath(path));
    if (!self->path)
        return -1;
    self->epoch = 0;
    self->cursor = 0;
    if (o->pin == SHR_PIN_AUTO)
        prepare_torch_cuda();
    return open_ring(self, 0, 0, self->rank, self->world);
}

static void Loader_dealloc(LoaderObject *self)
{
    Py_XDECREF((PyObject *)self->ring);
    Py_XDECREF(self->path);
    Py_XDECREF(self->path_bytes);
    free_object((PyObject *)self);
}

static int loader_ready(const LoaderObject *self)
{
    if (!self->ring) {
        PyErr_SetString(g_state_error, "the Loader is not open (its __init__ failed or was not "
                        "called)");
        return -1;
    }
    return 0;
}

/* Batches an iteration started now would yield: the rest of the epoch after a resume (counted
 * from the resumed epoch's own batches after an elastic one), else a whole epoch. */
static uint64_t batches_left(const LoaderObject *self)
{
    uint64_t total = self->start ? self->start_nb : self->nb;
    return self->cursor < total ? total - self->cursor : 0;
}

static Py_ssize_t Loader_len(LoaderObject *self)
{
    if (loader_ready(self) < 0)
        return -1;
    /* during an iteration, what that iteration yields in all (a progress bar's total) */
    return (Py_ssize_t)(self->active ? self->iter_total : batches_left(self));
}

static PyObject *Loader_iter(LoaderObject *self)
{
    if (loader_ready(self) < 0)
        return NULL;
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "the Loader is being iterated by another thread");
        return NULL;
    }
    if (self->active) {
        /* the last iteration was abandoned: like a DataLoader, a new one is a new epoch */
        self->epoch++;
        self->cursor = 0;
        self->start = 0;
        self->active = 0;
    }
    /* open_ring lets the GIL go: no other thread may iterate or move the Loader meanwhile */
    self->busy = 1;
    int rc = sync_ring(self);
    self->busy = 0;
    if (rc < 0)
        return NULL;
    self->iter_total = batches_left(self);
    LoaderIterObject *it = PyObject_New(LoaderIterObject, LoaderIterType);
    if (!it)
        return NULL;
    it->loader = (LoaderObject *)Py_NewRef((PyObject *)self);
    it->gen = ++self->gen;
    it->done = 0;
    self->active = 1;
    return (PyObject *)it;
}

/* The arrays (or tensors) of batch b of ring: views of the ring buffer kept by a _Batch, or
 * copies when the caller already holds the most zero-copy batches allowed. */
static PyObject *deliver(LoaderObject *self, RingObject *ring, const shr_batch *b)
{
    BatchObject *base = PyObject_New(BatchObject, BatchType);
    if (!base) {
        shr_release(ring->r, b);
        return NULL;
    }
    base->ring = (RingObject *)Py_NewRef((PyObject *)ring);
    base->b = b;
    ring->held++;
    /* keep two buffers for the workers (see "Holding batches" at the top) */
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
    PyObject *img, *lab, *idx = NULL, *prm = NULL, *rec = NULL;
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
        img = view_copy(b->data, fmt, isz, 4, dims);
        lab = !img || self->targets ? NULL : view_copy(b->labels, "q", 8, 1, n1);
        if (img && want_idx)
            idx = view_copy(b->indices, "q", 8, 1, n1);
        self->copies++;
    } else {
        img = new_view(b->data, (PyObject *)base, fmt, isz, 4, dims);
        lab = !img || self->targets ? NULL : new_view(b->labels, (PyObject *)base, "q", 8, 1, n1);
        if (img && want_idx)
            idx = new_view(b->indices, (PyObject *)base, "q", 8, 1, n1);
    }
    if (img && self->targets) {
        /* (images, targets, ...): the labels of a detection dataset are -1, its targets say it */
        lab = b->target_offsets ? PyList_New(b->n) : NULL;
        if (!b->target_offsets && !PyErr_Occurred())
            PyErr_SetString(g_argument_error, "targets=True: this dataset has no targets (it "
                            "was not built with --coco or --yolo)");
        for (uint32_t i = 0; lab && i < b->n; i++) {
            shr_target t;
            PyObject *td = shr_batch_target(b, i, &t) == 0 ? target_dict(&t) : NULL;
            if (!td || PyList_SetItem(lab, i, td) < 0)
                Py_CLEAR(lab);
        }
    }
    if (lab && self->return_params) {
        /* a small copy: (n, 5) int64 columns x, y, w, h, flip */
        Py_ssize_t d2[2] = {b->n, 5};
        prm = view_copy(NULL, "q", 8, 2, d2);
        int64_t *row = prm ? (int64_t *)((ViewObject *)prm)->data : NULL;
        for (uint32_t i = 0; row && i < b->n; i++, row += 5) {
            const shr_params *p = &b->params[i];
            row[0] = p->x;
            row[1] = p->y;
            row[2] = p->w;
            row[3] = p->h;
            row[4] = p->flip;
        }
    }
    Py_DECREF(base);    /* the views hold it now; for copies this gives the buffer back */
    if (!img || !lab || (want_idx && !idx) || (self->return_params && !prm) ||
        (self->return_recovery && !rec))
        goto fail;
    /* (images, labels[, indices[, params]][, recovery]) */
    PyObject *out = PyTuple_New(2 + (idx != NULL) + (prm != NULL) + (rec != NULL));
    if (!out)
        goto fail;
    PyObject *parts[5] = {img, lab, idx, prm, rec};
    Py_ssize_t k = 0;
    for (int j = 0; j < 5; j++)
        if (parts[j])
            PyTuple_SetItem(out, k++, parts[j]);
    return wrap(out, self->framework == FW_TORCH);
fail:
    Py_XDECREF(img);
    Py_XDECREF(lab);
    Py_XDECREF(idx);
    Py_XDECREF(prm);
    Py_XDECREF(rec);
    return NULL;
}

static PyObject *LoaderIter_next(LoaderIterObject *it)
{
    LoaderObject *self = it->loader;
    if (it->done)
        return NULL;
    if (it->gen != self->gen || !self->active) {
        PyErr_SetString(PyExc_RuntimeError, "this Loader iterator is finished: a newer iteration "
                        "of the Loader (or set_epoch / load_state_dict) replaced it");
        return NULL;
    }
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "the Loader is being iterated by another thread");
        return NULL;
    }
    /* a forked child continues where the parent stood, with a reader of its own */
    if (self->ring->pid != getpid()) {
        self->busy = 1;
        int rc = sync_ring(self);
        self->busy = 0;
        if (rc < 0)
            return NULL;
    }
    RingObject *ring = (RingObject *)Py_NewRef((PyObject *)self->ring);
    /* batches whose copies are done go back; with a third buffer free for the workers the
     * batch about to come needs no copy (see "Holding batches") */
    if (drain_fenced(ring, ring->nslots > 3 ? ring->nslots - 3 : 0) < 0) {
        Py_DECREF(ring);
        return NULL;
    }
    const shr_batch *b = NULL;
    int rc;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    rc = shr_next(ring->r, &b);
    Py_END_ALLOW_THREADS
    self->busy = 0;
    PyObject *out = NULL;
    if (rc == SHR_EEND) {
        shr_state st = shr_get_state(ring->r);
        self->epoch = st.epoch;
        self->cursor = st.cursor;
        self->start = st.epoch == ring->start_epoch ? ring->start : 0;
        self->active = 0;
        it->done = 1;
    } else if (rc) {
        ring->failed = 1;
        self->active = 0;
        it->done = 1;
        raise_lib(rc, shr_last_error(ring->r));
    } else {
        self->epoch = b->epoch;
        self->cursor = b->number + 1;
        self->start = b->epoch == ring->start_epoch ? ring->start : 0;
        out = deliver(self, ring, b);
    }
    Py_DECREF(ring);
    return out;
}

static void LoaderIter_dealloc(LoaderIterObject *it)
{
    Py_XDECREF((PyObject *)it->loader);
    free_object((PyObject *)it);
}

static PyType_Slot LoaderIter_slots[] = {
    {Py_tp_doc, "One epoch of a Loader's batches (internal; made by iter(loader))."},
    {Py_tp_dealloc, LoaderIter_dealloc},
    {Py_tp_iter, PyObject_SelfIter},
    {Py_tp_iternext, LoaderIter_next},
    {0, NULL},
};

static PyType_Spec LoaderIter_spec = {
    .name = "shardread._LoaderIterator",
    .basicsize = sizeof(LoaderIterObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = LoaderIter_slots,
};

static PyObject *Loader_set_epoch(LoaderObject *self, PyObject *arg)
{
    uint64_t e;
    if (to_u64(arg, "epoch", &e) < 0)
        return NULL;
    if (e > MAX_EPOCH)
        return PyErr_Format(PyExc_ValueError, "epoch must be below 2**63, not %R", arg);
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "the Loader is being iterated by another thread");
        return NULL;
    }
    /* a state just loaded for this epoch keeps its cursor: load_state_dict(s); set_epoch(e) */
    if (self->active || e != self->epoch) {
        self->epoch = e;
        self->cursor = 0;
        self->start = 0;
    }
    self->active = 0;
    Py_RETURN_NONE;
}

static const char *const state_keys[] = {"seed", "epoch", "cursor", "batch_size", "rank", "world",
                                         "order", "drop_last", "uneven", "samples"};

static const char *order_name(shr_order o)
{
    return o == SHR_ORDER_RANDOM ? "random" : o == SHR_ORDER_QUASI ? "quasi" : "sequential";
}

static uint64_t loader_samples(const LoaderObject *self)
{
    return self->samples;
}

/* Positions of the epoch's global sequence consumed by all ranks when every rank stands where
 * this one does (shr_state.consumed of a reader at this position). */
static uint64_t loader_consumed(const LoaderObject *self, uint64_t start, uint64_t cursor)
{
    uint64_t n = self->samples, nb = start ? self->start_nb : self->nb;
    if (cursor >= nb || start >= n)
        return n;
    uint64_t step = cursor * (uint64_t)self->o.batch_size * self->world;
    return step >= n - start ? n : start + step;
}

static PyObject *Loader_state_dict(LoaderObject *self, PyObject *unused)
{
    if (loader_ready(self) < 0)
        return NULL;
    return Py_BuildValue("{s:K,s:K,s:K,s:I,s:I,s:I,s:s,s:O,s:s,s:K,s:K,s:K}", state_keys[0],
                         (unsigned long long)self->o.seed, state_keys[1],
                         (unsigned long long)self->epoch, state_keys[2],
                         (unsigned long long)self->cursor, state_keys[3], self->o.batch_size,
                         state_keys[4], self->rank, state_keys[5], self->world, state_keys[6],
                         order_name(self->o.order), state_keys[7],
                         self->o.drop_last ? Py_True : Py_False, state_keys[8],
                         self->o.uneven == SHR_UNEVEN_DROP ? "drop" : "pad", state_keys[9],
                         (unsigned long long)loader_samples(self), "consumed",
                         (unsigned long long)loader_consumed(self, self->start, self->cursor),
                         "start", (unsigned long long)self->start);
}

static PyObject *Loader_load_state_dict(LoaderObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"state", "strict", NULL};
    PyObject *state;
    int strict = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|p:load_state_dict", kwlist, &state, &strict))
        return NULL;
    if (loader_ready(self) < 0)
        return NULL;
    if (!PyDict_Check(state))
        return type_error(PyExc_TypeError, "load_state_dict takes the dict of state_dict(), not ",
                          state, "");
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "the Loader is being iterated by another thread");
        return NULL;
    }
    PyObject *mine = Loader_state_dict(self, NULL);
    if (!mine)
        return NULL;
    uint64_t seed = 0, epoch = 0, cursor = 0, consumed = 0, start = 0;
    uint64_t *dst[3] = {&seed, &epoch, &cursor};
    PyObject *res = NULL;
    /* With `consumed` (states saved since elastic resumption exists) any rank of any world
     * size resumes from the positions consumed; without it, only the same share can. */
    PyObject *cv = PyDict_GetItemString(state, "consumed");
    if (cv && to_u64(cv, "consumed", &consumed) < 0)
        goto leave;
    if (cv && consumed > self->samples) {
        PyErr_Format(PyExc_ValueError, "state consumed %llu is past the epoch's %llu samples",
                     (unsigned long long)consumed, (unsigned long long)self->samples);
        goto leave;
    }
    int elastic = 0;
    for (size_t k = 0; k < sizeof state_keys / sizeof *state_keys; k++) {
        PyObject *v = PyDict_GetItemString(state, state_keys[k]);
        if (!v) {
            PyErr_Format(PyExc_ValueError, "state has no '%s'", state_keys[k]);
            goto leave;
        }
        if (k < 3) {
            if (to_u64(v, state_keys[k], dst[k]) < 0)
                goto leave;
            continue;
        }
        int share = strcmp(state_keys[k], "rank") == 0 || strcmp(state_keys[k], "world") == 0;
        /* the rest must be as this Loader has them, or the batches would differ */
        int eq = PyObject_RichCompareBool(v, PyDict_GetItemString(mine, state_keys[k]), Py_EQ);
        if (eq < 0)
            goto leave;
        if (!eq && share && cv) {
            elastic = 1;
            continue;
        }
        if (!eq) {
            PyErr_Format(PyExc_ValueError, "state was saved with %s=%R, this Loader has %s=%R: "
                         "it would not resume the same batches", state_keys[k], v, state_keys[k],
                         PyDict_GetItemString(mine, state_keys[k]));
            goto leave;
        }
    }
    /* the state's own numbers must agree with each other (a hand-edited or damaged state) */
    uint32_t st_rank = 0, st_world = 0, st_bs = 0;
    if (to_u32(PyDict_GetItemString(state, "world"), "state world", 1, &st_world) < 0 ||
        to_u32(PyDict_GetItemString(state, "rank"), "state rank", 0, &st_rank) < 0 ||
        to_u32(PyDict_GetItemString(state, "batch_size"), "state batch_size", 1, &st_bs) < 0)
        goto leave;
    if (st_rank >= st_world) {
        PyErr_Format(PyExc_ValueError, "state rank %u is not below its world %u", st_rank,
                     st_world);
        goto leave;
    }
    if (epoch > MAX_EPOCH) {
        PyErr_Format(PyExc_ValueError, "state epoch %llu is past the last epoch a Loader counts "
                     "(2**63 - 1)", (unsigned long long)epoch);
        goto leave;
    }
    PyObject *sv = PyDict_GetItemString(state, "start");
    if (cv && sv) {
        uint64_t st_start, n = self->samples;
        if (to_u64(sv, "state start", &st_start) < 0)
            goto leave;
        uint64_t step = cursor * (uint64_t)st_bs * st_world;
        uint64_t want = st_start >= n || (st_bs && step / st_bs / st_world != cursor) ||
                                step >= n - st_start ? n : st_start + step;
        if (consumed != want && !(consumed == n && cursor > 0)) {
            PyErr_Format(PyExc_ValueError, "state is inconsistent: cursor %llu from position "
                         "%llu at batch size %u on %u rank(s) means %llu positions consumed, "
                         "not %llu", (unsigned long long)cursor, (unsigned long long)st_start,
                         st_bs, st_world, (unsigned long long)want,
                         (unsigned long long)consumed);
            goto leave;
        }
    }
    if (seed != self->o.seed && strict) {
        PyErr_Format(PyExc_ValueError, "state was saved with seed=%llu, this Loader has "
                     "seed=%llu: it would read another order (load_state_dict(state, "
                     "strict=False) switches to the state's seed)", (unsigned long long)seed,
                     (unsigned long long)self->o.seed);
        goto leave;
    }
    if (!elastic && cursor > self->nb) {
        PyErr_Format(PyExc_ValueError, "state cursor %llu is past the epoch's %llu batches",
                     (unsigned long long)cursor, (unsigned long long)self->nb);
        goto leave;
    }
    /* the same share resumes by cursor unless the state's epoch was itself resumed elastically
     * (its cursor then counts from the positions consumed at that epoch's start) */
    if (cv && !elastic && loader_consumed(self, 0, cursor) != consumed)
        elastic = 1;
    if (elastic) {
        start = consumed;
        cursor = 0;
    }
    if (seed != self->o.seed || start) {
        /* another seed reads another order, and a resumed epoch's batch count comes from its
         * reader: open one now */
        uint64_t old[4] = {self->o.seed, self->epoch, self->cursor, self->start};
        self->o.seed = seed;
        self->epoch = epoch;
        self->cursor = cursor;
        self->start = start;
        self->busy = 1;
        int rc = open_ring(self, epoch, cursor, self->rank, self->world);
        self->busy = 0;
        if (rc < 0) {
            self->o.seed = old[0];
            self->epoch = old[1];
            self->cursor = old[2];
            self->start = old[3];
            goto leave;
        }
    }
    self->epoch = epoch;
    self->cursor = cursor;
    self->start = start;
    self->active = 0;
    res = Py_NewRef(Py_None);
leave:
    Py_DECREF(mine);
    return res;
}

static PyObject *Loader_get_info(LoaderObject *self, void *closure)
{
    if (loader_ready(self) < 0)
        return NULL;
    shr_info in;
    shr_get_info(self->ring->r, &in);
    uint32_t nc = in.channels < 3 ? in.channels : 3;
    return Py_BuildValue("{s:K,s:I,s:(III),s:s,s:s,s:N,s:N,s:K,s:K,s:K,s:K,s:O,s:O}", "samples",
                         (unsigned long long)in.samples, "num_classes", in.classes, "shape",
                         in.height, in.width, in.channels, "dtype",
                         in.dtype == SHR_DTYPE_F32 ? "float32"
                         : in.dtype == SHR_DTYPE_F16 ? "float16" : "uint8",
                         "layout", in.layout == SHR_LAYOUT_NCHW ? "NCHW" : "NHWC", "mean",
                         double_list(in.mean, nc), "std", double_list(in.std, nc), "batch_bytes",
                         (unsigned long long)in.batch_bytes, "ring_bytes",
                         (unsigned long long)in.ring_bytes, "batches",
                         (unsigned long long)self->nb, "samples_per_epoch",
                         (unsigned long long)shr_samples_per_epoch(self->ring->r), "pinned",
                         in.pinned ? Py_True : Py_False, "targets",
                         in.targets ? Py_True : Py_False);
}

#define LOADER_U(name, expr)                                                                      \
    static PyObject *Loader_get_##name(LoaderObject *self, void *closure)                         \
    {                                                                                              \
        return PyLong_FromUnsignedLongLong((unsigned long long)(expr));                            \
    }
LOADER_U(batch_size, self->o.batch_size)
LOADER_U(threads, self->o.threads)
LOADER_U(prefetch, self->o.prefetch)
LOADER_U(rank, self->rank)
LOADER_U(world, self->world)
LOADER_U(epoch, self->epoch)
LOADER_U(seed, self->o.seed)
LOADER_U(copies, self->copies)
LOADER_U(held, self->ring ? self->ring->held : 0)
LOADER_U(fenced, self->ring ? self->ring->nfenced : 0)

static PyObject *Loader_get_path(LoaderObject *self, void *closure)
{
    return Py_NewRef(self->path ? self->path : Py_None);
}

static PyObject *Loader_repr(LoaderObject *self)
{
    if (!self->ring)
        return PyUnicode_FromString("<shardread.Loader (not open)>");
    return PyUnicode_FromFormat("<shardread.Loader %R: batch_size %u, %s order, %llu batches per "
                                "epoch, rank %u of %u>", self->path, self->o.batch_size,
                                order_name(self->o.order), (unsigned long long)self->nb,
                                self->rank, self->world);
}

static PyObject *Loader_recovery(LoaderObject *self, PyObject *unused)
{
    (void)unused;
    shr_recovery rec = shr_get_recovery(self->ring ? self->ring->r : NULL);
    const char *last = self->ring && (rec.replaced || rec.skipped) ? shr_last_error(self->ring->r)
                                                                   : "";
    return Py_BuildValue("{s:K,s:K,s:s}", "replaced", (unsigned long long)rec.replaced,
                         "skipped", (unsigned long long)rec.skipped, "last", last);
}

static PyMethodDef Loader_methods[] = {
    {"recovery", (PyCFunction)Loader_recovery, METH_NOARGS,
     "recovery() -> dict\n"
     "\n"
     "What on_error='skip' or 'substitute' did since the current iteration's reader\n"
     "started (a new one starts with set_epoch and load_state_dict): {'replaced': n,\n"
     "'skipped': n, 'last': message of the latest, naming the file and the sample}.\n"
     "A skipped sample makes its batch shorter; a substitute is a deterministic\n"
     "other sample of the same shape (see shardread.h, \"Read-time recovery\")."},
    {"set_epoch", (PyCFunction)Loader_set_epoch, METH_O,
     "set_epoch(epoch)\n"
     "\n"
     "Make the next iteration read this epoch (its order comes from seed and epoch).\n"
     "Without it, each iteration reads the epoch after the last. An iteration under\n"
     "way is abandoned. After load_state_dict of a state in this same epoch the\n"
     "loaded cursor is kept, so load_state_dict(s); set_epoch(s['epoch']) resumes\n"
     "mid-epoch."},
    {"state_dict", (PyCFunction)Loader_state_dict, METH_NOARGS,
     "state_dict() -> dict\n"
     "\n"
     "Where the Loader stands, as a small JSON-serialisable dict: seed, epoch and\n"
     "cursor (the next batch's number in the epoch; equal to len(loader) when the\n"
     "epoch's batches have all been delivered), plus the options that must match to\n"
     "resume (batch_size, rank, world, order, drop_last, uneven, samples), and\n"
     "consumed: the positions of the epoch's global order read by all ranks\n"
     "together, assuming every rank has read as many batches as this one (save\n"
     "states at the same step on every rank). A Loader given it with load_state_dict\n"
     "yields exactly the batches that were left."},
    {"load_state_dict", (PyCFunction)(void (*)(void))Loader_load_state_dict,
     METH_VARARGS | METH_KEYWORDS,
     "load_state_dict(state, strict=True)\n"
     "\n"
     "Continue from a state_dict(): the next iteration yields the rest of that\n"
     "epoch, batch for batch, then iterations go on with the following epochs. A\n"
     "state with 'consumed' also resumes on another world size or rank: the epoch's\n"
     "samples not yet consumed are shared among the new ranks, each read exactly\n"
     "once (plus uneven='pad''s declared padding), and that epoch is shorter than\n"
     "len(loader); states without it (older ones) need the same rank and world.\n"
     "ValueError when the state was saved with other options (batch size, order,\n"
     "...) or for another dataset size, or when its numbers disagree with each\n"
     "other; with strict=True (the default) also when it was saved with another seed\n"
     "(strict=False switches to the state's seed)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Loader_getset[] = {
    {"info", (getter)Loader_get_info, NULL,
     "The batches' facts as a dict: samples (in the dataset), num_classes, shape\n"
     "(height, width, channels of each sample in a batch), dtype and layout of the\n"
     "images, mean and std (the dataset's, per channel, 0..255), batch_bytes,\n"
     "ring_bytes (all the ring's buffers), batches and samples_per_epoch (this\n"
     "rank's).",
     NULL},
    {"batch_size", (getter)Loader_get_batch_size, NULL, "Samples per batch.", NULL},
    {"threads", (getter)Loader_get_threads, NULL, "Reader worker threads.", NULL},
    {"prefetch", (getter)Loader_get_prefetch, NULL, "Batch buffers in the ring.", NULL},
    {"rank", (getter)Loader_get_rank, NULL, "This process's rank.", NULL},
    {"world", (getter)Loader_get_world, NULL, "The number of ranks.", NULL},
    {"epoch", (getter)Loader_get_epoch, NULL, "The epoch the next batch belongs to.", NULL},
    {"seed", (getter)Loader_get_seed, NULL, "Seed of the orders and augmentation draws.", NULL},
    {"copies", (getter)Loader_get_copies, NULL,
     "Batches delivered as copies because prefetch - 2 zero-copy batches were already held.", NULL},
    {"held", (getter)Loader_get_held, NULL,
     "Zero-copy batches of the current reader still alive in Python (each keeps a ring buffer).",
     NULL},
    {"fenced", (getter)Loader_get_fenced, NULL,
     "Pinned batches of the current reader collected by Python whose device copies\n"
     "may still be queued: their buffers go back to the workers once those copies\n"
     "are done.", NULL},
    {"path", (getter)Loader_get_path, NULL, "The dataset directory.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static const char loader_doc[] =
    "Loader(path, batch_size=256, shuffle=False, seed=0, threads=None, rank=None, world=None,\n"
    "       drop_last=False, size=None, random_crop=False, flip=False, access='mmap',\n"
    "       framework='numpy', return_indices=False, order=None, prefetch=None,\n"
    "       pin_memory=True, uneven='pad', quasi_window=4, rrc=None, ratio=None,\n"
    "       interpolation='bilinear', dtype='uint8', layout='NHWC', mean=None, std=None,\n"
    "       return_params=False, on_error='fail', verify_samples=False,\n"
    "       return_recovery=False)\n"
    "\n"
    "Batches of a shardc dataset, read ahead by worker threads into a ring of\n"
    "buffers:\n"
    "\n"
    "    for images, labels in shardread.Loader('ds', batch_size=256, shuffle=True):\n"
    "        ...   # images (B, H, W, C) uint8, labels (B,) int64\n"
    "\n"
    "Each iteration is one epoch; the next iteration starts the next epoch (a\n"
    "random order is a fresh permutation per epoch, from seed and epoch). The\n"
    "batches of an epoch depend only on the dataset, the options, seed and epoch,\n"
    "never on threads or timing.\n"
    "\n"
    "shuffle: random order (order='quasi' reads shard windows, for data larger than\n"
    "RAM). threads: worker threads (default: the cores, at most 4). rank/world:\n"
    "this process's share; by default torch.distributed's when it is initialised,\n"
    "else the RANK and WORLD_SIZE environment variables, else 0 of 1; every rank\n"
    "gets the same number of batches (uneven='pad' repeats samples, 'drop' drops\n"
    "them). drop_last: drop a short last batch. size: an int or (height, width);\n"
    "every sample is center-cropped (random_crop: at a random offset) or\n"
    "zero-padded to it; needed when samples vary in size. flip: mirror with\n"
    "probability 1/2 (True) or the given probability (a float).\n"
    "\n"
    "Read-time transforms, done by the worker threads: rrc=True (scale (0.08, 1.0))\n"
    "or rrc=(min, max) draws torchvision's RandomResizedCrop box for every sample\n"
    "of every epoch (ratio=(min, max), default (3/4, 4/3)) and resizes it to size\n"
    "with interpolation ('bilinear' by default, or 'nearest', 'box', 'hamming',\n"
    "'bicubic', 'lanczos'): the pixels equal torchvision's F.resized_crop of the\n"
    "stored image, mirrored when flipped. dtype 'uint8', 'float32' or 'float16' (or\n"
    "the numpy/torch dtype), layout 'NHWC' or 'NCHW'. mean and std: per-channel\n"
    "normalisation (x - mean) / std on the 0..255 scale (torchvision's [0.485,\n"
    "0.456, 0.406] is [123.675, 116.28, 103.53] here), or mean='dataset' for the\n"
    "dataset's own statistics; normalising implies float32 unless dtype says\n"
    "float16. return_params: batches become (images, labels, indices, params),\n"
    "params an (n, 5) int64 array of each sample's box x, y, w, h in the stored\n"
    "image and flip (0 or 1).\n"
    "\n"
    "access: 'mmap', 'pread' (files that may change, network filesystems) or\n"
    "'direct' (O_DIRECT). framework='torch': torch tensors (uint8 NHWC, int64)\n"
    "sharing the batch memory. return_indices: a third element, the dataset\n"
    "indices. prefetch: ring buffers (default threads + 3). pin_memory: ring\n"
    "buffers in CUDA pinned memory where a device exists, so\n"
    "images.cuda(non_blocking=True) is an asynchronous copy.\n"
    "\n"
    "on_error: what a sample that cannot be read (or, with verify_samples=True,\n"
    "whose pixels do not match their stored hash) does: 'fail' (default) raises,\n"
    "'skip' leaves it out of a shorter batch, 'substitute' puts a deterministic\n"
    "other sample in its place (chosen from seed, epoch and index); recovery()\n"
    "reports what was replaced or skipped. return_recovery: a last element, the\n"
    "list of this batch's samples not delivered as planned, one (index, position,\n"
    "code, reason) tuple each: the dataset index that could not be read, the\n"
    "position in the batch of its substitute (-1 when skipped), the error code and\n"
    "its description (e.g. a content hash mismatch); empty for a clean batch.\n"
    "\n"
    "Batches are zero-copy views of the ring buffers: a buffer is reused once every\n"
    "array and tensor of its batch is collected. Up to prefetch - 2 batches may be\n"
    "kept this way; a batch delivered while that many are kept is copied instead\n"
    "(see copies), so keeping batches never blocks the reader nor changes them.\n"
    "\n"
    "len(loader) is the batches per epoch of this rank. state_dict() /\n"
    "load_state_dict() resume exactly, also on another world size (the rest of the\n"
    "epoch is shared among the new ranks); set_epoch(e) picks the epoch the next\n"
    "iteration reads. Once torch is imported, a Loader is a\n"
    "torch.utils.data.IterableDataset: DataLoader(loader, batch_size=None) works\n"
    "(num_workers=0 is the right choice: the Loader has its own threads; with\n"
    "workers, each reads a disjoint part of the share). The GIL is released while\n"
    "waiting for a batch. Errors: shardread.Error subclasses (CorruptError names\n"
    "the damaged file), FileNotFoundError for a missing dataset, ValueError for bad\n"
    "arguments.";

static PyType_Slot Loader_slots[] = {
    {Py_tp_doc, (void *)loader_doc},
    {Py_tp_new, Loader_new},
    {Py_tp_init, Loader_init},
    {Py_tp_dealloc, Loader_dealloc},
    {Py_tp_repr, Loader_repr},
    {Py_tp_iter, Loader_iter},
    {Py_sq_length, Loader_len},
    {Py_tp_methods, Loader_methods},
    {Py_tp_getset, Loader_getset},
    {0, NULL},
};

static PyType_Spec Loader_spec = {
    .name = "shardread.Loader",
    .basicsize = sizeof(LoaderObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .slots = Loader_slots,
};

/* ======================================================================================== */
/* the module                                                                                */
/* ======================================================================================== */

static PyObject *new_error(PyObject *m, const char *name, PyObject *bases, const char *doc)
{
    char full[64];
    snprintf(full, sizeof full, "shardread.%s", name);
    PyObject *e = PyErr_NewExceptionWithDoc(full, doc, bases, NULL);
    if (!e)
        return NULL;
    if (PyModule_AddObjectRef(m, name, e) < 0) {
        Py_DECREF(e);
        return NULL;
    }
    return e;
}

static PyObject *set_wrap(PyObject *m, PyObject *fn)
{
    if (fn != Py_None && !PyCallable_Check(fn))
        return PyErr_Format(PyExc_TypeError, "_set_wrap takes a callable or None");
    XSETREF(g_wrap, fn == Py_None ? NULL : Py_NewRef(fn));
    Py_RETURN_NONE;
}

static PyObject *set_fence(PyObject *m, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"fence", "pinned_only", NULL};
    PyObject *fn;
    int pinned_only = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|p:_set_fence", kwlist, &fn, &pinned_only))
        return NULL;
    if (fn != Py_None && !PyCallable_Check(fn))
        return PyErr_Format(PyExc_TypeError, "_set_fence takes a callable or None");
    XSETREF(g_fence, fn == Py_None ? NULL : Py_NewRef(fn));
    g_fence_all = !pinned_only;
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"_set_wrap", (PyCFunction)set_wrap, METH_O,
     "_set_wrap(fn)\n"
     "\n"
     "fn(parts, torch) -> tuple turns a delivered tuple, whose arrays are _View\n"
     "objects (buffer protocol), into the tuple given to the user (internal: the\n"
     "package installs it)."},
    {"_set_fence", (PyCFunction)(void (*)(void))set_fence, METH_VARARGS | METH_KEYWORDS,
     "_set_fence(fence, pinned_only=True)\n"
     "\n"
     "fence() -> an event (query(), synchronize()) recorded on the current device\n"
     "stream, or None; a pinned batch collected by Python goes back to the reader\n"
     "only once the event recorded then has completed (internal: the package\n"
     "installs torch's; pinned_only=False fences every batch, for tests)."},
    {NULL, NULL, 0, NULL},
};

static PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "shardread._shardread",
    .m_doc = "Read datasets written by shardc (libshardread) from Python, numpy and PyTorch.\n"
             "\n"
             "    import shardread\n"
             "    ds = shardread.Dataset('ds')              # map-style: ds[i] -> (image, label)\n"
             "    loader = shardread.Loader('ds', batch_size=256, shuffle=True, threads=4)\n"
             "    for images, labels in loader:             # (B, H, W, C) uint8, (B,) int64\n"
             "        ...\n"
             "\n"
             "Errors are shardread.Error subclasses: CorruptError (a damaged file, named in\n"
             "the message), ArgumentError (a ValueError), ShapeError, NotFoundError (a\n"
             "FileNotFoundError), ReadError (an OSError), StateError, UnsupportedError.",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__shardread(void);

PyMODINIT_FUNC PyInit__shardread(void)
{
    struct {
        PyTypeObject **type;
        PyType_Spec *spec;
    } types[] = {{&DatasetType, &Dataset_spec}, {&RingType, &Ring_spec},
                 {&BatchType, &Batch_spec},     {&ViewType, &View_spec},
                 {&LoaderType, &Loader_spec},   {&LoaderIterType, &LoaderIter_spec}};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        if (!*types[i].type && !(*types[i].type = (PyTypeObject *)PyType_FromSpec(types[i].spec)))
            return NULL;
    }
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    PyObject *b = NULL;
    if (!(g_error = new_error(m, "Error", NULL,
                              "Base class of the errors of libshardread. .code is the library's "
                              "error code,\n.reason its name; the message names the file at "
                              "fault.")))
        goto fail;
    if (!(g_corrupt_error = new_error(m, "CorruptError", g_error, "A damaged, truncated or "
                                      "unrecognised dataset file (named in the message).")))
        goto fail;
    if (!(b = PyTuple_Pack(2, g_error, PyExc_ValueError)) ||
        !(g_argument_error = new_error(m, "ArgumentError", b, "An option or argument the "
                                       "library refused (also a ValueError).")))
        goto fail;
    Py_CLEAR(b);
    if (!(g_shape_error = new_error(m, "ShapeError", g_argument_error, "Samples vary in size "
                                    "and no size= was given to crop or pad them to.")))
        goto fail;
    if (!(b = PyTuple_Pack(2, g_error, PyExc_FileNotFoundError)) ||
        !(g_not_found_error = new_error(m, "NotFoundError", b, "No dataset there: no manifest, "
                                        "or a missing file (also a FileNotFoundError).")))
        goto fail;
    Py_CLEAR(b);
    if (!(b = PyTuple_Pack(2, g_error, PyExc_OSError)) ||
        !(g_read_error = new_error(m, "ReadError", b, "A system error reading the dataset (also "
                                   "an OSError, with its errno).")))
        goto fail;
    Py_CLEAR(b);
    if (!(g_state_error = new_error(m, "StateError", g_error, "The reader failed earlier (or "
                                    "the object is not open); open a new one.")))
        goto fail;
    if (!(g_unsupported_error = new_error(m, "UnsupportedError", g_error, "A valid dataset "
                                          "this build cannot read (e.g. a backend left out).")))
        goto fail;
    if (PyModule_AddObjectRef(m, "Dataset", (PyObject *)DatasetType) < 0 ||
        PyModule_AddObjectRef(m, "Loader", (PyObject *)LoaderType) < 0 ||
        PyModule_AddObjectRef(m, "_View", (PyObject *)ViewType) < 0 ||
        PyModule_AddStringConstant(m, "__version__", "0.1.0") < 0 ||
        PyModule_AddIntConstant(m, "LIBRARY_VERSION_MAJOR", SHR_VERSION_MAJOR) < 0 ||
        PyModule_AddIntConstant(m, "LIBRARY_VERSION_MINOR", SHR_VERSION_MINOR) < 0)
        goto fail;
    return m;
fail:
    Py_XDECREF(b);
    Py_DECREF(m);
    return NULL;
}
