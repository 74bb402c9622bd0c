/* A host's mirror of the cluster's served model (emulator/shaping/served.py says how the
 * model is served to ranks on several hosts).
 *
 * One block of memory, an MPI shared-memory window that every rank of one host maps, holds
 * the flows this host's ranks take part in:
 *  - local flows, started by a rank of this host: `add` takes a slot at once (the flow's
 *    id is this host and the slot, so a send needs no round trip) and puts the start in an
 *    outbox, which the host's agent sends to the model's owner in batches;
 *  - remote flows, started on another host with their receiver here: made when the owner
 *    first reports them, found by their id in a hash table.
 * The owner solves; the agent writes what it reports (a flow's end, a sender's release)
 * with `apply`, which rings the parties' doorbells. A party reads its flow with `view`,
 * exactly as it reads the one-host model (emulator/network/_fluid.c): this type offers the
 * same C interface (FluidAPI, in the context of its capsule), so the message path
 * (emulator/shaping/_engine.c) runs unchanged over it. A flow not yet reported done has no
 * projected end here (infinity): its parties sleep until a ring, or their safety net.
 *
 * A flow id is a slot number: host * HOST_STRIDE + the slot on its host. A process-shared
 * robust mutex guards the block, as the model's does.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "fluid.h"
#include "shm.h"

#define MI_MAGIC 0x3172726f72696d6eULL /* "nmirror1" */
#define HOST_STRIDE 32768             /* slots per host in a flow id */

enum { FREE = 0, ACTIVE = 1, DONE = 2 };
enum { EV_START = 1, EV_END = 2 };      /* outbox: a flow starts; a persistent flow ends */
enum { UP_DONE = 1, UP_RELEASE = 2 };   /* the owner's reports */
enum { EMPTY = -1, TOMB = -2 };

typedef struct {
    int32_t state, refs;
    uint32_t gen;
    int32_t key, hpos; /* a remote flow: its id, and its place in the hash table; else -1 */
    uint32_t key_gen;
    int32_t persistent, released;
    double start, done_at, release_at;
    uint8_t rcv_len, snd_len;
    char rcv_bell[FL_BELL_BYTES], snd_bell[FL_BELL_BYTES];
} MFlow;

typedef struct {
    int32_t kind, slot;
    uint32_t gen;
    int32_t src, dst, resource, persistent, bucket;
    double amount, bound, wall;
    uint8_t rcv_len;
    char rcv_bell[FL_BELL_BYTES];
} Event;

typedef struct {
    uint64_t magic;
    pthread_mutex_t lock;
    int32_t host, n_hosts, n_nodes, max_slots, cap, n_free, out_cap, pad;
    int64_t out_head, out_tail; /* events taken, events put */
    double buffer;              /* a sender is released when this much is left (bits) */
    uint64_t started, reported;
} Header;

typedef struct {
    PyObject_HEAD
    Header *h;
    int32_t *node_host, *free_stack, *hash;
    MFlow *flows;
    Event *out;
    Py_buffer view;
    int has_view;
    void *mem; /* owned when private (a check) */
    Rings rings;
    PyObject *capsule;
} Mirror;

/* -- the lock and the rings (emulator/network/shm.h) ------------------------------- */

static void mi_lock(Mirror *m)
{
    shm_lock(&m->h->lock);
}

static void mi_unlock(Mirror *m)
{
    shm_unlock(&m->h->lock, &m->rings);
}

static void want_ring(Mirror *m, const char *bell, int len)
{
    shm_want_ring(&m->rings, bell, len);
}

/* -- slots and the hash table of remote flows ------------------------------------------ */

static int32_t take_slot(Mirror *m)
{
    if (m->h->n_free == 0)
        return -1;
    int32_t id = m->free_stack[--m->h->n_free];
    MFlow *x = &m->flows[id];
    uint32_t g = x->gen;
    memset(x, 0, sizeof *x);
    x->gen = g;
    x->key = x->hpos = -1;
    x->done_at = x->release_at = NAN;
    return id;
}

static void free_slot(Mirror *m, int32_t id)
{
    MFlow *x = &m->flows[id];
    if (x->hpos >= 0)
        m->hash[x->hpos] = TOMB;
    x->state = FREE;
    x->gen++;
    m->free_stack[m->h->n_free++] = id;
}

static uint32_t hash_of(int32_t key, uint32_t gen, int cap)
{
    uint64_t k = ((uint64_t)(uint32_t)key << 32) | gen;
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return (uint32_t)(k % (uint64_t)cap);
}

/* The slot of remote flow (key, gen); with `make`, made if missing (-1: none, or full). */
static int32_t remote(Mirror *m, int32_t key, uint32_t gen, int make)
{
    int cap = m->h->cap;
    uint32_t i = hash_of(key, gen, cap);
    int32_t tomb = -1;
    for (int probes = 0; probes < cap; probes++, i = (i + 1) % (uint32_t)cap) {
        int32_t s = m->hash[i];
        if (s == EMPTY)
            break;
        if (s == TOMB) {
            if (tomb < 0)
                tomb = (int32_t)i;
            continue;
        }
        if (m->flows[s].key == key && m->flows[s].key_gen == gen)
            return s;
    }
    if (!make)
        return -1;
    int32_t at = tomb >= 0 ? tomb : (int32_t)i;
    if (m->hash[at] >= 0)
        return -1; /* the table is full */
    int32_t id = take_slot(m);
    if (id < 0)
        return -1;
    MFlow *x = &m->flows[id];
    x->state = ACTIVE;
    x->refs = 1; /* its receiver's */
    x->key = key;
    x->key_gen = gen;
    x->hpos = at;
    m->hash[at] = id;
    return id;
}

/* The flow an id names as seen here, or NULL. */
static MFlow *find(Mirror *m, int32_t slot, uint32_t gen, int32_t *local)
{
    if (slot < 0)
        return NULL;
    int32_t host = slot / HOST_STRIDE, s = slot % HOST_STRIDE;
    if (host == m->h->host) {
        if (s >= m->h->max_slots || m->flows[s].gen != gen || m->flows[s].state == FREE)
            return NULL;
        *local = s;
        return &m->flows[s];
    }
    int32_t r = remote(m, slot, gen, 0);
    if (r < 0)
        return NULL;
    *local = r;
    return &m->flows[r];
}

/* -- the model's interface (FluidAPI) ------------------------------------------------- */

static void api_lock(Mirror *m)
{
    if (m->h)
        mi_lock(m);
}

static void api_unlock(Mirror *m)
{
    if (m->h)
        mi_unlock(m);
}

static void api_advance(Mirror *m, double wall)
{
    (void)m; /* the owner advances the model; this host only reads what it reports */
    (void)wall;
}

static int put(Mirror *m, const Event *ev)
{
    Header *h = m->h;
    if (h->out_tail - h->out_head >= h->out_cap)
        return -1;
    m->out[h->out_tail % h->out_cap] = *ev;
    h->out_tail++;
    return 0;
}

/* 0, -1 table or outbox full, -2 node out of range */
static int insert(Mirror *m, double wall, const NewFlow *n, int32_t *slot, uint32_t *gen,
                  double *start_wall)
{
    Header *h = m->h;
    if (n->src < 0 || n->dst < 0 || n->src >= h->n_nodes || n->dst >= h->n_nodes)
        return -2;
    if (h->out_tail - h->out_head >= h->out_cap || h->n_free == 0)
        return -1;
    int32_t id = take_slot(m);
    MFlow *x = &m->flows[id];
    int here = m->node_host[n->dst] == h->host || n->resource >= 0 || n->persistent;
    /* a receiver on another host reads its own mirror: here only the sender's hold */
    x->refs = here ? n->refs : n->refs - 1;
    x->state = ACTIVE;
    x->persistent = n->persistent;
    x->start = wall;
    if (!n->persistent && n->amount <= h->buffer) {
        x->released = 1;
        x->release_at = wall;
    }
    x->rcv_len = (uint8_t)(n->rcv_len > 0 && n->rcv_len <= FL_BELL_BYTES ? n->rcv_len : 0);
    x->snd_len = (uint8_t)(n->snd_len > 0 && n->snd_len <= FL_BELL_BYTES ? n->snd_len : 0);
    if (x->rcv_len)
        memcpy(x->rcv_bell, n->rcv_bell, x->rcv_len);
    if (x->snd_len)
        memcpy(x->snd_bell, n->snd_bell, x->snd_len);
    Event ev;
    memset(&ev, 0, sizeof ev);
    ev.kind = EV_START;
    ev.slot = h->host * HOST_STRIDE + id;
    ev.gen = x->gen;
    ev.src = n->src;
    ev.dst = n->dst;
    ev.resource = n->resource;
    ev.persistent = n->persistent;
    ev.bucket = n->bucket;
    ev.amount = n->amount;
    ev.bound = n->bound;
    ev.wall = wall;
    if (!here) { /* the receiver's bell, where it can be heard from this host */
        ev.rcv_len = x->rcv_len;
        memcpy(ev.rcv_bell, x->rcv_bell, x->rcv_len);
    }
    put(m, &ev);
    h->started++;
    *slot = ev.slot;
    *gen = x->gen;
    *start_wall = wall;
    return 0;
}

static int api_add(Mirror *m, double wall, int src, int dst, double amount, int refs,
                   const char *snd_bell, int snd_len, const char *rcv_bell, int rcv_len,
                   int32_t *slot, uint32_t *gen, double *start_wall)
{
    if (!m->h)
        return -3;
    NewFlow n = {src, dst, refs, -1, 0, 1, amount, 0.0, snd_bell, rcv_bell, snd_len, rcv_len};
    return insert(m, wall, &n, slot, gen, start_wall);
}

static int api_view(Mirror *m, int32_t slot, uint32_t gen, int party, FlView *out)
{
    if (!m->h)
        return -1;
    int32_t local;
    MFlow *x = find(m, slot, gen, &local);
    out->next_change = INFINITY;
    if (!x) {
        /* a flow from another host not reported yet: it has started, and has no end here */
        if (slot / HOST_STRIDE == m->h->host || slot < 0)
            return -1;
        out->state = ACTIVE;
        out->done = out->released = 0;
        out->start = out->end = out->release = INFINITY;
        return 0;
    }
    (void)party;
    out->state = x->state;
    out->start = x->start;
    out->done = x->state == DONE;
    out->released = x->released;
    out->end = out->done ? x->done_at : INFINITY;
    out->release = x->released ? x->release_at : INFINITY;
    return 0;
}

static void end_persistent(Mirror *m, int32_t local)
{
    Event ev;
    memset(&ev, 0, sizeof ev);
    ev.kind = EV_END;
    ev.slot = m->h->host * HOST_STRIDE + local;
    ev.gen = m->flows[local].gen;
    ev.wall = shm_wall_now();
    put(m, &ev);
}

static void api_drop(Mirror *m, int32_t slot, uint32_t gen, int party)
{
    if (!m->h)
        return;
    int32_t local;
    MFlow *x = find(m, slot, gen, &local);
    if (!x)
        return;
    if (party == FL_SENDER)
        x->snd_len = 0;
    else if (party == FL_RECEIVER)
        x->rcv_len = 0;
    if (--x->refs > 0)
        return;
    if (x->persistent) {
        end_persistent(m, local);
        free_slot(m, local);
    } else if (x->state == DONE) {
        free_slot(m, local);
    } /* else freed when the owner reports its end */
}

static const FluidAPI API = {
    FLUID_API_VERSION,
    (void (*)(void *))api_lock,
    (void (*)(void *))api_unlock,
    (void (*)(void *, double))api_advance,
    (int (*)(void *, double, int, int, double, int, const char *, int, const char *, int,
             int32_t *, uint32_t *, double *))api_add,
    (int (*)(void *, int32_t, uint32_t, int, FlView *))api_view,
    (void (*)(void *, int32_t, uint32_t, int))api_drop,
};

/* -- the owner's reports -------------------------------------------------------------- */

/* One report: (id, gen, kind, wall, receiver bell or None). */
static int apply_one(Mirror *m, int32_t slot, uint32_t gen, int kind, double at,
                     const char *bell, int bell_len)
{
    Header *h = m->h;
    int32_t local = -1;
    MFlow *x;
    if (slot / HOST_STRIDE == h->host) {
        x = find(m, slot, gen, &local);
    } else {
        local = remote(m, slot, gen, 1);
        x = local < 0 ? NULL : &m->flows[local];
        if (x && !x->rcv_len && bell_len > 0 && bell_len <= FL_BELL_BYTES) {
            x->rcv_len = (uint8_t)bell_len;
            memcpy(x->rcv_bell, bell, (size_t)bell_len);
        }
    }
    if (!x)
        return slot / HOST_STRIDE == h->host ? 0 : -1; /* gone here already; or full */
    h->reported++;
    if (kind == UP_RELEASE || kind == UP_DONE) {
        if (!x->released) {
            x->released = 1;
            x->release_at = at;
            want_ring(m, x->snd_bell, x->snd_len);
        }
    }
    if (kind == UP_DONE && x->state != DONE) {
        x->state = DONE;
        x->done_at = at;
        want_ring(m, x->rcv_bell, x->rcv_len);
        if (x->refs <= 0)
            free_slot(m, local);
    }
    return 0;
}

/* -- the Python type ---------------------------------------------------------------- */

#define CAP(max_slots) (2 * (max_slots))     /* the hash table's places */
#define OUT_CAP(max_slots) (2 * (max_slots)) /* the outbox's events */

static size_t layout(int n_nodes, int max_slots, size_t *o_nodes, size_t *o_flows,
                     size_t *o_free, size_t *o_hash, size_t *o_out)
{
    int cap = CAP(max_slots), out_cap = OUT_CAP(max_slots);
    size_t at = (sizeof(Header) + 63) & ~(size_t)63;
    *o_nodes = at;
    at += sizeof(int32_t) * (size_t)n_nodes;
    at = (at + 63) & ~(size_t)63;
    *o_flows = at;
    at += sizeof(MFlow) * (size_t)max_slots;
    *o_free = at;
    at += sizeof(int32_t) * (size_t)max_slots;
    *o_hash = at;
    at += sizeof(int32_t) * (size_t)cap;
    at = (at + 63) & ~(size_t)63;
    *o_out = at;
    at += sizeof(Event) * (size_t)out_cap;
    return at;
}

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
    size_t o_nodes, o_flows, o_free, o_hash, o_out;
    size_t size = layout(n_nodes, max_slots, &o_nodes, &o_flows, &o_free, &o_hash, &o_out);
    char *mem = shm_memory(window, size, &m->view, &m->has_view, &m->mem);
    if (!mem)
        return -1;
    Header *h = (Header *)mem;
    m->node_host = (int32_t *)(mem + o_nodes);
    m->flows = (MFlow *)(mem + o_flows);
    m->free_stack = (int32_t *)(mem + o_free);
    m->hash = (int32_t *)(mem + o_hash);
    m->out = (Event *)(mem + o_out);
    if (window != Py_None && !create) {
        if (h->magic == MI_MAGIC && h->n_nodes == n_nodes && h->max_slots == max_slots &&
            h->host == host) {
            m->h = h;
            return 0;
        }
        PyErr_SetString(PyExc_ValueError, "the window holds another mirror");
        return -1;
    }
    memset(mem, 0, size);
    int rc = shm_mutex_init(&h->lock);
    if (rc) {
        PyErr_Format(PyExc_OSError, "pthread_mutex_init: %s", strerror(rc));
        return -1;
    }
    h->host = host;
    h->n_hosts = n_hosts;
    h->n_nodes = n_nodes;
    h->max_slots = max_slots;
    h->cap = CAP(max_slots);
    h->out_cap = OUT_CAP(max_slots);
    h->buffer = buffer;
    memcpy(m->node_host, node_host, sizeof(int32_t) * (size_t)n_nodes);
    for (int i = 0; i < max_slots; i++)
        m->free_stack[i] = max_slots - 1 - i;
    h->n_free = max_slots;
    for (int i = 0; i < h->cap; i++)
        m->hash[i] = EMPTY;
    h->magic = MI_MAGIC;
    m->h = h;
    return 0;
}

static int Mirror_init(Mirror *m, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"host", "n_hosts", "node_host", "max_slots", "buffer", "window",
                            "create", NULL};
    int host, n_hosts, max_slots, create = 1;
    double buffer;
    PyObject *node_host, *window = Py_None;
    if (m->h) {
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
    m->rings.fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    return 0;
}

static void Mirror_dealloc(Mirror *m)
{
    if (m->has_view)
        PyBuffer_Release(&m->view);
    free(m->mem);
    if (m->rings.fd >= 0)
        close(m->rings.fd);
    Py_XDECREF(m->capsule);
    Py_TYPE(m)->tp_free((PyObject *)m);
}

static int ready(Mirror *m)
{
    if (!m->h) {
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
    mi_lock(m);
    int rc = insert(m, wall, &n, &slot, &gen, &start);
    mi_unlock(m);
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
    mi_lock(m);
    int rc = api_view(m, slot, gen, party, &v);
    mi_unlock(m);
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
    mi_lock(m);
    api_drop(m, slot, gen, party);
    mi_unlock(m);
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
    mi_lock(m);
    Header *h = m->h;
    int64_t n = h->out_tail - h->out_head;
    PyObject *list = PyList_New((Py_ssize_t)n);
    if (!list) {
        mi_unlock(m);
        return NULL;
    }
    for (int64_t i = 0; i < n; i++) {
        const Event *e = &m->out[(h->out_head + i) % h->out_cap];
        PyObject *bell = e->rcv_len ? PyBytes_FromStringAndSize(e->rcv_bell, e->rcv_len)
                                    : Py_NewRef(Py_None);
        PyObject *t = bell ? Py_BuildValue("(iiIiiddiiidN)", e->kind, e->slot, e->gen, e->src,
                                           e->dst, e->amount, e->bound, e->resource,
                                           e->persistent, e->bucket, e->wall, bell)
                           : NULL;
        if (!t) {
            mi_unlock(m);
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, t);
    }
    h->out_head = h->out_tail;
    mi_unlock(m);
    return list;
}

/* pending() -> events in the outbox (a look without the lock, for the agent's loop) */
static PyObject *Mirror_pending(Mirror *m, PyObject *noargs)
{
    if (!ready(m))
        return NULL;
    return PyLong_FromLongLong(__atomic_load_n(&m->h->out_tail, __ATOMIC_ACQUIRE) -
                               __atomic_load_n(&m->h->out_head, __ATOMIC_ACQUIRE));
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
    mi_lock(m);
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
        lost += apply_one(m, slot, gen, kind, at, b, bl) < 0;
    }
    mi_unlock(m);
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
    mi_lock(m);
    Header *h = m->h;
    int remote_now = 0;
    for (int i = 0; i < h->cap; i++)
        remote_now += m->hash[i] >= 0;
    PyObject *out = Py_BuildValue("{s:i,s:i,s:K,s:K}", "free", h->n_free, "remote", remote_now,
                                  "started", (unsigned long long)h->started, "reported",
                                  (unsigned long long)h->reported);
    mi_unlock(m);
    return out;
}

static PyObject *Mirror_detach(Mirror *m, PyObject *noargs)
{
    if (m->h) {
        mi_lock(m);
        Header *h = m->h;
        m->h = NULL;
        shm_let_go(&h->lock, &m->view, &m->has_view);
    }
    Py_RETURN_NONE;
}

static PyObject *Mirror_capsule(Mirror *m, PyObject *noargs)
{
    if (!ready(m))
        return NULL;
    return shm_capsule(&m->capsule, m, "emulator.shaping._mirror.Mirror", &API);
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
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "emulator.shaping._mirror.Mirror",
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
