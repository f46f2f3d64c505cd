/* Token-bitmask trie walk: the hot loop of first-visit mask rows (structgen.fsm._trie_walk).
 *
 * The vocabulary trie is laid out in preorder (every distinct token prefix, sorted
 * lexicographically), each node carrying its edge byte, its depth and its subtree size, so a
 * walk from one automaton state is a single forward scan that jumps over the subtree of every
 * node whose byte leads to the dead state.  The layout follows llguidance's TokTrie
 * (github.com/guidance-ai/llguidance, toktrie); the code is our own.
 *
 * The byte automaton is built lazily (structgen.fsm.automaton.LazyDFA): a row of -1 marks a
 * state not expanded yet.  The walk then stops and returns the node position; the caller
 * expands the state held in stack[depth - 1] and calls again with the same position and stack.
 *
 * Pure C over buffers; the GIL is released during the scan.  The optional pure-numpy walk in
 * vocab.py computes the same results when this extension is not built.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static int get_buf(PyObject *obj, Py_buffer *view, Py_ssize_t itemsize, int writable, const char *name) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) < 0) {
        return -1;
    }
    if (view->itemsize != itemsize) {
        PyErr_Format(PyExc_TypeError, "%s: expected items of %zd bytes, got %zd", name, itemsize, view->itemsize);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* walk(table, num_classes, class_of_byte, node_byte, node_depth, node_skip, node_token,
 *      state, pos, stack, bits, ends) -> int
 *
 * table:         int32 [S * C]   next state per (state, byte class); 0 dead; -1 not expanded
 * class_of_byte: int32 [256]
 * node_byte:     uint8 [N]       edge byte into each preorder node
 * node_depth:    int32 [N]       depth (1 for children of the root)
 * node_skip:     int32 [N]       subtree size including the node
 * node_token:    int32 [N]       token id spelled by the node, -1 if none
 * state:         the automaton state the walk starts from (written to stack[0] when pos == 0)
 * pos:           first node to visit (0 to start; a returned position to resume)
 * stack:         int32 [max_depth + 1]  automaton state per depth (in/out)
 * bits:          uint32 [ceil(V / 32)]  allowed-token bitmask (bits are OR-ed in)
 * ends:          int32 [V] or None      state after each allowed token
 *
 * Returns -1 when the walk is complete, otherwise the node position at which an unexpanded
 * state (stack[node_depth[pos] - 1]) was met.  Raises ValueError on out-of-range data.
 */
static PyObject *walk(PyObject *self, PyObject *args) {
    PyObject *o_table, *o_cob, *o_byte, *o_depth, *o_skip, *o_token, *o_stack, *o_bits, *o_ends;
    Py_ssize_t num_classes, state, pos;
    if (!PyArg_ParseTuple(args, "OnOOOOOnnOOO", &o_table, &num_classes, &o_cob, &o_byte, &o_depth, &o_skip, &o_token, &state,
                          &pos, &o_stack, &o_bits, &o_ends)) {
        return NULL;
    }
    Py_buffer b_table, b_cob, b_byte, b_depth, b_skip, b_token, b_stack, b_bits, b_ends;
    PyObject *ret = NULL;
    int have_ends = o_ends != Py_None;
    int got = 0;
    if (get_buf(o_table, &b_table, 4, 0, "table") < 0) goto fail;
    got = 1;
    if (get_buf(o_cob, &b_cob, 4, 0, "class_of_byte") < 0) goto fail;
    got = 2;
    if (get_buf(o_byte, &b_byte, 1, 0, "node_byte") < 0) goto fail;
    got = 3;
    if (get_buf(o_depth, &b_depth, 4, 0, "node_depth") < 0) goto fail;
    got = 4;
    if (get_buf(o_skip, &b_skip, 4, 0, "node_skip") < 0) goto fail;
    got = 5;
    if (get_buf(o_token, &b_token, 4, 0, "node_token") < 0) goto fail;
    got = 6;
    if (get_buf(o_stack, &b_stack, 4, 1, "stack") < 0) goto fail;
    got = 7;
    if (get_buf(o_bits, &b_bits, 4, 1, "bits") < 0) goto fail;
    got = 8;
    if (have_ends) {
        if (get_buf(o_ends, &b_ends, 4, 1, "ends") < 0) goto fail;
        got = 9;
    }

    const Py_ssize_t n = b_byte.len;
    const Py_ssize_t n_states = num_classes > 0 ? (b_table.len / 4) / num_classes : 0;
    const Py_ssize_t max_depth = b_stack.len / 4 - 1;
    const Py_ssize_t words = b_bits.len / 4;
    const Py_ssize_t n_ends = have_ends ? b_ends.len / 4 : 0;
    if (b_cob.len != 256 * 4 || b_depth.len != n * 4 || b_skip.len != n * 4 || b_token.len != n * 4 || num_classes <= 0 ||
        state < 0 || state >= n_states || pos < 0 || pos > n || max_depth < 0) {
        PyErr_SetString(PyExc_ValueError, "walk: inconsistent buffer sizes or arguments");
        goto fail;
    }
    const int32_t *table = (const int32_t *)b_table.buf;
    const int32_t *cob = (const int32_t *)b_cob.buf;
    const uint8_t *nbyte = (const uint8_t *)b_byte.buf;
    const int32_t *ndepth = (const int32_t *)b_depth.buf;
    const int32_t *nskip = (const int32_t *)b_skip.buf;
    const int32_t *ntoken = (const int32_t *)b_token.buf;
    int32_t *stack = (int32_t *)b_stack.buf;
    uint32_t *bits = (uint32_t *)b_bits.buf;
    int32_t *ends = have_ends ? (int32_t *)b_ends.buf : NULL;
    Py_ssize_t result = -1;
    int bad = 0;

    Py_BEGIN_ALLOW_THREADS
    if (pos == 0) {
        stack[0] = (int32_t)state;
    }
    Py_ssize_t i = pos;
    while (i < n) {
        const int32_t d = ndepth[i];
        if (d < 1 || d > max_depth) {
            bad = 1;
            break;
        }
        const int32_t s = stack[d - 1];
        if (s < 0 || s >= n_states) {
            bad = 1;
            break;
        }
        const int32_t ns = table[(Py_ssize_t)s * num_classes + cob[nbyte[i]]];
        if (ns < 0) {
            result = i;
            break;
        }
        if (ns == 0) {
            const int32_t skip = nskip[i];
            if (skip < 1) {
                bad = 1;
                break;
            }
            i += skip;
            continue;
        }
        stack[d] = ns;
        const int32_t t = ntoken[i];
        if (t >= 0) {
            if ((t >> 5) >= words || (ends && t >= n_ends)) {
                bad = 1;
                break;
            }
            bits[t >> 5] |= (uint32_t)1 << (t & 31);
            if (ends) {
                ends[t] = ns;
            }
        }
        i += 1;
    }
    Py_END_ALLOW_THREADS

    if (bad) {
        PyErr_SetString(PyExc_ValueError, "walk: trie or automaton data out of range");
    } else {
        ret = PyLong_FromSsize_t(result);
    }

fail:;
    Py_buffer *bufs[9] = {&b_table, &b_cob, &b_byte, &b_depth, &b_skip, &b_token, &b_stack, &b_bits, &b_ends};
    for (int k = got; k > 0; k--) {
        PyBuffer_Release(bufs[k - 1]);
    }
    return ret;
}

static PyMethodDef methods[] = {
    {"walk", walk, METH_VARARGS, "Preorder trie walk from one automaton state (see _trie_walk.c)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_trie_walk", "Compiled token-bitmask trie walk.", -1, methods};

PyMODINIT_FUNC PyInit__trie_walk(void) { return PyModule_Create(&module); }
