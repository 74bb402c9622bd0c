/* What the state kept in shared memory needs, for the one-host model
 * (emulator/network/_fluid.c) and a host's mirror of the served one
 * (emulator/network/_mirror.c): a process-shared robust mutex (a rank that dies holding it
 * leaves the state to the next locker, which goes on), the doorbells a change wakes (rung
 * after the lock is released), the wall clock; and, where Python.h came first, doorbell
 * addresses and memory from Python. */
#ifndef NODESEL_SHM_H
#define NODESEL_SHM_H

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>

#include "fluid.h"

#define SHM_MAX_RINGS 256

static inline double shm_wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* 0, or pthread_mutex_init's error */
static inline int shm_mutex_init(pthread_mutex_t *lock)
{
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
    int rc = pthread_mutex_init(lock, &attr);
    pthread_mutexattr_destroy(&attr);
    return rc;
}

static inline void shm_lock(pthread_mutex_t *lock)
{
    if (pthread_mutex_lock(lock) == EOWNERDEAD)
        pthread_mutex_consistent(lock); /* a rank died holding it: go on */
}

/* The bells to ring once the lock is released (process-private). */
typedef struct {
    int fd, n;
    char to[SHM_MAX_RINGS][FL_BELL_BYTES];
    uint8_t len[SHM_MAX_RINGS];
} Rings;

static inline void shm_ring_all(int fd, char (*to)[FL_BELL_BYTES], const uint8_t *len, int n)
{
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    for (int i = 0; i < n; i++) {
        memcpy(a.sun_path, to[i], len[i]);
        sendto(fd, "", 1, MSG_DONTWAIT, (struct sockaddr *)&a,
               (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len[i]));
    }
}

/* Release the lock, then ring the bells collected under it (from a copy: another thread of
 * this process may take the lock and collect rings of its own meanwhile). */
static inline void shm_unlock(pthread_mutex_t *lock, Rings *r)
{
    int n = r->n;
    char to[SHM_MAX_RINGS][FL_BELL_BYTES];
    uint8_t len[SHM_MAX_RINGS];
    if (n) {
        memcpy(to, r->to, sizeof(to[0]) * (size_t)n);
        memcpy(len, r->len, (size_t)n);
        r->n = 0;
    }
    pthread_mutex_unlock(lock);
    if (n)
        shm_ring_all(r->fd, to, len, n);
}

/* Ring `bell` at the next unlock (once, however often it is asked for). */
static inline void shm_want_ring(Rings *r, const char *bell, int len)
{
    if (len <= 0 || r->fd < 0)
        return;
    for (int i = 0; i < r->n; i++)
        if (r->len[i] == len && memcmp(r->to[i], bell, (size_t)len) == 0)
            return;
    if (r->n == SHM_MAX_RINGS) { /* rare: ring these now, under the lock */
        shm_ring_all(r->fd, r->to, r->len, r->n);
        r->n = 0;
    }
    memcpy(r->to[r->n], bell, (size_t)len);
    r->len[r->n++] = (uint8_t)len;
}

/* A flow as `add` describes it (the model's and the mirror's). A message takes its pair's
 * token bucket (`bucket`); bounded, persistent and own-resource flows never do. */
typedef struct {
    int src, dst, refs, resource, persistent, bucket;
    double amount, bound;
    const char *snd_bell, *rcv_bell;
    int snd_len, rcv_len;
} NewFlow;

#ifdef Py_PYTHON_H

/* A doorbell address from Python: bytes, or None for none (NULL, 0); a longer one than the
 * state keeps goes without rings. */
static inline int shm_read_bell(PyObject *o, const char **p, int *len)
{
    *p = NULL;
    *len = 0;
    if (o == Py_None)
        return 0;
    char *s;
    Py_ssize_t n;
    if (PyBytes_AsStringAndSize(o, &s, &n))
        return -1;
    *p = s;
    *len = n <= FL_BELL_BYTES ? (int)n : 0;
    return 0;
}

/* The memory of a state of `size` bytes: `window` (a writable buffer, an MPI shared-memory
 * window; held in `*view`) or, for None, a zeroed block of this process (`*owned`). NULL
 * with an exception set when it cannot be had or the window is too small. */
static inline char *shm_memory(PyObject *window, size_t size, Py_buffer *view, int *has_view,
                               void **owned)
{
    if (window == Py_None) {
        *owned = calloc(1, size);
        if (!*owned)
            PyErr_NoMemory();
        return *owned;
    }
    if (PyObject_GetBuffer(window, view, PyBUF_WRITABLE))
        return NULL;
    *has_view = 1;
    if ((size_t)view->len < size) {
        PyErr_Format(PyExc_ValueError, "the shared window holds %zd bytes, the state needs %zu",
                     view->len, size);
        return NULL;
    }
    return view->buf;
}

/* Let go of a window the caller has locked and detached its state from: unlock, release. */
static inline void shm_let_go(pthread_mutex_t *lock, Py_buffer *view, int *has_view)
{
    pthread_mutex_unlock(lock);
    if (*has_view) {
        PyBuffer_Release(view);
        *has_view = 0;
    }
}

/* The handle the message path takes (emulator/shaping/_engine.c): `self` named `name`,
 * with its type's interface as the capsule's context; made once, kept in `*cache`. */
static inline PyObject *shm_capsule(PyObject **cache, void *self, const char *name,
                                    const FluidAPI *api)
{
    if (!*cache) {
        *cache = PyCapsule_New(self, name, NULL);
        if (!*cache)
            return NULL;
        if (PyCapsule_SetContext(*cache, (void *)api)) {
            Py_CLEAR(*cache);
            return NULL;
        }
    }
    return Py_NewRef(*cache);
}

/* The arguments of add(wall, src, dst, amount, refs=1, sender_bell=None,
 * receiver_bell=None, bound=0, resource=-1, persistent=False, bucket=True); -1 with an
 * exception set when they are wrong. */
static inline int shm_parse_add(PyObject *args, PyObject *kwargs, double *wall, NewFlow *n)
{
    static char *names[] = {"wall", "src", "dst", "amount", "refs", "sender_bell",
                            "receiver_bell", "bound", "resource", "persistent", "bucket", NULL};
    PyObject *sb = Py_None, *rb = Py_None;
    memset(n, 0, sizeof *n);
    n->refs = n->bucket = 1;
    n->resource = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "diid|iOOdipp", names, wall, &n->src,
                                     &n->dst, &n->amount, &n->refs, &sb, &rb, &n->bound,
                                     &n->resource, &n->persistent, &n->bucket) ||
        shm_read_bell(sb, &n->snd_bell, &n->snd_len) ||
        shm_read_bell(rb, &n->rcv_bell, &n->rcv_len))
        return -1;
    if (!(n->amount >= 0) || n->bound < 0 || n->refs < 1) {
        PyErr_SetString(PyExc_ValueError, "bad flow: amount, bound or refs");
        return -1;
    }
    n->bucket = n->bucket && n->resource < 0 && !n->persistent && !(n->bound > 0);
    return 0;
}

/* A flow's view as Python gets it. */
static inline PyObject *shm_view_dict(const FlView *v, double rate, double remaining)
{
    return Py_BuildValue("{s:s,s:d,s:d,s:d,s:O,s:O,s:d,s:d,s:d}", "state",
                         v->done ? "done" : "active", "start", v->start, "end", v->end,
                         "release", v->release, "done", v->done ? Py_True : Py_False,
                         "released", v->released ? Py_True : Py_False, "rate", rate,
                         "remaining", remaining, "next_change", v->next_change);
}

#endif /* Py_PYTHON_H */

#endif
