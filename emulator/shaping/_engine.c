/* The shaped communicator's message path in C: the same model, wire format and waits as
 * emulator/shaping/comm.py (read its module docstring for the model), one Engine per
 * communicator.
 *
 * MPI is called through function pointers that emulator/shaping/engine.py takes from the
 * MPI library mpi4py loaded, after checking that its ABI is MPICH's (int handles; the
 * status's source and tag offsets are measured, not assumed). So the package builds with
 * gcc and the Python headers alone, and runs on whichever MPICH-ABI library is loaded.
 *
 * The GIL is held except while sleeping or blocked in MPI_Wait: every structure here,
 * including the list of sends in flight shared by the engines of one process, is touched
 * only with it held.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>

/* the constants of comm.py (EARLY_*: doorbell.py's; the module exports them for a check) */
#define POLL_MIN_SECONDS 0.00005
#define POLL_MAX_SECONDS 0.0002
#define POLL_MOVING_SECONDS 0.00005
#define EARLY_RING_SECONDS 0.05
#define EARLY_POLL_MAX_SECONDS 0.002
#define LEAD_MAX_SECONDS 0.0001
#define LEAD_WEIGHT 0.1
#define MIN_STEP_SECONDS 1e-6
#define EAGER_BYTES (16 * 1024)
#define SEND_BUFFER_BYTES (512 * 1024)
#define BUFFER_BITS (SEND_BUFFER_BYTES * 8.0)
enum { SLOT_HEADER = 0, SLOT_PAYLOAD = 1, SLOT_ACK = 2, SLOT_EGRESS = 3, TAG_SLOTS = 4 };
#define HEADER_BYTES 32 /* struct "dddq": send wall time, bytes, sender's open flows, seq */
#define NOTE_BYTES 16   /* "dd": wall time, sender's open flows from then (or ENDED) */
#define ENDED -1        /* a note's count: one of the sender's flows ended then */
#define NOTICE_BYTES 17 /* "dq?": wall time, the send's seq, final (else release) */
#define UNSET (-1.0)    /* a time not yet known (wall times are positive) */
#define MTU_BYTES 1514

/* -- MPI through the loaded library ------------------------------------------------ */

typedef int (*isend_f)(const void *, int, int, int, int, int, int *);
typedef int (*irecv_f)(void *, int, int, int, int, int, int *);
typedef int (*iprobe_f)(int, int, int, int *, void *);
typedef int (*recv_f)(void *, int, int, int, int, int, void *);
typedef int (*test_f)(int *, int *, void *);
typedef int (*wait_f)(int *, void *);
typedef int (*count_f)(const void *, int, int *);

static struct {
    isend_f isend;
    irecv_f irecv;
    iprobe_f iprobe;
    recv_f recv;
    test_f test;
    wait_f wait;
    count_f get_count;
    int byte, request_null, any_source, any_tag, source_at, tag_at;
    int bound;
} M;

typedef struct { int w[32]; } Status; /* larger than any MPICH-ABI status */

static int status_source(const Status *s) { return s->w[M.source_at]; }
static int status_tag(const Status *s) { return s->w[M.tag_at]; }

/* -- clocks and the process-wide state ---------------------------------------------- */

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* how late this process delivers after a timed sleep (comm.py's _lead_seconds) */
static double lead_seconds = 0.0;

/* sends in flight whose request nobody waits for: eager packets, notices, notes */
typedef struct { int request; char *mem; } InFlight;
static InFlight *in_flight = NULL;
static Py_ssize_t n_in_flight = 0, cap_in_flight = 0;

static int keep(int request, char *mem)
{
    if (n_in_flight == cap_in_flight) {
        Py_ssize_t cap = cap_in_flight ? 2 * cap_in_flight : 64;
        InFlight *grown = realloc(in_flight, cap * sizeof(InFlight));
        if (!grown) {
            PyErr_NoMemory();
            return -1;
        }
        in_flight = grown;
        cap_in_flight = cap;
    }
    in_flight[n_in_flight].request = request;
    in_flight[n_in_flight].mem = mem;
    n_in_flight++;
    return 0;
}

static void test_in_flight(void)
{
    Py_ssize_t k = 0;
    for (Py_ssize_t i = 0; i < n_in_flight; i++) {
        int flag = 0;
        Status st;
        M.test(&in_flight[i].request, &flag, &st);
        if (flag)
            free(in_flight[i].mem);
        else
            in_flight[k++] = in_flight[i];
    }
    n_in_flight = k;
}

/* -- objects ------------------------------------------------------------------------ */

struct Req;

typedef struct Flow {
    int src, tag;
    long long nbytes, seq;
    double start, credit_bits, remaining_bits, done_at, release_at;
    int released, acked, staged, moving, in_commit;
    int request;
    char *mem;  /* what this flow owns: the eager packet or a staging buffer */
    char *data; /* the payload: in mem, or straight in the bound receive's buffer */
    struct Req *bound;
    double commit_remaining, commit_done, commit_release;
} Flow;

typedef struct Req {
    PyObject_HEAD
    PyObject *engine;
    int peer, tag, is_send, done;
    Py_ssize_t nbytes;
    Flow *flow;          /* receives: the incoming flow bound to this receive */
    Py_buffer view;      /* receives: the target; larger sends: the payload until MPI is done */
    int has_view;
    PyObject *data;      /* receives into None: the bytes */
    double start_at, due_at; /* receives: the flow's start and delivery in the model */
    long long seq;       /* larger sends */
    int released, n_mpi;
    int mpi[2];
    char *header;
} Req;

typedef struct { double *t; int *count; int n, cap; } Egress;

typedef struct {
    PyObject_HEAD
    int comm, n, rank, tag_base;
    int *members;
    int *index_of;   /* world rank -> member index, -1 if not a member */
    int n_world;
    double *port_bps;
    double latency, timeout, bell_max;
    PyObject *pair_fn;  /* pair_fn(source index, wall) -> (bit/s, next change wall) */
    PyObject *owner;    /* free for the Python side (the communicator's node names) */
    int bell_fd;
    struct sockaddr_un *bells;
    socklen_t *bell_len;
    Flow **flows;
    int n_flows, cap_flows;
    Req **posted;
    int n_posted, cap_posted;
    Req **sends;
    int n_sends, cap_sends;
    long long seq;
    double clock, commit_t, finish, horizon, next_release;
    int has_commit, dirty, busy;
    Egress *egress;
    double *pair_lo, *pair_hi, *pair_bps;
    double *tokens, *busy_until;
    char *has_bucket;
    int *scratch_count;
    Flow **active;
    double *rates;
    int cap_active, cap_rates;
    long long bytes_sent, messages_sent;
    long long arrivals; /* messages taken from MPI so far */
    /* the last ring that has brought nothing yet: when (monotonic), and arrivals then */
    double ring_at;
    long long ring_arrivals;
    int ring_open;
} Engine;

static PyTypeObject ReqType;
static PyTypeObject EngineType;

static int grow(void **array, int *cap, int need, size_t size)
{
    if (need <= *cap)
        return 0;
    int cap2 = *cap ? *cap : 8;
    while (cap2 < need)
        cap2 *= 2;
    void *grown = realloc(*array, (size_t)cap2 * size);
    if (!grown) {
        PyErr_NoMemory();
        return -1;
    }
    *array = grown;
    *cap = cap2;
    return 0;
}

static int mpi_tag(Engine *e, int tag, int slot) { return e->tag_base + tag * TAG_SLOTS + slot; }

static int ours(Engine *e, int full_tag)
{
    int d = full_tag - e->tag_base;
    return d >= 0 && d < TAG_SLOTS * 2 * 4096;
}

static void ring(Engine *e, int peer)
{
    if (e->bell_fd >= 0)
        sendto(e->bell_fd, "", 1, MSG_DONTWAIT, (struct sockaddr *)&e->bells[peer],
               e->bell_len[peer]);
}

/* -- the fluid model ---------------------------------------------------------------- */

/* Available bandwidth from src to this node at wall time t; *next: when it changes. The
 * scenario is asked once per piece of constant bandwidth. -1 with an exception set. */
static double pair_bps(Engine *e, int src, double t, double *next)
{
    double lo = e->pair_lo[src], hi = e->pair_hi[src];
    if (lo <= t && t < hi) {
        *next = hi;
        return e->pair_bps[src];
    }
    PyObject *r = PyObject_CallFunction(e->pair_fn, "id", src, t);
    if (!r)
        return -1;
    double bps, nxt;
    if (!PyArg_ParseTuple(r, "dd", &bps, &nxt)) {
        Py_DECREF(r);
        return -1;
    }
    Py_DECREF(r);
    if (t < lo && lo < nxt) /* no change from t up to the known piece: it extends back */
        nxt = hi;
    e->pair_lo[src] = t;
    e->pair_hi[src] = nxt;
    e->pair_bps[src] = bps;
    *next = nxt;
    return bps;
}

static double egress_bps(Engine *e, int src, double t, double *next)
{
    Egress *g = &e->egress[src];
    int lo = 0, hi = g->n; /* bisect_right */
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (t < g->t[mid])
            hi = mid;
        else
            lo = mid + 1;
    }
    int flows = lo && g->count[lo - 1] > 1 ? g->count[lo - 1] : 1;
    *next = lo < g->n ? g->t[lo] : INFINITY;
    return e->port_bps[src] / flows;
}

static int note_egress(Engine *e, int src, double t, int count)
{
    Egress *g = &e->egress[src];
    int lo = 0, hi = g->n;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (t < g->t[mid])
            hi = mid;
        else
            lo = mid + 1;
    }
    int before = lo ? g->count[lo - 1] : 1;
    if (count == ENDED) { /* one flow fewer than src said from t on (comm.py's _note_egress) */
        for (int i = lo; i < g->n; i++)
            g->count[i]--;
        count = before - 1;
    } else {
        if (count < 1)
            count = 1;
        if (before == count)
            return 0;
    }
    int cap_t = g->cap, cap_c = g->cap;
    if (grow((void **)&g->t, &cap_t, g->n + 1, sizeof(double)) ||
        grow((void **)&g->count, &cap_c, g->n + 1, sizeof(int)))
        return -1;
    g->cap = cap_t < cap_c ? cap_t : cap_c;
    memmove(g->t + lo + 1, g->t + lo, (size_t)(g->n - lo) * sizeof(double));
    memmove(g->count + lo + 1, g->count + lo, (size_t)(g->n - lo) * sizeof(int));
    g->t[lo] = t;
    g->count[lo] = count;
    g->n++;
    e->dirty = 1;
    return 0;
}

static double burst_bits(double rate_bps)
{
    double b = floor(rate_bps / 8.0 * 0.0002);
    return 8.0 * (b > 2 * MTU_BYTES ? b : 2 * MTU_BYTES);
}

/* What the pair's token bucket saves a new flow of `bits` (comm.py's _burst_credit). */
static double burst_credit(Engine *e, int src, double start, double bits)
{
    double next;
    double rate = pair_bps(e, src, start, &next);
    if (rate < 0 && PyErr_Occurred())
        return -1;
    if (e->port_bps[src] < rate)
        rate = e->port_bps[src];
    if (bits == 0 || rate <= 0)
        return 0.0;
    double full = burst_bits(rate);
    double tokens = full, busy = -INFINITY;
    if (e->has_bucket[src]) {
        tokens = e->tokens[src];
        busy = e->busy_until[src];
    }
    double idle = start - busy;
    tokens = fmin(full, tokens + rate * (idle > 0 ? idle : 0.0));
    double credit = fmin(tokens, bits);
    e->tokens[src] = tokens - credit;
    e->busy_until[src] = (busy > start ? busy : start) + (bits - credit) / rate;
    e->has_bucket[src] = 1;
    return credit;
}

/* Active flows at wall time t into e->active, their rates into e->rates; returns how many
 * (-1 on error) and sets *change to the next change of any rate. */
static int rates_at(Engine *e, double t, double *change)
{
    if (grow((void **)&e->active, &e->cap_active, e->n_flows, sizeof(Flow *)) ||
        grow((void **)&e->rates, &e->cap_rates, e->n_flows, sizeof(double)))
        return -1;
    int n = 0;
    for (int i = 0; i < e->n_flows; i++) {
        Flow *f = e->flows[i];
        if (f->done_at == UNSET && f->start <= t)
            e->active[n++] = f;
    }
    *change = INFINITY;
    if (!n)
        return 0;
    double ingress = e->port_bps[e->rank], pc, ec;
    if (n == 1) {
        int src = e->active[0]->src;
        double pair = pair_bps(e, src, t, &pc);
        if (pair < 0 && PyErr_Occurred())
            return -1;
        double egress = egress_bps(e, src, t, &ec);
        e->rates[0] = fmin(fmin(pair, ingress), egress);
        *change = fmin(pc, ec);
        return 1;
    }
    for (int i = 0; i < n; i++)
        e->scratch_count[e->active[i]->src] = 0;
    for (int i = 0; i < n; i++)
        e->scratch_count[e->active[i]->src]++;
    ingress /= n;
    for (int i = 0; i < n; i++) {
        int src = e->active[i]->src;
        double pair = pair_bps(e, src, t, &pc);
        if (pair < 0 && PyErr_Occurred())
            return -1;
        double egress = egress_bps(e, src, t, &ec);
        e->rates[i] = fmin(fmin(pair / e->scratch_count[src], ingress), egress);
        *change = fmin(*change, fmin(pc, ec));
    }
    return n;
}

/* Run the fluid model of incoming flows up to wall time `now` from the last commit (see
 * comm.py's _run_model); returns the next completion at the current rates, NAN on error. */
static double run_model(Engine *e, double now)
{
    if (!e->has_commit) {
        if (!e->n_flows) {
            e->clock = now;
            e->horizon = e->next_release = INFINITY;
            return INFINITY;
        }
        double first = INFINITY;
        for (int i = 0; i < e->n_flows; i++)
            first = fmin(first, e->flows[i]->start);
        e->has_commit = 1;
        e->commit_t = first;
        for (int i = 0; i < e->n_flows; i++)
            e->flows[i]->in_commit = 0;
    }
    double t = e->commit_t;
    for (int i = 0; i < e->n_flows; i++) {
        Flow *f = e->flows[i];
        if (f->in_commit) {
            f->remaining_bits = f->commit_remaining;
            f->done_at = f->commit_done;
            f->release_at = f->commit_release;
        } else {
            if (f->start < t)
                f->start = t;
            f->remaining_bits = f->nbytes * 8.0 - f->credit_bits;
            f->done_at = f->nbytes ? UNSET : f->start;
            f->release_at = UNSET;
        }
    }
    for (;;) {
        double change;
        int n = rates_at(e, t, &change);
        if (n < 0)
            return NAN;
        double finish = INFINITY, start = INFINITY;
        for (int i = 0; i < n; i++)
            if (e->rates[i] > 0)
                finish = fmin(finish, t + e->active[i]->remaining_bits / e->rates[i]);
        for (int i = 0; i < e->n_flows; i++) {
            Flow *f = e->flows[i];
            if (f->done_at == UNSET && f->start > t)
                start = fmin(start, f->start);
        }
        if (!n && start == INFINITY && t < now)
            t = now; /* nothing moves until a new flow comes */
        if (t >= now) {
            double release = INFINITY;
            for (int i = 0; i < n; i++) {
                Flow *f = e->active[i];
                if (f->release_at == UNSET && e->rates[i] > 0)
                    release = fmin(release, t + (f->remaining_bits - BUFFER_BITS) / e->rates[i]);
            }
            e->clock = t;
            e->next_release = release;
            e->horizon = fmin(fmin(finish, change), fmin(release, start));
            return finish;
        }
        /* never step by less than MIN_STEP_SECONDS (a float64 step at 1.7e9 s is 0.24 us) */
        double horizon = fmin(fmin(now, change), fmin(finish, start));
        if (horizon < t + MIN_STEP_SECONDS)
            horizon = t + MIN_STEP_SECONDS;
        for (int i = 0; i < n; i++) {
            Flow *f = e->active[i];
            double r = e->rates[i], before = f->remaining_bits;
            f->remaining_bits -= r * (horizon - t);
            if (f->remaining_bits <= r * MIN_STEP_SECONDS) {
                f->remaining_bits = 0.0;
                f->done_at = horizon;
            }
            if (f->release_at == UNSET && f->remaining_bits <= BUFFER_BITS + r * MIN_STEP_SECONDS)
                f->release_at = fmin(t + (before - BUFFER_BITS) / r, horizon);
        }
        t = horizon;
    }
}

static void commit_model(Engine *e)
{
    if (e->n_flows) {
        e->has_commit = 1;
        e->commit_t = e->clock;
        for (int i = 0; i < e->n_flows; i++) {
            Flow *f = e->flows[i];
            f->in_commit = 1;
            f->commit_remaining = f->remaining_bits;
            f->commit_done = f->done_at;
            f->commit_release = f->release_at;
        }
    } else {
        e->has_commit = 0;
    }
    e->dirty = 1;
}

/* -- notices between the ends of a flow ------------------------------------------- */

static int send_small(Engine *e, const void *bytes, int size, int peer, int tag)
{
    char *mem = malloc(size ? size : 1);
    if (!mem) {
        PyErr_NoMemory();
        return -1;
    }
    memcpy(mem, bytes, size);
    int request;
    if (M.isend(mem, size, M.byte, e->members[peer], tag, e->comm, &request)) {
        free(mem);
        PyErr_SetString(PyExc_RuntimeError, "MPI_Isend failed");
        return -1;
    }
    if (keep(request, mem))
        return -1;
    ring(e, peer);
    return 0;
}

/* Tell a flow's sender that it finished (final) or was released at `at`. */
static int notify(Engine *e, Flow *f, double at, int final)
{
    char packet[NOTICE_BYTES];
    memcpy(packet, &at, 8);
    memcpy(packet + 8, &f->seq, 8);
    packet[16] = (char)(final != 0);
    return send_small(e, packet, NOTICE_BYTES, f->src, mpi_tag(e, f->tag, SLOT_ACK));
}

/* Tell the receivers of this sender's open flows that it has `count` flows from t. */
static int announce_egress(Engine *e, double t, int count, int skip)
{
    char packet[NOTE_BYTES];
    double c = count;
    memcpy(packet, &t, 8);
    memcpy(packet + 8, &c, 8);
    for (int peer = 0; peer < e->n; peer++) {
        if (peer == skip)
            continue;
        for (int i = 0; i < e->n_sends; i++)
            if (e->sends[i]->peer == peer) {
                if (send_small(e, packet, NOTE_BYTES, peer, mpi_tag(e, 0, SLOT_EGRESS)))
                    return -1;
                break;
            }
    }
    return 0;
}

static int notices(Engine *e, double now)
{
    for (int i = 0; i < e->n_flows; i++) {
        Flow *f = e->flows[i];
        if (f->acked)
            continue;
        if (!f->released && f->release_at != UNSET && f->release_at <= now) {
            f->released = 1;
            if (f->nbytes > SEND_BUFFER_BYTES && notify(e, f, f->release_at, 0))
                return -1;
        }
        if (f->done_at != UNSET && f->done_at <= now) {
            f->acked = f->released = 1;
            if (notify(e, f, f->done_at, 1))
                return -1;
        }
    }
    return 0;
}

static void free_flow(Flow *f)
{
    free(f->mem);
    free(f);
}

static void release_send(Req *r)
{
    if (r->has_view) {
        PyBuffer_Release(&r->view);
        r->has_view = 0;
    }
    free(r->header);
    r->header = NULL;
}

static double lead(Engine *e) { return fmin(lead_seconds, e->latency); }

static int check_sends(Engine *e)
{
    int progressed = 0;
    for (int i = 0; i < e->n_sends; i++) {
        Req *r = e->sends[i];
        if (!r->done && r->released && !r->n_mpi)
            r->done = progressed = 1;
    }
    return progressed;
}

/* Complete posted receives delivered by `now`, and sends released or acknowledged.
 * Returns 1 if anything completed, 0 if not, -1 on error. */
static int deliver(Engine *e, double now)
{
    if (notices(e, now))
        return -1;
    int progressed = 0, k = 0;
    double ahead = lead(e);
    for (int i = 0; i < e->n_posted; i++) {
        Req *r = e->posted[i];
        Flow *f = r->flow;
        if (f == NULL || f->done_at == UNSET || f->moving ||
            f->done_at + e->latency - ahead > now) {
            e->posted[k++] = r;
            continue;
        }
        if (!r->has_view) {
            r->data = PyBytes_FromStringAndSize(f->data, (Py_ssize_t)f->nbytes);
            if (!r->data)
                goto failed;
        } else if (f->staged) {
            if (f->nbytes > r->view.len) {
                PyErr_Format(PyExc_ValueError, "message of %lld bytes from rank %d does not "
                             "fit a %zd-byte buffer", f->nbytes, r->peer, r->view.len);
                goto failed;
            }
            memcpy(r->view.buf, f->data, (size_t)f->nbytes);
        }
        r->nbytes = (Py_ssize_t)f->nbytes;
        r->start_at = f->start;
        r->due_at = f->done_at + e->latency;
        r->done = 1;
        if (r->has_view) {
            PyBuffer_Release(&r->view);
            r->has_view = 0;
        }
        if (!f->acked) {
            f->acked = f->released = 1;
            if (notify(e, f, f->done_at, 1)) {
                e->posted[k++] = r;
                r->done = 0;
                goto failed;
            }
        }
        int m = 0;
        for (int j = 0; j < e->n_flows; j++)
            if (e->flows[j] != f)
                e->flows[m++] = e->flows[j];
        e->n_flows = m;
        r->flow = NULL;
        free_flow(f);
        Py_DECREF(r);
        progressed = 1;
        continue;
    failed: /* keep the receives not yet delivered, this one included */
        for (int j = e->posted[k - 1] == r ? i + 1 : i; j < e->n_posted; j++)
            e->posted[k++] = e->posted[j];
        e->n_posted = k;
        return -1;
    }
    e->n_posted = k;
    if (progressed)
        commit_model(e);
    return check_sends(e) || progressed;
}

/* A receiver released send `seq` or saw its last byte at `at` (final). */
static int on_notice(Engine *e, int src, double at, long long seq, int final)
{
    int i;
    for (i = 0; i < e->n_sends; i++)
        if (e->sends[i]->seq == seq)
            break;
    if (i == e->n_sends || e->sends[i]->peer != src)
        return 0;
    Req *r = e->sends[i];
    r->released = 1;
    if (!final)
        return 0;
    for (int j = 0; j < r->n_mpi; j++) {
        Status st;
        int rc;
        Py_BEGIN_ALLOW_THREADS
        rc = M.wait(&r->mpi[j], &st);
        Py_END_ALLOW_THREADS
        if (rc) {
            PyErr_SetString(PyExc_RuntimeError, "MPI_Wait failed");
            return -1;
        }
    }
    r->n_mpi = 0;
    release_send(r);
    r->done = 1;
    memmove(e->sends + i, e->sends + i + 1, (size_t)(e->n_sends - i - 1) * sizeof(Req *));
    e->n_sends--;
    Py_DECREF(r);
    return announce_egress(e, at, ENDED, -1);
}

static double next_due(Engine *e, double finish)
{
    double due = finish;
    for (int i = 0; i < e->n_flows; i++) {
        Flow *f = e->flows[i];
        if (f->done_at != UNSET && f->bound != NULL)
            due = fmin(due, f->done_at);
    }
    due = fmin(fmin(due + e->latency - lead(e), finish), e->next_release);
    for (int i = 0; i < e->n_flows; i++) {
        Flow *f = e->flows[i];
        if (!f->released && f->release_at != UNSET)
            due = fmin(due, f->release_at);
    }
    return due;
}

/* Drive MPI's data movement; 1 while some payload is still in flight. */
static int moving(Engine *e)
{
    int any = 0;
    Status st;
    for (int i = 0; i < e->n_flows; i++) {
        Flow *f = e->flows[i];
        if (f->moving) {
            int flag = 0;
            M.test(&f->request, &flag, &st);
            if (flag)
                f->moving = 0;
            else
                any = 1;
        }
    }
    if (n_in_flight)
        test_in_flight();
    for (int i = 0; i < e->n_sends; i++) {
        Req *r = e->sends[i];
        if (!r->n_mpi)
            continue;
        int all = 1;
        for (int j = 0; j < r->n_mpi; j++) {
            int flag = 0;
            M.test(&r->mpi[j], &flag, &st);
            all &= flag;
        }
        if (all) {
            r->n_mpi = 0;
            release_send(r);
        } else {
            any = 1;
        }
    }
    return any;
}

/* -- incoming messages ------------------------------------------------------------ */

static Req *first_posted(Engine *e, int src, int tag)
{
    for (int i = 0; i < e->n_posted; i++) {
        Req *r = e->posted[i];
        if (r->peer == src && r->tag == tag && r->flow == NULL)
            return r;
    }
    return NULL;
}

/* Receive the probed message from `world` if it is this group's (or a late notice to an
 * earlier group, dropped). 1 taken, 0 left for a later group, -1 error. */
static int take(Engine *e, int world, Status *st)
{
    int full_tag = status_tag(st), src = e->index_of[world], is_ours = ours(e, full_tag);
    int slot = full_tag % TAG_SLOTS;
    Status rst;
    if (slot == SLOT_EGRESS || slot == SLOT_ACK) {
        char packet[NOTICE_BYTES];
        e->arrivals++;
        if (M.recv(packet, NOTICE_BYTES, M.byte, world, full_tag, e->comm, &rst)) {
            PyErr_SetString(PyExc_RuntimeError, "MPI_Recv failed");
            return -1;
        }
        if (!is_ours)
            return 1; /* a late notice to an earlier group of this node: dropped */
        double t, v;
        long long seq;
        memcpy(&t, packet, 8);
        if (slot == SLOT_EGRESS) {
            memcpy(&v, packet + 8, 8);
            return note_egress(e, src, t, (int)v) ? -1 : 1;
        }
        memcpy(&seq, packet + 8, 8);
        return on_notice(e, src, t, seq, packet[16]) ? -1 : 1;
    }
    if (!is_ours || (full_tag - e->tag_base) % TAG_SLOTS != SLOT_HEADER)
        return 0;
    int tag = (full_tag - e->tag_base) / TAG_SLOTS, count = 0;
    M.get_count(st, M.byte, &count);
    char *packet = malloc(count > HEADER_BYTES ? count : HEADER_BYTES);
    Flow *f = calloc(1, sizeof(Flow));
    if (!packet || !f || grow((void **)&e->flows, &e->cap_flows, e->n_flows + 1, sizeof(Flow *))) {
        free(packet);
        free(f);
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        return -1;
    }
    if (M.recv(packet, count, M.byte, world, full_tag, e->comm, &rst)) {
        free(packet);
        free(f);
        PyErr_SetString(PyExc_RuntimeError, "MPI_Recv failed");
        return -1;
    }
    double start, size, egress;
    long long seq;
    memcpy(&start, packet, 8);
    memcpy(&size, packet + 8, 8);
    memcpy(&egress, packet + 16, 8);
    memcpy(&seq, packet + 24, 8);
    long long nbytes = (long long)size;
    if (nbytes && note_egress(e, src, start, (int)egress)) {
        free(packet);
        free(f);
        return -1;
    }
    double credit = burst_credit(e, src, start, nbytes * 8.0);
    if (credit < 0) {
        free(packet);
        free(f);
        return -1;
    }
    f->src = src;
    f->tag = tag;
    f->nbytes = nbytes;
    f->seq = seq;
    f->start = start;
    f->credit_bits = credit;
    f->remaining_bits = nbytes * 8.0 - credit;
    f->done_at = nbytes ? UNSET : start;
    f->release_at = UNSET;
    f->released = f->acked = nbytes <= EAGER_BYTES;
    f->staged = 1;
    f->bound = first_posted(e, src, tag);
    if (f->bound)
        f->bound->flow = f;
    if (nbytes <= EAGER_BYTES) { /* the payload came with the header */
        f->mem = packet;
        f->data = packet + HEADER_BYTES;
    } else {
        free(packet);
        Req *b = f->bound;
        if (b && b->has_view && b->view.len >= nbytes) {
            f->data = b->view.buf;
            f->staged = 0;
        } else {
            f->mem = f->data = malloc((size_t)nbytes);
            if (!f->mem) {
                if (b)
                    b->flow = NULL;
                free(f);
                PyErr_NoMemory();
                return -1;
            }
        }
        if (M.irecv(f->data, (int)nbytes, M.byte, world, mpi_tag(e, tag, SLOT_PAYLOAD), e->comm,
                    &f->request)) {
            if (b)
                b->flow = NULL;
            free_flow(f);
            PyErr_SetString(PyExc_RuntimeError, "MPI_Irecv failed");
            return -1;
        }
        f->moving = 1;
    }
    e->flows[e->n_flows++] = f;
    e->dirty = 1;
    e->arrivals++;
    return 1;
}

/* Register every header that has arrived (comm.py's _poll_headers). */
static int poll_headers(Engine *e)
{
    Status st;
    for (;;) {
        int flag = 0;
        M.iprobe(M.any_source, M.any_tag, e->comm, &flag, &st);
        if (!flag)
            M.iprobe(M.any_source, M.any_tag, e->comm, &flag, &st);
        if (!flag)
            return 0;
        int world = status_source(&st), full_tag = status_tag(&st);
        if (world >= 0 && world < e->n_world && e->index_of[world] >= 0 && ours(e, full_tag))
            break;
        int slot = full_tag % TAG_SLOTS;
        if (slot != SLOT_ACK && slot != SLOT_EGRESS)
            break; /* maybe a later group's: take this group's source by source */
        char drop[NOTICE_BYTES];
        Status rst;
        if (M.recv(drop, NOTICE_BYTES, M.byte, world, full_tag, e->comm, &rst)) {
            PyErr_SetString(PyExc_RuntimeError, "MPI_Recv failed");
            return -1;
        }
    }
    for (int i = 0; i < e->n; i++) {
        int world = e->members[i];
        for (;;) {
            int flag = 0;
            M.iprobe(world, M.any_tag, e->comm, &flag, &st);
            if (!flag)
                break;
            int taken = take(e, world, &st);
            if (taken < 0)
                return -1;
            if (!taken)
                break;
        }
    }
    return 0;
}

/* One pass of progress: 1 if something completed, 0 if not, -1 on error. */
static int progress(Engine *e)
{
    if (poll_headers(e))
        return -1;
    e->busy = moving(e);
    double now = wall_now();
    if (e->dirty || now >= e->horizon) {
        e->dirty = 0;
        e->finish = run_model(e, now);
        if (isnan(e->finish))
            return -1;
    }
    return deliver(e, now);
}

/* -- waits -------------------------------------------------------------------------- */

static void sleep_for(double seconds)
{
    struct timespec ts;
    ts.tv_sec = (time_t)seconds;
    ts.tv_nsec = (long)((seconds - (double)ts.tv_sec) * 1e9);
    Py_BEGIN_ALLOW_THREADS
    nanosleep(&ts, NULL);
    Py_END_ALLOW_THREADS
}

/* Sleep until a ring or for `seconds`; 1 if it rang. One ring is taken per wake: another
 * waiting ends the next sleep at once, which costs less than a call to find none left. */
static int bell_wait(int fd, double seconds)
{
    if (seconds > 0) {
        struct pollfd p = {fd, POLLIN, 0};
        struct timespec ts;
        ts.tv_sec = (time_t)seconds;
        ts.tv_nsec = (long)((seconds - (double)ts.tv_sec) * 1e9);
        int ready;
        Py_BEGIN_ALLOW_THREADS
        ready = ppoll(&p, 1, &ts, NULL);
        Py_END_ALLOW_THREADS
        if (ready <= 0)
            return 0;
    }
    char ring[16];
    return recv(fd, ring, sizeof ring, MSG_DONTWAIT) >= 0;
}

static int all_done(PyObject *reqs)
{
    Py_ssize_t n = PyList_GET_SIZE(reqs);
    for (Py_ssize_t i = 0; i < n; i++)
        if (!((Req *)PyList_GET_ITEM(reqs, i))->done)
            return 0;
    return 1;
}

/* The condition of a wait: every request done, or (without requests) wall time `until`
 * reached, or `check()` true. 1, 0, or -1 on error. */
static int condition(PyObject *reqs, double until, PyObject *check)
{
    if (reqs != Py_None)
        return all_done(reqs);
    if (wall_now() >= until)
        return 1;
    if (check != Py_None) {
        PyObject *r = PyObject_CallNoArgs(check);
        if (!r)
            return -1;
        int truth = PyObject_IsTrue(r);
        Py_DECREF(r);
        return truth;
    }
    return 0;
}

/* A ring may come before its message is visible to MPI_Iprobe: until something arrives, or
 * for EARLY_RING_SECONDS after the ring, sleeps are no longer than the time since the ring
 * (from POLL_MIN_SECONDS, at most EARLY_POLL_MAX_SECONDS). Kept across waits: a wait may
 * end on the ring's wake-up. */
static double early_ring_cap(Engine *e)
{
    if (!e->ring_open)
        return INFINITY;
    double since = mono_now() - e->ring_at;
    if (e->arrivals != e->ring_arrivals || since > EARLY_RING_SECONDS) {
        e->ring_open = 0;
        return INFINITY;
    }
    return fmin(fmax(since, POLL_MIN_SECONDS), EARLY_POLL_MAX_SECONDS);
}

/* comm.py's _wait_until: 1 when the condition holds, 0 on timeout, -1 on error. */
static int wait_core(Engine *e, PyObject *reqs, double timeout, double until, double nap_max,
                     PyObject *check)
{
    int bells = e->bell_fd >= 0;
    double start = mono_now();
    double pause = bells ? (nap_max > 0 ? nap_max : e->bell_max) : POLL_MIN_SECONDS;
    double aim = UNSET;
    for (;;) {
        int c;
        if (aim == UNSET && (c = condition(reqs, until, check)) != 0)
            return c;
        int p = progress(e);
        if (p < 0)
            return -1;
        if (p) {
            if (!bells)
                pause = POLL_MIN_SECONDS;
            if (aim != UNSET) {
                double late = fmin(fmax(wall_now() - aim, 0.0), LEAD_MAX_SECONDS);
                lead_seconds += LEAD_WEIGHT * (late - lead_seconds);
            }
        }
        aim = UNSET;
        if ((c = condition(reqs, until, check)) != 0)
            return c;
        if (mono_now() - start > timeout)
            return 0;
        double now = wall_now();
        double due = next_due(e, e->finish) - now;
        double nap = e->busy ? POLL_MOVING_SECONDS : fmin(pause, early_ring_cap(e));
        if (0 < due && due <= nap) {
            nap = due;
            aim = now + due;
        }
        /* never past the model's next event (a rate change moves the deliveries) */
        nap = fmax(0.0, fmin(fmin(fmin(nap, due), until - now), e->horizon - now));
        if (!bells) {
            sleep_for(nap);
            pause = fmin(pause * 2, POLL_MAX_SECONDS);
        } else if (bell_wait(e->bell_fd, nap)) {
            aim = UNSET; /* woken early: no measure of lateness */
            e->ring_open = 1;
            e->ring_at = mono_now();
            e->ring_arrivals = e->arrivals;
        }
    }
}

static int check_requests(PyObject *reqs)
{
    if (reqs == Py_None)
        return 0;
    if (!PyList_Check(reqs)) {
        PyErr_SetString(PyExc_TypeError, "requests must be a list");
        return -1;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(reqs); i++)
        if (!PyObject_TypeCheck(PyList_GET_ITEM(reqs, i), &ReqType)) {
            PyErr_SetString(PyExc_TypeError, "not a shaped request");
            return -1;
        }
    return 0;
}

/* wait(requests or None, timeout, until, nap_max, check=None) -> False on timeout */
static PyObject *Engine_wait(Engine *e, PyObject *args)
{
    PyObject *reqs, *check = Py_None;
    double timeout, until, nap_max;
    if (!PyArg_ParseTuple(args, "Oddd|O", &reqs, &timeout, &until, &nap_max, &check) ||
        check_requests(reqs))
        return NULL;
    int c = wait_core(e, reqs, timeout, until, nap_max, check);
    if (c < 0)
        return NULL;
    return PyBool_FromLong(c);
}

/* -- sends and receives --------------------------------------------------------------- */

static Req *new_req(Engine *e, int peer, int tag, int is_send)
{
    Req *r = PyObject_New(Req, &ReqType);
    if (!r)
        return NULL;
    Py_INCREF(e);
    r->engine = (PyObject *)e;
    r->peer = peer;
    r->tag = tag;
    r->is_send = is_send;
    r->done = 0;
    r->nbytes = 0;
    r->flow = NULL;
    r->has_view = 0;
    r->data = NULL;
    r->seq = 0;
    r->start_at = r->due_at = NAN;
    r->released = r->n_mpi = 0;
    r->header = NULL;
    return r;
}

static int check_peer_tag(Engine *e, int peer, int tag)
{
    if (tag < 0 || tag >= 2 * 4096) {
        PyErr_Format(PyExc_ValueError, "tag %d out of range", tag);
        return -1;
    }
    if (peer < 0 || peer >= e->n) {
        PyErr_Format(PyExc_ValueError, "rank %d out of range for a group of %d", peer, e->n);
        return -1;
    }
    return 0;
}

static PyObject *Engine_isend(Engine *e, PyObject *args)
{
    PyObject *buf;
    int dest, tag;
    if (!PyArg_ParseTuple(args, "Oii", &buf, &dest, &tag) || check_peer_tag(e, dest, tag))
        return NULL;
    Req *r = new_req(e, dest, tag, 1);
    if (!r)
        return NULL;
    if (PyObject_GetBuffer(buf, &r->view, PyBUF_C_CONTIGUOUS)) {
        Py_DECREF(r);
        return NULL;
    }
    r->has_view = 1;
    Py_ssize_t nbytes = r->nbytes = r->view.len;
    if (nbytes > INT_MAX) {
        PyErr_SetString(PyExc_ValueError, "messages are limited to 2 GiB");
        Py_DECREF(r);
        return NULL;
    }
    int world = e->members[dest];
    double now = wall_now(), size = (double)nbytes;
    long long seq = ++e->seq;
    int request;
    if (nbytes <= EAGER_BYTES) {
        /* header and a copy of the payload in one message, done at once, never acknowledged */
        char *packet = malloc(HEADER_BYTES + nbytes);
        if (!packet) {
            Py_DECREF(r);
            return PyErr_NoMemory();
        }
        double egress = e->n_sends > 1 ? e->n_sends : 1;
        memcpy(packet, &now, 8);
        memcpy(packet + 8, &size, 8);
        memcpy(packet + 16, &egress, 8);
        memcpy(packet + 24, &seq, 8);
        memcpy(packet + HEADER_BYTES, r->view.buf, nbytes);
        PyBuffer_Release(&r->view);
        r->has_view = 0;
        if (M.isend(packet, HEADER_BYTES + (int)nbytes, M.byte, world,
                    mpi_tag(e, tag, SLOT_HEADER), e->comm, &request)) {
            free(packet);
            Py_DECREF(r);
            PyErr_SetString(PyExc_RuntimeError, "MPI_Isend failed");
            return NULL;
        }
        if (keep(request, packet)) {
            Py_DECREF(r);
            return NULL;
        }
        r->done = 1;
    } else {
        if (grow((void **)&e->sends, &e->cap_sends, e->n_sends + 1, sizeof(Req *))) {
            Py_DECREF(r);
            return NULL;
        }
        int egress_count = e->n_sends + 1;
        double egress = egress_count;
        r->header = malloc(HEADER_BYTES);
        if (!r->header) {
            Py_DECREF(r);
            return PyErr_NoMemory();
        }
        memcpy(r->header, &now, 8);
        memcpy(r->header + 8, &size, 8);
        memcpy(r->header + 16, &egress, 8);
        memcpy(r->header + 24, &seq, 8);
        if (M.isend(r->header, HEADER_BYTES, M.byte, world, mpi_tag(e, tag, SLOT_HEADER),
                    e->comm, &r->mpi[0]) ||
            M.isend(r->view.buf, (int)nbytes, M.byte, world, mpi_tag(e, tag, SLOT_PAYLOAD),
                    e->comm, &r->mpi[1])) {
            Py_DECREF(r);
            PyErr_SetString(PyExc_RuntimeError, "MPI_Isend failed");
            return NULL;
        }
        r->n_mpi = 2;
        if (announce_egress(e, now, egress_count, dest)) {
            Py_DECREF(r);
            return NULL;
        }
        r->seq = seq;
        r->released = nbytes <= SEND_BUFFER_BYTES; /* else: when the receiver says so */
        Py_INCREF(r);
        e->sends[e->n_sends++] = r;
    }
    ring(e, dest);
    e->bytes_sent += nbytes;
    e->messages_sent++;
    return (PyObject *)r;
}

static PyObject *Engine_irecv(Engine *e, PyObject *args)
{
    PyObject *buf;
    int source, tag;
    if (!PyArg_ParseTuple(args, "Oii", &buf, &source, &tag) || check_peer_tag(e, source, tag))
        return NULL;
    if (grow((void **)&e->posted, &e->cap_posted, e->n_posted + 1, sizeof(Req *)))
        return NULL;
    Req *r = new_req(e, source, tag, 0);
    if (!r)
        return NULL;
    if (buf != Py_None) {
        if (PyObject_GetBuffer(buf, &r->view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE)) {
            Py_DECREF(r);
            return NULL;
        }
        r->has_view = 1;
    }
    /* MPI order: the earliest message from (source, tag) no earlier receive has taken */
    for (int i = 0; i < e->n_flows; i++) {
        Flow *f = e->flows[i];
        if (f->src == source && f->tag == tag && f->bound == NULL) {
            f->bound = r;
            r->flow = f;
            break;
        }
    }
    Py_INCREF(r);
    e->posted[e->n_posted++] = r;
    return (PyObject *)r;
}

static PyObject *Engine_progress(Engine *e, PyObject *noargs)
{
    int p = progress(e);
    if (p < 0)
        return NULL;
    return PyBool_FromLong(p);
}

/* Peers (member indices) of receives and sends not yet done, for the timeout's message. */
static PyObject *Engine_pending(Engine *e, PyObject *noargs)
{
    PyObject *out = PyList_New(0);
    if (!out)
        return NULL;
    for (int pass = 0; pass < 2; pass++) {
        Req **rs = pass ? e->sends : e->posted;
        int n = pass ? e->n_sends : e->n_posted;
        for (int i = 0; i < n; i++) {
            if (rs[i]->done)
                continue;
            PyObject *v = PyLong_FromLong(rs[i]->peer);
            if (!v || PyList_Append(out, v)) {
                Py_XDECREF(v);
                Py_DECREF(out);
                return NULL;
            }
            Py_DECREF(v);
        }
    }
    return out;
}

/* -- the Engine type --------------------------------------------------------------- */

static int double_list(PyObject *seq, double *out, int n)
{
    for (int i = 0; i < n; i++) {
        out[i] = PyFloat_AsDouble(PyList_GET_ITEM(seq, i));
        if (out[i] == -1.0 && PyErr_Occurred())
            return -1;
    }
    return 0;
}

#define ALLOC(p, n) ((p) = calloc((size_t)((n) ? (n) : 1), sizeof(*(p))))

static int Engine_init(Engine *e, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"comm", "members", "rank", "ports_bps", "latency_seconds",
                            "tag_base", "pair", "bell_fd", "bells", "bell_max_seconds",
                            "timeout_seconds", NULL};
    PyObject *members, *ports, *pair, *bells;
    if (!M.bound) {
        PyErr_SetString(PyExc_RuntimeError, "bind() the MPI library first");
        return -1;
    }
    if (e->members) {
        PyErr_SetString(PyExc_RuntimeError, "an engine is initialised once");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "IO!iO!diOiOdd", names, &e->comm,
                                     &PyList_Type, &members, &e->rank, &PyList_Type, &ports,
                                     &e->latency, &e->tag_base, &pair, &e->bell_fd, &bells,
                                     &e->bell_max, &e->timeout))
        return -1;
    int n = e->n = (int)PyList_GET_SIZE(members);
    if (n < 1 || PyList_GET_SIZE(ports) != n || e->rank < 0 || e->rank >= n) {
        PyErr_SetString(PyExc_ValueError, "members, ports and rank disagree");
        return -1;
    }
    if (e->bell_fd >= 0 && (!PyList_Check(bells) || PyList_GET_SIZE(bells) != n)) {
        PyErr_SetString(PyExc_ValueError, "one bell address per member");
        return -1;
    }
    Py_INCREF(pair);
    e->pair_fn = pair;
    if (!ALLOC(e->members, n) || !ALLOC(e->port_bps, n) || !ALLOC(e->egress, n) ||
        !ALLOC(e->pair_lo, n) || !ALLOC(e->pair_hi, n) || !ALLOC(e->pair_bps, n) ||
        !ALLOC(e->tokens, n) || !ALLOC(e->busy_until, n) || !ALLOC(e->has_bucket, n) ||
        !ALLOC(e->scratch_count, n)) {
        PyErr_NoMemory();
        return -1;
    }
    int top = 0;
    for (int i = 0; i < n; i++) {
        long w = PyLong_AsLong(PyList_GET_ITEM(members, i));
        if (w < 0 || w > INT_MAX) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "member ranks must be non-negative");
            return -1;
        }
        e->members[i] = (int)w;
        if (w > top)
            top = (int)w;
        e->pair_lo[i] = e->pair_hi[i] = INFINITY;
    }
    e->n_world = top + 1;
    if (!ALLOC(e->index_of, e->n_world)) {
        PyErr_NoMemory();
        return -1;
    }
    for (int w = 0; w < e->n_world; w++)
        e->index_of[w] = -1;
    for (int i = 0; i < n; i++)
        e->index_of[e->members[i]] = i;
    if (double_list(ports, e->port_bps, n))
        return -1;
    if (e->bell_fd >= 0) {
        if (!ALLOC(e->bells, n) || !ALLOC(e->bell_len, n)) {
            PyErr_NoMemory();
            return -1;
        }
        for (int i = 0; i < n; i++) {
            char *name;
            Py_ssize_t len;
            if (PyBytes_AsStringAndSize(PyList_GET_ITEM(bells, i), &name, &len))
                return -1;
            if (len < 1 || len > (Py_ssize_t)sizeof(e->bells[i].sun_path)) {
                PyErr_SetString(PyExc_ValueError, "bad bell address");
                return -1;
            }
            e->bells[i].sun_family = AF_UNIX;
            memcpy(e->bells[i].sun_path, name, (size_t)len);
            e->bell_len[i] = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
        }
    }
    e->finish = e->horizon = e->next_release = INFINITY;
    return 0;
}

static void Engine_dealloc(Engine *e)
{
    /* payloads still moving keep their memory until MPI is done with it */
    for (int i = 0; i < e->n_flows; i++) {
        Flow *f = e->flows[i];
        if (f->moving && f->mem && keep(f->request, f->mem) == 0)
            f->mem = NULL;
        free_flow(f);
    }
    free(e->flows);
    for (int i = 0; i < e->n_posted; i++) {
        e->posted[i]->flow = NULL;
        Py_DECREF(e->posted[i]);
    }
    free(e->posted);
    for (int i = 0; i < e->n_sends; i++)
        Py_DECREF(e->sends[i]);
    free(e->sends);
    if (e->egress)
        for (int i = 0; i < e->n; i++) {
            free(e->egress[i].t);
            free(e->egress[i].count);
        }
    free(e->egress);
    free(e->members);
    free(e->index_of);
    free(e->port_bps);
    free(e->pair_lo);
    free(e->pair_hi);
    free(e->pair_bps);
    free(e->tokens);
    free(e->busy_until);
    free(e->has_bucket);
    free(e->scratch_count);
    free(e->active);
    free(e->rates);
    free(e->bells);
    free(e->bell_len);
    Py_XDECREF(e->pair_fn);
    Py_XDECREF(e->owner);
    Py_TYPE(e)->tp_free((PyObject *)e);
}

static PyMethodDef Engine_methods[] = {
    {"isend", (PyCFunction)Engine_isend, METH_VARARGS, "isend(buffer, dest, tag) -> Request"},
    {"irecv", (PyCFunction)Engine_irecv, METH_VARARGS,
     "irecv(buffer or None, source, tag) -> Request"},
    {"wait", (PyCFunction)Engine_wait, METH_VARARGS,
     "wait(requests or None, timeout, until, nap_max, check=None) -> False on timeout"},
    {"progress", (PyCFunction)Engine_progress, METH_NOARGS, "one pass of progress"},
    {"pending", (PyCFunction)Engine_pending, METH_NOARGS, "peers of unfinished requests"},
    {NULL}};

static PyMemberDef Engine_members[] = {
    {"bytes_sent", T_LONGLONG, offsetof(Engine, bytes_sent), READONLY, NULL},
    {"messages_sent", T_LONGLONG, offsetof(Engine, messages_sent), READONLY, NULL},
    {"bell_max_seconds", T_DOUBLE, offsetof(Engine, bell_max), 0, NULL},
    {"latency_seconds", T_DOUBLE, offsetof(Engine, latency), 0, NULL},
    {"timeout_seconds", T_DOUBLE, offsetof(Engine, timeout), 0, NULL},
    {"owner", T_OBJECT, offsetof(Engine, owner), 0, NULL},
    {NULL}};

static PyTypeObject EngineType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "emulator.shaping._engine.Engine",
    .tp_basicsize = sizeof(Engine),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The message path of one shaped communicator.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Engine_init,
    .tp_dealloc = (destructor)Engine_dealloc,
    .tp_methods = Engine_methods,
    .tp_members = Engine_members,
};

/* -- the Request type: mpi4py-like ------------------------------------------------------ */

static PyObject *Req_wait_list(Engine *e, PyObject *list);

static PyObject *Req_Test(Req *r, PyObject *noargs)
{
    if (progress((Engine *)r->engine) < 0)
        return NULL;
    return PyBool_FromLong(r->done);
}

static PyObject *Req_Wait(Req *r, PyObject *noargs)
{
    PyObject *list = PyList_New(1);
    if (!list)
        return NULL;
    Py_INCREF(r);
    PyList_SET_ITEM(list, 0, (PyObject *)r);
    PyObject *out = Req_wait_list((Engine *)r->engine, list);
    Py_DECREF(list);
    return out;
}

static PyObject *failure_hook = NULL; /* engine.py's: raises the failure of a wait */

static PyObject *Req_wait_list(Engine *e, PyObject *list)
{
    if (check_requests(list))
        return NULL;
    int c = wait_core(e, list, e->timeout, INFINITY, 0.0, Py_None);
    if (c < 0)
        return NULL;
    if (!c) {
        PyObject *r = PyObject_CallOneArg(failure_hook, (PyObject *)e);
        Py_XDECREF(r);
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TimeoutError, "no message in time");
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *Req_Waitall(PyObject *self_or_cls, PyObject *requests)
{
    PyObject *list = PySequence_List(requests);
    if (!list)
        return NULL;
    if (PyList_GET_SIZE(list) == 0) {
        Py_DECREF(list);
        Py_RETURN_NONE;
    }
    PyObject *first = PyList_GET_ITEM(list, 0);
    if (!PyObject_TypeCheck(first, &ReqType)) {
        Py_DECREF(list);
        PyErr_SetString(PyExc_TypeError, "not a shaped request");
        return NULL;
    }
    PyObject *out = Req_wait_list((Engine *)((Req *)first)->engine, list);
    Py_DECREF(list);
    return out;
}

static PyObject *Req_get_data(Req *r, void *closure)
{
    if (!r->data)
        Py_RETURN_NONE;
    Py_INCREF(r->data);
    return r->data;
}

static PyObject *Req_get_done(Req *r, void *closure) { return PyBool_FromLong(r->done); }

static void Req_dealloc(Req *r)
{
    if (r->has_view)
        PyBuffer_Release(&r->view);
    free(r->header);
    Py_XDECREF(r->data);
    Py_XDECREF(r->engine);
    PyObject_Free(r);
}

static PyMethodDef Req_methods[] = {
    {"Test", (PyCFunction)Req_Test, METH_NOARGS, "progress once; True when done"},
    {"test", (PyCFunction)Req_Test, METH_NOARGS, "progress once; True when done"},
    {"Wait", (PyCFunction)Req_Wait, METH_NOARGS, "wait until done"},
    {"wait", (PyCFunction)Req_Wait, METH_NOARGS, "wait until done"},
    {"Waitall", (PyCFunction)Req_Waitall, METH_O | METH_STATIC, "wait until all are done"},
    {NULL}};

static PyGetSetDef Req_getset[] = {
    {"data", (getter)Req_get_data, NULL, "the bytes of a receive into None", NULL},
    {"done", (getter)Req_get_done, NULL, "finished", NULL},
    {NULL}};

static PyMemberDef Req_members[] = {
    {"nbytes", T_PYSSIZET, offsetof(Req, nbytes), READONLY, NULL},
    {"peer", T_INT, offsetof(Req, peer), READONLY, NULL},
    {"tag", T_INT, offsetof(Req, tag), READONLY, NULL},
    {"start_at", T_DOUBLE, offsetof(Req, start_at), READONLY,
     "a receive's flow start in the model (wall time)"},
    {"due_at", T_DOUBLE, offsetof(Req, due_at), READONLY,
     "when the model delivers a receive: its last byte plus the latency (wall time)"},
    {NULL}};

static PyTypeObject ReqType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "emulator.shaping._engine.Request",
    .tp_basicsize = sizeof(Req),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A pending shaped send or receive.",
    .tp_dealloc = (destructor)Req_dealloc,
    .tp_methods = Req_methods,
    .tp_getset = Req_getset,
    .tp_members = Req_members,
};

/* -- module ------------------------------------------------------------------------- */

static PyObject *bind_mpi(PyObject *mod, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"functions", "byte", "request_null", "any_source", "any_tag",
                            "source_at", "tag_at", "failure_hook", NULL};
    PyObject *fns, *hook;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!IIiiiiO", names, &PyDict_Type, &fns,
                                     &M.byte, &M.request_null, &M.any_source, &M.any_tag,
                                     &M.source_at, &M.tag_at, &hook))
        return NULL;
    if (M.source_at < 0 || M.source_at >= 32 || M.tag_at < 0 || M.tag_at >= 32) {
        PyErr_SetString(PyExc_ValueError, "status offsets out of range");
        return NULL;
    }
    const char *want[] = {"MPI_Isend", "MPI_Irecv", "MPI_Iprobe", "MPI_Recv", "MPI_Test",
                          "MPI_Wait", "MPI_Get_count"};
    void *got[7];
    for (int i = 0; i < 7; i++) {
        PyObject *v = PyDict_GetItemString(fns, want[i]);
        got[i] = v ? PyLong_AsVoidPtr(v) : NULL;
        if (!got[i]) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "no address for %s", want[i]);
            return NULL;
        }
    }
    M.isend = (isend_f)got[0];
    M.irecv = (irecv_f)got[1];
    M.iprobe = (iprobe_f)got[2];
    M.recv = (recv_f)got[3];
    M.test = (test_f)got[4];
    M.wait = (wait_f)got[5];
    M.get_count = (count_f)got[6];
    Py_INCREF(hook);
    Py_XSETREF(failure_hook, hook);
    M.bound = 1;
    Py_RETURN_NONE;
}

static PyObject *in_flight_count(PyObject *mod, PyObject *noargs)
{
    return PyLong_FromSsize_t(n_in_flight);
}

static PyObject *lead_py(PyObject *mod, PyObject *noargs)
{
    return PyFloat_FromDouble(lead_seconds);
}

static PyMethodDef module_methods[] = {
    {"bind", (PyCFunction)(void (*)(void))bind_mpi, METH_VARARGS | METH_KEYWORDS,
     "bind(functions, byte, request_null, any_source, any_tag, source_at, tag_at, failure_hook)"},
    {"in_flight", in_flight_count, METH_NOARGS, "sends in flight nobody waits for"},
    {"lead_seconds", lead_py, METH_NOARGS, "how early timed deliveries aim"},
    {NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_engine",
                                    "The shaped communicator's message path in C.", -1,
                                    module_methods};

PyMODINIT_FUNC PyInit__engine(void)
{
    if (PyType_Ready(&EngineType) < 0 || PyType_Ready(&ReqType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    Py_INCREF(&EngineType);
    Py_INCREF(&ReqType);
    if (PyModule_AddObject(m, "Engine", (PyObject *)&EngineType) ||
        PyModule_AddObject(m, "Request", (PyObject *)&ReqType) ||
        PyModule_AddObject(m, "EARLY_RING_SECONDS", PyFloat_FromDouble(EARLY_RING_SECONDS)) ||
        PyModule_AddObject(m, "EARLY_POLL_MAX_SECONDS",
                           PyFloat_FromDouble(EARLY_POLL_MAX_SECONDS))) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
