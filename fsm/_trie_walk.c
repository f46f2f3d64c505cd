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

/* Acquire n buffers, all or none: 0 on success, -1 with the exception set. */
static int get_bufs(PyObject *const *objs, Py_buffer *bufs, const Py_ssize_t *itemsizes, const int *writable, const char *const *names,
                    int n) {
    for (int k = 0; k < n; k++) {
        if (get_buf(objs[k], &bufs[k], itemsizes[k], writable[k], names[k]) < 0) {
            while (--k >= 0) {
                PyBuffer_Release(&bufs[k]);
            }
            return -1;
        }
    }
    return 0;
}

static void release_bufs(Py_buffer *bufs, int n) {
    for (int k = n - 1; k >= 0; k--) {
        PyBuffer_Release(&bufs[k]);
    }
}

/* The three-buffer helpers below: parse their arguments into `bufs` (0, or -1 with the
   exception set); release them, returning None or raising ValueError(`msg`) when `bad`. */
static int parse_bufs3(PyObject *args, Py_buffer *bufs, const Py_ssize_t *itemsizes, const int *writable, const char *const *names) {
    PyObject *objs[3];
    if (!PyArg_ParseTuple(args, "OOO", &objs[0], &objs[1], &objs[2])) {
        return -1;
    }
    return get_bufs(objs, bufs, itemsizes, writable, names, 3);
}

static PyObject *finish_bufs3(Py_buffer *bufs, int bad, const char *msg) {
    release_bufs(bufs, 3);
    if (bad) {
        PyErr_SetString(PyExc_ValueError, msg);
        return NULL;
    }
    Py_RETURN_NONE;
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
 *                scratch.  A subtree reached by a path of loop bytes only
 *                and made of loop bytes only is skipped: the caller has set its tokens (they
 *                all end in `state`) in `bits` beforehand, and `ends` / `reached` are not
 *                written for them.
 * vrow:          (optional) int32 [C] replaces the start state's row for the children of the
 *                root (0 = skip that child); not with sub / loop / lflag.  A row of the automaton
 *                with some classes zeroed walks part of the trie; a row sending every class
 *                to one state q gives, per first byte, the tokens whose tail q accepts.
 *
 * Returns -1 when the walk is complete, otherwise the node position at which an unexpanded
 * state (stack[node_depth[pos] - 1]) was met.  Raises ValueError on out-of-range data.
 */
static PyObject *walk(PyObject *self, PyObject *args) {
    PyObject *o_table, *o_cob, *o_byte, *o_depth, *o_skip, *o_token, *o_stack, *o_bits, *o_ends, *o_reached = Py_None;
    PyObject *o_sub = Py_None, *o_loop = Py_None, *o_lflag = Py_None, *o_vrow = Py_None;
    Py_ssize_t num_classes, state, pos;
    if (!PyArg_ParseTuple(args, "OnOOOOOnnOOO|OOOOO", &o_table, &num_classes, &o_cob, &o_byte, &o_depth, &o_skip, &o_token, &state,
                          &pos, &o_stack, &o_bits, &o_ends, &o_reached, &o_sub, &o_loop, &o_lflag, &o_vrow)) {
        return NULL;
    }
    enum { T_TABLE, T_COB, T_BYTE, T_DEPTH, T_SKIP, T_TOKEN, T_STACK, T_BITS, T_ENDS, T_REACHED, T_SUB, T_LOOP, T_LFLAG, T_VROW, N_BUFS };
    PyObject *objs[N_BUFS] = {o_table, o_cob, o_byte, o_depth, o_skip, o_token, o_stack, o_bits, o_ends, o_reached, o_sub, o_loop, o_lflag, o_vrow};
    static const Py_ssize_t itemsizes[N_BUFS] = {4, 4, 1, 4, 4, 4, 4, 4, 4, 1, 8, 8, 1, 4};
    static const int writable[N_BUFS] = {0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 1, 0};
    static const char *names[N_BUFS] = {"table", "class_of_byte", "node_byte", "node_depth", "node_skip", "node_token", "stack",
                                        "bits",  "ends",          "reached",   "sub",        "loop",      "lflag",      "vrow"};
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
        (have_skip && (bufs[T_SUB].len != n * 32 || bufs[T_LOOP].len != 32 || bufs[T_LFLAG].len < (max_depth + 1))) ||
        (got[T_VROW] && (bufs[T_VROW].len != num_classes * 4 || have_skip))) {
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
    const int32_t *vrow = got[T_VROW] ? (const int32_t *)bufs[T_VROW].buf : NULL;
    Py_ssize_t result = -1;
    int bad = 0;
    /* token ids must index `bits` (and `ends`) */
    const Py_ssize_t tok_limit = have_ends && n_ends < words * 32 ? n_ends : words * 32;
    uint32_t dummy_word = 0;
    int32_t dummy_end = 0;
    uint8_t dummy_reached = 0;

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
            ns = (d == 1 && vrow ? vrow : table + (Py_ssize_t)s * num_classes)[cob[nbyte[i]]];
            if (ns < 0 || ns >= n_states) {
                if (ns >= n_states) {
                    bad = 1;
                    break;
                }
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
        /* branch-free token marking: about half the nodes spell a token, in no pattern the
           branch predictor could learn; non-tokens (t = -1) write into dummies instead */
        const int32_t t = ntoken[i];
        if (t >= tok_limit || (reached && ns >= n_reached)) {
            bad = 1;
            break;
        }
        const int is_tok = t >= 0;
        uint32_t *wp = is_tok ? bits + (t >> 5) : &dummy_word;
        *wp |= (uint32_t)is_tok << (t & 31);
        if (ends) {
            int32_t *ep = is_tok ? ends + t : &dummy_end;
            *ep = ns;
        }
        if (reached) {
            uint8_t *rp = is_tok ? reached + ns : &dummy_reached;
            *rp = 1;
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

/* One preorder node of a packed trie (pack_nodes): the fields the fast walk reads, together. */
typedef struct {
    int32_t skip;  /* subtree size including the node */
    int32_t token; /* the number the node sets in `bits`, -1 if none */
    uint8_t byte;  /* edge byte into the node */
    uint8_t pad;
    uint16_t depth; /* 1 for children of the root */
} trie_node;

/* pack_nodes(node_byte, node_depth, node_skip, node_token, out) -> None
 *
 * node_byte uint8 [N], node_depth / node_skip / node_token int32 [N] (walk's layout);
 * out: 12 * N bytes, the trie_node array walk_bits reads.  Raises ValueError for a depth
 * outside 1..65535, a skip that leaves the array or is < 1, or a token < -1.
 */
static PyObject *pack_nodes(PyObject *self, PyObject *args) {
    PyObject *objs[5];
    if (!PyArg_ParseTuple(args, "OOOOO", &objs[0], &objs[1], &objs[2], &objs[3], &objs[4])) {
        return NULL;
    }
    static const Py_ssize_t itemsizes[5] = {1, 4, 4, 4, 1};
    static const int writable[5] = {0, 0, 0, 0, 1};
    static const char *const names[5] = {"node_byte", "node_depth", "node_skip", "node_token", "out"};
    Py_buffer bufs[5];
    if (get_bufs(objs, bufs, itemsizes, writable, names, 5) < 0) return NULL;
    const Py_ssize_t n = bufs[0].len;
    int bad = bufs[1].len != n * 4 || bufs[2].len != n * 4 || bufs[3].len != n * 4 || bufs[4].len != n * (Py_ssize_t)sizeof(trie_node);
    if (!bad) {
        const uint8_t *nbyte = (const uint8_t *)bufs[0].buf;
        const int32_t *ndepth = (const int32_t *)bufs[1].buf, *nskip = (const int32_t *)bufs[2].buf, *ntoken = (const int32_t *)bufs[3].buf;
        trie_node *out = (trie_node *)bufs[4].buf;
        for (Py_ssize_t i = 0; i < n; i++) {
            if (ndepth[i] < 1 || ndepth[i] > 65535 || nskip[i] < 1 || nskip[i] > n - i || ntoken[i] < -1) {
                bad = 1;
                break;
            }
            out[i].skip = nskip[i];
            out[i].token = ntoken[i];
            out[i].byte = nbyte[i];
            out[i].pad = 0;
            out[i].depth = (uint16_t)ndepth[i];
        }
    }
    release_bufs(bufs, 5);
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "pack_nodes: inconsistent trie buffers");
        return NULL;
    }
    Py_RETURN_NONE;
}

/* The scan of walk_bits, specialized by the compiler for each (vrow, loop skip) use. */
static inline Py_ssize_t scan_bits(const int32_t *table, Py_ssize_t num_classes, Py_ssize_t n_states, const int32_t *cob,
                                   const trie_node *nodes, Py_ssize_t n, Py_ssize_t pos, int32_t *stack, Py_ssize_t max_depth,
                                   uint32_t *bits, Py_ssize_t tok_limit, const int32_t *vrow, const uint8_t *within,
                                   const uint8_t *loop, uint8_t *lflag, int *bad) {
    uint32_t dummy_word = 0;
    Py_ssize_t i = pos;
    while (i < n) {
        const trie_node nd = nodes[i];
        const int32_t d = nd.depth;
        if (d < 1 || d > max_depth || nd.skip < 1) { /* nodes not made by pack_nodes */
            *bad = 1;
            return -1;
        }
        if (within && lflag[d - 1] && within[i]) {
            i += nd.skip; /* loop bytes only, on the path and below: the caller's pre-set tokens */
            continue;
        }
        const int32_t s = stack[d - 1];
        const int32_t ns = (vrow && d == 1 ? vrow : table + (Py_ssize_t)s * num_classes)[cob[nd.byte]];
        if (ns <= 0) {
            if (ns < 0) {
                return i; /* an unexpanded state: the caller expands stack[d - 1] and resumes here */
            }
            i += nd.skip;
            continue;
        }
        if (ns >= n_states || nd.token >= tok_limit) {
            *bad = 1;
            return -1;
        }
        stack[d] = ns;
        if (within) { /* with vrow, every first byte leads to the loop state: only later bytes are checked */
            lflag[d] = (vrow && d == 1) || (lflag[d - 1] && loop[nd.byte]);
        }
        /* branch-free token marking (see walk) */
        const int32_t t = nd.token;
        const int is_tok = t >= 0;
        uint32_t *wp = is_tok ? bits + (t >> 5) : &dummy_word;
        *wp |= (uint32_t)is_tok << (t & 31);
        i += 1;
    }
    return -1;
}

/* walk_bits(table, num_classes, class_of_byte, nodes, state, pos, stack, bits[, vrow[, within, loop, lflag]]) -> int
 *
 * walk's fast form when only the bitmask is wanted (no ends, no reached): the same scan over
 * a packed trie (nodes: pack_nodes' output; each node is still range-checked): a full Llama-3 trie walk
 * took 1.38 ms against walk's 1.77 ms (benchmarks/compile_cpu.py, the compile-cpu results at commit 7030601).
 * vrow:   int32 [C] or None, as in walk.
 * within: uint8 [N] or None: within[i] = 1 when node i's subtree uses only bytes of `loop`
 *         (subtree_within); with loop (uint8 [256], 1 = the start state loops on the byte)
 *         and lflag (uint8 [max_depth + 1] scratch), the loop-subtree skip of walk: such a
 *         subtree reached by a path of loop bytes only is skipped (its tokens pre-set by the
 *         caller).  With vrow as well, every vrow entry must be the state that loops on
 *         `loop`: the path's first byte is then not checked against `loop` (the skipped
 *         tokens are those whose bytes after the first are loop bytes: per first byte, the
 *         tails the loop state accepts).
 * Returns as walk: -1 when complete, else the position of an unexpanded state.
 */
static PyObject *walk_bits(PyObject *self, PyObject *args) {
    PyObject *o_table, *o_cob, *o_nodes, *o_stack, *o_bits, *o_vrow = Py_None, *o_within = Py_None, *o_loop = Py_None,
                                                          *o_lflag = Py_None;
    Py_ssize_t num_classes, state, pos;
    if (!PyArg_ParseTuple(args, "OnOOnnOO|OOOO", &o_table, &num_classes, &o_cob, &o_nodes, &state, &pos, &o_stack, &o_bits, &o_vrow,
                          &o_within, &o_loop, &o_lflag)) {
        return NULL;
    }
    enum { B_TABLE, B_COB, B_NODES, B_STACK, B_BITS, B_VROW, B_WITHIN, B_LOOP, B_LFLAG, N_B };
    PyObject *objs[N_B] = {o_table, o_cob, o_nodes, o_stack, o_bits, o_vrow, o_within, o_loop, o_lflag};
    static const Py_ssize_t itemsizes[N_B] = {4, 4, 1, 4, 4, 4, 1, 1, 1};
    static const int writable[N_B] = {0, 0, 0, 1, 1, 0, 0, 0, 1};
    static const char *names[N_B] = {"table", "class_of_byte", "nodes", "stack", "bits", "vrow", "within", "loop", "lflag"};
    Py_buffer bufs[N_B];
    int got[N_B] = {0};
    PyObject *ret = NULL;
    for (int k = 0; k < N_B; k++) {
        if (objs[k] == Py_None && k >= B_VROW) {
            continue;
        }
        if (get_buf(objs[k], &bufs[k], itemsizes[k], writable[k], names[k]) < 0) goto fail;
        got[k] = 1;
    }
    {
        const Py_ssize_t n = bufs[B_NODES].len / (Py_ssize_t)sizeof(trie_node);
        const Py_ssize_t n_states = num_classes > 0 ? (bufs[B_TABLE].len / 4) / num_classes : 0;
        const Py_ssize_t max_depth = bufs[B_STACK].len / 4 - 1;
        const int have_skip = got[B_WITHIN] && got[B_LOOP] && got[B_LFLAG];
        if ((got[B_WITHIN] || got[B_LOOP] || got[B_LFLAG]) && !have_skip) {
            PyErr_SetString(PyExc_ValueError, "walk_bits: within, loop and lflag go together");
            goto fail;
        }
        if (bufs[B_NODES].len % (Py_ssize_t)sizeof(trie_node) || bufs[B_COB].len != 256 * 4 || num_classes <= 0 || state < 0 ||
            state >= n_states || pos < 0 || pos > n || max_depth < 0 ||
            (have_skip && (bufs[B_WITHIN].len != n || bufs[B_LOOP].len != 256 || bufs[B_LFLAG].len < max_depth + 1)) ||
            (got[B_VROW] && bufs[B_VROW].len != num_classes * 4)) {
            PyErr_SetString(PyExc_ValueError, "walk_bits: inconsistent buffer sizes or arguments");
            goto fail;
        }
        const int32_t *table = (const int32_t *)bufs[B_TABLE].buf;
        const int32_t *cob = (const int32_t *)bufs[B_COB].buf;
        for (int b = 0; b < 256; b++) {
            if (cob[b] < 0 || cob[b] >= num_classes) {
                PyErr_SetString(PyExc_ValueError, "walk_bits: class_of_byte out of range");
                goto fail;
            }
        }
        const trie_node *nodes = (const trie_node *)bufs[B_NODES].buf;
        int32_t *stack = (int32_t *)bufs[B_STACK].buf;
        uint32_t *bits = (uint32_t *)bufs[B_BITS].buf;
        const Py_ssize_t tok_limit = bufs[B_BITS].len / 4 * 32;
        const int32_t *vrow = got[B_VROW] ? (const int32_t *)bufs[B_VROW].buf : NULL;
        const uint8_t *within = have_skip ? (const uint8_t *)bufs[B_WITHIN].buf : NULL;
        const uint8_t *loop = have_skip ? (const uint8_t *)bufs[B_LOOP].buf : NULL;
        uint8_t *lflag = have_skip ? (uint8_t *)bufs[B_LFLAG].buf : NULL;
        if (vrow) {
            for (Py_ssize_t c = 0; c < num_classes; c++) {
                if (vrow[c] < 0 || vrow[c] >= n_states) {
                    PyErr_SetString(PyExc_ValueError, "walk_bits: vrow out of range");
                    goto fail;
                }
            }
        }
        if (pos > 0) { /* resuming: the stack must hold states */
            for (Py_ssize_t d = 0; d < max_depth + 1 && d < (pos < n ? nodes[pos].depth : 1); d++) {
                if (stack[d] < 0 || stack[d] >= n_states) {
                    PyErr_SetString(PyExc_ValueError, "walk_bits: stack out of range");
                    goto fail;
                }
            }
        }
        Py_ssize_t result;
        int bad = 0;
        Py_BEGIN_ALLOW_THREADS
        if (pos == 0) {
            stack[0] = (int32_t)state;
            if (lflag) {
                lflag[0] = 1;
            }
        }
        if (within && vrow) {
            result = scan_bits(table, num_classes, n_states, cob, nodes, n, pos, stack, max_depth, bits, tok_limit, vrow, within, loop,
                               lflag, &bad);
        } else if (within) {
            result = scan_bits(table, num_classes, n_states, cob, nodes, n, pos, stack, max_depth, bits, tok_limit, NULL, within, loop,
                               lflag, &bad);
        } else if (vrow) {
            result = scan_bits(table, num_classes, n_states, cob, nodes, n, pos, stack, max_depth, bits, tok_limit, vrow, NULL, NULL,
                               NULL, &bad);
        } else {
            result = scan_bits(table, num_classes, n_states, cob, nodes, n, pos, stack, max_depth, bits, tok_limit, NULL, NULL, NULL,
                               NULL, &bad);
        }
        Py_END_ALLOW_THREADS
        if (bad) {
            PyErr_SetString(PyExc_ValueError, "walk_bits: trie or automaton data out of range");
        } else {
            ret = PyLong_FromSsize_t(result);
        }
    }
fail:
    for (int k = N_B - 1; k >= 0; k--) {
        if (got[k]) {
            PyBuffer_Release(&bufs[k]);
        }
    }
    return ret;
}

/* body_shape(table, num_classes, sigma, state, out, max_depth, missing) -> int
 *
 * The automaton restricted to the classes with sigma[c] = 1 (uint8 [C]), from `state`, in
 * canonical form: out (int32 [M * C], M - 1 the most states kept) gets row 0 all dead, row 1
 * `state`, then the states it reaches in breadth-first order (first seen, first numbered),
 * each row holding the canonical numbers of its targets (0: dead or outside sigma).  With
 * max_depth > 0, states first reached after max_depth bytes keep an all-dead row: the shape is
 * exact for strings of at most max_depth bytes (0: no cut).  Returns the rows used (n + 1), 0
 * when more than M - 1 states are reached, or -k after writing to missing (int32 [K]) the
 * first k ≤ K reached states not expanded yet (table row of -1): the caller expands them and
 * calls again.
 */
static PyObject *body_shape(PyObject *self, PyObject *args) {
    PyObject *objs[4];
    Py_ssize_t num_classes, state, max_depth;
    if (!PyArg_ParseTuple(args, "OnOnOnO", &objs[0], &num_classes, &objs[1], &state, &objs[2], &max_depth, &objs[3])) {
        return NULL;
    }
    static const Py_ssize_t itemsizes[4] = {4, 1, 4, 4};
    static const int writable[4] = {0, 0, 1, 1};
    static const char *const names[4] = {"table", "sigma", "out", "missing"};
    Py_buffer bufs[4];
    const int n_bufs = 4;
    if (get_bufs(objs, bufs, itemsizes, writable, names, n_bufs) < 0) return NULL;
    const Py_ssize_t n_states = num_classes > 0 ? bufs[0].len / 4 / num_classes : 0;
    const Py_ssize_t m = num_classes > 0 ? bufs[2].len / 4 / num_classes : 0;
    const Py_ssize_t k_missing = bufs[3].len / 4;
    if (num_classes <= 0 || bufs[1].len != num_classes || bufs[2].len != m * num_classes * 4 || m < 2 || m > 4096 || state <= 0 ||
        state >= n_states || max_depth < 0 || k_missing < 1) {
        release_bufs(bufs, n_bufs);
        PyErr_SetString(PyExc_ValueError, "body_shape: inconsistent buffers or arguments");
        return NULL;
    }
    const int32_t *table = (const int32_t *)bufs[0].buf;
    const uint8_t *sigma = (const uint8_t *)bufs[1].buf;
    int32_t *out = (int32_t *)bufs[2].buf;
    int32_t *missing = (int32_t *)bufs[3].buf;
    /* order[j]: the automaton state numbered j; depth[j]: its breadth-first depth; slots: an
       open-addressing map state -> number (8192 slots, at most half full) */
    int32_t order[4096], depth[4096];
    int32_t *slot_key = (int32_t *)malloc(8192 * sizeof(int32_t));
    int32_t *slot_val = (int32_t *)malloc(8192 * sizeof(int32_t));
    if (!slot_key || !slot_val) {
        free(slot_key);
        free(slot_val);
        release_bufs(bufs, n_bufs);
        return PyErr_NoMemory();
    }
    memset(slot_key, 0xff, 8192 * sizeof(int32_t));
    Py_ssize_t n = 1, n_missing = 0;
    int bad = 0;
    order[1] = (int32_t)state;
    depth[1] = 0;
    slot_key[(uint32_t)state * 2654435761u & 8191] = (int32_t)state;
    slot_val[(uint32_t)state * 2654435761u & 8191] = 1;
    memset(out, 0, (size_t)num_classes * 4);
    for (Py_ssize_t k = 1; k <= n && !bad; k++) {
        const int32_t *row = table + (Py_ssize_t)order[k] * num_classes;
        int32_t *o = out + k * num_classes;
        memset(o, 0, (size_t)num_classes * 4);
        if (max_depth > 0 && depth[k] >= max_depth) {
            continue; /* past the depth kept: no byte leads on */
        }
        if (row[0] < 0) {
            if (n_missing < k_missing) missing[n_missing++] = order[k];
            continue; /* the caller expands it; go on collecting the others */
        }
        for (Py_ssize_t c = 0; c < num_classes; c++) {
            const int32_t t = sigma[c] ? row[c] : 0;
            if (t < 0 || t >= n_states) {
                bad = 1;
                break;
            }
            int32_t id = 0;
            if (t > 0) {
                uint32_t h = (uint32_t)t * 2654435761u & 8191;
                while (slot_key[h] != -1 && slot_key[h] != t) h = (h + 1) & 8191;
                if (slot_key[h] == t) {
                    id = slot_val[h];
                } else {
                    if (n + 1 >= m) {
                        n = -1; /* too many states */
                        break;
                    }
                    order[++n] = t;
                    depth[n] = depth[k] + 1;
                    slot_key[h] = t;
                    slot_val[h] = (int32_t)n;
                    id = (int32_t)n;
                }
            }
            o[c] = id;
        }
        if (n < 0) {
            break;
        }
    }
    free(slot_key);
    free(slot_val);
    release_bufs(bufs, n_bufs);
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "body_shape: automaton data out of range");
        return NULL;
    }
    if (n >= 0 && n_missing) {
        return PyLong_FromSsize_t(-n_missing);
    }
    return PyLong_FromSsize_t(n < 0 ? 0 : n + 1);
}

/* subtree_within(node_byte, node_skip, loop, out) -> None
 *
 * loop: uint8 [256] (1 = in the set); out: uint8 [N], out[i] = 1 when every edge byte in node
 * i's subtree (itself included) is in the set.  Back to front in O(N).
 */
static PyObject *subtree_within(PyObject *self, PyObject *args) {
    PyObject *objs[4];
    if (!PyArg_ParseTuple(args, "OOOO", &objs[0], &objs[1], &objs[2], &objs[3])) {
        return NULL;
    }
    static const Py_ssize_t itemsizes[4] = {1, 4, 1, 1};
    static const int writable[4] = {0, 0, 0, 1};
    static const char *const names[4] = {"node_byte", "node_skip", "loop", "out"};
    Py_buffer bufs[4];
    if (get_bufs(objs, bufs, itemsizes, writable, names, 4) < 0) return NULL;
    const Py_ssize_t n = bufs[0].len;
    int bad = bufs[1].len != n * 4 || bufs[2].len != 256 || bufs[3].len != n;
    if (!bad) {
        const uint8_t *nbyte = (const uint8_t *)bufs[0].buf, *loop = (const uint8_t *)bufs[2].buf;
        const int32_t *nskip = (const int32_t *)bufs[1].buf;
        uint8_t *out = (uint8_t *)bufs[3].buf;
        for (Py_ssize_t i = n - 1; i >= 0 && !bad; i--) {
            const Py_ssize_t end = i + nskip[i];
            if (nskip[i] < 1 || end > n) {
                bad = 1;
                break;
            }
            uint8_t w = loop[nbyte[i]] != 0;
            for (Py_ssize_t j = i + 1; j < end && w; j += nskip[j]) {
                if (nskip[j] < 1) {
                    bad = 1;
                    break;
                }
                w = out[j];
            }
            out[i] = w;
        }
    }
    release_bufs(bufs, 4);
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "subtree_within: inconsistent trie buffers");
        return NULL;
    }
    Py_RETURN_NONE;
}

/* subtree_bytes(node_byte, node_skip, out) -> None
 *
 * out: uint64 [N * 4]  for each preorder node, the 256-bit set of edge bytes in its subtree
 *                      (itself included), filled back to front in O(N).
 */
static PyObject *subtree_bytes(PyObject *self, PyObject *args) {
    static const Py_ssize_t itemsizes[3] = {1, 4, 8};
    static const int writable[3] = {0, 0, 1};
    static const char *const names[3] = {"node_byte", "node_skip", "out"};
    Py_buffer bufs[3];
    if (parse_bufs3(args, bufs, itemsizes, writable, names) < 0) return NULL;
    Py_buffer b_byte = bufs[0], b_skip = bufs[1], b_out = bufs[2];
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
    return finish_bufs3(bufs, bad, "subtree_bytes: inconsistent trie buffers");
}

/* copy_ranges(dst, src, ranges) -> None
 *
 * dst, src: uint32 [W]      bitmasks (bit k = word k >> 5, bit k & 31)
 * ranges:   int64 [R * 2]   [lo, hi) bit ranges: dst's bits there are replaced by src's.
 */
static PyObject *copy_ranges(PyObject *self, PyObject *args) {
    static const Py_ssize_t itemsizes[3] = {4, 4, 8};
    static const int writable[3] = {1, 0, 0};
    static const char *const names[3] = {"dst", "src", "ranges"};
    Py_buffer bufs[3];
    if (parse_bufs3(args, bufs, itemsizes, writable, names) < 0) return NULL;
    Py_buffer b_dst = bufs[0], b_src = bufs[1], b_rng = bufs[2];
    const Py_ssize_t words = b_dst.len / 4, nr = b_rng.len / 16;
    const int64_t *rng = (const int64_t *)b_rng.buf;
    int bad = b_src.len != b_dst.len || b_rng.len % 16;
    for (Py_ssize_t r = 0; r < nr && !bad; r++) {
        if (rng[2 * r] < 0 || rng[2 * r] > rng[2 * r + 1] || rng[2 * r + 1] > words * 32) {
            bad = 1;
        }
    }
    if (!bad) {
        uint32_t *dst = (uint32_t *)b_dst.buf;
        const uint32_t *src = (const uint32_t *)b_src.buf;
        for (Py_ssize_t r = 0; r < nr; r++) {
            int64_t lo = rng[2 * r];
            const int64_t hi = rng[2 * r + 1];
            while (lo < hi) {
                const int64_t w = lo >> 5;
                const int b0 = (int)(lo & 31);
                const int64_t b1 = hi - (w << 5) < 32 ? hi - (w << 5) : 32; /* bits [b0, b1) of word w */
                const uint32_t m = (b1 == 32 ? 0xFFFFFFFFu : (((uint32_t)1 << b1) - 1)) & ~(((uint32_t)1 << b0) - 1);
                dst[w] = (dst[w] & ~m) | (src[w] & m);
                lo = (w << 5) + b1;
            }
        }
    }
    return finish_bufs3(bufs, bad, "copy_ranges: inconsistent buffers or ranges");
}

/* permute_bits(src, index, dst) -> None
 *
 * src:   uint32 [ceil(K / 32)]  bits in one numbering (the trie's token order)
 * index: int32 [K]              position of each source bit in dst's numbering (token ids)
 * dst:   uint32 [W]             bits OR-ed in: dst bit index[k] |= src bit k
 */
static PyObject *permute_bits(PyObject *self, PyObject *args) {
    static const Py_ssize_t itemsizes[3] = {4, 4, 4};
    static const int writable[3] = {0, 0, 1};
    static const char *const names[3] = {"src", "index", "dst"};
    Py_buffer bufs[3];
    if (parse_bufs3(args, bufs, itemsizes, writable, names) < 0) return NULL;
    Py_buffer b_src = bufs[0], b_idx = bufs[1], b_dst = bufs[2];
    const Py_ssize_t k_n = b_idx.len / 4, dwords = b_dst.len / 4;
    int bad = b_src.len / 4 < (k_n + 31) / 32;
    if (!bad) {
        const uint32_t *src = (const uint32_t *)b_src.buf;
        const int32_t *index = (const int32_t *)b_idx.buf;
        uint32_t *dst = (uint32_t *)b_dst.buf;
        for (Py_ssize_t w = 0; w < (k_n + 31) / 32 && !bad; w++) {
            uint32_t word = src[w];
            while (word) {
                const int b = __builtin_ctz(word);
                word &= word - 1;
                const int32_t t = index[(w << 5) + b];
                if ((w << 5) + b >= k_n || t < 0 || (t >> 5) >= dwords) {
                    bad = 1;
                    break;
                }
                dst[t >> 5] |= (uint32_t)1 << (t & 31);
            }
        }
    }
    return finish_bufs3(bufs, bad, "permute_bits: inconsistent buffers");
}

/* Whether a class_of_byte buffer is not 256 classes in 0..num_classes-1. */
static int bad_classes(const Py_buffer *cob, long num_classes) {
    if (cob->len != 256 * 4 || num_classes < 1) return 1;
    const int32_t *c = (const int32_t *)cob->buf;
    for (int b = 0; b < 256; b++) {
        if (c[b] < 0 || c[b] >= num_classes) return 1;
    }
    return 0;
}

/* The bytes data[0..n) from `state` through a table of `cells` entries, `num_classes` wide:
 * the state reached (0 once dead, the walk stopping there), or -1 - s at the unexpanded state s;
 * *at_byte: the index of the byte it stopped on (n when every byte was walked and it is live);
 * *bad set on a state or class outside the table. */
static long walk_table(const int32_t *table, Py_ssize_t cells, long num_classes, const int32_t *cob, long state,
                       const unsigned char *data, Py_ssize_t n, Py_ssize_t *at_byte, int *bad) {
    long cur = state;
    for (Py_ssize_t i = 0; i < n; i++) {
        const Py_ssize_t at = (Py_ssize_t)cur * num_classes + cob[data[i]];
        if (cur < 0 || at >= cells) {
            *bad = 1;
            *at_byte = i;
            return 0;
        }
        const int32_t next = table[at];
        if (next < 0) {
            *at_byte = i;
            return -1 - cur;
        }
        cur = next;
        if (cur == 0) {
            *at_byte = i;
            return 0;
        }
    }
    *at_byte = n;
    return cur;
}

/* walk_bytes(table, num_classes, class_of_byte, state, data) -> int
 *
 * table:         int32 [S * C]  next state per (state, byte class); 0 dead; -1 not expanded
 * num_classes:   C
 * class_of_byte: int32 [256]    classes in 0..C-1
 * state:         the automaton state to start from
 * data:          the bytes to walk (a token's spelling)
 *
 * Returns the state after `data`, 0 when it dies on the way, or -1 - s when it meets the
 * unexpanded state s (the caller walks the bytes itself, expanding as it goes).  Raises
 * ValueError on out-of-range data.  The per-token step of a cursor's advance.
 */
static PyObject *walk_bytes(PyObject *self, PyObject *args) {
    PyObject *o_table, *o_cob;
    long num_classes, state;
    Py_buffer b_data;
    if (!PyArg_ParseTuple(args, "OlOly*", &o_table, &num_classes, &o_cob, &state, &b_data)) return NULL;
    PyObject *objs[2] = {o_table, o_cob};
    static const Py_ssize_t itemsizes[2] = {4, 4};
    static const int writable[2] = {0, 0};
    static const char *const names[2] = {"table", "class_of_byte"};
    Py_buffer bufs[2];
    if (get_bufs(objs, bufs, itemsizes, writable, names, 2) < 0) {
        PyBuffer_Release(&b_data);
        return NULL;
    }
    const int32_t *table = (const int32_t *)bufs[0].buf, *cob = (const int32_t *)bufs[1].buf;
    const Py_ssize_t cells = bufs[0].len / 4;
    int bad = state < 0 || bad_classes(&bufs[1], num_classes);
    long cur = 0;
    if (!bad) {
        Py_ssize_t stop;
        cur = walk_table(table, cells, num_classes, cob, state, (const unsigned char *)b_data.buf, b_data.len, &stop, &bad);
    }
    release_bufs(bufs, 2);
    PyBuffer_Release(&b_data);
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "walk_bytes: a state or class outside the table");
        return NULL;
    }
    return PyLong_FromLong(cur);
}

/* any_live(table, num_classes, class_of_byte, state, skip, flat, offsets, lo, hi) -> int
 *
 * table, num_classes, class_of_byte: as walk_bytes
 * state:   the automaton state after the first `skip` bytes, which strings lo..hi-1 share
 * flat:    uint8 [B]      byte strings in sorted order, concatenated
 * offsets: int64 [K + 1]  string i is flat[offsets[i]:offsets[i + 1]]
 *
 * Returns 1 when some string of lo..hi-1 walks from byte `skip` to its end without reaching
 * the dead state, 0 when none does, -1 - s at an unexpanded state s (the caller falls back).
 * A string that dies at byte k takes with it the strings after it that share its first k + 1
 * bytes (sorted order keeps them together).  Jump-forward's back-off question (does a token
 * extending the last forced one stay live?).  Raises ValueError on
 * out-of-range data.
 */
static PyObject *any_live(PyObject *self, PyObject *args) {
    PyObject *o_table, *o_cob, *o_flat, *o_off;
    long num_classes, state;
    Py_ssize_t skip, lo, hi;
    if (!PyArg_ParseTuple(args, "OlOlnOOnn", &o_table, &num_classes, &o_cob, &state, &skip, &o_flat, &o_off, &lo, &hi)) return NULL;
    PyObject *objs[4] = {o_table, o_cob, o_flat, o_off};
    static const Py_ssize_t itemsizes[4] = {4, 4, 1, 8};
    static const int writable[4] = {0, 0, 0, 0};
    static const char *const names[4] = {"table", "class_of_byte", "flat", "offsets"};
    Py_buffer bufs[4];
    if (get_bufs(objs, bufs, itemsizes, writable, names, 4) < 0) return NULL;
    const int32_t *table = (const int32_t *)bufs[0].buf, *cob = (const int32_t *)bufs[1].buf;
    const unsigned char *flat = (const unsigned char *)bufs[2].buf;
    const int64_t *off = (const int64_t *)bufs[3].buf;
    const Py_ssize_t cells = bufs[0].len / 4, nstr = bufs[3].len / 8 - 1;
    int bad = state < 0 || skip < 0 || lo < 0 || hi > nstr || lo > hi || bad_classes(&bufs[1], num_classes);
    long result = 0;
    Py_ssize_t i = lo;
    while (i < hi && !bad && result == 0) {
        const int64_t a = off[i], e = off[i + 1];
        if (a < 0 || e < a || e > bufs[2].len || e - a < skip) {
            bad = 1;
            break;
        }
        Py_ssize_t stop;
        const long cur = walk_table(table, cells, num_classes, cob, state, flat + a + skip, (Py_ssize_t)(e - a - skip), &stop, &bad);
        if (bad) break;
        if (cur < 0) {
            result = cur;
            break;
        }
        if (cur > 0) {
            result = 1; /* walked to the end, live */
            break;
        }
        const int64_t died = skip + stop; /* index of the byte it died on */
        i++;
        while (i < hi && off[i + 1] - off[i] > died && memcmp(flat + off[i] + skip, flat + a + skip, (size_t)(died + 1 - skip)) == 0) {
            i++;
        }
    }
    release_bufs(bufs, 4);
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "any_live: a state, class or string outside its buffer");
        return NULL;
    }
    return PyLong_FromLong(result);
}

static PyMethodDef methods[] = {
    {"walk", walk, METH_VARARGS, "Preorder trie walk from one automaton state (see _trie_walk.c)."},
    {"walk_bits", walk_bits, METH_VARARGS, "Preorder trie walk into a bitmask only, over packed nodes (see _trie_walk.c)."},
    {"pack_nodes", pack_nodes, METH_VARARGS, "Pack the preorder trie arrays for walk_bits."},
    {"body_shape", body_shape, METH_VARARGS, "Canonical breadth-first form of an automaton restricted to some classes."},
    {"subtree_within", subtree_within, METH_VARARGS, "Per preorder node, whether its subtree uses only bytes of a set."},
    {"subtree_bytes", subtree_bytes, METH_VARARGS, "Per preorder node, the set of edge bytes in its subtree."},
    {"copy_ranges", copy_ranges, METH_VARARGS, "Replace bit ranges of one bitmask by another's."},
    {"permute_bits", permute_bits, METH_VARARGS, "Scatter the set bits of a bitmask to new positions."},
    {"walk_bytes", walk_bytes, METH_VARARGS, "The state after a byte string, through an automaton's table."},
    {"any_live", any_live, METH_VARARGS, "Whether some string of a sorted run stays live through an automaton's table."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_trie_walk", "Compiled token-bitmask trie walk.", -1, methods};

PyMODINIT_FUNC PyInit__trie_walk(void) { return PyModule_Create(&module); }
