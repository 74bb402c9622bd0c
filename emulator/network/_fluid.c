/* The cluster's network as one fluid model: every active flow shares every resource it
 * crosses, max-min fair (progressive filling), re-solved whenever a flow starts or ends or
 * the scenario changes, for the flows the change can reach (the incremental solve, below)
 * (emulator/network/sharing.py says what the resources are).
 *
 * A resource is a directed link (a port up or down, a switch-to-switch link in one
 * direction, a crossbar pair's path in one direction) or a node's CPU, with a capacity in
 * units per second (bit/s, or CPU-seconds per second) and a number of background flows (the
 * stream model's competing streams: unbounded, crossing that resource alone). A flow has a
 * source and a destination node (its path is theirs), a size, optionally a bound on its rate
 * and a path of its own (a compute phase: the node's CPU).
 *
 * The state lives in one block of memory: private to a process (the model of `nodesel flows
 * --model-only`, of selection and the estimators), or an MPI shared-memory window that every
 * rank of a machine maps (the emulator's message path). A process-shared robust mutex guards
 * it; a rank that dies holding it leaves the state to the next locker, which goes on. The
 * state is advanced lazily, event by event, by whichever process holds the lock: times are
 * kept relative to a base (wall time at creation) for precision. When a re-solve moves a
 * flow's projected end (or its sender's release) earlier than its receiver (sender) last
 * read it, that party's doorbell is rung after the lock is released.
 *
 * Each process also holds a read-only description (paths, capacities, the two timelines:
 * the scenario and the dedicated network), built from the same cluster everywhere, and the
 * scratch arrays of the solver. The engine of the message path (emulator/shaping/_engine.c)
 * reaches these functions through a capsule (FluidAPI), so there is one compiled model.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "fluid.h"
#include "shm.h"

#define FL_MAGIC 0x31666c7569646e73ULL /* "sndiulf1" */
#define FL_VERSION 5
#define DONE_BITS_SECONDS 1e-9 /* a flow within this much transfer of its end is done */
#define RING_EPS_SECONDS 2e-5  /* a projection this much earlier than seen wakes the party */
#define FL_MAX_PATH 16 /* resources a flow crosses, at most, for the incremental solve */
#define FL_SEEDS 1024  /* flows and resources a solve starts from; past that, a full solve */
#define CHANGE_TOL 1e-11 /* a rate this much apart (relative) has changed */
#define FULL_SHARE 2.0 /* an incremental solve whose rounds have solved twice as many
                          flows as are active, summed, stops and solves them all (at 1 and
                          1.5, more gave up: slower where changes reach far) */

enum { FREE = 0, ACTIVE = 1, DONE = 2 };

typedef struct {
    double capacity; /* units per second, dilated */
    int32_t background;
    int32_t head;      /* the first element (flow * FL_MAX_PATH + position) crossing it, -1 */
    int32_t n_flows;   /* active flows crossing it */
    int32_t saturated; /* in the last solve that reached it */
    long double load;  /* the rates of its flows, summed (long: it is kept by differences) */
} Res;

/* The fields the solver reads for every flow it meets come first, in the first three cache
 * lines of the record (its rate, its path, its place in its resources' lists). */
typedef struct {
    int32_t state, refs;
    uint32_t gen;
    int32_t src, dst;
    int32_t own_res; /* a path of one resource of its own (>= 0), else the pair's */
    int32_t persistent;
    int32_t path_len; /* a routed model's: the resources its pair's flows cross */
    double rate, bound;
    double remaining, t_ref; /* what is left of it at relative time t_ref (its last rate) */
    int32_t path[FL_MAX_PATH];
    /* while active: its place in each crossed resource's list of elements */
    int32_t link_next[FL_MAX_PATH], link_prev[FL_MAX_PATH];
    double start, size;
    double key[2];   /* while active: its end and its release, as the event heaps hold them */
    int32_t hpos[2]; /* its place in each event heap, -1 if not in it */
    int32_t apos;    /* while active: its place in the active list */
    int32_t pad;
    double done_at, release_at; /* relative times; NAN until known */
    double rcv_seen, snd_seen;  /* projections the parties last read */
    uint8_t rcv_len, snd_len;
    char rcv_bell[FL_BELL_BYTES], snd_bell[FL_BELL_BYTES];
} Flow;

typedef struct {
    uint64_t magic;
    uint32_t version, ready;
    pthread_mutex_t lock;
    int32_t n_nodes, n_res, max_flows, n_active, n_free, timeline, dirty, pad;
    int32_t n_heap[2]; /* flows in the event heaps: ends, releases */
    double base;  /* wall time of relative time 0 */
    double clock; /* the model's relative time: every event before it is done */
    double epoch, time_scale, dilation; /* scenario time t is at wall epoch + t*dilation/scale */
    double played; /* the latest scenario time the model has reached */
    double buffer; /* a sender is released when this much of its flow is left */
    int64_t cursor; /* the next scenario event */
    uint64_t solves, full_solves;
    /* what changed since the last solve: flows that started, resources whose users or
     * capacity changed (seed_full: everything) */
    int32_t n_seed_flows, n_seed_res, seed_full, linked;
    int32_t seed_flows[FL_SEEDS], seed_res[FL_SEEDS];
    double seed_floor; /* no flow slower than this can change in the next solve */
} Header;

typedef struct {
    int n_events;
    double *t;
    int32_t *res;
    double *capacity;
    int32_t *background;
    double *init_capacity;
    int32_t *init_background;
    double duration;
} Timeline;

typedef struct HeapEntry {
    double key; /* at most the level at which r saturates */
    int32_t r;
} HeapEntry;

typedef struct Fluid {
    PyObject_HEAD
    Header *h;
    Res *res;
    Flow *flows;
    int32_t *active, *free_stack;
    int32_t *heap_of[2]; /* the event heaps (in the state): flows by their end, their release */
    double *bucket; /* tokens, busy until: per ordered node pair */
    void *mem;      /* owned when private */
    Py_buffer view; /* the shared window, when shared */
    int has_view;
    /* the description, the same in every process */
    int n_nodes, n_res;
    /* how a pair's flows cross resources: a table per ordered node pair (ROUTE_TABLE), or
     * routes made at each flow's start from a tree (parent, depth, the resources up to the
     * parent and down from it, per vertex; the vertex of each node) or a crossbar (each
     * node's port up and down; the pairs' paths from pair_base on, source-major) */
    int route_kind;
    int32_t *path_start, *paths;
    int32_t *r_parent, *r_depth, *r_up, *r_down, *r_vertex;
    int32_t *r_fabric; /* a tree's: per vertex, its switch fabric's resource (-1: none) */
    int32_t *r_fat;    /* a tree's: per resource, 1 where each flow alone is held to the
                          capacity (SimGrid's FATPIPE) instead of sharing it */
    int32_t r_pair_base;
    Timeline tl[2];
    /* scratch of the solver and of the rings */
    double *rem;
    int32_t *users, *stamp, *touched, *unfrozen;
    char *sat;
    int32_t stamp_now, n_touched;
    double *lvl;   /* per resource: the level at which it saturated */
    /* the heap solve's own: per resource its rem at level lref and its elements' span, the
     * heap of resources by saturation level; per position of the ids given, frozen or not */
    double *lref;
    struct HeapEntry *heap;
    int32_t *span, *span_end, *elems, *by_bound, *newsat;
    char *frozen;
    size_t elems_cap;
    double *fixed; /* per resource: what flows outside an incremental solve take of it */
    /* the incremental solve's own: its flows (F) and closed resources (S) */
    double *old_rate, *f_max;
    long double *f_load; /* per resource: what F's flows took of it before the solve */
    int32_t *in_f, *in_s, *f_list, *s_list, *r_stamp, *f_count;
    char *has_out;
    int32_t f_now, s_now, r_now;
    /* F grows round by round: the flows of F already counted in f_count and f_load, and the
     * resources a round's new flows cross (stamped with the round) */
    int32_t counted, round_now, *r_round, *changed;
    /* per resource, within one solve: the fastest flow outside F (fastest_outside) */
    int32_t *fo_stamp, *fo_id;
    double *fo_rate;
    double cut; /* this solve's: flows slower than this keep their rates (outside F) */
    double attempt_cost; /* incremental attempts' cost lately, in full solves (moving average) */
    double *caps;       /* the floor of a new flow's solve: the rates on one resource */
    int32_t full_streak; /* full solves in a row since, skipping the incremental attempt */
    Rings rings;
    PyObject *capsule;
    /* the served model's owner (emulator/shaping/served.py): ends and releases since last
     * taken, when tracked */
    int track;
    int32_t n_log, log_cap;
    struct LogEntry *log;
} Fluid;

typedef struct LogEntry {
    int32_t slot;
    uint32_t gen;
    int32_t kind; /* 1 done, 2 released */
    double at;    /* relative time */
} LogEntry;

static void log_event(Fluid *f, int32_t id, int kind, double at)
{
    if (!f->track)
        return;
    if (f->n_log == f->log_cap) {
        int32_t cap = f->log_cap ? 2 * f->log_cap : 1024;
        LogEntry *grown = realloc(f->log, sizeof(LogEntry) * (size_t)cap);
        if (!grown)
            return; /* the owner finds the flow by its view at the next report */
        f->log = grown;
        f->log_cap = cap;
    }
    f->log[f->n_log++] = (LogEntry){id, f->flows[id].gen, kind, at};
}

static PyTypeObject FluidType;
static void seed_everything(Fluid *f);

/* -- clocks --------------------------------------------------------------------------- */

/* Relative model time of scenario time t. */
static double scen_to_rel(const Header *h, double t)
{
    return h->epoch - h->base + t * h->dilation / h->time_scale;
}

static double rel_to_scen(const Header *h, double rel)
{
    return (rel + h->base - h->epoch) * h->time_scale / h->dilation;
}

/* -- the lock (emulator/network/shm.h) -------------------------------------------- */

static void fl_lock(Fluid *f)
{
    shm_lock(&f->h->lock);
}

/* Release the lock, then ring the parties a solve woke. */
static void fl_unlock(Fluid *f)
{
    shm_unlock(&f->h->lock, &f->rings);
}

static void want_ring(Fluid *f, const char *bell, int len)
{
    shm_want_ring(&f->rings, bell, len);
}

/* -- resources and paths -------------------------------------------------------------- */

enum { ROUTE_TABLE = 0, ROUTE_TREE = 1, ROUTE_CROSSBAR = 2 };

static int path_of(const Fluid *f, const Flow *x, const int32_t **path)
{
    if (x->own_res >= 0) {
        *path = &x->own_res;
        return 1;
    }
    if (f->route_kind != ROUTE_TABLE) {
        *path = x->path;
        return x->path_len;
    }
    int k = x->src * f->n_nodes + x->dst;
    *path = f->paths + f->path_start[k];
    return f->path_start[k + 1] - f->path_start[k];
}

/* The switch fabrics a route from vertex a to vertex b through their common ancestor
 * `top` crosses, added to its n resources in buf: every vertex between the ends, once. */
static int add_fabrics(const Fluid *f, int32_t a, int32_t b, int32_t top, int32_t *buf, int n)
{
    for (int side = 0; side < 2; side++) {
        for (int32_t v = side ? b : a; v != top;) {
            v = f->r_parent[v];
            if (v != top && f->r_fabric[v] >= 0) {
                if (n >= FL_MAX_PATH)
                    return -1;
                buf[n++] = f->r_fabric[v];
            }
        }
    }
    if (top != a && top != b && f->r_fabric[top] >= 0) {
        if (n >= FL_MAX_PATH)
            return -1;
        buf[n++] = f->r_fabric[top];
    }
    return n;
}

/* The resources a flow from node src to dst crosses: in the table, or made into `buf` (at
 * most FL_MAX_PATH; -1 if the route is longer). */
static int pair_path(const Fluid *f, int src, int dst, int32_t *buf, const int32_t **path)
{
    if (f->route_kind == ROUTE_TABLE) {
        int k = src * f->n_nodes + dst;
        *path = f->paths + f->path_start[k];
        return f->path_start[k + 1] - f->path_start[k];
    }
    *path = buf;
    if (src == dst)
        return 0;
    if (f->route_kind == ROUTE_CROSSBAR) {
        buf[0] = f->r_up[src];
        buf[1] = f->r_pair_base + src * (f->n_nodes - 1) + dst - (dst > src);
        buf[2] = f->r_down[dst];
        return 3;
    }
    int32_t a = f->r_vertex[src], b = f->r_vertex[dst], down[FL_MAX_PATH];
    int n_up = 0, n_down = 0;
    while (a != b) { /* climb the deeper end (both while level) to the common ancestor */
        if (n_up + n_down >= FL_MAX_PATH)
            return -1;
        if (f->r_depth[a] >= f->r_depth[b]) {
            buf[n_up++] = f->r_up[a];
            a = f->r_parent[a];
        } else {
            down[n_down++] = f->r_down[b];
            b = f->r_parent[b];
        }
    }
    for (int j = n_down - 1; j >= 0; j--)
        buf[n_up++] = down[j];
    return f->r_fabric ? add_fabrics(f, f->r_vertex[src], f->r_vertex[dst], a, buf, n_up)
                       : n_up;
}

/* Resource states at scenario time t of the current timeline (after a clock change). */
static void reset_resources(Fluid *f)
{
    Header *h = f->h;
    const Timeline *tl = &f->tl[h->timeline];
    for (int r = 0; r < f->n_res; r++) {
        f->res[r].capacity = tl->init_capacity[r] / h->dilation;
        f->res[r].background = tl->init_background[r];
    }
    double now_scen = rel_to_scen(h, h->clock);
    int64_t k = 0;
    for (; k < tl->n_events && tl->t[k] <= now_scen; k++) {
        f->res[tl->res[k]].capacity = tl->capacity[k] / h->dilation;
        f->res[tl->res[k]].background = tl->background[k];
    }
    h->cursor = k;
    seed_everything(f);
}

/* -- the max-min solve (progressive filling) ----------------------------------------- */

/* Rates of the flows in `ids` (n of them) over capacities `cap` and background `bg`:
 * every flow's rate is raised together; a flow freezes when a resource on its path is
 * saturated or it reaches its bound; background flows freeze with their resource. With
 * `fixed`, what other flows take of each resource is left out of its capacity. Leaves the
 * resources it reached in f->touched (f->n_touched), their saturation in f->sat and the
 * level at which they saturated in f->lvl (where the caller has one). */
static void maxmin(Fluid *f, const int32_t *ids, int n, Flow *flows, const Res *res,
                   const double *fixed)
{
    int32_t now = ++f->stamp_now;
    int nt = 0;
    for (int i = 0; i < n; i++) {
        Flow *x = &flows[ids[i]];
        x->rate = 0.0;
        const int32_t *p;
        int len = path_of(f, x, &p);
        for (int j = 0; j < len; j++) {
            int r = p[j];
            if (f->stamp[r] != now) {
                f->stamp[r] = now;
                f->touched[nt++] = r;
                f->rem[r] = res[r].capacity - (fixed ? fixed[r] : 0.0);
                if (f->rem[r] < 0)
                    f->rem[r] = 0;
                f->users[r] = res[r].background;
                f->sat[r] = 0;
                if (f->lvl)
                    f->lvl[r] = INFINITY;
            }
            f->users[r]++;
        }
        f->unfrozen[i] = ids[i];
    }
    f->n_touched = nt;
    int nu = n;
    double level = 0.0;
    while (nu > 0) {
        double d = INFINITY;
        int arg = -1;
        for (int i = 0; i < nt; i++) {
            int r = f->touched[i];
            if (!f->sat[r] && f->users[r] > 0 && f->rem[r] / f->users[r] < d) {
                d = f->rem[r] / f->users[r];
                arg = r;
            }
        }
        for (int i = 0; i < nu; i++) {
            Flow *x = &flows[f->unfrozen[i]];
            if (x->bound > 0 && x->bound - level < d) {
                d = x->bound - level;
                arg = -1;
            }
        }
        if (!isfinite(d)) { /* flows that cross nothing and have no bound: unlimited */
            for (int i = 0; i < nu; i++)
                flows[f->unfrozen[i]].rate = INFINITY;
            break;
        }
        if (d < 0)
            d = 0;
        level += d;
        for (int i = 0; i < nt; i++) {
            int r = f->touched[i];
            if (f->sat[r] || f->users[r] <= 0)
                continue;
            f->rem[r] -= d * f->users[r];
            if (r == arg || f->rem[r] <= 1e-12 * res[r].capacity) {
                f->sat[r] = 1;
                if (f->lvl)
                    f->lvl[r] = level;
            }
        }
        int k = 0;
        for (int i = 0; i < nu; i++) {
            Flow *x = &flows[f->unfrozen[i]];
            int frozen = x->bound > 0 && level >= x->bound * (1 - 1e-12);
            const int32_t *p;
            int len = path_of(f, x, &p);
            for (int j = 0; !frozen && j < len; j++)
                frozen = f->sat[p[j]];
            if (frozen) {
                x->rate = x->bound > 0 && level > x->bound ? x->bound : level;
                for (int j = 0; j < len; j++)
                    f->users[p[j]]--;
            } else {
                f->unfrozen[k++] = f->unfrozen[i];
            }
        }
        nu = k;
    }
    for (int i = 0; i < nt; i++) { /* background streams fill what the flows left */
        int r = f->touched[i];
        if (!f->sat[r] && res[r].background > 0) {
            f->sat[r] = 1;
            if (f->lvl)
                f->lvl[r] = level + f->rem[r] / f->users[r];
        }
    }
}

/* -- the max-min solve by events ------------------------------------------------------
 *
 * The same progressive filling as maxmin(), driven by events instead of rounds over every
 * resource and flow. While its users do not change, a resource saturates at level
 * lref + rem / users (rem: what was left of it at level lref), so the resources wait in a
 * heap by that level; a saturation freezes the unfrozen flows crossing it (through this
 * solve's elements, grouped by resource), and each frozen flow updates the resources on
 * its path. Bounds are events too, in increasing order. O(E log R) for E elements on R
 * resources, where maxmin() costs O(levels x (R + flows)). maxmin() stays the reference
 * (Fluid.check() compares the two). */

/* Sift the entry at heap place i down, moving the others into the hole it leaves. The heap
 * holds (key, resource) pairs: a comparison reads no other array. */
static void heap_down(Fluid *f, int i, int n)
{
    HeapEntry moving = f->heap[i];
    for (;;) {
        int l = 2 * i + 1, m = l;
        if (l >= n)
            break;
        if (l + 1 < n && f->heap[l + 1].key < f->heap[l].key)
            m = l + 1;
        if (!(f->heap[m].key < moving.key))
            break;
        f->heap[i] = f->heap[m];
        i = m;
    }
    f->heap[i] = moving;
}

/* what is left of resource r at `level` */
static inline double rem_at(const Fluid *f, int32_t r, double level)
{
    return f->rem[r] - f->users[r] * (level - f->lref[r]);
}

static int grow_elems(Fluid *f, size_t need)
{
    if (need <= f->elems_cap)
        return 0;
    size_t cap = need * 2;
    int32_t *e = realloc(f->elems, sizeof(int32_t) * cap);
    if (!e)
        return -1;
    f->elems = e;
    f->elems_cap = cap;
    return 0;
}

static const Flow *sort_flows; /* the flows and ids bound_order() sorts positions of */
static const int32_t *sort_ids;

static int bound_order(const void *a, const void *b)
{
    double x = sort_flows[sort_ids[*(const int32_t *)a]].bound;
    double y = sort_flows[sort_ids[*(const int32_t *)b]].bound;
    return (x > y) - (x < y);
}

/* The level at which resource r saturates while its users stay as they are. */
static inline double saturation_level(const Fluid *f, int32_t r)
{
    return f->users[r] > 0 ? f->lref[r] + fmax(f->rem[r], 0.0) / f->users[r] : INFINITY;
}

/* The flow at position i of `ids` freezes at `level` (or its bound, if lower): the
 * resources on its path lose a user and wait for a later level. Their keys in the heap are
 * left as they were: a resource's saturation level only rises as its users freeze
 * elsewhere, so a key is a lower bound of it, made exact when it comes to the top
 * (fresh_top). */
static void freeze(Fluid *f, const int32_t *ids, int i, Flow *flows, double level)
{
    Flow *x = &flows[ids[i]];
    f->frozen[i] = 1;
    x->rate = x->bound > 0 && level > x->bound ? x->bound : level;
    const int32_t *p;
    int len = path_of(f, x, &p);
    for (int j = 0; j < len; j++) {
        int32_t r = p[j];
        f->rem[r] = rem_at(f, r, level);
        f->lref[r] = level;
        f->users[r]--;
    }
}

/* The heap's top made exact: a top whose key is below its saturation level goes down with
 * that key, until the top's key is its own (then no resource saturates earlier). */
static void fresh_top(Fluid *f, int hn)
{
    while (hn > 0) {
        double k = saturation_level(f, f->heap[0].r);
        if (!(k > f->heap[0].key))
            return;
        f->heap[0].key = k;
        heap_down(f, 0, hn);
    }
}

/* Group the elements of the flows in `ids` by resource: f->span[r] .. f->span_end[r] in
 * f->elems (positions in ids). -1 if out of memory. */
static int group_elements(Fluid *f, const int32_t *ids, int n, Flow *flows, size_t total)
{
    if (grow_elems(f, total + 1))
        return -1;
    int32_t at = 0;
    for (int k = 0; k < f->n_touched; k++) {
        int32_t r = f->touched[k];
        at += f->span[r]; /* its count so far */
        f->span[r] = f->span_end[r] = at;
    }
    for (int i = n - 1; i >= 0; i--) {
        const int32_t *p;
        int len = path_of(f, &flows[ids[i]], &p);
        for (int j = 0; j < len; j++)
            f->elems[--f->span[p[j]]] = i;
    }
    return 0;
}

static int maxmin_events(Fluid *f, const int32_t *ids, int n, Flow *flows, const Res *res,
                         const double *fixed)
{
    int32_t now = ++f->stamp_now;
    int nt = 0;
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        Flow *x = &flows[ids[i]];
        x->rate = 0.0;
        f->frozen[i] = 0;
        const int32_t *p;
        int len = path_of(f, x, &p);
        total += (size_t)len;
        for (int j = 0; j < len; j++) {
            int32_t r = p[j];
            if (f->stamp[r] != now) {
                f->stamp[r] = now;
                f->touched[nt++] = r;
                f->rem[r] = res[r].capacity - (fixed ? fixed[r] : 0.0);
                if (f->rem[r] < 0)
                    f->rem[r] = 0;
                f->lref[r] = 0.0;
                f->users[r] = res[r].background;
                f->span[r] = 0;
                f->sat[r] = 0;
                f->lvl[r] = INFINITY;
            }
            f->users[r]++;
            f->span[r]++;
        }
    }
    f->n_touched = nt;
    if (group_elements(f, ids, n, flows, total))
        return -1;
    int hn = 0;
    for (int k = 0; k < nt; k++) {
        int32_t r = f->touched[k];
        f->heap[hn++] = (HeapEntry){f->rem[r] / f->users[r], r};
    }
    for (int i = hn / 2 - 1; i >= 0; i--)
        heap_down(f, i, hn);
    int nb = 0;
    for (int i = 0; i < n; i++)
        if (flows[ids[i]].bound > 0)
            f->by_bound[nb++] = i;
    sort_flows = flows;
    sort_ids = ids;
    qsort(f->by_bound, (size_t)nb, sizeof(int32_t), bound_order);
    int nu = n, b = 0;
    double level = 0.0;
    while (nu > 0) {
        while (b < nb && f->frozen[f->by_bound[b]])
            b++;
        fresh_top(f, hn);
        double next_res = hn ? f->heap[0].key : INFINITY;
        double next_bound = b < nb ? flows[ids[f->by_bound[b]]].bound : INFINITY;
        double next = next_bound < next_res ? next_bound : next_res;
        if (!isfinite(next)) { /* flows that cross nothing and have no bound: unlimited */
            for (int i = 0; i < n; i++)
                if (!f->frozen[i])
                    flows[ids[i]].rate = INFINITY;
            break;
        }
        if (next > level)
            level = next;
        int n_new = 0; /* every resource out of room at this level saturates */
        while (hn > 0) {
            fresh_top(f, hn);
            int32_t r = f->heap[0].r;
            if (!(f->heap[0].key <= level || rem_at(f, r, level) <= 1e-12 * res[r].capacity))
                break;
            f->sat[r] = 1;
            f->lvl[r] = level;
            f->newsat[n_new++] = r;
            f->heap[0] = f->heap[--hn];
            heap_down(f, 0, hn);
        }
        for (int k = 0; k < n_new; k++) {
            int32_t r = f->newsat[k];
            for (int32_t e = f->span[r]; e < f->span_end[r]; e++)
                if (!f->frozen[f->elems[e]]) {
                    freeze(f, ids, f->elems[e], flows, level);
                    nu--;
                }
        }
        for (; b < nb; b++) {
            int i = f->by_bound[b];
            if (f->frozen[i])
                continue;
            if (level < flows[ids[i]].bound * (1 - 1e-12))
                break;
            freeze(f, ids, i, flows, level);
            nu--;
        }
    }
    /* a resource with background streams is filled by them after the flows froze */
    for (int k = 0; k < hn; k++) {
        int32_t r = f->heap[k].r;
        if (res[r].background > 0) {
            f->sat[r] = 1;
            f->lvl[r] = saturation_level(f, r);
        }
    }
    return 0;
}

/* -- the fluid model ------------------------------------------------------------------ */

static double projected_end(const Flow *x)
{
    if (x->state == DONE)
        return x->done_at;
    if (x->persistent || x->rate <= 0)
        return INFINITY;
    return x->t_ref + x->remaining / x->rate;
}

static double projected_release(const Header *h, const Flow *x)
{
    if (!isnan(x->release_at))
        return x->release_at;
    if (x->state == DONE)
        return x->done_at;
    if (x->persistent || x->rate <= 0)
        return INFINITY;
    return x->t_ref + (x->remaining - h->buffer) / x->rate;
}

/* What is left of flow x at relative time t (not before its t_ref). */
static double remaining_at(const Flow *x, double t)
{
    if (x->persistent || t <= x->t_ref)
        return x->remaining;
    return isinf(x->rate) ? 0.0 : x->remaining - x->rate * (t - x->t_ref);
}

/* x's remaining amount taken to the model's clock, before its rate changes. */
static void rebase(const Header *h, Flow *x)
{
    x->remaining = remaining_at(x, h->clock);
    x->t_ref = h->clock;
}

/* -- the event heaps: active flows by their projected end (0) and release (1) ---------- */

static void ev_place(Fluid *f, int k, int i, int32_t id)
{
    f->heap_of[k][i] = id;
    f->flows[id].hpos[k] = i;
}

static void ev_up(Fluid *f, int k, int i)
{
    int32_t *heap = f->heap_of[k], id = heap[i];
    double key = f->flows[id].key[k];
    while (i > 0 && f->flows[heap[(i - 1) / 2]].key[k] > key) {
        ev_place(f, k, i, heap[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    ev_place(f, k, i, id);
}

static void ev_down(Fluid *f, int k, int i)
{
    int32_t *heap = f->heap_of[k], id = heap[i], n = f->h->n_heap[k];
    double key = f->flows[id].key[k];
    for (;;) {
        int l = 2 * i + 1, m = l;
        if (l >= n)
            break;
        if (l + 1 < n && f->flows[heap[l + 1]].key[k] < f->flows[heap[l]].key[k])
            m = l + 1;
        if (!(f->flows[heap[m]].key[k] < key))
            break;
        ev_place(f, k, i, heap[m]);
        i = m;
    }
    ev_place(f, k, i, id);
}

static void ev_remove(Fluid *f, int k, int32_t id)
{
    int i = f->flows[id].hpos[k];
    if (i < 0)
        return;
    f->flows[id].hpos[k] = -1;
    int32_t last = f->heap_of[k][--f->h->n_heap[k]];
    if (last == id)
        return;
    ev_place(f, k, i, last);
    ev_up(f, k, f->flows[last].hpos[k]);
    ev_down(f, k, f->flows[last].hpos[k]);
}

/* Flow x's place in heap k at `key` (none where the key is infinite). */
static void ev_set(Fluid *f, int k, int32_t id, double key)
{
    Flow *x = &f->flows[id];
    if (!(key < INFINITY)) {
        ev_remove(f, k, id);
        return;
    }
    x->key[k] = key;
    if (x->hpos[k] < 0) {
        ev_place(f, k, f->h->n_heap[k]++, id);
        ev_up(f, k, x->hpos[k]);
    } else {
        ev_up(f, k, x->hpos[k]);
        ev_down(f, k, x->hpos[k]);
    }
}

/* An active flow's end and release, as its rate projects them, into the heaps. */
static void reschedule(Fluid *f, int32_t id)
{
    const Flow *x = &f->flows[id];
    ev_set(f, 0, id, projected_end(x));
    ev_set(f, 1, id, isnan(x->release_at) ? projected_release(f->h, x) : INFINITY);
}

/* Every active flow's end and release, heaps made anew (after a full solve). */
static void reschedule_all(Fluid *f)
{
    Header *h = f->h;
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < h->n_heap[k]; i++)
            f->flows[f->heap_of[k][i]].hpos[k] = -1;
        h->n_heap[k] = 0;
    }
    for (int i = 0; i < h->n_active; i++) {
        int32_t id = f->active[i];
        Flow *x = &f->flows[id];
        double key[2] = {projected_end(x),
                         isnan(x->release_at) ? projected_release(h, x) : INFINITY};
        for (int k = 0; k < 2; k++)
            if (key[k] < INFINITY) {
                x->key[k] = key[k];
                ev_place(f, k, h->n_heap[k]++, id);
            }
    }
    for (int k = 0; k < 2; k++)
        for (int i = h->n_heap[k] / 2 - 1; i >= 0; i--)
            ev_down(f, k, i);
}

static void remove_active(Fluid *f, int32_t id)
{
    Header *h = f->h;
    int32_t pos = f->flows[id].apos, last = f->active[--h->n_active];
    f->active[pos] = last;
    f->flows[last].apos = pos;
    ev_remove(f, 0, id);
    ev_remove(f, 1, id);
}

/* -- the incremental solve ----------------------------------------------------------
 *
 * Each resource keeps the list of the active flows crossing it (an element per flow and
 * position on its path, in the shared state) and whether it was saturated when last solved.
 * A change (a flow starts or ends, a resource's capacity or background changes) seeds the
 * next solve: a new flow, or the saturated resources of an ended flow's path, or the
 * changed resource. The solve re-solves only a set F of flows: those seeded, and every
 * flow crossing a resource of the closed set S, with what the flows outside F take of each
 * resource held fixed. It then closes (adds to S) every resource of F's paths that has flows
 * outside F and (a) was saturated and is not any more, or (b) is saturated, and the flows of
 * F that froze on it are slower than one outside F, or (c) was and is saturated, and a flow
 * of F on it is now faster than every flow outside F; and solves F again, until nothing is
 * closed.
 *
 * Then every flow has a bottleneck (a saturated resource where no flow is faster, or its
 * bound): a flow of F the one it froze on, which is closed (all its flows in F) or passed
 * (b); a flow outside F its old one, which F does not reach, or which is still saturated (a)
 * with no flow faster than the fastest outside it (c). A feasible allocation in which every
 * flow has a bottleneck is the max-min fair one, so the rates are the full solve's (to
 * rounding; CHANGE_TOL). This is the selective update of SimGrid's LMM made exact for
 * progressive filling, and tighter: a change that a saturated resource absorbs (its flows
 * of F slow down, and it stays saturated) goes no further. */

static int incremental_on = 1; /* off: every solve is a full one (for comparison) */
static int pruning_on = 1;     /* off: no floor (for comparison) */
static int caching_on = 1;     /* off: every round counts F and scans afresh (for tests) */
static unsigned long long stat_rounds, stat_flows; /* this process's incremental solves */

static inline Flow *elem_flow(Fluid *f, int32_t e)
{
    return &f->flows[e / FL_MAX_PATH];
}

static void link_flow(Fluid *f, int32_t id)
{
    if (!f->h->linked)
        return;
    Flow *x = &f->flows[id];
    const int32_t *p;
    int len = path_of(f, x, &p);
    for (int j = 0; j < len; j++) {
        Res *r = &f->res[p[j]];
        int32_t e = id * FL_MAX_PATH + j;
        x->link_prev[j] = -1;
        x->link_next[j] = r->head;
        if (r->head >= 0)
            elem_flow(f, r->head)->link_prev[r->head % FL_MAX_PATH] = e;
        r->head = e;
        r->n_flows++;
    }
}

static void unlink_flow(Fluid *f, int32_t id)
{
    if (!f->h->linked)
        return;
    Flow *x = &f->flows[id];
    const int32_t *p;
    int len = path_of(f, x, &p);
    for (int j = 0; j < len; j++) {
        Res *r = &f->res[p[j]];
        int32_t prev = x->link_prev[j], next = x->link_next[j];
        if (prev >= 0)
            elem_flow(f, prev)->link_next[prev % FL_MAX_PATH] = next;
        else
            r->head = next;
        if (next >= 0)
            elem_flow(f, next)->link_prev[next % FL_MAX_PATH] = prev;
        r->load -= x->rate;
        if (--r->n_flows == 0) {
            r->saturated = 0;
            r->load = 0; /* no drift survives an idle resource */
        }
    }
}

/* Resource r's users or capacity changed; no flow slower than `floor` can change for it
 * (an ended flow's rate: progressive filling is the same below it). */
static void seed_resource(Fluid *f, int32_t r, double floor)
{
    Header *h = f->h;
    h->dirty = 1;
    if (floor < h->seed_floor)
        h->seed_floor = floor;
    if (h->n_seed_res < FL_SEEDS)
        h->seed_res[h->n_seed_res++] = r;
    else
        h->seed_full = 1;
}

static void seed_flow(Fluid *f, int32_t id)
{
    Header *h = f->h;
    h->dirty = 1;
    if (h->n_seed_flows < FL_SEEDS)
        h->seed_flows[h->n_seed_flows++] = id;
    else
        h->seed_full = 1;
}

static void seed_everything(Fluid *f)
{
    f->h->dirty = 1;
    f->h->seed_full = 1;
    f->h->seed_floor = 0.0;
}

/* An active flow leaves the model: out of its resources' lists, and its saturated ones
 * seed the next solve (an unsaturated one bottlenecks nobody, and gains slack only). */
static void leave(Fluid *f, int32_t id)
{
    const int32_t *p;
    int len = path_of(f, &f->flows[id], &p);
    for (int j = 0; j < len; j++)
        if (f->res[p[j]].saturated || !f->h->linked)
            seed_resource(f, p[j], f->flows[id].rate);
    unlink_flow(f, id);
}

static void join_f(Fluid *f, int32_t id, int *n)
{
    if (f->in_f[id] == f->f_now || f->flows[id].state != ACTIVE)
        return;
    f->in_f[id] = f->f_now;
    f->old_rate[id] = f->flows[id].rate;
    rebase(f->h, &f->flows[id]); /* its rate may change */
    f->f_list[(*n)++] = id;
}

static void close_s(Fluid *f, int32_t r, int *n_f, int *n_s)
{
    if (f->in_s[r] == f->s_now)
        return;
    f->in_s[r] = f->s_now;
    f->s_list[(*n_s)++] = r;
    for (int32_t e = f->res[r].head; e >= 0; e = elem_flow(f, e)->link_next[e % FL_MAX_PATH])
        if (elem_flow(f, e)->rate >= f->cut)
            join_f(f, e / FL_MAX_PATH, n_f);
}

/* What the flows outside F take of each resource F crosses (its load less what F's flows
 * took), and whether there are any. F only grows during a solve (and the loads stay as they
 * were), so a round counts only the flows that joined since the last (in F's order: the same
 * sums as counting all again) and updates only the resources those cross. */
static void outside_usage(Fluid *f, int n_f)
{
    if (!caching_on) { /* count F afresh */
        f->r_now++;
        f->counted = 0;
    }
    int32_t now = f->r_now, round = ++f->round_now;
    int n_changed = 0;
    for (int i = f->counted; i < n_f; i++) {
        int32_t id = f->f_list[i];
        const int32_t *p;
        int len = path_of(f, &f->flows[id], &p);
        for (int j = 0; j < len; j++) {
            int32_t r = p[j];
            if (f->r_stamp[r] != now) {
                f->r_stamp[r] = now;
                f->f_count[r] = 0;
                f->f_load[r] = 0;
            }
            f->f_count[r]++;
            f->f_load[r] += f->old_rate[id];
            if (f->r_round[r] != round) {
                f->r_round[r] = round;
                f->changed[n_changed++] = r;
            }
        }
    }
    f->counted = n_f;
    for (int k = 0; k < n_changed; k++) {
        int32_t r = f->changed[k];
        f->has_out[r] = f->f_count[r] < f->res[r].n_flows;
        double out = f->has_out[r] ? (double)(f->res[r].load - f->f_load[r]) : 0.0;
        f->fixed[r] = out > 0 ? out : 0.0;
    }
}

/* The fastest flow outside F crossing r, of those not below the solve's floor; -1 if
 * there is none (the flows outside F there keep their rates whatever F does). Kept per
 * solve: the flows outside F only leave it (their rates stay), so the last answer holds
 * while the flow it named is still outside. */
static double fastest_outside(Fluid *f, int32_t r)
{
    if (caching_on && f->fo_stamp[r] == f->f_now &&
        (f->fo_id[r] < 0 || f->in_f[f->fo_id[r]] != f->f_now))
        return f->fo_rate[r];
    double fastest = -1.0;
    int32_t which = -1;
    for (int32_t e = f->res[r].head; e >= 0; e = elem_flow(f, e)->link_next[e % FL_MAX_PATH]) {
        int32_t id = e / FL_MAX_PATH;
        double rate = f->flows[id].rate;
        if (f->in_f[id] != f->f_now && rate >= f->cut && rate > fastest) {
            fastest = rate;
            which = id;
        }
    }
    f->fo_stamp[r] = f->f_now;
    f->fo_id[r] = which;
    f->fo_rate[r] = fastest;
    return fastest;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The level at which resource r fills with new flow `id` (held to its bound) and every
 * other flow at its rate (one at or above the level takes the level), background streams
 * unbounded; INFINITY if it never fills. */
static double water_level(Fluid *f, int32_t r, int32_t id)
{
    const Res *res = &f->res[r];
    int n = 0;
    for (int32_t e = res->head; e >= 0; e = elem_flow(f, e)->link_next[e % FL_MAX_PATH])
        if (e / FL_MAX_PATH != id)
            f->caps[n++] = elem_flow(f, e)->rate;
    double bound = f->flows[id].bound;
    f->caps[n++] = bound > 0 ? bound : INFINITY;
    qsort(f->caps, (size_t)n, sizeof(double), by_value);
    double left = res->capacity;
    int open = n + res->background;
    for (int i = 0; i < n && isfinite(f->caps[i]); i++) {
        if (f->caps[i] * open >= left)
            return left / open;
        left -= f->caps[i];
        open--;
    }
    return open > 0 ? left / open : INFINITY;
}

/* The floor of a solve for one new flow: below the first level at which a resource of its
 * path fills, progressive filling runs as before it came (the flows frozen there keep
 * their rates), and that level is the least water level of its path's resources with
 * every other flow at its rate. A resource with room left and no background streams
 * cannot fill below that room (its flows take at most their rates, the new one the
 * level), so its flows are counted only where its room is below the least level found:
 * a switch's uplink, with hundreds of flows and room to spare, is not read. */
static double new_flow_floor(Fluid *f, int32_t id)
{
    const int32_t *p;
    int len = path_of(f, &f->flows[id], &p);
    double floor = INFINITY, room[FL_MAX_PATH];
    for (int j = 0; j < len; j++) {
        const Res *r = &f->res[p[j]];
        room[j] = r->background ? -1.0 : r->capacity - (double)r->load;
        if (!(room[j] > 0))
            floor = fmin(floor, water_level(f, p[j], id));
    }
    for (int j = 0; j < len; j++)
        if (room[j] > 0 && room[j] < floor)
            floor = fmin(floor, water_level(f, p[j], id));
    return floor;
}

/* The fastest flow of F on each resource F crosses, in f->f_max (its background
 * streams, solved with F, freeze at the level it saturates at). */
static void fastest_in_f(Fluid *f, int n_f)
{
    for (int i = 0; i < f->n_touched; i++) {
        int32_t r = f->touched[i];
        f->f_max[r] = f->res[r].background > 0 && f->sat[r] ? f->lvl[r] : 0.0;
    }
    for (int i = 0; i < n_f; i++) {
        const Flow *x = &f->flows[f->f_list[i]];
        const int32_t *p;
        int len = path_of(f, x, &p);
        for (int j = 0; j < len; j++)
            if (x->rate > f->f_max[p[j]])
                f->f_max[p[j]] = x->rate;
    }
}

static void full_solve(Fluid *f)
{
    Header *h = f->h;
    for (int i = 0; i < h->n_active; i++)
        rebase(h, &f->flows[f->active[i]]);
    if (maxmin_events(f, f->active, h->n_active, f->flows, f->res, NULL))
        maxmin(f, f->active, h->n_active, f->flows, f->res, NULL);
    /* every resource with flows is reached; one without has saturated = 0 and load = 0
     * (unlink_flow); the loads are summed afresh */
    for (int i = 0; i < f->n_touched; i++) {
        f->res[f->touched[i]].saturated = f->sat[f->touched[i]];
        f->res[f->touched[i]].load = 0;
    }
    for (int i = 0; i < h->n_active; i++) {
        Flow *x = &f->flows[f->active[i]];
        const int32_t *p;
        int len = path_of(f, x, &p);
        for (int j = 0; j < len; j++)
            f->res[p[j]].load += x->rate;
    }
    h->full_solves++;
}

/* The incremental solve (see above). Returns the number of flows in F (listed in
 * f->f_list), or -1 where it gave up (the caller solves in full); *work: the flows its
 * rounds solved, summed. */
static int incremental_solve(Fluid *f, double *work_out)
{
    Header *h = f->h;
    int n_f = 0, n_s = 0;
    f->f_now++;
    f->s_now++;
    f->r_now++; /* outside_usage counts F afresh */
    f->counted = 0;
    f->n_touched = 0; /* nothing reached yet: another solve's scratch is not this one's */
    double floor = h->n_seed_flows > 1 ? 0.0 : h->seed_floor; /* new flows: see below */
    for (int i = 0; i < h->n_seed_flows && floor > 0; i++)
        if (f->flows[h->seed_flows[i]].state == ACTIVE)
            floor = fmin(floor, new_flow_floor(f, h->seed_flows[i]));
    f->cut = pruning_on ? floor * (1 - 1e-9) : -INFINITY;
    for (int i = 0; i < h->n_seed_flows; i++) {
        int32_t id = h->seed_flows[i];
        join_f(f, id, &n_f);
        const int32_t *p; /* it takes a share of each saturated resource it crosses */
        int len = f->flows[id].state == ACTIVE ? path_of(f, &f->flows[id], &p) : 0;
        for (int j = 0; j < len; j++)
            if (f->res[p[j]].saturated)
                close_s(f, p[j], &n_f, &n_s);
    }
    for (int i = 0; i < h->n_seed_res; i++)
        close_s(f, h->seed_res[i], &n_f, &n_s);
    double work = 0.0;
    while (n_f > 0) {
        work += n_f;
        *work_out = work;
        if (work > FULL_SHARE * h->n_active && n_f > 64)
            return -1;
        outside_usage(f, n_f);
        if (maxmin_events(f, f->f_list, n_f, f->flows, f->res, f->fixed))
            maxmin(f, f->f_list, n_f, f->flows, f->res, f->fixed);
        stat_rounds++;
        stat_flows += (unsigned long long)n_f;
        fastest_in_f(f, n_f);
        int closed = 0;
        for (int i = 0; i < f->n_touched; i++) {
            int32_t r = f->touched[i];
            if (f->in_s[r] == f->s_now || !f->has_out[r])
                continue;
            int was = f->res[r].saturated, is = f->sat[r];
            if (!was && !is)
                continue;
            double outside = fastest_outside(f, r);
            if (outside < 0)
                continue; /* its flows outside F are below the floor */
            int lost = was && !is;                                    /* (a) */
            int slower = is && outside > f->lvl[r] * (1 + CHANGE_TOL); /* (b) */
            int faster = was && is && f->f_max[r] > outside * (1 + CHANGE_TOL); /* (c) */
            if (lost || slower || faster) {
                close_s(f, r, &n_f, &n_s);
                closed = 1;
            }
        }
        if (!closed)
            break;
    }
    for (int i = 0; i < f->n_touched; i++)
        f->res[f->touched[i]].saturated = f->sat[f->touched[i]];
    for (int i = 0; i < n_f; i++) { /* the loads follow F's new rates */
        int32_t id = f->f_list[i];
        double delta = f->flows[id].rate - f->old_rate[id];
        if (delta == 0)
            continue;
        const int32_t *p;
        int len = path_of(f, &f->flows[id], &p);
        for (int j = 0; j < len; j++)
            f->res[p[j]].load += delta;
    }
    return n_f;
}

/* Wake the parties of flow x whose end or release came earlier than they last read. */
static void ring_if_earlier(Fluid *f, Flow *x)
{
    Header *h = f->h;
    double end = projected_end(x);
    if (end < x->rcv_seen - RING_EPS_SECONDS) {
        want_ring(f, x->rcv_bell, x->rcv_len);
        x->rcv_seen = end;
    }
    if (isnan(x->release_at) && x->snd_len) {
        double rel = projected_release(h, x);
        if (rel < x->snd_seen - RING_EPS_SECONDS) {
            want_ring(f, x->snd_bell, x->snd_len);
            x->snd_seen = rel;
        }
    }
}

/* Where incremental attempts cost more than full solves on average (everything is coupled:
 * oversubscribed uplinks that every flow crosses), solves are full ones, and one in
 * SKIP_RETRY tries again. An attempt costs the flows its rounds solved, in active flows
 * (a full solve solves each once), and a full solve more where it gave up. */
#define ATTEMPT_COST_MAX 1.0
#define SKIP_RETRY 32

static void solve(Fluid *f)
{
    Header *h = f->h;
    int n_f = -1;
    int skip = f->attempt_cost > ATTEMPT_COST_MAX && ++f->full_streak % SKIP_RETRY != 0;
    if (incremental_on && h->linked && !h->seed_full && !skip) {
        double work = 0.0, active = h->n_active > 0 ? h->n_active : 1;
        n_f = incremental_solve(f, &work);
        f->attempt_cost = 0.9 * f->attempt_cost + 0.1 * (work / active + (n_f < 0));
        f->full_streak = 0;
    }
    if (n_f < 0)
        full_solve(f);
    h->n_seed_flows = h->n_seed_res = h->seed_full = 0;
    h->seed_floor = INFINITY;
    h->solves++;
    h->dirty = 0;
    if (n_f >= 0) { /* the flows outside F kept their rates, and their projections */
        for (int i = 0; i < n_f; i++) {
            reschedule(f, f->f_list[i]);
            ring_if_earlier(f, &f->flows[f->f_list[i]]);
        }
        return;
    }
    reschedule_all(f);
    for (int i = 0; i < h->n_active; i++)
        ring_if_earlier(f, &f->flows[f->active[i]]);
}

static void free_slot(Fluid *f, int32_t id)
{
    Flow *x = &f->flows[id];
    x->state = FREE;
    x->gen++;
    f->free_stack[f->h->n_free++] = id;
}

static void finish(Fluid *f, int32_t id, double at)
{
    Flow *x = &f->flows[id];
    leave(f, id);
    remove_active(f, id);
    x->state = DONE;
    x->remaining = 0.0;
    x->done_at = at;
    if (isnan(x->release_at))
        x->release_at = at;
    log_event(f, id, 1, at);
    /* both parties want to know at once (the end is an event they may sleep past) */
    if (at < x->rcv_seen - RING_EPS_SECONDS)
        want_ring(f, x->rcv_bell, x->rcv_len);
    if (x->snd_len && at < x->snd_seen - RING_EPS_SECONDS)
        want_ring(f, x->snd_bell, x->snd_len);
    if (x->refs <= 0)
        free_slot(f, id);
}

/* The model's clock moves to relative time t (no event in between): the flows move on as
 * their rates say, kept as what was left at their last rate (remaining_at). */
static void move_clock(Fluid *f, double t)
{
    Header *h = f->h;
    if (t <= h->clock)
        return;
    h->clock = t;
    double scen = rel_to_scen(h, t);
    if (scen > h->played)
        h->played = scen;
}

/* Every release due by t + eps (at its own time) and every end due by t + eps (at t). */
static void due_events(Fluid *f, double t, double eps)
{
    Header *h = f->h;
    while (h->n_heap[1] > 0 && f->flows[f->heap_of[1][0]].key[1] <= t + eps) {
        int32_t id = f->heap_of[1][0];
        Flow *x = &f->flows[id];
        x->release_at = x->key[1];
        log_event(f, id, 2, x->release_at);
        ev_remove(f, 1, id);
    }
    while (h->n_heap[0] > 0 && f->flows[f->heap_of[0][0]].key[0] <= t + eps) {
        finish(f, f->heap_of[0][0], t);
        h->dirty = 1;
    }
}

static double next_scenario_change(const Fluid *f)
{
    const Header *h = f->h;
    const Timeline *tl = &f->tl[h->timeline];
    return h->cursor < tl->n_events ? scen_to_rel(h, tl->t[h->cursor]) : INFINITY;
}

/* Advance the model to relative time `now`, event by event. */
static void advance(Fluid *f, double now)
{
    Header *h = f->h;
    for (;;) {
        if (h->dirty)
            solve(f);
        double t = h->n_heap[0] ? f->flows[f->heap_of[0][0]].key[0] : INFINITY;
        if (h->n_heap[1] && f->flows[f->heap_of[1][0]].key[1] < t)
            t = f->flows[f->heap_of[1][0]].key[1];
        double change = next_scenario_change(f);
        if (change < t)
            t = change;
        if (t > now || !isfinite(t))
            break;
        if (t < h->clock)
            t = h->clock;
        move_clock(f, t);
        /* flows that end within a step's rounding of t end now (a few ulps of t, for
         * clocks far from their base) */
        due_events(f, t, fmax(DONE_BITS_SECONDS * 4, fabs(t) * 4e-16));
        const Timeline *tl = &f->tl[h->timeline];
        while (h->cursor < tl->n_events && scen_to_rel(h, tl->t[h->cursor]) <= t) {
            int64_t c = h->cursor++;
            f->res[tl->res[c]].capacity = tl->capacity[c] / h->dilation;
            f->res[tl->res[c]].background = tl->background[c];
            seed_resource(f, tl->res[c], 0.0);
        }
    }
    if (now > h->clock && isfinite(now)) {
        move_clock(f, now);
        due_events(f, now, DONE_BITS_SECONDS); /* ends within a transfer's rounding */
    }
}

/* The token bucket of the pair src -> dst (HTB's burst: what the class's rate sends in
 * 0.2 ms, at least two frames): the bits a new flow of `bits` gets through at once. */
static double burst_credit(Fluid *f, int src, int dst, const int32_t *p, int len, double start,
                           double bits, double bound)
{
    int k = src * f->n_nodes + dst;
    double rate = bound > 0 ? bound : INFINITY;
    for (int j = 0; j < len; j++) { /* the pair's available share for one more flow */
        double share = f->res[p[j]].capacity / (f->res[p[j]].background + 1);
        if (share < rate)
            rate = share;
    }
    if (bits <= 0 || rate <= 0 || !isfinite(rate))
        return 0.0;
    double full = floor(rate / 8.0 * 0.0002 * f->h->dilation);
    if (full < 2 * 1514)
        full = 2 * 1514;
    full *= 8.0;
    double *tokens = &f->bucket[2 * k], *busy = &f->bucket[2 * k + 1];
    double idle = start - *busy;
    double have = fmin(full, *tokens + rate * (idle > 0 ? idle : 0.0));
    double credit = fmin(have, bits);
    *tokens = have - credit;
    *busy = (*busy > start ? *busy : start) + (bits - credit) / rate;
    return credit;
}

/* -- flows come and go (under the lock) --------------------------------------------- */

/* FATPIPE resources leave a route: each flow crossing one is bounded by its capacity now
 * (a scenario never varies them). Returns the route's new length. */
static int hold_to_fatpipes(const Fluid *f, int32_t *route, int len, double *bound)
{
    int kept = 0;
    for (int j = 0; j < len; j++) {
        double cap = f->res[route[j]].capacity;
        if (!f->r_fat[route[j]])
            route[kept++] = route[j];
        else if (!(*bound > 0) || cap < *bound)
            *bound = cap;
    }
    return kept;
}

/* Insert a flow starting at wall time `wall` (or the model's clock, if later). 0, or -1
 * when the table is full, -2 for a node out of range. */
static int insert(Fluid *f, double wall, const NewFlow *n, int32_t *slot, uint32_t *gen,
                  double *start_wall)
{
    Header *h = f->h;
    if (n->src < 0 || n->dst < 0 || n->src >= f->n_nodes || n->dst >= f->n_nodes)
        return -2;
    if (h->n_free == 0)
        return -1;
    int32_t route[FL_MAX_PATH];
    const int32_t *pair;
    int pair_len = pair_path(f, n->src, n->dst, route, &pair);
    if (pair_len < 0)
        return -4;
    double now = wall - h->base;
    if (now < h->clock)
        now = h->clock;
    advance(f, now);
    double bound = n->bound;
    int crosses = n->resource >= 0 || pair_len > 0; /* else a node to itself */
    if (f->r_fat && pair == route && n->resource < 0)
        pair_len = hold_to_fatpipes(f, route, pair_len, &bound);
    int32_t id = f->free_stack[--h->n_free];
    Flow *x = &f->flows[id];
    uint32_t g = x->gen;
    memset(x, 0, sizeof *x);
    x->gen = g;
    x->refs = n->refs;
    x->src = n->src;
    x->dst = n->dst;
    x->own_res = n->resource;
    x->persistent = n->persistent;
    x->bound = bound;
    x->start = now;
    x->t_ref = now;
    x->hpos[0] = x->hpos[1] = -1;
    x->size = n->persistent ? INFINITY : n->amount;
    x->done_at = x->release_at = NAN;
    x->rcv_seen = x->snd_seen = INFINITY;
    x->rcv_len = (uint8_t)(n->rcv_len > 0 && n->rcv_len <= FL_BELL_BYTES ? n->rcv_len : 0);
    x->snd_len = (uint8_t)(n->snd_len > 0 && n->snd_len <= FL_BELL_BYTES ? n->snd_len : 0);
    if (x->rcv_len)
        memcpy(x->rcv_bell, n->rcv_bell, x->rcv_len);
    if (x->snd_len)
        memcpy(x->snd_bell, n->snd_bell, x->snd_len);
    if (f->route_kind != ROUTE_TABLE) {
        x->path_len = pair_len;
        memcpy(x->path, pair, sizeof(int32_t) * (size_t)pair_len);
    }
    double credit = n->bucket && crosses && n->amount > 0 && n->resource < 0
                        ? burst_credit(f, n->src, n->dst, pair, pair_len, now, n->amount,
                                       bound)
                        : 0.0;
    x->remaining = x->size - credit;
    if (!crosses || (!n->persistent && x->remaining <= 0)) {
        x->state = DONE; /* nothing to move, or a node to itself: no network */
        x->remaining = 0.0;
        x->done_at = x->release_at = now;
        log_event(f, id, 1, now);
    } else {
        x->state = ACTIVE;
        if (!n->persistent && n->amount <= h->buffer)
            x->release_at = now;
        x->apos = h->n_active;
        f->active[h->n_active++] = id;
        link_flow(f, id);
        seed_flow(f, id);
        solve(f);
    }
    *slot = id;
    *gen = x->gen;
    *start_wall = now + h->base;
    return 0;
}

/* A message of the message path: its pair's path, its token bucket. */
static int api_add(Fluid *f, double wall, int src, int dst, double amount, int refs,
                   const char *snd_bell, int snd_len, const char *rcv_bell, int rcv_len,
                   int32_t *slot, uint32_t *gen, double *start_wall)
{
    NewFlow n = {src, dst, refs, -1, 0, 1, amount, 0.0, snd_bell, rcv_bell, snd_len, rcv_len};
    return insert(f, wall, &n, slot, gen, start_wall);
}

static int api_view(Fluid *f, int32_t slot, uint32_t gen, int party, FlView *out)
{
    Header *h = f->h;
    if (slot < 0 || slot >= h->max_flows || f->flows[slot].gen != gen ||
        f->flows[slot].state == FREE)
        return -1;
    Flow *x = &f->flows[slot];
    out->state = x->state;
    out->start = x->start + h->base;
    double end = projected_end(x), rel = projected_release(h, x);
    out->end = end + h->base;
    out->release = rel + h->base;
    out->done = x->state == DONE;
    out->released = !isnan(x->release_at);
    out->next_change = next_scenario_change(f) + h->base;
    if (party == FL_RECEIVER)
        x->rcv_seen = end;
    else if (party == FL_SENDER)
        x->snd_seen = out->released ? INFINITY : rel;
    return 0;
}

static void api_drop(Fluid *f, int32_t slot, uint32_t gen, int party)
{
    Header *h = f->h;
    if (slot < 0 || slot >= h->max_flows || f->flows[slot].gen != gen ||
        f->flows[slot].state == FREE)
        return;
    Flow *x = &f->flows[slot];
    if (party == FL_SENDER)
        x->snd_len = 0; /* no more rings for it */
    else if (party == FL_RECEIVER)
        x->rcv_len = 0;
    if (--x->refs > 0)
        return;
    if (x->state == DONE) {
        free_slot(f, slot);
    } else if (x->persistent) { /* a background flow ends when its owner says */
        leave(f, slot);
        remove_active(f, slot);
        h->dirty = 1;
        free_slot(f, slot);
    } /* else: its bytes are on the wire; freed when they are done */
}

static void api_advance(Fluid *f, double wall)
{
    double now = wall - f->h->base;
    if (now > f->h->clock)
        advance(f, now);
    else if (f->h->dirty)
        solve(f);
}

static void api_lock(Fluid *f)
{
    if (f->h)
        fl_lock(f);
}

static void api_unlock(Fluid *f)
{
    if (f->h)
        fl_unlock(f);
}

/* The message path's calls: a model detached from its window (the run is ending, and a
 * communicator outlived it) answers that no flow exists and takes none. */
static void safe_advance(Fluid *f, double wall)
{
    if (f->h)
        api_advance(f, wall);
}

static int safe_add(Fluid *f, double wall, int src, int dst, double amount, int refs,
                    const char *snd_bell, int snd_len, const char *rcv_bell, int rcv_len,
                    int32_t *slot, uint32_t *gen, double *start_wall)
{
    if (!f->h)
        return -3;
    return api_add(f, wall, src, dst, amount, refs, snd_bell, snd_len, rcv_bell, rcv_len, slot,
                   gen, start_wall);
}

static int safe_view(Fluid *f, int32_t slot, uint32_t gen, int party, FlView *out)
{
    return f->h ? api_view(f, slot, gen, party, out) : -1;
}

static void safe_drop(Fluid *f, int32_t slot, uint32_t gen, int party)
{
    if (f->h)
        api_drop(f, slot, gen, party);
}

static const FluidAPI API = {
    FLUID_API_VERSION,
    (void (*)(void *))api_lock,
    (void (*)(void *))api_unlock,
    (void (*)(void *, double))safe_advance,
    (int (*)(void *, double, int, int, double, int, const char *, int, const char *, int,
             int32_t *, uint32_t *, double *))safe_add,
    (int (*)(void *, int32_t, uint32_t, int, FlView *))safe_view,
    (void (*)(void *, int32_t, uint32_t, int))safe_drop,
};

/* -- the Python type -------------------------------------------------------------------- */

static size_t layout(int n_nodes, int n_res, int max_flows, size_t *o_res, size_t *o_flows,
                     size_t *o_active, size_t *o_free, size_t *o_heaps, size_t *o_bucket)
{
    size_t off = (sizeof(Header) + 63) & ~(size_t)63;
    *o_res = off;
    off += sizeof(Res) * (size_t)n_res;
    off = (off + 63) & ~(size_t)63;
    *o_flows = off;
    off += sizeof(Flow) * (size_t)max_flows;
    *o_active = off;
    off += sizeof(int32_t) * (size_t)max_flows;
    *o_free = off;
    off += sizeof(int32_t) * (size_t)max_flows;
    *o_heaps = off;
    off += 2 * sizeof(int32_t) * (size_t)max_flows;
    off = (off + 7) & ~(size_t)7;
    *o_bucket = off;
    off += 2 * sizeof(double) * (size_t)n_nodes * (size_t)n_nodes;
    return off;
}

static PyObject *state_bytes(PyObject *mod, PyObject *args)
{
    int n_nodes, n_res, max_flows;
    if (!PyArg_ParseTuple(args, "iii", &n_nodes, &n_res, &max_flows))
        return NULL;
    size_t a, b, c, d, e, g;
    return PyLong_FromSize_t(layout(n_nodes, n_res, max_flows, &a, &b, &c, &d, &e, &g));
}

/* The numbers of a sequence into a new array of doubles (`ints`: of int32). */
static int as_numbers(PyObject *seq, void **out, Py_ssize_t *n, int ints)
{
    PyObject *fast = PySequence_Fast(seq, "expected a sequence of numbers");
    if (!fast)
        return -1;
    *n = PySequence_Fast_GET_SIZE(fast);
    *out = malloc((ints ? sizeof(int32_t) : sizeof(double)) * (*n ? *n : 1));
    if (!*out) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < *n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(fast, i);
        if (ints) {
            long v = PyLong_AsLong(item);
            ((int32_t *)*out)[i] = (int32_t)v;
            if (v == -1 && PyErr_Occurred())
                break;
        } else {
            double v = PyFloat_AsDouble(item);
            ((double *)*out)[i] = v;
            if (v == -1.0 && PyErr_Occurred())
                break;
        }
    }
    Py_DECREF(fast);
    return PyErr_Occurred() ? -1 : 0;
}

static int as_doubles(PyObject *seq, double **out, Py_ssize_t *n)
{
    return as_numbers(seq, (void **)out, n, 0);
}

static int as_ints(PyObject *seq, int32_t **out, Py_ssize_t *n)
{
    return as_numbers(seq, (void **)out, n, 1);
}

static int read_timeline(PyObject *tuple, Timeline *tl, int n_res)
{
    /* (times, resources, capacities, backgrounds, initial capacities, initial backgrounds,
     *  duration) */
    PyObject *t, *r, *c, *b, *ic, *ib;
    double duration;
    if (!PyArg_ParseTuple(tuple, "OOOOOOd", &t, &r, &c, &b, &ic, &ib, &duration))
        return -1;
    Py_ssize_t n1, n2, n3, n4, n5, n6;
    if (as_doubles(t, &tl->t, &n1) || as_ints(r, &tl->res, &n2) ||
        as_doubles(c, &tl->capacity, &n3) || as_ints(b, &tl->background, &n4) ||
        as_doubles(ic, &tl->init_capacity, &n5) || as_ints(ib, &tl->init_background, &n6))
        return -1;
    if (n1 != n2 || n1 != n3 || n1 != n4 || n5 != n_res || n6 != n_res) {
        PyErr_SetString(PyExc_ValueError, "a timeline's arrays disagree in length");
        return -1;
    }
    for (Py_ssize_t i = 0; i < n1; i++) {
        if (tl->res[i] < 0 || tl->res[i] >= n_res || !(tl->capacity[i] > 0) ||
            tl->background[i] < 0 || (i && tl->t[i] < tl->t[i - 1])) {
            PyErr_Format(PyExc_ValueError, "timeline event %zd is malformed", i);
            return -1;
        }
    }
    for (int i = 0; i < n_res; i++)
        if (!(tl->init_capacity[i] > 0) || tl->init_background[i] < 0) {
            PyErr_Format(PyExc_ValueError, "resource %d: capacity must be positive", i);
            return -1;
        }
    tl->n_events = (int)n1;
    tl->duration = duration;
    return 0;
}

#define ALLOC(p, n) ((p) = calloc((size_t)((n) ? (n) : 1), sizeof(*(p))))

/* The paths of every ordered pair, as a table (path_start: n_nodes^2 + 1 offsets). */
static int read_table(Fluid *f, PyObject *ps, PyObject *pp, int *longest)
{
    Py_ssize_t n_ps, n_pp;
    if (ps == Py_None || pp == Py_None) {
        PyErr_SetString(PyExc_ValueError, "give the paths as a table, or routes");
        return -1;
    }
    if (as_ints(ps, &f->path_start, &n_ps) || as_ints(pp, &f->paths, &n_pp))
        return -1;
    if (n_ps != (Py_ssize_t)f->n_nodes * f->n_nodes + 1 || f->path_start[0] != 0 ||
        f->path_start[n_ps - 1] != n_pp) {
        PyErr_SetString(PyExc_ValueError, "paths do not cover every ordered pair of nodes");
        return -1;
    }
    for (Py_ssize_t i = 0; i < n_pp; i++)
        if (f->paths[i] < 0 || f->paths[i] >= f->n_res) {
            PyErr_SetString(PyExc_ValueError, "a path names an unknown resource");
            return -1;
        }
    for (Py_ssize_t k = 0; k + 1 < n_ps; k++)
        if (f->path_start[k + 1] - f->path_start[k] > *longest)
            *longest = f->path_start[k + 1] - f->path_start[k];
    f->route_kind = ROUTE_TABLE;
    return 0;
}

static int check_ids(const int32_t *v, Py_ssize_t n, int32_t below, int allow_minus_one)
{
    for (Py_ssize_t i = 0; i < n; i++)
        if (v[i] >= below || v[i] < (allow_minus_one ? -1 : 0))
            return -1;
    return 0;
}

/* routes: ("tree", parent, depth, up, down, vertex of each node[, fabric of each vertex[,
 * fatpipe flag of each resource]]) or ("crossbar", up, down, pair_base): a pair's path is
 * made when one of its flows starts (pair_path). */
static int read_routes(Fluid *f, PyObject *routes, int *longest)
{
    const char *kind;
    PyObject *a, *b, *c = NULL, *d = NULL, *e = NULL;
    Py_ssize_t n_a, n_b, n_c, n_d, n_e;
    if (!PyTuple_Check(routes) || PyTuple_GET_SIZE(routes) < 1) {
        PyErr_SetString(PyExc_ValueError, "routes: a tuple (kind, ...)");
        return -1;
    }
    if (PyTuple_GET_SIZE(routes) >= 6) {
        PyObject *fabric = NULL, *fat = NULL;
        Py_ssize_t n_fabric, n_fat;
        if (!PyArg_ParseTuple(routes, "sOOOOO|OO", &kind, &a, &b, &c, &d, &e, &fabric, &fat))
            return -1;
        if (strcmp(kind, "tree") || as_ints(a, &f->r_parent, &n_a) ||
            as_ints(b, &f->r_depth, &n_b) || as_ints(c, &f->r_up, &n_c) ||
            as_ints(d, &f->r_down, &n_d) || as_ints(e, &f->r_vertex, &n_e)) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "routes: unknown kind");
            return -1;
        }
        int32_t nv = (int32_t)n_a;
        if (n_b != nv || n_c != nv || n_d != nv || n_e != f->n_nodes ||
            check_ids(f->r_parent, nv, nv, 1) || check_ids(f->r_up, nv, f->n_res, 1) ||
            check_ids(f->r_down, nv, f->n_res, 1) || check_ids(f->r_vertex, n_e, nv, 0)) {
            PyErr_SetString(PyExc_ValueError, "routes: a tree's arrays disagree");
            return -1;
        }
        if ((fabric && (as_ints(fabric, &f->r_fabric, &n_fabric) || n_fabric != nv ||
                        check_ids(f->r_fabric, nv, f->n_res, 1))) ||
            (fat && (as_ints(fat, &f->r_fat, &n_fat) || n_fat != f->n_res))) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "routes: fabrics (one per vertex) or "
                                "fatpipes (one per resource) disagree with the tree");
            return -1;
        }
        int deepest = 0;
        for (int32_t v = 0; v < nv; v++) {
            if (f->r_depth[v] > deepest)
                deepest = f->r_depth[v];
            int32_t up = f->r_parent[v];
            if ((up < 0) != (f->r_depth[v] == 0) || (up >= 0 && (f->r_depth[up] !=
                f->r_depth[v] - 1 || f->r_up[v] < 0 || f->r_down[v] < 0))) {
                PyErr_SetString(PyExc_ValueError, "routes: not a tree (parent and depth)");
                return -1;
            }
        }
        /* a longer route is refused when a flow would take it (insert) */
        deepest = fabric ? 4 * deepest - 1 : 2 * deepest; /* links, and fabrics between */
        deepest = deepest < FL_MAX_PATH ? deepest : FL_MAX_PATH;
        *longest = deepest > *longest ? deepest : *longest;
        f->route_kind = ROUTE_TREE;
        return 0;
    }
    int pair_base;
    if (!PyArg_ParseTuple(routes, "sOOi", &kind, &a, &b, &pair_base))
        return -1;
    if (strcmp(kind, "crossbar") || as_ints(a, &f->r_up, &n_a) || as_ints(b, &f->r_down, &n_b)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "routes: unknown kind");
        return -1;
    }
    if (n_a != f->n_nodes || n_b != f->n_nodes || check_ids(f->r_up, n_a, f->n_res, 0) ||
        check_ids(f->r_down, n_b, f->n_res, 0) || pair_base < 0 ||
        (int64_t)pair_base + (int64_t)f->n_nodes * (f->n_nodes - 1) > f->n_res) {
        PyErr_SetString(PyExc_ValueError, "routes: a crossbar's arrays disagree");
        return -1;
    }
    f->r_pair_base = pair_base;
    *longest = 3 > *longest ? 3 : *longest;
    f->route_kind = ROUTE_CROSSBAR;
    return 0;
}

/* Fluid(n_nodes, n_resources, path_start, paths, scenario, dedicated, max_flows, buffer,
 *       window=None, create=True, base=None): paths per ordered node pair (src * n_nodes +
 *       dst), each timeline a tuple of arrays (see read_timeline); the state in a new private
 *       block, or in `window` (made there with `create`, else attached to). Wall times count
 *       from `base` inside (default: now; 0 for a model on a clock of its own). */
static int Fluid_init(Fluid *f, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"n_nodes", "n_resources", "path_start", "paths", "scenario",
                            "dedicated", "max_flows", "buffer", "window", "create", "base",
                            "routes", NULL};
    int n_nodes, n_res, max_flows, create = 1;
    double buffer;
    PyObject *ps, *pp, *scen, *ded, *window = Py_None, *base_o = Py_None, *routes = Py_None;
    if (f->h) {
        PyErr_SetString(PyExc_RuntimeError, "a fluid model is initialised once");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "iiOOOOid|OpOO", names, &n_nodes, &n_res,
                                     &ps, &pp, &scen, &ded, &max_flows, &buffer, &window,
                                     &create, &base_o, &routes))
        return -1;
    double base = base_o == Py_None ? shm_wall_now() : PyFloat_AsDouble(base_o);
    if (PyErr_Occurred())
        return -1;
    if (n_nodes < 1 || n_res < 1 || max_flows < 1) {
        PyErr_SetString(PyExc_ValueError, "need a node, a resource and a flow slot");
        return -1;
    }
    f->n_nodes = n_nodes;
    f->n_res = n_res;
    int longest = 1; /* resources a flow crosses, at most (one of its own at least) */
    if (routes == Py_None ? read_table(f, ps, pp, &longest) : read_routes(f, routes, &longest))
        return -1;
    if (read_timeline(scen, &f->tl[0], f->n_res) || read_timeline(ded, &f->tl[1], f->n_res))
        return -1;
    if (!ALLOC(f->rem, f->n_res) || !ALLOC(f->users, f->n_res) || !ALLOC(f->stamp, f->n_res) ||
        !ALLOC(f->touched, f->n_res) || !ALLOC(f->sat, f->n_res) ||
        !ALLOC(f->unfrozen, max_flows) || !ALLOC(f->lvl, f->n_res) ||
        !ALLOC(f->fixed, f->n_res) || !ALLOC(f->f_max, f->n_res) ||
        !ALLOC(f->f_load, f->n_res) || !ALLOC(f->f_count, f->n_res) ||
        !ALLOC(f->has_out, f->n_res) || !ALLOC(f->in_s, f->n_res) ||
        !ALLOC(f->s_list, f->n_res) || !ALLOC(f->r_stamp, f->n_res) ||
        !ALLOC(f->r_round, f->n_res) || !ALLOC(f->changed, f->n_res) ||
        !ALLOC(f->fo_stamp, f->n_res) || !ALLOC(f->fo_id, f->n_res) ||
        !ALLOC(f->fo_rate, f->n_res) ||
        !ALLOC(f->old_rate, max_flows) || !ALLOC(f->in_f, max_flows) ||
        !ALLOC(f->f_list, max_flows) || !ALLOC(f->lref, f->n_res) ||
        !ALLOC(f->heap, f->n_res) ||
        !ALLOC(f->span, f->n_res) || !ALLOC(f->span_end, f->n_res) ||
        !ALLOC(f->newsat, f->n_res) || !ALLOC(f->by_bound, max_flows) ||
        !ALLOC(f->frozen, max_flows) || !ALLOC(f->caps, max_flows + 2)) {
        PyErr_NoMemory();
        return -1;
    }
    size_t o_res, o_flows, o_active, o_free, o_heaps, o_bucket;
    size_t size = layout(n_nodes, f->n_res, max_flows, &o_res, &o_flows, &o_active, &o_free,
                         &o_heaps, &o_bucket);
    char *mem;
    mem = shm_memory(window, size, &f->view, &f->has_view, &f->mem);
    if (!mem)
        return -1;
    if (window == Py_None)
        create = 1;
    f->h = (Header *)mem;
    f->res = (Res *)(mem + o_res);
    f->flows = (Flow *)(mem + o_flows);
    f->active = (int32_t *)(mem + o_active);
    f->free_stack = (int32_t *)(mem + o_free);
    f->heap_of[0] = (int32_t *)(mem + o_heaps);
    f->heap_of[1] = f->heap_of[0] + max_flows;
    f->bucket = (double *)(mem + o_bucket);
    Header *h = f->h;
    if (create) {
        memset(mem, 0, size);
        int rc = shm_mutex_init(&h->lock);
        if (rc) {
            PyErr_Format(PyExc_OSError, "pthread_mutex_init: %s", strerror(rc));
            return -1;
        }
        h->magic = FL_MAGIC;
        h->version = FL_VERSION;
        h->n_nodes = n_nodes;
        h->n_res = f->n_res;
        h->max_flows = max_flows;
        h->base = base;
        h->clock = 0.0;
        h->epoch = h->base;
        h->time_scale = h->dilation = 1.0;
        h->played = 0.0;
        h->buffer = buffer;
        h->seed_floor = INFINITY;
        for (int i = 0; i < max_flows; i++) {
            f->flows[i].gen = 1;
            f->flows[i].hpos[0] = f->flows[i].hpos[1] = -1;
            f->free_stack[i] = max_flows - 1 - i;
        }
        h->n_free = max_flows;
        h->linked = longest <= FL_MAX_PATH; /* else every solve is a full one */
        for (int r = 0; r < f->n_res; r++)
            f->res[r].head = -1;
        for (int k = 0; k < n_nodes * n_nodes; k++) {
            f->bucket[2 * k] = INFINITY; /* full */
            f->bucket[2 * k + 1] = -INFINITY;
        }
        reset_resources(f);
        __atomic_store_n(&h->ready, 1, __ATOMIC_RELEASE);
    } else if (!__atomic_load_n(&h->ready, __ATOMIC_ACQUIRE) || h->magic != FL_MAGIC ||
               h->version != FL_VERSION || h->n_nodes != n_nodes || h->n_res != f->n_res ||
               h->max_flows != max_flows) {
        PyErr_SetString(PyExc_RuntimeError, "the shared window holds no model of this cluster");
        return -1;
    }
    f->rings.fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    return 0;
}

static void Fluid_dealloc(Fluid *f)
{
    if (f->has_view)
        PyBuffer_Release(&f->view);
    free(f->mem);
    free(f->path_start);
    free(f->paths);
    free(f->r_parent);
    free(f->r_depth);
    free(f->r_up);
    free(f->r_down);
    free(f->r_vertex);
    free(f->r_fabric);
    free(f->r_fat);
    for (int i = 0; i < 2; i++) {
        free(f->tl[i].t);
        free(f->tl[i].res);
        free(f->tl[i].capacity);
        free(f->tl[i].background);
        free(f->tl[i].init_capacity);
        free(f->tl[i].init_background);
    }
    free(f->rem);
    free(f->users);
    free(f->stamp);
    free(f->touched);
    free(f->sat);
    free(f->unfrozen);
    free(f->lvl);
    free(f->fixed);
    free(f->f_max);
    free(f->f_load);
    free(f->f_count);
    free(f->lref);
    free(f->heap);
    free(f->span);
    free(f->span_end);
    free(f->newsat);
    free(f->by_bound);
    free(f->frozen);
    free(f->caps);
    free(f->elems);
    free(f->has_out);
    free(f->in_s);
    free(f->s_list);
    free(f->r_stamp);
    free(f->r_round);
    free(f->changed);
    free(f->fo_stamp);
    free(f->fo_id);
    free(f->fo_rate);
    free(f->old_rate);
    free(f->in_f);
    free(f->f_list);
    if (f->rings.fd >= 0)
        close(f->rings.fd);
    Py_XDECREF(f->capsule);
    free(f->log);
    Py_TYPE(f)->tp_free((PyObject *)f);
}

static int ready(Fluid *f)
{
    if (!f->h) {
        PyErr_SetString(PyExc_RuntimeError, "the fluid model is closed or not initialised");
        return 0;
    }
    return 1;
}

/* add(wall, src, dst, amount, refs=1, sender_bell=None, receiver_bell=None, bound=0,
 *     resource=-1, persistent=False, bucket=True) -> (slot, gen, start wall time).
 * A message takes its pair's token bucket (`bucket`) as the message path's do; bounded,
 * persistent and own-resource flows never do. */
static PyObject *Fluid_add(Fluid *f, PyObject *args, PyObject *kwargs)
{
    double wall;
    NewFlow n;
    if (!ready(f) || shm_parse_add(args, kwargs, &wall, &n))
        return NULL;
    if (n.resource >= f->n_res) {
        PyErr_SetString(PyExc_ValueError, "bad flow: resource out of range");
        return NULL;
    }
    int32_t slot;
    uint32_t gen;
    double start;
    fl_lock(f);
    int rc = insert(f, wall, &n, &slot, &gen, &start);
    fl_unlock(f);
    if (rc == -1) {
        PyErr_SetString(PyExc_RuntimeError, "the flow table is full");
        return NULL;
    }
    if (rc == -2) {
        PyErr_SetString(PyExc_ValueError, "node index out of range");
        return NULL;
    }
    if (rc == -4) {
        PyErr_Format(PyExc_ValueError, "the route from node %d to %d crosses more than %d "
                     "resources", n.src, n.dst, FL_MAX_PATH);
        return NULL;
    }
    return Py_BuildValue("(iId)", slot, gen, start);
}

/* view(slot, gen, wall=None, party=0) -> dict, after advancing to wall (default now) */
static PyObject *Fluid_view(Fluid *f, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"slot", "gen", "wall", "party", NULL};
    int slot, party = FL_NOBODY;
    unsigned int gen;
    PyObject *wall_o = Py_None;
    if (!ready(f) || !PyArg_ParseTupleAndKeywords(args, kwargs, "iI|Oi", names, &slot, &gen,
                                                  &wall_o, &party))
        return NULL;
    double wall = wall_o == Py_None ? shm_wall_now() : PyFloat_AsDouble(wall_o);
    if (PyErr_Occurred())
        return NULL;
    FlView v;
    fl_lock(f);
    api_advance(f, wall);
    int rc = api_view(f, slot, gen, party, &v);
    double rate = rc == 0 ? f->flows[slot].rate : 0.0;
    double remaining = rc == 0 ? remaining_at(&f->flows[slot], f->h->clock) : 0.0;
    fl_unlock(f);
    if (rc) {
        PyErr_SetString(PyExc_KeyError, "no such flow (freed, or another slot's)");
        return NULL;
    }
    return shm_view_dict(&v, rate, remaining);
}

static PyObject *Fluid_drop(Fluid *f, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"slot", "gen", "party", "wall", NULL};
    int slot, party = FL_NOBODY;
    unsigned int gen;
    PyObject *wall_o = Py_None;
    if (!ready(f) || !PyArg_ParseTupleAndKeywords(args, kwargs, "iI|iO", names, &slot, &gen,
                                                  &party, &wall_o))
        return NULL;
    double wall = wall_o == Py_None ? shm_wall_now() : PyFloat_AsDouble(wall_o);
    if (PyErr_Occurred())
        return NULL;
    fl_lock(f);
    api_advance(f, wall);
    api_drop(f, slot, gen, party);
    fl_unlock(f);
    Py_RETURN_NONE;
}

static PyObject *Fluid_advance(Fluid *f, PyObject *args)
{
    double wall;
    if (!ready(f) || !PyArg_ParseTuple(args, "d", &wall))
        return NULL;
    fl_lock(f);
    api_advance(f, wall);
    fl_unlock(f);
    Py_RETURN_NONE;
}

/* The wall time of the next event: a flow's end, a scenario change, and for an owner that
 * tracks them a sender's release (inf if none). */
static PyObject *Fluid_next_event(Fluid *f, PyObject *noargs)
{
    if (!ready(f))
        return NULL;
    fl_lock(f);
    if (f->h->dirty)
        solve(f);
    Header *h = f->h;
    double t = next_scenario_change(f);
    if (h->n_heap[0] && f->flows[f->heap_of[0][0]].key[0] < t)
        t = f->flows[f->heap_of[0][0]].key[0];
    if (f->track && h->n_heap[1] && f->flows[f->heap_of[1][0]].key[1] < t)
        t = f->flows[f->heap_of[1][0]].key[1];
    double base = f->h->base;
    fl_unlock(f);
    return PyFloat_FromDouble(t + base);
}

/* set_clock(wall, epoch, time_scale, dilation, timeline): from wall on, scenario time t is
 * at wall time epoch + t * dilation / time_scale, on timeline 0 (the scenario) or 1 (the
 * dedicated network). */
static PyObject *Fluid_set_clock(Fluid *f, PyObject *args)
{
    double wall, epoch, scale, dilation;
    int timeline;
    if (!ready(f) || !PyArg_ParseTuple(args, "ddddi", &wall, &epoch, &scale, &dilation,
                                       &timeline))
        return NULL;
    if (!(scale > 0) || !(dilation > 0) || timeline < 0 || timeline > 1) {
        PyErr_SetString(PyExc_ValueError, "time scale and dilation must be positive, the "
                                          "timeline 0 or 1");
        return NULL;
    }
    fl_lock(f);
    Header *h = f->h;
    api_advance(f, wall);
    int changed = h->epoch != epoch || h->time_scale != scale || h->dilation != dilation ||
                  h->timeline != timeline;
    if (changed) {
        double rel = wall - h->base;
        if (rel > h->clock)
            h->clock = rel;
        h->epoch = epoch;
        h->time_scale = scale;
        h->dilation = dilation;
        h->timeline = timeline;
        reset_resources(f);
        solve(f);
    }
    fl_unlock(f);
    return PyBool_FromLong(changed);
}

/* The scenario's clock: (epoch, time scale, dilation, timeline, latest scenario time
 * reached, the timeline's duration). */
static PyObject *Fluid_clock(Fluid *f, PyObject *noargs)
{
    if (!ready(f))
        return NULL;
    fl_lock(f);
    Header *h = f->h;
    PyObject *out = Py_BuildValue("(dddidd)", h->epoch, h->time_scale, h->dilation, h->timeline,
                                  h->played, f->tl[h->timeline].duration);
    fl_unlock(f);
    return out;
}

/* Active flows and their rates, for checks: [(slot, src, dst, rate)]. */
static PyObject *Fluid_rates(Fluid *f, PyObject *args)
{
    double wall = NAN;
    if (!ready(f) || !PyArg_ParseTuple(args, "|d", &wall))
        return NULL;
    fl_lock(f);
    api_advance(f, isnan(wall) ? shm_wall_now() : wall);
    PyObject *out = PyList_New(0);
    for (int i = 0; out && i < f->h->n_active; i++) {
        Flow *x = &f->flows[f->active[i]];
        PyObject *t = Py_BuildValue("(iiid)", f->active[i], x->src, x->dst, x->rate);
        if (!t || PyList_Append(out, t)) {
            Py_XDECREF(t);
            Py_CLEAR(out);
        }
        Py_XDECREF(t);
    }
    fl_unlock(f);
    return out;
}

static PyObject *Fluid_counts(Fluid *f, PyObject *noargs)
{
    if (!ready(f))
        return NULL;
    fl_lock(f);
    PyObject *out = Py_BuildValue("{s:i,s:i,s:K,s:K,s:K,s:K}", "active", f->h->n_active,
                                  "free", f->h->n_free, "solves",
                                  (unsigned long long)f->h->solves, "full_solves",
                                  (unsigned long long)f->h->full_solves, "rounds", stat_rounds,
                                  "round_flows", stat_flows);
    fl_unlock(f);
    return out;
}

/* resources() -> [(capacity, background, flows, saturated, load)] per resource, as the
 * model holds them (for checks) */
static PyObject *Fluid_resources(Fluid *f, PyObject *noargs)
{
    if (!ready(f))
        return NULL;
    fl_lock(f);
    if (f->h->dirty)
        solve(f);
    PyObject *out = PyList_New(f->n_res);
    for (int r = 0; out && r < f->n_res; r++) {
        Res *x = &f->res[r];
        PyObject *t = Py_BuildValue("(diiid)", x->capacity, x->background, x->n_flows,
                                    x->saturated, (double)x->load);
        if (!t)
            Py_CLEAR(out);
        else
            PyList_SET_ITEM(out, r, t);
    }
    fl_unlock(f);
    return out;
}

/* check() -> the largest relative difference between the active flows' rates and a full
 * solve of them (the state is left as it was): the incremental solve's own test. */
static PyObject *Fluid_check(Fluid *f, PyObject *noargs)
{
    if (!ready(f))
        return NULL;
    fl_lock(f);
    Header *h = f->h;
    if (h->dirty)
        solve(f);
    int n = h->n_active;
    double *kept = malloc(sizeof(double) * (size_t)(n ? n : 1));
    double worst = 0.0;
    if (kept) {
        for (int i = 0; i < n; i++)
            kept[i] = f->flows[f->active[i]].rate;
        maxmin(f, f->active, n, f->flows, f->res, NULL);
        for (int i = 0; i < n; i++) {
            Flow *x = &f->flows[f->active[i]];
            double full = x->rate, diff = 0.0;
            if (full != kept[i])
                diff = isinf(full) || isinf(kept[i]) ? INFINITY
                       : fabs(full - kept[i]) / fmax(fabs(full), 1e-300);
            if (diff > worst)
                worst = diff;
            x->rate = kept[i];
        }
    }
    fl_unlock(f);
    if (!kept)
        return PyErr_NoMemory();
    free(kept);
    return PyFloat_FromDouble(worst);
}

/* Let go of the memory (before a shared window is freed): every later call on this model
 * fails, and the message path's calls do nothing. */
static PyObject *Fluid_detach(Fluid *f, PyObject *noargs)
{
    if (f->h) {
        fl_lock(f);
        Header *h = f->h;
        f->h = NULL;
        shm_let_go(&h->lock, &f->view, &f->has_view);
    }
    Py_RETURN_NONE;
}

static PyObject *Fluid_capsule(Fluid *f, PyObject *noargs)
{
    if (!ready(f))
        return NULL;
    return shm_capsule(&f->capsule, f, "emulator.network._fluid.Fluid", &API);
}

/* track(on): keep a log of ends and releases (the served model's owner) */
static PyObject *Fluid_track(Fluid *f, PyObject *args)
{
    int on;
    if (!ready(f) || !PyArg_ParseTuple(args, "p", &on))
        return NULL;
    fl_lock(f);
    f->track = on;
    f->n_log = 0;
    fl_unlock(f);
    Py_RETURN_NONE;
}

/* take_log() -> [(slot, gen, kind, wall)] since the last take: kind 1 done, 2 released */
static PyObject *Fluid_take_log(Fluid *f, PyObject *noargs)
{
    if (!ready(f))
        return NULL;
    fl_lock(f);
    PyObject *list = PyList_New(f->n_log);
    for (int32_t i = 0; list && i < f->n_log; i++) {
        const LogEntry *e = &f->log[i];
        PyObject *t = Py_BuildValue("(iIid)", e->slot, e->gen, e->kind, e->at + f->h->base);
        if (!t) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, i, t);
    }
    if (list)
        f->n_log = 0;
    fl_unlock(f);
    return list;
}

static PyMethodDef Fluid_methods[] = {
    {"track", (PyCFunction)Fluid_track, METH_VARARGS, "track(on): log ends and releases"},
    {"take_log", (PyCFunction)Fluid_take_log, METH_NOARGS,
     "take_log() -> [(slot, gen, kind, wall)]: 1 done, 2 released, since the last take"},
    {"add", (PyCFunction)(void (*)(void))Fluid_add, METH_VARARGS | METH_KEYWORDS,
     "add(wall, src, dst, amount, refs=1, sender_bell=None, receiver_bell=None, bound=0, "
     "resource=-1, persistent=False) -> (slot, gen, start)"},
    {"view", (PyCFunction)(void (*)(void))Fluid_view, METH_VARARGS | METH_KEYWORDS,
     "view(slot, gen, wall=None, party=0) -> dict (state, start, end, release, done, released, "
     "rate, remaining, next_change)"},
    {"drop", (PyCFunction)(void (*)(void))Fluid_drop, METH_VARARGS | METH_KEYWORDS,
     "drop(slot, gen, party=0, wall=None): one holder lets go, after advancing to wall (default now)"},
    {"advance", (PyCFunction)Fluid_advance, METH_VARARGS, "advance(wall)"},
    {"next_event", (PyCFunction)Fluid_next_event, METH_NOARGS, "wall time of the next event"},
    {"set_clock", (PyCFunction)Fluid_set_clock, METH_VARARGS,
     "set_clock(wall, epoch, time_scale, dilation, timeline) -> changed"},
    {"clock", (PyCFunction)Fluid_clock, METH_NOARGS,
     "(epoch, time_scale, dilation, timeline, scenario seconds reached, duration)"},
    {"rates", (PyCFunction)Fluid_rates, METH_VARARGS, "[(slot, src, dst, rate)] of the active"},
    {"counts", (PyCFunction)Fluid_counts, METH_NOARGS,
     "active and free slots, solves and how many of them were full"},
    {"resources", (PyCFunction)Fluid_resources, METH_NOARGS,
     "[(capacity, background, flows, saturated, load)] per resource"},
    {"check", (PyCFunction)Fluid_check, METH_NOARGS,
     "the largest relative difference of the rates from a full solve's"},
    {"capsule", (PyCFunction)Fluid_capsule, METH_NOARGS, "the C handle for the message path"},
    {"detach", (PyCFunction)Fluid_detach, METH_NOARGS, "let go of the memory (a shared window)"},
    {NULL}};

static PyTypeObject FluidType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "emulator.network._fluid.Fluid",
    .tp_basicsize = sizeof(Fluid),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The fluid model of one cluster's network (private or in a shared window).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Fluid_init,
    .tp_dealloc = (destructor)Fluid_dealloc,
    .tp_methods = Fluid_methods,
};

/* A solve of its own: the resources and flows of one call (each flow a pair of its own,
 * one node, flow i its pair i). */
typedef struct {
    Fluid f;
    Res *res;
    Flow *flows;
    int32_t *ids;
    double *sizes;
    Py_ssize_t n;
} Solo;

static void solo_free(Solo *s)
{
    free(s->res);
    free(s->flows);
    free(s->ids);
    free(s->sizes);
    free(s->f.paths);
    free(s->f.path_start);
    free(s->f.rem);
    free(s->f.users);
    free(s->f.stamp);
    free(s->f.touched);
    free(s->f.sat);
    free(s->f.unfrozen);
}

static int solo_read(Solo *s, PyObject *caps, PyObject *bgs, PyObject *paths, PyObject *bounds,
                     PyObject *sizes)
{
    memset(s, 0, sizeof *s);
    double *cap = NULL, *bnd = NULL;
    int32_t *bg = NULL;
    PyObject *fast = NULL;
    Py_ssize_t n_res, n_bg, n_bounds = 0, n_sizes = 0, total = 0, at = 0;
    int rc = -1;
    if (as_doubles(caps, &cap, &n_res) || as_ints(bgs, &bg, &n_bg))
        goto done;
    if (n_res != n_bg) {
        PyErr_SetString(PyExc_ValueError, "one background count per resource");
        goto done;
    }
    fast = PySequence_Fast(paths, "paths must be a sequence of sequences");
    if (!fast)
        goto done;
    Py_ssize_t n = s->n = PySequence_Fast_GET_SIZE(fast);
    if (bounds != Py_None && as_doubles(bounds, &bnd, &n_bounds))
        goto done;
    if (bnd && n_bounds != n) {
        PyErr_SetString(PyExc_ValueError, "one bound per flow");
        goto done;
    }
    if (sizes && as_doubles(sizes, &s->sizes, &n_sizes))
        goto done;
    if (sizes && n_sizes != n) {
        PyErr_SetString(PyExc_ValueError, "one size per flow");
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t len = PySequence_Size(PySequence_Fast_GET_ITEM(fast, i));
        if (len < 0)
            goto done;
        total += len;
    }
    Fluid *f = &s->f;
    f->n_nodes = 1;
    f->n_res = (int)n_res;
    if (!ALLOC(s->res, n_res) || !ALLOC(f->paths, total) || !ALLOC(f->path_start, n + 1) ||
        !ALLOC(s->flows, n) || !ALLOC(s->ids, n) || !ALLOC(f->rem, n_res) ||
        !ALLOC(f->users, n_res) || !ALLOC(f->stamp, n_res) || !ALLOC(f->touched, n_res) ||
        !ALLOC(f->sat, n_res) || !ALLOC(f->unfrozen, n)) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t r = 0; r < n_res; r++) {
        if (!(cap[r] > 0) || bg[r] < 0) {
            PyErr_Format(PyExc_ValueError, "resource %zd: capacity must be positive", r);
            goto done;
        }
        s->res[r].capacity = cap[r];
        s->res[r].background = bg[r];
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        int32_t *p;
        Py_ssize_t len;
        if (as_ints(PySequence_Fast_GET_ITEM(fast, i), &p, &len))
            goto done;
        f->path_start[i] = (int32_t)at;
        for (Py_ssize_t j = 0; j < len; j++) {
            if (p[j] < 0 || p[j] >= n_res) {
                PyErr_Format(PyExc_ValueError, "flow %zd crosses unknown resource %d", i, p[j]);
                free(p);
                goto done;
            }
            f->paths[at++] = p[j];
        }
        free(p);
        if ((bnd && bnd[i] < 0) || (s->sizes && !(s->sizes[i] >= 0))) {
            PyErr_Format(PyExc_ValueError, "flow %zd: bounds and sizes must be >= 0", i);
            goto done;
        }
        s->flows[i].own_res = -1;
        s->flows[i].dst = (int32_t)i;
        s->flows[i].bound = bnd ? bnd[i] : 0.0;
        s->ids[i] = (int32_t)i;
    }
    f->path_start[n] = (int32_t)at;
    rc = 0;
done:
    Py_XDECREF(fast);
    free(cap);
    free(bg);
    free(bnd);
    return rc;
}

/* maxmin(capacities, backgrounds, paths, bounds=None) -> rates: the solver alone. */
static PyObject *maxmin_py(PyObject *mod, PyObject *args)
{
    PyObject *caps, *bgs, *paths, *bounds = Py_None, *out = NULL;
    Solo s;
    if (!PyArg_ParseTuple(args, "OOO|O", &caps, &bgs, &paths, &bounds))
        return NULL;
    if (solo_read(&s, caps, bgs, paths, bounds, NULL) == 0) {
        maxmin(&s.f, s.ids, (int)s.n, s.flows, s.res, NULL);
        out = PyList_New(s.n);
        for (Py_ssize_t i = 0; out && i < s.n; i++)
            PyList_SET_ITEM(out, i, PyFloat_FromDouble(s.flows[i].rate));
    }
    solo_free(&s);
    return out;
}

/* finish_times(capacities, backgrounds, paths, sizes, bounds=None) -> the time each flow
 * ends when all start at 0, solved again at every end. */
static PyObject *finish_times_py(PyObject *mod, PyObject *args)
{
    PyObject *caps, *bgs, *paths, *sizes, *bounds = Py_None, *out = NULL;
    Solo s;
    if (!PyArg_ParseTuple(args, "OOOO|O", &caps, &bgs, &paths, &sizes, &bounds))
        return NULL;
    if (solo_read(&s, caps, bgs, paths, bounds, sizes) == 0) {
        double *ends = calloc((size_t)(s.n ? s.n : 1), sizeof(double));
        if (!ends) {
            PyErr_NoMemory();
        } else {
            int active = 0;
            for (Py_ssize_t i = 0; i < s.n; i++) {
                s.flows[i].remaining = s.sizes[i];
                if (s.sizes[i] > 0)
                    s.ids[active++] = (int32_t)i;
            }
            double t = 0.0;
            while (active > 0) {
                maxmin(&s.f, s.ids, active, s.flows, s.res, NULL);
                double step = INFINITY;
                for (int k = 0; k < active; k++) {
                    Flow *x = &s.flows[s.ids[k]];
                    if (x->rate > 0 && x->remaining / x->rate < step)
                        step = x->remaining / x->rate;
                }
                if (!isfinite(step)) { /* unlimited flows end at once, stuck ones never */
                    for (int k = 0; k < active; k++)
                        ends[s.ids[k]] = isinf(s.flows[s.ids[k]].rate) ? t : INFINITY;
                    break;
                }
                t += step;
                int kept = 0;
                for (int k = 0; k < active; k++) {
                    Flow *x = &s.flows[s.ids[k]];
                    x->remaining -= x->rate * step;
                    if (x->remaining <= x->rate * DONE_BITS_SECONDS * 4)
                        ends[s.ids[k]] = t;
                    else
                        s.ids[kept++] = s.ids[k];
                }
                active = kept;
            }
            out = PyList_New(s.n);
            for (Py_ssize_t i = 0; out && i < s.n; i++)
                PyList_SET_ITEM(out, i, PyFloat_FromDouble(ends[i]));
            free(ends);
        }
    }
    solo_free(&s);
    return out;
}

/* set_incremental(on) -> was: incremental solves (the default) or full ones, in this process */
static PyObject *set_incremental_py(PyObject *mod, PyObject *args)
{
    int on, was = incremental_on;
    if (!PyArg_ParseTuple(args, "p", &on))
        return NULL;
    incremental_on = on;
    return PyBool_FromLong(was);
}

/* set_pruning(on) -> was: incremental solves that leave out the flows below the change's
 * floor (the default), or that do not (for comparison), in this process */
static PyObject *set_pruning_py(PyObject *mod, PyObject *args)
{
    int on, was = pruning_on;
    if (!PyArg_ParseTuple(args, "p", &on))
        return NULL;
    pruning_on = on;
    return PyBool_FromLong(was);
}

/* set_caching(on) -> was: incremental solves that count F and find the fastest flow outside
 * it round by round from the last round's answers, or afresh (the same rates, to the bit) */
static PyObject *set_caching_py(PyObject *mod, PyObject *args)
{
    int on, was = caching_on;
    (void)mod;
    if (!PyArg_ParseTuple(args, "p", &on))
        return NULL;
    caching_on = on;
    return PyBool_FromLong(was);
}

static PyMethodDef module_methods[] = {
    {"set_incremental", set_incremental_py, METH_VARARGS,
     "set_incremental(on) -> the previous setting: incremental or full solves (this process)"},
    {"set_caching", set_caching_py, METH_VARARGS,
     "set_caching(on) -> the previous setting: incremental solves that reuse a round's "
     "counts, or count afresh"},
    {"set_pruning", set_pruning_py, METH_VARARGS,
     "set_pruning(on) -> the previous setting: incremental solves with a floor, or without"},
    {"maxmin", maxmin_py, METH_VARARGS,
     "maxmin(capacities, backgrounds, paths, bounds=None) -> max-min fair rates"},
    {"finish_times", finish_times_py, METH_VARARGS,
     "finish_times(capacities, backgrounds, paths, sizes, bounds=None) -> when each flow "
     "ends, all starting at 0"},
    {"state_bytes", state_bytes, METH_VARARGS,
     "state_bytes(n_nodes, n_resources, max_flows): the size of a model's state"},
    {NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fluid",
                                    "The cluster's network as one fluid model.", -1,
                                    module_methods};

PyMODINIT_FUNC PyInit__fluid(void)
{
    if (PyType_Ready(&FluidType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    Py_INCREF(&FluidType);
    PyObject *api = PyCapsule_New((void *)&API, FLUID_API_CAPSULE, NULL);
    if (PyModule_AddObject(m, "Fluid", (PyObject *)&FluidType) || !api ||
        PyModule_AddObject(m, "_C_API", api) ||
        PyModule_AddIntConstant(m, "RECEIVER", FL_RECEIVER) ||
        PyModule_AddIntConstant(m, "SENDER", FL_SENDER) ||
        PyModule_AddIntConstant(m, "NOBODY", FL_NOBODY) ||
        PyModule_AddIntConstant(m, "BELL_BYTES", FL_BELL_BYTES)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
