/* A host's mirror of the cluster's served model, its core (emulator/shaping/served.py says
 * how the model is served to ranks on several hosts).
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
 *
 * This header is plain C: the Python type (emulator/network/_mirror.c) and the interposition
 * library of real programs (emulator/interpose/_pmpi.c) both include it.
 */
#ifndef NODESEL_MIRROR_H
#define NODESEL_MIRROR_H

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

/* A process's handle on a mirror's memory (the rings are this process's own). */
typedef struct {
    Header *h;
    int32_t *node_host, *free_stack, *hash;
    MFlow *flows;
    Event *out;
    Rings rings;
} MirrorCore;

/* -- the lock and the rings (emulator/network/shm.h) ------------------------------- */

static inline void mi_lock(MirrorCore *m)
{
    shm_lock(&m->h->lock);
}

static inline void mi_unlock(MirrorCore *m)
{
    shm_unlock(&m->h->lock, &m->rings);
}

static inline void want_ring(MirrorCore *m, const char *bell, int len)
{
    shm_want_ring(&m->rings, bell, len);
}

/* -- slots and the hash table of remote flows ------------------------------------------ */

static inline int32_t take_slot(MirrorCore *m)
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

static inline void free_slot(MirrorCore *m, int32_t id)
{
    MFlow *x = &m->flows[id];
    if (x->hpos >= 0)
        m->hash[x->hpos] = TOMB;
    x->state = FREE;
    x->gen++;
    m->free_stack[m->h->n_free++] = id;
}

static inline uint32_t hash_of(int32_t key, uint32_t gen, int cap)
{
    uint64_t k = ((uint64_t)(uint32_t)key << 32) | gen;
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return (uint32_t)(k % (uint64_t)cap);
}

/* The slot of remote flow (key, gen); with `make`, made if missing (-1: none, or full). */
static inline int32_t remote(MirrorCore *m, int32_t key, uint32_t gen, int make)
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
static inline MFlow *find(MirrorCore *m, int32_t slot, uint32_t gen, int32_t *local)
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

static inline void api_lock(MirrorCore *m)
{
    if (m->h)
        mi_lock(m);
}

static inline void api_unlock(MirrorCore *m)
{
    if (m->h)
        mi_unlock(m);
}

static inline void api_advance(MirrorCore *m, double wall)
{
    (void)m; /* the owner advances the model; this host only reads what it reports */
    (void)wall;
}

static inline int put(MirrorCore *m, const Event *ev)
{
    Header *h = m->h;
    if (h->out_tail - h->out_head >= h->out_cap)
        return -1;
    m->out[h->out_tail % h->out_cap] = *ev;
    h->out_tail++;
    return 0;
}

/* 0, -1 table or outbox full, -2 node out of range */
static inline int insert(MirrorCore *m, double wall, const NewFlow *n, int32_t *slot,
                         uint32_t *gen, double *start_wall)
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

static inline int api_add(MirrorCore *m, double wall, int src, int dst, double amount,
                          int refs, const char *snd_bell, int snd_len, const char *rcv_bell,
                          int rcv_len, int32_t *slot, uint32_t *gen, double *start_wall)
{
    if (!m->h)
        return -3;
    NewFlow n = {src, dst, refs, -1, 0, 1, amount, 0.0, snd_bell, rcv_bell, snd_len, rcv_len};
    return insert(m, wall, &n, slot, gen, start_wall);
}

static inline int api_view(MirrorCore *m, int32_t slot, uint32_t gen, int party, FlView *out)
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

static inline void end_persistent(MirrorCore *m, int32_t local)
{
    Event ev;
    memset(&ev, 0, sizeof ev);
    ev.kind = EV_END;
    ev.slot = m->h->host * HOST_STRIDE + local;
    ev.gen = m->flows[local].gen;
    ev.wall = shm_wall_now();
    put(m, &ev);
}

static inline void api_drop(MirrorCore *m, int32_t slot, uint32_t gen, int party)
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

static const FluidAPI API __attribute__((unused)) = {
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
static inline int apply_one(MirrorCore *m, int32_t slot, uint32_t gen, int kind, double at,
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

#define CAP(max_slots) (2 * (max_slots))     /* the hash table's places */
#define OUT_CAP(max_slots) (2 * (max_slots)) /* the outbox's events */

static inline size_t layout(int n_nodes, int max_slots, size_t *o_nodes, size_t *o_flows,
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


/* Point `m` at a mirror's memory `mem` (of layout()'s size); with `create`, make an empty
 * mirror there, else check it holds this one. 0; -1 another mirror; else the mutex's error. */
static inline int mirror_map(MirrorCore *m, char *mem, int host, int n_hosts,
                             const int32_t *node_host, int n_nodes, int max_slots,
                             double buffer, int create)
{
    size_t o_nodes, o_flows, o_free, o_hash, o_out;
    size_t size = layout(n_nodes, max_slots, &o_nodes, &o_flows, &o_free, &o_hash, &o_out);
    Header *h = (Header *)mem;
    m->node_host = (int32_t *)(mem + o_nodes);
    m->flows = (MFlow *)(mem + o_flows);
    m->free_stack = (int32_t *)(mem + o_free);
    m->hash = (int32_t *)(mem + o_hash);
    m->out = (Event *)(mem + o_out);
    if (!create) {
        if (h->magic != MI_MAGIC || h->n_nodes != n_nodes || h->max_slots != max_slots ||
            h->host != host)
            return -1;
        m->h = h;
        return 0;
    }
    memset(mem, 0, size);
    int rc = shm_mutex_init(&h->lock);
    if (rc)
        return rc;
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

#endif
