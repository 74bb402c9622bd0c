/* Real MPI programs on the emulated cluster: an interposition library (MPI's profiling
 * interface, PMPI), LD_PRELOADed into an unmodified program by `nodesel mpiexec`.
 *
 * Every point-to-point message is a flow of the cluster's one model, read and written in a
 * mirror of it (emulator/network/mirror.h) in a shared-memory file that the launcher's relay
 * (emulator/interpose/relay.py) serves: a send takes a slot there (the flow's start), the
 * relay solves the model and writes the flow's end, and rings the receiver's doorbell. The
 * payload moves through MPI at once, in one message of a 32-byte header naming the flow and
 * the user's data (a struct datatype over both: no copy); the receive completes, and only
 * then, a path latency after the model moved its last byte. A send larger than the socket
 * buffer completes when what is left of its flow fits it, as the skeletons' sends do.
 *
 * Matching is MPI's own (the header travels in the user's message, on the user's
 * communicator and tag), so wildcards and the order of messages are as without the
 * library. A probe pulls the message it finds into the library and reports it once it is
 * delivered; a later receive takes it there first. Collectives are paced point-to-point
 * messages of the algorithms emulator/shaping/collectives.py states, on a shadow
 * communicator. MPI_Wtime reads emulated seconds. What moves data and is not paced is
 * refused, or forwarded with a warning, by name.
 *
 * Without the launcher's environment (NODESEL_PMPI_MIRROR unset) the library is inert. The
 * program's MPI calls come from one thread at a time: MPI_THREAD_MULTIPLE is not offered.
 * MPI's functions are only ever called, never taken by address, so that a program without
 * MPI (a shell script that starts the real one) loads the library too: calls bind lazily,
 * an address would have to resolve at load.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "mpich.h"
#include "mirror.h"

#define BUFFER_BYTES (512 * 1024)   /* the socket buffer a send completes into (comm.py's) */
/* MPI moves a large message in pieces, each needing a poll on both sides: a rank polls MPI
 * every POLL_MIN_SECONDS after a sign of traffic (its doorbell rang, it started a send, it
 * posted a receive, a request of its completed) for FAST_SECONDS, plus the time its pending
 * messages take at MOVE_BYTES_PER_SECOND (MPICH's pipeline at such polls, with a margin),
 * then backs off, doubling up to POLL_MAX_SECONDS. A send rings its receiver, a receive
 * from a named rank its sender. */
#define POLL_MIN_SECONDS 0.00005
#define POLL_MAX_SECONDS 0.001
#define FAST_SECONDS 0.005
#define MOVE_BYTES_PER_SECOND 2e8
/* A message up to this size moves with its send (MPICH's eager protocol): its receiver
 * needs no wake-up before the model's end does it. A larger one wakes the other side. */
#define EAGER_BYTES 65536
#define NET_SECONDS 0.01            /* a wait with nothing due sleeps at most this long */
/* A timed nap ends late by what the machine's timers take to wake a process (tens of us
 * on a virtual machine), and the work after it takes more: a message's delivery aims that
 * much before its due, a moving average of how late deliveries after timed naps were and
 * at most its path's latency, as the skeletons' message path does
 * (emulator/shaping/_engine.c). */
#define LEAD_MAX_SECONDS 0.0001
#define LEAD_WEIGHT 0.1
#define MAX_COMMS 1024
#define TABLE 4096 /* buckets of the requests' table */
#define THREAD_SERIALIZED 2

/* the header in front of every message's data */
typedef struct {
    int32_t slot;
    uint32_t gen;
    int32_t src;  /* the sender's rank in MPI_COMM_WORLD */
    int32_t pad;
    double start; /* the flow's start, wall time */
    int64_t bytes; /* the user's data */
} Wire;
_Static_assert(sizeof(Wire) == 32, "a 32-byte header");

enum { SEND = 1, RECV = 2 };
enum { STANDARD = 0, SYNCHRONOUS = 1, BUFFERED = 2 };

/* A request of the program's that the library completes. */
typedef struct Rec {
    MPI_Request handle; /* the program's: the real one underneath, or a placeholder */
    int kind, mode;
    int persistent, active; /* a persistent request: its arguments below, started by Start */
    MPI_Request real;       /* a send's MPI operation, or a receive's taking its data
                               straight (MPI_REQUEST_NULL: none, or done) */
    int real_done;
    MPI_Status st; /* a matched receive's: its source and tag in the communicator, error */
    Wire wire;
    int own_handle; /* `handle` is a placeholder of the library's (see placeholder()) */
    int holds;      /* a send holding its flow until released */
    int known;      /* a send's release is known */
    double due;     /* a send's release (wall) */
    int matched;    /* a receive has its message, delivered */
    char *copy;     /* a buffered send's copy of the data (owned) */
    const void *buf;
    int count, peer, tag;
    MPI_Datatype dt;
    MPI_Comm comm;
    struct Rec *next, *posted_next;
} Rec;

/* A message MPI brought, until a receive takes it: in the order MPI brought them; once
 * delivered (`seq`, its place in delivery order), a receive or a probe may match it. */
typedef struct Held {
    MPI_Comm comm;
    int source, tag, world; /* its sender: rank in the communicator, in MPI_COMM_WORLD */
    MPI_Request req;        /* the receive bringing its bytes (MPI_REQUEST_NULL once in) */
    char *data;             /* the header and the data, packed */
    int size;
    Wire wire;
    int known; /* the model has ended its flow: `due` is its delivery */
    double due;
    long long seq;
    struct Held *next;
} Held;

typedef struct {
    MPI_Comm comm, shadow;
    int size, *world; /* each rank's rank in MPI_COMM_WORLD */
} CommInfo;

static struct {
    int on, rank, size;
    int *node;        /* each world rank's node in the model */
    double *latency;  /* per ordered pair of world ranks, wall seconds */
    double epoch, dilation, timeout;
    MirrorCore m;
    char *mem;
    size_t mem_bytes;
    int bell_fd;
    char job[7], relay[7]; /* ids of this program's job and of the relay */
    Rec *table[TABLE];
    Rec *orphans; /* buffered sends whose program request is gone */
    Held *held, *held_tail;
    Rec *posted, *posted_tail; /* receives not yet matched, in the order they were posted */
    long long seq;             /* messages delivered so far */
    double *floor;             /* per sender, during a pass: its earlier messages' delivery */
    CommInfo comms[MAX_COMMS];
    int n_comms;
    double fast_until; /* poll MPI often until then (POLL_MIN_SECONDS) */
    long long events;  /* things that moved (a message in, a request done): a wait looks
                          again at once after a look that moved something */
    double init_wall;  /* when MPI_Init returned */
    int launcher;      /* the pid of nodesel mpiexec, whose relay solves the model */
    double next_check; /* when to look whether it still lives */
    long long messages, bytes, collectives;
    long long net_wakes, net_catches; /* naps the safety net ended; of those, ones that
                                         found work: wake-ups a ring should have given */
    char warned[4096];
} S;

/* -- small things ------------------------------------------------------------------------ */

/* End the job with one line naming the problem. The line goes to the launcher's file
 * (NODESEL_PMPI_STATS), which says it once the job is over: on stderr, MPI_Abort could
 * take the rank's output down with it before its proxy passes it on. */
static void die(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *path = getenv("NODESEL_PMPI_STATS");
    FILE *f = path && *path ? fopen(path, "a") : NULL;
    if (f) {
        fprintf(f, "{\"rank\": %d, \"error\": \"", S.rank);
        for (const char *c = msg; *c; c++)
            fprintf(f, *c == '"' || *c == '\\' ? "\\%c" : "%c", *c >= ' ' ? *c : ' ');
        fputs("\"}\n", f);
        fclose(f);
    } else {
        fprintf(stderr, "nodesel: rank %d: %s\n", S.rank, msg);
        fflush(stderr);
    }
    PMPI_Abort(MPI_COMM_WORLD, 2);
    _exit(2);
}

/* Once per name: what the program called is forwarded to MPI unpaced. */
static void warn_unpaced(const char *name)
{
    if (!S.on || strstr(S.warned, name))
        return;
    if (strlen(S.warned) + strlen(name) + 2 < sizeof S.warned) {
        strcat(S.warned, name);
        strcat(S.warned, " ");
    }
    if (S.rank == 0)
        fprintf(stderr, "nodesel: %s is not paced by the emulated network (forwarded to MPI "
                        "as it is)\n", name);
}

static void refuse(const char *name)
{
    die("%s is not supported under the emulated network (its messages would not be paced)",
        name);
}

/* A wait that has lasted too long, or whose launcher is gone (killed: the model would never
 * answer), ends the job. Returns the time now. */
static double check_waiting(double begin, const char *what)
{
    double now = shm_wall_now();
    if (now - begin > S.timeout)
        die("%s waited %.0f s for a message (a peer is stuck or gone)", what, now - begin);
    if (now >= S.next_check && S.launcher > 0) {
        S.next_check = now + 1.0;
        if (kill(S.launcher, 0) && errno == ESRCH)
            die("nodesel mpiexec (pid %d), which serves the network's model, is gone",
                S.launcher);
    }
    return now;
}

static double env_double(const char *name, double fallback)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return fallback;
    char *end;
    double x = strtod(v, &end);
    if (*end)
        die("%s=%s is not a number", name, v);
    return x;
}

static void *map_file(const char *path, size_t bytes, int writable)
{
    int fd = open(path, writable ? O_RDWR : O_RDONLY);
    if (fd < 0)
        die("cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) || (size_t)st.st_size < bytes)
        die("%s holds %lld bytes, %zu expected", path, (long long)st.st_size, bytes);
    void *p = mmap(NULL, bytes, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd,
                   0);
    close(fd);
    if (p == MAP_FAILED)
        die("cannot map %s: %s", path, strerror(errno));
    return p;
}

/* -- doorbells --------------------------------------------------------------------------- */

#define RELAY (-1)

/* A rank's doorbell: an abstract Unix datagram address, "\0P" + its job's id + its rank
 * (16 bytes); the relay's is "\0P" + the relay's id + RELAY. */
static void bell_of(int rank, char out[FL_BELL_BYTES])
{
    char s[FL_BELL_BYTES + 1];
    snprintf(s, sizeof s, "%cP%.6s%08x", 0, rank == RELAY ? S.relay : S.job, (unsigned)rank);
    memcpy(out, s, FL_BELL_BYTES);
}

static int self_rung; /* this rank rang its own doorbell: its next nap ends at once */

static void ring(int rank)
{
    if (rank == S.rank) { /* no datagram to itself (messages to self are many) */
        self_rung = 1;
        return;
    }
    char name[FL_BELL_BYTES];
    bell_of(rank, name);
    shm_ring_all(S.bell_fd, &name, (const uint8_t[]){FL_BELL_BYTES}, 1);
}

static double lead_seconds; /* how early deliveries aim (how late they came, on average) */

/* Sleep until `seconds` pass or the bell rings; 1 if it rang. */
static int nap(double seconds)
{
    if (self_rung) {
        self_rung = 0;
        return 1;
    }
    if (seconds < 0)
        seconds = 0;
    struct timespec ts = {(time_t)seconds, (long)((seconds - floor(seconds)) * 1e9)};
    struct pollfd p = {S.bell_fd, POLLIN, 0};
    int rc = ppoll(&p, 1, &ts, NULL);
    if (rc <= 0)
        return 0;
    char drain[64];
    while (recv(S.bell_fd, drain, sizeof drain, MSG_DONTWAIT) > 0) {
    }
    return 1;
}

/* A timed nap aimed at `aimed_at` was not rung, and what it waited for then moved: how late
 * that was, work after the wake-up included, moves the average the next deliveries aim
 * early by. */
static void learn_lateness(double aimed_at)
{
    double late = fmin(fmax(shm_wall_now() - aimed_at, 0.0), LEAD_MAX_SECONDS);
    lead_seconds += LEAD_WEIGHT * (late - lead_seconds);
}

/* -- communicators ----------------------------------------------------------------------- */

static CommInfo *comm_info(MPI_Comm comm)
{
    for (int i = 0; i < S.n_comms; i++)
        if (S.comms[i].comm == comm)
            return &S.comms[i];
    int inter = 0;
    PMPI_Comm_test_inter(comm, &inter);
    if (inter)
        die("intercommunicators are not supported under the emulated network");
    if (S.n_comms == MAX_COMMS)
        die("more than %d communicators in use", MAX_COMMS);
    CommInfo *c = &S.comms[S.n_comms++];
    memset(c, 0, sizeof *c);
    c->comm = comm;
    c->shadow = MPI_COMM_NULL;
    PMPI_Comm_size(comm, &c->size);
    c->world = malloc(sizeof(int) * (size_t)c->size);
    int *ranks = malloc(sizeof(int) * (size_t)c->size);
    if (!c->world || !ranks)
        die("out of memory");
    for (int i = 0; i < c->size; i++)
        ranks[i] = i;
    MPI_Group mine, world;
    PMPI_Comm_group(comm, &mine);
    PMPI_Comm_group(MPI_COMM_WORLD, &world);
    PMPI_Group_translate_ranks(mine, c->size, ranks, world, c->world);
    PMPI_Group_free(&mine);
    PMPI_Group_free(&world);
    free(ranks);
    return c;
}

static int world_of(MPI_Comm comm, int rank)
{
    if (comm == MPI_COMM_WORLD)
        return rank;
    if (comm == MPI_COMM_SELF)
        return S.rank;
    CommInfo *c = comm_info(comm);
    if (rank < 0 || rank >= c->size)
        die("rank %d is not in a communicator of %d", rank, c->size);
    return c->world[rank];
}

/* Forget a communicator the program frees, and free its shadow (MPI reuses handles). */
static void forget_comm(MPI_Comm comm)
{
    for (int i = 0; i < S.n_comms; i++) {
        if (S.comms[i].comm != comm)
            continue;
        MPI_Comm shadow = S.comms[i].shadow;
        free(S.comms[i].world);
        S.comms[i] = S.comms[--S.n_comms];
        if (shadow != MPI_COMM_NULL) {
            forget_comm(shadow);
            PMPI_Comm_free(&shadow);
        }
        return;
    }
}

/* The communicator collectives on `comm` use (made by its first collective, which every
 * rank of it calls). */
static MPI_Comm shadow_of(MPI_Comm comm)
{
    CommInfo *c = comm_info(comm);
    if (c->shadow == MPI_COMM_NULL)
        PMPI_Comm_dup(comm, &c->shadow);
    return c->shadow;
}

/* -- the requests' table ----------------------------------------------------------------- */

static Rec **bucket(MPI_Request h)
{
    return &S.table[(uint32_t)h * 2654435761u % TABLE];
}

static Rec *lookup(MPI_Request h)
{
    if (!S.on || h == MPI_REQUEST_NULL)
        return NULL;
    for (Rec *r = *bucket(h); r; r = r->next)
        if (r->handle == h)
            return r;
    return NULL;
}

static void enter(Rec *r)
{
    Rec **b = bucket(r->handle);
    r->next = *b;
    *b = r;
}

static void leave(Rec *r)
{
    for (Rec **p = bucket(r->handle); *p; p = &(*p)->next)
        if (*p == r) {
            *p = r->next;
            return;
        }
}

static MPI_Request spare_handles[64]; /* placeholders let go, kept for the next requests */
static int n_spare_handles;

/* A handle of MPI's own for a request the library completes by itself (an inactive
 * persistent receive from MPI_PROC_NULL: unique while it lives, never started). */
static MPI_Request placeholder(void)
{
    if (n_spare_handles > 0)
        return spare_handles[--n_spare_handles];
    MPI_Request h;
    PMPI_Recv_init(NULL, 0, MPI_BYTE, MPI_PROC_NULL, 0, MPI_COMM_SELF, &h);
    return h;
}

static void let_go_of(MPI_Request *h)
{
    if (n_spare_handles < (int)(sizeof spare_handles / sizeof *spare_handles))
        spare_handles[n_spare_handles++] = *h;
    else
        PMPI_Request_free(h);
}

/* -- messages ---------------------------------------------------------------------------- */

/* A struct datatype over the header and the user's data, at the header's address: the
 * data `buf - w` bytes on. Those of a predefined datatype are kept, a few, and reused (a
 * program sends from the same buffers over and over); `*owned`: the caller frees it. */
#define FRAMES 8
static struct {
    MPI_Aint at;
    int count;
    MPI_Datatype dt, type;
} frames[FRAMES];
static int n_frames, next_frame;

static MPI_Datatype framed(const Wire *w, const void *buf, int count, MPI_Datatype dt,
                           int *owned)
{
    MPI_Aint at = (MPI_Aint)((const char *)buf - (const char *)w);
    for (int i = 0; i < n_frames; i++)
        if (frames[i].at == at && frames[i].count == count && frames[i].dt == dt) {
            *owned = 0;
            return frames[i].type;
        }
    int lens[2] = {(int)sizeof(Wire), count}, ni, na, nd, combiner;
    MPI_Aint disp[2] = {0, at};
    MPI_Datatype types[2] = {MPI_BYTE, dt}, out;
    PMPI_Type_create_struct(2, lens, disp, types, &out);
    PMPI_Type_commit(&out);
    /* a program's own datatype may be freed and its handle given to another: not kept */
    PMPI_Type_get_envelope(dt, &ni, &na, &nd, &combiner);
    *owned = combiner != MPI_COMBINER_NAMED;
    if (!*owned) { /* (a type freed while a send uses it stays until the send is done) */
        int k;
        if (n_frames < FRAMES) {
            k = n_frames++;
        } else {
            k = next_frame++ % FRAMES;
            PMPI_Type_free(&frames[k].type);
        }
        frames[k].at = at;
        frames[k].count = count;
        frames[k].dt = dt;
        frames[k].type = out;
    }
    return out;
}

static int64_t data_bytes(int count, MPI_Datatype dt)
{
    int size = 0;
    PMPI_Type_size(dt, &size);
    return (int64_t)count * size;
}

/* Start a send: its flow in the model, its message in MPI. */
/* A buffered send's copy let go: freed if MPI has moved it, else handed to the orphans
 * until it has. */
static void orphan_copy(Rec *r)
{
    if (r->real == MPI_REQUEST_NULL) {
        free(r->copy);
    } else {
        Rec *o = calloc(1, sizeof *o);
        if (!o)
            die("out of memory");
        o->copy = r->copy;
        o->real = r->real;
        o->next = S.orphans;
        S.orphans = o;
        r->real = MPI_REQUEST_NULL;
    }
    r->copy = NULL;
}

static void start_send(Rec *r)
{
    int dest = world_of(r->comm, r->peer);
    int64_t bytes = data_bytes(r->count, r->dt);
    /* within a node a message crosses no link: no flow, no wait for the relay */
    int local = S.node[S.rank] == S.node[dest];
    r->holds = !local && r->mode != BUFFERED && bytes > BUFFER_BYTES;
    int32_t slot = -1;
    uint32_t gen = 0;
    double start = shm_wall_now();
    if (!local) {
        char mine[FL_BELL_BYTES], theirs[FL_BELL_BYTES];
        bell_of(S.rank, mine);
        bell_of(dest, theirs);
        mi_lock(&S.m);
        int rc = api_add(&S.m, start, S.node[S.rank], S.node[dest], 8.0 * (double)bytes,
                         1 + r->holds, r->holds ? mine : NULL, r->holds ? FL_BELL_BYTES : 0,
                         theirs, FL_BELL_BYTES, &slot, &gen, &start);
        mi_unlock(&S.m);
        if (rc)
            die(rc == -1 ? "the emulated network's flow table is full"
                         : "a rank's node is not in the emulated network");
    }
    r->wire = (Wire){slot, gen, S.rank, 0, start, bytes};
    r->known = !r->holds;
    r->due = start;
    r->real_done = 0;
    r->active = 1;
    int err;
    if (r->mode == BUFFERED) { /* a copy the program's buffer does not outlive */
        if (r->copy) /* a persistent send started again: the last start's copy goes */
            orphan_copy(r);
        int packed = 0, at = (int)sizeof(Wire);
        PMPI_Pack_size(r->count, r->dt, r->comm, &packed);
        r->copy = malloc(sizeof(Wire) + (size_t)packed);
        if (!r->copy)
            die("out of memory");
        memcpy(r->copy, &r->wire, sizeof(Wire));
        PMPI_Pack(r->buf, r->count, r->dt, r->copy, (int)sizeof(Wire) + packed, &at, r->comm);
        err = PMPI_Isend(r->copy, at, MPI_BYTE, r->peer, r->tag, r->comm, &r->real);
    } else {
        int owned;
        MPI_Datatype t = framed(&r->wire, r->buf, r->count, r->dt, &owned);
        if (r->mode == SYNCHRONOUS) /* called, not taken by address: see the note above */
            err = PMPI_Issend(&r->wire, 1, t, r->peer, r->tag, r->comm, &r->real);
        else
            err = PMPI_Isend(&r->wire, 1, t, r->peer, r->tag, r->comm, &r->real);
        if (owned)
            PMPI_Type_free(&t);
    }
    if (err != MPI_SUCCESS)
        die("a send to rank %d failed in MPI (error %d)", dest, err);
    S.messages++;
    S.bytes += bytes;
    int wake = local || bytes > EAGER_BYTES; /* no flow; or MPI needs both to move it */
    if (!local) {
        ring(RELAY); /* a new start in the mirror's outbox, its message now in MPI */
        FlView v;
        mi_lock(&S.m);
        wake |= api_view(&S.m, slot, gen, FL_NOBODY, &v) || v.done; /* reported before */
        mi_unlock(&S.m);
    }
    if (wake)
        ring(dest);
    S.fast_until = shm_wall_now() + FAST_SECONDS + (double)bytes / MOVE_BYTES_PER_SECOND;
}

static double latency(int from, int to)
{
    return S.latency[(size_t)from * (size_t)S.size + (size_t)to];
}

/* When the flow a header names is delivered, if the model says yet. */
static int delivery(const Wire *w, double *due)
{
    double lat = latency(w->src, S.rank), early = fmin(lead_seconds, lat);
    if (w->slot < 0) { /* within a node: no flow */
        *due = w->start + lat - early;
        return 1;
    }
    FlView v;
    mi_lock(&S.m);
    int rc = api_view(&S.m, w->slot, w->gen, FL_RECEIVER, &v);
    mi_unlock(&S.m);
    if (rc) { /* gone: cannot be while its receiver holds it */
        *due = w->start;
        return 1;
    }
    if (!v.done)
        return 0;
    *due = v.end + lat - early;
    return 1;
}

static int matches(MPI_Comm comm, int source, int tag, const Held *h)
{
    return h->comm == comm && (source == MPI_ANY_SOURCE || source == h->source) &&
           (tag == MPI_ANY_TAG || tag == h->tag);
}

/* Take `r` (after `prev`) off the list of posted receives. */
static void unpost(Rec *r, Rec *prev)
{
    if (prev)
        prev->posted_next = r->posted_next;
    else
        S.posted = r->posted_next;
    if (S.posted_tail == r)
        S.posted_tail = prev;
}

/* A message from this rank's own node, on a path of no latency, is delivered as it comes
 * in (its due, its send, is past): the posted receive that takes it, taken off the list,
 * if nothing of its sender's waits before it and it fits (else NULL: the usual path, which
 * says when a message is too long). MPI then moves its data straight into the receive's
 * buffer, with no copy of the library's. */
static Rec *direct_receive(MPI_Comm comm, const MPI_Status *st, int world, int size)
{
    if (S.node[world] != S.node[S.rank] || latency(world, S.rank) > 0)
        return NULL;
    for (Held *h = S.held; h; h = h->next)
        if (h->world == world && !h->seq)
            return NULL; /* an earlier message of its sender is not delivered yet */
    Held envelope = {.comm = comm, .source = st->MPI_SOURCE, .tag = st->MPI_TAG};
    Rec *prev = NULL;
    for (Rec *r = S.posted; r; prev = r, r = r->posted_next) {
        if (!matches(r->comm, r->peer, r->tag, &envelope))
            continue;
        if ((int64_t)size - (int64_t)sizeof(Wire) > data_bytes(r->count, r->dt))
            return NULL;
        unpost(r, prev);
        return r;
    }
    return NULL;
}

/* Take every message MPI has brought on `comm` into the library. */
static void pull(MPI_Comm comm)
{
    for (;;) {
        int flag = 0, size = 0;
        MPI_Message msg;
        MPI_Status st;
        PMPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &flag, &msg, &st);
        if (!flag)
            return;
        PMPI_Get_count(&st, MPI_BYTE, &size);
        if (size < (int)sizeof(Wire))
            die("a message of %d bytes from rank %d has no header: is every rank run by "
                "nodesel mpiexec?", size, st.MPI_SOURCE);
        Rec *r = direct_receive(comm, &st, world_of(comm, st.MPI_SOURCE), size);
        if (r) {
            int owned;
            MPI_Datatype t = framed(&r->wire, r->buf, r->count, r->dt, &owned);
            PMPI_Imrecv(&r->wire, 1, t, &msg, &r->real);
            if (owned)
                PMPI_Type_free(&t);
            memset(&r->st, 0, sizeof r->st);
            r->st.MPI_SOURCE = st.MPI_SOURCE;
            r->st.MPI_TAG = st.MPI_TAG;
            r->matched = 1;
            S.seq++;
            S.events++;
            continue;
        }
        Held *h = calloc(1, sizeof *h);
        if (!h || !(h->data = malloc((size_t)size)))
            die("out of memory");
        h->comm = comm;
        h->source = st.MPI_SOURCE;
        h->tag = st.MPI_TAG;
        h->world = world_of(comm, st.MPI_SOURCE);
        h->size = size;
        PMPI_Imrecv(h->data, size, MPI_BYTE, &msg, &h->req);
        S.events++;
        if (S.held_tail)
            S.held_tail->next = h;
        else
            S.held = h;
        S.held_tail = h;
    }
}

/* A delivered message into a receive: its data unpacked into the receive's buffer. */
static void take_message(Rec *r, Held *h)
{
    r->wire = h->wire;
    memset(&r->st, 0, sizeof r->st);
    r->st.MPI_SOURCE = h->source;
    r->st.MPI_TAG = h->tag;
    if (h->wire.bytes > data_bytes(r->count, r->dt)) {
        r->st.MPI_ERROR = MPI_ERR_TRUNCATE;
    } else {
        int at = (int)sizeof(Wire);
        PMPI_Unpack(h->data, h->size, &at, (void *)r->buf, r->count, r->dt, r->comm);
    }
    r->matched = 1;
    free(h->data);
    free(h);
}

static void unlink_held(Held *h, Held *prev)
{
    if (prev)
        prev->next = h->next;
    else
        S.held = h->next;
    if (S.held_tail == h)
        S.held_tail = prev;
}

/* The first posted receive that `h` matches, taken off the list (NULL: none). */
static Rec *posted_for(const Held *h)
{
    Rec *prev = NULL;
    for (Rec *r = S.posted; r; prev = r, r = r->posted_next) {
        if (!matches(r->comm, r->peer, r->tag, h))
            continue;
        unpost(r, prev);
        return r;
    }
    return NULL;
}

/* Bring in what MPI has, and deliver every message whose time has come, in order per
 * sender (its earlier messages first, as a connection's bytes come in order): to the first
 * posted receive it matches, else to be matched later. `*next`: the next delivery due;
 * `*moving`: grows by 1 and the bytes of each message MPI is still bringing. */
static void advance_messages(double now, double *next, double *moving)
{
    pull(MPI_COMM_WORLD);
    pull(MPI_COMM_SELF);
    for (int i = 0; i < S.n_comms; i++)
        pull(S.comms[i].comm);
    for (Held *h = S.held; h; h = h->next)
        S.floor[h->world] = -INFINITY;
    Held *prev = NULL;
    for (Held *h = S.held, *following; h; h = following) {
        following = h->next;
        if (h->seq) {
            prev = h;
            continue;
        }
        double *floor = &S.floor[h->world];
        if (h->req != MPI_REQUEST_NULL) {
            int flag = 0;
            PMPI_Test(&h->req, &flag, MPI_STATUS_IGNORE);
            if (!flag) {
                *moving += 1.0 + h->size;
                *floor = INFINITY;
                prev = h;
                continue;
            }
            memcpy(&h->wire, h->data, sizeof(Wire));
            S.events++;
        }
        if (!h->known)
            h->known = delivery(&h->wire, &h->due);
        double at = h->known ? fmax(h->due, *floor) : INFINITY;
        if (at > now) {
            *next = fmin(*next, at);
            *floor = at;
            prev = h;
            continue;
        }
        if (h->wire.slot >= 0) {
            mi_lock(&S.m);
            api_drop(&S.m, h->wire.slot, h->wire.gen, FL_RECEIVER);
            mi_unlock(&S.m);
        }
        h->seq = ++S.seq;
        S.events++;
        Rec *r = posted_for(h);
        if (r) {
            unlink_held(h, prev);
            take_message(r, h);
        } else {
            prev = h;
        }
    }
}

/* The delivered message a receive or probe of (comm, source, tag) matches first: the
 * earliest delivered (NULL: none). */
static Held *delivered(MPI_Comm comm, int source, int tag, Held **before)
{
    Held *best = NULL, *prev = NULL;
    for (Held *h = S.held; h; prev = h, h = h->next)
        if (h->seq && matches(comm, source, tag, h) && (!best || h->seq < best->seq)) {
            best = h;
            *before = prev;
        }
    return best;
}

/* Post a receive: a delivered message it matches, else the end of the posted list. */
static void start_recv(Rec *r)
{
    r->active = 1;
    r->matched = 0;
    if (r->comm != MPI_COMM_WORLD && r->comm != MPI_COMM_SELF)
        comm_info(r->comm); /* its messages are brought in from now on */
    double next = INFINITY, moving = 0.0;
    advance_messages(shm_wall_now(), &next, &moving);
    Held *prev = NULL, *h = delivered(r->comm, r->peer, r->tag, &prev);
    if (h) {
        unlink_held(h, prev);
        take_message(r, h);
        return;
    }
    r->posted_next = NULL;
    if (S.posted_tail)
        S.posted_tail->posted_next = r;
    else
        S.posted = r;
    S.posted_tail = r;
    if (r->peer != MPI_ANY_SOURCE && data_bytes(r->count, r->dt) > EAGER_BYTES)
        ring(world_of(r->comm, r->peer)); /* a sender moving a large message polls again */
    S.fast_until = shm_wall_now() + FAST_SECONDS;
}

/* Move a request on; 1 once it may complete at `now` (a receive: once matched, which
 * advance_messages does, and its data in). `*mpi_pending` grows by 1 and the bytes of a
 * send or a receive MPI is still moving. */
static int ready(Rec *r, double now, double *next, double *mpi_pending)
{
    if (!r->active)
        return 1;
    if (r->kind == RECV) {
        if (!r->matched)
            return 0;
        if (r->real != MPI_REQUEST_NULL) { /* MPI still moves it into the buffer */
            int flag = 0;
            PMPI_Test(&r->real, &flag, MPI_STATUS_IGNORE);
            if (!flag) {
                *mpi_pending += 1.0 + (double)data_bytes(r->count, r->dt);
                return 0;
            }
            S.events++;
        }
        return 1;
    }
    if (!r->real_done) {
        int flag = 0;
        PMPI_Test(&r->real, &flag, MPI_STATUS_IGNORE);
        if (!flag) {
            *mpi_pending += 1.0 + (double)r->wire.bytes;
            return 0;
        }
        r->real_done = 1;
        S.events++;
    }
    if (!r->known) {
        FlView v;
        mi_lock(&S.m);
        int rc = api_view(&S.m, r->wire.slot, r->wire.gen, FL_SENDER, &v);
        mi_unlock(&S.m);
        r->known = rc || v.released;
        r->due = rc ? now : v.release;
    }
    if (!r->known)
        return 0;
    if (r->due > now) {
        *next = fmin(*next, r->due);
        return 0;
    }
    return 1;
}

/* A ready request's status as the program sees it (the data's bytes, not the header's). */
static void fill_status(const Rec *r, MPI_Status *status, int *err)
{
    if (r->kind == RECV && r->st.MPI_ERROR != MPI_SUCCESS)
        *err = r->st.MPI_ERROR;
    if (status == MPI_STATUS_IGNORE)
        return;
    if (r->kind == SEND) {
        memset(status, 0, sizeof *status);
        return;
    }
    *status = r->st;
    status->MPI_ERROR = *err;
    PMPI_Status_set_elements(status, MPI_BYTE, *err ? 0 : (int)r->wire.bytes);
}

/* Complete a ready request: a send gives its flow back, a receive's status is filled. */
static int finish(Rec *r, MPI_Status *status)
{
    int err = MPI_SUCCESS;
    if (r->active && r->kind == SEND && r->holds) {
        mi_lock(&S.m);
        api_drop(&S.m, r->wire.slot, r->wire.gen, FL_SENDER);
        mi_unlock(&S.m);
    }
    fill_status(r, status, &err);
    r->active = 0;
    return err;
}

static void release(Rec *r)
{
    leave(r);
    if (r->copy && r->real != MPI_REQUEST_NULL) {
        r->next = S.orphans; /* a buffered send MPI still moves */
        S.orphans = r;
        return;
    }
    if (r->own_handle)
        let_go_of(&r->handle);
    free(r->copy);
    free(r);
}

static void sweep_orphans(void)
{
    for (Rec **p = &S.orphans; *p;) {
        Rec *r = *p;
        int flag = 0;
        PMPI_Test(&r->real, &flag, MPI_STATUS_IGNORE);
        if (flag) {
            *p = r->next;
            free(r->copy);
            free(r);
        } else {
            p = &r->next;
        }
    }
}

static Rec *new_rec(int kind, int mode, const void *buf, int count, MPI_Datatype dt, int peer,
                    int tag, MPI_Comm comm)
{
    Rec *r = calloc(1, sizeof *r);
    if (!r)
        die("out of memory");
    *r = (Rec){.kind = kind, .mode = mode, .buf = buf, .count = count, .dt = dt, .peer = peer,
               .tag = tag, .comm = comm, .real = MPI_REQUEST_NULL};
    return r;
}

/* -- waiting ----------------------------------------------------------------------------- */

enum { ALL = 0, ANY = 1, SOME = 2 };

/* One look at `reqs`: complete what is ready (at most one for ANY), put their positions in
 * `indices`; how many completed. `*live`: the requests neither null nor inactive. */
static int sweep(int n, MPI_Request reqs[], MPI_Status *statuses, int mode, int *indices,
                 int *live, double *next, double *mpi_pending, int *error)
{
    double now = shm_wall_now();
    int done = 0;
    *live = 0;
    advance_messages(now, next, mpi_pending);
    for (int i = 0; i < n; i++) {
        if (reqs[i] == MPI_REQUEST_NULL)
            continue;
        MPI_Status *st = statuses == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE
                         : mode == ANY                   ? statuses
                         : mode == SOME                  ? &statuses[done]
                                                         : &statuses[i];
        Rec *r = lookup(reqs[i]);
        if (r && !r->active)
            continue; /* an inactive persistent request */
        ++*live;
        int flag = 0;
        if (r) {
            flag = ready(r, now, next, mpi_pending);
            if (flag) {
                int err = finish(r, st);
                if (err)
                    *error = err;
                if (!r->persistent) {
                    release(r);
                    reqs[i] = MPI_REQUEST_NULL;
                }
            }
        } else {
            PMPI_Test(&reqs[i], &flag, st);
            *mpi_pending += !flag;
        }
        if (flag) {
            S.fast_until = now + FAST_SECONDS;
            indices[done++] = i;
            if (mode == ANY)
                return 1;
        }
    }
    return done;
}

/* Complete requests of `reqs` as `mode` asks, sleeping between looks while `blocking`.
 * `*count`: how many completed (their positions in `indices`), MPI_UNDEFINED when none
 * could (every request null or inactive). Returns an MPI error code. */
static int wait_for(int n, MPI_Request reqs[], MPI_Status *statuses, int mode, int *indices,
                    int blocking, const char *what, int *count)
{
    double begin = shm_wall_now(), poll = POLL_MIN_SECONDS, aimed_at = NAN;
    int error = MPI_SUCCESS, netted = 0;
    *count = 0;
    for (;;) {
        double next = INFINITY, mpi_pending = 0.0;
        long long events = S.events;
        int live;
        int got = sweep(n, reqs, statuses, mode, indices + *count, &live, &next, &mpi_pending,
                        &error);
        if (!isnan(aimed_at) && (got > 0 || S.events != events))
            learn_lateness(aimed_at);
        aimed_at = NAN;
        *count += got;
        S.net_catches += netted && (got > 0 || S.events != events);
        netted = 0;
        if (live == 0) {
            if (mode != ALL && *count == 0)
                *count = MPI_UNDEFINED;
            return error;
        }
        if ((mode == ALL ? got == live : *count > 0) || !blocking)
            return error;
        sweep_orphans();
        double now = check_waiting(begin, what);
        if (S.events != events)
            continue; /* something moved: it may have let more move */
        if (now < S.fast_until)
            poll = POLL_MIN_SECONDS;
        double sleep = fmin(next - now, mpi_pending > 0 ? poll : NET_SECONDS);
        int rung = nap(sleep);
        if (!rung && sleep == next - now)
            aimed_at = now + fmax(sleep, 0.0);
        if (rung) {
            poll = POLL_MIN_SECONDS;
            S.fast_until = shm_wall_now() + FAST_SECONDS + mpi_pending / MOVE_BYTES_PER_SECOND;
        } else if (sleep == NET_SECONDS) {
            S.net_wakes++;
            netted = 1;
        } else if (mpi_pending > 0) {
            poll = fmin(2 * poll, POLL_MAX_SECONDS);
        }
    }
}


/* -- set-up and the clock ---------------------------------------------------------------- */

/* The launcher's environment: the mirror's file and shape, each world rank's node, the
 * latencies, the clock, the job's doorbell prefix. */
static void attach(void)
{
    const char *mirror = getenv("NODESEL_PMPI_MIRROR");
    if (!mirror || !*mirror)
        return;
    PMPI_Comm_rank(MPI_COMM_WORLD, &S.rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &S.size);
    char version[8192];
    int len = 0;
    PMPI_Get_library_version(version, &len);
    if (!strstr(version, "MPICH"))
        die("the program's MPI is not MPICH: build it with the mpich wheel's mpicc");
    int n_nodes = (int)env_double("NODESEL_PMPI_MODEL_NODES", 0);
    int slots = (int)env_double("NODESEL_PMPI_SLOTS", 0);
    const char *nodes = getenv("NODESEL_PMPI_NODES"), *lat = getenv("NODESEL_PMPI_LATENCIES");
    const char *job = getenv("NODESEL_PMPI_JOB"), *relay = getenv("NODESEL_PMPI_RELAY");
    if (n_nodes < 1 || slots < 1 || !nodes || !lat || !job || strlen(job) != 6 || !relay ||
        strlen(relay) != 6)
        die("the launcher's NODESEL_PMPI_* environment is incomplete");
    S.node = malloc(sizeof(int) * (size_t)S.size);
    S.floor = malloc(sizeof(double) * (size_t)S.size);
    if (!S.node || !S.floor)
        die("out of memory");
    const char *p = nodes;
    for (int i = 0; i < S.size; i++) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v >= n_nodes || (*end != ',' && *end != 0))
            die("NODESEL_PMPI_NODES does not give a node to each of the %d ranks", S.size);
        S.node[i] = (int)v;
        p = *end ? end + 1 : end;
    }
    if (*p)
        die("NODESEL_PMPI_NODES names more nodes than the %d ranks", S.size);
    size_t o[5];
    S.mem_bytes = layout(n_nodes, slots, &o[0], &o[1], &o[2], &o[3], &o[4]);
    S.mem = map_file(mirror, S.mem_bytes, 1);
    if (mirror_map(&S.m, S.mem, 0, 1, NULL, n_nodes, slots, 0.0, 0))
        die("%s holds no mirror of %d nodes and %d slots", mirror, n_nodes, slots);
    S.latency = map_file(lat, sizeof(double) * (size_t)S.size * (size_t)S.size, 0);
    S.epoch = env_double("NODESEL_PMPI_EPOCH", shm_wall_now());
    S.dilation = env_double("NODESEL_PMPI_DILATION", 1.0);
    S.timeout = env_double("NODESEL_PMPI_TIMEOUT_SECONDS", 3600.0);
    S.launcher = (int)env_double("NODESEL_PMPI_LAUNCHER", 0);
    memcpy(S.job, job, 6);
    memcpy(S.relay, relay, 6);
    S.bell_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    S.m.rings.fd = S.bell_fd;
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    bell_of(S.rank, a.sun_path);
    if (S.bell_fd < 0 || bind(S.bell_fd, (struct sockaddr *)&a,
                              (socklen_t)(offsetof(struct sockaddr_un, sun_path) +
                                          FL_BELL_BYTES)))
        die("cannot bind this rank's doorbell: %s", strerror(errno));
    prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL); /* naps that end on time */
    S.init_wall = shm_wall_now();
    S.on = 1;
}

int MPI_Init(int *argc, char ***argv)
{
    int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS)
        attach();
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    int wanted = getenv("NODESEL_PMPI_MIRROR") && required > THREAD_SERIALIZED
                     ? THREAD_SERIALIZED
                     : required;
    int rc = PMPI_Init_thread(argc, argv, wanted, provided);
    if (rc == MPI_SUCCESS)
        attach();
    return rc;
}

/* Counters for the launcher, one line per rank in NODESEL_PMPI_STATS (appended): its
 * MPI_Init and MPI_Finalize on the emulated clock, what it sent paced, what not. */
static void report(void)
{
    const char *path = getenv("NODESEL_PMPI_STATS");
    if (!path || !*path)
        return;
    FILE *f = fopen(path, "a");
    if (!f)
        return;
    fprintf(f, "{\"rank\": %d, \"node\": %d, \"init_seconds\": %.9f, "
               "\"finalize_seconds\": %.9f, \"messages\": %lld, \"bytes\": %lld, "
               "\"collectives\": %lld, \"net_wakes\": %lld, \"net_catches\": %lld, "
               "\"unpaced\": \"%s\"}\n",
            S.rank, S.node[S.rank], (S.init_wall - S.epoch) / S.dilation,
            (shm_wall_now() - S.epoch) / S.dilation, S.messages, S.bytes, S.collectives,
            S.net_wakes, S.net_catches, S.warned);
    fclose(f);
}

int MPI_Finalize(void)
{
    if (S.on) {
        double begin = shm_wall_now();
        while (S.orphans && shm_wall_now() - begin < S.timeout) {
            sweep_orphans();
            nap(POLL_MAX_SECONDS);
        }
        report();
        S.on = 0;
        close(S.bell_fd);
        while (n_spare_handles > 0)
            PMPI_Request_free(&spare_handles[--n_spare_handles]);
        while (n_frames > 0)
            PMPI_Type_free(&frames[--n_frames].type);
    }
    return PMPI_Finalize();
}

double MPI_Wtime(void)
{
    if (!S.on)
        return PMPI_Wtime();
    return (shm_wall_now() - S.epoch) / S.dilation;
}

int MPI_Comm_free(MPI_Comm *comm)
{
    if (S.on)
        forget_comm(*comm);
    return PMPI_Comm_free(comm);
}

/* -- point to point ---------------------------------------------------------------------- */

static int isend_mode(const void *buf, int count, MPI_Datatype dt, int dest, int tag,
                      MPI_Comm comm, MPI_Request *request, int mode)
{
    if ((!S.on || dest == MPI_PROC_NULL) && mode == SYNCHRONOUS)
        return PMPI_Issend(buf, count, dt, dest, tag, comm, request);
    if (!S.on || dest == MPI_PROC_NULL)
        return PMPI_Isend(buf, count, dt, dest, tag, comm, request);
    Rec *r = new_rec(SEND, mode, buf, count, dt, dest, tag, comm);
    start_send(r);
    r->handle = r->real;
    enter(r);
    *request = r->handle;
    return MPI_SUCCESS;
}

static int send_mode(const void *buf, int count, MPI_Datatype dt, int dest, int tag,
                     MPI_Comm comm, int mode, const char *what)
{
    MPI_Request h;
    int rc = isend_mode(buf, count, dt, dest, tag, comm, &h, mode);
    if (rc != MPI_SUCCESS)
        return rc;
    int index, n;
    return wait_for(1, &h, MPI_STATUS_IGNORE, ANY, &index, 1, what, &n);
}

int MPI_Isend(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm,
              MPI_Request *request)
{
    return isend_mode(buf, count, dt, dest, tag, comm, request, STANDARD);
}

int MPI_Irsend(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm,
               MPI_Request *request)
{
    return isend_mode(buf, count, dt, dest, tag, comm, request, STANDARD);
}

int MPI_Issend(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm,
               MPI_Request *request)
{
    return isend_mode(buf, count, dt, dest, tag, comm, request, SYNCHRONOUS);
}

int MPI_Ibsend(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm,
               MPI_Request *request)
{
    return isend_mode(buf, count, dt, dest, tag, comm, request, BUFFERED);
}

int MPI_Send(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm)
{
    return send_mode(buf, count, dt, dest, tag, comm, STANDARD, "MPI_Send");
}

int MPI_Rsend(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm)
{
    return send_mode(buf, count, dt, dest, tag, comm, STANDARD, "MPI_Rsend");
}

int MPI_Ssend(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm)
{
    return send_mode(buf, count, dt, dest, tag, comm, SYNCHRONOUS, "MPI_Ssend");
}

int MPI_Bsend(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm)
{
    return send_mode(buf, count, dt, dest, tag, comm, BUFFERED, "MPI_Bsend");
}

int MPI_Irecv(void *buf, int count, MPI_Datatype dt, int source, int tag, MPI_Comm comm,
              MPI_Request *request)
{
    if (!S.on || source == MPI_PROC_NULL)
        return PMPI_Irecv(buf, count, dt, source, tag, comm, request);
    Rec *r = new_rec(RECV, STANDARD, buf, count, dt, source, tag, comm);
    start_recv(r);
    r->own_handle = 1;
    r->handle = placeholder();
    enter(r);
    *request = r->handle;
    return MPI_SUCCESS;
}

int MPI_Recv(void *buf, int count, MPI_Datatype dt, int source, int tag, MPI_Comm comm,
             MPI_Status *status)
{
    MPI_Request h;
    int rc = MPI_Irecv(buf, count, dt, source, tag, comm, &h);
    if (rc != MPI_SUCCESS)
        return rc;
    int index, n;
    return wait_for(1, &h, status, ANY, &index, 1, "MPI_Recv", &n);
}

int MPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest,
                 int sendtag, void *recvbuf, int recvcount, MPI_Datatype recvtype, int source,
                 int recvtag, MPI_Comm comm, MPI_Status *status)
{
    if (!S.on)
        return PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount,
                             recvtype, source, recvtag, comm, status);
    MPI_Request h[2];
    MPI_Status st[2];
    int rc = MPI_Irecv(recvbuf, recvcount, recvtype, source, recvtag, comm, &h[0]);
    if (rc == MPI_SUCCESS)
        rc = MPI_Isend(sendbuf, sendcount, sendtype, dest, sendtag, comm, &h[1]);
    if (rc != MPI_SUCCESS)
        return rc;
    int index[2], n;
    rc = wait_for(2, h, st, ALL, index, 1, "MPI_Sendrecv", &n);
    if (status != MPI_STATUS_IGNORE)
        *status = st[0];
    return rc;
}

int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype dt, int dest, int sendtag,
                         int source, int recvtag, MPI_Comm comm, MPI_Status *status)
{
    if (!S.on)
        return PMPI_Sendrecv_replace(buf, count, dt, dest, sendtag, source, recvtag, comm,
                                     status);
    int packed = 0, at = 0;
    PMPI_Pack_size(count, dt, comm, &packed);
    char *copy = malloc((size_t)packed + 1);
    if (!copy)
        die("out of memory");
    PMPI_Pack(buf, count, dt, copy, packed, &at, comm);
    int rc = MPI_Sendrecv(copy, at, MPI_PACKED, dest, sendtag, buf, count, dt, source,
                          recvtag, comm, status);
    free(copy);
    return rc;
}

/* -- probes ------------------------------------------------------------------------------ */

/* A delivered message a receive of (comm, source, tag) would take, without taking it. */
static int probe_once(int source, int tag, MPI_Comm comm, MPI_Status *status, double *next,
                      double *moving)
{
    if (comm != MPI_COMM_WORLD && comm != MPI_COMM_SELF)
        comm_info(comm);
    advance_messages(shm_wall_now(), next, moving);
    Held *prev, *h = delivered(comm, source, tag, &prev);
    if (h && status != MPI_STATUS_IGNORE) {
        memset(status, 0, sizeof *status);
        status->MPI_SOURCE = h->source;
        status->MPI_TAG = h->tag;
        PMPI_Status_set_elements(status, MPI_BYTE, (int)h->wire.bytes);
    }
    return h != NULL;
}

int MPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status)
{
    if (!S.on || source == MPI_PROC_NULL)
        return PMPI_Iprobe(source, tag, comm, flag, status);
    double next = INFINITY, moving = 0.0;
    *flag = probe_once(source, tag, comm, status, &next, &moving);
    return MPI_SUCCESS;
}

int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status)
{
    if (!S.on || source == MPI_PROC_NULL)
        return PMPI_Probe(source, tag, comm, status);
    double begin = shm_wall_now(), aimed_at = NAN;
    for (;;) {
        double next = INFINITY, moving = 0.0;
        if (probe_once(source, tag, comm, status, &next, &moving)) {
            if (!isnan(aimed_at))
                learn_lateness(aimed_at);
            return MPI_SUCCESS;
        }
        double now = check_waiting(begin, "MPI_Probe");
        double sleep = fmin(next - now, moving > 0 ? POLL_MIN_SECONDS : NET_SECONDS);
        aimed_at = !nap(sleep) && sleep == next - now ? now + fmax(sleep, 0.0) : NAN;
    }
}

/* -- completion -------------------------------------------------------------------------- */

static void empty_status(MPI_Status *status)
{
    if (status == MPI_STATUS_IGNORE)
        return;
    memset(status, 0, sizeof *status);
    status->MPI_SOURCE = MPI_ANY_SOURCE;
    status->MPI_TAG = MPI_ANY_TAG;
}

int MPI_Wait(MPI_Request *request, MPI_Status *status)
{
    if (!S.on)
        return PMPI_Wait(request, status);
    int index, n;
    int rc = wait_for(1, request, status, ANY, &index, 1, "MPI_Wait", &n);
    if (n == MPI_UNDEFINED)
        empty_status(status);
    return rc;
}

int MPI_Waitall(int count, MPI_Request reqs[], MPI_Status statuses[])
{
    if (!S.on)
        return PMPI_Waitall(count, reqs, statuses);
    int *index = malloc(sizeof(int) * (size_t)(count > 0 ? count : 1)), n;
    if (!index)
        die("out of memory");
    int rc = wait_for(count, reqs, statuses, ALL, index, 1, "MPI_Waitall", &n);
    free(index);
    return rc;
}

int MPI_Waitany(int count, MPI_Request reqs[], int *indx, MPI_Status *status)
{
    if (!S.on)
        return PMPI_Waitany(count, reqs, indx, status);
    int n, rc = wait_for(count, reqs, status, ANY, indx, 1, "MPI_Waitany", &n);
    if (n == MPI_UNDEFINED) {
        *indx = MPI_UNDEFINED;
        empty_status(status);
    }
    return rc;
}

int MPI_Waitsome(int incount, MPI_Request reqs[], int *outcount, int indices[],
                 MPI_Status statuses[])
{
    if (!S.on)
        return PMPI_Waitsome(incount, reqs, outcount, indices, statuses);
    return wait_for(incount, reqs, statuses, SOME, indices, 1, "MPI_Waitsome", outcount);
}

int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status)
{
    if (!S.on)
        return PMPI_Test(request, flag, status);
    int index, n;
    int rc = wait_for(1, request, status, ANY, &index, 0, "MPI_Test", &n);
    *flag = n != 0;
    if (n == MPI_UNDEFINED)
        empty_status(status);
    return rc;
}

int MPI_Testany(int count, MPI_Request reqs[], int *indx, int *flag, MPI_Status *status)
{
    if (!S.on)
        return PMPI_Testany(count, reqs, indx, flag, status);
    int n, rc = wait_for(count, reqs, status, ANY, indx, 0, "MPI_Testany", &n);
    *flag = n != 0;
    if (n == MPI_UNDEFINED) {
        *indx = MPI_UNDEFINED;
        empty_status(status);
    }
    return rc;
}

int MPI_Testsome(int incount, MPI_Request reqs[], int *outcount, int indices[],
                 MPI_Status statuses[])
{
    if (!S.on)
        return PMPI_Testsome(incount, reqs, outcount, indices, statuses);
    return wait_for(incount, reqs, statuses, SOME, indices, 0, "MPI_Testsome", outcount);
}

/* All or none: completes them only once every one is ready. */
int MPI_Testall(int count, MPI_Request reqs[], int *flag, MPI_Status statuses[])
{
    if (!S.on)
        return PMPI_Testall(count, reqs, flag, statuses);
    double now = shm_wall_now(), next = INFINITY, pending = 0.0;
    *flag = 1;
    for (int i = 0; i < count && *flag; i++) {
        Rec *r = lookup(reqs[i]);
        if (r)
            *flag = ready(r, now, &next, &pending);
        else if (reqs[i] != MPI_REQUEST_NULL)
            PMPI_Request_get_status(reqs[i], flag, MPI_STATUS_IGNORE);
    }
    if (!*flag)
        return MPI_SUCCESS;
    int *index = malloc(sizeof(int) * (size_t)(count > 0 ? count : 1)), n;
    if (!index)
        die("out of memory");
    int rc = wait_for(count, reqs, statuses, ALL, index, 1, "MPI_Testall", &n);
    free(index);
    return rc;
}

int MPI_Request_get_status(MPI_Request request, int *flag, MPI_Status *status)
{
    Rec *r = lookup(request);
    if (!r)
        return PMPI_Request_get_status(request, flag, status);
    double next = INFINITY, pending = 0.0;
    int err = MPI_SUCCESS;
    *flag = ready(r, shm_wall_now(), &next, &pending);
    if (*flag)
        fill_status(r, status, &err);
    return err;
}

int MPI_Request_free(MPI_Request *request)
{
    Rec *r = lookup(*request);
    if (!r)
        return PMPI_Request_free(request);
    if (r->active) { /* complete it first (a send's flow must end in the model) */
        MPI_Request h = *request;
        r->persistent = 0;
        MPI_Wait(&h, MPI_STATUS_IGNORE);
    } else {
        release(r);
    }
    *request = MPI_REQUEST_NULL;
    return MPI_SUCCESS;
}

int MPI_Cancel(MPI_Request *request)
{
    if (lookup(*request))
        refuse("MPI_Cancel of a paced message");
    return PMPI_Cancel(request);
}

/* -- persistent requests ----------------------------------------------------------------- */

static int make_persistent(int kind, int mode, const void *buf, int count, MPI_Datatype dt,
                           int peer, int tag, MPI_Comm comm, MPI_Request *request)
{
    Rec *r = new_rec(kind, mode, buf, count, dt, peer, tag, comm);
    r->persistent = r->own_handle = 1;
    r->handle = placeholder();
    enter(r);
    *request = r->handle;
    return MPI_SUCCESS;
}

int MPI_Send_init(const void *buf, int count, MPI_Datatype dt, int dest, int tag,
                  MPI_Comm comm, MPI_Request *request)
{
    if (!S.on || dest == MPI_PROC_NULL)
        return PMPI_Send_init(buf, count, dt, dest, tag, comm, request);
    return make_persistent(SEND, STANDARD, buf, count, dt, dest, tag, comm, request);
}

int MPI_Rsend_init(const void *buf, int count, MPI_Datatype dt, int dest, int tag,
                   MPI_Comm comm, MPI_Request *request)
{
    if (!S.on || dest == MPI_PROC_NULL)
        return PMPI_Rsend_init(buf, count, dt, dest, tag, comm, request);
    return make_persistent(SEND, STANDARD, buf, count, dt, dest, tag, comm, request);
}

int MPI_Ssend_init(const void *buf, int count, MPI_Datatype dt, int dest, int tag,
                   MPI_Comm comm, MPI_Request *request)
{
    if (!S.on || dest == MPI_PROC_NULL)
        return PMPI_Ssend_init(buf, count, dt, dest, tag, comm, request);
    return make_persistent(SEND, SYNCHRONOUS, buf, count, dt, dest, tag, comm, request);
}

int MPI_Bsend_init(const void *buf, int count, MPI_Datatype dt, int dest, int tag,
                   MPI_Comm comm, MPI_Request *request)
{
    if (!S.on || dest == MPI_PROC_NULL)
        return PMPI_Bsend_init(buf, count, dt, dest, tag, comm, request);
    return make_persistent(SEND, BUFFERED, buf, count, dt, dest, tag, comm, request);
}

int MPI_Recv_init(void *buf, int count, MPI_Datatype dt, int source, int tag, MPI_Comm comm,
                  MPI_Request *request)
{
    if (!S.on || source == MPI_PROC_NULL)
        return PMPI_Recv_init(buf, count, dt, source, tag, comm, request);
    return make_persistent(RECV, STANDARD, buf, count, dt, source, tag, comm, request);
}

int MPI_Start(MPI_Request *request)
{
    Rec *r = lookup(*request);
    if (!r)
        return PMPI_Start(request);
    if (r->active)
        die("MPI_Start of a persistent request still active");
    if (r->kind == SEND)
        start_send(r);
    else
        start_recv(r);
    return MPI_SUCCESS;
}

int MPI_Startall(int count, MPI_Request reqs[])
{
    for (int i = 0; i < count; i++) {
        int rc = MPI_Start(&reqs[i]);
        if (rc != MPI_SUCCESS)
            return rc;
    }
    return MPI_SUCCESS;
}

/* -- collectives: paced point-to-point messages on a shadow communicator ------------------ */

#define COLL_TAG 0

static MPI_Aint extent_of(MPI_Datatype dt)
{
    MPI_Aint lb, extent;
    PMPI_Type_get_extent(dt, &lb, &extent);
    return extent;
}

static char *at(const void *buf, MPI_Aint index, int count, MPI_Datatype dt)
{
    return (char *)buf + index * (MPI_Aint)count * extent_of(dt);
}

/* A buffer for `count` of `dt` (freed with free_buffer). */
static char *new_buffer(int count, MPI_Datatype dt, void **base)
{
    MPI_Aint lb, true_extent;
    PMPI_Type_get_true_extent(dt, &lb, &true_extent);
    size_t bytes = (size_t)(true_extent + (MPI_Aint)(count > 0 ? count - 1 : 0) * extent_of(dt));
    *base = malloc(bytes + 1);
    if (!*base)
        die("out of memory");
    return (char *)*base - lb;
}

/* A copy on this rank, unpaced (MPI itself, on MPI_COMM_SELF). */
static void local_copy(const void *from, int from_count, MPI_Datatype from_dt, void *to,
                       int to_count, MPI_Datatype to_dt)
{
    PMPI_Sendrecv(from, from_count, from_dt, 0, 0, to, to_count, to_dt, 0, 0, MPI_COMM_SELF,
                  MPI_STATUS_IGNORE);
}

static void csend(const void *buf, int count, MPI_Datatype dt, int dest, MPI_Comm shadow,
                  const char *what)
{
    MPI_Request h;
    isend_mode(buf, count, dt, dest, COLL_TAG, shadow, &h, STANDARD);
    int index, n;
    wait_for(1, &h, MPI_STATUS_IGNORE, ANY, &index, 1, what, &n);
}

static void crecv(void *buf, int count, MPI_Datatype dt, int source, MPI_Comm shadow,
                  const char *what)
{
    MPI_Request h;
    MPI_Irecv(buf, count, dt, source, COLL_TAG, shadow, &h);
    int index, n;
    wait_for(1, &h, MPI_STATUS_IGNORE, ANY, &index, 1, what, &n);
}

static void exchange(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest,
                     void *recvbuf, int recvcount, MPI_Datatype recvtype, int source,
                     MPI_Comm shadow, const char *what)
{
    MPI_Request h[2];
    MPI_Irecv(recvbuf, recvcount, recvtype, source, COLL_TAG, shadow, &h[0]);
    isend_mode(sendbuf, sendcount, sendtype, dest, COLL_TAG, shadow, &h[1], STANDARD);
    int index[2], n;
    wait_for(2, h, MPI_STATUSES_IGNORE, ALL, index, 1, what, &n);
}

static int rank_size(MPI_Comm comm, int *size)
{
    int rank;
    PMPI_Comm_rank(comm, &rank);
    PMPI_Comm_size(comm, size);
    S.collectives++;
    return rank;
}

/* dissemination: ceil(log2 p) rounds of empty messages */
int MPI_Barrier(MPI_Comm comm)
{
    if (!S.on)
        return PMPI_Barrier(comm);
    int p, r = rank_size(comm, &p);
    MPI_Comm sh = shadow_of(comm);
    for (int dist = 1; dist < p; dist *= 2)
        exchange(NULL, 0, MPI_BYTE, (r + dist) % p, NULL, 0, MPI_BYTE, (r - dist + p) % p, sh,
                 "MPI_Barrier");
    return MPI_SUCCESS;
}

static void bcast(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm sh, int r, int p)
{
    int rel = (r - root + p) % p, mask = 1;
    while (mask < p) {
        if (rel & mask) {
            crecv(buf, count, dt, (rel - mask + root) % p, sh, "MPI_Bcast");
            break;
        }
        mask <<= 1;
    }
    for (mask >>= 1; mask > 0; mask >>= 1)
        if (rel + mask < p)
            csend(buf, count, dt, (rel + mask + root) % p, sh, "MPI_Bcast");
}

/* binomial tree */
int MPI_Bcast(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm)
{
    if (!S.on)
        return PMPI_Bcast(buf, count, dt, root, comm);
    int p, r = rank_size(comm, &p);
    bcast(buf, count, dt, root, shadow_of(comm), r, p);
    return MPI_SUCCESS;
}

/* Binomial tree to `root` from `acc` (this rank's contribution; overwritten); the result in
 * `out` at the root. A non-commutative operation is reduced to rank 0, lower ranks first,
 * and sent on to the root. */
static void reduce(char *acc, void *out, int count, MPI_Datatype dt, MPI_Op op, int root,
                   MPI_Comm sh, int r, int p)
{
    int commute = 1;
    PMPI_Op_commutative(op, &commute);
    int top = commute ? root : 0, rel = (r - top + p) % p;
    void *base;
    char *tmp = new_buffer(count, dt, &base);
    for (int mask = 1; mask < p; mask <<= 1) {
        if (rel & mask) {
            csend(acc, count, dt, (rel - mask + top) % p, sh, "MPI_Reduce");
            break;
        }
        if (rel + mask < p) {
            crecv(tmp, count, dt, (rel + mask + top) % p, sh, "MPI_Reduce");
            PMPI_Reduce_local(acc, tmp, count, dt, op); /* tmp = acc op tmp: lower first */
            char *t = acc;
            acc = tmp;
            tmp = t;
        }
    }
    if (r == top && top == root)
        local_copy(acc, count, dt, out, count, dt);
    else if (r == top)
        csend(acc, count, dt, root, sh, "MPI_Reduce");
    else if (r == root)
        crecv(out, count, dt, top, sh, "MPI_Reduce");
    free(base);
}

/* This rank's contribution in a buffer of its own. */
static char *contribution(const void *sendbuf, const void *recvbuf, int count, MPI_Datatype dt,
                          void **base)
{
    char *acc = new_buffer(count, dt, base);
    local_copy(sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf, count, dt, acc, count, dt);
    return acc;
}

int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op,
               int root, MPI_Comm comm)
{
    if (!S.on)
        return PMPI_Reduce(sendbuf, recvbuf, count, dt, op, root, comm);
    int p, r = rank_size(comm, &p);
    void *base;
    char *acc = contribution(sendbuf, recvbuf, count, dt, &base);
    reduce(acc, recvbuf, count, dt, op, root, shadow_of(comm), r, p);
    free(base);
    return MPI_SUCCESS;
}

/* recursive doubling for a power of two ranks, else reduce to 0 and broadcast */
int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op,
                  MPI_Comm comm)
{
    if (!S.on)
        return PMPI_Allreduce(sendbuf, recvbuf, count, dt, op, comm);
    int p, r = rank_size(comm, &p);
    MPI_Comm sh = shadow_of(comm);
    void *base, *tmp_base;
    char *acc = contribution(sendbuf, recvbuf, count, dt, &base);
    if (p & (p - 1)) {
        reduce(acc, recvbuf, count, dt, op, 0, sh, r, p);
        bcast(recvbuf, count, dt, 0, sh, r, p);
        free(base);
        return MPI_SUCCESS;
    }
    char *tmp = new_buffer(count, dt, &tmp_base);
    for (int mask = 1; mask < p; mask <<= 1) {
        int peer = r ^ mask;
        exchange(acc, count, dt, peer, tmp, count, dt, peer, sh, "MPI_Allreduce");
        if (peer < r) {
            PMPI_Reduce_local(tmp, acc, count, dt, op); /* acc = theirs op mine */
        } else {
            PMPI_Reduce_local(acc, tmp, count, dt, op); /* tmp = mine op theirs */
            char *t = acc;
            acc = tmp;
            tmp = t;
        }
    }
    local_copy(acc, count, dt, recvbuf, count, dt);
    free(base);
    free(tmp_base);
    return MPI_SUCCESS;
}

/* recursive doubling on blocks for a power of two ranks, else a ring */
int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    if (!S.on)
        return PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    int p, r = rank_size(comm, &p);
    MPI_Comm sh = shadow_of(comm);
    if (sendbuf != MPI_IN_PLACE)
        local_copy(sendbuf, sendcount, sendtype, at(recvbuf, r, recvcount, recvtype), recvcount,
                   recvtype);
    if (!(p & (p - 1))) {
        for (int mask = 1; mask < p; mask <<= 1) {
            int peer = r ^ mask, mine = r & ~(mask - 1), theirs = peer & ~(mask - 1);
            exchange(at(recvbuf, mine, recvcount, recvtype), mask * recvcount, recvtype, peer,
                     at(recvbuf, theirs, recvcount, recvtype), mask * recvcount, recvtype, peer,
                     sh, "MPI_Allgather");
        }
        return MPI_SUCCESS;
    }
    for (int step = 0; step < p - 1; step++) {
        int out = (r - step + p) % p, in = (r - step - 1 + p) % p;
        exchange(at(recvbuf, out, recvcount, recvtype), recvcount, recvtype, (r + 1) % p,
                 at(recvbuf, in, recvcount, recvtype), recvcount, recvtype, (r - 1 + p) % p, sh,
                 "MPI_Allgather");
    }
    return MPI_SUCCESS;
}

/* pairwise exchange: p - 1 rounds, to rank + k and from rank - k */
int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                 int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    if (!S.on)
        return PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    int p, r = rank_size(comm, &p);
    MPI_Comm sh = shadow_of(comm);
    void *base = NULL;
    if (sendbuf == MPI_IN_PLACE) { /* send from a copy of what is received into */
        sendbuf = new_buffer(p * recvcount, recvtype, &base);
        local_copy(recvbuf, p * recvcount, recvtype, (void *)sendbuf, p * recvcount, recvtype);
        sendcount = recvcount;
        sendtype = recvtype;
    }
    local_copy(at(sendbuf, r, sendcount, sendtype), sendcount, sendtype,
               at(recvbuf, r, recvcount, recvtype), recvcount, recvtype);
    for (int k = 1; k < p; k++) {
        int dest = (r + k) % p, src = (r - k + p) % p;
        exchange(at(sendbuf, dest, sendcount, sendtype), sendcount, sendtype, dest,
                 at(recvbuf, src, recvcount, recvtype), recvcount, recvtype, src, sh,
                 "MPI_Alltoall");
    }
    free(base);
    return MPI_SUCCESS;
}

int MPI_Alltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[],
                  MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                  const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm)
{
    if (!S.on || sendbuf == MPI_IN_PLACE) {
        if (S.on)
            warn_unpaced("MPI_Alltoallv in place");
        return PMPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts,
                              rdispls, recvtype, comm);
    }
    int p, r = rank_size(comm, &p);
    MPI_Comm sh = shadow_of(comm);
    MPI_Aint se = extent_of(sendtype), re = extent_of(recvtype);
    local_copy((const char *)sendbuf + sdispls[r] * se, sendcounts[r], sendtype,
               (char *)recvbuf + rdispls[r] * re, recvcounts[r], recvtype);
    for (int k = 1; k < p; k++) {
        int dest = (r + k) % p, src = (r - k + p) % p;
        exchange((const char *)sendbuf + sdispls[dest] * se, sendcounts[dest], sendtype, dest,
                 (char *)recvbuf + rdispls[src] * re, recvcounts[src], recvtype, src, sh,
                 "MPI_Alltoallv");
    }
    return MPI_SUCCESS;
}

/* linear: every rank to the root */
int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
               int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    if (!S.on)
        return PMPI_Gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root,
                           comm);
    int p, r = rank_size(comm, &p);
    MPI_Comm sh = shadow_of(comm);
    if (r != root) {
        csend(sendbuf, sendcount, sendtype, root, sh, "MPI_Gather");
        return MPI_SUCCESS;
    }
    if (sendbuf != MPI_IN_PLACE)
        local_copy(sendbuf, sendcount, sendtype, at(recvbuf, r, recvcount, recvtype), recvcount,
                   recvtype);
    for (int i = 0; i < p; i++)
        if (i != root)
            crecv(at(recvbuf, i, recvcount, recvtype), recvcount, recvtype, i, sh, "MPI_Gather");
    return MPI_SUCCESS;
}

/* linear: the root to every rank */
int MPI_Scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    if (!S.on)
        return PMPI_Scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root,
                            comm);
    int p, r = rank_size(comm, &p);
    MPI_Comm sh = shadow_of(comm);
    if (r != root) {
        crecv(recvbuf, recvcount, recvtype, root, sh, "MPI_Scatter");
        return MPI_SUCCESS;
    }
    for (int i = 0; i < p; i++)
        if (i != root)
            csend(at(sendbuf, i, sendcount, sendtype), sendcount, sendtype, i, sh, "MPI_Scatter");
    if (recvbuf != MPI_IN_PLACE)
        local_copy(at(sendbuf, r, sendcount, sendtype), sendcount, sendtype, recvbuf, recvcount,
                   recvtype);
    return MPI_SUCCESS;
}

/* -- what is not paced: refused, or forwarded with a warning, by name --------------------- */

int MPI_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message *message, MPI_Status *status)
{
    if (S.on)
        refuse("MPI_Mprobe");
    return PMPI_Mprobe(source, tag, comm, message, status);
}

int MPI_Improbe(int source, int tag, MPI_Comm comm, int *flag, MPI_Message *message,
                MPI_Status *status)
{
    if (S.on)
        refuse("MPI_Improbe");
    return PMPI_Improbe(source, tag, comm, flag, message, status);
}

int MPI_Mrecv(void *buf, int count, MPI_Datatype dt, MPI_Message *message, MPI_Status *status)
{
    if (S.on)
        refuse("MPI_Mrecv");
    return PMPI_Mrecv(buf, count, dt, message, status);
}

int MPI_Imrecv(void *buf, int count, MPI_Datatype dt, MPI_Message *message,
               MPI_Request *request)
{
    if (S.on)
        refuse("MPI_Imrecv");
    return PMPI_Imrecv(buf, count, dt, message, request);
}

int MPI_Gatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root,
                MPI_Comm comm)
{
    warn_unpaced("MPI_Gatherv");
    return PMPI_Gatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
                        root, comm);
}

int MPI_Scatterv(const void *sendbuf, const int sendcounts[], const int displs[],
                 MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype,
                 int root, MPI_Comm comm)
{
    warn_unpaced("MPI_Scatterv");
    return PMPI_Scatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype,
                         root, comm);
}

int MPI_Allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                   const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                   MPI_Comm comm)
{
    warn_unpaced("MPI_Allgatherv");
    return PMPI_Allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
                           comm);
}

int MPI_Scan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op,
             MPI_Comm comm)
{
    warn_unpaced("MPI_Scan");
    return PMPI_Scan(sendbuf, recvbuf, count, dt, op, comm);
}

int MPI_Exscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op,
               MPI_Comm comm)
{
    warn_unpaced("MPI_Exscan");
    return PMPI_Exscan(sendbuf, recvbuf, count, dt, op, comm);
}

int MPI_Reduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[],
                       MPI_Datatype dt, MPI_Op op, MPI_Comm comm)
{
    warn_unpaced("MPI_Reduce_scatter");
    return PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, dt, op, comm);
}

int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount,
                             MPI_Datatype dt, MPI_Op op, MPI_Comm comm)
{
    warn_unpaced("MPI_Reduce_scatter_block");
    return PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, dt, op, comm);
}

int MPI_Ibarrier(MPI_Comm comm, MPI_Request *request)
{
    warn_unpaced("MPI_Ibarrier");
    return PMPI_Ibarrier(comm, request);
}

int MPI_Ibcast(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm,
               MPI_Request *request)
{
    warn_unpaced("MPI_Ibcast");
    return PMPI_Ibcast(buf, count, dt, root, comm, request);
}

int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op,
                   MPI_Comm comm, MPI_Request *request)
{
    warn_unpaced("MPI_Iallreduce");
    return PMPI_Iallreduce(sendbuf, recvbuf, count, dt, op, comm, request);
}

int MPI_Ialltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request)
{
    warn_unpaced("MPI_Ialltoall");
    return PMPI_Ialltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                          request);
}

int MPI_Put(const void *origin, int origin_count, MPI_Datatype origin_dt, int target_rank,
            MPI_Aint target_disp, int target_count, MPI_Datatype target_dt, MPI_Win win)
{
    warn_unpaced("MPI_Put");
    return PMPI_Put(origin, origin_count, origin_dt, target_rank, target_disp, target_count,
                    target_dt, win);
}

int MPI_Get(void *origin, int origin_count, MPI_Datatype origin_dt, int target_rank,
            MPI_Aint target_disp, int target_count, MPI_Datatype target_dt, MPI_Win win)
{
    warn_unpaced("MPI_Get");
    return PMPI_Get(origin, origin_count, origin_dt, target_rank, target_disp, target_count,
                    target_dt, win);
}
