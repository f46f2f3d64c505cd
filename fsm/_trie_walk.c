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
 *      state, pos, stack, bits, ends[, reached]) -> int
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
 * reached:       uint8 [M] or None      (optional) reached[s] = 1 for every state s an allowed
 *                                       token ends in; M must exceed every such s
 * sub, loop, lflag: (optional, together) uint64 [N * 4] subtree byte sets (subtree_bytes),
 *                uint64 [4] the bytes on which `state` loops to itself, uint8 [max_depth + 1]
 *                scratch.  A subtree reached by a path of loop bytes only and made of loop
 *                bytes only is skipped: the caller has set its tokens (they all end in
 *                `state`) in `bits` beforehand, and `ends` / `reached` are not written for them.
 *
 * Returns -1 when the walk is complete, otherwise the node position at which an unexpanded
 * state (stack[node_depth[pos] - 1]) was met.  Raises ValueError on out-of-range data.
 */
static PyObject *walk(PyObject *self, PyObject *args) {
    PyObject *o_table, *o_cob, *o_byte, *o_depth, *o_skip, *o_token, *o_stack, *o_bits, *o_ends, *o_reached = Py_None;
    PyObject *o_sub = Py_None, *o_loop = Py_None, *o_lflag = Py_None;
    Py_ssize_t num_classes, state, pos;
    if (!PyArg_ParseTuple(args, "OnOOOOOnnOOO|OOOO", &o_table, &num_classes, &o_cob, &o_byte, &o_depth, &o_skip, &o_token, &state,
                          &pos, &o_stack, &o_bits, &o_ends, &o_reached, &o_sub, &o_loop, &o_lflag)) {
        return NULL;
    }
    enum { T_TABLE, T_COB, T_BYTE, T_DEPTH, T_SKIP, T_TOKEN, T_STACK, T_BITS, T_ENDS, T_REACHED, T_SUB, T_LOOP, T_LFLAG, N_BUFS };
    PyObject *objs[N_BUFS] = {o_table, o_cob, o_byte, o_depth, o_skip, o_token, o_stack, o_bits, o_ends, o_reached, o_sub, o_loop, o_lflag};
    static const Py_ssize_t itemsizes[N_BUFS] = {4, 4, 1, 4, 4, 4, 4, 4, 4, 1, 8, 8, 1};
    static const int writable[N_BUFS] = {0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 1};
    static const char *names[N_BUFS] = {"table", "class_of_byte", "node_byte", "node_depth", "node_skip",
                                        "node_token", "stack", "bits", "ends", "reached", "sub", "loop", "lflag"};
    Py_buffer bufs[N_BUFS];
    int got[N_BUFS] = {0};
    PyObject *ret = NULL;
    for (int k = 0; k < N_BUFS; k++) {
        if (objs[k] == Py_None && k >= T_ENDS) {
            continue;
        }
        if (get_buf(objs[k], &bufs[k], itemsizes[k], writable[k], names[k]) < 0) goto fail;
        got[k] = 1;
    }
    Py_buffer b_table = bufs[T_TABLE], b_cob = bufs[T_COB], b_byte = bufs[T_BYTE], b_depth = bufs[T_DEPTH],
              b_skip = bufs[T_SKIP], b_token = bufs[T_TOKEN], b_stack = bufs[T_STACK], b_bits = bufs[T_BITS];
    const int have_ends = got[T_ENDS];
    const int have_reached = got[T_REACHED];
    const int have_skip = got[T_SUB] && got[T_LOOP] && got[T_LFLAG];
    if ((got[T_SUB] || got[T_LOOP] || got[T_LFLAG]) && !have_skip) {
        PyErr_SetString(PyExc_ValueError, "walk: sub, loop and lflag go together");
        goto fail;
    }

    const Py_ssize_t n = b_byte.len;
    const Py_ssize_t n_states = num_classes > 0 ? (b_table.len / 4) / num_classes : 0;
    const Py_ssize_t max_depth = b_stack.len / 4 - 1;
    const Py_ssize_t words = b_bits.len / 4;
    const Py_ssize_t n_ends = have_ends ? bufs[T_ENDS].len / 4 : 0;
    const Py_ssize_t n_reached = have_reached ? bufs[T_REACHED].len : 0;
    if (b_cob.len != 256 * 4 || b_depth.len != n * 4 || b_skip.len != n * 4 || b_token.len != n * 4 || num_classes <= 0 ||
        state < 0 || state >= n_states || pos < 0 || pos > n || max_depth < 0 ||
        (have_skip && (bufs[T_SUB].len != n * 32 || bufs[T_LOOP].len != 32 || bufs[T_LFLAG].len < (max_depth + 1)))) {
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
    int32_t *ends = have_ends ? (int32_t *)bufs[T_ENDS].buf : NULL;
    uint8_t *reached = have_reached ? (uint8_t *)bufs[T_REACHED].buf : NULL;
    const uint64_t *sub = have_skip ? (const uint64_t *)bufs[T_SUB].buf : NULL;
    const uint64_t *loop = have_skip ? (const uint64_t *)bufs[T_LOOP].buf : NULL;
    uint8_t *lflag = have_skip ? (uint8_t *)bufs[T_LFLAG].buf : NULL;
    Py_ssize_t result = -1;
    int bad = 0;

    Py_BEGIN_ALLOW_THREADS
    if (pos == 0) {
        stack[0] = (int32_t)state;
        if (lflag) {
            lflag[0] = 1;
        }
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
        int32_t ns = 0; /* 0: skip the subtree (dead, or all loop bytes from the start state) */
        const uint64_t *sb = lflag && lflag[d - 1] ? sub + (size_t)i * 4 : NULL;
        /* the path so far only used bytes on which the start state loops: when the whole
           subtree does too, its tokens are the caller's (pre-set) loop tokens */
        if (!sb || ((sb[0] & ~loop[0]) | (sb[1] & ~loop[1]) | (sb[2] & ~loop[2]) | (sb[3] & ~loop[3]))) {
            ns = table[(Py_ssize_t)s * num_classes + cob[nbyte[i]]];
            if (ns < 0) {
                result = i;
                break;
            }
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
        if (lflag) {
            const uint8_t b = nbyte[i];
            lflag[d] = lflag[d - 1] && ((loop[b >> 6] >> (b & 63)) & 1);
        }
        const int32_t t = ntoken[i];
        if (t >= 0) {
            if ((t >> 5) >= words || (ends && t >= n_ends) || (reached && ns >= n_reached)) {
                bad = 1;
                break;
            }
            bits[t >> 5] |= (uint32_t)1 << (t & 31);
            if (ends) {
                ends[t] = ns;
            }
            if (reached) {
                reached[ns] = 1;
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
    for (int k = N_BUFS - 1; k >= 0; k--) {
        if (got[k]) {
            PyBuffer_Release(&bufs[k]);
        }
    }
    return ret;
}

/* subtree_bytes(node_byte, node_skip, out) -> None
 *
 * out: uint64 [N * 4]  for each preorder node, the 256-bit set of edge bytes in its subtree
 *                      (itself included), filled back to front in O(N).
 */
static PyObject *subtree_bytes(PyObject *self, PyObject *args) {
    PyObject *o_byte, *o_skip, *o_out;
    if (!PyArg_ParseTuple(args, "OOO", &o_byte, &o_skip, &o_out)) {
        return NULL;
    }
    Py_buffer b_byte, b_skip, b_out;
    if (get_buf(o_byte, &b_byte, 1, 0, "node_byte") < 0) return NULL;
    if (get_buf(o_skip, &b_skip, 4, 0, "node_skip") < 0) {
        PyBuffer_Release(&b_byte);
        return NULL;
    }
    if (get_buf(o_out, &b_out, 8, 1, "out") < 0) {
        PyBuffer_Release(&b_skip);
        PyBuffer_Release(&b_byte);
        return NULL;
    }
    const Py_ssize_t n = b_byte.len;
    int bad = b_skip.len != n * 4 || b_out.len != n * 32;
    if (!bad) {
        const uint8_t *nbyte = (const uint8_t *)b_byte.buf;
        const int32_t *nskip = (const int32_t *)b_skip.buf;
        uint64_t *out = (uint64_t *)b_out.buf;
        for (Py_ssize_t i = n - 1; i >= 0 && !bad; i--) {
            uint64_t *o = out + (size_t)i * 4;
            o[0] = o[1] = o[2] = o[3] = 0;
            o[nbyte[i] >> 6] |= (uint64_t)1 << (nbyte[i] & 63);
            const Py_ssize_t end = i + nskip[i];
            if (nskip[i] < 1 || end > n) {
                bad = 1;
                break;
            }
            for (Py_ssize_t j = i + 1; j < end; j += nskip[j]) {
                if (nskip[j] < 1) {
                    bad = 1;
                    break;
                }
                const uint64_t *c = out + (size_t)j * 4;
                o[0] |= c[0];
                o[1] |= c[1];
                o[2] |= c[2];
                o[3] |= c[3];
            }
        }
    }
    PyBuffer_Release(&b_out);
    PyBuffer_Release(&b_skip);
    PyBuffer_Release(&b_byte);
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "subtree_bytes: inconsistent trie buffers");
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"walk", walk, METH_VARARGS, "Preorder trie walk from one automaton state (see _trie_walk.c)."},
    {"subtree_bytes", subtree_bytes, METH_VARARGS, "Per preorder node, the set of edge bytes in its subtree."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_trie_walk", "Compiled token-bitmask trie walk.", -1, methods};

PyMODINIT_FUNC PyInit__trie_walk(void) { return PyModule_Create(&module); }
