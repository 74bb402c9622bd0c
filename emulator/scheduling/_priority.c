/* Slurm's multifactor priority in C: the state emulator/scheduling/priorities.py keeps in
 * Python (PythonPriorities, the reference), step by step the same numbers, without a Python
 * step per job, per user or per tick.
 *
 * - Usage on the association tree, decayed by its half-life every period (DecayedUsage in
 *   slurmshare.py): scaled[row] = usage / decay ** tick, running jobs as a rate per row,
 *   a start's or end's part of its period pending until the next tick.
 * - The fair-share factor of a user, once a tick: Fair Tree (for accounts of users under
 *   root, a user's rank counted when first asked for, as the users of the accounts ranked
 *   before its own and its siblings of a higher Level Fairshare; for any other tree, the
 *   walk level by level) or classic (2 ** (-effective usage / normalised shares)).
 * - A queued job's whole-number priority from its submit time, its user and the weighted
 *   factors that do not change while it waits; the queue sorted again by it.
 *
 * Priorities(period_seconds, half_life_seconds, fair_tree, w_age, w_fs, per_second)
 *   add_node(parent_row, shares, is_user) -> row: the tree grows a row at a time, root
 *       (parent -1) first, every row after its parent, siblings in the tree's order
 *   enter(submit, static, user_row) -> slot; forget(slot)
 *   advance(now); usage(row); scaled(row); tick
 *   factor(user_row, now); key(slot, now); keys(slots, now)
 *   started(slot, procs, now) -> the user's factor at now; finished(slot, now)
 *   resort(queue, ids, now) -> (queue, moved), or None where a key is not numbers:
 *       the scheduler's queue [((-priority, key, submit, index), job), ...], jobs started
 *       dropped, keys made anew, sorted (stable); ids maps a job to its slot
 *
 * Built with -ffp-contract=off: every sum and product is rounded as Python rounds it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 64 /* levels of the association tree, root included */

typedef struct {
    PyObject_HEAD
    double period, decay, w_age, w_fs, per_second;
    int fair_tree;
    /* the tree, by row: root is row 0 */
    Py_ssize_t rows, cap;
    Py_ssize_t *parent; /* -1: root */
    double *shares;     /* raw shares */
    double *level;      /* the children's shares, summed */
    char *user;
    Py_ssize_t n_users;
    /* the tree's shape, made again when it grew: children by row (CSR), two levels or not */
    int shape_ok, two_level;
    Py_ssize_t *kid_start, *kids, *kid_size; /* kid_size: a kid's own kids */
    double *share_norm; /* a row's shares over its siblings' (0 where they have none) */
    /* usage by row */
    double *scaled, *rate, *pending;
    char *has_pending;
    Py_ssize_t *pending_order, n_pending;
    long long tick;
    Py_ssize_t running;
    /* the factors of one tick: valid while the tick and the tree stay as they were */
    int memo_ok;
    double *factor, *lf; /* NAN until counted; Level Fairshare (Fair Tree) */
    double *kid_lf;      /* lf in the kids' order, for the counts of two_level_factor */
    long long memo, *users_memo; /* memos made; the one an account's users' lf are of */
    /* jobs by slot */
    Py_ssize_t slots, slot_cap, n_free;
    Py_ssize_t *free_slots, *j_user;
    double *j_submit, *j_static, *j_procs;
    char *j_running, *j_live;
    /* scratch */
    Py_ssize_t *order_nodes;
    double *order_values;
} Priorities;

static PyTypeObject PrioritiesType;

/* *p grown from `old` to `want` items of `size` bytes, the new ones zeroed */
static int grow(void **p, size_t size, Py_ssize_t old, Py_ssize_t want)
{
    void *q = PyMem_Realloc(*p, size * (size_t)(want ? want : 1));
    if (!q) {
        PyErr_NoMemory();
        return -1;
    }
    memset((char *)q + size * (size_t)old, 0, size * (size_t)(want - old));
    *p = q;
    return 0;
}

static int grow_rows(Priorities *s, Py_ssize_t want)
{
    if (want <= s->cap)
        return 0;
    Py_ssize_t old = s->cap, cap = want * 2;
    if (grow((void **)&s->parent, sizeof(Py_ssize_t), old, cap) ||
        grow((void **)&s->shares, sizeof(double), old, cap) ||
        grow((void **)&s->level, sizeof(double), old, cap) ||
        grow((void **)&s->user, 1, old, cap) ||
        grow((void **)&s->scaled, sizeof(double), old, cap) ||
        grow((void **)&s->rate, sizeof(double), old, cap) ||
        grow((void **)&s->pending, sizeof(double), old, cap) ||
        grow((void **)&s->has_pending, 1, old, cap) ||
        grow((void **)&s->pending_order, sizeof(Py_ssize_t), old, cap) ||
        grow((void **)&s->factor, sizeof(double), old, cap) ||
        grow((void **)&s->lf, sizeof(double), old, cap) ||
        grow((void **)&s->kid_start, sizeof(Py_ssize_t), old + 1, cap + 1) ||
        grow((void **)&s->kids, sizeof(Py_ssize_t), old, cap) ||
        grow((void **)&s->kid_size, sizeof(Py_ssize_t), old, cap) ||
        grow((void **)&s->kid_lf, sizeof(double), old, cap) ||
        grow((void **)&s->share_norm, sizeof(double), old, cap) ||
        grow((void **)&s->users_memo, sizeof(long long), old, cap) ||
        grow((void **)&s->order_nodes, sizeof(Py_ssize_t), old, cap) ||
        grow((void **)&s->order_values, sizeof(double), old, cap))
        return -1;
    s->cap = cap;
    return 0;
}

static int grow_slots(Priorities *s, Py_ssize_t want)
{
    if (want <= s->slot_cap)
        return 0;
    Py_ssize_t old = s->slot_cap, cap = want * 2;
    if (grow((void **)&s->free_slots, sizeof(Py_ssize_t), old, cap) ||
        grow((void **)&s->j_user, sizeof(Py_ssize_t), old, cap) ||
        grow((void **)&s->j_submit, sizeof(double), old, cap) ||
        grow((void **)&s->j_static, sizeof(double), old, cap) ||
        grow((void **)&s->j_procs, sizeof(double), old, cap) ||
        grow((void **)&s->j_running, 1, old, cap) ||
        grow((void **)&s->j_live, 1, old, cap))
        return -1;
    s->slot_cap = cap;
    return 0;
}

/* -- usage (DecayedUsage) ------------------------------------------------------------ */

/* Python's float floor division, as float_floor_div computes it */
static double py_floordiv(double vx, double wx)
{
    double mod = fmod(vx, wx);
    double div = (vx - mod) / wx;
    if (mod && ((wx < 0) != (mod < 0)))
        div -= 1.0;
    if (!div)
        return copysign(0.0, vx / wx);
    double floordiv = floor(div);
    if (div - floordiv > 0.5)
        floordiv += 1.0;
    return floordiv;
}

static double growth(const Priorities *s, long long tick)
{
    return pow(s->decay, (double)(-tick));
}

/* sum of growth(k) for k = a..b */
static double series(const Priorities *s, long long a, long long b)
{
    if (s->decay == 1.0)
        return (double)(b - a + 1);
    double r = 1.0 / s->decay;
    return pow(r, (double)a) * (pow(r, (double)(b - a + 1)) - 1.0) / (r - 1.0);
}

static void credit(Priorities *s, Py_ssize_t row, double amount, long long tick)
{
    amount *= growth(s, tick);
    for (Py_ssize_t r = row; r >= 0; r = s->parent[r])
        s->scaled[r] += amount;
}

static void advance(Priorities *s, double now)
{
    double t = py_floordiv(now, s->period);
    if (!(t > (double)s->tick)) /* also NaN */
        return;
    long long tick = (long long)t, first = s->tick + 1;
    for (Py_ssize_t i = 0; i < s->n_pending; i++) {
        Py_ssize_t u = s->pending_order[i];
        credit(s, u, s->pending[u], first);
        s->pending[u] = 0.0;
        s->has_pending[u] = 0;
    }
    s->n_pending = 0;
    if (s->running > 0) {
        double c = s->period * series(s, first, tick);
        for (Py_ssize_t r = 0; r < s->rows; r++)
            s->scaled[r] += s->rate[r] * c;
    }
    s->tick = tick;
    s->memo_ok = 0;
}

/* `procs` more processors for the user from now (fewer if negative); `seconds` of this
 * period counted at the next tick */
static void hold(Priorities *s, Py_ssize_t u, double procs, double seconds)
{
    for (Py_ssize_t r = u; r >= 0; r = s->parent[r])
        s->rate[r] += procs;
    if (!s->has_pending[u]) {
        s->has_pending[u] = 1;
        s->pending[u] = 0.0;
        s->pending_order[s->n_pending++] = u;
    }
    s->pending[u] = s->pending[u] + seconds;
}

/* -- the tree's shape ------------------------------------------------------------------ */

static void make_shape(Priorities *s)
{
    if (s->shape_ok)
        return;
    Py_ssize_t n = s->rows;
    memset(s->kid_start, 0, sizeof(Py_ssize_t) * (size_t)(n + 1));
    for (Py_ssize_t r = 1; r < n; r++)
        s->kid_start[s->parent[r] + 1]++;
    for (Py_ssize_t r = 0; r < n; r++)
        s->kid_start[r + 1] += s->kid_start[r];
    Py_ssize_t *fill = s->order_nodes; /* scratch: the next place of each parent's kids */
    for (Py_ssize_t r = 0; r < n; r++)
        fill[r] = s->kid_start[r];
    for (Py_ssize_t r = 1; r < n; r++)
        s->kids[fill[s->parent[r]]++] = r;
    for (Py_ssize_t i = 0; i + 1 < n; i++)
        s->kid_size[i] = s->kid_start[s->kids[i] + 1] - s->kid_start[s->kids[i]];
    for (Py_ssize_t r = 1; r < n; r++) {
        double level = s->level[s->parent[r]];
        s->share_norm[r] = level ? s->shares[r] / level : 0.0;
    }
    /* two levels: root's children are accounts, theirs are users, and there is a user */
    int two = s->n_users > 0;
    for (Py_ssize_t r = 1; r < n && two; r++) {
        Py_ssize_t p = s->parent[r];
        two = s->user[r] ? p > 0 && s->parent[p] == 0 : p == 0;
    }
    s->two_level = two;
    s->shape_ok = 1;
}

/* -- fair-share factors ---------------------------------------------------------------- */

/* Shares over usage, both as fractions of their level; no usage: first (inf) */
static double level_fairshare(double share, double used, double total)
{
    return used > 0 ? share / (used / total) : INFINITY;
}

/* Level Fairshare of root's children (two levels), also in the kids' order: at each memo */
static void two_level_lf(Priorities *s)
{
    double total = 0.0;
    for (Py_ssize_t i = s->kid_start[0]; i < s->kid_start[1]; i++)
        total += s->scaled[s->kids[i]];
    for (Py_ssize_t i = s->kid_start[0]; i < s->kid_start[1]; i++) {
        Py_ssize_t a = s->kids[i];
        s->lf[a] = s->kid_lf[i] = level_fairshare(s->share_norm[a], s->scaled[a], total);
    }
}

/* Level Fairshare of account a's users, also in the kids' order: once a memo, when the
 * first of them is asked for (a tick asks for few of the accounts) */
static void users_lf(Priorities *s, Py_ssize_t a)
{
    if (s->users_memo[a] == s->memo)
        return;
    double siblings = 0.0;
    for (Py_ssize_t j = s->kid_start[a]; j < s->kid_start[a + 1]; j++)
        siblings += s->scaled[s->kids[j]];
    for (Py_ssize_t j = s->kid_start[a]; j < s->kid_start[a + 1]; j++) {
        Py_ssize_t u = s->kids[j];
        s->lf[u] = s->kid_lf[j] = level_fairshare(s->share_norm[u], s->scaled[u], siblings);
    }
    s->users_memo[a] = s->memo;
}

/* the users ranked before u's run of ties: those of every account ranked before its own
 * (a higher Level Fairshare, ties by the tree's order), and its siblings of a higher one */
static double two_level_factor(Priorities *s, Py_ssize_t u)
{
    users_lf(s, s->parent[u]);
    Py_ssize_t p = s->parent[u], before = 0;
    double mine = s->lf[p], value = s->lf[u];
    const double *lf = s->kid_lf;
    const Py_ssize_t *kids = s->kids, *size = s->kid_size;
    for (Py_ssize_t i = s->kid_start[0]; i < s->kid_start[1]; i++)
        before += size[i] & -(Py_ssize_t)(lf[i] > mine || (lf[i] == mine && kids[i] < p));
    for (Py_ssize_t j = s->kid_start[p]; j < s->kid_start[p + 1]; j++)
        before += lf[j] > value;
    return (double)(s->n_users - before) / (double)s->n_users;
}

typedef struct {
    double value;
    Py_ssize_t node, place;
} Kid;

static int by_level_fairshare(const void *a, const void *b)
{
    const Kid *x = a, *y = b;
    if (x->value != y->value)
        return x->value > y->value ? -1 : 1; /* the highest first */
    return (x->place > y->place) - (x->place < y->place); /* then the tree's order */
}

/* Fair Tree's walk under `p`: users appended to the scratch order as met */
static int walk(Priorities *s, Py_ssize_t p, Py_ssize_t *n_order)
{
    Py_ssize_t first = s->kid_start[p], count = s->kid_start[p + 1] - first;
    if (!count)
        return 0;
    Kid *kids = PyMem_Malloc(sizeof(Kid) * (size_t)count);
    if (!kids) {
        PyErr_NoMemory();
        return -1;
    }
    double shares = s->level[p], used = 0.0;
    for (Py_ssize_t i = 0; i < count; i++)
        used += s->scaled[s->kids[first + i]];
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_ssize_t k = s->kids[first + i];
        double share = shares ? s->shares[k] / shares : 0.0;
        double u = used > 0 ? s->scaled[k] / used : 0.0;
        kids[i] = (Kid){u == 0 ? INFINITY : share / u, k, i};
    }
    qsort(kids, (size_t)count, sizeof(Kid), by_level_fairshare);
    int status = 0;
    for (Py_ssize_t i = 0; i < count && status == 0; i++) {
        if (s->user[kids[i].node]) {
            s->order_nodes[*n_order] = kids[i].node;
            s->order_values[(*n_order)++] = kids[i].value;
        } else {
            status = walk(s, kids[i].node, n_order);
        }
    }
    PyMem_Free(kids);
    return status;
}

static int walk_factors(Priorities *s)
{
    Py_ssize_t n = 0;
    if (walk(s, 0, &n) < 0)
        return -1;
    Py_ssize_t rank = s->n_users;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t node = s->order_nodes[i];
        if (i > 0 && (s->order_values[i] != s->order_values[i - 1] ||
                      s->parent[node] != s->parent[s->order_nodes[i - 1]]))
            rank = s->n_users - i;
        s->factor[node] = (double)rank / (double)s->n_users;
    }
    return 0;
}

static double classic_factor(const Priorities *s, Py_ssize_t u)
{
    Py_ssize_t chain[MAX_DEPTH], depth = 0; /* the user and its accounts, root left out */
    for (Py_ssize_t r = u; r > 0; r = s->parent[r])
        chain[depth++] = r;
    double root = s->scaled[0], effective = 0.0, shares_norm = 1.0;
    for (Py_ssize_t d = depth - 1; d >= 0; d--) { /* the top account first */
        Py_ssize_t n = chain[d];
        double level = s->level[s->parent[n]];
        double fraction = level ? s->shares[n] / level : 0.0;
        shares_norm *= fraction;
        double norm = root > 0 ? s->scaled[n] / root : 0.0;
        effective = d == depth - 1 ? norm : norm + (effective - norm) * fraction;
    }
    if (!shares_norm)
        return 0.0;
    return pow(2.0, -effective / shares_norm);
}

/* the memo ready for this tick and tree */
static int memo_ready(Priorities *s)
{
    if (s->memo_ok)
        return 0;
    make_shape(s);
    s->memo++;
    for (Py_ssize_t r = 0; r < s->rows; r++)
        s->factor[r] = NAN;
    if (s->fair_tree && s->n_users) {
        if (s->two_level)
            two_level_lf(s);
        else if (walk_factors(s) < 0)
            return -1;
    }
    s->memo_ok = 1;
    return 0;
}

/* the factor of user row u in the current tick; -1 with an exception set on error */
static int factor_of(Priorities *s, Py_ssize_t u, double *out)
{
    if (memo_ready(s) < 0)
        return -1;
    double f = s->factor[u];
    if (isnan(f)) {
        if (!s->fair_tree)
            f = classic_factor(s, u);
        else if (s->two_level)
            f = two_level_factor(s, u);
        else
            f = 0.0; /* not met by the walk: cannot be, every user is */
        s->factor[u] = f;
    }
    *out = f;
    return 0;
}

/* -- priorities ------------------------------------------------------------------------ */

static int check_slot(const Priorities *s, Py_ssize_t slot)
{
    if (slot < 0 || slot >= s->slots || !s->j_live[slot]) {
        PyErr_Format(PyExc_KeyError, "no job in slot %zd", slot);
        return -1;
    }
    return 0;
}

/* the key of the job in `slot` (its priority, negated, at most -1) */
static int key_of(Priorities *s, Py_ssize_t slot, double now, long long *out)
{
    double fs = 0.0;
    if (s->w_fs != 0.0 && factor_of(s, s->j_user[slot], &fs) < 0)
        return -1;
    double submit = s->j_submit[slot];
    double age = now > submit ? (now - submit) * s->per_second : 0.0;
    double sum = s->w_age * (age < 1.0 ? age : 1.0) + s->w_fs * fs + s->j_static[slot];
    if (!(fabs(sum) < 9.0e18)) {
        char text[32]; /* PyErr_Format has no %g */
        snprintf(text, sizeof text, "%g", sum);
        PyErr_Format(PyExc_ValueError, "a priority of %s cannot be kept whole", text);
        return -1;
    }
    long long priority = (long long)sum; /* int() truncates toward zero, as the cast */
    *out = priority > 1 ? -priority : -1;
    return 0;
}

/* keys advance the usage where Python's do: where the fair-share weight counts and, for
 * classic fair share, a job is asked for */
static void advance_for_keys(Priorities *s, double now, Py_ssize_t jobs)
{
    if (s->w_fs != 0.0 && (s->fair_tree || jobs > 0))
        advance(s, now);
}

/* -- the queue, sorted --------------------------------------------------------------- */

typedef struct {
    double priority, submit;
    long long key, index;
    Py_ssize_t place;
    PyObject *entry; /* new reference */
} Queued;

static int queued_before(const Queued *x, const Queued *y)
{
    if (x->priority != y->priority)
        return x->priority < y->priority;
    if (x->key != y->key)
        return x->key < y->key;
    if (x->submit != y->submit)
        return x->submit < y->submit;
    if (x->index != y->index)
        return x->index < y->index;
    return x->place < y->place;
}

/* a stable merge sort of a[0..n) through tmp (the queue is mostly in order already) */
static void merge_sort(Queued *a, Queued *tmp, Py_ssize_t n)
{
    Py_ssize_t i = 1;
    while (i < n && !queued_before(&a[i], &a[i - 1]))
        i++;
    if (i == n)
        return;
    for (Py_ssize_t width = 1; width < n; width *= 2) {
        for (Py_ssize_t lo = 0; lo < n; lo += 2 * width) {
            Py_ssize_t mid = lo + width < n ? lo + width : n;
            Py_ssize_t hi = lo + 2 * width < n ? lo + 2 * width : n, l = lo, r = mid, k = lo;
            while (l < mid && r < hi)
                tmp[k++] = queued_before(&a[r], &a[l]) ? a[r++] : a[l++];
            while (l < mid)
                tmp[k++] = a[l++];
            while (r < hi)
                tmp[k++] = a[r++];
        }
        memcpy(a, tmp, sizeof(Queued) * (size_t)n);
    }
}

/* 1 if `o` is an int or float read into *out (ints as their double), 0 if not, -1 on error */
static int number(PyObject *o, double *out)
{
    if (PyFloat_CheckExact(o)) {
        *out = PyFloat_AS_DOUBLE(o);
        return 1;
    }
    if (PyLong_CheckExact(o)) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (overflow || (v == -1 && PyErr_Occurred()) || llabs(v) > (1LL << 53)) {
            PyErr_Clear();
            return 0;
        }
        *out = (double)v;
        return 1;
    }
    return 0;
}

static PyObject *str_start;

/* the queued jobs (not started) of `queue`, their slots in the key field; returns how
 * many, or -1 (error) or -2 (a key that is not numbers) */
static Py_ssize_t gather(Priorities *s, PyObject *queue, PyObject *ids, Queued *out)
{
    Py_ssize_t n = PyList_GET_SIZE(queue), k = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *entry = PyList_GET_ITEM(queue, i);
        if (!PyTuple_CheckExact(entry) || PyTuple_GET_SIZE(entry) != 2 ||
            !PyTuple_CheckExact(PyTuple_GET_ITEM(entry, 0)) ||
            PyTuple_GET_SIZE(PyTuple_GET_ITEM(entry, 0)) != 4)
            return -2;
        PyObject *old = PyTuple_GET_ITEM(entry, 0), *job = PyTuple_GET_ITEM(entry, 1);
        PyObject *start = PyObject_GetAttr(job, str_start);
        if (!start)
            return -1;
        int waiting = start == Py_None;
        Py_DECREF(start);
        if (!waiting)
            continue;
        PyObject *slot_obj = PyDict_GetItemWithError(ids, job);
        if (!slot_obj) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_KeyError, "a queued job without its slot");
            return -1;
        }
        Py_ssize_t slot = PyLong_AsSsize_t(slot_obj);
        if ((slot == -1 && PyErr_Occurred()) || check_slot(s, slot) < 0)
            return -1;
        Queued *q = &out[k++];
        double index;
        if (number(PyTuple_GET_ITEM(old, 0), &q->priority) != 1 ||
            number(PyTuple_GET_ITEM(old, 2), &q->submit) != 1 ||
            !PyLong_CheckExact(PyTuple_GET_ITEM(old, 3)) ||
            number(PyTuple_GET_ITEM(old, 3), &index) != 1)
            return -2;
        q->index = (long long)index;
        q->key = slot;
        q->place = i;
        q->entry = entry; /* borrowed until made anew */
    }
    return k;
}

/* each gathered job's entry with its new key (the old one where the key did not change) */
static int remake_entries(Queued *q, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    for (; i < n; i++) {
        PyObject *old = PyTuple_GET_ITEM(q[i].entry, 0);
        long long was = PyLong_AsLongLong(PyTuple_GET_ITEM(old, 1));
        if (was == -1 && PyErr_Occurred())
            PyErr_Clear();
        else if (PyLong_CheckExact(PyTuple_GET_ITEM(old, 1)) && was == q[i].key) {
            Py_INCREF(q[i].entry);
            continue;
        }
        PyObject *key = PyLong_FromLongLong(q[i].key);
        PyObject *tuple = key ? PyTuple_New(4) : NULL;
        PyObject *entry = tuple ? PyTuple_New(2) : NULL;
        if (!entry) {
            Py_XDECREF(key);
            Py_XDECREF(tuple);
            break;
        }
        for (int j = 0; j < 4; j++) {
            PyObject *item = j == 1 ? key : PyTuple_GET_ITEM(old, j);
            if (j != 1)
                Py_INCREF(item);
            PyTuple_SET_ITEM(tuple, j, item);
        }
        PyObject *job = PyTuple_GET_ITEM(q[i].entry, 1);
        Py_INCREF(job);
        PyTuple_SET_ITEM(entry, 0, tuple);
        PyTuple_SET_ITEM(entry, 1, job);
        q[i].entry = entry;
    }
    if (i == n)
        return 0;
    for (Py_ssize_t j = 0; j < i; j++)
        Py_DECREF(q[j].entry);
    return -1;
}

static PyObject *Priorities_resort(Priorities *s, PyObject *args)
{
    PyObject *queue, *ids;
    double now;
    if (!PyArg_ParseTuple(args, "O!O!d", &PyList_Type, &queue, &PyDict_Type, &ids, &now))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(queue);
    Queued *q = PyMem_Malloc(sizeof(Queued) * (size_t)(2 * n + 1));
    if (!q)
        return PyErr_NoMemory();
    Py_ssize_t k = gather(s, queue, ids, q);
    if (k < 0) {
        PyMem_Free(q);
        if (PyErr_Occurred())
            return NULL;
        Py_RETURN_NONE; /* keys of other kinds: the scheduler sorts by keys() */
    }
    advance_for_keys(s, now, k); /* as the keys of the waiting jobs would */
    for (Py_ssize_t i = 0; i < k; i++) {
        if (key_of(s, (Py_ssize_t)q[i].key, now, &q[i].key) < 0) {
            PyMem_Free(q);
            return NULL;
        }
    }
    merge_sort(q, q + n, k);
    int moved = 0;
    for (Py_ssize_t i = 1; i < k && !moved; i++)
        moved = q[i].place < q[i - 1].place;
    if (remake_entries(q, k) < 0) {
        PyMem_Free(q);
        return NULL;
    }
    PyObject *out = PyList_New(k);
    if (!out) {
        for (Py_ssize_t i = 0; i < k; i++)
            Py_DECREF(q[i].entry);
        PyMem_Free(q);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < k; i++)
        PyList_SET_ITEM(out, i, q[i].entry);
    PyMem_Free(q);
    return Py_BuildValue("(NO)", out, moved ? Py_True : Py_False);
}

/* -- the type -------------------------------------------------------------------------- */

static int Priorities_init(Priorities *s, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"period_seconds", "half_life_seconds", "fair_tree", "w_age",
                             "w_fs", "per_second", NULL};
    double half_life;
    int fair_tree;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "ddpddd", kwlist, &s->period, &half_life,
                                     &fair_tree, &s->w_age, &s->w_fs, &s->per_second))
        return -1;
    if (!(s->period > 0)) {
        PyErr_SetString(PyExc_ValueError, "period_seconds must be positive");
        return -1;
    }
    if (s->cap) {
        PyErr_SetString(PyExc_TypeError, "Priorities is made once");
        return -1;
    }
    s->decay = half_life > 0 ? pow(2.0, -s->period / half_life) : 1.0;
    s->fair_tree = fair_tree;
    return grow_rows(s, 16) < 0 || grow_slots(s, 64) < 0 ? -1 : 0;
}

static void Priorities_dealloc(Priorities *s)
{
    void *arrays[] = {s->parent, s->shares, s->level, s->user, s->kid_start, s->kids,
                      s->kid_size, s->kid_lf, s->share_norm, s->users_memo,
                      s->scaled, s->rate, s->pending, s->has_pending, s->pending_order,
                      s->factor, s->lf, s->free_slots, s->j_user, s->j_submit, s->j_static,
                      s->j_procs, s->j_running, s->j_live, s->order_nodes, s->order_values};
    for (size_t i = 0; i < sizeof(arrays) / sizeof(arrays[0]); i++)
        PyMem_Free(arrays[i]);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

static PyObject *Priorities_add_node(Priorities *s, PyObject *args)
{
    Py_ssize_t parent;
    double shares;
    int is_user;
    if (!PyArg_ParseTuple(args, "ndp", &parent, &shares, &is_user))
        return NULL;
    Py_ssize_t row = s->rows;
    if (row == 0 ? parent != -1 : parent < 0 || parent >= row || s->user[parent]) {
        PyErr_Format(PyExc_ValueError, "row %zd: its parent must be %s", row,
                     row ? "an account made before it" : "-1 (root)");
        return NULL;
    }
    Py_ssize_t depth = 0;
    for (Py_ssize_t r = parent; r > 0; r = s->parent[r])
        depth++;
    if (depth >= MAX_DEPTH - 1) {
        PyErr_Format(PyExc_ValueError, "row %zd: the tree is deeper than %d levels", row,
                     MAX_DEPTH - 1);
        return NULL;
    }
    if (grow_rows(s, row + 1) < 0)
        return NULL;
    s->parent[row] = parent;
    s->shares[row] = shares;
    s->level[row] = 0.0;
    s->user[row] = (char)is_user;
    if (parent >= 0)
        s->level[parent] += shares;
    s->n_users += is_user;
    s->rows++;
    s->shape_ok = s->memo_ok = 0;
    return PyLong_FromSsize_t(row);
}

static int check_user(const Priorities *s, Py_ssize_t row)
{
    if (row < 0 || row >= s->rows || !s->user[row]) {
        PyErr_Format(PyExc_ValueError, "row %zd is not a user", row);
        return -1;
    }
    return 0;
}

static PyObject *Priorities_enter(Priorities *s, PyObject *args)
{
    double submit, fixed;
    Py_ssize_t user;
    if (!PyArg_ParseTuple(args, "ddn", &submit, &fixed, &user) || check_user(s, user) < 0)
        return NULL;
    Py_ssize_t slot = s->n_free ? s->free_slots[--s->n_free] : s->slots;
    if (slot == s->slots) {
        if (grow_slots(s, slot + 1) < 0)
            return NULL;
        s->slots++;
    }
    s->j_submit[slot] = submit;
    s->j_static[slot] = fixed;
    s->j_user[slot] = user;
    s->j_procs[slot] = 0.0;
    s->j_running[slot] = 0;
    s->j_live[slot] = 1;
    return PyLong_FromSsize_t(slot);
}

static PyObject *Priorities_forget(Priorities *s, PyObject *arg)
{
    Py_ssize_t slot = PyLong_AsSsize_t(arg);
    if ((slot == -1 && PyErr_Occurred()) || check_slot(s, slot) < 0)
        return NULL;
    if (s->j_running[slot]) {
        PyErr_Format(PyExc_ValueError, "the job in slot %zd is running", slot);
        return NULL;
    }
    s->j_live[slot] = 0;
    s->free_slots[s->n_free++] = slot;
    Py_RETURN_NONE;
}

static PyObject *Priorities_advance(Priorities *s, PyObject *arg)
{
    double now = PyFloat_AsDouble(arg);
    if (now == -1.0 && PyErr_Occurred())
        return NULL;
    advance(s, now);
    Py_RETURN_NONE;
}

static PyObject *row_value(Priorities *s, PyObject *arg, int decayed)
{
    Py_ssize_t row = PyLong_AsSsize_t(arg);
    if (row == -1 && PyErr_Occurred())
        return NULL;
    if (row < 0 || row >= s->rows)
        return PyFloat_FromDouble(0.0);
    return PyFloat_FromDouble(decayed ? s->scaled[row] / growth(s, s->tick) : s->scaled[row]);
}

static PyObject *Priorities_usage(Priorities *s, PyObject *arg)
{
    return row_value(s, arg, 1);
}

static PyObject *Priorities_scaled(Priorities *s, PyObject *arg)
{
    return row_value(s, arg, 0);
}

static PyObject *Priorities_factor(Priorities *s, PyObject *args)
{
    Py_ssize_t user;
    double now, f;
    if (!PyArg_ParseTuple(args, "nd", &user, &now) || check_user(s, user) < 0)
        return NULL;
    advance(s, now);
    if (factor_of(s, user, &f) < 0)
        return NULL;
    return PyFloat_FromDouble(f);
}

static PyObject *Priorities_key(Priorities *s, PyObject *args)
{
    Py_ssize_t slot;
    double now;
    long long key;
    if (!PyArg_ParseTuple(args, "nd", &slot, &now) || check_slot(s, slot) < 0)
        return NULL;
    advance_for_keys(s, now, 1);
    if (key_of(s, slot, now, &key) < 0)
        return NULL;
    return PyLong_FromLongLong(key);
}

static PyObject *Priorities_keys(Priorities *s, PyObject *args)
{
    PyObject *slots;
    double now;
    if (!PyArg_ParseTuple(args, "Od", &slots, &now))
        return NULL;
    PyObject *fast = PySequence_Fast(slots, "slots: a sequence");
    if (!fast)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    advance_for_keys(s, now, n);
    PyObject *out = PyList_New(n);
    for (Py_ssize_t i = 0; out && i < n; i++) {
        Py_ssize_t slot = PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(fast, i));
        long long key;
        PyObject *item = NULL;
        if (!(slot == -1 && PyErr_Occurred()) && check_slot(s, slot) == 0 &&
            key_of(s, slot, now, &key) == 0)
            item = PyLong_FromLongLong(key);
        if (!item)
            Py_CLEAR(out);
        else
            PyList_SET_ITEM(out, i, item);
    }
    Py_DECREF(fast);
    return out;
}

static PyObject *Priorities_started(Priorities *s, PyObject *args)
{
    Py_ssize_t slot;
    double procs, now, f;
    if (!PyArg_ParseTuple(args, "ndd", &slot, &procs, &now) || check_slot(s, slot) < 0)
        return NULL;
    if (s->j_running[slot]) {
        PyErr_Format(PyExc_ValueError, "the job in slot %zd is running already", slot);
        return NULL;
    }
    advance(s, now);
    if (factor_of(s, s->j_user[slot], &f) < 0)
        return NULL;
    s->j_running[slot] = 1;
    s->j_procs[slot] = procs;
    s->running++;
    hold(s, s->j_user[slot], procs, -procs * (now - (double)s->tick * s->period));
    return PyFloat_FromDouble(f);
}

static PyObject *Priorities_finished(Priorities *s, PyObject *args)
{
    Py_ssize_t slot;
    double now;
    if (!PyArg_ParseTuple(args, "nd", &slot, &now) || check_slot(s, slot) < 0)
        return NULL;
    advance(s, now);
    if (s->j_running[slot]) {
        double procs = s->j_procs[slot];
        s->j_running[slot] = 0;
        s->running--;
        hold(s, s->j_user[slot], -procs, procs * (now - (double)s->tick * s->period));
    }
    Py_RETURN_NONE;
}

static PyObject *Priorities_get_tick(Priorities *s, void *closure)
{
    return PyLong_FromLongLong(s->tick);
}

static PyObject *Priorities_get_rows(Priorities *s, void *closure)
{
    return PyLong_FromSsize_t(s->rows);
}

/* copy.deepcopy(priorities): an independent copy (a scheduler's snapshot copies its order) */
static PyObject *Priorities_deepcopy(Priorities *s, PyObject *memo)
{
    Priorities *c = (Priorities *)PrioritiesType.tp_alloc(&PrioritiesType, 0);
    if (!c)
        return NULL;
    c->period = s->period;
    c->decay = s->decay;
    c->w_age = s->w_age;
    c->w_fs = s->w_fs;
    c->per_second = s->per_second;
    c->fair_tree = s->fair_tree;
    if (grow_rows(c, s->cap) < 0 || grow_slots(c, s->slot_cap) < 0) {
        Py_DECREF(c);
        return NULL;
    }
    size_t r = (size_t)s->cap, j = (size_t)s->slot_cap;
#define COPY(field, count) memcpy(c->field, s->field, sizeof(*s->field) * (count))
    COPY(parent, r); COPY(shares, r); COPY(level, r); COPY(user, r); COPY(scaled, r);
    COPY(rate, r); COPY(pending, r); COPY(has_pending, r); COPY(pending_order, r);
    COPY(free_slots, j); COPY(j_user, j); COPY(j_submit, j); COPY(j_static, j);
    COPY(j_procs, j); COPY(j_running, j); COPY(j_live, j);
#undef COPY
    c->rows = s->rows;
    c->n_users = s->n_users;
    c->n_pending = s->n_pending;
    c->tick = s->tick;
    c->running = s->running;
    c->slots = s->slots;
    c->n_free = s->n_free;
    c->shape_ok = c->memo_ok = 0; /* made again when asked for */
    return (PyObject *)c;
}

static PyMethodDef Priorities_methods[] = {
    {"add_node", (PyCFunction)Priorities_add_node, METH_VARARGS,
     "add_node(parent_row, shares, is_user) -> row (root: parent -1, first)"},
    {"enter", (PyCFunction)Priorities_enter, METH_VARARGS,
     "enter(submit, static, user_row) -> slot: a job's part that does not change"},
    {"forget", (PyCFunction)Priorities_forget, METH_O, "forget(slot): the slot is free"},
    {"advance", (PyCFunction)Priorities_advance, METH_O,
     "advance(now): count every tick up to now"},
    {"usage", (PyCFunction)Priorities_usage, METH_O,
     "usage(row) -> the row's usage as of the last tick (processor-seconds, decayed)"},
    {"scaled", (PyCFunction)Priorities_scaled, METH_O,
     "scaled(row) -> the row's usage over decay ** -tick"},
    {"factor", (PyCFunction)Priorities_factor, METH_VARARGS,
     "factor(user_row, now) -> the user's fair-share factor"},
    {"key", (PyCFunction)Priorities_key, METH_VARARGS,
     "key(slot, now) -> the job's key: its whole-number priority, negated"},
    {"keys", (PyCFunction)Priorities_keys, METH_VARARGS, "keys(slots, now) -> [key, ...]"},
    {"started", (PyCFunction)Priorities_started, METH_VARARGS,
     "started(slot, procs, now) -> the user's factor at now; its usage counts from now"},
    {"finished", (PyCFunction)Priorities_finished, METH_VARARGS, "finished(slot, now)"},
    {"resort", (PyCFunction)Priorities_resort, METH_VARARGS,
     "resort(queue, ids, now) -> (queue, moved) or None: the waiting jobs by new keys"},
    {"__deepcopy__", (PyCFunction)Priorities_deepcopy, METH_O, "an independent copy"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Priorities_getset[] = {
    {"tick", (getter)Priorities_get_tick, NULL, "usage is counted up to tick x period", NULL},
    {"rows", (getter)Priorities_get_rows, NULL, "the tree's rows", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject PrioritiesType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "emulator.scheduling._priority.Priorities",
    .tp_basicsize = sizeof(Priorities),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Priorities(period_seconds, half_life_seconds, fair_tree, w_age, w_fs, "
              "per_second): Slurm's multifactor priority, its usage and fair share",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Priorities_init,
    .tp_dealloc = (destructor)Priorities_dealloc,
    .tp_methods = Priorities_methods,
    .tp_getset = Priorities_getset,
};

static struct PyModuleDef priority_module = {
    PyModuleDef_HEAD_INIT, "_priority", "Slurm's multifactor priority in C.", -1, NULL,
};

PyMODINIT_FUNC PyInit__priority(void)
{
    str_start = PyUnicode_InternFromString("start");
    if (!str_start || PyType_Ready(&PrioritiesType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&priority_module);
    if (!m)
        return NULL;
    Py_INCREF(&PrioritiesType);
    if (PyModule_AddObject(m, "Priorities", (PyObject *)&PrioritiesType) < 0) {
        Py_DECREF(&PrioritiesType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
