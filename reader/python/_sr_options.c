/* _sr_options.c - the Loader's keywords (part of the _shardread module; _sr.h): Loader(...)'s
 * arguments checked and put into the library's shr_options and the Loader's own fields, with a
 * message naming the keyword for each one refused. The package's Python Loader takes
 * torchvision's forms of the augmentations and passes these in the C library's terms.
 */
#include "_sr.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* ---- flags, the share, the defaults ---- */

/* A yes/no keyword: a bool, 0 or 1, or a numpy bool; anything else (a string, None, 2) is a
 * TypeError naming the keyword, never taken as true. */
int sr_flag_named(PyObject *o, const char *what, int *out)
{
    int ok = PyBool_Check(o);
    if (!ok && PyLong_Check(o)) {
        long v = PyLong_AsLong(o);
        if (v == -1 && PyErr_Occurred())
            PyErr_Clear();
        ok = v == 0 || v == 1;
    }
    if (!ok) {
        PyObject *n = sr_type_name(o);
        /* numpy's bool: numpy.bool_ in numpy 1, numpy.bool in numpy 2 */
        PyObject *mod = n ? PyObject_GetAttrString((PyObject *)Py_TYPE(o), "__module__") : NULL;
        if (!mod)
            PyErr_Clear();
        ok = n && mod && PyUnicode_Check(mod) &&
             PyUnicode_CompareWithASCIIString(mod, "numpy") == 0 &&
             (PyUnicode_CompareWithASCIIString(n, "bool_") == 0 ||
              PyUnicode_CompareWithASCIIString(n, "bool") == 0);
        Py_XDECREF(mod);
        Py_XDECREF(n);
    }
    if (!ok) {
        PyObject *n = sr_type_name(o);
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

/* v for the scalar row of field in the options table (reader/options.def), checked in the
 * library's words naming `keyword` (NULL: the row's public name; ArgumentError, as at the
 * open): 0, or -1 with the error set. no_zero: the keyword's None is the row's 0 (the default,
 * or off), and 0 itself is refused: the row's range without it (prefetch: 2..65536; "at least
 * 0": at least 1 for an integer; mixup's 0 <= v < 1e6: 0 < v < 1e6). type_max: the most the
 * field's C type holds, 0 for none: a value past it is refused with it as the bound of an
 * unbounded row ("batch_size must be in 1..4294967295"). */
static int check_row(const char *field, const char *keyword, double v, int no_zero,
                     double type_max)
{
    const shr_option_info *r = shr_option_find(field);
    if (!r || r->count != 1 || r->form == SHR_OPT_CHOICE) {
        PyErr_Format(PyExc_SystemError, "no scalar number row %s in the options table", field);
        return -1;
    }
    shr_option_info row = *r;
    if (no_zero) {
        if (row.form == SHR_OPT_ZERO_OR_RANGE)
            row.form = SHR_OPT_RANGE;
        else if (row.lo == 0 && !row.is_float && row.form != SHR_OPT_ABOVE &&
                 row.form != SHR_OPT_OPEN)
            row.lo = 1;
        else if (row.lo == 0 && row.form == SHR_OPT_BELOW)
            row.form = SHR_OPT_OPEN;
    }
    if (type_max > 0 && row.form == SHR_OPT_AT_LEAST && !(v <= type_max)) {
        row.form = SHR_OPT_RANGE;
        row.hi = type_max;
    }
    shr_msg why;
    if (shr_option_check(&row, keyword, &v, &why) != 0) {
        sr_raise_lib(SHR_EINVAL, why.text);
        return -1;
    }
    return 0;
}

/* An integer keyword for a uint32_t field of the options table: with now, refused here in the
 * row's words where outside its range; without, only where the field cannot hold it (negative,
 * or past 32 bits), in the row's words too. */
static int int_row(PyObject *v, const char *keyword, const char *field, int no_zero, int now,
                   uint32_t *out)
{
    uint64_t x;
    PyObject *i = PyNumber_Index(v);
    if (!i) {
        if (!PyErr_ExceptionMatches(PyExc_TypeError))
            return -1;
        PyErr_Clear();
        return sr_to_u64(v, keyword, &x);           /* its TypeError, naming the keyword */
    }
    int overflow = 0;
    long long ll = PyLong_AsLongLongAndOverflow(i, &overflow);
    double d = overflow ? PyLong_AsDouble(i) : (double)ll;
    Py_DECREF(i);
    if (d == -1.0 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError))
            return -1;
        PyErr_Clear();
        d = overflow > 0 ? HUGE_VAL : -HUGE_VAL;
    }
    /* the row's range, within the field's type: 0 <= integer rows' lo, so d fits once taken */
    if ((now || !(d >= 0 && d <= UINT32_MAX)) &&
        check_row(field, keyword, d, no_zero, UINT32_MAX) < 0)
        return -1;
    if (!(d >= 0 && d <= UINT32_MAX)) {             /* a row wider than its field */
        PyErr_Format(PyExc_SystemError, "%s: the row of %s is wider than its field", keyword,
                     field);
        return -1;
    }
    *out = (uint32_t)ll;
    return 0;
}

/* An integer keyword for a uint32_t field of the options table, refused here in the library's
 * words from the row, whatever the int given (negative, or past the field's 32 bits): where the
 * keyword's value is not passed to the open as it is, or under a name of its own (max_threads:
 * threads with threads='auto'; world, the Loader's share), and for the rows checked always
 * (batch_size, threads), so that -1 or 2**40 is told the row's range, not the C type's. */
static int row_u32(PyObject *v, const char *keyword, const char *field, int no_zero,
                   uint32_t *out)
{
    return int_row(v, keyword, field, no_zero, 1, out);
}

/* A row checked at the open, under its condition (quasi_window with order='quasi', the
 * auto_augment keys): here only a value its uint32_t field cannot hold is refused, in the
 * row's words. */
static int held_u32(PyObject *v, const char *keyword, const char *field, uint32_t *out)
{
    return int_row(v, keyword, field, 0, 0, out);
}

/* rank and world when not given: torch.distributed's when it is initialised, else the RANK and
 * WORLD_SIZE environment variables, else 0 of 1. */
static int default_share(PyObject *rank_arg, PyObject *world_arg, uint32_t *rank, uint32_t *world)
{
    *rank = 0;
    *world = 1;
    int have_rank = rank_arg && rank_arg != Py_None, have_world = world_arg && world_arg != Py_None;
    if (have_rank && sr_to_u32(rank_arg, "rank", 0, rank) < 0)
        return -1;
    if (have_world && row_u32(world_arg, "world", "world", 0, world) < 0)
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
            int bad = !w || (!have_rank && sr_to_u32(r, "torch.distributed rank", 0, rank) < 0) ||
                      (!have_world &&
                       row_u32(w, "torch.distributed world size", "world", 0, world) < 0);
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

/* threads= a number, None (the cores, at most 4) or "auto" (threads_auto, with max_threads
 * workers at most: default the cores, at most 8; its range is the threads row's); max_threads=
 * only with "auto" */
static int sr_threads(PyObject *threads, PyObject *max_threads, shr_options *o)
{
    if (PyUnicode_Check(threads)) {
        if (!sr_str_is(threads, "auto")) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "threads must be a number or 'auto', not %R",
                             threads);
            return -1;
        }
        o->threads_auto = 1;
        if (max_threads != Py_None)
            return row_u32(max_threads, "max_threads", "threads", 0, &o->threads);
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        o->threads = n < 1 ? 1 : n > 8 ? 8 : (uint32_t)n;
        return 0;
    }
    if (max_threads != Py_None) {
        PyErr_SetString(PyExc_TypeError, "max_threads= is for threads='auto'");
        return -1;
    }
    if (threads == Py_None)
        o->threads = (uint32_t)default_threads();
    else if (row_u32(threads, "threads", "threads", 0, &o->threads) < 0)
        return -1;
    return 0;
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

/* ---- values ---- */

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

/* A choice's text as the keywords that take Python forms match it: a str as it is, a type by
 * its name (numpy.float32), anything else by str() (dtype('float32'), torch.float32), without
 * torch's "torch." prefix; a new reference, or NULL with an exception set. */
static PyObject *choice_text(PyObject *o)
{
    PyObject *str;
    if (PyUnicode_Check(o))
        str = Py_NewRef(o);
    else if (PyType_Check(o))
        str = PyObject_GetAttrString(o, "__name__");        /* numpy.float32 */
    else
        str = PyObject_Str(o);                              /* dtype('float32'), torch.float32 */
    const char *s = str ? sr_utf8(str) : NULL;
    if (s && strncmp(s, "torch.", 6) == 0) {
        PyObject *bare = PyUnicode_FromString(s + 6);
        Py_DECREF(str);
        return bare;
    }
    if (str && !s)
        Py_CLEAR(str);
    return str;
}

/* A name among names[] (case-insensitive); also a numpy or torch dtype, by its name: the
 * extension's own choices, which the options table does not hold (label_dtype, the package's
 * scale modes). */
static int choose(PyObject *o, const char *what, const char *const *names, int n, int *out)
{
    PyObject *str = choice_text(o);
    const char *s = str ? sr_utf8(str) : NULL;
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

/* A choice keyword into the value of its row of the options table (reader/options.def, the
 * row of `field`): one of the row's names, exactly; with loose (the keywords that take Python
 * forms), also in any case and as choice_text gives a numpy or torch dtype. Refused with the
 * library's words, naming the keyword and the accepted names (ArgumentError). */
int sr_choose_row(PyObject *o, const char *field, int loose, int *out)
{
    const shr_option_info *r = shr_option_find(field);
    if (!r || r->form != SHR_OPT_CHOICE) {
        PyErr_Format(PyExc_SystemError, "no choice row %s in the options table", field);
        return -1;
    }
    /* strict, a value not a str matches nothing, nor does one whose text cannot be had (its
     * str() raises, or is not UTF-8): the refusal shows it as Python writes it */
    int shown_as_repr = !loose && !PyUnicode_Check(o);
    PyObject *str = shown_as_repr ? NULL : loose ? choice_text(o) : Py_NewRef(o);
    const char *s = str ? sr_utf8(str) : NULL;
    if (!s) {
        PyErr_Clear();
        Py_XDECREF(str);
        shown_as_repr = 1;
        if (!(str = PyUnicode_FromString("")) || !(s = sr_utf8(str))) {
            Py_XDECREF(str);
            return -1;
        }
    }
    for (int i = 0; loose && r->choices[i]; i++)
        if (r->choices[i][0] && strcasecmp(s, r->choices[i]) == 0)
            s = r->choices[i];                              /* the table's spelling */
    shr_msg why;
    int rc = shr_option_choose(r, NULL, s, out, &why);
    Py_DECREF(str);
    if (!rc)
        return 0;
    size_t len = strlen(why.text), tail = strlen(", not ''");
    if (shown_as_repr && len >= tail && strcmp(why.text + len - tail, ", not ''") == 0) {
        why.text[len - tail] = '\0';
        PyErr_Format(sr_argument_error, "%s, not %R", why.text, o);
    } else {
        sr_raise_lib(SHR_EINVAL, why.text);
    }
    return -1;
}

int sr_label_dtype(PyObject *o, int *elem)
{
    static const char *const names[] = {"uint8", "int64"};
    int v;
    *elem = 0;
    if (o == Py_None)
        return 0;
    if (choose(o, "label_dtype (uint8 or int64)", names, 2, &v) < 0)
        return -1;
    *elem = v ? 8 : 1;
    return 0;
}

/* The read-time transform keywords into o (see the Loader's docstring). */
static int transform_options(shr_options *o, PyObject *flip, PyObject *rrc, PyObject *ratio,
                             PyObject *interpolation, PyObject *dtype, PyObject *layout,
                             PyObject *mean, PyObject *std)
{
    if (PyFloat_Check(flip)) {
        o->flip = 1;
        o->flip_p = PyFloat_AsDouble(flip);     /* its range: options.def, checked at the open */
    } else if (sr_flag_named(flip, "flip (a bool or a probability)", &o->flip) < 0) {
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
    /* the choices' names: options.def's rows, in any case and as numpy or torch dtypes */
    if (interpolation != Py_None) {
        if (sr_choose_row(interpolation, "filter", 1, &v) < 0)
            return -1;
        o->filter = (shr_filter)v;
    }
    if (dtype != Py_None) {
        if (sr_choose_row(dtype, "dtype", 1, &v) < 0)
            return -1;
        o->dtype = (shr_dtype)v;
    }
    if (layout != Py_None) {
        if (sr_choose_row(layout, "layout", 1, &v) < 0)
            return -1;
        o->layout = (shr_layout)v;
    }
    int dataset_mean = PyUnicode_Check(mean) && sr_str_is(mean, "dataset");
    if (dataset_mean) {
        if (std != Py_None && !(PyUnicode_Check(std) &&
                                sr_str_is(std, "dataset"))) {
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

/* scale=(mode, sizes, max_size, (lo, hi), dense): the library's detection geometry
 * (shardread.h, "Scale"); the package's Loader takes multiscale=, scale_jitter=, letterbox=
 * and pad_to= and passes this, checked. mode is 'multiscale' (sizes, max_size, dense: each
 * image dense at the start of its sample, for the list of per-image views), 'jitter'
 * ((lo, hi)), 'letterbox', 'natural' (dense: each image at its stored size) or 'resize'
 * (sizes: one, max_size or None: Resize then CenterCrop to the size); the unused
 * items are None. */
static int scale_options(shr_options *o, PyObject *scale)
{
    int mode;
    static const char *const modes[] = {"none", "multiscale", "jitter", "letterbox", "natural",
                                        "resize"};
    if (!PyTuple_Check(scale) || PyTuple_Size(scale) != 5) {
        PyErr_Format(PyExc_TypeError, "scale must be a (mode, sizes, max_size, range, dense) "
                     "tuple, not %R", scale);
        return -1;
    }
    if (choose(PyTuple_GetItem(scale, 0), "scale mode (multiscale, jitter, letterbox, "
               "natural or resize)", modes, 6, &mode) < 0)
        return -1;
    o->scale = (shr_scale)mode;
    PyObject *sizes = PyTuple_GetItem(scale, 1), *max = PyTuple_GetItem(scale, 2),
             *range = PyTuple_GetItem(scale, 3);
    if (sizes != Py_None) {
        PyObject *t = PySequence_Check(sizes) ? PySequence_Tuple(sizes) : NULL;
        Py_ssize_t n = t ? PyTuple_Size(t) : -1;
        if (n < 1 || n > SHR_SCALE_MAX_SIZES) {
            Py_XDECREF(t);
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "scale sizes must be 1 to %d ints, not %R",
                         SHR_SCALE_MAX_SIZES, sizes);
            return -1;
        }
        for (Py_ssize_t i = 0; i < n; i++)
            if (sr_to_u32(PyTuple_GetItem(t, i), "scale size", 1, &o->scale_sizes[i]) < 0) {
                Py_DECREF(t);
                return -1;
            }
        o->scale_nsizes = (uint32_t)n;
        Py_DECREF(t);
    }
    if (max != Py_None && sr_to_u32(max, "scale max_size", 1, &o->scale_max) < 0)
        return -1;
    if (range != Py_None && float_pair(range, "scale range", o->scale_range) < 0)
        return -1;
    return sr_flag_named(PyTuple_GetItem(scale, 4), "scale dense", &o->scale_dense);
}

/* ---- Loader(...) ---- */

/* flip_indices=: a sequence of ints 0 .. 2^32 - 1 (the library checks them against the
 * dataset's keypoints), kept in self->flip_bytes for o.flip_indices */
static int flip_index_options(LoaderObject *self, PyObject *v)
{
    PyObject *seq = PyUnicode_Check(v) || PyBytes_Check(v) ? NULL : PySequence_Tuple(v);
    if (!seq) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "flip_indices must be a sequence of ints, not %R", v);
        return -1;
    }
    Py_ssize_t n = PyTuple_Size(seq);
    if (n < 1 || n > 65536) {
        PyErr_Format(PyExc_ValueError, "flip_indices must have 1 .. 65536 entries, not %zd", n);
        Py_DECREF(seq);
        return -1;
    }
    PyObject *bytes = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(uint32_t));
    uint32_t *dst = bytes ? (uint32_t *)PyBytes_AsString(bytes) : NULL;
    for (Py_ssize_t i = 0; dst && i < n; i++) {
        PyObject *x = PyTuple_GetItem(seq, i);
        if (!x || PyBool_Check(x) || !PyIndex_Check(x)) {
            if (x)
                PyErr_Format(PyExc_TypeError, "flip_indices entries must be ints, not %R", x);
            dst = NULL;
        } else if (sr_to_u32(x, "flip_indices entry", 0, &dst[i]) < 0) {
            dst = NULL;
        }
    }
    Py_DECREF(seq);
    if (!dst) {
        Py_XDECREF(bytes);
        return -1;
    }
    Py_XDECREF(self->flip_bytes);
    self->flip_bytes = bytes;
    self->o.flip_indices = dst;
    self->o.num_flip_indices = (uint32_t)n;
    return 0;
}

int sr_loader_options(LoaderObject *self, PyObject *args, PyObject *kw)
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
                             "min_box_area_fraction", "mixup_alpha", "cutmix_alpha",
                             "num_classes", "erase_random", "scale", "unit", "max_threads",
                             "cache", "cache_limit", "prefetch_shards", "flip_indices", "label_dtype",
                             NULL};
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
    PyObject *mixup = Py_None, *cutmix = Py_None, *num_classes = Py_None,
             *erase_random = Py_False, *scale = Py_None, *unit = Py_None,
             *max_threads = Py_None;
    PyObject *cache = Py_None, *cache_limit = Py_None, *prefetch_shards = Py_None,
             *flip_indices = Py_None, *label_dtype = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw,
                                     "O|OOOOOOOOOOOOOOOOOOOOOOOOOOOOO$OOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOO:Loader",
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
                                     &targets, &min_box, &mixup, &cutmix, &num_classes,
                                     &erase_random, &scale, &unit, &max_threads, &cache,
                                     &cache_limit, &prefetch_shards, &flip_indices,
                                     &label_dtype))
        return -1;
    if (self->ring) {
        PyErr_SetString(PyExc_RuntimeError, "a Loader cannot be initialised twice");
        return -1;
    }
    shr_options *o = &self->o;
    shr_options_init(o);
    int v;
    /* batch_size's and threads' ranges: options.def's (row_u32) */
    if (batch_size && row_u32(batch_size, "batch_size", "batch_size", 0, &o->batch_size) < 0)
        return -1;
    if (sr_flag_named(shuffle, "shuffle", &v) < 0)
        return -1;
    o->order = v ? SHR_ORDER_RANDOM : SHR_ORDER_SEQUENTIAL;
    if (order != Py_None) {     /* options.def's names, exactly */
        if (sr_choose_row(order, "order", 0, &v) < 0)
            return -1;
        o->order = (shr_order)v;
    }
    if (seed && sr_to_u64(seed, "seed", &o->seed) < 0)
        return -1;
    if (sr_threads(threads, max_threads, o) < 0)
        return -1;
    if (default_share(rank, world, &self->rank, &self->world) < 0)
        return -1;
    if (sr_flag_named(drop_last, "drop_last", &o->drop_last) < 0)
        return -1;
    if (size != Py_None) {
        if (PyLong_Check(size)) {
            if (sr_to_u32(size, "size", 1, &o->height) < 0)
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
            if (sr_to_u32(h, "size height", 1, &o->height) < 0 ||
                sr_to_u32(w, "size width", 1, &o->width) < 0)
                return -1;
        }
        /* the library's output limit (shardread.h, SHR_MAX_SIDE), said in this keyword's terms */
        if (o->width > SHR_MAX_SIDE || o->height > SHR_MAX_SIDE ||
            (uint64_t)o->width * o->height > SHR_MAX_PIXELS) {
            PyErr_Format(PyExc_ValueError, "size %R is past the output size limit: each side "
                         "at most %u and height x width at most %u pixels", size, SHR_MAX_SIDE,
                         SHR_MAX_PIXELS);
            return -1;
        }
    }
    if (sr_flag_named(random_crop, "random_crop", &o->random_crop) < 0 ||
        transform_options(o, flip, rrc, ratio, interpolation, dtype, layout, mean, std) < 0)
        return -1;
    if (PyUnicode_Check(return_params) &&
        PyUnicode_CompareWithASCIIString(return_params, "ops") == 0)
        self->return_params = 2;    /* each sample's ops in torchvision's terms */
    else if (sr_flag_named(return_params, "return_params (True, False or 'ops')",
                        &self->return_params) < 0)
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
        if (sr_choose_row(aug_interp, "aug_interpolation", 1, &fi) < 0)
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
        if (sr_choose_row(auto_aug, "auto_augment", 1, &pi) < 0)
            return -1;
        o->auto_augment = (shr_auto_augment)pi;
    }
    if (sr_flag_named(targets, "targets", &self->targets) < 0)
        return -1;
    /* a detection dataset read without targets=True: its targets are not moved at all (the
     * masks of a segmentation set were two thirds of a batch's time, then dropped) */
    o->skip_targets = !self->targets;
    if (flip_indices != Py_None && flip_index_options(self, flip_indices) < 0)
        return -1;
    if (min_box != Py_None &&
        (o->min_box_area_fraction = PyFloat_AsDouble(min_box)) == -1.0 && PyErr_Occurred())
        return -1;
    if (scale != Py_None && scale_options(o, scale) < 0)
        return -1;
    /* MixUp / CutMix and RandomErasing's random value */
    /* (None is off there, so a 0 is refused: the row's range without its 0) */
    if ((mixup != Py_None && (((o->mixup_alpha = PyFloat_AsDouble(mixup)) == -1.0 &&
                               PyErr_Occurred()) ||
                              check_row("mixup_alpha", NULL, o->mixup_alpha, 1, 0) < 0)) ||
        (cutmix != Py_None && (((o->cutmix_alpha = PyFloat_AsDouble(cutmix)) == -1.0 &&
                                PyErr_Occurred()) ||
                               check_row("cutmix_alpha", NULL, o->cutmix_alpha, 1, 0) < 0)) ||
        (num_classes != Py_None &&
         row_u32(num_classes, "num_classes", "num_classes", 1, &o->num_classes) < 0) ||
        sr_flag_named(erase_random, "erase_random", &o->erase_random) < 0)
        return -1;
    if (unit != Py_None) {      /* ToTensor's 0..1: scale=255 in the package's Loader */
        double u = PyFloat_AsDouble(unit);
        if (u == -1.0 && PyErr_Occurred())
            return -1;
        o->unit = (float)u;
    }
    uint32_t *aa_dst[3] = {&o->aa_num_ops, &o->aa_magnitude, &o->aa_bins};
    static const char *const aa_fields[3] = {"aa_num_ops", "aa_magnitude", "aa_bins"};
    static const char *const aa_names[3] = {"auto_augment num_ops", "auto_augment magnitude",
                                            "auto_augment num_magnitude_bins"};
    for (int k = 0; k < 3; k++)
        if (aa[k] != Py_None && held_u32(aa[k], aa_names[k], aa_fields[k], aa_dst[k]) < 0)
            return -1;
    if (on_error != Py_None) {
        if (sr_choose_row(on_error, "on_error", 0, &v) < 0)
            return -1;
        o->on_error = (shr_on_error)v;
    }
    if (sr_flag_named(verify_samples, "verify_samples", &o->verify_samples) < 0 ||
        sr_flag_named(return_recovery, "return_recovery", &self->return_recovery) < 0)
        return -1;
    shr_access a;
    if (sr_parse_access(access, &a) < 0)
        return -1;
    o->access = a;
    self->framework = FW_NUMPY;
    if (framework && framework != Py_None) {
        const char *s = PyUnicode_Check(framework) ? sr_utf8(framework) : NULL;
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
    if (sr_flag_named(return_indices, "return_indices", &self->return_indices) < 0)
        return -1;
    if (prefetch == Py_None) {
        /* one more than the library's default: while next() waits, the for loop's variables
         * still hold the previous batch */
        o->prefetch = o->threads + 3 > 65536 ? 65536 : o->threads + 3;
    } else if (row_u32(prefetch, "prefetch", "prefetch", 1, &o->prefetch) < 0) {
        return -1;
    }
    if (sr_flag_named(pin_memory, "pin_memory", &v) < 0)
        return -1;
    o->pin = v ? SHR_PIN_AUTO : SHR_PIN_OFF;
    /* torchrun's LOCAL_RANK: the device a worker thread without a CUDA context pins on (the
     * package reads the environment; the library reads none) */
    o->pin_device = shr_pin_device_from_env(getenv);
    if (uneven != Py_None) {
        if (sr_choose_row(uneven, "uneven", 0, &v) < 0)
            return -1;
        o->uneven = (shr_uneven)v;
    }
    /* quasi_window's range: options.def's, stated by the open's refusal (with order='quasi') */
    if (quasi_window &&
        held_u32(quasi_window, "quasi_window", "quasi_window", &o->quasi_window) < 0)
        return -1;
    /* a dataset at a URL read as its shards arrive (the package passes these for one) */
    if (cache != Py_None) {
        PyObject *cb = sr_fs_path(cache);
        if (!cb)
            return -1;
        XSETREF(self->cache_bytes, cb);
        o->cache = PyBytes_AsString(cb);
    }
    if (cache_limit != Py_None && sr_to_u64(cache_limit, "cache_limit", &o->cache_limit) < 0)
        return -1;
    if (prefetch_shards != Py_None &&
        row_u32(prefetch_shards, "prefetch_shards", "prefetch_shards", 1,
                &o->prefetch_shards) < 0)
        return -1;
    if (sr_label_dtype(label_dtype, &self->label_elem) < 0)
        return -1;
    /* int64 maps are moved as uint16 ones (every label a build stores), then widened */
    o->label_map_bytes = self->label_elem == 8 ? 2 : 1;
    int mixed = sr_mixture_path(self, path);
    if (mixed)
        return mixed < 0 ? -1 : 0;
    PyObject *b = sr_fs_path(path);
    if (!b)
        return -1;
    XSETREF(self->path_bytes, b);
    XSETREF(self->path, PyOS_FSPath(path));
    if (!self->path)
        return -1;
    return 0;
}
