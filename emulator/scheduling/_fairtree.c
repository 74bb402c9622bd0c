/* Fair Tree's factor of one user at a time, in C, for a two-level tree (accounts of users
 * under root, no user right under root): the same factors as _two_level_factors in
 * emulator/scheduling/slurmshare.py, without sorting every user at every tick.
 *
 * A user's rank is the number of users ranked before its run of ties: the users of every
 * account ranked before its own (higher Level Fairshare, ties by account order), and its
 * siblings of a strictly higher Level Fairshare. Its factor is (n - rank) / n.
 *
 * FairTree(parent, top_share, user_share, top_rows, user_rows) keeps the tree's shape;
 * at(scaled) takes the usage of one tick (the Level Fairshare of every account and user,
 * O(n)) and returns a Ranks, whose ranks[slot] costs O(accounts + siblings), once a tick.
 * Ranks.keys is Multifactor.keys's loop over a queue (emulator/scheduling/multifactor.py),
 * which otherwise costs a Python step per waiting job at every PriorityCalcPeriod.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    PyObject_HEAD
    Py_ssize_t n, a;                  /* users, accounts */
    Py_ssize_t *parent, *top_rows, *user_rows;
    Py_ssize_t *start, *members;      /* users of account k: members[start[k]..start[k+1]) */
    double *top_share, *user_share;
    Py_ssize_t rows;                  /* the usage array must hold this many */
} FairTree;

typedef struct {
    PyObject_HEAD
    FairTree *tree;
    double *top_lf, *user_lf;
    double *factor;                   /* by slot, once counted; NAN until then */
} Ranks;

static PyTypeObject FairTreeType, RanksType;

/* ``seq`` as a fast sequence of ``want`` items (any number if ``want`` < 0), with room for
 * them at ``*out``; NULL, an exception set, if it is not */
static PyObject *sequence_with_room(PyObject *seq, Py_ssize_t want, size_t itemsize,
                                    void **out, const char *what)
{
    PyObject *fast = PySequence_Fast(seq, what);
    if (!fast)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    if (want >= 0 && n != want) {
        PyErr_Format(PyExc_ValueError, "%s: %zd values, %zd wanted", what, n, want);
        Py_DECREF(fast);
        return NULL;
    }
    *out = PyMem_Malloc((size_t)(n ? n : 1) * itemsize);
    if (!*out) {
        Py_DECREF(fast);
        return PyErr_NoMemory();
    }
    return fast;
}

/* whole numbers in [0, below) (below < 0: no bound) */
static int read_sizes(PyObject *seq, Py_ssize_t want, Py_ssize_t below, Py_ssize_t **out,
                      const char *what)
{
    PyObject *fast = sequence_with_room(seq, want, sizeof(Py_ssize_t), (void **)out, what);
    if (!fast)
        return -1;
    int status = 0;
    for (Py_ssize_t i = 0; status == 0 && i < PySequence_Fast_GET_SIZE(fast); i++) {
        Py_ssize_t v = PyNumber_AsSsize_t(PySequence_Fast_GET_ITEM(fast, i), PyExc_OverflowError);
        if (v == -1 && PyErr_Occurred()) {
            status = -1;
        } else if (v < 0 || (below >= 0 && v >= below)) {
            PyErr_Format(PyExc_ValueError, "%s: %zd out of range", what, v);
            status = -1;
        }
        (*out)[i] = v;
    }
    Py_DECREF(fast);
    return status;
}

static int read_doubles(PyObject *seq, Py_ssize_t want, double **out, const char *what)
{
    PyObject *fast = sequence_with_room(seq, want, sizeof(double), (void **)out, what);
    if (!fast)
        return -1;
    int status = 0;
    for (Py_ssize_t i = 0; status == 0 && i < want; i++) {
        (*out)[i] = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(fast, i));
        if ((*out)[i] == -1.0 && PyErr_Occurred())
            status = -1;
    }
    Py_DECREF(fast);
    return status;
}

static void FairTree_dealloc(FairTree *self)
{
    PyMem_Free(self->parent);
    PyMem_Free(self->top_rows);
    PyMem_Free(self->user_rows);
    PyMem_Free(self->start);
    PyMem_Free(self->members);
    PyMem_Free(self->top_share);
    PyMem_Free(self->user_share);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* members grouped by account, in user order within each */
static int group_members(FairTree *self)
{
    self->start = PyMem_Calloc((size_t)self->a + 1, sizeof(Py_ssize_t));
    self->members = PyMem_Malloc((size_t)(self->n ? self->n : 1) * sizeof(Py_ssize_t));
    if (!self->start || !self->members) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < self->n; i++)
        self->start[self->parent[i] + 1]++;
    for (Py_ssize_t k = 0; k < self->a; k++)
        self->start[k + 1] += self->start[k];
    Py_ssize_t *fill = PyMem_Malloc((size_t)(self->a ? self->a : 1) * sizeof(Py_ssize_t));
    if (!fill) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t k = 0; k < self->a; k++)
        fill[k] = self->start[k];
    for (Py_ssize_t i = 0; i < self->n; i++)
        self->members[fill[self->parent[i]]++] = i;
    PyMem_Free(fill);
    return 0;
}

static int FairTree_init(FairTree *self, PyObject *args, PyObject *kwds)
{
    PyObject *parent, *top_share, *user_share, *top_rows, *user_rows;
    static char *kwlist[] = {"parent", "top_share", "user_share", "top_rows", "user_rows",
                             NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOO", kwlist, &parent, &top_share,
                                     &user_share, &top_rows, &user_rows))
        return -1;
    if (self->parent) {
        PyErr_SetString(PyExc_TypeError, "FairTree is made once");
        return -1;
    }
    if (read_sizes(top_rows, -1, -1, &self->top_rows, "top_rows") < 0)
        return -1;
    self->a = PySequence_Size(top_rows);
    if (read_sizes(user_rows, -1, -1, &self->user_rows, "user_rows") < 0)
        return -1;
    self->n = PySequence_Size(user_rows);
    if (read_sizes(parent, self->n, self->a, &self->parent, "parent") < 0 ||
        read_doubles(top_share, self->a, &self->top_share, "top_share") < 0 ||
        read_doubles(user_share, self->n, &self->user_share, "user_share") < 0)
        return -1;
    self->rows = 0;
    for (Py_ssize_t k = 0; k < self->a; k++)
        if (self->top_rows[k] + 1 > self->rows)
            self->rows = self->top_rows[k] + 1;
    for (Py_ssize_t i = 0; i < self->n; i++)
        if (self->user_rows[i] + 1 > self->rows)
            self->rows = self->user_rows[i] + 1;
    return group_members(self);
}

/* Shares over usage, both as fractions of their level; no usage: first (inf). The same two
 * divisions as numpy's, so the same doubles. */
static double level_fairshare(double share, double used, double total)
{
    return used > 0 ? share / (used / total) : INFINITY;
}

static PyObject *FairTree_at(FairTree *self, PyObject *scaled)
{
    Py_buffer view;
    if (PyObject_GetBuffer(scaled, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return NULL;
    if (!view.format || strcmp(view.format, "d") != 0 || view.itemsize != sizeof(double) ||
        view.len / (Py_ssize_t)sizeof(double) < self->rows) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "scaled: an array of float64 holding every row");
        return NULL;
    }
    const double *used = view.buf;
    Ranks *ranks = PyObject_New(Ranks, &RanksType);
    if (!ranks) {
        PyBuffer_Release(&view);
        return NULL;
    }
    ranks->top_lf = PyMem_Malloc((size_t)(self->a ? self->a : 1) * sizeof(double));
    ranks->user_lf = PyMem_Malloc((size_t)(self->n ? self->n : 1) * sizeof(double));
    ranks->factor = PyMem_Malloc((size_t)(self->n ? self->n : 1) * sizeof(double));
    double *siblings = PyMem_Calloc((size_t)(self->a ? self->a : 1), sizeof(double));
    Py_INCREF(self);
    ranks->tree = self;
    if (!ranks->top_lf || !ranks->user_lf || !ranks->factor || !siblings) {
        PyMem_Free(siblings);
        PyBuffer_Release(&view);
        Py_DECREF(ranks);
        return PyErr_NoMemory();
    }
    double total = 0.0;  /* left to right, as the walk sums a level */
    for (Py_ssize_t k = 0; k < self->a; k++)
        total += used[self->top_rows[k]];
    for (Py_ssize_t k = 0; k < self->a; k++)
        ranks->top_lf[k] = level_fairshare(self->top_share[k], used[self->top_rows[k]], total);
    for (Py_ssize_t i = 0; i < self->n; i++)
        siblings[self->parent[i]] += used[self->user_rows[i]];
    for (Py_ssize_t i = 0; i < self->n; i++)
        ranks->user_lf[i] = level_fairshare(self->user_share[i], used[self->user_rows[i]],
                                            siblings[self->parent[i]]);
    for (Py_ssize_t i = 0; i < self->n; i++)
        ranks->factor[i] = NAN;
    PyMem_Free(siblings);
    PyBuffer_Release(&view);
    return (PyObject *)ranks;
}

static void Ranks_dealloc(Ranks *self)
{
    PyMem_Free(self->top_lf);
    PyMem_Free(self->user_lf);
    PyMem_Free(self->factor);
    Py_XDECREF(self->tree);
    PyObject_Free(self);
}

static Py_ssize_t Ranks_length(Ranks *self)
{
    return self->tree->n;
}

/* the factor of the user in ``slot`` (0 <= slot < n) */
static double factor_of(Ranks *self, Py_ssize_t slot)
{
    if (!isnan(self->factor[slot]))
        return self->factor[slot];
    const FairTree *t = self->tree;
    Py_ssize_t p = t->parent[slot], before = 0;
    double mine = self->top_lf[p];
    for (Py_ssize_t k = 0; k < t->a; k++)
        if (self->top_lf[k] > mine || (self->top_lf[k] == mine && k < p))
            before += t->start[k + 1] - t->start[k];
    double value = self->user_lf[slot];
    for (Py_ssize_t m = t->start[p]; m < t->start[p + 1]; m++)
        before += self->user_lf[t->members[m]] > value;
    return self->factor[slot] = (double)(t->n - before) / (double)t->n;
}

static PyObject *Ranks_item(Ranks *self, Py_ssize_t slot)
{
    if (slot < 0 || slot >= self->tree->n) {
        PyErr_SetString(PyExc_IndexError, "no user in that slot");
        return NULL;
    }
    return PyFloat_FromDouble(factor_of(self, slot));
}

/* keys(jobs, statics, slots, now, w_age, w_fs, per_second): Multifactor.keys's loop, every
 * job's entry (submit, static part, user node) in statics and every user in slots */
static PyObject *Ranks_keys(Ranks *self, PyObject *args)
{
    PyObject *jobs, *statics, *slots;
    double now, w_age, w_fs, per_second;
    if (!PyArg_ParseTuple(args, "OO!O!dddd", &jobs, &PyDict_Type, &statics, &PyDict_Type,
                          &slots, &now, &w_age, &w_fs, &per_second))
        return NULL;
    PyObject *fast = PySequence_Fast(jobs, "jobs: a sequence");
    if (!fast)
        return NULL;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(fast);
    PyObject *out = PyList_New(count);
    for (Py_ssize_t j = 0; out && j < count; j++) {
        PyObject *entry = PyDict_GetItemWithError(statics, PySequence_Fast_GET_ITEM(fast, j));
        if (!entry || !PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 3) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_KeyError, "a job without its entry");
            Py_CLEAR(out);
            break;
        }
        double submit = PyFloat_AsDouble(PyTuple_GET_ITEM(entry, 0));
        double fixed = PyFloat_AsDouble(PyTuple_GET_ITEM(entry, 1));
        double fs = 0.0;
        if (w_fs != 0.0) {
            PyObject *slot = PyDict_GetItemWithError(slots, PyTuple_GET_ITEM(entry, 2));
            Py_ssize_t i = slot ? PyLong_AsSsize_t(slot) : -1;
            if (i < 0 || i >= self->tree->n) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_KeyError, "a user without a slot");
                Py_CLEAR(out);
                break;
            }
            fs = factor_of(self, i);
        }
        if (PyErr_Occurred()) {
            Py_CLEAR(out);
            break;
        }
        double age = now > submit ? (now - submit) * per_second : 0.0;
        double sum = w_age * (age < 1.0 ? age : 1.0) + w_fs * fs + fixed;
        long long priority = (long long)sum;  /* int() truncates toward zero, as the cast */
        PyObject *key = PyLong_FromLongLong(priority > 1 ? -priority : -1);
        if (!key) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, j, key);
    }
    Py_DECREF(fast);
    return out;
}

static PyMethodDef Ranks_methods[] = {
    {"keys", (PyCFunction)Ranks_keys, METH_VARARGS,
     "keys(jobs, statics, slots, now, w_age, w_fs, per_second) -> Multifactor's keys"},
    {NULL, NULL, 0, NULL},
};

static PyMethodDef FairTree_methods[] = {
    {"at", (PyCFunction)FairTree_at, METH_O,
     "at(scaled) -> the ranks of one tick, from usage by tree row (a float64 array)"},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods Ranks_as_sequence = {
    .sq_length = (lenfunc)Ranks_length,
    .sq_item = (ssizeargfunc)Ranks_item,
};

static PyTypeObject FairTreeType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "emulator.scheduling._fairtree.FairTree",
    .tp_basicsize = sizeof(FairTree),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "FairTree(parent, top_share, user_share, top_rows, user_rows): a two-level "
              "tree's shape for Fair Tree",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)FairTree_init,
    .tp_dealloc = (destructor)FairTree_dealloc,
    .tp_methods = FairTree_methods,
};

static PyTypeObject RanksType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "emulator.scheduling._fairtree.Ranks",
    .tp_basicsize = sizeof(Ranks),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One tick's Fair Tree: ranks[slot] is the factor of the user in that slot",
    .tp_dealloc = (destructor)Ranks_dealloc,
    .tp_as_sequence = &Ranks_as_sequence,
    .tp_methods = Ranks_methods,
};

static struct PyModuleDef fairtree_module = {
    PyModuleDef_HEAD_INIT, "_fairtree", "Fair Tree's factors, one user at a time.", -1, NULL,
};

PyMODINIT_FUNC PyInit__fairtree(void)
{
    if (PyType_Ready(&FairTreeType) < 0 || PyType_Ready(&RanksType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&fairtree_module);
    if (!m)
        return NULL;
    Py_INCREF(&FairTreeType);
    if (PyModule_AddObject(m, "FairTree", (PyObject *)&FairTreeType) < 0) {
        Py_DECREF(&FairTreeType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
