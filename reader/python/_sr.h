/* _sr.h - what the files of the extension module _shardread share (private to the module, which
 * is built from all of them; the design notes are at the top of _shardread.c):
 *   _shardread.c      the module: errors, converters, module-wide objects, PyInit
 *   _sr_batch.c       a batch's lifetime and delivery: _View, _Ring, _Batch, the fences, the
 *                     tuple a Loader yields (with return_params="ops", each sample's ops)
 *   _sr_dataset.c     Dataset: single samples
 *   _sr_loader.c      Loader: positions, rings, iteration, state_dict, the torch subclass
 *   _sr_options.c     Loader(...)'s keywords into shr_options
 *   _sr_stats.c       the Loader's pipeline statistics and stage timing
 * Shared names carry the prefix sr_ (the types keep CPython's naming: ViewObject, View_spec).
 */
#ifndef SR_PRIVATE_H
#define SR_PRIVATE_H

#define PY_SSIZE_T_CLEAN
#ifndef Py_LIMITED_API
#define Py_LIMITED_API 0x030B0000
#endif
#include <Python.h>

#include <stdint.h>
#include <sys/types.h>

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

/* ---- _shardread.c: helpers, module-wide objects, errors, converters ---- */

/* Free an object of one of this module's heap types, and drop the reference its instance held
 * on the type. */
void sr_free_object(PyObject *self);

/* The UTF-8 text of a str (NULL, with an error set, if it has none). */
const char *sr_utf8(PyObject *o);

/* o is the str s */
int sr_str_is(PyObject *o, const char *s);

/* The name of o's type, for messages (a new reference). */
PyObject *sr_type_name(PyObject *o);

/* PyErr_Format(exc, "<prefix> %U<suffix>") with o's type name; returns NULL */
PyObject *sr_type_error(PyObject *exc, const char *prefix, PyObject *o, const char *suffix);

/* module-wide objects (created once at import) */
extern PyObject *sr_error;          /* shardread.Error and its subclasses */
extern PyObject *sr_corrupt_error;
extern PyObject *sr_argument_error;
extern PyObject *sr_shape_error;
extern PyObject *sr_not_found_error;
extern PyObject *sr_read_error;
extern PyObject *sr_state_error;
extern PyObject *sr_unsupported_error;
extern PyObject *sr_torch_loader;   /* Loader subclassing torch's IterableDataset, made lazily */
extern PyObject *sr_wrap_hook;      /* wrap(parts, torch): _Views into arrays (see _set_wrap) */
extern PyObject *sr_fence_hook;     /* fence() -> event, or None (see _set_fence) */
extern int sr_fence_all;            /* fence every batch, pinned or not (tests) */
extern PyTypeObject *DatasetType, *RingType, *BatchType, *ViewType, *LoaderType,
    *LoaderIterType;

/* Raise the Python exception for library code rc with message msg (the library's, naming the
 * file). The exception carries .code (rc) and .reason (shr_strerror(rc)). Returns NULL. */
PyObject *sr_raise_lib(int rc, const char *msg);

/* access= ('mmap' when None or absent, 'pread', 'direct'). 0, or -1 with ValueError. */
int sr_parse_access(PyObject *s, shr_access *out);

/* A path argument (str or os.PathLike) as bytes in the filesystem encoding. */
PyObject *sr_fs_path(PyObject *path);

/* A list of n floats. */
PyObject *sr_double_list(const double *v, uint32_t n);

/* A uint64 from a Python int (ValueError if negative or too large). */
int sr_to_u64(PyObject *o, const char *what, uint64_t *out);
/* A choice keyword into its row's value (reader/options.def, the row of field; _sr_options.c):
 * the row's names exactly, or with loose also in any case and numpy / torch dtypes; refused
 * (ArgumentError) naming the keyword and the names. */
int sr_choose_row(PyObject *o, const char *field, int loose, int *out);
/* v for the scalar row of field, checked in the library's words naming keyword (ArgumentError);
 * no_zero: the keyword's None is the row's 0, and 0 is refused (_sr_options.c). */

/* A uint32 in lo..UINT32_MAX from a Python int. */
int sr_to_u32(PyObject *o, const char *what, uint32_t lo, uint32_t *out);

/* ---- _sr_batch.c: views, rings and batches ---- */

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
     * in flight" in _shardread.c): given back once their event has completed, oldest first */
    struct fenced {
        const shr_batch *b;
        PyObject *event;        /* has query() -> bool and synchronize() */
    } *fenced;
    uint32_t nfenced;
} RingObject;

/* A _View of data (C-contiguous, ndim <= 4 dimensions of shape, items of format). With an owner,
 * data belongs to it and the view holds a reference; without, data was malloc'd and the view
 * takes it (freed with the view, or here if the view cannot be made). */
PyObject *sr_new_view(void *data, PyObject *owner, const char *format, Py_ssize_t itemsize,
                      int ndim, const Py_ssize_t *shape);

/* A _View holding a copy of len bytes at src (zeros when src is NULL). */
PyObject *sr_view_copy(const void *src, const char *format, Py_ssize_t itemsize, int ndim,
                       const Py_ssize_t *shape);

/* The package's form of parts (a tuple of _Views and plain objects): wrap(parts, torch), through
 * sr_wrap_hook; without it, the parts as they are. Steals parts. */
PyObject *sr_wrap(PyObject *parts, int torch);

/* A detection target as torchvision's detection models take it (arrays as _Views, copies). */
PyObject *sr_target_dict(const shr_target *t);

/* Give back the fenced batches whose events have completed; then wait for the oldest until at
 * most `keep` buffers are out of the workers' hands (held by Python or fenced). 0 or -1. */
int sr_drain_fenced(RingObject *ring, uint32_t keep);

extern PyType_Spec View_spec, Ring_spec, Batch_spec;

/* ---- _sr_loader.c, _sr_options.c: the Loader ---- */

enum { FW_NUMPY = 0, FW_TORCH };

typedef struct {
    PyObject_HEAD
    PyObject *path;             /* as given (str or PathLike), for repr */
    PyObject *path_bytes;       /* filesystem encoding */
    PyObject *cache_bytes;      /* o.cache's storage (a dataset at a URL), or NULL */
    PyObject *flip_bytes;       /* o.flip_indices's storage (uint32 each), or NULL */
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
    /* a mixture (_sr_mixture.c): (streams, samples_per_epoch, offset_labels, return_streams),
     * streams a tuple of (path, weight, repeat, choose, on_error); NULL for one dataset */
    PyObject *mixture;
    int return_streams;         /* batches carry each sample's stream after the indices */
    int timing;                 /* stage timing on for every reader it opens (_sr_stats.c) */
    int label_elem;             /* a label-map dataset's maps: 1 (uint8) or 8 (int64) bytes a
                                 * value; 0: not given (uint8) */
} LoaderObject;

/* _sr_mixture.c: path= given as a mixture's tuple: keep it, and the first stream's path as the
 * Loader's. 1 (it was one), 0 (not one), -1 (error set). */
int sr_mixture_path(LoaderObject *self, PyObject *path);

/* shr_open_mixture over self->mixture with options o (the GIL released while it opens). */
int sr_mixture_open(LoaderObject *self, shr_reader **r, const shr_options *o, shr_msg *msg);

/* A yes/no keyword: a bool, 0 or 1, or a numpy bool; anything else is a TypeError naming it. */
int sr_flag_named(PyObject *o, const char *what, int *out);

/* label_dtype=: 'uint8' or 'int64' (or numpy's or torch's dtype of that name) as the bytes of a
 * label map's value, 1 or 8; None: 0. 0, or -1 with a ValueError naming the keyword. */
int sr_label_dtype(PyObject *o, int *elem);

/* Loader(...)'s arguments into self: the options (self->o), the share, what batches carry, the
 * path. 0, or -1 with an exception set. (_sr_options.c) */
int sr_loader_options(LoaderObject *self, PyObject *args, PyObject *kw);

/* The arrays (or tensors) of batch b of ring, as the tuple next() returns. (_sr_batch.c) */
PyObject *sr_deliver(LoaderObject *self, RingObject *ring, const shr_batch *b);

extern PyType_Spec Loader_spec, LoaderIter_spec;

/* ---- _sr_stats.c: the Loader's pipeline statistics ---- */

/* A reader just opened for self: its stage timing as the Loader's. */
void sr_stats_apply(LoaderObject *self, shr_reader *r);
PyObject *sr_loader_stage_timing(LoaderObject *self, PyObject *args);
PyObject *sr_loader_pipeline_stats(LoaderObject *self, PyObject *unused);
PyObject *sr_loader_fill_events(LoaderObject *self, PyObject *unused);
PyObject *sr_loader_active_threads(LoaderObject *self, void *closure);

/* ---- _sr_dataset.c ---- */

extern PyType_Spec Dataset_spec;

#endif
