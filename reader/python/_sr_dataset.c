/* _sr_dataset.c - shardread.Dataset (part of the _shardread module; _sr.h): a shr_dataset as a
 * map-style dataset, ds[i] copying sample i (and, for a detection dataset, its target; for a
 * semantic segmentation dataset, its label map) into fresh arrays.
 */
#include "_sr.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    PyObject_HEAD
    shr_dataset *d;
    PyObject *path;
    uint64_t samples;
    int targets;                /* a detection dataset: items are (image, target) */
    int label_map;              /* a label-map dataset: items are (image, map) */
    int label_elem;             /* its map's value: 1 (uint8) or 8 (int64) bytes */
} DatasetObject;

static int Dataset_init(DatasetObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"path", "access", "verify_samples", "label_dtype", "cache",
                             "cache_limit", NULL};
    PyObject *path, *access = NULL, *verify = Py_False, *label_dtype = Py_None, *cache = Py_None;
    unsigned long long limit = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OOOOK:Dataset", kwlist, &path, &access, &verify,
                                     &label_dtype, &cache, &limit))
        return -1;
    int v, elem;
    if (sr_flag_named(verify, "verify_samples", &v) < 0 || sr_label_dtype(label_dtype, &elem) < 0)
        return -1;
    shr_access a;
    if (sr_parse_access(access, &a) < 0)
        return -1;
    PyObject *b = sr_fs_path(path);
    if (!b)
        return -1;
    PyObject *cb = cache == Py_None ? NULL : sr_fs_path(cache);
    if (cache != Py_None && !cb) {
        Py_DECREF(b);
        return -1;
    }
    if (self->d) {
        shr_dataset_close(self->d);
        self->d = NULL;
    }
    shr_dataset *d = NULL;
    int rc;
    shr_msg msg = {{0}};
    Py_BEGIN_ALLOW_THREADS
    /* a URL with cache= or cache_limit= goes to its cache (read on demand with a limit) */
    if (cb || limit)
        rc = shr_dataset_open_remote(&d, PyBytes_AsString(b), cb ? PyBytes_AsString(cb) : NULL,
                                     limit, a, v ? SHR_DATASET_VERIFY : 0, &msg);
    else
        rc = shr_dataset_open_flags(&d, PyBytes_AsString(b), a, v ? SHR_DATASET_VERIFY : 0, &msg);
    Py_END_ALLOW_THREADS
    Py_DECREF(b);
    Py_XDECREF(cb);
    if (rc) {
        sr_raise_lib(rc, msg.text);
        return -1;
    }
    self->d = d;
    shr_dataset_info info;
    shr_dataset_get_info(d, &info);
    self->samples = info.samples;
    self->targets = info.targets;
    self->label_map = shr_dataset_has_label_maps(d);
    self->label_elem = elem ? elem : 1;
    if (elem && !self->label_map) {
        PyErr_SetString(sr_argument_error, "label_dtype= is for a semantic segmentation dataset "
                        "(shardc build --masks): this one has no label maps");
        return -1;
    }
    /* a dataset at a URL: its folder in the cache (which holds its manifest.json) */
    if (cb || limit)
        XSETREF(self->path, PyUnicode_DecodeFSDefault(shr_dataset_dir(d)));
    else
        XSETREF(self->path, PyOS_FSPath(path));
    return self->path ? 0 : -1;
}

static void Dataset_dealloc(DatasetObject *self)
{
    shr_dataset_close(self->d);
    Py_XDECREF(self->path);
    sr_free_object((PyObject *)self);
}

static int check_open(const DatasetObject *self)
{
    if (!self->d) {
        PyErr_SetString(sr_state_error, "the Dataset is not open (its __init__ failed or was not "
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

/* A version 2 target's "masks" (n, H, W) uint8 and "keypoints" (n, K, 3) float32, added to td
 * (nothing for a boxes-only dataset). 0, or -1 with an exception set. */
static int add_segm(DatasetObject *self, uint64_t i, uint32_t n, PyObject *td)
{
    uint32_t k = 0, w = 0, h = 0;
    const float *kp = NULL;
    int has_masks = 0, rc;
    shr_msg msg = {{0}};
    if ((rc = shr_dataset_segm(self->d, i, &k, &kp, &has_masks, &w, &h, NULL, 0, &msg)) != 0) {
        sr_raise_lib(rc, msg.text);
        return -1;
    }
    if (kp) {
        Py_ssize_t dims[3] = {n, k, 3};
        PyObject *v = sr_view_copy(kp, "f", 4, 3, dims);
        if (!v || PyDict_SetItemString(td, "keypoints", v) != 0) {
            Py_XDECREF(v);
            return -1;
        }
        Py_DECREF(v);
    }
    if (has_masks) {
        Py_ssize_t dims[3] = {n, h, w};
        PyObject *v = sr_view_copy(NULL, "B", 1, 3, dims);
        if (!v)
            return -1;
        if ((rc = shr_dataset_segm(self->d, i, NULL, NULL, NULL, NULL, NULL,
                                   ((ViewObject *)v)->data, (size_t)((ViewObject *)v)->len,
                                   &msg)) != 0 ||
            PyDict_SetItemString(td, "masks", v) != 0) {
            if (!PyErr_Occurred())
                sr_raise_lib(rc, msg.text);
            Py_DECREF(v);
            return -1;
        }
        Py_DECREF(v);
    }
    return 0;
}

/* Sample i's label map as stored, (H, W) uint8 or (label_dtype='int64') int64. */
static PyObject *label_map(DatasetObject *self, uint64_t i)
{
    uint32_t w = 0, h = 0, max = 0;
    shr_msg msg = {{0}};
    int rc = shr_dataset_label_map(self->d, i, &w, &h, &max, NULL, 0, 0, &msg);
    if (rc)
        return sr_raise_lib(rc, msg.text);
    if (self->label_elem == 1 && max > 255)
        return PyErr_Format(PyExc_ValueError, "sample %llu's label map has value %u, above "
                            "255: open the Dataset with label_dtype='int64'",
                            (unsigned long long)i, max);
    Py_ssize_t dims[2] = {h, w};
    int wide = self->label_elem == 8;
    PyObject *v = sr_view_copy(NULL, wide ? "q" : "B", wide ? 8 : 1, 2, dims);
    if (!v)
        return NULL;
    if ((rc = shr_dataset_label_map(self->d, i, NULL, NULL, NULL, ((ViewObject *)v)->data,
                                    (size_t)((ViewObject *)v)->len, self->label_elem,
                                    &msg)) != 0) {
        Py_DECREF(v);
        return sr_raise_lib(rc, msg.text);
    }
    return v;
}

static PyObject *item_held(DatasetObject *self, Py_ssize_t i);

static PyObject *Dataset_getitem(DatasetObject *self, PyObject *key)
{
    if (check_open(self) < 0)
        return NULL;
    if (!PyIndex_Check(key))
        return sr_type_error(PyExc_TypeError, "Dataset indices must be integers, not ", key, "");
    Py_ssize_t i = PyNumber_AsSsize_t(key, PyExc_IndexError);
    if (i == -1 && PyErr_Occurred())
        return NULL;
    Py_ssize_t n = (Py_ssize_t)self->samples;
    if (i < 0)
        i += n;
    if (i < 0 || i >= n)
        return PyErr_Format(PyExc_IndexError, "Dataset index %R out of range (%zd samples)", key,
                            n);
    /* its shard held for the whole item (a dataset read on demand: downloaded first if need
     * be, and kept until the item is copied out) */
    int rc;
    shr_msg msg = {{0}};
    Py_BEGIN_ALLOW_THREADS
    rc = shr_dataset_hold(self->d, (uint64_t)i, &msg);
    Py_END_ALLOW_THREADS
    if (rc)
        return sr_raise_lib(rc, msg.text);
    PyObject *item = item_held(self, i);
    shr_dataset_unhold(self->d, (uint64_t)i);
    return item;
}

/* Sample i as Dataset_getitem delivers it, its shard held */
static PyObject *item_held(DatasetObject *self, Py_ssize_t i)
{
    shr_sample s;
    if (shr_dataset_sample(self->d, (uint64_t)i, &s, NULL) != 0)     /* (the shard is held) */
        return PyErr_Format(PyExc_IndexError, "Dataset index %zd out of range", i);
    Py_ssize_t dims[3] = {s.height, s.width, s.channels};
    PyObject *arr = sr_view_copy(NULL, "B", 1, 3, dims);
    if (!arr)
        return NULL;
    int rc;
    shr_msg msg = {{0}};
    void *dst = ((ViewObject *)arr)->data;
    size_t len = (size_t)((ViewObject *)arr)->len;
    Py_BEGIN_ALLOW_THREADS
    rc = shr_dataset_read(self->d, (uint64_t)i, dst, len, &s, &msg);
    Py_END_ALLOW_THREADS
    if (rc) {
        Py_DECREF(arr);
        return sr_raise_lib(rc, msg.text);
    }
    if (self->label_map) {
        PyObject *map = label_map(self, (uint64_t)i);
        if (!map) {
            Py_DECREF(arr);
            return NULL;
        }
        return sr_wrap(Py_BuildValue("(NN)", arr, map), 0);
    }
    if (self->targets) {
        shr_target t;
        if ((rc = shr_dataset_target(self->d, (uint64_t)i, &t, &msg)) != 0) {
            Py_DECREF(arr);
            return sr_raise_lib(rc, msg.text);
        }
        PyObject *td = sr_target_dict(&t);
        if (!td || add_segm(self, (uint64_t)i, t.count, td) != 0) {
            Py_XDECREF(td);
            Py_DECREF(arr);
            return NULL;
        }
        return sr_wrap(Py_BuildValue("(NN)", arr, td), 0);
    }
    return sr_wrap(Py_BuildValue("(NL)", arr, (long long)s.label), 0);
}

static PyObject *Dataset_sample(DatasetObject *self, PyObject *arg)
{
    if (check_open(self) < 0)
        return NULL;
    uint64_t i;
    if (sr_to_u64(arg, "index", &i) < 0)
        return NULL;
    shr_sample s;
    shr_msg msg = {{0}};
    int rc;
    Py_BEGIN_ALLOW_THREADS      /* (a dataset read on demand may download its shard) */
    rc = shr_dataset_sample(self->d, i, &s, &msg);
    Py_END_ALLOW_THREADS
    if (rc != 0 && rc != SHR_EINVAL)        /* the shard could not be had */
        return sr_raise_lib(rc, msg.text);
    if (rc != 0)
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
        sr_double_list(in.mean, nc), "std", sr_double_list(in.std, nc), "augment", in.augment,
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
        shr_msg msg = {{0}};
        int rc;
        Py_BEGIN_ALLOW_THREADS
        rc = shr_dataset_sample(self->d, i, &s, &msg);
        Py_END_ALLOW_THREADS
        if (rc != 0 && rc != SHR_EINVAL) {      /* the shard could not be had */
            Py_DECREF(labels);
            return sr_raise_lib(rc, msg.text);
        }
        if (rc != 0) {
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

/* The schema: a list of (name, type, count), type 'int', 'float', 'str' or 'bytes' (empty for a
 * dataset without fields). */
static PyObject *Dataset_field_defs(DatasetObject *self, PyObject *unused)
{
    if (check_open(self) < 0)
        return NULL;
    static const char *const names[] = {"", "int", "float", "str", "bytes"};
    PyObject *out = PyList_New(0);
    const char *name;
    uint32_t type, count;
    for (uint32_t k = 0; out && shr_dataset_field_def(self->d, k, &name, &type, &count) == 0;
         k++) {
        PyObject *t = Py_BuildValue("(ssI)", name, names[type <= 4 ? type : 0], count);
        if (!t || PyList_Append(out, t) < 0)
            Py_CLEAR(out);
        Py_XDECREF(t);
    }
    return out;
}

/* The fields of the samples at indices (a sequence of ints), one entry per schema field: numeric
 * fields as bytes (the n samples' values back to back, little-endian int64 / float64), str and
 * bytes fields as a list of n str / bytes. */
static PyObject *Dataset_fields(DatasetObject *self, PyObject *indices)
{
    if (check_open(self) < 0)
        return NULL;
    PyObject *seq = PySequence_List(indices);
    if (!seq)
        return NULL;
    Py_ssize_t n = PyList_Size(seq);
    uint32_t nf = 0, types[64], counts[64];
    while (nf < 64 && shr_dataset_field_def(self->d, nf, NULL, &types[nf], &counts[nf]) == 0)
        nf++;
    PyObject *out = nf ? PyList_New(nf) : NULL;
    if (!nf)
        PyErr_SetString(sr_argument_error, "this dataset has no fields (built without "
                        "Writer(fields=) or shardc build --fields)");
    for (uint32_t k = 0; out && k < nf; k++) {
        PyObject *col = types[k] <= SHR_FIELD_FLOAT
                        ? PyBytes_FromStringAndSize(NULL, n * 8 * (Py_ssize_t)(counts[k] ? counts[k] : 1))
                        : PyList_New(n);
        if (!col)
            Py_CLEAR(out);
        else if (PyList_SetItem(out, k, col) < 0)
            Py_CLEAR(out);
    }
    for (Py_ssize_t i = 0; out && i < n; i++) {
        long long idx = PyLong_AsLongLong(PyList_GetItem(seq, i));
        shr_field f[64];
        if (idx == -1 && PyErr_Occurred()) {
            Py_CLEAR(out);
            break;
        }
        shr_msg msg = {{0}};
        int rc = idx < 0 ? SHR_EINVAL : 0;
        /* fields kept in memory (a local dataset, or the skeletons a remote open read): no
         * shard to hold, nothing downloaded */
        int resident = shr_dataset_meta_resident(self->d);
        if (rc)
            snprintf(msg.text, sizeof msg.text, "a negative index");
        else if (!resident) {
            Py_BEGIN_ALLOW_THREADS
            rc = shr_dataset_hold(self->d, (uint64_t)idx, &msg);
            Py_END_ALLOW_THREADS
            if (rc && rc != SHR_EINVAL) {       /* the shard could not be had */
                sr_raise_lib(rc, msg.text);
                Py_CLEAR(out);
                break;
            }
        }
        if (rc || shr_dataset_fields(self->d, (uint64_t)idx, f, 64, &msg) != 0) {
            PyErr_Format(PyExc_IndexError, "Dataset index %lld: %s", idx, msg.text);
            if (!rc && !resident)
                shr_dataset_unhold(self->d, (uint64_t)idx);
            Py_CLEAR(out);
            break;
        }
        for (uint32_t k = 0; out && k < nf; k++) {
            PyObject *col = PyList_GetItem(out, k);
            if (types[k] <= SHR_FIELD_FLOAT) {
                size_t row = 8 * (size_t)f[k].count;
                memcpy(PyBytes_AsString(col) + (size_t)i * row, f[k].data, row);
                continue;
            }
            PyObject *v = types[k] == SHR_FIELD_STR
                          ? PyUnicode_DecodeUTF8(f[k].data, f[k].count, "strict")
                          : PyBytes_FromStringAndSize(f[k].data, f[k].count);
            if (!v || PyList_SetItem(col, i, v) < 0)
                Py_CLEAR(out);
        }
        if (!resident)
            shr_dataset_unhold(self->d, (uint64_t)idx);
    }
    Py_DECREF(seq);
    return out;
}

static PyMethodDef Dataset_methods[] = {
    {"_field_defs", (PyCFunction)Dataset_field_defs, METH_NOARGS,
     "_field_defs() -> [(name, type, count), ...]: the schema of the dataset's fields."},
    {"_fields", (PyCFunction)Dataset_fields, METH_O,
     "_fields(indices) -> one entry per field: bytes of the int64 / float64 values of\n"
     "numeric fields, lists of str / bytes (internal: Dataset and Loader fields=)."},
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

PyType_Spec Dataset_spec = {
    .name = "shardread.Dataset",
    .basicsize = sizeof(DatasetObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .slots = Dataset_slots,
};
