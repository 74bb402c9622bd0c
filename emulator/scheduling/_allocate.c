/* The processors each job of a schedule ran on: a sweep over the schedule in time order.
 *
 * allocate_runs(start, end, procs, processors, as_text=False) -> (runs, overfull)
 *
 * start, end, procs: 1-D float64 buffers, one entry per job; start is NaN for a job that never
 * started. runs: per job, a list of (first, count) runs of consecutive processor ids (empty for
 * a job that never started); with as_text, a str in Batsim's interval syntax instead ("0-3 8",
 * touching runs joined; "" for a job that never started). overfull: None, or (job index, free
 * processors) for the first job that starts on more processors than are free (the sweep
 * stops there).
 *
 * At one instant ends come first, then starts in job order, then jobs of no length (they end
 * as they start). A starting job takes the lowest free ids; a job of no length holds nothing and
 * is shown on the lowest free ids where there are enough, else on the first ones. Free ids are
 * kept as sorted runs that never touch, so a job costs the runs it touches.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    long long first, count;
} Run;

typedef struct {
    Run *runs;
    Py_ssize_t used, size;
} Runs;

typedef struct {
    double time;
    int kind;  /* 0 end, 1 start, 2 start of a job of no length */
    Py_ssize_t job;
} Event;

static int event_order(const void *pa, const void *pb) {
    const Event *a = pa, *b = pb;
    if (a->time != b->time)
        return a->time < b->time ? -1 : 1;
    if (a->kind != b->kind)
        return a->kind - b->kind;
    return (a->job > b->job) - (a->job < b->job);
}

static int runs_insert(Runs *r, Py_ssize_t at, Run run) {
    if (r->used == r->size) {
        Py_ssize_t size = r->size ? 2 * r->size : 64;
        Run *runs = PyMem_Realloc(r->runs, (size_t)size * sizeof(Run));
        if (!runs) {
            PyErr_NoMemory();
            return -1;
        }
        r->runs = runs;
        r->size = size;
    }
    memmove(r->runs + at + 1, r->runs + at, (size_t)(r->used - at) * sizeof(Run));
    r->runs[at] = run;
    r->used++;
    return 0;
}

static void runs_remove(Runs *r, Py_ssize_t at) {
    memmove(r->runs + at, r->runs + at + 1, (size_t)(r->used - at - 1) * sizeof(Run));
    r->used--;
}

/* The runs of the need lowest free ids appended to held; taken from free if take. */
static int lowest(Runs *free_runs, long long need, Runs *held, int take) {
    Py_ssize_t k = 0;
    while (need > 0 && k < free_runs->used) {
        Run *run = &free_runs->runs[k];
        Run part = {run->first, run->count < need ? run->count : need};
        if (runs_insert(held, held->used, part) < 0)
            return -1;
        need -= part.count;
        if (!take)
            k++;
        else if (part.count == run->count)
            runs_remove(free_runs, k);
        else {
            run->first += part.count;
            run->count -= part.count;
        }
    }
    return 0;
}

/* Free the ids of run, joining the runs it touches. */
static int give(Runs *free_runs, Run run) {
    Py_ssize_t lo = 0, hi = free_runs->used;
    while (lo < hi) {  /* the first free run after it */
        Py_ssize_t mid = (lo + hi) / 2;
        if (free_runs->runs[mid].first < run.first)
            lo = mid + 1;
        else
            hi = mid;
    }
    Run *runs = free_runs->runs;
    if (lo > 0 && runs[lo - 1].first + runs[lo - 1].count == run.first) {
        lo--;
        runs[lo].count += run.count;
    } else if (runs_insert(free_runs, lo, run) < 0) {
        return -1;
    }
    runs = free_runs->runs;
    if (lo + 1 < free_runs->used && runs[lo].first + runs[lo].count == runs[lo + 1].first) {
        runs[lo].count += runs[lo + 1].count;
        runs_remove(free_runs, lo + 1);
    }
    return 0;
}

typedef struct {
    Runs free_runs, held;  /* held: every job's runs, job by job as they start */
    Py_ssize_t *offset, *count;  /* a job's runs in held */
    long long left;
} Sweep;

/* One event; 1 if the job does not fit (the sweep stops), -1 on an error. */
static int sweep_event(Sweep *s, const Event *e, long long need) {
    Py_ssize_t k = e->job;
    if (e->kind == 0) {
        for (Py_ssize_t r = 0; r < s->count[k]; r++) {
            Run run = s->held.runs[s->offset[k] + r];
            if (give(&s->free_runs, run) < 0)
                return -1;
            s->left += run.count;
        }
        return 0;
    }
    s->offset[k] = s->held.used;
    if (e->kind == 2 && need > s->left) {
        Run all = {0, need};
        if (runs_insert(&s->held, s->held.used, all) < 0)
            return -1;
    } else if (e->kind == 1 && need > s->left) {
        return 1;
    } else if (lowest(&s->free_runs, need, &s->held, e->kind == 1) < 0) {
        return -1;
    }
    s->count[k] = s->held.used - s->offset[k];
    if (e->kind == 1)
        s->left -= need;
    return 0;
}

static int open_column(PyObject *obj, Py_buffer *view, Py_ssize_t *n) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return -1;
    if (view->ndim != 1 || view->itemsize != 8 || strcmp(view->format, "d") != 0 ||
        (*n >= 0 && view->shape[0] != *n)) {
        PyErr_SetString(PyExc_ValueError, "start, end and procs must be 1-D float64 of one length");
        return -1;
    }
    *n = view->shape[0];
    return 0;
}

/* The events of the jobs that started, in the sweep's order; NULL on an error. */
static Event *events_of(const double *start, const double *end, Py_ssize_t n, Py_ssize_t *used) {
    Event *events = PyMem_Malloc((size_t)(2 * n + 1) * sizeof(Event));
    if (!events) {
        PyErr_NoMemory();
        return NULL;
    }
    Py_ssize_t e = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        if (isnan(start[k]))
            continue;
        events[e++] = (Event){end[k], 0, k};
        events[e++] = (Event){start[k], end[k] <= start[k] ? 2 : 1, k};
    }
    qsort(events, (size_t)e, sizeof(Event), event_order);
    *used = e;
    return events;
}

/* Each job's runs as a list of (first, count) tuples. */
static PyObject *runs_lists(const Sweep *s, Py_ssize_t n) {
    PyObject *out = PyList_New(n);
    for (Py_ssize_t k = 0; out && k < n; k++) {
        PyObject *runs = PyList_New(s->count[k]);
        if (!runs) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, k, runs);
        for (Py_ssize_t r = 0; r < s->count[k]; r++) {
            Run run = s->held.runs[s->offset[k] + r];
            PyObject *pair = Py_BuildValue("(LL)", run.first, run.count);
            if (!pair) {
                Py_CLEAR(out);
                break;
            }
            PyList_SET_ITEM(runs, r, pair);
        }
    }
    return out;
}

/* n >= 0 in decimal at p, backwards; returns the new start. */
static char *put_decimal(char *p, long long n) {
    do {
        *--p = (char)('0' + n % 10);
        n /= 10;
    } while (n);
    return p;
}

/* A span of ids "a" or "a-b" appended to buf at *used (room for 41 bytes). */
static void put_span(char *buf, size_t *used, long long a, long long b) {
    char digits[48], *end = digits + sizeof digits, *p = put_decimal(end, b);
    if (a != b) {
        *--p = '-';
        p = put_decimal(p, a);
    }
    if (*used)
        buf[(*used)++] = ' ';
    memcpy(buf + *used, p, (size_t)(end - p));
    *used += (size_t)(end - p);
}

/* One job's runs in Batsim's interval syntax, touching runs joined. */
static PyObject *runs_text(const Run *runs, Py_ssize_t count) {
    char small[256], *buf = small;
    size_t used = 0;
    if (count > 5 && !(buf = PyMem_Malloc((size_t)count * 42)))
        return PyErr_NoMemory();
    for (Py_ssize_t r = 0; r < count;) {
        long long a = runs[r].first, b = a + runs[r].count - 1;
        for (r++; r < count && runs[r].first == b + 1; r++)
            b = runs[r].first + runs[r].count - 1;
        put_span(buf, &used, a, b);
    }
    PyObject *out = PyUnicode_FromStringAndSize(buf, (Py_ssize_t)used);
    if (buf != small)
        PyMem_Free(buf);
    return out;
}

/* Each job's runs as text (see runs_text). */
static PyObject *runs_texts(const Sweep *s, Py_ssize_t n) {
    PyObject *out = PyList_New(n);
    for (Py_ssize_t k = 0; out && k < n; k++) {
        PyObject *text = runs_text(s->held.runs + s->offset[k], s->count[k]);
        if (!text) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, k, text);
    }
    return out;
}

static PyObject *sweep(const double *start, const double *end, const double *procs,
                       Py_ssize_t n, long long processors, int as_text) {
    Sweep s = {{NULL, 0, 0}, {NULL, 0, 0}, NULL, NULL, processors};
    Py_ssize_t used = 0, stop = -1;
    PyObject *out = NULL;
    Event *events = events_of(start, end, n, &used);
    s.offset = PyMem_Calloc((size_t)(n ? n : 1), sizeof(Py_ssize_t));
    s.count = PyMem_Calloc((size_t)(n ? n : 1), sizeof(Py_ssize_t));
    if (!events || !s.offset || !s.count) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        goto done;
    }
    if (processors > 0 && runs_insert(&s.free_runs, 0, (Run){0, processors}) < 0)
        goto done;
    for (Py_ssize_t e = 0; e < used; e++) {
        int rc = sweep_event(&s, &events[e], (long long)procs[events[e].job]);
        if (rc < 0)
            goto done;
        if (rc > 0) {
            stop = events[e].job;
            break;
        }
    }
    PyObject *runs = as_text ? runs_texts(&s, n) : runs_lists(&s, n);
    if (runs && stop >= 0)
        out = Py_BuildValue("(N(nL))", runs, stop, s.left);
    else if (runs)
        out = Py_BuildValue("(NO)", runs, Py_None);
done:
    PyMem_Free(events);
    PyMem_Free(s.offset);
    PyMem_Free(s.count);
    PyMem_Free(s.free_runs.runs);
    PyMem_Free(s.held.runs);
    return out;
}

static PyObject *allocate_runs(PyObject *self, PyObject *args) {
    PyObject *objs[3];
    long long processors;
    int as_text = 0;
    Py_buffer views[3] = {{0}};
    Py_ssize_t n = -1, opened = 0;
    PyObject *out = NULL;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOL|p", &objs[0], &objs[1], &objs[2], &processors, &as_text))
        return NULL;
    for (; opened < 3; opened++)
        if (open_column(objs[opened], &views[opened], &n) < 0) {
            opened++;
            goto done;
        }
    out = sweep(views[0].buf, views[1].buf, views[2].buf, n, processors, as_text);
done:
    for (Py_ssize_t k = 0; k < opened; k++)
        if (views[k].obj)
            PyBuffer_Release(&views[k]);
    return out;
}

static PyMethodDef methods[] = {
    {"allocate_runs", allocate_runs, METH_VARARGS,
     "allocate_runs(start, end, procs, processors, as_text=False) -> (runs, overfull): each "
     "job's processors as runs (first, count), or as Batsim's interval text; see the module "
     "source."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_allocate",
                                    "The processors each job of a schedule ran on.", -1,
                                    methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__allocate(void) {
    return PyModule_Create(&module);
}
