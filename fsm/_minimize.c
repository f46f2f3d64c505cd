/* DFA minimization by partition refinement (structgen.fsm._minimize), the hot path of
 * trim_and_minimize in fsm/dfa.py.
 *
 * minimize(table, n, num_classes, labels, out) -> number of blocks
 *
 *   table   int32 [n, C]: a complete transition table (every target in [0, n))
 *   labels  int64 [n]:    the initial partition; states with equal labels start in one block
 *                         (e.g. dead / live / live and accepting)
 *   out     int64 [n]:    written: each state's block in the coarsest refinement of `labels`
 *                         that the transitions respect (the Myhill-Nerode classes when the
 *                         labels separate accepting from non-accepting states); blocks are
 *                         numbered 0, 1, ... in the order of their smallest state
 *
 * Raises ValueError for a target out of range or buffers too small, MemoryError.
 *
 * refine_byte_classes(table, cls): the bytes whose columns agree; coreachable(table, n, C,
 * accepting, live): the states that reach acceptance; forced_strings(table, accepting): each
 * state's forced bytes (all three below, before the module table).
 *
 * Hopcroft's algorithm: J. Hopcroft, "An n log n algorithm for minimizing states in a finite
 * automaton" (1971), O(C n log n), with the worklist holding blocks (each one a splitter for
 * every class) and the partition kept as one permuted array of states, each block a range of it
 * whose marked members are moved to its front (the refinable partition of A. Valmari and
 * P. Lehtinen, "Efficient minimization of DFAs with partial transition functions", 2008).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int64_t label;
    int32_t state;
} labelled;

static int cmp_labelled(const void *a, const void *b) {
    const labelled *x = (const labelled *)a, *y = (const labelled *)b;
    if (x->label != y->label) return (x->label > y->label) - (x->label < y->label);
    return (x->state > y->state) - (x->state < y->state);
}

typedef struct {
    int32_t *elems, *loc, *blk, *first, *end, *marked; /* the refinable partition */
    int32_t *work, *in_work, *touched, *splitter;       /* worklist, blocks met, one splitter's states */
    int32_t *starts, *preds;                            /* inverse transitions, CSR keyed c * n + t */
    int32_t n_blocks, n_work;
} parts;

static void free_parts(parts *P) {
    free(P->elems), free(P->loc), free(P->blk), free(P->first), free(P->end), free(P->marked);
    free(P->work), free(P->in_work), free(P->touched), free(P->splitter), free(P->starts), free(P->preds);
}

static int alloc_parts(parts *P, Py_ssize_t n, Py_ssize_t C) {
    memset(P, 0, sizeof(*P));
    size_t sn = (size_t)n, snc = (size_t)n * (size_t)C;
    P->elems = malloc(sn * 4), P->loc = malloc(sn * 4), P->blk = malloc(sn * 4), P->first = malloc(sn * 4);
    P->end = malloc(sn * 4), P->marked = calloc(sn, 4), P->work = malloc(sn * 4), P->in_work = calloc(sn, 4);
    P->touched = malloc(sn * 4), P->splitter = malloc(sn * 4), P->starts = calloc(snc + 1, 4), P->preds = malloc(snc * 4 + 4);
    if (!P->elems || !P->loc || !P->blk || !P->first || !P->end || !P->marked || !P->work || !P->in_work || !P->touched ||
        !P->splitter || !P->starts || !P->preds) {
        free_parts(P);
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static void push_work(parts *P, int32_t b) {
    if (!P->in_work[b]) {
        P->in_work[b] = 1;
        P->work[P->n_work++] = b;
    }
}

/* Split every block with marked members into its marked and unmarked parts (the marked part
 * becomes a new block); the worklist gets the new block if the old one is in it, else the
 * smaller part. */
static void split_touched(parts *P, int32_t n_touched) {
    for (int32_t i = 0; i < n_touched; i++) {
        int32_t y = P->touched[i], m = P->marked[y];
        P->marked[y] = 0;
        if (P->first[y] + m == P->end[y]) continue; /* every member marked: no split */
        int32_t z = P->n_blocks++;
        P->first[z] = P->first[y];
        P->end[z] = P->first[y] + m;
        P->first[y] = P->end[z];
        P->marked[z] = 0;
        for (int32_t j = P->first[z]; j < P->end[z]; j++) P->blk[P->elems[j]] = z;
        if (P->in_work[y] || m <= P->end[y] - P->first[y]) {
            push_work(P, z);
        } else {
            push_work(P, y);
        }
    }
}

static void refine(parts *P, int32_t n, int32_t C) {
    while (P->n_work) {
        int32_t b = P->work[--P->n_work];
        P->in_work[b] = 0;
        int32_t size = P->end[b] - P->first[b];
        memcpy(P->splitter, P->elems + P->first[b], (size_t)size * 4); /* b as it is now, even if split below */
        for (int32_t c = 0; c < C; c++) {
            int32_t n_touched = 0;
            const int32_t *starts = P->starts + (size_t)c * (size_t)n;
            for (int32_t i = 0; i < size; i++) {
                int32_t t = P->splitter[i];
                for (int32_t k = starts[t]; k < starts[t + 1]; k++) {
                    int32_t p = P->preds[k], y = P->blk[p];
                    int32_t m = P->first[y] + P->marked[y];
                    int32_t at = P->loc[p];
                    if (at < m) continue; /* marked already */
                    int32_t q = P->elems[m]; /* move p to the end of y's marked front */
                    P->elems[m] = p, P->loc[p] = m;
                    P->elems[at] = q, P->loc[q] = at;
                    if (P->marked[y]++ == 0) P->touched[n_touched++] = y;
                }
            }
            split_touched(P, n_touched);
        }
    }
}

/* Acquire the buffers of objs[0..n): C-contiguous, and writable where writable[i]; on a failure
 * the ones taken are released and -1 returned (with the Python error set). */
static int get_buffers(int n, PyObject *const *objs, const int *writable, Py_buffer *out) {
    for (int i = 0; i < n; i++)
        if (PyObject_GetBuffer(objs[i], &out[i], PyBUF_C_CONTIGUOUS | (writable[i] ? PyBUF_WRITABLE : 0)) < 0) {
            while (i--) PyBuffer_Release(&out[i]);
            return -1;
        }
    return 0;
}

static void release_buffers(int n, Py_buffer *bufs) {
    for (int i = 0; i < n; i++) PyBuffer_Release(&bufs[i]);
}

/* get_buffers for a function whose n arguments are all buffers: -1 (error set) when args is not
 * an n-tuple or a buffer cannot be had. */
static int buffer_args(const char *name, PyObject *args, int n, const int *writable, Py_buffer *out) {
    if (PyTuple_GET_SIZE(args) != n) {
        PyErr_Format(PyExc_TypeError, "%s takes %d arguments (%zd given)", name, n, PyTuple_GET_SIZE(args));
        return -1;
    }
    PyObject *objs[8];
    for (int i = 0; i < n; i++) objs[i] = PyTuple_GET_ITEM(args, i);
    return get_buffers(n, objs, writable, out);
}

static PyObject *minimize(PyObject *self, PyObject *args) {
    PyObject *o_table, *o_labels, *o_out;
    Py_ssize_t n, C;
    if (!PyArg_ParseTuple(args, "OnnOO", &o_table, &n, &C, &o_labels, &o_out)) return NULL;
    if (n < 1 || C < 1 || n > INT32_MAX / 2 || (size_t)n * (size_t)C >= (size_t)INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "minimize: n and num_classes must be positive and n * num_classes < 2**31");
        return NULL;
    }
    Py_buffer bufs[3];
    PyObject *objs[3] = {o_table, o_labels, o_out};
    const int writable[3] = {0, 0, 1};
    if (get_buffers(3, objs, writable, bufs) < 0) return NULL;
    Py_buffer tb = bufs[0], lb = bufs[1], ob = bufs[2];
    PyObject *result = NULL;
    labelled *order = NULL;
    parts P;
    int have_parts = 0;
    if (tb.len < (Py_ssize_t)(n * C * 4) || lb.len < n * 8 || ob.len < n * 8) {
        PyErr_SetString(PyExc_ValueError, "minimize: table, labels or out smaller than their shapes");
        goto done;
    }
    const int32_t *table = (const int32_t *)tb.buf;
    const int64_t *labels = (const int64_t *)lb.buf;
    int64_t *out = (int64_t *)ob.buf;
    for (Py_ssize_t i = 0; i < n * C; i++) {
        if (table[i] < 0 || table[i] >= n) {
            PyErr_SetString(PyExc_ValueError, "minimize: a target is out of range (the table must be complete)");
            goto done;
        }
    }
    if (alloc_parts(&P, n, C) < 0) goto done;
    have_parts = 1;
    order = (labelled *)malloc((size_t)n * sizeof(labelled));
    if (!order) {
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS;
    /* inverse transitions: a counting sort of the edges by (class, target) */
    int32_t *starts = P.starts;
    for (Py_ssize_t s = 0; s < n; s++)
        for (Py_ssize_t c = 0; c < C; c++) starts[c * n + table[s * C + c] + 1]++;
    for (Py_ssize_t k = 0; k < n * C; k++) starts[k + 1] += starts[k];
    for (Py_ssize_t s = n - 1; s >= 0; s--) /* filled from the back: starts[key] ends as the key's start */
        for (Py_ssize_t c = C - 1; c >= 0; c--) {
            Py_ssize_t key = c * n + table[s * C + c];
            P.preds[--starts[key + 1]] = (int32_t)s;
        }
    /* preds is filled and starts[key + 1] now holds the start of `key`: shift back by one */
    memmove(starts, starts + 1, (size_t)(n * C) * 4);
    starts[n * C] = (int32_t)(n * C);
    /* the initial blocks: states grouped by label */
    for (Py_ssize_t s = 0; s < n; s++) order[s].label = labels[s], order[s].state = (int32_t)s;
    qsort(order, (size_t)n, sizeof(labelled), cmp_labelled);
    P.n_blocks = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i == 0 || order[i].label != order[i - 1].label) {
            if (i) P.end[P.n_blocks - 1] = (int32_t)i;
            P.first[P.n_blocks++] = (int32_t)i;
        }
        P.elems[i] = order[i].state, P.loc[order[i].state] = (int32_t)i, P.blk[order[i].state] = P.n_blocks - 1;
    }
    P.end[P.n_blocks - 1] = (int32_t)n;
    for (int32_t b = 0; b < P.n_blocks; b++) push_work(&P, b);
    refine(&P, (int32_t)n, (int32_t)C);
    /* number blocks by their smallest state */
    int32_t *renum = P.in_work; /* free again: the worklist is empty */
    for (int32_t b = 0; b < P.n_blocks; b++) renum[b] = -1;
    int32_t next = 0;
    for (Py_ssize_t s = 0; s < n; s++) {
        int32_t b = P.blk[s];
        if (renum[b] < 0) renum[b] = next++;
        out[s] = renum[b];
    }
    Py_END_ALLOW_THREADS;
    result = PyLong_FromLong(P.n_blocks);
done:
    free(order);
    if (have_parts) free_parts(&P);
    release_buffers(3, bufs);
    return result;
}

/* coreachable(table, n, num_classes, accepting, live) -> number of live states
 *
 *   table      int32 [n, C]: transitions, -1 for none (any other target in [0, n))
 *   accepting  bool [n]
 *   live       bool [n]: written: whether the state reaches an accepting one
 *
 * A breadth-first search backwards from the accepting states over the reversed edges (built by
 * a counting sort of the edges by target): O(n * C).  Raises ValueError for a target out of
 * range or buffers smaller than their shapes, MemoryError.
 */
static PyObject *coreachable(PyObject *self, PyObject *args) {
    PyObject *o_table, *o_acc, *o_live;
    Py_ssize_t n, C;
    if (!PyArg_ParseTuple(args, "OnnOO", &o_table, &n, &C, &o_acc, &o_live)) return NULL;
    if (n < 0 || C < 1 || n > INT32_MAX / 2 || (size_t)n * (size_t)C >= (size_t)INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "coreachable: n must be >= 0, num_classes >= 1 and n * num_classes < 2**31");
        return NULL;
    }
    Py_buffer bufs[3];
    PyObject *objs[3] = {o_table, o_acc, o_live};
    const int writable[3] = {0, 0, 1};
    if (get_buffers(3, objs, writable, bufs) < 0) return NULL;
    Py_buffer tb = bufs[0], ab = bufs[1], lb = bufs[2];
    PyObject *result = NULL;
    int32_t *start = NULL, *preds = NULL, *queue = NULL;
    if (tb.len < (Py_ssize_t)(n * C * 4) || ab.len < n || lb.len < n) {
        PyErr_SetString(PyExc_ValueError, "coreachable: table, accepting or live smaller than their shapes");
        goto done;
    }
    const int32_t *table = (const int32_t *)tb.buf;
    const uint8_t *acc = (const uint8_t *)ab.buf;
    uint8_t *live = (uint8_t *)lb.buf;
    for (Py_ssize_t i = 0; i < n * C; i++)
        if (table[i] < -1 || table[i] >= n) {
            PyErr_SetString(PyExc_ValueError, "coreachable: a target is out of range");
            goto done;
        }
    start = (int32_t *)calloc((size_t)n + 2, sizeof(int32_t));
    preds = (int32_t *)malloc(((size_t)n * (size_t)C + 1) * sizeof(int32_t));
    queue = (int32_t *)malloc(((size_t)n + 1) * sizeof(int32_t));
    if (!start || !preds || !queue) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t n_live = 0;
    Py_BEGIN_ALLOW_THREADS;
    for (Py_ssize_t i = 0; i < n * C; i++)
        if (table[i] >= 0) start[table[i] + 2]++;
    for (Py_ssize_t t = 0; t < n; t++) start[t + 2] += start[t + 1];
    for (Py_ssize_t s = 0; s < n; s++) /* start[t + 1] walks along t's slots */
        for (Py_ssize_t c = 0; c < C; c++) {
            int32_t t = table[s * C + c];
            if (t >= 0) preds[start[t + 1]++] = (int32_t)s;
        }
    /* start[t] .. start[t + 1] now holds t's predecessors */
    Py_ssize_t head = 0, tail = 0;
    for (Py_ssize_t s = 0; s < n; s++) {
        live[s] = acc[s] != 0;
        if (live[s]) queue[tail++] = (int32_t)s;
    }
    while (head < tail) {
        int32_t t = queue[head++];
        for (int32_t k = start[t]; k < start[t + 1]; k++) {
            int32_t p = preds[k];
            if (!live[p]) live[p] = 1, queue[tail++] = p;
        }
    }
    n_live = tail;
    Py_END_ALLOW_THREADS;
    result = PyLong_FromSsize_t(n_live);
done:
    free(start), free(preds), free(queue);
    release_buffers(3, bufs);
    return result;
}

/* forced_strings(table, accepting) -> tuple of n bytes
 *
 *   table      int32 [n, 256]: a byte table, row 0 the dead state (targets in [0, n))
 *   accepting  bool [n]
 *
 * Per state, the bytes every continuation starts with: the only live byte of each state on the
 * chain of non-accepting states with exactly one live byte, followed from it (b"" for the
 * others; a chain that closes on itself stops before it repeats).  Lengths first (each state's
 * chain walked once, memoized), then each string filled by walking its chain: O(n * 256 + the
 * strings' total length).  Raises ValueError for a target out of range or buffers smaller than
 * their shapes, MemoryError.
 */
static PyObject *forced_strings(PyObject *self, PyObject *args) {
    Py_buffer bufs[2];
    const int writable[2] = {0, 0}; /* table, accepting */
    if (buffer_args("forced_strings", args, 2, writable, bufs) < 0) return NULL;
    Py_buffer tb = bufs[0], ab = bufs[1];
    PyObject *result = NULL;
    int32_t *fb = NULL, *nx = NULL, *len = NULL, *stack = NULL;
    Py_ssize_t n = tb.len / (256 * 4);
    if (tb.len % (256 * 4) != 0 || n < 1 || n > INT32_MAX / 2 || ab.len < n) {
        PyErr_SetString(PyExc_ValueError, "forced_strings: table must be int32 [n >= 1, 256] and accepting bool [n]");
        goto done;
    }
    const int32_t *table = (const int32_t *)tb.buf;
    const uint8_t *acc = (const uint8_t *)ab.buf;
    for (Py_ssize_t i = 0; i < n * 256; i++)
        if (table[i] < 0 || table[i] >= n) {
            PyErr_SetString(PyExc_ValueError, "forced_strings: a target is out of range");
            goto done;
        }
    fb = (int32_t *)malloc((size_t)n * sizeof(int32_t));
    nx = (int32_t *)malloc((size_t)n * sizeof(int32_t));
    len = (int32_t *)malloc((size_t)n * sizeof(int32_t));
    stack = (int32_t *)malloc((size_t)n * sizeof(int32_t));
    if (!fb || !nx || !len || !stack) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t s = 0; s < n; s++) { /* the one live byte of a non-accepting state, or -1 */
        fb[s] = -1, len[s] = -1;
        if (s == 0 || acc[s]) continue;
        const int32_t *row = table + s * 256;
        int live = 0, b1 = -1;
        for (int b = 0; b < 256 && live < 2; b++)
            if (row[b] != 0) live++, b1 = b;
        if (live == 1) fb[s] = b1, nx[s] = row[b1];
    }
    for (Py_ssize_t s = 0; s < n; s++) { /* chain lengths; len -2 marks a state on the stack */
        Py_ssize_t top = 0;
        int32_t cur = (int32_t)s;
        while (len[cur] == -1 && fb[cur] >= 0) len[cur] = -2, stack[top++] = cur, cur = nx[cur];
        int32_t base = len[cur] >= 0 ? len[cur] : 0; /* known, no forced byte, or a state met again */
        if (len[cur] == -1) len[cur] = 0;
        while (top) base++, len[stack[--top]] = base;
    }
    result = PyTuple_New(n);
    if (!result) goto done;
    for (Py_ssize_t s = 0; s < n; s++) {
        PyObject *item = PyBytes_FromStringAndSize(NULL, len[s]);
        if (!item) {
            Py_CLEAR(result);
            goto done;
        }
        char *out = PyBytes_AS_STRING(item);
        int32_t cur = (int32_t)s;
        for (int32_t i = 0; i < len[s]; i++) out[i] = (char)fb[cur], cur = nx[cur];
        PyTuple_SET_ITEM(result, s, item);
    }
done:
    free(fb), free(nx), free(len), free(stack);
    release_buffers(2, bufs);
    return result;
}

/* refine_byte_classes(table, cls) -> number of classes
 *
 *   table  int32 [S, 256]: a transition table over raw bytes (any values)
 *   cls    int32 [256]:    read and written: a partition of the bytes (class ids 0..k-1), refined
 *                          so that bytes of one class have equal columns in `table`; classes end
 *                          numbered in the order of their first byte
 *
 * One pass over the rows: a row splits nothing unless some byte's target differs from its class
 * representative's (the class's first byte), a check of 256 entries; a row that does split is
 * regrouped by (class, target).  At most 255 rows split, so the pass is O(S * 256) compares with
 * no sort and no hashing.  Called once per table, it gives the bytes whose columns agree in every
 * table.  Raises ValueError for buffers smaller than their shapes or class ids out of range.
 */
static PyObject *refine_byte_classes(PyObject *self, PyObject *args) {
    Py_buffer bufs[2];
    const int writable[2] = {0, 1}; /* table, cls */
    if (buffer_args("refine_byte_classes", args, 2, writable, bufs) < 0) return NULL;
    Py_buffer tb = bufs[0], cb = bufs[1];
    PyObject *result = NULL;
    if (tb.len % (256 * 4) != 0 || cb.len < 256 * 4) {
        PyErr_SetString(PyExc_ValueError, "refine_byte_classes: table must be int32 [S, 256] and cls int32 [256]");
        goto done;
    }
    const int32_t *table = (const int32_t *)tb.buf;
    int32_t *cls = (int32_t *)cb.buf;
    Py_ssize_t S = tb.len / (256 * 4);
    for (int b = 0; b < 256; b++)
        if (cls[b] < 0 || cls[b] > 255) {
            PyErr_SetString(PyExc_ValueError, "refine_byte_classes: a class id is outside 0..255");
            goto done;
        }
    int32_t rep[256], repb[256], k = 0;
    int32_t key_cls[256], key_val[256], key_id[256];
    Py_BEGIN_ALLOW_THREADS;
    int32_t first_id[256]; /* the given classes renumbered by their first byte, which represents them */
    for (int c = 0; c < 256; c++) first_id[c] = -1;
    for (int b = 0; b < 256; b++) {
        int32_t c = cls[b];
        if (first_id[c] < 0) first_id[c] = k, rep[k] = b, k++;
        cls[b] = first_id[c];
    }
    for (int b = 0; b < 256; b++) repb[b] = rep[cls[b]];
    for (Py_ssize_t s = 0; s < S && k < 256; s++) {
        const int32_t *row = table + s * 256;
        int diff = 0;
        for (int b = 0; b < 256; b++) diff |= row[b] != row[repb[b]];
        if (!diff) continue;
        int n_keys = 0;
        for (int b = 0; b < 256; b++) { /* ascending: a new class's first byte is its representative */
            int32_t v = row[b];
            if (v == row[repb[b]]) continue;
            int32_t c = cls[b], id = -1;
            for (int i = 0; i < n_keys; i++)
                if (key_cls[i] == c && key_val[i] == v) {
                    id = key_id[i];
                    break;
                }
            if (id < 0) {
                id = k++;
                key_cls[n_keys] = c, key_val[n_keys] = v, key_id[n_keys] = id, n_keys++;
                rep[id] = b;
            }
            cls[b] = id;
        }
        for (int b = 0; b < 256; b++) repb[b] = rep[cls[b]];
    }
    /* number classes by their first byte */
    int32_t renum[256];
    for (int c = 0; c < 256; c++) renum[c] = -1;
    int32_t next = 0;
    for (int b = 0; b < 256; b++) {
        if (renum[cls[b]] < 0) renum[cls[b]] = next++;
        cls[b] = renum[cls[b]];
    }
    k = next;
    Py_END_ALLOW_THREADS;
    result = PyLong_FromLong(k);
done:
    release_buffers(2, bufs);
    return result;
}

static PyMethodDef methods[] = {
    {"minimize", minimize, METH_VARARGS, "Hopcroft minimization of a complete table: block of every state; see fsm/_minimize.c."},
    {"forced_strings", forced_strings, METH_VARARGS, "Each state's forced bytes; see fsm/_minimize.c."},
    {"coreachable", coreachable, METH_VARARGS, "The states that reach an accepting one; see fsm/_minimize.c."},
    {"refine_byte_classes", refine_byte_classes, METH_VARARGS, "Refine a partition of the 256 bytes by a table's columns; see fsm/_minimize.c."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_minimize", "Compiled DFA minimization and byte classes.", -1, methods};

PyMODINIT_FUNC PyInit__minimize(void) { return PyModule_Create(&module); }
