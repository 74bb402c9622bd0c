/* Maui's fair share with users alone and no targets, checked in C at a scheduling pass:
 * the key of every group with queued jobs, as FairShare.group_keys computes it in
 * emulator/scheduling/orders.py, whether the groups' ranks (emulator/scheduling/ranks.py)
 * still order them as those keys do, as GroupRanks.rerank tests it, and until when they
 * must, as FairShare._holds says; without a Python step per group.
 *
 * check(groups, rank, constants, rates, now, factor, max_rate, window_end)
 *     -> (keys, same, holds_until, ranks)
 *   groups: {(user, group): count} of the queued jobs; rank: {(user, group): rank};
 *   constants, rates: {user: ...}, a user's usage now being constant + rate * now;
 *   keys: {(user, group): factor * usage}; same: the ranks order the keys (equal keys,
 *   equal ranks); holds_until: FairShare._holds of the least difference between the keys
 *   of two users next to each other in key order; ranks: the ranks of the groups alone
 *   where same (rank itself if it holds no other), else None.
 *
 * decay(used, window, weights, oldest) -> {owner: decayed usage}
 *   used: {owner: {window (int): processor-seconds (float)}}; weights: the k-th for window
 *   - k. As FairShare._roll's decayed_usage: the windows before oldest are deleted from
 *   used (an owner left with none too), and each owner's usage is the sum of weight times
 *   usage, newest window first, a window not used adding nothing.
 *
 * Built with -ffp-contract=off: keys, bounds and sums are rounded as Python rounds them,
 * step by step.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdlib.h>

typedef struct {
    double key, rank;
    int ranked;
    PyObject *user; /* borrowed from the group tuple */
} Entry;

static int by_key(const void *a, const void *b)
{
    double x = ((const Entry *)a)->key, y = ((const Entry *)b)->key;
    return (x > y) - (x < y);
}

/* d.get(key, 0) as a double; -1 with an exception set on error */
static int value_of(PyObject *d, PyObject *key, double *out)
{
    PyObject *v = PyDict_GetItemWithError(d, key);
    if (!v) {
        *out = 0.0;
        return PyErr_Occurred() ? -1 : 0;
    }
    *out = PyFloat_AsDouble(v);
    return *out == -1.0 && PyErr_Occurred() ? -1 : 0;
}

/* fills e[0..n) from the groups; the keys dict gets each group's key */
static int keys_of(PyObject *groups, PyObject *rank, PyObject *constants, PyObject *rates,
                   double now, double factor, Entry *e, PyObject *keys)
{
    Py_ssize_t pos = 0, k = 0;
    PyObject *group, *count;
    while (PyDict_Next(groups, &pos, &group, &count)) {
        if (!PyTuple_Check(group) || PyTuple_GET_SIZE(group) < 1) {
            PyErr_SetString(PyExc_TypeError, "groups are (user, group) tuples");
            return -1;
        }
        PyObject *user = PyTuple_GET_ITEM(group, 0), *r;
        double c, rate;
        if (value_of(constants, user, &c) || value_of(rates, user, &rate))
            return -1;
        double usage = rate * now; /* as Python: constant + rate * now, then the factor */
        usage = c + usage;
        e[k].key = factor * usage;
        e[k].user = user;
        r = PyDict_GetItemWithError(rank, group);
        if (!r && PyErr_Occurred())
            return -1;
        e[k].ranked = r != NULL;
        e[k].rank = r ? PyFloat_AsDouble(r) : 0.0;
        if (e[k].rank == -1.0 && PyErr_Occurred())
            return -1;
        PyObject *key = PyFloat_FromDouble(e[k].key);
        int bad = !key || PyDict_SetItem(keys, group, key);
        Py_XDECREF(key);
        if (bad)
            return -1;
        k++;
    }
    return 0;
}

/* rerank's test over entries in key order, and the least gap between two users' keys */
static int ordered(const Entry *e, Py_ssize_t n, double *gap)
{
    int same = 1;
    *gap = INFINITY;
    for (Py_ssize_t k = 0; k < n; k++) {
        if (!e[k].ranked)
            same = 0;
        if (k == 0)
            continue;
        const Entry *a = &e[k - 1], *b = &e[k];
        if (a->ranked && b->ranked
            && (b->key == a->key ? b->rank != a->rank : b->rank <= a->rank))
            same = 0;
        int users = PyObject_RichCompareBool(a->user, b->user, Py_EQ);
        if (users < 0)
            return -1;
        if (!users && b->key - a->key < *gap)
            *gap = b->key - a->key;
    }
    return same;
}

/* FairShare._holds, the same steps */
static double holds(double gap, double top, double factor, double now, double max_rate,
                    double window_end)
{
    if (gap == INFINITY)
        return window_end;
    if (gap <= 0 || factor <= 0)
        return now;
    double usage_gap = gap / factor - 1.0 - 1e-9 * (top / factor + max_rate * now);
    if (!(usage_gap > 0))
        return now;
    double until = now + usage_gap / max_rate;
    return window_end < until ? window_end : until;
}

/* the ranks of the queued groups alone (a new reference) */
static PyObject *ranks_of(PyObject *groups, PyObject *rank)
{
    if (PyDict_Size(rank) == PyDict_Size(groups)) {
        Py_INCREF(rank);
        return rank;
    }
    PyObject *out = PyDict_New(), *group, *count;
    Py_ssize_t pos = 0;
    while (out && PyDict_Next(groups, &pos, &group, &count)) {
        PyObject *r = PyDict_GetItemWithError(rank, group);
        if (!r || PyDict_SetItem(out, group, r))
            Py_CLEAR(out);
    }
    return out;
}

static PyObject *check(PyObject *self, PyObject *args)
{
    PyObject *groups, *rank, *constants, *rates;
    double now, factor, max_rate, window_end;
    if (!PyArg_ParseTuple(args, "O!O!O!O!dddd", &PyDict_Type, &groups, &PyDict_Type, &rank,
                          &PyDict_Type, &constants, &PyDict_Type, &rates, &now, &factor,
                          &max_rate, &window_end))
        return NULL;
    Py_ssize_t n = PyDict_Size(groups);
    Entry *e = PyMem_Malloc(sizeof(Entry) * (size_t)(n ? n : 1));
    PyObject *keys = PyDict_New(), *out = NULL, *ranks = NULL;
    if (!e || !keys) {
        PyErr_NoMemory();
        goto done;
    }
    if (keys_of(groups, rank, constants, rates, now, factor, e, keys))
        goto done;
    qsort(e, (size_t)n, sizeof(Entry), by_key);
    double gap;
    int same = ordered(e, n, &gap);
    if (same < 0)
        goto done;
    if (same && !(ranks = ranks_of(groups, rank)))
        goto done;
    double until = holds(gap, n ? e[n - 1].key : -INFINITY, factor, now, max_rate, window_end);
    out = Py_BuildValue("(ONdO)", keys, PyBool_FromLong(same), until, ranks ? ranks : Py_None);
done:
    PyMem_Free(e);
    Py_XDECREF(keys);
    Py_XDECREF(ranks);
    return out;
}

/* deletes the windows of one owner before oldest; -1 with an exception set on error */
static int forget_before(PyObject *windows, long long oldest)
{
    PyObject *key, *value, *stale = NULL;
    Py_ssize_t pos = 0;
    while (PyDict_Next(windows, &pos, &key, &value)) {
        long long i = PyLong_AsLongLong(key);
        if (i == -1 && PyErr_Occurred())
            goto fail;
        if (i < oldest && ((!stale && !(stale = PyList_New(0))) || PyList_Append(stale, key)))
            goto fail;
    }
    for (Py_ssize_t j = 0; stale && j < PyList_GET_SIZE(stale); j++)
        if (PyDict_DelItem(windows, PyList_GET_ITEM(stale, j)) < 0)
            goto fail;
    Py_XDECREF(stale);
    return 0;
fail:
    Py_XDECREF(stale);
    return -1;
}

/* one owner's decayed usage into out; -1 with an exception set on error */
static int sum_windows(PyObject *windows, PyObject *const *at, const double *w,
                       Py_ssize_t depth, double *out)
{
    double total = 0.0;
    for (Py_ssize_t k = 0; k < depth; k++) {
        double used;
        if (value_of(windows, at[k], &used) < 0)
            return -1;
        total += w[k] * used;
    }
    *out = total;
    return 0;
}

static PyObject *decay(PyObject *self, PyObject *args)
{
    PyObject *used, *weights;
    long long window, oldest;
    if (!PyArg_ParseTuple(args, "O!LO!L", &PyDict_Type, &used, &window, &PyList_Type,
                          &weights, &oldest))
        return NULL;
    Py_ssize_t depth = PyList_GET_SIZE(weights), k = 0;
    double *w = PyMem_Malloc(sizeof(double) * (size_t)(depth ? depth : 1));
    PyObject **at = PyMem_Calloc((size_t)(depth ? depth : 1), sizeof(PyObject *));
    PyObject *owners = PyDict_Keys(used), *out = PyDict_New();
    if (!w || !at || !owners || !out) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        goto fail;
    }
    for (; k < depth; k++) {
        w[k] = PyFloat_AsDouble(PyList_GET_ITEM(weights, k));
        if ((w[k] == -1.0 && PyErr_Occurred()) || !(at[k] = PyLong_FromLongLong(window - k)))
            goto fail;
    }
    for (Py_ssize_t j = 0; j < PyList_GET_SIZE(owners); j++) {
        PyObject *owner = PyList_GET_ITEM(owners, j);
        PyObject *windows = PyDict_GetItemWithError(used, owner);
        if (!windows || !PyDict_Check(windows)) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "an owner's usage must be a dict");
            goto fail;
        }
        if (forget_before(windows, oldest) < 0)
            goto fail;
        if (PyDict_GET_SIZE(windows) == 0) {
            if (PyDict_DelItem(used, owner) < 0)
                goto fail;
            continue;
        }
        double total;
        PyObject *value;
        if (sum_windows(windows, at, w, depth, &total) < 0 || !(value = PyFloat_FromDouble(total)))
            goto fail;
        int rc = PyDict_SetItem(out, owner, value);
        Py_DECREF(value);
        if (rc < 0)
            goto fail;
    }
    for (Py_ssize_t j = 0; j < depth; j++)
        Py_XDECREF(at[j]);
    PyMem_Free(at);
    PyMem_Free(w);
    Py_DECREF(owners);
    return out;
fail:
    for (Py_ssize_t j = 0; at && j < depth; j++)
        Py_XDECREF(at[j]);
    PyMem_Free(at);
    PyMem_Free(w);
    Py_XDECREF(owners);
    Py_XDECREF(out);
    return NULL;
}

static PyMethodDef methods[] = {
    {"check", check, METH_VARARGS,
     "check(groups, rank, constants, rates, now, factor, max_rate, window_end)\n"
     "-> (keys, same, holds_until, ranks)"},
    {"decay", decay, METH_VARARGS,
     "decay(used, window, weights, oldest) -> {owner: decayed usage}; windows before "
     "oldest are deleted from used"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fairshare",
                                    "Maui's fair-share keys checked against the groups' ranks.",
                                    -1, methods};

PyMODINIT_FUNC PyInit__fairshare(void)
{
    return PyModule_Create(&module);
}
