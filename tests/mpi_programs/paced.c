/* Checks of the interposition library: an ordinary MPI program whose every figure is an
 * MPI_Wtime (emulated seconds under nodesel mpiexec, one clock for every rank of a machine).
 * Each rank prints one JSON line per figure: {"rank": r, "what": ..., "seconds": ...}
 * (exchange: "cpu_us" and "wall_us"; bandwidth: "mb_per_s").
 *
 *   paced pingpong BYTES ITERATIONS   ranks 0 and 1: one-way time of a blocking ping-pong
 *   paced fanout BYTES                rank 0 Isends BYTES to every other rank at once: its
 *                                     start, each receiver's Irecv+Wait completion (clock)
 *   paced wildcard BYTES              ranks >0 send r*BYTES to rank 0 at once; rank 0 probes
 *                                     and receives from MPI_ANY_SOURCE: each arrival (clock)
 *   paced persistent BYTES ITERATIONS rank 0 to 1 over persistent requests (Startall, Waitall)
 *   paced bpersistent BYTES ITERATIONS the same with a persistent buffered send (Bsend_init):
 *                                     how far rank 0's resident memory grew, "grown_mb"
 *   paced alltoall BYTES [TIMES]      MPI_Alltoall of BYTES per pair, TIMES times; its time
 *   paced collectives                 Bcast, Reduce, Allreduce, Allgather, Gather, Scatter,
 *                                     Alltoallv: results checked, "ok" 1 or 0
 *   paced unpaced                     MPI_Scan (forwarded with a warning), then MPI_Mprobe
 *   paced exchange COUNT              ranks 0 and 1 swap 8 bytes (Irecv, Isend, Waitall):
 *                                     CPU and wall microseconds per exchange
 *   paced bandwidth BYTES WINDOW N    OSU-style: rank 0 keeps WINDOW sends in flight to 1,
 *                                     then waits for an acknowledgement; N times: MB/s
 *   paced self BYTES COUNT            every rank sends to itself COUNT times: wall seconds
 *   paced local INTS                  every rank sends INTS ints to itself, its receives
 *                                     posted before and after, whole and every other one,
 *                                     two of a tag in order, too many for the receive:
 *                                     every int and count checked, "local_ok" or "_wrong"
 *   paced compute MILLIONS            no messages, MILLIONS million additions: wall seconds
 *   paced stuck                       rank 0 waits for a message rank 1 never sends
 * Build: mpicc -O2 -o paced paced.c */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static int rank, size;

static void say(const char *what, double seconds)
{
    printf("{\"rank\": %d, \"what\": \"%s\", \"seconds\": %.9f}\n", rank, what, seconds);
    fflush(stdout);
}

static double start(void)
{
    MPI_Barrier(MPI_COMM_WORLD);
    return MPI_Wtime();
}

static void pingpong(int bytes, int iterations)
{
    char *buf = calloc((size_t)bytes + 1, 1);
    double t0 = start();
    for (int i = 0; i < iterations && rank < 2; i++) {
        if (rank == 0) {
            MPI_Send(buf, bytes, MPI_BYTE, 1, 7, MPI_COMM_WORLD);
            MPI_Recv(buf, bytes, MPI_BYTE, 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buf, bytes, MPI_BYTE, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, bytes, MPI_BYTE, 0, 7, MPI_COMM_WORLD);
        }
    }
    if (rank == 0)
        say("one_way", (MPI_Wtime() - t0) / (2.0 * iterations));
    free(buf);
}

static void fanout(int bytes)
{
    char *buf = calloc((size_t)bytes * (size_t)size + 1, 1);
    MPI_Request *reqs = malloc(sizeof(MPI_Request) * (size_t)size);
    start();
    if (rank == 0) {
        say("start", MPI_Wtime());
        for (int r = 1; r < size; r++)
            MPI_Isend(buf + (size_t)r * bytes, bytes, MPI_BYTE, r, 3, MPI_COMM_WORLD, &reqs[r]);
        MPI_Waitall(size - 1, reqs + 1, MPI_STATUSES_IGNORE);
        say("sent", MPI_Wtime());
    } else {
        MPI_Irecv(buf, bytes, MPI_BYTE, 0, 3, MPI_COMM_WORLD, &reqs[0]);
        MPI_Wait(&reqs[0], MPI_STATUS_IGNORE);
        say("received", MPI_Wtime());
    }
    free(reqs);
    free(buf);
}

static void wildcard(int bytes)
{
    char *buf = calloc((size_t)bytes * (size_t)size + 1, 1);
    start();
    if (rank > 0) {
        say("start", MPI_Wtime());
        MPI_Send(buf, bytes * rank, MPI_BYTE, 0, rank, MPI_COMM_WORLD);
        return free(buf);
    }
    for (int i = 1; i < size; i++) {
        MPI_Status st;
        int count;
        MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
        MPI_Get_count(&st, MPI_BYTE, &count);
        MPI_Recv(buf, count, MPI_BYTE, st.MPI_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
        char what[64];
        int got;
        MPI_Get_count(&st, MPI_BYTE, &got);
        snprintf(what, sizeof what, "from_%d_tag_%d_bytes_%d", st.MPI_SOURCE, st.MPI_TAG, got);
        say(what, MPI_Wtime());
    }
    free(buf);
}

static void persistent(int bytes, int iterations)
{
    char *buf = calloc((size_t)bytes + 1, 1);
    MPI_Request req;
    if (rank == 0)
        MPI_Send_init(buf, bytes, MPI_BYTE, 1, 5, MPI_COMM_WORLD, &req);
    else if (rank == 1)
        MPI_Recv_init(buf, bytes, MPI_BYTE, 0, 5, MPI_COMM_WORLD, &req);
    double t0 = start();
    for (int i = 0; i < iterations && rank < 2; i++) {
        MPI_Startall(1, &req);
        MPI_Waitall(1, &req, MPI_STATUSES_IGNORE);
    }
    if (rank == 1)
        say("persistent", (MPI_Wtime() - t0) / iterations);
    if (rank < 2)
        MPI_Request_free(&req);
    free(buf);
}

static double max_rss_mb(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_maxrss / 1024.0;
}

static void bpersistent(int bytes, int iterations)
{
    char *buf = calloc((size_t)bytes + 1, 1);
    int room = bytes + MPI_BSEND_OVERHEAD;
    char *attached = malloc((size_t)room);
    MPI_Buffer_attach(attached, room);
    MPI_Request req;
    if (rank == 0)
        MPI_Bsend_init(buf, bytes, MPI_BYTE, 1, 5, MPI_COMM_WORLD, &req);
    else if (rank == 1)
        MPI_Recv_init(buf, bytes, MPI_BYTE, 0, 5, MPI_COMM_WORLD, &req);
    start();
    double before = max_rss_mb();
    for (int i = 0; i < iterations; i++) {
        if (rank < 2) {
            MPI_Start(&req);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
        }
        MPI_Barrier(MPI_COMM_WORLD); /* the copy is received before the next start */
    }
    if (rank == 0)
        printf("{\"rank\": 0, \"what\": \"bpersistent\", \"grown_mb\": %.1f}\n",
               max_rss_mb() - before);
    if (rank < 2)
        MPI_Request_free(&req);
    MPI_Buffer_detach(&attached, &room);
    free(attached);
    free(buf);
}

static void alltoall(int bytes, int times)
{
    char *out = calloc((size_t)bytes * (size_t)size + 1, 1);
    char *in = calloc((size_t)bytes * (size_t)size + 1, 1);
    for (int r = 0; r < size; r++)
        memset(out + (size_t)r * bytes, rank * 16 + r, (size_t)bytes);
    double t0 = start();
    for (int i = 0; i < times; i++)
        MPI_Alltoall(out, bytes, MPI_BYTE, in, bytes, MPI_BYTE, MPI_COMM_WORLD);
    double t = MPI_Wtime() - t0;
    int ok = 1;
    for (int r = 0; r < size; r++)
        ok &= in[(size_t)r * bytes] == (char)(r * 16 + rank) &&
              in[(size_t)r * bytes + bytes - 1] == (char)(r * 16 + rank);
    say(ok ? "alltoall" : "alltoall_wrong", t);
    free(out);
    free(in);
}

static void collectives(void)
{
    int ok = 1, n = size;
    double x = rank + 1.0, sum = 0, max = 0;
    MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    ok &= sum == n * (n + 1) / 2.0;
    MPI_Reduce(&x, &max, 1, MPI_DOUBLE, MPI_MAX, n - 1, MPI_COMM_WORLD);
    ok &= rank != n - 1 || max == n;
    int value = rank == 1 % n ? 42 : 0;
    MPI_Bcast(&value, 1, MPI_INT, 1 % n, MPI_COMM_WORLD);
    ok &= value == 42;
    int *all = calloc((size_t)n, sizeof(int)), *counts = calloc((size_t)n, sizeof(int));
    int *displs = calloc((size_t)n, sizeof(int)), *back = calloc((size_t)n * n, sizeof(int));
    MPI_Allgather(&rank, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD);
    for (int r = 0; r < n; r++)
        ok &= all[r] == r;
    memset(all, 0, sizeof(int) * (size_t)n);
    MPI_Gather(&rank, 1, MPI_INT, all, 1, MPI_INT, 0, MPI_COMM_WORLD);
    for (int r = 0; r < n && rank == 0; r++)
        ok &= all[r] == r;
    int mine = -1;
    MPI_Scatter(all, 1, MPI_INT, &mine, 1, MPI_INT, 0, MPI_COMM_WORLD);
    ok &= mine == rank;
    for (int r = 0; r < n; r++) { /* rank r gets r+1 ints of value 100*rank + r from each */
        counts[r] = r + 1;
        displs[r] = r * n;
        for (int k = 0; k <= r; k++)
            back[r * n + k] = 100 * rank + r;
    }
    int *rcounts = calloc((size_t)n, sizeof(int)), *rdispls = calloc((size_t)n, sizeof(int));
    int *got = calloc((size_t)n * n, sizeof(int));
    for (int r = 0; r < n; r++) {
        rcounts[r] = rank + 1;
        rdispls[r] = r * n;
    }
    MPI_Alltoallv(back, counts, displs, MPI_INT, got, rcounts, rdispls, MPI_INT,
                  MPI_COMM_WORLD);
    for (int r = 0; r < n; r++)
        for (int k = 0; k <= rank; k++)
            ok &= got[r * n + k] == 100 * r + rank;
    int in_place = rank;
    MPI_Allreduce(MPI_IN_PLACE, &in_place, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    ok &= in_place == n * (n - 1) / 2;
    say(ok ? "collectives_ok" : "collectives_wrong", 0.0);
    free(all), free(counts), free(displs), free(back), free(rcounts), free(rdispls), free(got);
}

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void exchange(int count)
{
    char out[8] = {0}, in[8];
    MPI_Request reqs[2];
    int other = 1 - rank, warm = count / 10;
    double cpu = 0, wall = 0;
    start();
    for (int i = 0; i < count + warm && rank < 2; i++) {
        if (i == warm) {
            cpu = cpu_now();
            wall = MPI_Wtime();
        }
        MPI_Irecv(in, 8, MPI_BYTE, other, 3, MPI_COMM_WORLD, &reqs[0]);
        MPI_Isend(out, 8, MPI_BYTE, other, 3, MPI_COMM_WORLD, &reqs[1]);
        MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);
    }
    if (rank < 2)
        printf("{\"rank\": %d, \"what\": \"exchange\", \"cpu_us\": %.3f, \"wall_us\": %.3f}\n",
               rank, 1e6 * (cpu_now() - cpu) / count, 1e6 * (MPI_Wtime() - wall) / count);
}

static void bandwidth(int bytes, int window, int iterations)
{
    char *buf = calloc((size_t)bytes * (size_t)window + 1, 1);
    MPI_Request *reqs = malloc(sizeof(MPI_Request) * (size_t)window);
    int ack = 0;
    double t0 = 0;
    start();
    for (int it = 0; it <= iterations && rank < 2; it++) { /* the first warms up */
        if (it == 1)
            t0 = MPI_Wtime();
        for (int w = 0; w < window; w++) {
            char *at = buf + (size_t)w * bytes;
            if (rank == 0)
                MPI_Isend(at, bytes, MPI_BYTE, 1, 4, MPI_COMM_WORLD, &reqs[w]);
            else
                MPI_Irecv(at, bytes, MPI_BYTE, 0, 4, MPI_COMM_WORLD, &reqs[w]);
        }
        MPI_Waitall(window, reqs, MPI_STATUSES_IGNORE);
        if (rank == 0)
            MPI_Recv(&ack, 1, MPI_INT, 1, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        else
            MPI_Send(&ack, 1, MPI_INT, 0, 5, MPI_COMM_WORLD);
    }
    if (rank == 0)
        printf("{\"rank\": 0, \"what\": \"bandwidth\", \"mb_per_s\": %.6f}\n",
               (double)bytes * window * iterations / (MPI_Wtime() - t0) / 1e6);
    free(reqs);
    free(buf);
}

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* wall seconds (not MPI_Wtime's: this is the program's cost, not the network's) */
static void self(int bytes, int count)
{
    char *out = calloc((size_t)bytes + 1, 1), *in = calloc((size_t)bytes + 1, 1);
    start();
    double t0 = mono_now();
    for (int i = 0; i < count; i++)
        MPI_Sendrecv(out, bytes, MPI_BYTE, rank, 6, in, bytes, MPI_BYTE, rank, 6,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    say("self", mono_now() - t0);
    free(out);
    free(in);
}

/* the messages of local() checked: a receive of `count` ints from itself, `in` zeroed */
static int local_round(int *out, int *in, int count, MPI_Datatype send_dt, int send_count,
                       MPI_Datatype recv_dt, int recv_count, int posted_first, int tag)
{
    MPI_Request rq[2];
    MPI_Status st[2];
    memset(in, 0, 2 * (size_t)count * sizeof(int));
    if (posted_first)
        MPI_Irecv(in, recv_count, recv_dt, rank, tag, MPI_COMM_WORLD, &rq[0]);
    MPI_Isend(out, send_count, send_dt, rank, tag, MPI_COMM_WORLD, &rq[1]);
    if (!posted_first)
        MPI_Irecv(in, recv_count, recv_dt, rank, tag, MPI_COMM_WORLD, &rq[0]);
    MPI_Waitall(2, rq, st);
    int got = -1;
    MPI_Get_count(&st[0], MPI_INT, &got);
    return got == count && st[0].MPI_SOURCE == rank && st[0].MPI_TAG == tag;
}

static void local(int count)
{
    int *out = malloc(2 * (size_t)count * sizeof(int)), *in = malloc(2 * (size_t)count * sizeof(int));
    int ok = 1;
    MPI_Datatype every_other;
    MPI_Type_vector(count, 1, 2, MPI_INT, &every_other);
    MPI_Type_commit(&every_other);
    for (int round = 0; round < 20; round++) {
        for (int i = 0; i < 2 * count; i++)
            out[i] = round * 1000003 + i + 1;
        for (int first = 0; first < 2; first++) {
            ok &= local_round(out, in, count, MPI_INT, count, MPI_INT, count, first, 1);
            for (int i = 0; i < count; i++)
                ok &= in[i] == out[i] && in[count + i] == 0;
            ok &= local_round(out, in, count, every_other, 1, every_other, 1, first, 2);
            for (int i = 0; i < count; i++)
                ok &= in[2 * i] == out[2 * i] && in[2 * i + 1] == 0;
            ok &= local_round(out, in, count, every_other, 1, MPI_INT, 2 * count, first, 3);
            for (int i = 0; i < count; i++)
                ok &= in[i] == out[2 * i];
        }
        MPI_Request rq[2]; /* two of one tag: taken in the order sent */
        MPI_Irecv(&in[0], 1, MPI_INT, rank, 4, MPI_COMM_WORLD, &rq[0]);
        MPI_Irecv(&in[1], 1, MPI_INT, rank, 4, MPI_COMM_WORLD, &rq[1]);
        MPI_Send(&out[0], 1, MPI_INT, rank, 4, MPI_COMM_WORLD);
        MPI_Send(&out[1], 1, MPI_INT, rank, 4, MPI_COMM_WORLD);
        MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
        ok &= in[0] == out[0] && in[1] == out[1];
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Request rq[2]; /* more than the receive holds: an error, posted first or not */
    MPI_Status st[2];
    for (int first = 0; first < 2; first++) {
        if (first)
            MPI_Irecv(in, count - 1, MPI_INT, rank, 5, MPI_COMM_WORLD, &rq[0]);
        MPI_Isend(out, count, MPI_INT, rank, 5, MPI_COMM_WORLD, &rq[1]);
        if (!first)
            MPI_Irecv(in, count - 1, MPI_INT, rank, 5, MPI_COMM_WORLD, &rq[0]);
        int rc = MPI_Waitall(2, rq, st), class = MPI_SUCCESS;
        MPI_Error_class(st[0].MPI_ERROR, &class);
        ok &= rc != MPI_SUCCESS && class == MPI_ERR_TRUNCATE;
    }
    MPI_Type_free(&every_other);
    say(ok ? "local_ok" : "local_wrong", 0.0);
    free(out);
    free(in);
}

/* a fixed amount of work and no message: its wall seconds */
static void compute(int millions)
{
    double t0 = mono_now();
    volatile double x = 0;
    for (long i = 0; i < 1000000L * millions; i++)
        x += 1e-9 * (double)i;
    say(x > 0 ? "computed" : "computed_nothing", mono_now() - t0);
}

static void unpaced(void)
{
    int x = 1, y = 0;
    MPI_Scan(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    say(y == rank + 1 ? "scan_ok" : "scan_wrong", 0.0);
    MPI_Message m;
    MPI_Status st;
    if (rank == 1)
        MPI_Send(&x, 1, MPI_INT, 0, 9, MPI_COMM_WORLD);
    if (rank == 0) {
        MPI_Mprobe(1, 9, MPI_COMM_WORLD, &m, &st);
        MPI_Mrecv(&y, 1, MPI_INT, &m, &st);
        say("mprobe", 0.0);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *test = argc > 1 ? argv[1] : "";
    int a = argc > 2 ? atoi(argv[2]) : 0, b = argc > 3 ? atoi(argv[3]) : 1;
    if (!strcmp(test, "pingpong"))
        pingpong(a, b);
    else if (!strcmp(test, "fanout"))
        fanout(a);
    else if (!strcmp(test, "wildcard"))
        wildcard(a);
    else if (!strcmp(test, "persistent"))
        persistent(a, b);
    else if (!strcmp(test, "bpersistent"))
        bpersistent(a, b);
    else if (!strcmp(test, "alltoall"))
        alltoall(a, b);
    else if (!strcmp(test, "collectives"))
        collectives();
    else if (!strcmp(test, "unpaced"))
        unpaced();
    else if (!strcmp(test, "exchange"))
        exchange(a);
    else if (!strcmp(test, "bandwidth"))
        bandwidth(a, b, argc > 4 ? atoi(argv[4]) : 1);
    else if (!strcmp(test, "self"))
        self(a, b);
    else if (!strcmp(test, "local"))
        local(a);
    else if (!strcmp(test, "compute"))
        compute(a);
    else if (!strcmp(test, "stuck") && rank == 0) /* from rank 1, which never sends */
        MPI_Recv(&a, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    else if (rank == 0)
        fprintf(stderr, "paced: unknown test %s\n", test);
    MPI_Finalize();
    return 0;
}
