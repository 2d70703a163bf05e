/* _shardread.c - the C extension under the Python package `shardread`: libshardread for Python.
 *
 * Built on the public header include/shardread.h only, with CPython's stable ABI (Py_LIMITED_API
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
 *
 * Files. This one is the module itself: its errors, the converters the types share and PyInit.
 * Dataset is _sr_dataset.c; the Loader is _sr_loader.c, its keywords _sr_options.c; _View,
 * _Ring, _Batch and the delivery of a batch are _sr_batch.c. They share _sr.h.
 */
#include "_sr.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- module-wide objects (created once at import) ---- */

PyObject *sr_error;
PyObject *sr_corrupt_error;
PyObject *sr_argument_error;
PyObject *sr_shape_error;
PyObject *sr_not_found_error;
PyObject *sr_read_error;
PyObject *sr_state_error;
PyObject *sr_unsupported_error;
PyObject *sr_torch_loader;
PyObject *sr_wrap_hook;
PyObject *sr_fence_hook;
int sr_fence_all;
PyTypeObject *DatasetType, *RingType, *BatchType, *ViewType, *LoaderType, *LoaderIterType;

/* ---- helpers ---- */

/* Free an object of one of this module's heap types, and drop the reference its instance held
 * on the type. */
void sr_free_object(PyObject *self)
{
    PyTypeObject *t = Py_TYPE(self);
    freefunc f = (freefunc)PyType_GetSlot(t, Py_tp_free);
    f(self);
    Py_DECREF(t);
}

/* The UTF-8 text of a str (NULL, with an error set, if it has none). */
const char *sr_utf8(PyObject *o)
{
    return PyUnicode_AsUTF8AndSize(o, NULL);
}

/* o is the str s */
int sr_str_is(PyObject *o, const char *s)
{
    if (!PyUnicode_Check(o))
        return 0;
    const char *t = sr_utf8(o);
    if (!t) {
        PyErr_Clear();
        return 0;
    }
    return strcmp(t, s) == 0;
}

/* The name of o's type, for messages (a new reference). */
PyObject *sr_type_name(PyObject *o)
{
    PyObject *n = PyType_GetName(Py_TYPE(o));
    if (!n) {
        PyErr_Clear();
        n = PyUnicode_FromString("?");
    }
    return n;
}

/* PyErr_Format(exc, "<prefix> %U<suffix>") with o's type name; returns NULL */
PyObject *sr_type_error(PyObject *exc, const char *prefix, PyObject *o, const char *suffix)
{
    PyObject *n = sr_type_name(o);
    if (n) {
        PyErr_Format(exc, "%s%U%s", prefix, n, suffix);
        Py_DECREF(n);
    }
    return NULL;
}

/* ---- errors ---- */

/* ---- errors ---- */

/* Raise the Python exception for library code rc with message msg (the library's, naming the
 * file). The exception carries .code (rc) and .reason (shr_strerror(rc)). Returns NULL. */
PyObject *sr_raise_lib(int rc, const char *msg)
{
    if (!msg || !*msg)
        msg = shr_strerror(rc);
    PyObject *type, *exc;
    if (rc == ENOMEM)
        return PyErr_NoMemory();
    if (rc > 0) {
        type = rc == ENOENT ? sr_not_found_error : sr_read_error;
        exc = PyObject_CallFunction(type, "is", rc, msg);
    } else {
        switch (rc) {
        case SHR_EINVAL:
        case SHR_EFMT_INVAL:
            type = sr_argument_error;
            break;
        case SHR_ESHAPE:
            type = sr_shape_error;
            break;
        case SHR_ESTATE:
            type = sr_state_error;
            break;
        case SHR_EUNSUPPORTED:
            type = sr_unsupported_error;
            break;
        case SHR_EFORMAT:
        case SHR_ECORRUPT:
        case SHR_ETRUNC:
        case SHR_ETOOBIG:
        case SHR_EHASH:
        case SHR_EVERSION:
        case SHR_EEMPTY:
            type = sr_corrupt_error;
            break;
        default:
            type = sr_error;
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

/* ---- small helpers ---- */

int sr_parse_access(PyObject *s, shr_access *out)
{
    if (!s || s == Py_None) {
        *out = SHR_ACCESS_MMAP;
        return 0;
    }
    int v;                      /* options.def's names, exactly */
    if (sr_choose_row(s, "access", 0, &v) < 0)
        return -1;
    *out = (shr_access)v;
    return 0;
}

/* A path argument (str or os.PathLike) as bytes in the filesystem encoding. */
PyObject *sr_fs_path(PyObject *path)
{
    PyObject *b = NULL;
    if (!PyUnicode_FSConverter(path, &b))
        return NULL;
    return b;
}

PyObject *sr_double_list(const double *v, uint32_t n)
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
int sr_to_u64(PyObject *o, const char *what, uint64_t *out)
{
    PyObject *i = PyNumber_Index(o);
    if (!i) {
        if (PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            char prefix[96];
            snprintf(prefix, sizeof prefix, "%s must be an integer, not ", what);
            sr_type_error(PyExc_TypeError, prefix, o, "");
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

int sr_to_u32(PyObject *o, const char *what, uint32_t lo, uint32_t *out)
{
    uint64_t v;
    if (sr_to_u64(o, what, &v) < 0)
        return -1;
    if (v < lo || v > UINT32_MAX) {
        PyErr_Format(PyExc_ValueError, "%s must be in %u..%u, not %R", what, lo, UINT32_MAX, o);
        return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

/* ---- the module ---- */

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
    XSETREF(sr_wrap_hook, fn == Py_None ? NULL : Py_NewRef(fn));
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
    XSETREF(sr_fence_hook, fn == Py_None ? NULL : Py_NewRef(fn));
    sr_fence_all = !pinned_only;
    Py_RETURN_NONE;
}

/* _mix(seed, epoch, index, salt): shr_mix, the reader's per-sample draw words, so that a
 * check (or an audit) can recompute the draws shardread.h documents. */
static PyObject *mix_words(PyObject *m, PyObject *args)
{
    (void)m;
    unsigned long long a[4];
    if (!PyArg_ParseTuple(args, "KKKK:_mix", &a[0], &a[1], &a[2], &a[3]))
        return NULL;
    return PyLong_FromUnsignedLongLong(shr_mix(a[0], a[1], a[2], a[3]));
}

/* option_table(): shr_option_table's rows as dicts (field, name, keyword, python_default,
 * type, count, ordered, form, default, lo, hi, when, doc, choices), so that the package and
 * its checks read the one description of the numeric options and choices (reader/options.def)
 * instead of restating it */
static PyObject *option_number(const shr_option_info *r, double v)
{
    return r->is_float ? PyFloat_FromDouble(v) : PyLong_FromUnsignedLongLong((unsigned long long)v);
}

static PyObject *option_table(PyObject *m, PyObject *unused)
{
    (void)m;
    (void)unused;
    static const char *const forms[] = {"range", "at_least", "below", "zero_or_range", "above",
                                        "open", "choice"};
    size_t n = 0;
    const shr_option_info *t = shr_option_table(&n);
    PyObject *rows = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; rows && i < n; i++) {
        const shr_option_info *r = &t[i];
        const char *space = strchr(r->name, ' ');
        Py_ssize_t kwlen = space ? (Py_ssize_t)(space - r->name) : (Py_ssize_t)strlen(r->name);
        PyObject *def = r->count == 4 ? Py_BuildValue("(dddd)", r->def[0], r->def[1], r->def[0],
                                                      r->def[1])
                        : r->count == 2 ? Py_BuildValue("(dd)", r->def[0], r->def[1])
                                        : option_number(r, r->def[0]);
        PyObject *lo = option_number(r, r->lo);
        /* hi is None for at_least: no upper bound */
        PyObject *hi = r->form == SHR_OPT_AT_LEAST ? Py_NewRef(Py_None) : option_number(r, r->hi);
        /* a choice's names by value ("" for a value not accepted), else None */
        PyObject *choices = r->choices ? PyList_New(0) : Py_NewRef(Py_None);
        for (int k = 0; choices && r->choices && r->choices[k]; k++) {
            PyObject *name = PyUnicode_FromString(r->choices[k]);
            if (!name || PyList_Append(choices, name) < 0)
                Py_CLEAR(choices);
            Py_XDECREF(name);
        }
        PyObject *row = def && lo && hi && choices ? Py_BuildValue(
            "{s:s,s:s,s:s#,s:z,s:s,s:i,s:O,s:s,s:O,s:O,s:O,s:s,s:s,s:O}", "field", r->field,
            "name", r->name, "keyword", r->name, kwlen, "python_default", r->python_default,
            "type", r->choices ? "choice" : r->is_float ? "float" : "int", "count", r->count,
            "ordered", r->ordered ? Py_True : Py_False,
            "form", (unsigned)r->form < sizeof forms / sizeof forms[0] ? forms[r->form] : "?",
            "default", def, "lo", lo, "hi", hi, "when", r->when, "doc", r->doc,
            "choices", choices) : NULL;
        Py_XDECREF(def);
        Py_XDECREF(lo);
        Py_XDECREF(hi);
        Py_XDECREF(choices);
        if (!row || PyList_SetItem(rows, (Py_ssize_t)i, row) < 0) {
            Py_CLEAR(rows);
            break;
        }
    }
    return rows;
}

/* _fetch(url, cache): the cached local directory of the dataset at url (shr_remote_resolve) */
static PyObject *fetch_url(PyObject *m, PyObject *args)
{
    (void)m;
    const char *url, *cache = NULL;
    if (!PyArg_ParseTuple(args, "s|z:_fetch", &url, &cache))
        return NULL;
    char dir[4096];
    shr_msg why = {{0}};
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = shr_remote_resolve(url, cache, dir, sizeof dir, &why);
    Py_END_ALLOW_THREADS
    if (rc)
        return sr_raise_lib(rc, why.text);
    return PyUnicode_DecodeFSDefault(dir);
}

static PyMethodDef module_methods[] = {
    {"option_table", (PyCFunction)option_table, METH_NOARGS,
     "option_table() -> list of dict\n"
     "\n"
     "The reader's numeric options and choices as the library checks them, one dict\n"
     "per row of its table (reader/options.def): field, name (the public name: the Loader's\n"
     "keyword and the key within it), keyword, python_default (the keyword's default\n"
     "as the Loader writes it, or None), type, count (1; 2 a (min, max) pair; 4 two),\n"
     "ordered (a pair's min <= max), form (range, at_least, below, zero_or_range,\n"
     "above, open, choice), default, lo, hi, when, doc, choices (a choice's names by\n"
     "value, '' for a value not accepted; else None). docs/OPTIONS.md is written from it."},
    {"_fetch", (PyCFunction)fetch_url, METH_VARARGS,
     "_fetch(url, cache=None) -> str\n"
     "\n"
     "The local directory, in the cache, of the dataset at url (s3:// or http(s)://),\n"
     "downloaded and checked first (internal: Dataset and Loader call it)."},
    {"_mix", (PyCFunction)mix_words, METH_VARARGS,
     "_mix(seed, epoch, index, salt) -> int\n"
     "\n"
     "The reader's draw word shr_mix(seed, epoch, index, salt) (shardread.h): what\n"
     "its documented per-sample draws are made of (for checks and audits)."},
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
    if (shr_simd_env_plain(getenv))     /* the package applies the environment's switch */
        shr_set_simd(0);
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
    if (!(sr_error = new_error(m, "Error", NULL,
                              "Base class of the errors of libshardread. .code is the library's "
                              "error code,\n.reason its name; the message names the file at "
                              "fault.")))
        goto fail;
    if (!(sr_corrupt_error = new_error(m, "CorruptError", sr_error, "A damaged, truncated or "
                                      "unrecognised dataset file (named in the message).")))
        goto fail;
    if (!(b = PyTuple_Pack(2, sr_error, PyExc_ValueError)) ||
        !(sr_argument_error = new_error(m, "ArgumentError", b, "An option or argument the "
                                       "library refused (also a ValueError).")))
        goto fail;
    Py_CLEAR(b);
    if (!(sr_shape_error = new_error(m, "ShapeError", sr_argument_error, "Samples vary in size "
                                    "and no size= was given to crop or pad them to.")))
        goto fail;
    if (!(b = PyTuple_Pack(2, sr_error, PyExc_FileNotFoundError)) ||
        !(sr_not_found_error = new_error(m, "NotFoundError", b, "No dataset there: no manifest, "
                                        "or a missing file (also a FileNotFoundError).")))
        goto fail;
    Py_CLEAR(b);
    if (!(b = PyTuple_Pack(2, sr_error, PyExc_OSError)) ||
        !(sr_read_error = new_error(m, "ReadError", b, "A system error reading the dataset (also "
                                   "an OSError, with its errno).")))
        goto fail;
    Py_CLEAR(b);
    if (!(sr_state_error = new_error(m, "StateError", sr_error, "The reader failed earlier (or "
                                    "the object is not open); open a new one.")))
        goto fail;
    if (!(sr_unsupported_error = new_error(m, "UnsupportedError", sr_error, "A valid dataset "
                                          "this build cannot read (e.g. a backend left out).")))
        goto fail;
    if (PyModule_AddObjectRef(m, "Dataset", (PyObject *)DatasetType) < 0 ||
        PyModule_AddObjectRef(m, "Loader", (PyObject *)LoaderType) < 0 ||
        PyModule_AddObjectRef(m, "_View", (PyObject *)ViewType) < 0 ||
        PyModule_AddStringConstant(m, "__version__", "0.1.0") < 0 ||
        PyModule_AddIntConstant(m, "LIBRARY_VERSION_MAJOR", SHR_VERSION_MAJOR) < 0 ||
        PyModule_AddIntConstant(m, "LIBRARY_VERSION_MINOR", SHR_VERSION_MINOR) < 0 ||
        PyModule_AddIntConstant(m, "_MAX_SIDE", SHR_MAX_SIDE) < 0 ||
        PyModule_AddIntConstant(m, "_MAX_PIXELS", SHR_MAX_PIXELS) < 0)
        goto fail;
    return m;
fail:
    Py_XDECREF(b);
    Py_DECREF(m);
    return NULL;
}
