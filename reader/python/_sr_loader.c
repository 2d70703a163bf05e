/* _sr_loader.c - shardread.Loader (part of the _shardread module; _sr.h): the position of the next
 * batch (epoch, cursor, and the positions consumed before a resumed epoch), the _Ring it reads
 * from, opened again whenever that position is not where the ring stands (load_state_dict,
 * set_epoch, an abandoned iteration, a forked child); iteration; state_dict and
 * load_state_dict, also across world sizes; and, once torch.utils.data is imported, the
 * subclass that is also a torch IterableDataset. Its keywords are parsed in _sr_options.c and
 * its batches delivered by _sr_batch.c.
 */
#include "_sr.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The epochs a Loader reads are 0 .. MAX_EPOCH (2**63 - 1, what a state's epoch may be). After
 * the last batch of epoch MAX_EPOCH the Loader stays at (MAX_EPOCH, its batch count), a state
 * that loads; an iteration that would start epoch MAX_EPOCH + 1 is refused (OverflowError). */
#define MAX_EPOCH ((uint64_t)INT64_MAX)

static int past_last_epoch(void)
{
    PyErr_SetString(PyExc_OverflowError, "the Loader has read its last epoch, 2**63 - 1 (epochs "
                    "are 0 .. 2**63 - 1): set_epoch or load_state_dict to read another");
    return -1;
}

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
    shr_msg why = {{0}};
    if (self->mixture) {
        rc = sr_mixture_open(self, &r, &o, &why);
    } else {
        Py_BEGIN_ALLOW_THREADS
        rc = shr_open(&r, PyBytes_AsString(self->path_bytes), &o, &why);
        Py_END_ALLOW_THREADS
    }
    if (rc) {
        Py_DECREF(ring);
        char msg[1024];
        snprintf(msg, sizeof msg, "%s%s", why.text, rc != SHR_ESHAPE ? "" :
                 "; pass size=(height, width) (or size=N for N x N) to crop or pad every sample "
                 "to one size");
        sr_raise_lib(rc, msg);
        return -1;
    }
    ring->r = r;
    sr_stats_apply(self, r);
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

static const char loader_doc[];

/* The Loader type to instantiate: once torch.utils.data is imported, a subclass of both Loader
 * and torch's IterableDataset, so that DataLoader(loader, batch_size=None) treats it as one. */
static PyTypeObject *loader_class(PyTypeObject *asked)
{
    if (asked != LoaderType)
        return asked;
    if (sr_torch_loader)
        return (PyTypeObject *)sr_torch_loader;
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
    sr_torch_loader = cls;
    return (PyTypeObject *)cls;
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
    /* the keywords (_sr_options.c) */
    if (sr_loader_options(self, args, kw) < 0)
        return -1;
    self->epoch = 0;
    self->cursor = 0;
    if (self->o.pin == SHR_PIN_AUTO)
        prepare_torch_cuda();
    return open_ring(self, 0, 0, self->rank, self->world);
}

static void Loader_dealloc(LoaderObject *self)
{
    Py_XDECREF((PyObject *)self->ring);
    Py_XDECREF(self->path);
    Py_XDECREF(self->path_bytes);
    Py_XDECREF(self->cache_bytes);
    Py_XDECREF(self->flip_bytes);
    Py_XDECREF(self->mixture);
    sr_free_object((PyObject *)self);
}

static int loader_ready(const LoaderObject *self)
{
    if (!self->ring) {
        PyErr_SetString(sr_state_error, "the Loader is not open (its __init__ failed or was not "
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
        /* the last iteration was abandoned (a peek, a break): the new one continues its epoch
         * where state_dict says the Loader stands; one left after its epoch's last batch (no
         * StopIteration seen, as zip(range(len(loader)), loader) leaves it) starts the next */
        self->active = 0;
        if (batches_left(self) == 0) {
            if (self->epoch >= MAX_EPOCH) {
                past_last_epoch();
                return NULL;
            }
            self->epoch++;
            self->cursor = 0;
            self->start = 0;
        }
    }
    /* the end of the last epoch: nothing is left, and no epoch follows */
    if (self->epoch >= MAX_EPOCH && batches_left(self) == 0) {
        past_last_epoch();
        return NULL;
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

/* ---- iteration ---- */

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
    if (sr_drain_fenced(ring, ring->nslots > 3 ? ring->nslots - 3 : 0) < 0) {
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
        if (st.epoch > MAX_EPOCH) {
            /* the last epoch is over: stay at its end, a state load_state_dict takes */
            st.epoch = MAX_EPOCH;
            st.cursor = shr_batches_in_epoch(ring->r, MAX_EPOCH);
        }
        self->epoch = st.epoch;
        self->cursor = st.cursor;
        self->start = st.epoch == ring->start_epoch ? ring->start : 0;
        self->active = 0;
        it->done = 1;
    } else if (rc) {
        ring->failed = 1;
        self->active = 0;
        it->done = 1;
        sr_raise_lib(rc, shr_last_error(ring->r));
    } else {
        self->epoch = b->epoch;
        self->cursor = b->number + 1;
        self->start = b->epoch == ring->start_epoch ? ring->start : 0;
        out = sr_deliver(self, ring, b);
    }
    Py_DECREF(ring);
    return out;
}

static void LoaderIter_dealloc(LoaderIterObject *it)
{
    Py_XDECREF((PyObject *)it->loader);
    sr_free_object((PyObject *)it);
}

static PyType_Slot LoaderIter_slots[] = {
    {Py_tp_doc, "One epoch of a Loader's batches (internal; made by iter(loader))."},
    {Py_tp_dealloc, LoaderIter_dealloc},
    {Py_tp_iter, PyObject_SelfIter},
    {Py_tp_iternext, LoaderIter_next},
    {0, NULL},
};

PyType_Spec LoaderIter_spec = {
    .name = "shardread._LoaderIterator",
    .basicsize = sizeof(LoaderIterObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = LoaderIter_slots,
};

/* ---- position: set_epoch, state_dict, load_state_dict ---- */

static PyObject *Loader_set_epoch(LoaderObject *self, PyObject *arg)
{
    uint64_t e;
    if (sr_to_u64(arg, "epoch", &e) < 0)
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

/* _cache_info() -> dict: a dataset at a URL read as its shards arrive (shr_cache_stats) */
static PyObject *Loader_cache_info(LoaderObject *self, PyObject *unused)
{
    (void)unused;
    if (loader_ready(self) < 0)
        return NULL;
    shr_cache_info c;
    shr_cache_stats(self->ring->r, &c);
    /* a mixture: where each stream's manifest lies (a stream at a URL: its cache folder) */
    uint32_t n = shr_stream_count(self->ring->r);
    PyObject *dirs = PyList_New(n);
    for (uint32_t s = 0; dirs && s < n; s++) {
        shr_stream_info si;
        shr_get_stream_info(self->ring->r, s, &si);
        PyObject *d = PyUnicode_DecodeFSDefault(si.dir);
        if (!d || PyList_SetItem(dirs, s, d) < 0) {     /* steals d */
            Py_CLEAR(dirs);
            break;
        }
    }
    if (!dirs)
        return NULL;
    return Py_BuildValue("{s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:z,s:N}", "limit",
                         (unsigned long long)c.limit, "peak_bytes",
                         (unsigned long long)c.peak_bytes, "fetched",
                         (unsigned long long)c.fetched, "cached", (unsigned long long)c.cached,
                         "evicted", (unsigned long long)c.evicted, "bytes",
                         (unsigned long long)c.bytes, "retries", (unsigned long long)c.retries,
                         "dir", c.dir, "dirs", dirs);
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
        return sr_type_error(PyExc_TypeError, "load_state_dict takes the dict of state_dict(), "
                             "not ", state, "");
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
    if (cv && sr_to_u64(cv, "consumed", &consumed) < 0)
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
            if (sr_to_u64(v, state_keys[k], dst[k]) < 0)
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
    if (sr_to_u32(PyDict_GetItemString(state, "world"), "state world", 1, &st_world) < 0 ||
        sr_to_u32(PyDict_GetItemString(state, "rank"), "state rank", 0, &st_rank) < 0 ||
        sr_to_u32(PyDict_GetItemString(state, "batch_size"), "state batch_size", 1, &st_bs) < 0)
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
        if (sr_to_u64(sv, "state start", &st_start) < 0)
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

/* ---- attributes, the type ---- */

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
                         sr_double_list(in.mean, nc), "std", sr_double_list(in.std, nc),
                         "batch_bytes",
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
     "Make the next iteration read this epoch (its order comes from seed and epoch),\n"
     "0 .. 2**63 - 1. Without it, each iteration reads the epoch after the last (or the\n"
     "rest of an abandoned one, where state_dict stands); after\n"
     "epoch 2**63 - 1 the Loader stays at its end (its state_dict loads) and a further\n"
     "iteration raises OverflowError. An iteration under way is abandoned. After\n"
     "load_state_dict of a state in this same epoch the loaded cursor is kept, so\n"
     "load_state_dict(s); set_epoch(s['epoch']) resumes mid-epoch."},
    {"_cache_info", (PyCFunction)Loader_cache_info, METH_NOARGS,
     "_cache_info() -> dict\n\nDatasets at URLs read as their shards arrive: the cache's limit,\n"
     "peak_bytes, fetched, cached, evicted, bytes, retries (a mixture's: its streams' sums)\n"
     "and dir (one dataset's folder); dirs: where each stream's manifest lies, for a\n"
     "mixture (docs/REMOTE.md)."},
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
    {"stage_timing", (PyCFunction)sr_loader_stage_timing, METH_VARARGS,
     "stage_timing(on=None) -> bool\n"
     "\n"
     "Per-stage timing of the workers on (True) or off (False), kept for every reader\n"
     "the Loader opens; returns the previous setting (None: only returns it). Costs a\n"
     "clock read per stage of each sample (see docs/PYTHON.md, shardread.doctor)."},
    {"pipeline_stats", (PyCFunction)sr_loader_pipeline_stats, METH_NOARGS,
     "pipeline_stats() -> dict\n"
     "\n"
     "The current reader's counts: 'threads', one dict per worker (batches, samples,\n"
     "fill_ns, cpu_ns, timed_samples, timed_fill_ns, active, and 'stages': {stage:\n"
     "(ns, calls)} with stage timing on); 'consumer' (batches, wait_ns: time next()\n"
     "waited for the workers, active, threads, auto_changes); stage_timing, batch_size."},
    {"fill_events", (PyCFunction)sr_loader_fill_events, METH_NOARGS,
     "fill_events() -> list\n"
     "\n"
     "Per worker, its last batch fills made with stage timing on, as (stream batch,\n"
     "start_ns, end_ns) on time.monotonic_ns()'s clock, oldest first."},
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
    {"threads", (getter)Loader_get_threads, NULL,
     "Reader worker threads (with threads='auto': the most, max_threads).", NULL},
    {"prefetch", (getter)Loader_get_prefetch, NULL, "Batch buffers in the ring.", NULL},
    {"active_threads", (getter)sr_loader_active_threads, NULL,
     "Workers allowed to fill batches now: threads, or with threads='auto' those the\n"
     "control loop keeps (the others are parked).", NULL},
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

PyType_Spec Loader_spec = {
    .name = "shardread.Loader",
    .basicsize = sizeof(LoaderObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .slots = Loader_slots,
};
