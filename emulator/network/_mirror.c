/* The Python type of a host's mirror of the served model: its core, the memory, the rings
 * and the FluidAPI the message path reads, are in mirror.h (plain C, which the interposition
 * library of real programs shares).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "mirror.h"

typedef struct {
    PyObject_HEAD
    MirrorCore c;
    Py_buffer view;
    int has_view;
    void *mem; /* owned when private (a check) */
    PyObject *capsule;
} Mirror;

static PyObject *mirror_bytes(PyObject *mod, PyObject *args)
{
    int n_nodes, max_slots;
    (void)mod;
    if (!PyArg_ParseTuple(args, "ii", &n_nodes, &max_slots))
        return NULL;
    size_t a, b, c, d, e;
    return PyLong_FromSize_t(layout(n_nodes, max_slots, &a, &b, &c, &d, &e));
}

/* Each node's host, checked, into a new array (NULL with an exception set). */
static int32_t *read_node_hosts(PyObject *node_host, int n_hosts, Py_ssize_t *n)
{
    PyObject *seq = PySequence_Fast(node_host, "node_host must be a sequence");
    if (!seq)
        return NULL;
    *n = PySequence_Fast_GET_SIZE(seq);
    int32_t *out = malloc(sizeof(int32_t) * (size_t)(*n > 0 ? *n : 1));
    if (!out)
        PyErr_NoMemory();
    for (Py_ssize_t i = 0; out && i < *n; i++) {
        long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));
        if (v < 0 || v >= n_hosts) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "a node's host is out of range");
            free(out);
            out = NULL;
        } else {
            out[i] = (int32_t)v;
        }
    }
    Py_DECREF(seq);
    return out;
}

/* Map the mirror's memory (making it, with `create`, or checking it is this one). */
static int map(Mirror *m, int host, int n_hosts, const int32_t *node_host, int n_nodes,
               int max_slots, double buffer, PyObject *window, int create)
{
    size_t a, b, c, d, e;
    size_t size = layout(n_nodes, max_slots, &a, &b, &c, &d, &e);
    char *mem = shm_memory(window, size, &m->view, &m->has_view, &m->mem);
    if (!mem)
        return -1;
    int rc = mirror_map(&m->c, mem, host, n_hosts, node_host, n_nodes, max_slots, buffer,
                        window == Py_None || create);
    if (rc == -1)
        PyErr_SetString(PyExc_ValueError, "the window holds another mirror");
    else if (rc)
        PyErr_Format(PyExc_OSError, "pthread_mutex_init: %s", strerror(rc));
    return rc ? -1 : 0;
}

static int Mirror_init(Mirror *m, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"host", "n_hosts", "node_host", "max_slots", "buffer", "window",
                            "create", NULL};
    int host, n_hosts, max_slots, create = 1;
    double buffer;
    PyObject *node_host, *window = Py_None;
    if (m->c.h) {
        PyErr_SetString(PyExc_RuntimeError, "a mirror is initialised once");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "iiOid|Op", names, &host, &n_hosts,
                                     &node_host, &max_slots, &buffer, &window, &create))
        return -1;
    if (max_slots < 1 || max_slots > HOST_STRIDE || host < 0 || host >= n_hosts ||
        n_hosts > INT32_MAX / HOST_STRIDE) {
        PyErr_SetString(PyExc_ValueError, "a mirror needs 1..32768 slots and its host among "
                                          "the hosts");
        return -1;
    }
    Py_ssize_t n_nodes;
    int32_t *hosts = read_node_hosts(node_host, n_hosts, &n_nodes);
    if (!hosts)
        return -1;
    if (n_nodes < 1) {
        free(hosts);
        PyErr_SetString(PyExc_ValueError, "a mirror needs nodes");
        return -1;
    }
    int rc = map(m, host, n_hosts, hosts, (int)n_nodes, max_slots, buffer, window, create);
    free(hosts);
    if (rc)
        return -1;
    m->c.rings.fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    return 0;
}

static void Mirror_dealloc(Mirror *m)
{
    if (m->has_view)
        PyBuffer_Release(&m->view);
    free(m->mem);
    if (m->c.rings.fd >= 0)
        close(m->c.rings.fd);
    Py_XDECREF(m->capsule);
    Py_TYPE(m)->tp_free((PyObject *)m);
}

static int ready(Mirror *m)
{
    if (!m->c.h) {
        PyErr_SetString(PyExc_RuntimeError, "the mirror is closed or not initialised");
        return 0;
    }
    return 1;
}

/* add(wall, src, dst, amount, refs=1, sender_bell=None, receiver_bell=None, bound=0,
 *     resource=-1, persistent=False, bucket=True) -> (id, gen, start), as Fluid.add */
static PyObject *Mirror_add(Mirror *m, PyObject *args, PyObject *kwargs)
{
    double wall;
    NewFlow n;
    if (!ready(m) || shm_parse_add(args, kwargs, &wall, &n))
        return NULL;
    int32_t slot;
    uint32_t gen;
    double start;
    mi_lock(&m->c);
    int rc = insert(&m->c, wall, &n, &slot, &gen, &start);
    mi_unlock(&m->c);
    if (rc == -1) {
        PyErr_SetString(PyExc_RuntimeError, "the flow table is full");
        return NULL;
    }
    if (rc == -2) {
        PyErr_SetString(PyExc_ValueError, "node index out of range");
        return NULL;
    }
    return Py_BuildValue("(iId)", slot, gen, start);
}

static PyObject *Mirror_view(Mirror *m, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"slot", "gen", "wall", "party", NULL};
    int slot, party = FL_NOBODY;
    unsigned int gen;
    PyObject *wall_o = Py_None;
    if (!ready(m) || !PyArg_ParseTupleAndKeywords(args, kwargs, "iI|Oi", names, &slot, &gen,
                                                  &wall_o, &party))
        return NULL;
    FlView v;
    mi_lock(&m->c);
    int rc = api_view(&m->c, slot, gen, party, &v);
    mi_unlock(&m->c);
    if (rc) {
        PyErr_SetString(PyExc_KeyError, "no such flow (freed, or another slot's)");
        return NULL;
    }
    return shm_view_dict(&v, NAN, v.done ? 0.0 : NAN);
}

static PyObject *Mirror_drop(Mirror *m, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"slot", "gen", "party", "wall", NULL};
    int slot, party = FL_NOBODY;
    unsigned int gen;
    PyObject *wall_o = Py_None;
    if (!ready(m) || !PyArg_ParseTupleAndKeywords(args, kwargs, "iI|iO", names, &slot, &gen,
                                                  &party, &wall_o))
        return NULL;
    mi_lock(&m->c);
    api_drop(&m->c, slot, gen, party);
    mi_unlock(&m->c);
    Py_RETURN_NONE;
}

static PyObject *Mirror_advance(Mirror *m, PyObject *args)
{
    double wall;
    if (!ready(m) || !PyArg_ParseTuple(args, "d", &wall))
        return NULL;
    Py_RETURN_NONE;
}

/* take() -> the outbox's events, oldest first: (kind, id, gen, src, dst, amount, bound,
 * resource, persistent, bucket, wall, receiver bell or None) */
static PyObject *Mirror_take(Mirror *m, PyObject *noargs)
{
    if (!ready(m))
        return NULL;
    mi_lock(&m->c);
    Header *h = m->c.h;
    int64_t n = h->out_tail - h->out_head;
    PyObject *list = PyList_New((Py_ssize_t)n);
    if (!list) {
        mi_unlock(&m->c);
        return NULL;
    }
    for (int64_t i = 0; i < n; i++) {
        const Event *e = &m->c.out[(h->out_head + i) % h->out_cap];
        PyObject *bell = e->rcv_len ? PyBytes_FromStringAndSize(e->rcv_bell, e->rcv_len)
                                    : Py_NewRef(Py_None);
        PyObject *t = bell ? Py_BuildValue("(iiIiiddiiidN)", e->kind, e->slot, e->gen, e->src,
                                           e->dst, e->amount, e->bound, e->resource,
                                           e->persistent, e->bucket, e->wall, bell)
                           : NULL;
        if (!t) {
            mi_unlock(&m->c);
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, t);
    }
    h->out_head = h->out_tail;
    mi_unlock(&m->c);
    return list;
}

/* pending() -> events in the outbox (a look without the lock, for the agent's loop) */
static PyObject *Mirror_pending(Mirror *m, PyObject *noargs)
{
    if (!ready(m))
        return NULL;
    return PyLong_FromLongLong(__atomic_load_n(&m->c.h->out_tail, __ATOMIC_ACQUIRE) -
                               __atomic_load_n(&m->c.h->out_head, __ATOMIC_ACQUIRE));
}

/* apply(reports): the owner's reports [(id, gen, kind, wall, receiver bell or None)];
 * rings the parties. Returns how many could not be kept (the table full). */
static PyObject *Mirror_apply(Mirror *m, PyObject *reports)
{
    if (!ready(m))
        return NULL;
    PyObject *seq = PySequence_Fast(reports, "reports must be a sequence");
    if (!seq)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    int lost = 0;
    mi_lock(&m->c);
    for (Py_ssize_t i = 0; i < n; i++) {
        int slot, kind;
        unsigned int gen;
        double at;
        PyObject *bell = Py_None;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "iIid|O", &slot, &gen, &kind,
                              &at, &bell))
            break;
        const char *b;
        int bl;
        if (shm_read_bell(bell, &b, &bl))
            break;
        lost += apply_one(&m->c, slot, gen, kind, at, b, bl) < 0;
    }
    mi_unlock(&m->c);
    Py_DECREF(seq);
    if (PyErr_Occurred())
        return NULL;
    return PyLong_FromLong(lost);
}

/* counts() -> {"free", "remote", "started", "reported"} */
static PyObject *Mirror_counts(Mirror *m, PyObject *noargs)
{
    if (!ready(m))
        return NULL;
    mi_lock(&m->c);
    Header *h = m->c.h;
    int remote_now = 0;
    for (int i = 0; i < h->cap; i++)
        remote_now += m->c.hash[i] >= 0;
    PyObject *out = Py_BuildValue("{s:i,s:i,s:K,s:K}", "free", h->n_free, "remote", remote_now,
                                  "started", (unsigned long long)h->started, "reported",
                                  (unsigned long long)h->reported);
    mi_unlock(&m->c);
    return out;
}

static PyObject *Mirror_detach(Mirror *m, PyObject *noargs)
{
    if (m->c.h) {
        mi_lock(&m->c);
        Header *h = m->c.h;
        m->c.h = NULL;
        shm_let_go(&h->lock, &m->view, &m->has_view);
    }
    Py_RETURN_NONE;
}

static PyObject *Mirror_capsule(Mirror *m, PyObject *noargs)
{
    if (!ready(m))
        return NULL;
    return shm_capsule(&m->capsule, &m->c, "emulator.network._mirror.Mirror", &API);
}

static PyMethodDef Mirror_methods[] = {
    {"add", (PyCFunction)(void (*)(void))Mirror_add, METH_VARARGS | METH_KEYWORDS,
     "add(wall, src, dst, amount, ...) -> (id, gen, start), as Fluid.add"},
    {"view", (PyCFunction)(void (*)(void))Mirror_view, METH_VARARGS | METH_KEYWORDS,
     "view(id, gen, wall=None, party=0) -> dict, as Fluid.view (no end before it is done)"},
    {"drop", (PyCFunction)(void (*)(void))Mirror_drop, METH_VARARGS | METH_KEYWORDS,
     "drop(id, gen, party=0, wall=None)"},
    {"advance", (PyCFunction)Mirror_advance, METH_VARARGS, "advance(wall): nothing here"},
    {"take", (PyCFunction)Mirror_take, METH_NOARGS, "the outbox's events, taken"},
    {"pending", (PyCFunction)Mirror_pending, METH_NOARGS, "events waiting in the outbox"},
    {"apply", (PyCFunction)Mirror_apply, METH_O, "apply(reports) -> reports not kept"},
    {"counts", (PyCFunction)Mirror_counts, METH_NOARGS, "slots free, remote flows, totals"},
    {"detach", (PyCFunction)Mirror_detach, METH_NOARGS, "let go of the window"},
    {"capsule", (PyCFunction)Mirror_capsule, METH_NOARGS, "the handle for the message path"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject MirrorType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "emulator.network._mirror.Mirror",
    .tp_basicsize = sizeof(Mirror),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Mirror(host, n_hosts, node_host, max_slots, buffer, window=None, create=True): "
              "a host's flows of the served model",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Mirror_init,
    .tp_dealloc = (destructor)Mirror_dealloc,
    .tp_methods = Mirror_methods,
};

static PyMethodDef module_methods[] = {
    {"mirror_bytes", mirror_bytes, METH_VARARGS,
     "mirror_bytes(n_nodes, max_slots) -> bytes a mirror's window needs"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_mirror",
                                    "A host's mirror of the served model.", -1,
                                    module_methods};

PyMODINIT_FUNC PyInit__mirror(void)
{
    if (PyType_Ready(&MirrorType) < 0)
        return NULL;
    PyObject *mod = PyModule_Create(&module);
    if (!mod)
        return NULL;
    if (PyModule_AddObjectRef(mod, "Mirror", (PyObject *)&MirrorType) < 0 ||
        PyModule_AddIntConstant(mod, "HOST_STRIDE", HOST_STRIDE) < 0 ||
        PyModule_AddIntConstant(mod, "DONE", UP_DONE) < 0 ||
        PyModule_AddIntConstant(mod, "RELEASE", UP_RELEASE) < 0 ||
        PyModule_AddIntConstant(mod, "START", EV_START) < 0 ||
        PyModule_AddIntConstant(mod, "END", EV_END) < 0) {
        Py_DECREF(mod);
        return NULL;
    }
    return mod;
}
