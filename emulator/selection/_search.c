/* The embedding searches of emulator/selection/maxmin.py in C, on bitsets of 64-bit words.
 *
 * embed:  subgraph monomorphism of a pattern into a thresholded graph, placing the open
 *         position with the fewest nodes left first, with forward checking over tables of
 *         node relations (adjacency, common-neighbour counts) and symmetry conditions;
 * clique: an m-clique by branch and bound with a greedy-colouring bound (Tomita's MCQ).
 *
 * Both may be told node groups to avoid (the group found must leave each of them), stop at
 * a CLOCK_MONOTONIC deadline (the clock of Python's time.monotonic), and run without the GIL.
 * They return (1, nodes) when found, (0, None) when there is none, (-1, None) out of time.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <time.h>

typedef uint64_t word;

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int count_bits(const word *a, int w)
{
    int c = 0;
    for (int i = 0; i < w; i++)
        c += __builtin_popcountll(a[i]);
    return c;
}

static int is_empty(const word *a, int w)
{
    for (int i = 0; i < w; i++)
        if (a[i])
            return 0;
    return 1;
}

/* a & ~b == 0 */
static int inside(const word *a, const word *b, int w)
{
    for (int i = 0; i < w; i++)
        if (a[i] & ~b[i])
            return 0;
    return 1;
}

/* (a & ~b) != 0 */
static int any_outside(const word *a, const word *b, int w)
{
    return !inside(a, b, w);
}

#define SET(a, v) ((a)[(v) >> 6] |= (word)1 << ((v)&63))
#define CLEAR(a, v) ((a)[(v) >> 6] &= ~((word)1 << ((v)&63)))

/* -- embed --------------------------------------------------------------------------- */

typedef struct {
    int n, w, m, n_avoid;
    const word *tables;   /* [table][node][w] */
    const word *everyone; /* [w] */
    const word *avoid;    /* [n_avoid][w] */
    int *link_start;      /* [m + 1] into link_q / link_t */
    const int *link_q, *link_t;
    int *big_start, *small_start; /* [m + 1] into big / small */
    const int *big, *small;
    word *domains; /* [m + 1][m][w]: the domains at each depth */
    word *used;    /* [m + 1][w] */
    word *scratch; /* [w] */
    word *above, *below; /* [w]: nodes above / below the one just placed */
    char *placed;
    int *assign;
    long steps;
    double deadline;
} Embed;

/* narrow the open positions list[from..to) to mask; 0 when one is left with no free node */
static int narrow(Embed *s, word *next, const word *used, const int *list, int from, int to,
                  const word *mask)
{
    for (int l = from; l < to; l++) {
        int q = list[l];
        if (s->placed[q])
            continue;
        word *dq = next + (size_t)q * s->w;
        for (int j = 0; j < s->w; j++)
            dq[j] &= mask[j];
        if (!any_outside(dq, used, s->w))
            return 0;
    }
    return 1;
}

static int embed_rec(Embed *s, int count)
{
    int w = s->w, m = s->m;
    word *used = s->used + (size_t)count * w;
    word *dom = s->domains + (size_t)count * m * w;
    word *free_ = s->scratch;
    if (count == m)
        return 1;
    for (int i = 0; i < w; i++)
        free_[i] = s->everyone[i] & ~used[i];
    if (count_bits(free_, w) < m - count)
        return 0; /* not enough nodes left */
    for (int g = 0; g < s->n_avoid; g++) { /* inside an avoided group with no way out */
        const word *grp = s->avoid + (size_t)g * w;
        if (inside(used, grp, w) && inside(free_, grp, w))
            return 0;
    }
    int pos = -1, best = 1 << 30;
    for (int p = 0; p < m; p++) { /* fail first */
        if (s->placed[p])
            continue;
        int c = 0;
        const word *d = dom + (size_t)p * w;
        for (int i = 0; i < w; i++)
            c += __builtin_popcountll(d[i] & ~used[i]);
        if (c < best) {
            best = c;
            pos = p;
        }
    }
    word cand[w];
    const word *d = dom + (size_t)pos * w;
    for (int i = 0; i < w; i++)
        cand[i] = d[i] & ~used[i];
    if (count == m - 1) /* the last node must take the group out of every avoided one */
        for (int g = 0; g < s->n_avoid; g++) {
            const word *grp = s->avoid + (size_t)g * w;
            if (inside(used, grp, w))
                for (int i = 0; i < w; i++)
                    cand[i] &= ~grp[i];
        }
    s->placed[pos] = 1;
    word *next_used = s->used + (size_t)(count + 1) * w;
    word *next = s->domains + (size_t)(count + 1) * m * w;
    for (int i = 0; i < w; i++) {
        while (cand[i]) {
            int v = (i << 6) + __builtin_ctzll(cand[i]);
            cand[i] &= cand[i] - 1;
            if ((++s->steps & 1023) == 0 && now_seconds() > s->deadline)
                return -1;
            s->assign[pos] = v;
            memcpy(next_used, used, (size_t)w * sizeof(word));
            SET(next_used, v);
            memcpy(next, dom, (size_t)m * w * sizeof(word));
            int ok = 1;
            for (int l = s->link_start[pos]; ok && l < s->link_start[pos + 1]; l++) {
                int q = s->link_q[l];
                if (s->placed[q])
                    continue;
                const word *row = s->tables + ((size_t)s->link_t[l] * s->n + v) * w;
                word *dq = next + (size_t)q * w;
                for (int j = 0; j < w; j++)
                    dq[j] &= row[j];
                ok = any_outside(dq, next_used, w);
            }
            if (ok) { /* symmetry: some positions must take a higher node, some a lower */
                for (int j = 0; j < w; j++) {
                    int lo = j << 6;
                    s->above[j] = lo + 63 <= v ? 0
                                  : lo <= v  ? ~((((word)2) << (v - lo)) - 1)
                                             : ~(word)0;
                    s->below[j] = lo >= v      ? 0
                                  : lo + 64 > v ? (((word)1) << (v - lo)) - 1
                                                : ~(word)0;
                }
                ok = narrow(s, next, next_used, s->big, s->big_start[pos], s->big_start[pos + 1],
                            s->above) &&
                     narrow(s, next, next_used, s->small, s->small_start[pos],
                            s->small_start[pos + 1], s->below);
            }
            if (ok) {
                int r = embed_rec(s, count + 1);
                if (r)
                    return r;
            }
        }
    }
    s->placed[pos] = 0;
    return 0;
}

static int buffer_ok(Py_buffer *b, Py_ssize_t len, const char *what)
{
    if (b->len != len) {
        PyErr_Format(PyExc_ValueError, "%s has %zd bytes, expected %zd", what, b->len, len);
        return 0;
    }
    return 1;
}

static int *offsets(const int *keys, Py_ssize_t count, int m)
{
    /* start of each position's run in a list sorted by key */
    int *start = calloc((size_t)m + 1, sizeof(int));
    if (!start)
        return NULL;
    for (Py_ssize_t i = 0; i < count; i++)
        start[keys[i] + 1]++;
    for (int p = 0; p < m; p++)
        start[p + 1] += start[p];
    return start;
}

/* (position, other) rows sorted by position: the others, and each position's start */
static int *split_pairs(const int *rows, Py_ssize_t count, int m, int *others, int *keys)
{
    for (Py_ssize_t i = 0; i < count; i++) {
        keys[i] = rows[2 * i];
        others[i] = rows[2 * i + 1];
        if (keys[i] < 0 || keys[i] >= m || others[i] < 0 || others[i] >= m ||
            (i && keys[i] < keys[i - 1])) {
            PyErr_SetString(PyExc_ValueError, "embed: bad symmetry condition");
            return NULL;
        }
    }
    int *start = offsets(keys, count, m);
    if (!start)
        PyErr_NoMemory();
    return start;
}

static PyObject *embed(PyObject *self, PyObject *args)
{
    (void)self;
    int n, w, m;
    double deadline;
    Py_buffer tables, everyone, domains, avoid, links, bigs, smalls;
    if (!PyArg_ParseTuple(args, "iiiy*y*y*y*y*y*y*d", &n, &w, &m, &tables, &everyone, &domains,
                          &avoid, &links, &bigs, &smalls, &deadline))
        return NULL;
    PyObject *result = NULL;
    Embed s = {0};
    Py_ssize_t row = (Py_ssize_t)w * sizeof(word);
    Py_ssize_t n_links = links.len / (3 * sizeof(int));
    Py_ssize_t n_big = bigs.len / (2 * sizeof(int)), n_small = smalls.len / (2 * sizeof(int));
    if (m < 1 || n < m || w * 64 < n || tables.len % (n * row) || avoid.len % row ||
        !buffer_ok(&everyone, row, "everyone") || !buffer_ok(&domains, m * row, "domains") ||
        links.len % (3 * sizeof(int)) || bigs.len % (2 * sizeof(int)) ||
        smalls.len % (2 * sizeof(int))) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "embed: inconsistent sizes");
        goto done;
    }
    /* links: (position, other position, table) rows sorted by position; bigs and smalls:
     * (position, other position) rows sorted by position */
    const int *lk = links.buf, *bg = bigs.buf, *sm = smalls.buf;
    int *keys = malloc((size_t)(n_links + n_big + n_small + 1) * sizeof(int));
    int *lq = malloc((size_t)(n_links + 1) * sizeof(int));
    int *lt = malloc((size_t)(n_links + 1) * sizeof(int));
    int *bq = malloc((size_t)(n_big + 1) * sizeof(int));
    int *sq = malloc((size_t)(n_small + 1) * sizeof(int));
    int n_tables = (int)(tables.len / (n * row));
    if (!keys || !lq || !lt || !bq || !sq) {
        PyErr_NoMemory();
        goto free_lists;
    }
    for (Py_ssize_t i = 0; i < n_links; i++) {
        keys[i] = lk[3 * i];
        lq[i] = lk[3 * i + 1];
        lt[i] = lk[3 * i + 2];
        if (keys[i] < 0 || keys[i] >= m || lq[i] < 0 || lq[i] >= m || lt[i] < 0 ||
            lt[i] >= n_tables || (i && keys[i] < keys[i - 1])) {
            PyErr_SetString(PyExc_ValueError, "embed: bad link");
            goto free_lists;
        }
    }
    s.link_start = offsets(keys, n_links, m);
    s.big_start = split_pairs(bg, n_big, m, bq, keys);
    if (!s.big_start)
        goto free_lists;
    s.small_start = split_pairs(sm, n_small, m, sq, keys);
    if (!s.small_start)
        goto free_lists;
    s.n = n, s.w = w, s.m = m, s.n_avoid = (int)(avoid.len / row);
    s.tables = tables.buf, s.everyone = everyone.buf, s.avoid = avoid.buf;
    s.link_q = lq, s.link_t = lt, s.big = bq, s.small = sq;
    s.domains = malloc((size_t)(m + 1) * m * row);
    s.used = calloc((size_t)(m + 1) * w, sizeof(word));
    s.scratch = malloc((size_t)row);
    s.above = malloc((size_t)row), s.below = malloc((size_t)row);
    s.placed = calloc((size_t)m, 1);
    s.assign = calloc((size_t)m, sizeof(int));
    s.deadline = deadline;
    if (!s.link_start || !s.big_start || !s.small_start || !s.domains || !s.used ||
        !s.scratch || !s.above || !s.below || !s.placed || !s.assign) {
        PyErr_NoMemory();
        goto free_state;
    }
    memcpy(s.domains, domains.buf, (size_t)m * row);
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = embed_rec(&s, 0);
    Py_END_ALLOW_THREADS
    if (status == 1) {
        PyObject *nodes = PyList_New(m);
        if (nodes) {
            for (int p = 0; p < m; p++)
                PyList_SET_ITEM(nodes, p, PyLong_FromLong(s.assign[p]));
            result = Py_BuildValue("(iNl)", 1, nodes, s.steps);
        }
    } else {
        result = Py_BuildValue("(iOl)", status, Py_None, s.steps);
    }
free_state:
    free(s.domains), free(s.used), free(s.scratch), free(s.above), free(s.below);
    free(s.placed), free(s.assign);
free_lists:
    free(s.link_start), free(s.big_start), free(s.small_start);
    free(keys), free(lq), free(lt), free(bq), free(sq);
done:
    PyBuffer_Release(&tables), PyBuffer_Release(&everyone), PyBuffer_Release(&domains);
    PyBuffer_Release(&avoid), PyBuffer_Release(&links), PyBuffer_Release(&bigs);
    PyBuffer_Release(&smalls);
    return result;
}

/* -- cliques -------------------------------------------------------------------------
 * An m-clique by branch and bound with a greedy-colouring bound (Tomita's MCQ): a candidate
 * set that colours with c colours holds no clique larger than c. Two uses:
 *   clique:      any m-clique of a given adjacency (a decision at one threshold);
 *   best_clique: the k m-cliques of largest bottleneck above `lower`, from the pair matrix.
 *                Once k are found, the threshold rises to the k-th best bottleneck and the
 *                search goes on with the adjacency of the new threshold, so the proof that
 *                nothing better exists is made once, not once per threshold and group. It
 *                stops early once the k-th best reaches `upper`. */

typedef struct {
    int n, w, m, n_avoid;
    const word *avoid;
    word *adj;      /* [n][w] */
    word *cands;    /* [m + 1][w] */
    word *used;     /* [m + 1][w] */
    int *order;     /* [m + 1][n] */
    int *colours;   /* [m + 1][n] */
    word *rest, *q; /* [w] scratch for colouring */
    int *chosen;
    long steps;
    double deadline;
    /* best_clique only (matrix == NULL for a decision) */
    const double *matrix; /* [N][N] */
    int N;
    double threshold, upper;
    int k, count;
    int *best;      /* [k][m], best first */
    double *best_b; /* [k] */
} Clique;

static int clique_alloc(Clique *s, int n, int w, int m, int k)
{
    size_t row = (size_t)w * sizeof(word);
    s->n = n, s->w = w, s->m = m, s->k = k;
    s->adj = malloc((size_t)n * row);
    s->cands = malloc((size_t)(m + 1) * row);
    s->used = calloc((size_t)(m + 1) * w, sizeof(word));
    s->order = malloc((size_t)(m + 1) * n * sizeof(int));
    s->colours = malloc((size_t)(m + 1) * n * sizeof(int));
    s->rest = malloc(row), s->q = malloc(row);
    s->chosen = calloc((size_t)m, sizeof(int));
    s->best = calloc((size_t)k * m, sizeof(int));
    s->best_b = calloc((size_t)k, sizeof(double));
    return s->adj && s->cands && s->used && s->order && s->colours && s->rest && s->q &&
           s->chosen && s->best && s->best_b;
}

static void clique_free(Clique *s)
{
    free(s->adj), free(s->cands), free(s->used), free(s->order), free(s->colours);
    free(s->rest), free(s->q), free(s->chosen), free(s->best), free(s->best_b);
}

/* the adjacency of pairs above the threshold */
static void rebuild(Clique *s)
{
    int n = s->n, w = s->w;
    memset(s->adj, 0, (size_t)n * w * sizeof(word));
    for (int a = 0; a < n; a++) {
        word *row = s->adj + (size_t)a * w;
        const double *src = s->matrix + (size_t)a * s->N;
        for (int b = 0; b < n; b++)
            if (b != a && src[b] > s->threshold)
                SET(row, b);
    }
}

static int colour_order(Clique *s, const word *cand, int *order, int *colours)
{
    int w = s->w, k = 0, colour = 0;
    memcpy(s->rest, cand, (size_t)w * sizeof(word));
    while (!is_empty(s->rest, w)) {
        colour++;
        memcpy(s->q, s->rest, (size_t)w * sizeof(word));
        for (int i = 0; i < w; i++) {
            while (s->q[i]) {
                int v = (i << 6) + __builtin_ctzll(s->q[i]);
                const word *row = s->adj + (size_t)v * w;
                CLEAR(s->rest, v);
                CLEAR(s->q, v);
                for (int j = i; j < w; j++)
                    s->q[j] &= ~row[j];
                order[k] = v;
                colours[k++] = colour;
            }
        }
    }
    return k;
}

/* a clique found: keep it among the k best; 1 stops the search */
static int found_clique(Clique *s)
{
    if (!s->matrix)
        return 1;
    double b = INFINITY;
    for (int i = 0; i < s->m; i++)
        for (int j = i + 1; j < s->m; j++) {
            double x = s->matrix[(size_t)s->chosen[i] * s->N + s->chosen[j]];
            b = x < b ? x : b;
        }
    int at = s->count < s->k ? s->count++ : s->k - 1; /* replace the worst when full */
    while (at > 0 && s->best_b[at - 1] < b) {
        s->best_b[at] = s->best_b[at - 1];
        memcpy(s->best + (size_t)at * s->m, s->best + (size_t)(at - 1) * s->m,
               (size_t)s->m * sizeof(int));
        at--;
    }
    s->best_b[at] = b;
    memcpy(s->best + (size_t)at * s->m, s->chosen, (size_t)s->m * sizeof(int));
    if (s->count == s->k && s->best_b[s->k - 1] > s->threshold) {
        s->threshold = s->best_b[s->k - 1];
        rebuild(s);
    }
    return s->count == s->k && s->best_b[s->k - 1] >= s->upper;
}

static int grow(Clique *s, int depth)
{
    int w = s->w, need = s->m - depth;
    if (need == 0)
        return found_clique(s);
    word *cand = s->cands + (size_t)depth * w;
    if (s->matrix) /* the threshold may have risen since cand was made */
        for (int i = 0; i < depth; i++) {
            const word *row = s->adj + (size_t)s->chosen[i] * w;
            for (int j = 0; j < w; j++)
                cand[j] &= row[j];
        }
    word *used = s->used + (size_t)depth * w;
    int *order = s->order + (size_t)depth * s->n, *colours = s->colours + (size_t)depth * s->n;
    int k = colour_order(s, cand, order, colours);
    word *next = s->cands + (size_t)(depth + 1) * w;
    word *now = s->used + (size_t)(depth + 1) * w;
    for (int i = k - 1; i >= 0; i--) {
        if (colours[i] < need)
            return 0;
        if ((++s->steps & 255) == 0 && now_seconds() > s->deadline)
            return -1;
        int v = order[i];
        int fits = (cand[v >> 6] >> (v & 63)) & 1; /* a rise of the threshold may drop v */
        for (int a = 0; a < depth && fits && s->matrix; a++)
            fits = (s->adj[(size_t)s->chosen[a] * w + (v >> 6)] >> (v & 63)) & 1;
        memcpy(now, used, (size_t)w * sizeof(word));
        SET(now, v);
        for (int g = 0; g < s->n_avoid && fits && need == 1; g++)
            fits = !inside(now, s->avoid + (size_t)g * w, w);
        if (!fits) {
            CLEAR(cand, v);
            continue;
        }
        s->chosen[depth] = v;
        const word *row = s->adj + (size_t)v * w;
        for (int j = 0; j < w; j++)
            next[j] = cand[j] & row[j];
        int r = grow(s, depth + 1);
        if (r)
            return r;
        CLEAR(cand, v);
    }
    return 0;
}

static PyObject *nodes_list(const int *nodes, int m)
{
    PyObject *list = PyList_New(m);
    if (list)
        for (int p = 0; p < m; p++)
            PyList_SET_ITEM(list, p, PyLong_FromLong(nodes[p]));
    return list;
}

static PyObject *clique(PyObject *self, PyObject *args)
{
    (void)self;
    int n, w, m;
    double deadline;
    Py_buffer adj, cand, avoid;
    if (!PyArg_ParseTuple(args, "iiiy*y*y*d", &n, &w, &m, &adj, &cand, &avoid, &deadline))
        return NULL;
    PyObject *result = NULL;
    Clique s = {0};
    Py_ssize_t row = (Py_ssize_t)w * sizeof(word);
    if (m < 1 || n < m || w * 64 < n || !buffer_ok(&adj, n * row, "adjacency") ||
        !buffer_ok(&cand, row, "candidates") || avoid.len % row) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "clique: inconsistent sizes");
        goto done;
    }
    if (!clique_alloc(&s, n, w, m, 1)) {
        PyErr_NoMemory();
        goto free_state;
    }
    s.n_avoid = (int)(avoid.len / row), s.avoid = avoid.buf, s.deadline = deadline;
    memcpy(s.adj, adj.buf, (size_t)n * row);
    memcpy(s.cands, cand.buf, (size_t)row);
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = grow(&s, 0);
    Py_END_ALLOW_THREADS
    if (status == 1) {
        PyObject *nodes = nodes_list(s.chosen, m);
        if (nodes)
            result = Py_BuildValue("(iNl)", 1, nodes, s.steps);
    } else {
        result = Py_BuildValue("(iOl)", status, Py_None, s.steps);
    }
free_state:
    clique_free(&s);
done:
    PyBuffer_Release(&adj), PyBuffer_Release(&cand), PyBuffer_Release(&avoid);
    return result;
}

static PyObject *best_clique(PyObject *self, PyObject *args)
{
    (void)self;
    int n, w, m, k;
    double lower, upper, deadline;
    Py_buffer matrix, cand, avoid;
    if (!PyArg_ParseTuple(args, "iiiiy*y*y*ddd", &n, &w, &m, &k, &matrix, &cand, &avoid,
                          &lower, &upper, &deadline))
        return NULL;
    PyObject *result = NULL;
    Clique s = {0};
    Py_ssize_t row = (Py_ssize_t)w * sizeof(word);
    if (m < 2 || k < 1 || n < m || w * 64 < n ||
        !buffer_ok(&matrix, (Py_ssize_t)n * n * (Py_ssize_t)sizeof(double), "matrix") ||
        !buffer_ok(&cand, row, "candidates") || avoid.len % row) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "best_clique: inconsistent sizes");
        goto done;
    }
    if (!clique_alloc(&s, n, w, m, k)) {
        PyErr_NoMemory();
        goto free_state;
    }
    s.n_avoid = (int)(avoid.len / row), s.avoid = avoid.buf, s.deadline = deadline;
    s.matrix = matrix.buf, s.N = n, s.threshold = lower, s.upper = upper;
    memcpy(s.cands, cand.buf, (size_t)row);
    int status;
    Py_BEGIN_ALLOW_THREADS
    rebuild(&s);
    status = grow(&s, 0);
    Py_END_ALLOW_THREADS
    PyObject *groups = PyList_New(s.count);
    for (int g = 0; groups && g < s.count; g++) {
        PyObject *nodes = nodes_list(s.best + (size_t)g * m, m);
        if (!nodes) {
            Py_CLEAR(groups);
            break;
        }
        PyList_SET_ITEM(groups, g, nodes);
    }
    /* status: -1 out of time (groups: the best so far), else done */
    if (groups)
        result = Py_BuildValue("(iNl)", status < 0 ? -1 : 1, groups, s.steps);
free_state:
    clique_free(&s);
done:
    PyBuffer_Release(&matrix), PyBuffer_Release(&cand), PyBuffer_Release(&avoid);
    return result;
}

static PyMethodDef methods[] = {
    {"best_clique", best_clique, METH_VARARGS,
     "best_clique(n, w, m, k, matrix, candidates, avoid, lower, upper, deadline)"},
    {"embed", embed, METH_VARARGS,
     "embed(n, w, m, tables, everyone, domains, avoid, links, bigs, smalls, deadline)"},
    {"clique", clique, METH_VARARGS, "clique(n, w, m, adjacency, candidates, avoid, deadline)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_search",
                                    "Embedding searches of node selection, in C.", -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__search(void) { return PyModule_Create(&module); }
