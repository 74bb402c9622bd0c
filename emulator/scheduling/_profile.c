/* An availability profile in C: free processors over future time, as conservative
 * backfilling keeps it. The same methods and results as emulator/scheduling/profile.py's
 * PyProfile (read its docstrings), and one more: compress(), the whole compression pass of
 * conservative backfilling (every reservation taken out in queue order and made again as
 * early as it fits, until nothing moves), so that a pass costs no Python call per job; and
 * plan(), one pass of Slurm's backfill (emulator/scheduling/slurmbackfill.py).
 *
 * Breakpoints t[0..n-1] with f[i] processors free on [t[i], t[i+1]); t[n] is a sentinel
 * (infinity): the last segment runs for ever.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A freed stretch of the profile, as compression logs it (see compress_pass) */
typedef struct {
    double from, to;  /* the freed stretch */
    long long lo, hi; /* the least free there before the move, the most after it */
} Move;

typedef struct {
    Move *m;
    Py_ssize_t n, cap;
} MoveLog;

typedef struct {
    PyObject_HEAD
    double *t;
    long long *f;
    Py_ssize_t n, cap;
    MoveLog freed; /* the stretches release() freed since the last compression */
} Profile;

static int log_move(MoveLog *log, const Profile *p, double from, double to, long long procs);

static PyTypeObject ProfileType;
/* interned attribute names */
static PyObject *s_start, *s_procs, *s_estimate, *s_slot, *s_reserved, *s_index;

/* A job's attributes read straight from its __slots__ where its class has them as plain
 * member slots (the scheduler's Job): a compression reads four of every queued job. The
 * offsets are found once per call, for one exact type; any other object is asked. */
typedef struct {
    PyTypeObject *type;
    Py_ssize_t start, procs, estimate, slot;
} Slots;

static Py_ssize_t member_offset(PyTypeObject *type, PyObject *name)
{
    PyObject *d = _PyType_Lookup(type, name);
    if (!d || !Py_IS_TYPE(d, &PyMemberDescr_Type))
        return -1;
    PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
    return m->type == T_OBJECT_EX && !(m->flags & READ_RESTRICTED) ? m->offset : -1;
}

static void slots_for(Slots *sl, PyObject *job)
{
    PyTypeObject *type = Py_TYPE(job);
    sl->type = type;
    sl->start = member_offset(type, s_start);
    sl->procs = member_offset(type, s_procs);
    sl->estimate = member_offset(type, s_estimate);
    sl->slot = member_offset(type, s_slot);
    if (sl->start < 0 || sl->procs < 0 || sl->estimate < 0 || sl->slot < 0)
        sl->type = NULL; /* ask every object */
}

/* job.<name> as a new reference (NULL with an exception set on error) */
static PyObject *job_attr(const Slots *sl, PyObject *job, Py_ssize_t offset, PyObject *name)
{
    if (sl->type && Py_TYPE(job) == sl->type) {
        PyObject *v = *(PyObject **)((char *)job + offset);
        if (v) {
            Py_INCREF(v);
            return v;
        }
    }
    return PyObject_GetAttr(job, name);
}

/* room for one more item in *a, of `cap` items of `size` bytes (doubled, from `first`) */
static int grow_by_one(void **a, Py_ssize_t n, Py_ssize_t *cap, size_t size, Py_ssize_t first)
{
    if (n < *cap)
        return 0;
    Py_ssize_t c = *cap ? 2 * *cap : first;
    void *b = realloc(*a, size * (size_t)c);
    if (!b)
        return -1;
    *a = b;
    *cap = c;
    return 0;
}

static int reserve_room(Profile *p, Py_ssize_t need)
{
    if (need + 1 <= p->cap)
        return 0;
    Py_ssize_t cap = p->cap ? p->cap : 16;
    while (cap < need + 1)
        cap *= 2;
    double *t = realloc(p->t, (size_t)cap * sizeof(double));
    if (!t) {
        PyErr_NoMemory();
        return -1;
    }
    p->t = t;
    long long *f = realloc(p->f, (size_t)cap * sizeof(long long));
    if (!f) {
        PyErr_NoMemory();
        return -1;
    }
    p->f = f;
    p->cap = cap;
    return 0;
}

/* searchsorted(t[:n], x, side) */
static Py_ssize_t search_right(const Profile *p, double x)
{
    Py_ssize_t lo = 0, hi = p->n;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (x < p->t[mid])
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

static Py_ssize_t search_left(const Profile *p, double x)
{
    /* without branches on the data: compression asks this of every queued job */
    const double *b = p->t;
    Py_ssize_t len = p->n;
    while (len > 1) {
        Py_ssize_t half = len / 2;
        b = b[half - 1] < x ? b + half : b;
        len -= half;
    }
    return (b - p->t) + (len == 1 && *b < x);
}

/* search_left(p, x) from a guess, galloping out from it: a job's slot's segment moves by a
 * few places between two tries, and in queue order the slots are close */
static Py_ssize_t search_left_from(const Profile *p, double x, Py_ssize_t guess)
{
    const double *t = p->t;
    Py_ssize_t n = p->n, lo, hi, step = 1;
    guess = guess < 0 ? 0 : guess > n ? n : guess;
    if (guess < n && t[guess] < x) { /* the answer lies above guess: in (lo, hi] */
        lo = guess;
        while (lo + step < n && t[lo + step] < x) {
            lo += step;
            step *= 2;
        }
        hi = lo + step < n ? lo + step : n;
        lo++;
    } else { /* at guess or below: in [lo, hi] */
        hi = guess;
        while (hi - step >= 0 && t[hi - step] >= x) {
            hi -= step;
            step *= 2;
        }
        lo = hi - step >= 0 ? hi - step + 1 : 0;
    }
    while (lo < hi) { /* the first place in [lo, hi) whose time is >= x, else hi */
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (t[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* -- the operations ----------------------------------------------------------------- */

static void advance(Profile *p, double now)
{
    Py_ssize_t i = search_right(p, now) - 1;
    if (i > 0) {
        memmove(p->t, p->t + i, (size_t)(p->n - i + 1) * sizeof(double));
        memmove(p->f, p->f + i, (size_t)(p->n - i) * sizeof(long long));
        p->n -= i;
    }
    if (p->t[0] < now)
        p->t[0] = now;
}

/* The breakpoint at x, made if missing (x >= t[0]); -1 on error. */
static Py_ssize_t split(Profile *p, double x)
{
    Py_ssize_t i = search_right(p, x) - 1;
    if (i >= 0 && p->t[i] == x)
        return i;
    if (i < 0)
        i = 0; /* before the first breakpoint: not done by the scheduler */
    if (reserve_room(p, p->n + 1))
        return -1;
    memmove(p->t + i + 2, p->t + i + 1, (size_t)(p->n - i) * sizeof(double)); /* sentinel too */
    memmove(p->f + i + 2, p->f + i + 1, (size_t)(p->n - i - 1) * sizeof(long long));
    p->t[i + 1] = x;
    p->f[i + 1] = p->f[i];
    p->n++;
    return i + 1;
}

static int reserve(Profile *p, double start, double duration, long long procs)
{
    if (duration <= 0)
        return 0;
    Py_ssize_t i = split(p, start);
    if (i < 0)
        return -1;
    double end = start + duration;
    Py_ssize_t j = p->n;
    if (end < INFINITY) {
        j = split(p, end);
        if (j < 0)
            return -1;
    }
    for (Py_ssize_t k = i; k < j; k++)
        p->f[k] -= procs;
    return 0;
}

/* The first segment k of [0, m), not small (f >= procs), from whose start (starts[k], or
 * t[k] where starts is NULL and k > 0, first otherwise) the next small segment begins at
 * least `duration` later; the bound of segment m is t[lo + m]. -1 if none. Segments are
 * t[lo + k]. */
static Py_ssize_t first_fit(const Profile *p, Py_ssize_t lo, Py_ssize_t m, long long procs,
                            double duration, double first)
{
    Py_ssize_t next_small = m, found = -1;
    for (Py_ssize_t k = m - 1; k >= 0; k--) {
        if (p->f[lo + k] < procs) {
            next_small = k;
            continue;
        }
        double s = k == 0 ? first : p->t[lo + k];
        if (p->t[lo + next_small] >= s + duration)
            found = k;
    }
    return found;
}

/* The first time >= after with procs free for duration; NAN if none. */
static double earliest(const Profile *p, long long procs, double duration, double after)
{
    Py_ssize_t n = p->n;
    Py_ssize_t i = search_right(p, after) - 1;
    if (i < 0)
        i = 0;
    double start0 = after > p->t[0] ? after : p->t[0];
    Py_ssize_t m = n - i;
    if (p->f[i] >= procs && (m == 1 || p->t[i + 1] >= start0 + duration))
        return start0;
    /* first_fit also covers no small segment (k = 0) and no segment large enough (-1) */
    Py_ssize_t k = first_fit(p, i, m, procs, duration, start0);
    if (k < 0)
        return NAN;
    return k == 0 ? start0 : p->t[i + k];
}

/* The runs of a profile at one processor count: each maximal stretch of segments with at
 * least `procs` free, by its start and end time, and the longest run up to each (so the first
 * run at least a duration long is a binary search). Compression asks for the few counts its
 * queue holds, again and again: the runs are found from the front as far as asked, and a
 * change to the profile drops only those from the changed time on. */
typedef struct {
    long long procs;
    double upto; /* every run that starts before this time is known (-inf: none looked at) */
    Py_ssize_t n, cap;
    double *start, *end, *longest;
} Runs;

/* a compression's runs, one per processor count in its queue (its classes, below); the
 * buffers are kept between compressions */
typedef struct {
    Runs *r;
    int n, cap;
} RunCache;

/* n runs, none known, at counts[0..n) */
static int runs_reset(RunCache *c, int n, const long long *counts)
{
    if (n > c->cap) {
        Runs *r = realloc(c->r, sizeof(Runs) * (size_t)n);
        if (!r)
            return -1;
        memset(r + c->cap, 0, sizeof(Runs) * (size_t)(n - c->cap));
        c->r = r;
        c->cap = n;
    }
    for (int k = 0; k < n; k++) {
        c->r[k].procs = counts[k];
        c->r[k].upto = -INFINITY;
        c->r[k].n = 0;
    }
    c->n = n;
    return 0;
}

/* The profile changed from time `from` on: a run that ends there or later may differ now. */
static void runs_changed(RunCache *c, double from)
{
    for (int i = 0; i < c->n; i++) {
        Runs *r = &c->r[i];
        if (r->upto < from)
            continue;
        while (r->n && r->end[r->n - 1] >= from)
            r->n--;
        r->upto = r->n ? r->end[r->n - 1] : -INFINITY;
    }
}

static int runs_add(Runs *r, double start, double end)
{
    if (r->n == r->cap) {
        Py_ssize_t cap = r->cap ? 2 * r->cap : 64;
        double *a = realloc(r->start, (size_t)cap * sizeof(double));
        if (a)
            r->start = a;
        double *b = a ? realloc(r->end, (size_t)cap * sizeof(double)) : NULL;
        if (b)
            r->end = b;
        double *m = b ? realloc(r->longest, (size_t)cap * sizeof(double)) : NULL;
        if (!m)
            return -1;
        r->longest = m;
        r->cap = cap;
    }
    double len = end - start, before = r->n ? r->longest[r->n - 1] : -INFINITY;
    r->start[r->n] = start;
    r->end[r->n] = end;
    r->longest[r->n] = len > before ? len : before;
    r->n++;
    return 0;
}

/* The runs r (at r->procs) known up to segment j, which has fewer free; -1 if out of
 * memory. */
static int runs_before(Runs *r, const Profile *p, Py_ssize_t j)
{
    long long procs = r->procs;
    if (r->upto >= p->t[j])
        return 0;
    /* from the segment where the known runs stop (it has too few free) to segment j */
    Py_ssize_t a = -1;
    for (Py_ssize_t k = r->upto == -INFINITY ? 0 : search_left(p, r->upto); k <= j; k++) {
        if (p->f[k] >= procs) {
            if (a < 0)
                a = k;
        } else if (a >= 0) {
            if (runs_add(r, p->t[a], p->t[k]))
                return -1;
            a = -1;
        }
    }
    r->upto = p->t[j];
    return 0;
}

/* the least length of a run that may hold a job of `duration`: run lengths are differences,
 * the test a sum (end >= start + duration), and they may round apart */
static double hole_bound(double duration)
{
    return duration - 1e-9 * fabs(duration) - 1e-9;
}

/* first_fit(p, 0, j, procs, duration, t[0]) from the runs: the start of the first run at
 * least `duration` long (end >= start + duration, as first_fit tests it) that begins
 * before segment j; NAN if none (and *err set if out of memory). */
static double run_fit(Runs *r, const Profile *p, Py_ssize_t j, double duration, int *err)
{
    if (runs_before(r, p, j)) {
        *err = 1;
        return NAN;
    }
    /* the first run whose length passes the hole bound, then the test itself */
    double bound = hole_bound(duration);
    Py_ssize_t lo = 0, hi = r->n;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (r->longest[mid] >= bound)
            hi = mid;
        else
            lo = mid + 1;
    }
    for (Py_ssize_t x = lo; x < r->n && r->start[x] < p->t[j]; x++)
        if (r->end[x] >= r->start[x] + duration)
            return r->start[x];
    return NAN;
}

/* The earliest start of a job that holds [slot, slot + duration) (slot at segment i, the
 * first at or after it): the free stretch that ends at its slot, if any, or a hole before
 * the last segment j ahead of it with too few free, long enough on its own (found from the
 * runs at procs, or with r NULL by scanning segments [0, j)). */
static double earlier_at(const Profile *p, Runs *r, long long procs, double duration,
                         double slot, Py_ssize_t i, int *err)
{
    if (i == 0)
        return slot;
    Py_ssize_t j = -1;
    for (Py_ssize_t k = i - 1; k >= 0; k--)
        if (p->f[k] < procs) {
            j = k;
            break;
        }
    if (j < 0)
        return p->t[0];
    if (j == 0)
        return i > 1 ? p->t[1] : slot;
    double t;
    if (r) {
        t = run_fit(r, p, j, duration, err);
    } else {
        Py_ssize_t k = first_fit(p, 0, j, procs, duration, p->t[0]);
        t = k >= 0 ? p->t[k] : NAN;
    }
    if (!isnan(t))
        return t;
    return j + 1 < i ? p->t[j + 1] : slot;
}

static double earlier_start(const Profile *p, long long procs, double duration, double slot)
{
    int err = 0;
    return earlier_at(p, NULL, procs, duration, slot, search_left(p, slot), &err);
}

static int fits(const Profile *p, long long procs, double duration, double start)
{
    Py_ssize_t i = search_right(p, start) - 1;
    if (i < 0)
        i = 0;
    Py_ssize_t j = search_left(p, start + duration);
    if (j < i + 1)
        j = i + 1;
    for (Py_ssize_t k = i; k < j && k < p->n; k++)
        if (p->f[k] < procs)
            return 0;
    return 1;
}

static void compact(Profile *p)
{
    Py_ssize_t m = 1;
    for (Py_ssize_t k = 1; k < p->n; k++)
        if (p->f[k] != p->f[m - 1]) {
            p->t[m] = p->t[k];
            p->f[m] = p->f[k];
            m++;
        }
    p->t[m] = INFINITY;
    p->n = m;
}

/* -- the Python type -------------------------------------------------------------------- */

static int as_long_long(PyObject *o, long long *out)
{
    *out = PyLong_AsLongLong(o);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

static int Profile_init(Profile *p, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"now", "free_now", "releases", NULL};
    double now;
    long long free_now;
    PyObject *releases = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "dL|O", names, &now, &free_now, &releases))
        return -1;
    p->n = 0;
    p->freed.n = 0;
    if (reserve_room(p, 16))
        return -1;
    p->t[0] = now;
    p->f[0] = free_now;
    p->n = 1;
    if (releases && releases != Py_None) {
        PyObject *sorted = PySequence_List(releases);
        if (!sorted || PyList_Sort(sorted)) {
            Py_XDECREF(sorted);
            return -1;
        }
        for (Py_ssize_t k = 0; k < PyList_GET_SIZE(sorted); k++) {
            double t;
            long long procs;
            PyObject *item = PyList_GET_ITEM(sorted, k);
            if (!PyArg_ParseTuple(item, "dL", &t, &procs)) {
                Py_DECREF(sorted);
                return -1;
            }
            if (t < now)
                t = now;
            if (t == p->t[p->n - 1]) {
                p->f[p->n - 1] += procs;
            } else {
                if (reserve_room(p, p->n + 1)) {
                    Py_DECREF(sorted);
                    return -1;
                }
                p->t[p->n] = t;
                p->f[p->n] = p->f[p->n - 1] + procs;
                p->n++;
            }
        }
        Py_DECREF(sorted);
    }
    p->t[p->n] = INFINITY;
    return 0;
}

static double round_up(double x, double res);

/* from_running(now, free_now, running, resolution): running holds (end, _, job) in end
 * order; each end is rounded up to the resolution from now, as resolution.round_up does. */
static PyObject *Profile_from_running(PyObject *type, PyObject *args)
{
    double now, res;
    long long free_now;
    PyObject *running;
    if (!PyArg_ParseTuple(args, "dLOd", &now, &free_now, &running, &res))
        return NULL;
    PyObject *seq = PySequence_Fast(running, "running must be a sequence");
    if (!seq)
        return NULL;
    Profile *p = (Profile *)PyObject_CallFunction(type, "dL", now, free_now);
    if (!p) {
        Py_DECREF(seq);
        return NULL;
    }
    Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
    double previous = -INFINITY;
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, k);
        PyObject *procs_obj = NULL;
        long long procs;
        double end;
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 3) {
            PyErr_SetString(PyExc_TypeError, "running: (end, _, job) tuples");
            goto fail;
        }
        end = PyFloat_AsDouble(PyTuple_GET_ITEM(item, 0));
        if (end == -1.0 && PyErr_Occurred())
            goto fail;
        if (end < previous) {
            PyErr_SetString(PyExc_ValueError, "running: not in end order");
            goto fail;
        }
        previous = end;
        procs_obj = PyObject_GetAttr(PyTuple_GET_ITEM(item, 2), s_procs);
        if (!procs_obj || as_long_long(procs_obj, &procs)) {
            Py_XDECREF(procs_obj);
            goto fail;
        }
        Py_DECREF(procs_obj);
        double t = res > 0 ? now + round_up(end - now, res) : end;
        if (t < now)
            t = now;
        if (t == p->t[p->n - 1]) {
            p->f[p->n - 1] += procs;
        } else {
            if (reserve_room(p, p->n + 1))
                goto fail;
            p->t[p->n] = t;
            p->f[p->n] = p->f[p->n - 1] + procs;
            p->n++;
        }
    }
    p->t[p->n] = INFINITY;
    Py_DECREF(seq);
    return (PyObject *)p;
fail:
    Py_DECREF(seq);
    Py_DECREF(p);
    return NULL;
}

static void Profile_dealloc(Profile *p)
{
    free(p->t);
    free(p->f);
    free(p->freed.m);
    Py_TYPE(p)->tp_free((PyObject *)p);
}

static PyObject *Profile_advance(Profile *p, PyObject *arg)
{
    double now = PyFloat_AsDouble(arg);
    if (PyErr_Occurred())
        return NULL;
    advance(p, now);
    Py_RETURN_NONE;
}

static PyObject *Profile_reserve(Profile *p, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"start", "duration", "procs", NULL};
    double start, duration;
    long long procs;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "ddL", names, &start, &duration, &procs) ||
        reserve(p, start, duration, procs))
        return NULL;
    Py_RETURN_NONE;
}

/* release(start, duration, procs): reserve(start, duration, -procs), the stretch logged
 * as freed for the next compress_queue(..., settled=True) */
static PyObject *Profile_release(Profile *p, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"start", "duration", "procs", NULL};
    double start, duration;
    long long procs;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "ddL", names, &start, &duration, &procs) ||
        reserve(p, start, duration, -procs))
        return NULL;
    if (duration > 0 && log_move(&p->freed, p, start, start + duration, procs))
        return PyErr_NoMemory();
    Py_RETURN_NONE;
}

static PyObject *Profile_add_release(Profile *p, PyObject *args)
{
    double t;
    long long procs;
    if (!PyArg_ParseTuple(args, "dL", &t, &procs))
        return NULL;
    Py_ssize_t i = split(p, t);
    if (i < 0)
        return NULL;
    for (Py_ssize_t k = i; k < p->n; k++)
        p->f[k] += procs;
    Py_RETURN_NONE;
}

static PyObject *maybe(double t)
{
    if (isnan(t))
        Py_RETURN_NONE;
    return PyFloat_FromDouble(t);
}

static PyObject *Profile_earliest(Profile *p, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"procs", "duration", "after", NULL};
    long long procs;
    double duration, after;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "Ldd", names, &procs, &duration, &after))
        return NULL;
    return maybe(earliest(p, procs, duration, after));
}

static PyObject *Profile_earlier_start(Profile *p, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"procs", "duration", "slot", NULL};
    long long procs;
    double duration, slot;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "Ldd", names, &procs, &duration, &slot))
        return NULL;
    return PyFloat_FromDouble(earlier_start(p, procs, duration, slot));
}

static PyObject *Profile_fits(Profile *p, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"procs", "duration", "start", NULL};
    long long procs;
    double duration, start;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "Ldd", names, &procs, &duration, &start))
        return NULL;
    return PyBool_FromLong(fits(p, procs, duration, start));
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The feasible start closest to target, not before after (ties: the earlier). */
static PyObject *Profile_nearest(Profile *p, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"procs", "duration", "target", "after", NULL};
    long long procs;
    double duration, target, after;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "Lddd", names, &procs, &duration, &target, &after))
        return NULL;
    double *c = malloc(sizeof(double) * (size_t)(2 * p->n + 2));
    if (!c)
        return PyErr_NoMemory();
    Py_ssize_t m = 0;
    c[m++] = target > after ? target : after;
    for (Py_ssize_t k = 0; k < p->n; k++) {
        if (p->t[k] >= after)
            c[m++] = p->t[k];
        if (p->t[k] - duration >= after)
            c[m++] = p->t[k] - duration;
    }
    double first = earliest(p, procs, duration, after);
    if (!isnan(first))
        c[m++] = first;
    qsort(c, (size_t)m, sizeof(double), cmp_double);
    double best = NAN, best_gap = INFINITY;
    for (Py_ssize_t k = 0; k < m; k++) {
        if (k && c[k] == c[k - 1])
            continue;
        if (fits(p, procs, duration, c[k])) {
            double gap = fabs(c[k] - target);
            if (gap < best_gap) {
                best_gap = gap;
                best = c[k];
            }
        }
    }
    free(c);
    return maybe(best);
}

static PyObject *Profile_compact(Profile *p, PyObject *noargs)
{
    compact(p);
    Py_RETURN_NONE;
}

static PyObject *Profile_free_at(Profile *p, PyObject *arg)
{
    double t = PyFloat_AsDouble(arg);
    if (PyErr_Occurred())
        return NULL;
    Py_ssize_t i = search_right(p, t) - 1;
    return PyLong_FromLongLong(p->f[i < 0 ? 0 : i]);
}

static PyObject *Profile_copy(Profile *p, PyObject *noargs)
{
    Profile *q = PyObject_New(Profile, &ProfileType);
    if (!q)
        return NULL;
    q->t = NULL;
    q->f = NULL;
    q->n = q->cap = 0;
    q->freed = (MoveLog){NULL, 0, 0};
    if (reserve_room(q, p->n + 1)) {
        Py_DECREF(q);
        return NULL;
    }
    if (p->freed.n) { /* the releases not compressed for yet */
        if (!(q->freed.m = malloc(sizeof(Move) * (size_t)p->freed.n))) {
            Py_DECREF(q);
            return PyErr_NoMemory();
        }
        memcpy(q->freed.m, p->freed.m, sizeof(Move) * (size_t)p->freed.n);
        q->freed.n = q->freed.cap = p->freed.n;
    }
    memcpy(q->t, p->t, (size_t)(p->n + 1) * sizeof(double));
    memcpy(q->f, p->f, (size_t)p->n * sizeof(long long));
    q->n = p->n;
    return (PyObject *)q;
}

/* Conservative backfilling's compression (Mu'alem and Feitelson) of q waiting jobs in queue
 * order: each reservation taken out and made again as early as it fits, again up to the
 * last one moved, until nothing moves; then neighbouring segments with one count are
 * merged. A job with no slot (NAN: queued since the last pass) is reserved behind the
 * others. slot[] is updated in place, moved[] marks the jobs given a new slot (NAN where
 * nothing fits). Returns 0, 1 if a reservation lies in the past (rebuild instead), -1 on
 * error.
 *
 * The first pass tries every job (what the ended job freed is not known here). After it,
 * only a move frees processors: a job moved from `old` to t frees its procs on [max(old,
 * t + d), old + d), where every segment had between lo and hi - procs free before. A job
 * is tried again only if such a stretch could let it move (see "Which jobs a pass tries").
 *
 * With `settled`, the caller vouches that the reservations were as compressed (or made in
 * queue order, each as early as it fit) when the last compression ended, and that room was
 * freed since only by release(), which logs it as a move: then the first pass too tries
 * only the jobs those releases could let move. */

/* the stretch [from, to) of the profile, just freed of procs processors, as a Move */
static Move freed_stretch(const Profile *p, double from, double to, long long procs)
{
    long long lo = LLONG_MAX, hi = LLONG_MIN;
    for (Py_ssize_t k = search_right(p, from) - 1; k < p->n && p->t[k] < to; k++) {
        long long f = p->f[k < 0 ? 0 : k];
        lo = f < lo ? f : lo;
        hi = f > hi ? f : hi;
    }
    return (Move){from, to, lo - procs, hi};
}

static int log_move(MoveLog *log, const Profile *p, double from, double to, long long procs)
{
    if (grow_by_one((void **)&log->m, log->n, &log->cap, sizeof(Move), 256))
        return -1;
    log->m[log->n++] = freed_stretch(p, from, to, procs);
    return 0;
}

/* Which jobs a pass tries. A job that failed its last try had too few free just before
 * its slot and no hole long enough before that. It can move only once a move (or a
 * release) freed room for its count (lo < P <= hi) before its slot, and only if that move
 * freed the stretch just before its slot (from < slot <= to) or a hole as long as the job
 * now meets a stretch a move freed: the last move to free room in that hole found it
 * whole (only reservations came after, and they would have cut it), so that move's
 * longest run meeting its stretch, looked at any time since, is as long. A job so helped
 * is woken: the pass tries it when it reaches it (this pass or the next); the others
 * sleep, each count's by slot, and no pass looks at them. */
typedef struct {
    long long procs;
    unsigned gen;
    int cls;
} ClassSlot;

#define CLASS_SLOTS 256
typedef struct {
    long long *count;       /* a class's processor count */
    int n, cap;             /* classes */
    ClassSlot table[CLASS_SLOTS]; /* count to class, by generation, direct-mapped */
    unsigned gen;
} Classes;

/* kept between compressions, which run under the GIL and call no Python: nothing is
 * allocated per compression once the buffers are large enough */
static Classes classes;

/* the class of count P, made if new; -1 if out of memory */
static int class_of(Classes *c, long long P)
{
    ClassSlot *s = &c->table[(unsigned long long)P % CLASS_SLOTS];
    if (s->gen == c->gen && s->procs == P)
        return s->cls;
    if (s->gen == c->gen) /* taken by another count */
        for (int k = 0; k < c->n; k++)
            if (c->count[k] == P)
                return k;
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 16;
        long long *count = realloc(c->count, sizeof(long long) * (size_t)cap);
        if (!count)
            return -1;
        c->count = count;
        c->cap = cap;
    }
    if (s->gen != c->gen)
        *s = (ClassSlot){P, c->gen, c->n};
    c->count[c->n] = P;
    return c->n++;
}

/* the classes of q jobs' counts into cls[]; -1 if out of memory */
static int classes_for(Classes *c, Py_ssize_t q, const long long *procs, int *cls)
{
    if (++c->gen == 0) { /* wrapped: forget every generation */
        memset(c->table, 0, sizeof(c->table));
        c->gen = 1;
    }
    c->n = 0;
    for (Py_ssize_t k = 0; k < q; k++)
        if ((cls[k] = class_of(c, procs[k])) < 0)
            return -1;
    return 0;
}

/* The longest run of segments with at least P free that meets [from, to); `from` in
 * segment k (0 if before the first) */
static double run_meeting(const Profile *p, long long P, double from, double to, Py_ssize_t k)
{
    while (k > 0 && p->f[k] >= P && p->f[k - 1] >= P)
        k--;
    double longest = 0;
    for (Py_ssize_t start = -1; k <= p->n; k++) {
        if (k < p->n && p->f[k] >= P) {
            if (start < 0)
                start = k;
            continue;
        }
        if (start >= 0 && p->t[k] - p->t[start] > longest) /* t[n] is infinity */
            longest = p->t[k] - p->t[start];
        start = -1;
        if (k == p->n || p->t[k] >= to)
            break;
    }
    return longest;
}

typedef struct {
    double slot, bound; /* its slot, and the shortest run that holds it, as run_fit tests */
    Py_ssize_t k;       /* its place in the queue */
} Sleeper;

typedef struct {
    Sleeper *s; /* by slot */
    Py_ssize_t n, cap;
    double least_bound; /* no sleeper's bound is less */
} Sleepers;

/* a compression's sleeping jobs by class, and its woken ones: a bit per place in the queue
 * (kept between compressions, as the classes are) */
typedef struct {
    Sleepers *by_class;
    int cap;
    unsigned long long *woken;
    Py_ssize_t words;
    Sleeper *tmp; /* room to sort a class's sleepers */
    Py_ssize_t tmp_cap;
} Wakes;

static Wakes wakes;

static void wake(Wakes *w, Py_ssize_t k)
{
    w->woken[k >> 6] |= 1ull << (k & 63);
}

/* the first woken job at place k or after, q if none; its bit cleared */
static Py_ssize_t next_woken(Wakes *w, Py_ssize_t k, Py_ssize_t q)
{
    Py_ssize_t i = k >> 6, words = (q + 63) >> 6;
    if (k >= q)
        return q;
    unsigned long long bits = w->woken[i] & (~0ull << (k & 63));
    while (!bits) {
        if (++i == words)
            return q;
        bits = w->woken[i];
    }
    k = (i << 6) + __builtin_ctzll(bits);
    w->woken[i] &= ~(1ull << (k & 63));
    return k;
}

/* the first of s's sleepers with a slot after t, without branches on the data */
static Py_ssize_t sleeper_after(const Sleepers *s, double t)
{
    const Sleeper *b = s->s;
    Py_ssize_t len = s->n;
    while (len > 1) {
        Py_ssize_t half = len / 2;
        b = b[half - 1].slot <= t ? b + half : b;
        len -= half;
    }
    return (b - s->s) + (len == 1 && b->slot <= t);
}

/* job k, at `slot`, asleep in class c's sleepers (after those with a slot no later); -1 if
 * out of memory */
static int fall_asleep(Wakes *w, int c, double slot, double duration, Py_ssize_t k)
{
    Sleepers *s = &w->by_class[c];
    if (grow_by_one((void **)&s->s, s->n, &s->cap, sizeof(Sleeper), 64))
        return -1;
    Py_ssize_t lo = sleeper_after(s, slot);
    memmove(s->s + lo + 1, s->s + lo, sizeof(Sleeper) * (size_t)(s->n - lo));
    s->s[lo] = (Sleeper){slot, hole_bound(duration), k};
    s->least_bound = fmin(s->least_bound, s->s[lo].bound);
    s->n++;
    return 0;
}

/* wake class c's sleepers a freed stretch [from, to) may help (`from` in segment *at, or
 * not looked for yet if -1) */
static void wake_class(Wakes *w, const Profile *p, int c, long long procs, double from,
                       double to, Py_ssize_t *at)
{
    Sleepers *s = &w->by_class[c];
    Py_ssize_t lo = sleeper_after(s, from), x = lo, kept = lo;
    for (; x < s->n && s->s[x].slot <= to; x++) /* the stretch just before their slots freed */
        wake(w, s->s[x].k);
    if (x < s->n && *at < 0) {
        *at = search_right(p, from) - 1;
        *at = *at < 0 ? 0 : *at;
    }
    double run = x < s->n ? run_meeting(p, procs, from, to, *at) : 0;
    for (; x < s->n && run >= s->least_bound; x++) { /* a hole as long as them, maybe */
        if (run >= s->s[x].bound) {
            wake(w, s->s[x].k);
            continue;
        }
        if (kept != x)
            s->s[kept] = s->s[x];
        kept++;
    }
    memmove(s->s + kept, s->s + x, sizeof(Sleeper) * (size_t)(s->n - x));
    s->n = kept + (s->n - x);
}

/* wake the sleepers of every class a move's freed stretch may help */
static void wake_for(Wakes *w, const Classes *c, const Profile *p, const Move *m)
{
    Py_ssize_t at = -1;
    for (int k = 0; k < c->n; k++)
        if (m->lo < c->count[k] && c->count[k] <= m->hi && w->by_class[k].n)
            wake_class(w, p, k, c->count[k], m->from, m->to, &at);
}

/* s[lo, hi) by slot, by insertion */
static void insertion_sort(Sleeper *s, Py_ssize_t lo, Py_ssize_t hi)
{
    for (Py_ssize_t i = lo + 1; i < hi; i++) {
        Sleeper e = s[i];
        Py_ssize_t j = i;
        for (; j > lo && s[j - 1].slot > e.slot; j--)
            s[j] = s[j - 1];
        s[j] = e;
    }
}

/* s[0, n) by slot, stably: runs of RUN by insertion, then merged pairwise through tmp
 * (room for n); -1 if out of memory */
#define RUN 16
static int sort_by_slot(Sleeper *s, Py_ssize_t n, Sleeper **tmp, Py_ssize_t *tmp_cap)
{
    for (Py_ssize_t lo = 0; lo < n; lo += RUN)
        insertion_sort(s, lo, lo + RUN < n ? lo + RUN : n);
    if (n <= RUN)
        return 0;
    if (n > *tmp_cap) {
        Sleeper *t = realloc(*tmp, sizeof(Sleeper) * (size_t)n);
        if (!t)
            return -1;
        *tmp = t;
        *tmp_cap = n;
    }
    Sleeper *from = s, *to = *tmp;
    for (Py_ssize_t width = RUN; width < n; width *= 2) {
        for (Py_ssize_t lo = 0; lo < n; lo += 2 * width) {
            Py_ssize_t mid = lo + width < n ? lo + width : n;
            Py_ssize_t hi = lo + 2 * width < n ? lo + 2 * width : n, a = lo, b = mid, k = lo;
            while (a < mid && b < hi)
                to[k++] = from[b].slot < from[a].slot ? from[b++] : from[a++];
            while (a < mid)
                to[k++] = from[a++];
            while (b < hi)
                to[k++] = from[b++];
        }
        Sleeper *swap = from;
        from = to;
        to = swap;
    }
    if (from != s)
        memcpy(s, from, sizeof(Sleeper) * (size_t)n);
    return 0;
}

/* A compression's start: every job woken (NAN slots too: they are reserved on the first
 * pass), or with `settled` those with a slot asleep and woken only by the releases logged
 * since the last compression; -1 if out of memory */
static int wakes_start(Wakes *w, const Classes *c, const Profile *p, Py_ssize_t q,
                       const double *slot, const double *est, const int *cls,
                       const MoveLog *log, int settled)
{
    Py_ssize_t words = (q + 63) >> 6;
    if (words > w->words) {
        unsigned long long *b = realloc(w->woken, sizeof(*b) * (size_t)words);
        if (!b)
            return -1;
        w->woken = b;
        w->words = words;
    }
    if (c->n > w->cap) {
        Sleepers *s = realloc(w->by_class, sizeof(Sleepers) * (size_t)c->n);
        if (!s)
            return -1;
        memset(s + w->cap, 0, sizeof(Sleepers) * (size_t)(c->n - w->cap));
        w->by_class = s;
        w->cap = c->n;
    }
    memset(w->woken, 0, sizeof(*w->woken) * (size_t)words);
    for (int k = 0; k < c->n; k++) {
        w->by_class[k].n = 0;
        w->by_class[k].least_bound = INFINITY;
    }
    for (Py_ssize_t k = 0; k < q; k++) {
        if (!settled || isnan(slot[k])) {
            wake(w, k);
            continue;
        }
        Sleepers *s = &w->by_class[cls[k]];
        if (grow_by_one((void **)&s->s, s->n, &s->cap, sizeof(Sleeper), 64))
            return -1;
        s->s[s->n++] = (Sleeper){slot[k], hole_bound(est[k]), k};
        s->least_bound = fmin(s->least_bound, s->s[s->n - 1].bound);
    }
    for (int k = 0; settled && k < c->n; k++)
        if (sort_by_slot(w->by_class[k].s, w->by_class[k].n, &w->tmp, &w->tmp_cap))
            return -1;
    for (Py_ssize_t e = 0; settled && e < log->n; e++)
        wake_for(w, c, p, &log->m[e]);
    return 0;
}

/* job k tried: moved to where it fits earliest if before its slot, and the sleepers the
 * stretch it frees may help woken; then asleep at its slot. 1 if it moved, -1 on error. */
static int try_job(Profile *p, Py_ssize_t k, const long long *procs, const double *est,
                   double *slot, RunCache *runs, const int *cls, Py_ssize_t *hint,
                   Py_ssize_t *near)
{
    double old = slot[k];
    /* its slot's segment, found from where it was last time (on the first pass, from the
     * job's tried before it) */
    Py_ssize_t i = hint[k] = search_left_from(p, old, hint[k] < 0 ? *near : hint[k]);
    *near = i;
    int err = 0, moved = 0;
    double t = earlier_at(p, &runs->r[cls[k]], procs[k], est[k], old, i, &err);
    if (err)
        return -1;
    if (t != old) {
        if (reserve(p, old, est[k], -procs[k]) || reserve(p, t, est[k], procs[k]))
            return -1;
        runs_changed(runs, t);
        double from = fmax(old, t + est[k]);
        if (from < old + est[k]) {
            Move freed = freed_stretch(p, from, old + est[k], procs[k]);
            wake_for(&wakes, &classes, p, &freed);
        }
        slot[k] = t;
        moved = 1;
    }
    return fall_asleep(&wakes, cls[k], slot[k], est[k], k) ? -1 : moved;
}

static int compress_pass(Profile *p, Py_ssize_t q, const long long *procs, const double *est,
                         double *slot, char *moved, double now, RunCache *runs,
                         Py_ssize_t *hint, int *cls, const MoveLog *log, int settled)
{
    advance(p, now);
    Py_ssize_t past = q; /* the first job whose reservation lies in the past, if any */
    for (Py_ssize_t k = 0; k < q; k++) {
        if (slot[k] < now && past == q)
            past = k;
        hint[k] = -1; /* its slot's segment not looked for yet */
    }
    if (classes_for(&classes, q, procs, cls) || runs_reset(runs, classes.n, classes.count) ||
        wakes_start(&wakes, &classes, p, q, slot, est, cls, log, settled))
        return -1;
    Py_ssize_t limit = q;
    while (limit) { /* a job moved up may leave room for one ahead of it: pass again */
        Py_ssize_t last = -1, near = 0;
        for (Py_ssize_t k = next_woken(&wakes, 0, q); k < q; k = next_woken(&wakes, k + 1, q)) {
            if ((k >= limit && last < 0) || k >= past)
                break;
            if (isnan(slot[k])) { /* queued since the last pass: reserved behind the others */
                if (moved[k])
                    continue; /* reserved already, and nothing fits it */
                double t = earliest(p, procs[k], est[k], now);
                moved[k] = 1;
                slot[k] = t;
                if (!isnan(t) && reserve(p, t, est[k], procs[k]))
                    return -1;
                if (!isnan(t)) {
                    runs_changed(runs, t);
                    wake(&wakes, k); /* tried on the next pass */
                }
                continue;
            }
            int rc = try_job(p, k, procs, est, slot, runs, cls, hint, &near);
            if (rc < 0)
                return -1;
            if (rc) {
                moved[k] = 1;
                last = k;
            }
        }
        if (past < q)
            return 1; /* found on the first pass, as the jobs before it were tried */
        limit = last > 0 ? last : 0;
        compact(p); /* the runs' times stay */
    }
    return 0;
}

static int compress_core(Profile *p, Py_ssize_t q, const long long *procs, const double *est,
                         double *slot, char *moved, double now, int settled)
{
    static RunCache runs; /* kept, as the classes are */
    Py_ssize_t *hint = malloc(sizeof(Py_ssize_t) * (size_t)(q ? q : 1));
    int *cls = malloc(sizeof(int) * (size_t)(q ? q : 1));
    int rc = hint && cls ? compress_pass(p, q, procs, est, slot, moved, now, &runs, hint, cls,
                                         &p->freed, settled)
                         : -1;
    if (rc < 0 && !PyErr_Occurred())
        PyErr_NoMemory();
    p->freed.n = 0; /* the releases are compressed for (or the caller rebuilds) */
    free(hint);
    free(cls);
    return rc;
}

typedef struct {
    long long *procs;
    double *est, *slot;
    char *moved;
} Columns;

static int columns_alloc(Columns *c, Py_ssize_t q)
{
    size_t n = (size_t)(q ? q : 1);
    c->procs = malloc(sizeof(long long) * n);
    c->est = malloc(sizeof(double) * n);
    c->slot = malloc(sizeof(double) * n);
    c->moved = calloc(n, 1);
    if (c->procs && c->est && c->slot && c->moved)
        return 0;
    PyErr_NoMemory();
    return -1;
}

static void columns_free(Columns *c)
{
    free(c->procs);
    free(c->est);
    free(c->slot);
    free(c->moved);
}

static int slot_of(PyObject *s, double *out)
{
    if (s == Py_None) {
        *out = NAN;
        return 0;
    }
    *out = PyFloat_AsDouble(s);
    return *out == -1.0 && PyErr_Occurred() ? -1 : 0;
}

/* compress_core over c; nonzero when the caller is done: *out is None if a reservation
 * lies in the past, NULL on an error */
static int compressed(Profile *p, Py_ssize_t q, Columns *c, double now, int settled,
                      PyObject **out)
{
    int past = compress_core(p, q, c->procs, c->est, c->slot, c->moved, now, settled);
    if (past > 0) {
        Py_INCREF(Py_None);
        *out = Py_None;
    }
    return past;
}

/* (sequence, now) arguments: the sequence as a fast sequence (a new reference), or NULL */
static PyObject *sequence_and_now(PyObject *args, double *now)
{
    PyObject *seq;
    if (!PyArg_ParseTuple(args, "Od", &seq, now))
        return NULL;
    return PySequence_Fast(seq, "expected a sequence of jobs or queue entries");
}

/* compress(jobs, now) -> None if a reservation lies in the past (rebuild instead), else a
 * list with each job's new slot (None where nothing fits) or False where it did not move.
 * jobs: a sequence of (procs, estimate, slot or None) of the waiting jobs in queue order. */
static PyObject *Profile_compress(Profile *p, PyObject *args)
{
    PyObject *out = NULL;
    double now;
    PyObject *fast = sequence_and_now(args, &now);
    if (!fast)
        return NULL;
    Py_ssize_t q = PySequence_Fast_GET_SIZE(fast);
    Columns c = {0};
    if (columns_alloc(&c, q))
        goto done;
    for (Py_ssize_t k = 0; k < q; k++) {
        PyObject *item = PySequence_Fast_GET_ITEM(fast, k), *s;
        if (!PyArg_ParseTuple(item, "LdO", &c.procs[k], &c.est[k], &s) || slot_of(s, &c.slot[k]))
            goto done;
    }
    if (compressed(p, q, &c, now, 0, &out))
        goto done; /* None, or an error */
    out = PyList_New(q);
    for (Py_ssize_t k = 0; out && k < q; k++) {
        PyObject *v;
        if (!c.moved[k]) {
            v = Py_False;
            Py_INCREF(v);
        } else {
            v = maybe(c.slot[k]);
        }
        PyList_SET_ITEM(out, k, v);
    }
done:
    Py_DECREF(fast);
    columns_free(&c);
    return out;
}

/* compress_queue(queue, now, settled=False): compress() over a scheduler's queue of (key,
 * job) entries (started jobs skipped), reading each job's procs, estimate and slot, and
 * setting slot (and reserved, where it had none) on the jobs that moved. Returns None if a
 * reservation lies in the past (nothing set: rebuild instead), else [(slot, index, job)]
 * for the jobs given a slot, in queue order. settled: as compress_pass says. */
static PyObject *Profile_compress_queue(Profile *p, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"queue", "now", "settled", NULL};
    double now;
    int settled = 0;
    PyObject *seq, *out = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "Od|p", names, &seq, &now, &settled))
        return NULL;
    PyObject *fast = PySequence_Fast(seq, "expected a sequence of queue entries");
    if (!fast)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast), q = 0;
    PyObject **waiting = malloc(sizeof(PyObject *) * (size_t)(n ? n : 1));
    Columns c = {0};
    if (!waiting) {
        PyErr_NoMemory();
        goto done;
    }
    if (columns_alloc(&c, n))
        goto done;
    Slots sl = {0};
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *entry = PySequence_Fast_GET_ITEM(fast, k);
        if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) < 2) {
            PyErr_SetString(PyExc_TypeError, "queue entries are (key, job)");
            goto done;
        }
        PyObject *job = PyTuple_GET_ITEM(entry, 1), *v;
        if (k == 0)
            slots_for(&sl, job);
        if (!(v = job_attr(&sl, job, sl.start, s_start)))
            goto done;
        int started = v != Py_None;
        Py_DECREF(v);
        if (started)
            continue;
        int bad = !(v = job_attr(&sl, job, sl.procs, s_procs)) || as_long_long(v, &c.procs[q]);
        Py_XDECREF(v);
        if (bad || !(v = job_attr(&sl, job, sl.estimate, s_estimate)))
            goto done;
        c.est[q] = PyFloat_AsDouble(v);
        Py_DECREF(v);
        if (PyErr_Occurred() || !(v = job_attr(&sl, job, sl.slot, s_slot)))
            goto done;
        bad = slot_of(v, &c.slot[q]);
        Py_DECREF(v);
        if (bad)
            goto done;
        waiting[q++] = job;
    }
    if (compressed(p, q, &c, now, settled, &out))
        goto done; /* None, or an error */
    if (!(out = PyList_New(0)))
        goto done;
    for (Py_ssize_t k = 0; k < q; k++) {
        if (!c.moved[k])
            continue;
        PyObject *job = waiting[k], *t = maybe(c.slot[k]), *reserved = NULL, *index = NULL;
        int bad = !t || PyObject_SetAttr(job, s_slot, t);
        if (!bad && t != Py_None) {
            bad = !(reserved = PyObject_GetAttr(job, s_reserved))
                  || (reserved == Py_None && PyObject_SetAttr(job, s_reserved, t))
                  || !(index = PyObject_GetAttr(job, s_index));
            PyObject *e = bad ? NULL : PyTuple_Pack(3, t, index, job);
            bad = bad || !e || PyList_Append(out, e);
            Py_XDECREF(e);
        }
        Py_XDECREF(t);
        Py_XDECREF(reserved);
        Py_XDECREF(index);
        if (bad) {
            Py_CLEAR(out);
            goto done;
        }
    }
done:
    Py_DECREF(fast);
    free(waiting);
    columns_free(&c);
    return out;
}

static double round_up(double x, double res)
{
    if (!(res > 0))
        return x;
    double steps = ceil(x / res - 1e-9);
    return (x > 0 && steps < 1 ? 1 : steps) * res; /* a positive time is at least one step */
}

/* Slurm's backfill plan over a scheduler's queue, entries (key, job) in priority order:
 * jobs already started are skipped, at most max_test others are looked at. A job that fits
 * now starts (its reservation begins now); one that does not is reserved at its earliest
 * start if that lies within window, and a job with no reserved time yet gets that one;
 * durations are rounded up to res. Stops once free_now is below smallest (the smallest
 * queued job). Returns the jobs that start now, in queue order. */
static PyObject *Profile_plan(Profile *p, PyObject *args)
{
    PyObject *queue;
    double now, window, res;
    long long free_now, smallest;
    Py_ssize_t max_test;
    if (!PyArg_ParseTuple(args, "OdLLddn", &queue, &now, &free_now, &smallest, &window, &res,
                          &max_test))
        return NULL;
    PyObject *fast = PySequence_Fast(queue, "the queue must be a sequence");
    if (!fast)
        return NULL;
    PyObject *out = PyList_New(0);
    if (!out) {
        Py_DECREF(fast);
        return NULL;
    }
    advance(p, now);
    Py_ssize_t q = PySequence_Fast_GET_SIZE(fast), tested = 0;
    for (Py_ssize_t k = 0; k < q && tested < max_test && free_now >= smallest; k++) {
        PyObject *entry = PySequence_Fast_GET_ITEM(fast, k);
        if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) < 2) {
            PyErr_SetString(PyExc_TypeError, "queue entries are (key, job)");
            goto fail;
        }
        PyObject *job = PyTuple_GET_ITEM(entry, 1);
        PyObject *start = PyObject_GetAttr(job, s_start);
        if (!start)
            goto fail;
        int waiting = start == Py_None;
        Py_DECREF(start);
        if (!waiting)
            continue;
        tested++;
        PyObject *po = PyObject_GetAttr(job, s_procs), *eo;
        if (!po)
            goto fail;
        long long procs = PyLong_AsLongLong(po);
        Py_DECREF(po);
        eo = PyObject_GetAttr(job, s_estimate);
        if (!eo)
            goto fail;
        double est = PyFloat_AsDouble(eo);
        Py_DECREF(eo);
        if (PyErr_Occurred())
            goto fail;
        double duration = round_up(est, res), t;
        if (procs <= free_now && fits(p, procs, duration, now)) {
            t = now;
            free_now -= procs;
        } else {
            t = earliest(p, procs, duration, now);
            if (isnan(t) || !(t - now < window))
                continue;
        }
        if (reserve(p, t, duration, procs))
            goto fail;
        if (t == now) {
            if (PyList_Append(out, job))
                goto fail;
            continue;
        }
        PyObject *reserved = PyObject_GetAttr(job, s_reserved);
        if (!reserved)
            goto fail;
        int unset = reserved == Py_None;
        Py_DECREF(reserved);
        PyObject *when = unset ? PyFloat_FromDouble(t) : NULL;
        if (unset && (!when || PyObject_SetAttr(job, s_reserved, when))) {
            Py_XDECREF(when);
            goto fail;
        }
        Py_XDECREF(when);
    }
    Py_DECREF(fast);
    return out;
fail:
    Py_DECREF(fast);
    Py_DECREF(out);
    return NULL;
}

static PyObject *array_of(Profile *p, int times)
{
    PyObject *out = PyList_New(p->n);
    for (Py_ssize_t k = 0; out && k < p->n; k++)
        PyList_SET_ITEM(out, k, times ? PyFloat_FromDouble(p->t[k])
                                      : PyLong_FromLongLong(p->f[k]));
    return out;
}

static PyObject *Profile_times(Profile *p, void *c) { return array_of(p, 1); }
static PyObject *Profile_free(Profile *p, void *c) { return array_of(p, 0); }
static Py_ssize_t Profile_len(Profile *p) { return p->n; }

static PyMethodDef Profile_methods[] = {
    {"advance", (PyCFunction)Profile_advance, METH_O, "drop what lies before now"},
    {"reserve", (PyCFunction)(void (*)(void))Profile_reserve, METH_VARARGS | METH_KEYWORDS, "reserve(start, duration, procs)"},
    {"release", (PyCFunction)(void (*)(void))Profile_release, METH_VARARGS | METH_KEYWORDS,
     "release(start, duration, procs): reserve(start, duration, -procs), logged as freed"},
    {"add_release", (PyCFunction)Profile_add_release, METH_VARARGS, "add_release(t, procs)"},
    {"earliest", (PyCFunction)(void (*)(void))Profile_earliest, METH_VARARGS | METH_KEYWORDS,
     "earliest(procs, duration, after) -> time or None"},
    {"earlier_start", (PyCFunction)(void (*)(void))Profile_earlier_start, METH_VARARGS | METH_KEYWORDS,
     "earlier_start(procs, duration, slot) -> time"},
    {"fits", (PyCFunction)(void (*)(void))Profile_fits, METH_VARARGS | METH_KEYWORDS, "fits(procs, duration, start)"},
    {"nearest", (PyCFunction)(void (*)(void))Profile_nearest, METH_VARARGS | METH_KEYWORDS,
     "nearest(procs, duration, target, after) -> time or None"},
    {"compact", (PyCFunction)Profile_compact, METH_NOARGS, "merge equal neighbours"},
    {"free_at", (PyCFunction)Profile_free_at, METH_O, "processors free at t"},
    {"copy", (PyCFunction)Profile_copy, METH_NOARGS, "an independent copy"},
    {"compress", (PyCFunction)Profile_compress, METH_VARARGS,
     "compress(jobs, now) -> new slots (False: unmoved), or None to rebuild"},
    {"from_running", (PyCFunction)Profile_from_running, METH_VARARGS | METH_CLASS,
     "from_running(now, free_now, running, resolution) -> Profile"},
    {"compress_queue", (PyCFunction)(void (*)(void))Profile_compress_queue,
     METH_VARARGS | METH_KEYWORDS,
     "compress_queue(queue, now, settled=False) -> [(slot, index, job)] moved, or None to "
     "rebuild"},
    {"plan", (PyCFunction)Profile_plan, METH_VARARGS,
     "plan(queue, now, free_now, smallest, window, resolution, max_test) -> [job starting now]"},
    {NULL}};

static PyGetSetDef Profile_getset[] = {
    {"times", (getter)Profile_times, NULL, "breakpoints", NULL},
    {"free", (getter)Profile_free, NULL, "free processors from each breakpoint", NULL},
    {NULL}};

static PySequenceMethods Profile_sequence = {.sq_length = (lenfunc)Profile_len};

static PyTypeObject ProfileType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "emulator.scheduling._profile.Profile",
    .tp_basicsize = sizeof(Profile),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Free processors over time (see emulator/scheduling/profile.py).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Profile_init,
    .tp_dealloc = (destructor)Profile_dealloc,
    .tp_methods = Profile_methods,
    .tp_getset = Profile_getset,
    .tp_as_sequence = &Profile_sequence,
};

/* _slot_order(slots) -> the places of slots in the order compression keeps its sleeping
 * jobs (by slot, ties in place order), for the tests */
static PyObject *slot_order(PyObject *module, PyObject *arg)
{
    PyObject *fast = PySequence_Fast(arg, "expected a sequence of slots"), *out = NULL;
    if (!fast)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast), cap = 0;
    Sleeper *s = malloc(sizeof(Sleeper) * (size_t)(n ? n : 1)), *tmp = NULL;
    for (Py_ssize_t k = 0; s && k < n; k++) {
        s[k] = (Sleeper){PyFloat_AsDouble(PySequence_Fast_GET_ITEM(fast, k)), 0, k};
        if (s[k].slot == -1.0 && PyErr_Occurred())
            goto done;
    }
    if (!s || sort_by_slot(s, n, &tmp, &cap)) {
        PyErr_NoMemory();
        goto done;
    }
    out = PyList_New(n);
    for (Py_ssize_t k = 0; out && k < n; k++)
        PyList_SET_ITEM(out, k, PyLong_FromSsize_t(s[k].k));
done:
    Py_DECREF(fast);
    free(s);
    free(tmp);
    return out;
}

static PyMethodDef module_methods[] = {
    {"_slot_order", slot_order, METH_O, "the order compression keeps sleeping jobs in"},
    {NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_profile",
                                    "Availability profiles in C.", -1, module_methods};

PyMODINIT_FUNC PyInit__profile(void)
{
    if (PyType_Ready(&ProfileType) < 0)
        return NULL;
    s_start = PyUnicode_InternFromString("start");
    s_procs = PyUnicode_InternFromString("procs");
    s_estimate = PyUnicode_InternFromString("estimate");
    s_slot = PyUnicode_InternFromString("slot");
    s_reserved = PyUnicode_InternFromString("reserved");
    s_index = PyUnicode_InternFromString("index");
    if (!s_start || !s_procs || !s_estimate || !s_slot || !s_reserved || !s_index)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    Py_INCREF(&ProfileType);
    if (PyModule_AddObject(m, "Profile", (PyObject *)&ProfileType)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
