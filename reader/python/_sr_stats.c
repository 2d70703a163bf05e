/* _sr_stats.c - the Loader's pipeline statistics (part of the _shardread module; _sr.h): stage
 * timing switched on and off (kept across the readers a Loader opens), the workers' and the
 * consumer's counts, the fills kept for timelines, and the workers now active (threads='auto').
 * The counts are the library's (shardread.h, "Pipeline statistics and auto threads"); they
 * belong to the reader now in use, which a Loader replaces on set_epoch, load_state_dict or an
 * abandoned iteration (they then start again from zero).
 */
#include "_sr.h"

static shr_reader *current(const LoaderObject *self)
{
    return self->ring ? self->ring->r : NULL;
}

void sr_stats_apply(LoaderObject *self, shr_reader *r)
{
    if (self->timing)
        shr_stats_enable(r, 1);
}

PyObject *sr_loader_stage_timing(LoaderObject *self, PyObject *args)
{
    PyObject *on = Py_None;
    if (!PyArg_ParseTuple(args, "|O:stage_timing", &on))
        return NULL;
    int was = self->timing;
    if (on != Py_None) {
        int v;
        if (sr_flag_named(on, "stage_timing", &v) < 0)
            return NULL;
        self->timing = v;
        if (current(self))
            shr_stats_enable(current(self), v);
    }
    return PyBool_FromLong(was);
}

static PyObject *thread_dict(const shr_thread_stats *t)
{
    PyObject *stages = PyDict_New();
    if (!stages)
        return NULL;
    for (int i = 0; i < SHR_STAGE_COUNT; i++) {
        PyObject *v = Py_BuildValue("(KK)", (unsigned long long)t->stage_ns[i],
                                    (unsigned long long)t->stage_calls[i]);
        if (!v || PyDict_SetItemString(stages, shr_stage_name(i), v) < 0) {
            Py_XDECREF(v);
            Py_DECREF(stages);
            return NULL;
        }
        Py_DECREF(v);
    }
    return Py_BuildValue("{s:K,s:K,s:K,s:K,s:K,s:K,s:O,s:N}", "batches",
                         (unsigned long long)t->batches, "samples",
                         (unsigned long long)t->samples, "fill_ns",
                         (unsigned long long)t->fill_ns, "cpu_ns", (unsigned long long)t->cpu_ns,
                         "timed_samples", (unsigned long long)t->timed_samples, "timed_fill_ns",
                         (unsigned long long)t->timed_fill_ns, "active",
                         t->active ? Py_True : Py_False, "stages", stages);
}

PyObject *sr_loader_pipeline_stats(LoaderObject *self, PyObject *unused)
{
    (void)unused;
    shr_reader *r = current(self);
    shr_consumer_stats c;
    shr_get_consumer_stats(r, &c);
    PyObject *threads = PyList_New(0);
    if (!threads)
        return NULL;
    for (uint32_t i = 0; i < c.threads; i++) {
        shr_thread_stats t;
        if (shr_get_thread_stats(r, i, &t) != 0)
            break;
        PyObject *d = thread_dict(&t);
        if (!d || PyList_Append(threads, d) < 0) {
            Py_XDECREF(d);
            Py_DECREF(threads);
            return NULL;
        }
        Py_DECREF(d);
    }
    return Py_BuildValue("{s:N,s:{s:K,s:K,s:I,s:I,s:I},s:O,s:K}", "threads", threads,
                         "consumer", "batches", (unsigned long long)c.batches, "wait_ns",
                         (unsigned long long)c.wait_ns, "active", c.active, "threads",
                         c.threads, "auto_changes", c.auto_changes, "stage_timing",
                         self->timing ? Py_True : Py_False, "batch_size",
                         (unsigned long long)self->o.batch_size);
}

PyObject *sr_loader_fill_events(LoaderObject *self, PyObject *unused)
{
    (void)unused;
    shr_reader *r = current(self);
    shr_consumer_stats c;
    shr_get_consumer_stats(r, &c);
    PyObject *out = PyList_New(0);
    shr_fill_event *ev = PyMem_Malloc(SHR_STATS_EVENTS * sizeof *ev);
    if (!out || !ev) {
        Py_XDECREF(out);
        PyMem_Free(ev);
        return PyErr_NoMemory();
    }
    for (uint32_t i = 0; i < c.threads; i++) {
        int n = shr_get_fill_events(r, i, ev, SHR_STATS_EVENTS);
        PyObject *l = PyList_New(0);
        for (int j = 0; l && j < n; j++) {
            PyObject *e = Py_BuildValue("(KKK)", (unsigned long long)ev[j].k,
                                        (unsigned long long)ev[j].start_ns,
                                        (unsigned long long)ev[j].end_ns);
            if (!e || PyList_Append(l, e) < 0) {
                Py_XDECREF(e);
                Py_CLEAR(l);
                break;
            }
            Py_DECREF(e);
        }
        if (!l || PyList_Append(out, l) < 0) {
            Py_XDECREF(l);
            Py_DECREF(out);
            PyMem_Free(ev);
            return NULL;
        }
        Py_DECREF(l);
    }
    PyMem_Free(ev);
    return out;
}

PyObject *sr_loader_active_threads(LoaderObject *self, void *closure)
{
    (void)closure;
    shr_consumer_stats c;
    shr_get_consumer_stats(current(self), &c);
    return PyLong_FromUnsignedLong(current(self) ? c.active : self->o.threads);
}
