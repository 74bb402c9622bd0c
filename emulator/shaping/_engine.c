/* The shaped communicator's message path in C: the wire format and waits of
 * emulator/shaping/comm.py (read its module docstring), one Engine per communicator, over
 * the cluster's one fluid model (emulator/network/_fluid.c, reached through its capsule).
 *
 * A send registers its flow in the model (the sender's node to the receiver's, its size,
 * both parties' doorbells) and sends a header naming the flow's slot, then the payload.
 * The receiver delivers a message once the model has moved its last byte, a latency later,
 * and MPI has moved its payload; a sender of more than the socket buffer is released when
 * what its flow has left fits the buffer. Both read their flows' state under the model's
 * lock; a re-solve that brings a flow's end or release earlier rings its party.
 *
 * MPI is called through function pointers that emulator/shaping/engine.py takes from the
 * MPI library mpi4py loaded, after checking that its ABI is MPICH's (int handles; the
 * status's source and tag offsets are measured, not assumed). So the package builds with
 * gcc and the Python headers alone, and runs on whichever MPICH-ABI library is loaded.
 *
 * The GIL is held except while sleeping or blocked in MPI_Wait: every structure here,
 * including the list of sends in flight shared by the engines of one process, is touched
 * only with it held. The model has its own lock (between processes too).
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

#include "fluid.h"

/* the constants of comm.py (EARLY_*: doorbell.py's; the module exports them for a check) */
#define POLL_MIN_SECONDS 0.00005
#define POLL_MAX_SECONDS 0.0002
#define POLL_MOVING_SECONDS 0.00005
#define EARLY_RING_SECONDS 0.05
#define EARLY_POLL_MAX_SECONDS 0.002
#define LEAD_MAX_SECONDS 0.0001
#define LEAD_WEIGHT 0.1
#define EAGER_BYTES (16 * 1024)
#define SEND_BUFFER_BYTES (512 * 1024)
enum { SLOT_HEADER = 0, SLOT_PAYLOAD = 1, TAG_SLOTS = 2 };
#define HEADER_BYTES 32 /* struct "ddqq": flow start (wall), bytes, model slot, slot generation */
#define UNSET (-1.0)    /* a time not yet known (wall times are positive) */

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

/* Waits whose sleep ran its whole safety-net length (nothing due, no ring) and then found
 * something to complete: wake-ups a ring or a due time should have given and did not. */
static long long net_catches = 0, net_wakes = 0;

/* sends in flight whose request nobody waits for: eager packets */
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

/* An incoming message: its flow in the model and its payload. */
typedef struct Flow {
    int src, tag;
    long long nbytes;
    int32_t slot;
    uint32_t gen;
    double start, end, wake; /* wall: the flow's start; its last byte (projected until done);
                                when to look at it again */
    int done, moving, staged;
    int request;
    char *mem;  /* what this flow owns: the eager packet or a staging buffer */
    char *data; /* the payload: in mem, or straight in the bound receive's buffer */
    struct Req *bound;
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
    int32_t slot;        /* larger sends: the flow in the model */
    uint32_t gen;
    int holds, released, n_mpi; /* larger sends: holds a reference to its flow until released */
    double wake;         /* larger sends not yet released: when to look again */
    int mpi[2];
    char *header;
} Req;

typedef struct { int32_t slot; uint32_t gen; int party; } Drop;

typedef struct {
    PyObject_HEAD
    int comm, n, rank, tag_base;
    int *members;
    int *index_of;   /* world rank -> member index, -1 if not a member */
    int n_world;
    int *node;       /* the model's index of each member's node */
    double timeout, bell_max;
    double *lat; /* per member: the wall latency of a message from it to this rank */
    PyObject *owner;    /* free for the Python side (the communicator's node names) */
    PyObject *model;    /* the fluid model (its Python object, kept alive) */
    void *fluid;
    const FluidAPI *api;
    int bell_fd;
    struct sockaddr_un *bells;
    socklen_t *bell_len;
    Flow **flows;
    int n_flows, cap_flows;
    Req **posted;
    int n_posted, cap_posted;
    Req **sends;
    int n_sends, cap_sends;
    Drop *drops;     /* references to give back at the next look at the model */
    int n_drops, cap_drops;
    int busy;
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

/* A member's bell address as the model keeps it (NULL, 0 without bells). */
static const char *bell_name(Engine *e, int peer, int *len)
{
    if (e->bell_fd < 0) {
        *len = 0;
        return NULL;
    }
    *len = (int)(e->bell_len[peer] - offsetof(struct sockaddr_un, sun_path));
    return e->bells[peer].sun_path;
}

static int defer_drop(Engine *e, int32_t slot, uint32_t gen, int party)
{
    if (grow((void **)&e->drops, &e->cap_drops, e->n_drops + 1, sizeof(Drop)))
        return -1;
    e->drops[e->n_drops++] = (Drop){slot, gen, party};
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

/* how early a delivery from member `src` may aim: never before its last byte */
static double lead(Engine *e, int src) { return fmin(lead_seconds, e->lat[src]); }

/* -- the model ------------------------------------------------------------------------ */

/* Look at the model: advance it to now, give back deferred references, and read the state
 * of every incoming flow not yet done and every send not yet released. */
static void look(Engine *e, double now)
{
    int senders = 0;
    for (int i = 0; i < e->n_sends; i++)
        senders |= e->sends[i]->holds;
    int receivers = 0;
    for (int i = 0; i < e->n_flows; i++)
        receivers |= !e->flows[i]->done;
    if (!senders && !receivers && !e->n_drops)
        return;
    const FluidAPI *api = e->api;
    api->lock(e->fluid);
    api->advance(e->fluid, now);
    for (int i = 0; i < e->n_drops; i++)
        api->drop(e->fluid, e->drops[i].slot, e->drops[i].gen, e->drops[i].party);
    e->n_drops = 0;
    FlView v;
    for (int i = 0; i < e->n_flows; i++) {
        Flow *f = e->flows[i];
        if (f->done || api->view(e->fluid, f->slot, f->gen, FL_RECEIVER, &v))
            continue;
        f->done = v.done;
        f->end = v.end;
        f->wake = v.done ? v.end : fmin(v.end, v.next_change);
    }
    for (int i = 0; i < e->n_sends; i++) {
        Req *r = e->sends[i];
        if (!r->holds || api->view(e->fluid, r->slot, r->gen, FL_SENDER, &v))
            continue;
        if (v.released) {
            r->released = 1;
            r->holds = 0;
            api->drop(e->fluid, r->slot, r->gen, FL_SENDER);
        } else {
            r->wake = fmin(v.release, v.next_change);
        }
    }
    api->unlock(e->fluid);
}

static int check_sends(Engine *e)
{
    int progressed = 0, k = 0;
    for (int i = 0; i < e->n_sends; i++) {
        Req *r = e->sends[i];
        if (!r->done && r->released && !r->n_mpi)
            r->done = progressed = 1;
        if (r->done && !r->holds) {
            Py_DECREF(r);
            continue;
        }
        e->sends[k++] = r;
    }
    e->n_sends = k;
    return progressed;
}

/* Complete posted receives delivered by `now`, and sends released.
 * Returns 1 if anything completed, 0 if not, -1 on error. */
static int deliver(Engine *e, double now)
{
    int progressed = 0, k = 0;
    for (int i = 0; i < e->n_posted; i++) {
        Req *r = e->posted[i];
        Flow *f = r->flow;
        if (f == NULL || !f->done || f->moving ||
            f->end + e->lat[f->src] - lead(e, f->src) > now) {
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
        if (defer_drop(e, f->slot, f->gen, FL_RECEIVER))
            goto failed;
        r->nbytes = (Py_ssize_t)f->nbytes;
        r->start_at = f->start;
        r->due_at = f->end + e->lat[f->src];
        r->done = 1;
        if (r->has_view) {
            PyBuffer_Release(&r->view);
            r->has_view = 0;
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
        for (int j = i; j < e->n_posted; j++)
            e->posted[k++] = e->posted[j];
        e->n_posted = k;
        return -1;
    }
    e->n_posted = k;
    return check_sends(e) || progressed;
}

/* When to look again: the next delivery, a flow's end, a release, a scenario change. */
static double next_due(Engine *e)
{
    double due = INFINITY;
    for (int i = 0; i < e->n_flows; i++) {
        Flow *f = e->flows[i];
        if (!f->done && f->wake != UNSET)
            due = fmin(due, f->wake);
        else if (f->done && f->bound) /* a message no receive has taken waits for one */
            due = fmin(due, f->end + e->lat[f->src] - lead(e, f->src));
    }
    for (int i = 0; i < e->n_sends; i++)
        if (e->sends[i]->holds)
            due = fmin(due, e->sends[i]->wake);
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

/* Receive the probed header from `world` if it is this group's. 1 taken, 0 left for a
 * later group, -1 error. */
static int take(Engine *e, int world, Status *st)
{
    int full_tag = status_tag(st), src = e->index_of[world];
    if (!ours(e, full_tag) || (full_tag - e->tag_base) % TAG_SLOTS != SLOT_HEADER)
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
    Status rst;
    if (M.recv(packet, count, M.byte, world, full_tag, e->comm, &rst)) {
        free(packet);
        free(f);
        PyErr_SetString(PyExc_RuntimeError, "MPI_Recv failed");
        return -1;
    }
    double start, size;
    long long slot, gen;
    memcpy(&start, packet, 8);
    memcpy(&size, packet + 8, 8);
    memcpy(&slot, packet + 16, 8);
    memcpy(&gen, packet + 24, 8);
    long long nbytes = (long long)size;
    f->src = src;
    f->tag = tag;
    f->nbytes = nbytes;
    f->slot = (int32_t)slot;
    f->gen = (uint32_t)gen;
    f->start = start;
    f->end = f->wake = UNSET;
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
    e->arrivals++;
    return 1;
}

/* Register every header that has arrived (comm.py's _poll_headers). Messages are taken
 * source by source: a member that has moved on to a later group may already have sent to
 * this rank, and that message must wait without hiding this group's behind it. */
static int poll_headers(Engine *e)
{
    Status st;
    int flag = 0;
    M.iprobe(M.any_source, M.any_tag, e->comm, &flag, &st);
    if (!flag) /* a probe that finds nothing still drives progress: probe twice */
        M.iprobe(M.any_source, M.any_tag, e->comm, &flag, &st);
    if (!flag)
        return 0;
    for (int i = 0; i < e->n; i++) {
        int world = e->members[i];
        for (;;) {
            flag = 0;
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
    look(e, now);
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
    int netted = 0; /* the last sleep ended by the safety net */
    for (;;) {
        int c;
        if (aim == UNSET && (c = condition(reqs, until, check)) != 0)
            return c;
        int p = progress(e);
        if (p < 0)
            return -1;
        if (netted) {
            net_wakes++;
            net_catches += p;
            netted = 0;
        }
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
        double due = next_due(e) - now;
        double nap = e->busy ? POLL_MOVING_SECONDS : fmin(pause, early_ring_cap(e));
        if (0 < due && due <= nap) {
            nap = due;
            aim = now + due;
        }
        int by_net = bells && !e->busy && nap >= pause && pause < due && pause < until - now;
        nap = fmax(0.0, fmin(fmin(nap, due), until - now));
        if (!bells) {
            sleep_for(nap);
            pause = fmin(pause * 2, POLL_MAX_SECONDS);
        } else if (bell_wait(e->bell_fd, nap)) {
            aim = UNSET; /* woken early: no measure of lateness */
            e->ring_open = 1;
            e->ring_at = mono_now();
            e->ring_arrivals = e->arrivals;
        } else {
            netted = by_net;
        }
        /* a stop (SIGINT, SIGTERM, SIGHUP) ends the wait here, as Python's own sleeps do:
         * the handler raises in the main thread (elsewhere this is a no-op) */
        if (PyErr_CheckSignals() < 0)
            return -1;
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
    r->slot = -1;
    r->gen = 0;
    r->start_at = r->due_at = NAN;
    r->holds = r->released = r->n_mpi = 0;
    r->wake = UNSET;
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
    /* the flow, in the model: the sender holds it until released if it is larger than the
     * send buffer; the receiver until it is delivered */
    int holds = nbytes > SEND_BUFFER_BYTES, snd_len, rcv_len;
    const char *snd = bell_name(e, e->rank, &snd_len), *rcv = bell_name(e, dest, &rcv_len);
    int32_t slot;
    uint32_t gen;
    double start;
    e->api->lock(e->fluid);
    int rc = e->api->add(e->fluid, wall_now(), e->node[e->rank], e->node[dest], 8.0 * nbytes,
                         1 + holds, holds ? snd : NULL, holds ? snd_len : 0, rcv, rcv_len,
                         &slot, &gen, &start);
    e->api->unlock(e->fluid);
    if (rc) {
        PyErr_SetString(PyExc_RuntimeError, rc == -1 ? "the network model's flow table is full"
                                             : rc == -2 ? "a member's node is not in the model"
                                                        : "the network model is closed");
        Py_DECREF(r);
        return NULL;
    }
    double size = (double)nbytes;
    long long slot_q = slot, gen_q = gen;
    char header[HEADER_BYTES];
    memcpy(header, &start, 8);
    memcpy(header + 8, &size, 8);
    memcpy(header + 16, &slot_q, 8);
    memcpy(header + 24, &gen_q, 8);
    int request;
    if (nbytes <= EAGER_BYTES) {
        /* header and a copy of the payload in one message, done at once */
        char *packet = malloc(HEADER_BYTES + nbytes);
        if (!packet) {
            Py_DECREF(r);
            return PyErr_NoMemory();
        }
        memcpy(packet, header, HEADER_BYTES);
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
        r->header = malloc(HEADER_BYTES);
        if (!r->header) {
            Py_DECREF(r);
            return PyErr_NoMemory();
        }
        memcpy(r->header, header, HEADER_BYTES);
        if (M.isend(r->header, HEADER_BYTES, M.byte, world, mpi_tag(e, tag, SLOT_HEADER),
                    e->comm, &r->mpi[0]) ||
            M.isend(r->view.buf, (int)nbytes, M.byte, world, mpi_tag(e, tag, SLOT_PAYLOAD),
                    e->comm, &r->mpi[1])) {
            Py_DECREF(r);
            PyErr_SetString(PyExc_RuntimeError, "MPI_Isend failed");
            return NULL;
        }
        r->n_mpi = 2;
        r->slot = slot;
        r->gen = gen;
        r->holds = holds;
        r->released = !holds; /* else: when the model says what is left fits the buffer */
        r->wake = holds ? start : UNSET;
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

/* The incoming flows and the sends not yet done, for a failure's report:
 * ([(source, tag, bytes, slot, done, end, wake, moving, bound)], [(peer, tag, bytes, slot,
 * holds, released, mpi requests left)]). */
static PyObject *Engine_state(Engine *e, PyObject *noargs)
{
    PyObject *flows = PyList_New(0), *sends = PyList_New(0);
    for (int i = 0; flows && i < e->n_flows; i++) {
        Flow *f = e->flows[i];
        PyObject *x = Py_BuildValue("(iiLiiddii)", f->src, f->tag, f->nbytes, f->slot, f->done,
                                    f->end, f->wake, f->moving, f->bound != NULL);
        if (!x || PyList_Append(flows, x))
            Py_CLEAR(flows);
        Py_XDECREF(x);
    }
    for (int i = 0; sends && i < e->n_sends; i++) {
        Req *r = e->sends[i];
        PyObject *x = Py_BuildValue("(iinii ii)", r->peer, r->tag, r->nbytes, r->slot, r->holds,
                                    r->released, r->n_mpi);
        if (!x || PyList_Append(sends, x))
            Py_CLEAR(sends);
        Py_XDECREF(x);
    }
    if (!flows || !sends) {
        Py_XDECREF(flows);
        Py_XDECREF(sends);
        return NULL;
    }
    return Py_BuildValue("(NN)", flows, sends);
}

/* -- the Engine type --------------------------------------------------------------- */

#define ALLOC(p, n) ((p) = calloc((size_t)((n) ? (n) : 1), sizeof(*(p))))

/* latency_seconds: one wall latency for every member, or a sequence of one per member */
static int read_latencies(Engine *e, PyObject *latency)
{
    if (!ALLOC(e->lat, e->n)) {
        PyErr_NoMemory();
        return -1;
    }
    PyObject *seq = PyNumber_Check(latency) ? NULL
                                            : PySequence_Fast(latency, "latency_seconds: a "
                                                                       "number or a sequence");
    if (!seq && PyErr_Occurred())
        return -1;
    if (seq && PySequence_Fast_GET_SIZE(seq) != e->n) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "one latency per member");
        return -1;
    }
    for (int i = 0; i < e->n; i++) {
        e->lat[i] = PyFloat_AsDouble(seq ? PySequence_Fast_GET_ITEM(seq, i) : latency);
        if (e->lat[i] < 0 && !PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "a latency is negative");
        if (PyErr_Occurred()) {
            Py_XDECREF(seq);
            return -1;
        }
    }
    Py_XDECREF(seq);
    return 0;
}

static int Engine_init(Engine *e, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"comm", "members", "rank", "model", "nodes", "latency_seconds",
                            "tag_base", "bell_fd", "bells", "bell_max_seconds",
                            "timeout_seconds", NULL};
    PyObject *members, *model, *nodes, *bells, *latency;
    if (!M.bound) {
        PyErr_SetString(PyExc_RuntimeError, "bind() the MPI library first");
        return -1;
    }
    if (e->members) {
        PyErr_SetString(PyExc_RuntimeError, "an engine is initialised once");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "IO!iOO!OiiOdd", names, &e->comm,
                                     &PyList_Type, &members, &e->rank, &model, &PyList_Type,
                                     &nodes, &latency, &e->tag_base, &e->bell_fd, &bells,
                                     &e->bell_max, &e->timeout))
        return -1;
    int n = e->n = (int)PyList_GET_SIZE(members);
    if (n < 1 || PyList_GET_SIZE(nodes) != n || e->rank < 0 || e->rank >= n) {
        PyErr_SetString(PyExc_ValueError, "members, nodes and rank disagree");
        return -1;
    }
    if (read_latencies(e, latency))
        return -1;
    if (e->bell_fd >= 0 && (!PyList_Check(bells) || PyList_GET_SIZE(bells) != n)) {
        PyErr_SetString(PyExc_ValueError, "one bell address per member");
        return -1;
    }
    /* the model: its C handle and the API of its module */
    PyObject *capsule = PyObject_CallMethod(model, "capsule", NULL);
    if (!capsule)
        return -1;
    /* the one-host model (emulator/network/_fluid.c) or a host's mirror of the served one
     * (_mirror.c): each capsule carries its type's interface as its context */
    e->fluid = PyCapsule_GetPointer(capsule, PyCapsule_GetName(capsule));
    e->api = e->fluid ? PyCapsule_GetContext(capsule) : NULL;
    Py_DECREF(capsule);
    if (!e->fluid)
        return -1;
    if (!e->api)
        e->api = PyCapsule_Import(FLUID_API_CAPSULE, 0);
    if (!e->api)
        return -1;
    if (e->api->version != FLUID_API_VERSION) {
        PyErr_SetString(PyExc_RuntimeError, "the network model and the message path disagree");
        return -1;
    }
    Py_INCREF(model);
    e->model = model;
    if (!ALLOC(e->members, n) || !ALLOC(e->node, n)) {
        PyErr_NoMemory();
        return -1;
    }
    int top = 0;
    for (int i = 0; i < n; i++) {
        long w = PyLong_AsLong(PyList_GET_ITEM(members, i));
        long v = PyLong_AsLong(PyList_GET_ITEM(nodes, i));
        if (w < 0 || w > INT_MAX || v < 0 || v > INT_MAX) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "member ranks and nodes must be non-negative");
            return -1;
        }
        e->members[i] = (int)w;
        e->node[i] = (int)v;
        if (w > top)
            top = (int)w;
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
    return 0;
}

static void Engine_dealloc(Engine *e)
{
    /* payloads still moving keep their memory until MPI is done with it; the model gets
     * back every reference this engine held */
    for (int i = 0; i < e->n_flows; i++) {
        Flow *f = e->flows[i];
        if (f->moving && f->mem && keep(f->request, f->mem) == 0)
            f->mem = NULL;
        defer_drop(e, f->slot, f->gen, FL_RECEIVER);
        free_flow(f);
    }
    free(e->flows);
    for (int i = 0; i < e->n_sends; i++)
        if (e->sends[i]->holds) {
            e->sends[i]->holds = 0;
            defer_drop(e, e->sends[i]->slot, e->sends[i]->gen, FL_SENDER);
        }
    if (e->n_drops && e->api) {
        e->api->lock(e->fluid);
        for (int i = 0; i < e->n_drops; i++)
            e->api->drop(e->fluid, e->drops[i].slot, e->drops[i].gen, e->drops[i].party);
        e->api->unlock(e->fluid);
    }
    free(e->drops);
    free(e->lat);
    for (int i = 0; i < e->n_posted; i++) {
        e->posted[i]->flow = NULL;
        Py_DECREF(e->posted[i]);
    }
    free(e->posted);
    for (int i = 0; i < e->n_sends; i++)
        Py_DECREF(e->sends[i]);
    free(e->sends);
    free(e->members);
    free(e->node);
    free(e->index_of);
    free(e->bells);
    free(e->bell_len);
    Py_XDECREF(e->model);
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
    {"state", (PyCFunction)Engine_state, METH_NOARGS, "incoming flows and sends not yet done"},
    {NULL}};

static PyMemberDef Engine_members[] = {
    {"bytes_sent", T_LONGLONG, offsetof(Engine, bytes_sent), READONLY, NULL},
    {"messages_sent", T_LONGLONG, offsetof(Engine, messages_sent), READONLY, NULL},
    {"bell_max_seconds", T_DOUBLE, offsetof(Engine, bell_max), 0, NULL},
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

static PyObject *net_py(PyObject *mod, PyObject *noargs)
{
    return Py_BuildValue("(LL)", net_wakes, net_catches);
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
    {"safety_net", net_py, METH_NOARGS,
     "(waits the safety net ended, of those the ones that then found work: missed wake-ups)"},
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
