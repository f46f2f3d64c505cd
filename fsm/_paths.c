/* Path quantities over a complete transition table (structgen.fsm._paths): every row expanded,
 * table int32 [n, C], state 0 the dead state.
 *
 * distances_to_accept: the shortest accepted continuation of every state (a breadth-first
 * search backwards from the accepting states).
 * extend_nfa_distances: an NFA's distances to its final state for the states added since the last
 *   call (Dijkstra over the new states only).
 * reach_max: for every state, the largest of those distances over the states it can reach
 * (itself included): strongly connected components by Tarjan's algorithm (Tarjan 1972, "Depth-
 * first search and linear graph algorithms"), iterative, which finishes each component after
 * every component it reaches, so one pass over the components in that order suffices.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>

/* distances_to_accept(table, accepting, out) -> None
 *
 * Bytes in the shortest accepted continuation from each state of a complete transition table:
 * table int32 [n, C] (every row expanded), accepting uint8/bool [n], out int64 [n] (written;
 * states that reach no accepting one keep the value it holds).  A breadth-first search
 * backwards from the accepting states over the reverse edges (those into the dead state left
 * out: most of a table's), grouped by target with a counting sort: O(n * C).  Raises ValueError
 * for shapes that disagree or a target out of range.
 */
static PyObject *distances_to_accept(PyObject *self, PyObject *args) {
    PyObject *o_table, *o_acc, *o_out;
    Py_ssize_t n, C;
    if (!PyArg_ParseTuple(args, "OnnOO", &o_table, &n, &C, &o_acc, &o_out)) return NULL;
    Py_buffer tb, ab, ob;
    if (PyObject_GetBuffer(o_table, &tb, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return NULL;
    if (PyObject_GetBuffer(o_acc, &ab, PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&tb);
        return NULL;
    }
    if (PyObject_GetBuffer(o_out, &ob, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&ab);
        PyBuffer_Release(&tb);
        return NULL;
    }
    PyObject *result = NULL;
    int32_t *from = NULL, *start = NULL, *queue = NULL;
    if (n < 0 || C < 1 || tb.itemsize != 4 || tb.len != n * C * 4 || ab.itemsize != 1 || ab.len != n || ob.itemsize != 8 ||
        ob.len != n * 8) {
        PyErr_SetString(PyExc_ValueError, "distances_to_accept: table int32 [n, C], accepting bool [n], out int64 [n]");
        goto done;
    }
    const int32_t *table = (const int32_t *)tb.buf;
    const uint8_t *acc = (const uint8_t *)ab.buf;
    int64_t *dist = (int64_t *)ob.buf;
    const Py_ssize_t m = n * C;
    from = (int32_t *)malloc((size_t)(m ? m : 1) * sizeof(int32_t));
    start = (int32_t *)calloc((size_t)n + 2, sizeof(int32_t));
    queue = (int32_t *)malloc((size_t)(n ? n : 1) * sizeof(int32_t));
    if (!from || !start || !queue) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < m; i++) {
        int32_t t = table[i];
        if (t < 0 || t >= n) {
            PyErr_SetString(PyExc_ValueError, "distances_to_accept: a target outside 0..n-1 (a row not expanded?)");
            goto done;
        }
        start[t + 2]++;
    }
    start[2] = 0; /* edges into the dead state are never followed back (most edges of a table): left out */
    for (Py_ssize_t t = 0; t < n; t++) start[t + 2] += start[t + 1];
    for (Py_ssize_t q = 0, i = 0; q < n; q++) { /* start[t + 1] ends as t's end */
        for (Py_ssize_t c = 0; c < C; c++, i++) {
            int32_t t = table[i];
            if (t) from[start[t + 1]++] = (int32_t)q;
        }
    }
    Py_ssize_t head = 0, tail = 0;
    for (Py_ssize_t q = 0; q < n; q++) {
        if (acc[q]) {
            dist[q] = 0;
            queue[tail++] = (int32_t)q;
        }
    }
    char *seen = (char *)calloc((size_t)(n ? n : 1), 1);
    if (!seen) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t k = 0; k < tail; k++) seen[queue[k]] = 1;
    if (n) seen[0] = 1; /* the dead state: never on a path */
    while (head < tail) {
        int32_t t = queue[head++];
        for (int32_t j = start[t]; j < start[t + 1]; j++) {
            int32_t p = from[j];
            if (!seen[p]) {
                seen[p] = 1;
                dist[p] = dist[t] + 1;
                queue[tail++] = p;
            }
        }
    }
    free(seen);
    Py_INCREF(Py_None);
    result = Py_None;
done:
    free(from);
    free(start);
    free(queue);
    PyBuffer_Release(&ob);
    PyBuffer_Release(&ab);
    PyBuffer_Release(&tb);
    return result;
}


/* reach_max(table, n, C, dist, out) -> None
 *
 * out[s] = max(dist[t] for every state t reachable from s, s included), over table int32 [n, C]
 * (targets in 0..n-1; edges into the dead state 0 are ignored; out[0] = dist[0]) and dist int64
 * [n].  O(n * C) time, O(n) memory.  Raises ValueError for shapes that disagree or a target out
 * of range.
 */
static PyObject *reach_max(PyObject *self, PyObject *args) {
    PyObject *o_table, *o_dist, *o_out;
    Py_ssize_t n, C;
    if (!PyArg_ParseTuple(args, "OnnOO", &o_table, &n, &C, &o_dist, &o_out)) return NULL;
    Py_buffer tb, db, ob;
    if (PyObject_GetBuffer(o_table, &tb, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return NULL;
    if (PyObject_GetBuffer(o_dist, &db, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyBuffer_Release(&tb);
        return NULL;
    }
    if (PyObject_GetBuffer(o_out, &ob, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&db);
        PyBuffer_Release(&tb);
        return NULL;
    }
    PyObject *result = NULL;
    int32_t *index = NULL, *low = NULL, *comp = NULL, *scc = NULL, *frame_v = NULL, *frame_c = NULL;
    if (n < 1 || C < 1 || n > INT32_MAX || tb.itemsize != 4 || tb.len != n * C * 4 || db.itemsize != 8 || db.len != n * 8 ||
        ob.itemsize != 8 || ob.len != n * 8) {
        PyErr_SetString(PyExc_ValueError, "reach_max: table int32 [n, C], dist int64 [n], out int64 [n], n >= 1");
        goto done;
    }
    const int32_t *table = (const int32_t *)tb.buf;
    const int64_t *dist = (const int64_t *)db.buf;
    int64_t *out = (int64_t *)ob.buf;
    for (Py_ssize_t i = 0; i < n * C; i++) {
        if (table[i] < 0 || table[i] >= n) {
            PyErr_SetString(PyExc_ValueError, "reach_max: a target outside 0..n-1 (a row not expanded?)");
            goto done;
        }
    }
    size_t sz = (size_t)n * sizeof(int32_t);
    index = (int32_t *)malloc(sz);
    low = (int32_t *)malloc(sz);
    comp = (int32_t *)malloc(sz); /* -1: on the component stack or not visited; else finished */
    scc = (int32_t *)malloc(sz);
    frame_v = (int32_t *)malloc(sz);
    frame_c = (int32_t *)malloc(sz);
    if (!index || !low || !comp || !scc || !frame_v || !frame_c) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t s = 0; s < n; s++) index[s] = -1, comp[s] = -1;
    out[0] = dist[0];
    comp[0] = 0;
    index[0] = 0;
    int32_t counter = 1, sp = 0, fp = 0, ncomp = 1;
    for (int32_t root = 1; root < n; root++) {
        if (index[root] >= 0) continue;
        index[root] = low[root] = counter++;
        scc[sp++] = root;
        frame_v[fp] = root, frame_c[fp] = 0, fp++;
        while (fp) {
            int32_t v = frame_v[fp - 1];
            if (frame_c[fp - 1] < C) {
                const int32_t *row = table + (Py_ssize_t)v * C;
                int32_t c = frame_c[fp - 1];
                while (c < C && row[c] == 0) c++; /* edges into the dead state: skipped in one run */
                frame_c[fp - 1] = c + 1;
                if (c == C) continue;
                int32_t w = row[c];
                if (index[w] < 0) {
                    index[w] = low[w] = counter++;
                    scc[sp++] = w;
                    frame_v[fp] = w, frame_c[fp] = 0, fp++;
                } else if (comp[w] < 0 && index[w] < low[v]) {
                    low[v] = index[w]; /* w is on the component stack */
                }
                continue;
            }
            fp--;
            if (fp && low[v] < low[frame_v[fp - 1]]) low[frame_v[fp - 1]] = low[v];
            if (low[v] != index[v]) continue;
            int32_t base = sp; /* v's component: scc[base..sp) once base reaches v */
            while (scc[base - 1] != v) base--;
            base--;
            int64_t m = 0;
            for (int32_t k = base; k < sp; k++) comp[scc[k]] = ncomp;
            for (int32_t k = base; k < sp; k++) {
                int32_t x = scc[k];
                if (dist[x] > m) m = dist[x];
                const int32_t *row = table + (Py_ssize_t)x * C;
                for (Py_ssize_t c = 0; c < C; c++) {
                    int32_t w = row[c];
                    if (w != 0 && comp[w] != ncomp && out[w] > m) m = out[w]; /* finished before */
                }
            }
            for (int32_t k = base; k < sp; k++) out[scc[k]] = m;
            sp = base;
            ncomp++;
        }
    }
    Py_INCREF(Py_None);
    result = Py_None;
done:
    free(index);
    free(low);
    free(comp);
    free(scc);
    free(frame_v);
    free(frame_c);
    PyBuffer_Release(&ob);
    PyBuffer_Release(&db);
    PyBuffer_Release(&tb);
    return result;
}


/* extend_nfa_distances(dist, eps, edges, final, n0, stubs) -> None
 *
 * Bytes from each NFA state to ``final`` for the states n0 .. len(eps) - 1, written into the
 * list ``dist`` (already len(eps) long; entries below n0 exact, read; entries from n0 on
 * overwritten): Dijkstra (Dijkstra 1959) over the new states only, with a binary heap.  Edges:
 * eps[q] (list of ints, cost 0), edges[q] (list of (lo, hi, target) tuples, cost 1) and the
 * stubs, a list of (q, exit, cost) for pending stubs among the new states.  An edge into an old
 * state ends there at that state's exact distance (fragments only ever grow).  Unreachable
 * states get the value ``no_path``.  Raises TypeError / ValueError for malformed arguments.
 */
typedef struct {
    int64_t d;
    int32_t q;
} heap_item;

static void heap_push(heap_item *h, Py_ssize_t *size, int64_t d, int32_t q) {
    Py_ssize_t i = (*size)++;
    while (i > 0) {
        Py_ssize_t parent = (i - 1) / 2;
        if (h[parent].d <= d) break;
        h[i] = h[parent];
        i = parent;
    }
    h[i].d = d;
    h[i].q = q;
}

static heap_item heap_pop(heap_item *h, Py_ssize_t *size) {
    heap_item top = h[0], last = h[--(*size)];
    Py_ssize_t i = 0, n = *size;
    for (;;) {
        Py_ssize_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && h[c + 1].d < h[c].d) c++;
        if (h[c].d >= last.d) break;
        h[i] = h[c];
        i = c;
    }
    if (n) h[i] = last;
    return top;
}

static int64_t old_dist(PyObject *dist, Py_ssize_t r) {
    return PyLong_AsLongLong(PyList_GET_ITEM(dist, r));
}

/* the target of a (lo, hi, target) edge, tuple or list (borrowed); NULL with TypeError otherwise */
static PyObject *edge_target(PyObject *t) {
    if (PyTuple_Check(t) && PyTuple_GET_SIZE(t) == 3) return PyTuple_GET_ITEM(t, 2);
    if (PyList_Check(t) && PyList_GET_SIZE(t) == 3) return PyList_GET_ITEM(t, 2);
    PyErr_SetString(PyExc_TypeError, "extend_nfa_distances: edges are (lo, hi, target) triples");
    return NULL;
}

static PyObject *extend_nfa_distances(PyObject *self, PyObject *args) {
    PyObject *dist, *eps, *edges, *stubs;
    Py_ssize_t final, n0;
    long long no_path;
    if (!PyArg_ParseTuple(args, "O!O!O!nnO!L", &PyList_Type, &dist, &PyList_Type, &eps, &PyList_Type, &edges, &final, &n0,
                          &PyList_Type, &stubs, &no_path))
        return NULL;
    const Py_ssize_t n1 = PyList_GET_SIZE(eps);
    if (n0 < 0 || n0 > n1 || PyList_GET_SIZE(edges) < n1 || PyList_GET_SIZE(dist) != n1) {
        PyErr_SetString(PyExc_ValueError, "extend_nfa_distances: need 0 <= n0 <= len(eps) <= len(edges) and len(dist) == len(eps)");
        return NULL;
    }
    const Py_ssize_t m = n1 - n0;
    PyObject *result = NULL;
    int64_t *best = NULL, *scost = NULL;
    int32_t *start = NULL, *from = NULL, *sexit = NULL;
    int64_t *cost = NULL;
    heap_item *heap = NULL;
    int32_t *stub_of = NULL;
    Py_ssize_t nstubs = PyList_GET_SIZE(stubs), nrev = 0;
    best = (int64_t *)malloc((size_t)(m ? m : 1) * sizeof(int64_t));
    start = (int32_t *)calloc((size_t)m + 2, sizeof(int32_t));
    stub_of = (int32_t *)malloc((size_t)(m ? m : 1) * sizeof(int32_t));
    sexit = (int32_t *)malloc((size_t)(nstubs ? nstubs : 1) * sizeof(int32_t));
    scost = (int64_t *)malloc((size_t)(nstubs ? nstubs : 1) * sizeof(int64_t));
    if (!best || !start || !stub_of || !sexit || !scost) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < m; i++) {
        best[i] = no_path;
        stub_of[i] = -1;
    }
    for (Py_ssize_t k = 0; k < nstubs; k++) {
        PyObject *t = PyList_GET_ITEM(stubs, k);
        Py_ssize_t q, ex;
        long long c;
        if (!PyTuple_Check(t) || !PyArg_ParseTuple(t, "nnL", &q, &ex, &c)) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "extend_nfa_distances: stubs are (q, exit, cost) tuples");
            goto done;
        }
        if (q < n0 || q >= n1 || ex < 0 || ex >= n1 || c < 0) {
            PyErr_SetString(PyExc_ValueError, "extend_nfa_distances: a stub outside the new states");
            goto done;
        }
        stub_of[q - n0] = (int32_t)k;
        sexit[k] = (int32_t)ex;
        scost[k] = c;
    }
    /* pass 1: each new state's best through old states; count the edges into new states */
    for (Py_ssize_t q = n0; q < n1; q++) {
        PyObject *e = PyList_GET_ITEM(eps, q), *b = PyList_GET_ITEM(edges, q);
        if (!PyList_Check(e) || !PyList_Check(b)) {
            PyErr_SetString(PyExc_TypeError, "extend_nfa_distances: eps[q] and edges[q] are lists");
            goto done;
        }
        int64_t bq = no_path;
        for (Py_ssize_t j = 0; j < PyList_GET_SIZE(e); j++) {
            Py_ssize_t r = PyLong_AsSsize_t(PyList_GET_ITEM(e, j));
            if (r < 0 || r >= n1) goto bad_target;
            if (r >= n0) start[r - n0 + 2]++;
            else {
                int64_t d = old_dist(dist, r);
                if (d < bq) bq = d;
            }
        }
        for (Py_ssize_t j = 0; j < PyList_GET_SIZE(b); j++) {
            PyObject *target = edge_target(PyList_GET_ITEM(b, j));
            if (!target) goto done;
            Py_ssize_t r = PyLong_AsSsize_t(target);
            if (r < 0 || r >= n1) goto bad_target;
            if (r >= n0) start[r - n0 + 2]++;
            else {
                int64_t d = old_dist(dist, r) + 1;
                if (d < bq) bq = d;
            }
        }
        int32_t k = stub_of[q - n0];
        if (k >= 0) {
            Py_ssize_t r = sexit[k];
            if (r >= n0) start[r - n0 + 2]++;
            else {
                int64_t d = old_dist(dist, r) + scost[k];
                if (d < bq) bq = d;
            }
        }
        best[q - n0] = bq;
    }
    if (PyErr_Occurred()) goto done;
    for (Py_ssize_t i = 0; i < m; i++) start[i + 2] += start[i + 1];
    nrev = start[m + 1];
    from = (int32_t *)malloc((size_t)(nrev ? nrev : 1) * sizeof(int32_t));
    cost = (int64_t *)malloc((size_t)(nrev ? nrev : 1) * sizeof(int64_t));
    heap = (heap_item *)malloc((size_t)(nrev + m + 1) * sizeof(heap_item));
    if (!from || !cost || !heap) {
        PyErr_NoMemory();
        goto done;
    }
    /* pass 2: the reverse edges among new states, grouped by target (start[r + 1] ends as r's end) */
    for (Py_ssize_t q = n0; q < n1; q++) {
        PyObject *e = PyList_GET_ITEM(eps, q), *b = PyList_GET_ITEM(edges, q);
        for (Py_ssize_t j = 0; j < PyList_GET_SIZE(e); j++) {
            Py_ssize_t r = PyLong_AsSsize_t(PyList_GET_ITEM(e, j));
            if (r >= n0) {
                int32_t at = start[r - n0 + 1]++;
                from[at] = (int32_t)(q - n0);
                cost[at] = 0;
            }
        }
        for (Py_ssize_t j = 0; j < PyList_GET_SIZE(b); j++) {
            Py_ssize_t r = PyLong_AsSsize_t(edge_target(PyList_GET_ITEM(b, j)));
            if (r >= n0) {
                int32_t at = start[r - n0 + 1]++;
                from[at] = (int32_t)(q - n0);
                cost[at] = 1;
            }
        }
        int32_t k = stub_of[q - n0];
        if (k >= 0 && sexit[k] >= n0) {
            int32_t at = start[sexit[k] - n0 + 1]++;
            from[at] = (int32_t)(q - n0);
            cost[at] = scost[k];
        }
    }
    Py_ssize_t size = 0;
    if (n0 <= final && final < n1) best[final - n0] = 0;
    for (Py_ssize_t i = 0; i < m; i++)
        if (best[i] < no_path) heap_push(heap, &size, best[i], (int32_t)i);
    while (size) {
        heap_item top = heap_pop(heap, &size);
        if (top.d > best[top.q]) continue;
        for (int32_t j = start[top.q]; j < start[top.q + 1]; j++) {
            int64_t d = top.d + cost[j];
            int32_t p = from[j];
            if (d < best[p]) {
                best[p] = d;
                heap_push(heap, &size, d, p);
            }
        }
    }
    for (Py_ssize_t i = 0; i < m; i++) {
        PyObject *v = PyLong_FromLongLong(best[i]);
        if (!v) goto done;
        PyList_SetItem(dist, n0 + i, v); /* steals v */
    }
    Py_INCREF(Py_None);
    result = Py_None;
    goto done;
bad_target:
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "extend_nfa_distances: a target outside 0..len(eps)-1");
done:
    free(best);
    free(start);
    free(stub_of);
    free(sexit);
    free(scost);
    free(from);
    free(cost);
    free(heap);
    return result;
}

static PyMethodDef methods[] = {
    {"distances_to_accept", distances_to_accept, METH_VARARGS, "Shortest accepted continuation per state (see _paths.c)."},
    {"reach_max", reach_max, METH_VARARGS, "Largest distance over the states each state reaches (see _paths.c)."},
    {"extend_nfa_distances", extend_nfa_distances, METH_VARARGS, "NFA states' distances to final, new states only (see _paths.c)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_paths", "Path quantities over complete DFA tables.", -1, methods};

PyMODINIT_FUNC PyInit__paths(void) { return PyModule_Create(&module); }
