/* One step of lazy subset construction: the transition row of one DFA state
 * (structgen.fsm._lazy_expand), the hot path of LazyDFA.expand in fsm/lazy_dfa.py.
 *
 * A DFA state is a frozenset of NFA states with byte edges.  Its row maps every byte class to
 * the epsilon closure of the NFA states its members' edges reach on that class.  This module
 * computes, over the lazy DFA's own Python structures (no copies), the targets of every class,
 * groups classes with the same target set, the closure key (frozenset, final reached) of each
 * group and its DFA state (new ones numbered as the Python code does), and writes the row into
 * the DFA's table.  Closures of one NFA state are read from and written to the caller's memo
 * (the same entries the Python code writes).
 *
 * It computes only what needs no Python-side construction: when a closure meets an NFA
 * fragment not built yet (a pending stub) it returns that stub's state s, which the caller
 * builds; when the closure of a state s grows past `small_limit` states it returns -(s + 1),
 * whose closure the caller computes with its SCC search (memoizing every state of a long
 * chain of counter exits at once, where one search per seed would be quadratic).  The caller
 * then calls again; the closures finished so far stay memoized.
 *
 * Subset construction: Rabin and Scott (1959); lazy, per visited state, as in RE2's DFA.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    long *v;
    Py_ssize_t n, cap;
} longvec;

static int vec_push(longvec *a, long x) {
    if (a->n == a->cap) {
        Py_ssize_t cap = a->cap ? 2 * a->cap : 64;
        long *v = (long *)realloc(a->v, (size_t)cap * sizeof(long));
        if (!v) {
            PyErr_NoMemory();
            return -1;
        }
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = x;
    return 0;
}

static int cmp_long(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

/* The closure of NFA state `seed` as the memo's (frozenset, bool) tuple (new reference), or
 * NULL: with an exception set on error, without one when the Python path must take over. */
static PyObject *closure_one(long seed, PyObject *eps, PyObject *has_edges, PyObject *pending, long final, PyObject *memo,
                             Py_ssize_t small_limit, long *stub) {
    PyObject *key = PyLong_FromLong(seed);
    if (!key) return NULL;
    PyObject *got = PyDict_GetItemWithError(memo, key);
    if (got) {
        Py_DECREF(key);
        Py_INCREF(got);
        return got;
    }
    if (PyErr_Occurred()) {
        Py_DECREF(key);
        return NULL;
    }
    /* depth-first search; `slots` is an open-addressing hash set of the states seen (a power
       of two, at most half full), `order` the states in the order seen */
    Py_ssize_t cap = 64;
    long *slots = (long *)malloc((size_t)cap * sizeof(long));
    long *order = (long *)malloc((size_t)(small_limit + 1) * sizeof(long));
    long *stack = (long *)malloc((size_t)(small_limit + 1) * sizeof(long));
    if (!slots || !order || !stack) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < cap; i++) slots[i] = -1;
    slots[(size_t)seed * 2654435761u & (size_t)(cap - 1)] = seed;
    Py_ssize_t n_seen = 1, n_stack = 1;
    order[0] = stack[0] = seed;
    const Py_ssize_t n_nfa = PyList_GET_SIZE(eps);
    while (n_stack) {
        long q = stack[--n_stack];
        if (q < 0 || q >= n_nfa || q >= PyList_GET_SIZE(has_edges)) goto give_up;
        PyObject *qk = PyLong_FromLong(q);
        if (!qk) goto fail;
        int is_pending = PyDict_Contains(pending, qk);
        Py_DECREF(qk);
        if (is_pending < 0) goto fail;
        if (is_pending) { /* a stub: the caller builds its fragment and calls again */
            *stub = q;
            goto give_up;
        }
        PyObject *succ = PyList_GET_ITEM(eps, q);
        if (!PyList_Check(succ)) goto give_up;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(succ); i++) {
            long r = PyLong_AsLong(PyList_GET_ITEM(succ, i));
            if (r == -1 && PyErr_Occurred()) goto fail;
            if (r < 0) goto give_up;
            size_t h = (size_t)r * 2654435761u & (size_t)(cap - 1);
            while (slots[h] != -1 && slots[h] != r) h = (h + 1) & (size_t)(cap - 1);
            if (slots[h] == r) continue;
            if (n_seen >= small_limit) { /* large: the caller's SCC search memoizes the whole chain */
                *stub = -(seed + 1);
                goto give_up;
            }
            if (2 * (n_seen + 1) > cap) { /* grow and rehash */
                long *grown = (long *)malloc((size_t)(2 * cap) * sizeof(long));
                if (!grown) {
                    PyErr_NoMemory();
                    goto fail;
                }
                cap *= 2;
                for (Py_ssize_t j = 0; j < cap; j++) grown[j] = -1;
                for (Py_ssize_t j = 0; j < n_seen; j++) {
                    size_t g = (size_t)order[j] * 2654435761u & (size_t)(cap - 1);
                    while (grown[g] != -1) g = (g + 1) & (size_t)(cap - 1);
                    grown[g] = order[j];
                }
                free(slots);
                slots = grown;
                h = (size_t)r * 2654435761u & (size_t)(cap - 1);
                while (slots[h] != -1) h = (h + 1) & (size_t)(cap - 1);
            }
            slots[h] = r;
            order[n_seen++] = r;
            stack[n_stack++] = r;
        }
    }
    {
        PyObject *members = PyFrozenSet_New(NULL);
        if (!members) goto fail;
        int fin = 0;
        for (Py_ssize_t k = 0; k < n_seen; k++) {
            long q = order[k];
            fin |= q == final;
            if (q < PyList_GET_SIZE(has_edges) && PyObject_IsTrue(PyList_GET_ITEM(has_edges, q)) == 1) {
                PyObject *qk = PyLong_FromLong(q);
                if (!qk || PySet_Add(members, qk) < 0) {
                    Py_XDECREF(qk);
                    Py_DECREF(members);
                    goto fail;
                }
                Py_DECREF(qk);
            }
        }
        PyObject *out = Py_BuildValue("(NO)", members, fin ? Py_True : Py_False);
        if (!out || PyDict_SetItem(memo, key, out) < 0) {
            Py_XDECREF(out);
            goto fail;
        }
        Py_DECREF(key);
        free(slots);
        free(order);
        free(stack);
        return out;
    }
give_up:
    Py_DECREF(key);
    free(slots);
    free(order);
    free(stack);
    return NULL;
fail:
    Py_DECREF(key);
    free(slots);
    free(order);
    free(stack);
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "expand_state: inconsistent automaton");
    return NULL;
}

/* The closure key of a sorted, duplicate-free target list (new reference), or NULL as above. */
static PyObject *closure_key(const long *targets, Py_ssize_t n, PyObject *eps, PyObject *has_edges, PyObject *pending, long final,
                             PyObject *memo, Py_ssize_t small_limit, long *stub) {
    if (n == 1) return closure_one(targets[0], eps, has_edges, pending, final, memo, small_limit, stub);
    PyObject *members = PyFrozenSet_New(NULL);
    if (!members) return NULL;
    int fin = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *part = closure_one(targets[i], eps, has_edges, pending, final, memo, small_limit, stub);
        if (!part) {
            Py_DECREF(members);
            return NULL;
        }
        int bad = 0;
        PyObject *pit = PyObject_GetIter(PyTuple_GET_ITEM(part, 0)), *q;
        if (!pit) bad = 1;
        while (!bad && (q = PyIter_Next(pit))) {
            bad = PySet_Add(members, q) < 0; /* filling a brand-new frozenset */
            Py_DECREF(q);
        }
        Py_XDECREF(pit);
        bad = bad || PyErr_Occurred();
        fin |= PyTuple_GET_ITEM(part, 1) == Py_True;
        Py_DECREF(part);
        if (bad) {
            Py_DECREF(members);
            return NULL;
        }
    }
    return Py_BuildValue("(NO)", members, fin ? Py_True : Py_False);
}

typedef struct {
    PyObject *sets, *acc, *index_map, *edges, *eps, *has_edges, *pending, *memo;
    int32_t *table;
    const int32_t *cob;
    Py_ssize_t capacity, num_classes, small_limit, max_states;
    long final;
} expand_args;

/* The buffers of `o_table` / `o_cob`, checked (0), or -1 with an exception set. */
static int get_buffers(PyObject *o_table, PyObject *o_cob, Py_buffer *table_buf, Py_buffer *cob_buf, expand_args *a) {
    if (a->num_classes < 1 || a->num_classes > 256 || a->small_limit < 1) {
        PyErr_SetString(PyExc_ValueError, "expand_state: num_classes must be 1..256, small_limit at least 1");
        return -1;
    }
    if (PyObject_GetBuffer(o_table, table_buf, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE) < 0) return -1;
    a->capacity = table_buf->itemsize == 4 ? table_buf->len / 4 / a->num_classes : 0;
    if (table_buf->itemsize != 4 || table_buf->len != a->capacity * a->num_classes * 4) {
        PyBuffer_Release(table_buf);
        PyErr_SetString(PyExc_ValueError, "expand_state: table must be int32 [capacity, num_classes]");
        return -1;
    }
    if (PyObject_GetBuffer(o_cob, cob_buf, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyBuffer_Release(table_buf);
        return -1;
    }
    if (cob_buf->itemsize != 4 || cob_buf->len != 256 * 4) {
        PyBuffer_Release(cob_buf);
        PyBuffer_Release(table_buf);
        PyErr_SetString(PyExc_ValueError, "expand_state: class_of_byte must be int32 [256]");
        return -1;
    }
    a->table = (int32_t *)table_buf->buf;
    a->cob = (const int32_t *)cob_buf->buf;
    for (int b = 0; b < 256; b++) {
        if (a->cob[b] < 0 || a->cob[b] >= a->num_classes) {
            PyBuffer_Release(cob_buf);
            PyBuffer_Release(table_buf);
            PyErr_SetString(PyExc_ValueError, "expand_state: class_of_byte out of range");
            return -1;
        }
    }
    return 0;
}

/* One state's row (see expand_state below for the results); the table has room checked. */
static PyObject *expand_one(Py_ssize_t state, const expand_args *A) {
    PyObject *sets = A->sets, *acc = A->acc, *index_map = A->index_map, *edges = A->edges, *eps = A->eps;
    PyObject *has_edges = A->has_edges, *pending = A->pending, *memo = A->memo;
    const int32_t *cob = A->cob;
    int32_t *table = A->table;
    const Py_ssize_t num_classes = A->num_classes, small_limit = A->small_limit, max_states = A->max_states, capacity = A->capacity;
    const long final = A->final;
    PyObject *members = PyList_GET_ITEM(sets, state);
    PyObject *result = NULL, *it = NULL, *m = NULL;
    int32_t group_id[256]; /* the DFA state of each group of classes */
    longvec pc = {0}, pt = {0};  /* (class, target) pairs */
    long order[256];              /* classes in first-touch order */
    Py_ssize_t n_order = 0;
    char touched[256] = {0};
    it = PyObject_GetIter(members);
    if (!it) goto done;
    while ((m = PyIter_Next(it))) {
        long q = PyLong_AsLong(m);
        Py_CLEAR(m);
        if (q == -1 && PyErr_Occurred()) goto done;
        if (q < 0 || q >= PyList_GET_SIZE(edges) || !PyList_Check(PyList_GET_ITEM(edges, q))) {
            PyErr_SetString(PyExc_ValueError, "expand_state: member outside the automaton");
            goto done;
        }
        PyObject *el = PyList_GET_ITEM(edges, q);
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(el); i++) {
            PyObject *e = PyList_GET_ITEM(el, i);
            if (!PyTuple_Check(e) || PyTuple_GET_SIZE(e) != 3) {
                PyErr_SetString(PyExc_ValueError, "expand_state: an edge must be (lo, hi, target)");
                goto done;
            }
            long lo = PyLong_AsLong(PyTuple_GET_ITEM(e, 0)), hi = PyLong_AsLong(PyTuple_GET_ITEM(e, 1));
            long t = PyLong_AsLong(PyTuple_GET_ITEM(e, 2));
            if (PyErr_Occurred()) goto done;
            if (lo < 0 || hi > 255 || lo > hi) {
                PyErr_SetString(PyExc_ValueError, "expand_state: edge byte range outside 0..255");
                goto done;
            }
            for (long c = cob[lo]; c <= cob[hi]; c++) {
                if (!touched[c]) {
                    touched[c] = 1;
                    order[n_order++] = c;
                }
                if (vec_push(&pc, c) < 0 || vec_push(&pt, t) < 0) goto done;
            }
        }
    }
    if (PyErr_Occurred()) goto done;
    {
        /* targets grouped by class (counting sort), each list sorted and deduplicated */
        Py_ssize_t start[257] = {0};
        for (Py_ssize_t i = 0; i < pc.n; i++) start[pc.v[i] + 1]++;
        for (int c = 0; c < 256; c++) start[c + 1] += start[c];
        Py_ssize_t fill[256];
        memcpy(fill, start, sizeof(fill));
        long *tg = (long *)malloc((size_t)(pc.n ? pc.n : 1) * sizeof(long));
        Py_ssize_t len[256] = {0};
        Py_ssize_t group_class[256]; /* a representative class per group */
        Py_ssize_t n_groups = 0;
        if (!tg) {
            PyErr_NoMemory();
            goto done;
        }
        for (Py_ssize_t i = 0; i < pc.n; i++) tg[fill[pc.v[i]]++] = pt.v[i];
        int32_t idx[256];
        for (Py_ssize_t c = 0; c < num_classes; c++) idx[c] = -1;
        for (Py_ssize_t k = 0; k < n_order; k++) {
            long c = order[k];
            long *a = tg + start[c];
            Py_ssize_t n = start[c + 1] - start[c];
            qsort(a, (size_t)n, sizeof(long), cmp_long);
            Py_ssize_t u = 0;
            for (Py_ssize_t i = 0; i < n; i++) {
                if (!u || a[u - 1] != a[i]) a[u++] = a[i];
            }
            len[c] = u;
            int32_t g = -1;
            for (Py_ssize_t j = 0; j < n_groups; j++) {
                Py_ssize_t rc = group_class[j];
                if (len[rc] == u && !memcmp(tg + start[rc], a, (size_t)u * sizeof(long))) {
                    g = (int32_t)j;
                    break;
                }
            }
            if (g < 0) {
                long stub = LONG_MIN;
                PyObject *key = closure_key(a, u, eps, has_edges, pending, final, memo, small_limit, &stub);
                if (!key) {
                    free(tg);
                    if (PyErr_Occurred()) goto done;
                    if (stub != LONG_MIN) {
                        result = PyLong_FromLong(stub); /* the caller builds or searches, then calls again */
                    } else {
                        PyErr_SetString(PyExc_ValueError, "expand_state: an NFA state outside the automaton");
                    }
                    goto done;
                }
                /* LazyDFA._state_of: the key's state, or a new one */
                PyObject *got = PyDict_GetItemWithError(index_map, key);
                long d;
                if (got) {
                    d = PyLong_AsLong(got);
                } else if (PyErr_Occurred()) {
                    d = -1;
                } else {
                    d = (long)PyList_GET_SIZE(sets);
                    if (d >= max_states) {
                        Py_DECREF(key);
                        free(tg);
                        Py_INCREF(Py_False);
                        result = Py_False;
                        goto done;
                    }
                    PyObject *dk = PyLong_FromLong(d);
                    if (!dk || PyDict_SetItem(index_map, key, dk) < 0 || PyList_Append(sets, PyTuple_GET_ITEM(key, 0)) < 0 ||
                        PyList_Append(acc, PyTuple_GET_ITEM(key, 1)) < 0) {
                        d = -1;
                    }
                    Py_XDECREF(dk);
                }
                Py_DECREF(key);
                if (d < 0 || d >= capacity) {
                    free(tg);
                    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "expand_state: state numbering out of range");
                    goto done;
                }
                g = (int32_t)n_groups;
                group_class[n_groups] = c;
                group_id[n_groups++] = (int32_t)d;
            }
            idx[c] = g;
        }
        free(tg);
        int32_t *row = table + state * num_classes;
        for (Py_ssize_t c = 0; c < num_classes; c++) row[c] = idx[c] < 0 ? 0 : group_id[idx[c]];
        Py_INCREF(Py_None);
        result = Py_None;
    }
done:
    Py_XDECREF(it);
    free(pc.v);
    free(pt.v);
    return result;
}

/* expand_state(state, sets, acc, index, table, edges, class_of_byte, num_classes, eps, has_edges,
 *              pending, final, memo, small_limit, max_states) -> None | int | False
 *
 * Writes the transition row of DFA state `state` into `table` (int32 [capacity, C], a row of
 * -1 until expanded), numbering new target states as LazyDFA._state_of does: `index` maps a
 * (frozenset, final reached) key to its state, `sets` / `acc` get the new state's members and
 * acceptance appended.  The caller leaves room in `table` for num_classes more states.
 * edges: list of lists of (lo, hi, target) byte ranges per NFA state; class_of_byte: int32
 * [256]; eps: list of lists of epsilon targets; has_edges: list of bools; pending: dict of stub
 * states; final: the accepting NFA state; memo: dict NFA state -> (frozenset, bool) closures.
 * Returns None when the row is written; an int s >= 0: the pending stub met (build it, call
 * again); -(s + 1): a closure past small_limit (compute it, call again); False: a new state
 * would pass max_states (the row is not written).  Raises ValueError for malformed structures.
 */
static PyObject *expand_state(PyObject *self, PyObject *args) {
    expand_args a;
    PyObject *o_table, *o_cob;
    Py_ssize_t state;
    if (!PyArg_ParseTuple(args, "nO!O!O!OO!OnO!O!O!lO!nn", &state, &PyList_Type, &a.sets, &PyList_Type, &a.acc, &PyDict_Type,
                          &a.index_map, &o_table, &PyList_Type, &a.edges, &o_cob, &a.num_classes, &PyList_Type, &a.eps, &PyList_Type,
                          &a.has_edges, &PyDict_Type, &a.pending, &a.final, &PyDict_Type, &a.memo, &a.small_limit, &a.max_states)) {
        return NULL;
    }
    if (state < 0 || state >= PyList_GET_SIZE(a.sets)) {
        PyErr_SetString(PyExc_ValueError, "expand_state: state not discovered");
        return NULL;
    }
    Py_buffer table_buf, cob_buf;
    if (get_buffers(o_table, o_cob, &table_buf, &cob_buf, &a) < 0) return NULL;
    PyObject *result;
    if (a.capacity < PyList_GET_SIZE(a.sets) + a.num_classes) {
        PyErr_SetString(PyExc_ValueError, "expand_state: the table must have room for num_classes more states");
        result = NULL;
    } else {
        result = expand_one(state, &a);
    }
    PyBuffer_Release(&cob_buf);
    PyBuffer_Release(&table_buf);
    return result;
}

/* expand_ahead(first, count, limit, sets, acc, index, table, edges, class_of_byte, num_classes,
 *              eps, has_edges, pending, final, memo, small_limit, max_states) -> (int, object)
 *
 * expand_state over the discovered states first, first + 1, ... in discovery order (those
 * already expanded are skipped), for at most `count` states, stopping before a state when
 * len(sets) + num_classes passes `limit` or the table has no room for num_classes more states.
 * Returns (s, got): s the first state not expanded; got None when it stopped for one of those
 * reasons or ran out of discovered states, else what expand_state returned for s (a stub to
 * build, a large closure to search, False for the state cap).  The caller's loop in
 * LazyDFA.complete_ahead, one call per batch instead of one per state.
 */
static PyObject *expand_ahead(PyObject *self, PyObject *args) {
    expand_args a;
    PyObject *o_table, *o_cob;
    Py_ssize_t first, count, limit;
    if (!PyArg_ParseTuple(args, "nnnO!O!O!OO!OnO!O!O!lO!nn", &first, &count, &limit, &PyList_Type, &a.sets, &PyList_Type, &a.acc,
                          &PyDict_Type, &a.index_map, &o_table, &PyList_Type, &a.edges, &o_cob, &a.num_classes, &PyList_Type,
                          &a.eps, &PyList_Type, &a.has_edges, &PyDict_Type, &a.pending, &a.final, &PyDict_Type, &a.memo,
                          &a.small_limit, &a.max_states)) {
        return NULL;
    }
    if (first < 0 || count < 0) {
        PyErr_SetString(PyExc_ValueError, "expand_ahead: first and count must not be negative");
        return NULL;
    }
    Py_buffer table_buf, cob_buf;
    if (get_buffers(o_table, o_cob, &table_buf, &cob_buf, &a) < 0) return NULL;
    Py_ssize_t s = first;
    PyObject *got = Py_None;
    Py_INCREF(got);
    for (Py_ssize_t done = 0; done < count && s < PyList_GET_SIZE(a.sets); s++) {
        Py_ssize_t n = PyList_GET_SIZE(a.sets);
        if (n + a.num_classes > limit || a.capacity < n + a.num_classes) break;
        if (a.table[s * a.num_classes] >= 0) continue; /* expanded when a request reached it */
        Py_DECREF(got);
        got = expand_one(s, &a);
        if (!got) break;
        if (got != Py_None) break;
        done++;
    }
    PyBuffer_Release(&cob_buf);
    PyBuffer_Release(&table_buf);
    if (!got) return NULL;
    return Py_BuildValue("(nN)", s, got);
}

static PyMethodDef methods[] = {
    {"expand_state", expand_state, METH_VARARGS, "One lazy subset-construction step (see _lazy_expand.c)."},
    {"expand_ahead", expand_ahead, METH_VARARGS, "expand_state over discovered states in order (see _lazy_expand.c)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_lazy_expand", "Compiled lazy DFA expansion.", -1, methods};

PyMODINIT_FUNC PyInit__lazy_expand(void) { return PyModule_Create(&module); }
