/* _sr_mixture.c - a Loader over a mixture of datasets (part of the _shardread module; _sr.h):
 * the package's Loader passes path= as (streams, samples_per_epoch, offset_labels,
 * return_streams), streams a tuple of (path, weight, repeat, choose, on_error) with on_error
 * -1 (the Loader's) or a shr_on_error; each open goes through shr_open_mixture. Everything else
 * (positions, state_dict, elastic resume, delivery) is the single-dataset Loader's.
 */
#include "_sr.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sr_mixture_path(LoaderObject *self, PyObject *path)
{
    if (!PyTuple_Check(path))
        return 0;
    PyObject *streams;
    unsigned long long spe;
    int offset, ret;
    if (!PyArg_ParseTuple(path, "O!Kpp:Loader mixture", &PyTuple_Type, &streams, &spe, &offset,
                          &ret))
        return -1;
    Py_ssize_t n = PyTuple_Size(streams);
    if (n < 1 || n > 256) {
        PyErr_Format(PyExc_ValueError, "a mixture takes 1 to 256 streams, not %zd", n);
        return -1;
    }
    for (Py_ssize_t s = 0; s < n; s++) {
        PyObject *st = PyTuple_GetItem(streams, s), *p;
        double w, r;
        unsigned long long c;
        int oe;
        if (!PyTuple_Check(st) ||
            !PyArg_ParseTuple(st, "OddKi:Loader stream", &p, &w, &r, &c, &oe))
            return -1;
    }
    PyObject *first = PyTuple_GetItem(PyTuple_GetItem(streams, 0), 0);
    PyObject *b = sr_fs_path(first);
    if (!b)
        return -1;
    XSETREF(self->path_bytes, b);
    XSETREF(self->path, PyOS_FSPath(first));
    if (!self->path)
        return -1;
    XSETREF(self->mixture, Py_NewRef(path));
    self->return_streams = ret;
    return 1;
}

int sr_mixture_open(LoaderObject *self, shr_reader **r, const shr_options *o, shr_msg *msg)
{
    PyObject *streams;
    unsigned long long spe;
    int offset, ret;
    if (!PyArg_ParseTuple(self->mixture, "O!Kpp", &PyTuple_Type, &streams, &spe, &offset, &ret))
        return SHR_EINVAL;
    Py_ssize_t n = PyTuple_Size(streams);
    shr_stream *st = calloc((size_t)n, sizeof *st);
    PyObject *paths = PyList_New(0);    /* the bytes the paths point into */
    int rc = st && paths ? 0 : ENOMEM;
    for (Py_ssize_t s = 0; !rc && s < n; s++) {
        PyObject *p;
        unsigned long long c;
        if (!PyArg_ParseTuple(PyTuple_GetItem(streams, s), "OddKi", &p, &st[s].weight,
                              &st[s].repeat, &c, &st[s].on_error)) {
            rc = SHR_EINVAL;
            break;
        }
        st[s].choose = c;
        PyObject *b = sr_fs_path(p);
        if (!b || PyList_Append(paths, b) < 0) {
            Py_XDECREF(b);
            rc = SHR_EINVAL;
            break;
        }
        st[s].path = PyBytes_AsString(b);
        Py_DECREF(b);
    }
    if (rc) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        PyErr_Clear();
        snprintf(msg->text, sizeof msg->text, "cannot read the mixture's streams");
    } else {
        Py_BEGIN_ALLOW_THREADS
        rc = shr_open_mixture(r, st, (uint32_t)n, spe, offset, o, msg);
        Py_END_ALLOW_THREADS
    }
    Py_XDECREF(paths);
    free(st);
    return rc;
}
