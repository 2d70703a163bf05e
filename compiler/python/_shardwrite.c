/* _shardwrite.c - the C extension under the Python package `shardread` that writes datasets:
 * the `shardc build` pipeline fed from Python (shardread.build, Writer).
 *
 * Built on the compiler's public header alone (shardc.h: the options set by shardc build's flag
 * names, the callbacks, and the streamed build's items, schema and categories), with CPython's
 * stable ABI (Py_LIMITED_API 3.11) and no numpy C API: pixels come in through the buffer
 * protocol. The package's Python layer (shardread/_writer.py) checks the options and turns each
 * item into one of the calls below; this module knows nothing of PIL or numpy.
 *
 * Objects
 * -------
 * _Build    one build: a thread running shc_build over a shc_stream (shardc.h). add_path,
 *           add_bytes, add_pixels and add_reject hand it the next item (a copy: the caller may
 *           reuse its buffer at once), waiting with the GIL released while the build is a window
 *           of items behind; they return False once the build has ended early (an error, a
 *           strict reject), and finish() then says why. finish() closes the stream and waits for
 *           the build; cancel() stops it (nothing of it is left in the output directory).
 *
 * Threads. The build's own threads never touch Python: its callbacks collect messages, rejects
 * and the summary into C memory under a mutex, read by finish(). The GIL is released while an
 * add waits, while pixels are copied, and while finish/cancel wait for the build.
 */
#define PY_SSIZE_T_CLEAN
#ifndef Py_LIMITED_API
#define Py_LIMITED_API 0x030B0000
#endif
#include <Python.h>

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardc.h"

/* ---- what the build reports (its callbacks, from the build's thread) ---- */

typedef struct {
    char **v;
    size_t n, cap;
} strlist;

static int strlist_add(strlist *l, const char *a, const char *b)
{
    if (l->n + 2 > l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        char **p = realloc(l->v, cap * sizeof *p);
        if (!p)
            return ENOMEM;
        l->v = p;
        l->cap = cap;
    }
    l->v[l->n] = strdup(a);
    l->v[l->n + 1] = b ? strdup(b) : NULL;
    l->n += 2;
    return 0;
}

static void strlist_free(strlist *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

typedef struct {
    PyObject_HEAD
    shc_build_opts *o;
    shc_build_ctl ctl;
    shc_stream *stream;
    char *out;
    char *cache;                /* $SHARDREAD_CACHE, or NULL (the library's default) */
    char **classes;
    size_t nclasses;
    pthread_t tid;
    int running;                /* the thread was started and not joined */
    int rc;                     /* shc_build's result, once joined */
    pthread_mutex_t mu;         /* guards what the callbacks fill */
    strlist messages;           /* pairs (text, NULL) */
    strlist rejects, warnings;  /* pairs (name, reason) */
    shc_summary summary;
    int have_summary;
} BuildObject;

static void on_message(void *ctx, const char *text)
{
    BuildObject *b = ctx;
    pthread_mutex_lock(&b->mu);
    strlist_add(&b->messages, text, NULL);
    pthread_mutex_unlock(&b->mu);
}

static void on_reject(void *ctx, const char *path, const char *reason)
{
    BuildObject *b = ctx;
    pthread_mutex_lock(&b->mu);
    strlist_add(&b->rejects, path, reason);
    pthread_mutex_unlock(&b->mu);
}

static void on_warning(void *ctx, const char *path, const char *text)
{
    BuildObject *b = ctx;
    pthread_mutex_lock(&b->mu);
    strlist_add(&b->warnings, path, text);
    pthread_mutex_unlock(&b->mu);
}

static void on_summary(void *ctx, const shc_summary *s)
{
    BuildObject *b = ctx;
    pthread_mutex_lock(&b->mu);
    b->summary = *s;
    b->summary.out = NULL;
    b->have_summary = 1;
    pthread_mutex_unlock(&b->mu);
}

static void *build_thread(void *arg)
{
    BuildObject *b = arg;
    shc_build_cb cb = {.ctx = b, .message = on_message, .reject = on_reject,
                       .warning = on_warning, .summary = on_summary};
    int rc = shc_build(b->o, &cb);
    /* a producer still waiting (the build ended early) hears of it */
    shc_stream_cancel(b->stream);
    b->rc = rc;
    return NULL;
}

/* ---- _Build ---- */

static void join(BuildObject *b)
{
    if (!b->running)
        return;
    b->running = 0;             /* one joiner, even if another thread calls in meanwhile */
    pthread_t tid = b->tid;
    Py_BEGIN_ALLOW_THREADS
    pthread_join(tid, NULL);
    Py_END_ALLOW_THREADS
}

static void Build_dealloc(PyObject *self)
{
    BuildObject *b = (BuildObject *)self;
    if (b->running) {
        atomic_store(&b->ctl.stop, 1);
        shc_stream_cancel(b->stream);
        join(b);
    }
    shc_stream_free(b->stream);
    shc_build_opts_free(b->o);
    free(b->out);
    free(b->cache);
    for (size_t i = 0; i < b->nclasses; i++)
        free(b->classes[i]);
    free(b->classes);
    strlist_free(&b->messages);
    strlist_free(&b->rejects);
    strlist_free(&b->warnings);
    pthread_mutex_destroy(&b->mu);
    PyTypeObject *t = Py_TYPE(self);
    freefunc f = (freefunc)PyType_GetSlot(t, Py_tp_free);
    f(self);
    Py_DECREF(t);
}

/* Free what the item holds (NULL: taken, or never set). */
static void item_free(shc_item *it)
{
    free(it->name);
    free(it->data);
    free(it->fields);
    free(it->target);
}

/* Hand item it to the stream, waiting with the GIL released. True: added; False: the build has
 * ended (finish() says why). it's bytes are freed when not taken. */
static PyObject *push(BuildObject *b, shc_item *it)
{
    if (!b->stream || !b->running) {
        item_free(it);
        PyErr_SetString(PyExc_RuntimeError, "this build is finished");
        return NULL;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = shc_stream_add(b->stream, it);
    Py_END_ALLOW_THREADS
    item_free(it);              /* NULL when taken */
    if (rc == EINVAL) {
        PyErr_SetString(PyExc_ValueError, "label out of range, a fields record not of the "
                        "schema, or a target missing, unexpected or malformed");
        return NULL;
    }
    return PyBool_FromLong(rc == 0);
}

/* A malloc'd copy of a name given as str or bytes (file names: os.fsencode's bytes). */
static char *name_of(PyObject *o)
{
    const char *s;
    Py_ssize_t n;
    PyObject *tmp = NULL;
    if (PyUnicode_Check(o)) {
        tmp = PyUnicode_AsUTF8String(o);
        if (!tmp)
            return NULL;
        o = tmp;
    }
    if (PyBytes_AsStringAndSize(o, (char **)&s, &n) != 0) {
        Py_XDECREF(tmp);
        return NULL;
    }
    if ((Py_ssize_t)strlen(s) != n) {
        Py_XDECREF(tmp);
        PyErr_SetString(PyExc_ValueError, "a path or name with a NUL character");
        return NULL;
    }
    char *c = strdup(s);
    Py_XDECREF(tmp);
    if (!c)
        PyErr_NoMemory();
    return c;
}

/* bytes object rec (min..max bytes) copied into *dst, *len; -1 with an exception naming what */
static int copy_record(PyObject *rec, Py_ssize_t min, uint64_t max, const char *what,
                       uint8_t **dst, uint32_t *len)
{
    char *p;
    Py_ssize_t n;
    if (PyBytes_AsStringAndSize(rec, &p, &n) != 0)
        return -1;
    if (n < min || (uint64_t)n > max) {
        PyErr_Format(PyExc_ValueError, "%s of a bad size", what);
        return -1;
    }
    if (!(*dst = malloc((size_t)n))) {
        PyErr_NoMemory();
        return -1;
    }
    memcpy(*dst, p, (size_t)n);
    *len = (uint32_t)n;
    return 0;
}

/* The item's fields record (bytes, or None for none) into it; -1 with an exception. */
static int item_fields(PyObject *rec, shc_item *it)
{
    return rec == Py_None ? 0 : copy_record(rec, 1, SHC_FIELDS_MAX_RECORD, "a fields record",
                                            &it->fields, &it->fields_len);
}

/* The item's target (bytes in shardc.h's SHC_SRC_TARGET layout, or None) into it; -1 with an
 * exception. The stream checks it further. */
static int item_target(PyObject *rec, shc_item *it)
{
    return rec == Py_None ? 0 : copy_record(rec, 16, SHC_SRC_TARGET_SIZE(SHC_TARGET_MAX_BOXES),
                                            "a target", &it->target, &it->target_len);
}

/* A copy of a buffer's bytes (C-contiguous), the GIL released for a large one. */
static uint8_t *copy_buffer(PyObject *obj, size_t *len)
{
    Py_buffer v;
    if (PyObject_GetBuffer(obj, &v, PyBUF_C_CONTIGUOUS) != 0)
        return NULL;
    size_t n = (size_t)v.len;
    uint8_t *p = malloc(n ? n : 1);
    if (!p) {
        PyBuffer_Release(&v);
        PyErr_NoMemory();
        return NULL;
    }
    if (n > (1u << 20)) {
        Py_BEGIN_ALLOW_THREADS
        memcpy(p, v.buf, n);
        Py_END_ALLOW_THREADS
    } else {
        memcpy(p, v.buf, n);
    }
    PyBuffer_Release(&v);
    *len = n;
    return p;
}

/* The copies an add_* call makes of its arguments into it: name, the fields record rec, and the
 * bytes of data when not NULL; -1 with an exception and nothing held. */
static int item_args(shc_item *it, PyObject *name, PyObject *rec, PyObject *tg, PyObject *data)
{
    if (!(it->name = name_of(name)))
        return -1;
    if (item_fields(rec, it) < 0 || item_target(tg, it) < 0 ||
        (data && !(it->data = copy_buffer(data, &it->len)))) {
        item_free(it);
        return -1;
    }
    return 0;
}

static PyObject *Build_add_path(PyObject *self, PyObject *args)
{
    PyObject *path, *rec = Py_None, *tg = Py_None;
    int label;
    if (!PyArg_ParseTuple(args, "Oi|OO", &path, &label, &rec, &tg))
        return NULL;
    shc_item it = {.kind = SHC_ITEM_PATH, .label = label};
    if (item_args(&it, path, rec, tg, NULL) < 0)
        return NULL;
    return push((BuildObject *)self, &it);
}

static PyObject *Build_add_bytes(PyObject *self, PyObject *args)
{
    PyObject *data, *name, *rec = Py_None, *tg = Py_None;
    int label;
    if (!PyArg_ParseTuple(args, "OOi|OO", &data, &name, &label, &rec, &tg))
        return NULL;
    shc_item it = {.kind = SHC_ITEM_ENCODED, .label = label};
    if (item_args(&it, name, rec, tg, data) < 0)
        return NULL;
    return push((BuildObject *)self, &it);
}

static PyObject *Build_add_pixels(PyObject *self, PyObject *args)
{
    PyObject *data, *name, *rec = Py_None, *tg = Py_None;
    unsigned int h, w, c;
    int label;
    if (!PyArg_ParseTuple(args, "OIIIOi|OO", &data, &h, &w, &c, &name, &label, &rec, &tg))
        return NULL;
    shc_item it = {.kind = SHC_ITEM_PIXELS, .label = label, .width = w, .height = h,
                   .channels = c};
    if (item_args(&it, name, rec, tg, data) < 0)
        return NULL;
    if ((uint64_t)w * h * c != it.len) {
        item_free(&it);
        PyErr_SetString(PyExc_ValueError, "pixel buffer size does not match its shape");
        return NULL;
    }
    return push((BuildObject *)self, &it);
}

/* set_fields([(name, type, count), ...]): the schema every later item's record follows. */
static PyObject *Build_set_fields(PyObject *self, PyObject *arg)
{
    BuildObject *b = (BuildObject *)self;
    shc_field_def defs[SHC_FIELDS_MAX];
    Py_ssize_t n = PySequence_Size(arg);
    if (n < 0)
        return NULL;
    if (n == 0 || n > SHC_FIELDS_MAX) {
        PyErr_Format(PyExc_ValueError, "fields: %zd fields (1..%u)", n, SHC_FIELDS_MAX);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = PySequence_GetItem(arg, i);
        const char *name;
        unsigned int type, count;
        int ok = t && PyArg_ParseTuple(t, "sII", &name, &type, &count);
        Py_XDECREF(t);          /* name stays valid: arg holds the tuple's str */
        if (!ok)
            return NULL;
        defs[i] = (shc_field_def){.name = name, .type = type, .count = count};
    }
    shc_msg msg = {{0}};
    if (!b->stream || shc_stream_set_fields(b->stream, defs, (size_t)n, &msg) != 0) {
        PyErr_Format(PyExc_ValueError, "fields: %s", b->stream ? msg.text : "build finished");
        return NULL;
    }
    Py_RETURN_NONE;
}

/* set_targets(): every later item carries a target (a detection build). */
static PyObject *Build_set_targets(PyObject *self, PyObject *unused)
{
    (void)unused;
    BuildObject *b = (BuildObject *)self;
    if (!b->stream || shc_stream_set_targets(b->stream) != 0) {
        PyErr_SetString(PyExc_ValueError, b->stream ? "targets: set before the first item"
                                                    : "targets: build finished");
        return NULL;
    }
    Py_RETURN_NONE;
}

/* set_categories([(id, name), ...]): the categories of a build with targets, sorted by id. */
static PyObject *Build_set_categories(PyObject *self, PyObject *arg)
{
    BuildObject *b = (BuildObject *)self;
    Py_ssize_t n = PySequence_Size(arg);
    if (n < 0)
        return NULL;
    shc_category *cats = PyMem_Calloc(n ? (size_t)n : 1, sizeof *cats);
    PyObject **held = PyMem_Calloc(n ? (size_t)n : 1, sizeof *held);
    if (!cats || !held) {
        PyMem_Free(cats);
        PyMem_Free(held);
        return PyErr_NoMemory();
    }
    int ok = 1;
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        long long id;
        const char *name;
        ok = (held[i] = PySequence_GetItem(arg, i)) != NULL &&
             PyArg_ParseTuple(held[i], "Ls", &id, &name);
        if (ok) {
            cats[i].id = id;
            cats[i].name = name;    /* the item's: the stream copies */
        }
    }
    int rc = !ok ? -1 : !b->stream ? EINVAL : shc_stream_set_categories(b->stream, cats, (size_t)n);
    for (Py_ssize_t i = 0; i < n; i++)
        Py_XDECREF(held[i]);
    PyMem_Free(held);
    PyMem_Free(cats);
    if (rc < 0)
        return NULL;
    if (rc == ENOMEM)
        return PyErr_NoMemory();
    if (rc) {
        PyErr_SetString(PyExc_ValueError, b->stream ? "categories: ids not increasing"
                                                    : "categories: build finished");
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *Build_add_reject(PyObject *self, PyObject *args)
{
    PyObject *name;
    const char *reason;
    int label;
    if (!PyArg_ParseTuple(args, "Osi", &name, &reason, &label))
        return NULL;
    shc_item it = {.kind = SHC_ITEM_REJECT, .label = label};
    if (!(it.name = name_of(name)))
        return NULL;
    it.len = strlen(reason);
    if (!(it.data = (uint8_t *)strdup(reason))) {
        free(it.name);
        return PyErr_NoMemory();
    }
    return push((BuildObject *)self, &it);
}

static PyObject *pairs(const strlist *l)
{
    PyObject *r = PyList_New(0);
    for (size_t i = 0; r && i + 1 < l->n; i += 2) {
        PyObject *t = l->v[i + 1] ? Py_BuildValue("(ss)", l->v[i], l->v[i + 1])
                                  : PyUnicode_FromString(l->v[i] ? l->v[i] : "");
        if (!t || PyList_Append(r, t) != 0) {
            Py_XDECREF(t);
            Py_DECREF(r);
            return NULL;
        }
        Py_DECREF(t);
    }
    return r;
}

/* The build's outcome: {"rc", "code", "exit", "messages", "rejects", "warnings", "summary"}. */
static PyObject *outcome(BuildObject *b)
{
    PyObject *summary;
    if (b->have_summary) {
        const shc_summary *s = &b->summary;
        summary = Py_BuildValue("{sKsnsnsKsnsnsnsdsdsI}", "samples",
                                (unsigned long long)s->samples, "classes", (Py_ssize_t)s->classes,
                                "shards", (Py_ssize_t)s->shards, "bytes",
                                (unsigned long long)s->bytes, "inputs", (Py_ssize_t)s->inputs,
                                "rejects", (Py_ssize_t)s->rejects, "warnings",
                                (Py_ssize_t)s->warnings, "seconds", s->seconds, "images_per_s",
                                s->images_per_s, "threads", s->threads);
    } else {
        summary = Py_None;
        Py_INCREF(summary);
    }
    PyObject *m = pairs(&b->messages), *r = pairs(&b->rejects), *w = pairs(&b->warnings);
    PyObject *res = NULL;
    if (summary && m && r && w)
        res = Py_BuildValue("{sisssisOsOsOsO}", "rc", b->rc, "code", shc_strerror(b->rc), "exit",
                            shc_build_exit(b->rc), "messages", m, "rejects", r, "warnings", w,
                            "summary", summary);
    Py_XDECREF(summary);
    Py_XDECREF(m);
    Py_XDECREF(r);
    Py_XDECREF(w);
    return res;
}

static PyObject *Build_finish(PyObject *self, PyObject *unused)
{
    BuildObject *b = (BuildObject *)self;
    if (b->running)
        shc_stream_close(b->stream);
    join(b);
    return outcome(b);
}

static PyObject *Build_cancel(PyObject *self, PyObject *unused)
{
    BuildObject *b = (BuildObject *)self;
    if (b->running) {
        atomic_store(&b->ctl.stop, 1);
        shc_stream_cancel(b->stream);
    }
    join(b);
    return outcome(b);
}

static PyObject *Build_added(PyObject *self, void *closure)
{
    BuildObject *b = (BuildObject *)self;
    return PyLong_FromUnsignedLongLong(b->stream ? shc_stream_added(b->stream) : 0);
}

static PyObject *Build_done(PyObject *self, void *closure)
{
    BuildObject *b = (BuildObject *)self;
    return PyLong_FromUnsignedLongLong((unsigned long long)atomic_load(&b->ctl.done));
}

static PyMethodDef Build_methods[] = {
    {"add_path", Build_add_path, METH_VARARGS, "add_path(path, label) -> bool"},
    {"add_bytes", Build_add_bytes, METH_VARARGS, "add_bytes(data, name, label) -> bool"},
    {"add_pixels", Build_add_pixels, METH_VARARGS,
     "add_pixels(buffer, height, width, channels, name, label) -> bool"},
    {"add_reject", Build_add_reject, METH_VARARGS, "add_reject(name, reason, label) -> bool"},
    {"set_fields", Build_set_fields, METH_O, "set_fields([(name, type, count), ...])"},
    {"set_targets", Build_set_targets, METH_NOARGS, "set_targets(): items carry targets"},
    {"set_categories", Build_set_categories, METH_O, "set_categories([(id, name), ...])"},
    {"finish", Build_finish, METH_NOARGS, "close the stream, wait for the build: its outcome"},
    {"cancel", Build_cancel, METH_NOARGS, "stop the build (no dataset is left): its outcome"},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef Build_getset[] = {
    {"added", Build_added, NULL, "items added so far", NULL},
    {"done", Build_done, NULL, "items the build has written (or rejected) so far", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyType_Slot Build_slots[] = {
    {Py_tp_doc, "One running build fed item by item (internal; see shardread.Writer)."},
    {Py_tp_dealloc, Build_dealloc},
    {Py_tp_methods, Build_methods},
    {Py_tp_getset, Build_getset},
    {0, NULL}};

static PyType_Spec Build_spec = {"shardread._shardwrite._Build", sizeof(BuildObject), 0,
                                 Py_TPFLAGS_DEFAULT, Build_slots};

static PyTypeObject *g_build_type;

/* ---- start(): the keywords to the options, each through shc_build_set ---- */

/* Set the option of shardc build's --flag to value; a refusal is a ValueError naming the
 * keyword, then the library's words ("filter: bad --filter 'x' (nearest, ...)"). */
static int set(shc_build_opts *o, const char *keyword, const char *flag, const char *value)
{
    shc_msg why = {{0}};
    if (shc_build_set(o, flag, value, &why) == 0)
        return 0;
    PyErr_Format(PyExc_ValueError, "%s: %s", keyword, why.text);
    return -1;
}

static int set_uint(shc_build_opts *o, const char *keyword, const char *flag,
                    unsigned long long v)
{
    char num[32];
    snprintf(num, sizeof num, "%llu", v);
    return set(o, keyword, flag, num);
}

static int set_wxh(shc_build_opts *o, const char *keyword, const char *flag, unsigned w,
                   unsigned h)
{
    char wxh[32];
    snprintf(wxh, sizeof wxh, "%ux%u", w, h);
    return set(o, keyword, flag, wxh);
}

static PyObject *start(PyObject *mod, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"out", "geometry", "width", "height", "short_side", "max_side",
                             "crop_w", "crop_h", "fit", "filter", "shrink_on_load", "channels",
                             "format", "quality", "compress", "jpeg_fraction", "threads",
                             "shard_bytes", "shard_samples", "align", "max_pixels",
                             "max_image_side", "max_file_bytes", "augment", "aug", "seed",
                             "strict", "force", "classes", "window", "budget", NULL};
    const char *out, *geometry, *fit = NULL, *filter = NULL, *format = "raw", *compress = NULL,
               *aug = NULL;
    unsigned int width = 0, height = 0, short_side = 0, max_side = 0, crop_w = 0, crop_h = 0;
    unsigned int channels = 3, threads = 1, align = 0, max_image_side = 0, augment = 0;
    int shrink = 0, quality = 90, strict = 0, force = 0;
    double jpeg_fraction = 0;
    unsigned long long shard_bytes = 1ull << 30, shard_samples = 0, max_pixels = 0,
                       max_file_bytes = 1ull << 30, seed = 0, window = 0, budget = 0;
    PyObject *classes = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "ss|IIIIIIzzpIsizdIKKIKIKIzKppOKK", kwlist, &out,
                                     &geometry, &width, &height, &short_side, &max_side, &crop_w,
                                     &crop_h, &fit, &filter, &shrink, &channels, &format,
                                     &quality, &compress, &jpeg_fraction, &threads, &shard_bytes,
                                     &shard_samples, &align, &max_pixels, &max_image_side,
                                     &max_file_bytes, &augment, &aug, &seed, &strict, &force,
                                     &classes, &window, &budget))
        return NULL;

    /* the package's Python layer has checked the keywords and the pairs of them in its words;
     * what it passes on is set here as shardc sets its flags */
    shc_build_opts *o = shc_build_opts_new();
    if (!o)
        return PyErr_NoMemory();
    threads = threads < 1 ? 1 : threads > 1024 ? 1024 : threads;
    char fraction[40];
    snprintf(fraction, sizeof fraction, "%.17g", jpeg_fraction);
    shc_msg why = {{0}};
    if ((strcmp(geometry, "size") == 0 && set_wxh(o, "size", "size", width, height)) ||
        (strcmp(geometry, "short_side") == 0 &&
         set_uint(o, "short_side", "short-side", short_side)) ||
        (max_side && set_uint(o, "max_side", "max-side", max_side)) ||
        ((crop_w || crop_h) && set_wxh(o, "crop", "crop", crop_w, crop_h)) ||
        (fit && set(o, "fit", "fit", fit)) || (filter && set(o, "filter", "filter", filter)) ||
        (shrink && set(o, "shrink_on_load", "shrink-on-load", NULL)) ||
        (channels == 1 && set(o, "channels", "gray", NULL)) ||
        set(o, "format", "format", format) || set_uint(o, "quality", "quality", (unsigned)quality) ||
        (compress && set(o, "compress", "compress", compress)) ||
        set(o, "jpeg_fraction", "jpeg-fraction", fraction) ||
        set_uint(o, "threads", "threads", threads) ||
        set_uint(o, "shard_bytes", "shard-size", shard_bytes) ||
        (shard_samples && set_uint(o, "shard_samples", "shard-samples", shard_samples)) ||
        (align && set_uint(o, "align", "align", align)) ||
        (max_pixels && set_uint(o, "max_pixels", "max-pixels", max_pixels)) ||
        (max_image_side && set_uint(o, "max_image_side", "max-image-side", max_image_side)) ||
        set_uint(o, "max_file_bytes", "max-file-size", max_file_bytes) ||
        (augment && set_uint(o, "augment", "augment", augment)) ||
        (aug && set(o, "aug", "aug", aug)) || set_uint(o, "seed", "seed", seed) ||
        (strict && set(o, "strict", "strict", NULL)) ||
        (force && set(o, "force", "force", NULL))) {
        shc_build_opts_free(o);
        return NULL;
    }
    shc_crash_opts crash;
    shc_crash_from_env(getenv, &crash);     /* the crash tests, as shardc takes them */
    shc_build_set_crash(o, &crash);

    BuildObject *b = (BuildObject *)PyType_GenericAlloc(g_build_type, 0);
    if (!b) {
        shc_build_opts_free(o);
        return NULL;
    }
    b->o = o;                   /* Build_dealloc frees it */
    pthread_mutex_init(&b->mu, NULL);
    if (classes != Py_None) {
        Py_ssize_t n = PySequence_Size(classes);
        if (n < 0)
            goto fail;
        b->classes = calloc(n ? (size_t)n : 1, sizeof *b->classes);
        if (!b->classes) {
            PyErr_NoMemory();
            goto fail;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *c = PySequence_GetItem(classes, i);
            b->classes[i] = c ? name_of(c) : NULL;
            Py_XDECREF(c);
            if (!b->classes[i])
                goto fail;
            b->nclasses++;
        }
    }
    if (!(b->out = strdup(out))) {
        PyErr_NoMemory();
        goto fail;
    }
    if (shc_stream_create(window ? (size_t)window : 4 * (size_t)threads + 8, budget,
                          (const char *const *)b->classes, b->nclasses, &b->stream) != 0) {
        PyErr_NoMemory();
        goto fail;
    }
    /* the package's defaults for an s3:// out, as shardc's: the cache root (its "upload" holds
     * the staging folder) and the part size (the library reads no environment) */
    const char *cache = getenv("SHARDREAD_CACHE");
    if (cache && *cache && !(b->cache = strdup(cache))) {
        PyErr_NoMemory();
        goto fail;
    }
    shc_build_set_cache(o, b->cache);
    if (strncmp(out, "s3://", 5) == 0) {
        uint64_t part_size;
        if (shc_part_size_from_env(getenv, &part_size, &why) != 0) {
            PyErr_SetString(PyExc_ValueError, why.text);
            goto fail;
        }
        if (part_size && set_uint(o, "upload_part_size", "upload-part-size", part_size))
            goto fail;
    }
    if (set(o, "out", "output", b->out))
        goto fail;
    shc_build_set_stream(o, b->stream);
    shc_build_set_ctl(o, &b->ctl);
    if (shc_build_check(o, &why) != 0) {
        PyErr_SetString(PyExc_ValueError, why.text);
        goto fail;
    }
    if (pthread_create(&b->tid, NULL, build_thread, b) != 0) {
        PyErr_SetString(PyExc_RuntimeError, "cannot start the build's thread");
        goto fail;
    }
    b->running = 1;
    return (PyObject *)b;
fail:
    Py_DECREF(b);
    return NULL;
}

static PyObject *parse_size(PyObject *mod, PyObject *arg)
{
    const char *s = PyUnicode_AsUTF8AndSize(arg, NULL);
    uint64_t v;
    if (!s)
        return NULL;
    if (shc_parse_size(s, &v) != 0) {
        PyErr_Format(PyExc_ValueError, "bad size '%s' (e.g. 512MiB, 1GiB or a byte count)", s);
        return NULL;
    }
    return PyLong_FromUnsignedLongLong(v);
}

static PyMethodDef module_methods[] = {
    {"start", (PyCFunction)(void (*)(void))start, METH_VARARGS | METH_KEYWORDS,
     "start(out, geometry, **options) -> _Build: a build running in its own thread, fed by "
     "_Build.add_*"},
    {"parse_size", parse_size, METH_O, "parse_size('512MiB') -> 536870912 (as shardc does)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_shardwrite",
                                        "shardc build's pipeline for Python (see shardread.build)",
                                        -1, module_methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__shardwrite(void);

PyMODINIT_FUNC PyInit__shardwrite(void)
{
    shc_simd_from_env(getenv);          /* the package applies the environment's switch */
    PyObject *m = PyModule_Create(&module_def);
    if (!m)
        return NULL;
    g_build_type = (PyTypeObject *)PyType_FromSpec(&Build_spec);
    if (!g_build_type) {
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF((PyObject *)g_build_type);
    if (PyModule_AddObject(m, "_Build", (PyObject *)g_build_type) != 0) {
        Py_DECREF((PyObject *)g_build_type);
        Py_DECREF(m);
        return NULL;
    }
    PyModule_AddIntConstant(m, "EREJECTS", SHC_EREJECTS);
    PyModule_AddIntConstant(m, "EINPUT", SHC_EINPUT);
    PyModule_AddIntConstant(m, "ESTOPPED", SHC_ESTOPPED);
    return m;
}
