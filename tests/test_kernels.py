"""Triton kernels against their torch references (interpreter mode on CPU, compiled on CUDA)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from structgen.kernels import (
    apply_mask_rows,
    decode_attention,
    decode_num_splits,
    fused_add_rms_norm,
    linear,
    masked_argmax,
    resolve_backend,
    resolve_placeholders,
    rms_norm,
    rope_qkv_inplace,
    rope_store_kv,
    silu_and_mul,
    triton_available,
)

needs_triton = pytest.mark.skipif(not triton_available(), reason="triton not installed")
DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _pool(rows: int, vocab: int, density: float, seed: int) -> tuple[torch.Tensor, np.ndarray]:
    rng = np.random.default_rng(seed)
    words = (vocab + 31) // 32
    allowed = rng.random((rows, words * 32)) < density
    allowed[:, vocab:] = False
    packed = np.packbits(allowed, axis=1, bitorder="little").view("<i4").copy()
    return torch.from_numpy(packed).to(DEVICE), allowed[:, :vocab]


@needs_triton
@pytest.mark.parametrize("vocab", [1, 31, 33, 2048, 5000])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("with_temp", [False, True])
def test_mask_rows_triton_matches_torch(vocab: int, dtype: torch.dtype, with_temp: bool) -> None:
    pool, allowed = _pool(6, vocab, 0.2, vocab)
    row_idx = torch.tensor([0, -1, 5, 2, -1, 5, 3], dtype=torch.int32, device=DEVICE)
    logits = torch.randn(7, vocab, device=DEVICE).to(dtype)
    temp = torch.tensor([0.5, 1.0, 0.0, 2.0, 0.7, -1.0, 1.3], device=DEVICE) if with_temp else None
    limit = max(1, vocab - 3)
    ref, out = logits.clone(), logits.clone()
    apply_mask_rows(ref, row_idx, pool, temperature=temp, vocab_limit=limit, backend="torch")
    apply_mask_rows(out, row_idx, pool, temperature=temp, vocab_limit=limit, backend="triton")
    assert torch.equal(torch.isinf(out), torch.isinf(ref))
    torch.testing.assert_close(out, ref, rtol=1e-2 if dtype == torch.bfloat16 else 1e-6, atol=0)
    # the reference itself against the packed rows
    for b, r in enumerate(row_idx.tolist()):
        expect = np.ones(vocab, dtype=bool) if r < 0 else allowed[r].copy()
        expect[limit:] = False
        assert np.array_equal(~torch.isinf(ref[b].float()).cpu().numpy(), expect)


@needs_triton
@pytest.mark.parametrize("vocab", [7, 2049, 4100])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_masked_argmax_triton_matches_torch(vocab: int, dtype: torch.dtype) -> None:
    pool, _ = _pool(4, vocab, 0.1, 7)
    row_idx = torch.tensor([3, -1, 0, 1, 2], dtype=torch.int32, device=DEVICE)
    logits = torch.randn(5, vocab, device=DEVICE).to(dtype)
    logits[1, vocab // 2] = 100.0  # unconstrained row picks the global max
    before = logits.clone()
    ref = masked_argmax(logits, row_idx, pool, backend="torch")
    got = masked_argmax(logits, row_idx, pool, backend="triton")
    assert torch.equal(logits, before)
    assert got.dtype == torch.int64 and torch.equal(got, ref)
    assert int(got[1]) == vocab // 2


@needs_triton
def test_masked_argmax_ties_pick_first() -> None:
    pool, _ = _pool(1, 5000, 1.0, 1)
    logits = torch.zeros(1, 5000, device=DEVICE)
    logits[0, [2100, 4000]] = 3.0
    assert int(masked_argmax(logits, torch.tensor([0], dtype=torch.int32, device=DEVICE), pool, backend="triton")[0]) == 2100


@pytest.mark.parametrize("backend", ["torch", pytest.param("triton", marks=needs_triton)])
def test_masked_argmax_writes_into_out(backend: str) -> None:
    vocab = 70_000  # 35 blocks of 2048: the final reduction spans many partial maxima
    pool, _ = _pool(2, vocab, 0.3, 5)
    logits = torch.randn(3, vocab, device=DEVICE)
    logits[2, [9000, 60000]] = 50.0  # an unconstrained tie across blocks: the first wins
    row_idx = torch.tensor([1, 0, -1], dtype=torch.int32, device=DEVICE)
    out = torch.full((5,), 7, dtype=torch.int64, device=DEVICE)
    got = masked_argmax(logits, row_idx, pool, out=out[1:4], backend=backend)
    assert got.data_ptr() == out[1:4].data_ptr()
    assert torch.equal(out[1:4], masked_argmax(logits, row_idx, pool, backend="torch")) and int(out[3]) == 9000
    assert int(out[0]) == 7 and int(out[4]) == 7  # nothing outside out was written
    with pytest.raises(ValueError, match="out must be int64"):
        masked_argmax(logits, row_idx, pool, out=torch.zeros(3, dtype=torch.int32, device=DEVICE), backend=backend)


@pytest.mark.parametrize("backend", ["torch", pytest.param("triton", marks=needs_triton)])
@pytest.mark.parametrize("n", [0, 1, 5, 1500])
def test_resolve_placeholders(backend: str, n: int) -> None:
    gen = torch.Generator().manual_seed(n)
    table = torch.randint(0, 1000, (8,), generator=gen).to(DEVICE)
    ids = torch.randint(-8, 1000, (n,), generator=gen).to(DEVICE)
    got = resolve_placeholders(ids, table, backend=backend)
    expected = [int(table[-1 - i]) if i < 0 else int(i) for i in ids.tolist()]
    assert got.tolist() == expected and got.dtype == torch.int64
    with pytest.raises(ValueError, match="int64"):
        resolve_placeholders(ids.int(), table, backend=backend)


def test_mask_rows_errors() -> None:
    pool, _ = _pool(2, 64, 0.5, 0)
    logits = torch.zeros(2, 64, device=DEVICE)
    with pytest.raises(TypeError, match="int32"):
        apply_mask_rows(logits, torch.tensor([0, 1], device=DEVICE), pool)
    with pytest.raises(ValueError, match="row_idx has 1 entries"):
        apply_mask_rows(logits, torch.tensor([0], dtype=torch.int32, device=DEVICE), pool)
    with pytest.raises(ValueError, match="fewer than ceil"):
        apply_mask_rows(torch.zeros(2, 100, device=DEVICE), torch.tensor([0, 1], dtype=torch.int32, device=DEVICE), pool)
    with pytest.raises(ValueError, match="unknown kernel backend"):
        apply_mask_rows(logits, torch.tensor([0, 1], dtype=torch.int32, device=DEVICE), pool, backend="cuda-magic")


def test_auto_backend_falls_back_to_torch_on_cpu() -> None:
    assert resolve_backend("auto", torch.device("cpu")) == "torch"
    assert resolve_backend("torch", torch.device("cuda")) == "torch"


@needs_triton
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("hidden", [64, 100])
def test_rms_norm_triton_matches_torch(dtype: torch.dtype, hidden: int) -> None:
    g = torch.Generator().manual_seed(hidden)
    x = torch.randn(5, hidden, generator=g).to(dtype).to(DEVICE)
    res = torch.randn(5, hidden, generator=g).to(dtype).to(DEVICE)
    w = (1 + 0.1 * torch.randn(hidden, generator=g)).to(dtype).to(DEVICE)
    tol = {"rtol": 2e-2, "atol": 2e-2} if dtype == torch.bfloat16 else {"rtol": 1e-5, "atol": 1e-5}
    torch.testing.assert_close(rms_norm(x, w, 1e-5, backend="triton"), rms_norm(x, w, 1e-5, backend="torch"), **tol)
    out_t, res_t = fused_add_rms_norm(x, res, w, 1e-5, backend="triton")
    out_r, res_r = fused_add_rms_norm(x, res, w, 1e-5, backend="torch")
    torch.testing.assert_close(res_t, res_r, **tol)  # the interpreter truncates to bf16 where CUDA rounds
    torch.testing.assert_close(out_t, out_r, **tol)


@needs_triton
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_silu_and_mul_triton_matches_torch(dtype: torch.dtype) -> None:
    x = torch.randn(3, 2 * 1500, generator=torch.Generator().manual_seed(0)).to(dtype).to(DEVICE)
    tol = {"rtol": 1.6e-2, "atol": 1e-2} if dtype == torch.bfloat16 else {"rtol": 1e-5, "atol": 1e-6}
    torch.testing.assert_close(silu_and_mul(x, backend="triton"), silu_and_mul(x, backend="torch"), **tol)


@needs_triton
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rope_triton_matches_torch(dtype: torch.dtype) -> None:
    heads, kv_heads, dim = 4, 2, 16
    g = torch.Generator().manual_seed(1)
    qkv = torch.randn(6, (heads + 2 * kv_heads) * dim, generator=g).to(dtype).to(DEVICE)
    positions = torch.tensor([0, 1, 5, 77, 1000, 4095], device=DEVICE)
    inv_freq = (1.0 / (10000.0 ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))).to(DEVICE)
    ref, out = qkv.clone(), qkv.clone()
    rope_qkv_inplace(ref, positions, inv_freq, heads + kv_heads, dim, backend="torch")
    rope_qkv_inplace(out, positions, inv_freq, heads + kv_heads, dim, backend="triton")
    tol = {"rtol": 1.6e-2, "atol": 1e-2} if dtype == torch.bfloat16 else {"rtol": 1e-4, "atol": 1e-4}
    torch.testing.assert_close(out, ref, **tol)
    assert torch.equal(out[:, (heads + kv_heads) * dim :], qkv[:, (heads + kv_heads) * dim :])  # v untouched
    assert torch.equal(out[0], ref[0]) or torch.allclose(out[0].float(), qkv[0].float())  # position 0 is the identity


@needs_triton
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("tokens", [1, 5])
def test_rope_store_kv_triton_matches_torch(dtype: torch.dtype, tokens: int) -> None:
    heads, kv_heads, dim, slots_n = 4, 2, 16, 12
    g = torch.Generator().manual_seed(2)
    qkv = torch.randn(tokens, (heads + 2 * kv_heads) * dim, generator=g).to(dtype).to(DEVICE)
    positions = torch.randint(0, 5000, (tokens,), generator=g).to(DEVICE)
    slots = torch.randperm(slots_n, generator=g)[:tokens].to(DEVICE)
    inv_freq = (1.0 / (10000.0 ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))).to(DEVICE)
    outs = []
    for backend in ("torch", "triton"):
        q = qkv.clone()
        k_cache = torch.zeros(slots_n, kv_heads, dim, dtype=dtype, device=DEVICE)
        v_cache = torch.zeros_like(k_cache)
        rope_store_kv(q, positions, inv_freq, slots, k_cache, v_cache, heads, kv_heads, dim, backend=backend)
        outs.append((q[:, : heads * dim], k_cache, v_cache))
    tol = {"rtol": 1.6e-2, "atol": 1e-2} if dtype == torch.bfloat16 else {"rtol": 1e-4, "atol": 1e-4}
    for ref, out in zip(outs[0], outs[1]):
        torch.testing.assert_close(out, ref, **tol)
    untouched = torch.ones(slots_n, dtype=torch.bool)
    untouched[slots.cpu()] = False
    assert not outs[1][1][untouched.to(DEVICE)].any()  # only the batch's slots are written
    v = qkv[:, (heads + kv_heads) * dim :].view(tokens, kv_heads, dim)
    assert torch.equal(outs[1][2][slots], v)  # v is copied, not rotated


def _naive_decode(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lens: list[int], slots: torch.Tensor, scale: float, window: int
) -> torch.Tensor:
    """Softmax attention written out per request and head (float64)."""
    out = torch.zeros(q.shape, dtype=torch.float64)
    group = q.shape[1] // k.shape[1]
    start = 0
    for b, n in enumerate(lens):
        idx = slots[start : start + n].long()
        if window > 0:
            idx = idx[-window:]
        start += n
        for h in range(q.shape[1]):
            kk, vv = k[idx, h // group].double(), v[idx, h // group].double()  # [L, D]
            w = torch.softmax(kk @ q[b, h].double() * scale, dim=0)  # [L]
            out[b, h] = w @ vv
    return out


@needs_triton
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("group", [1, 4])
@pytest.mark.parametrize("num_splits", [1, 3, 4])
@pytest.mark.parametrize("window", [0, 5])
def test_decode_attention_triton_matches_reference(dtype: torch.dtype, group: int, num_splits: int, window: int) -> None:
    kv_heads, dim, pool = 2, 16, 200
    lens = [1, 37, 70, 9]  # one key; a tail shorter than a tile; splits left empty at 3 and 4 splits
    g = torch.Generator().manual_seed(group * 10 + num_splits)
    q = torch.randn(len(lens), kv_heads * group, dim, generator=g).to(dtype)
    k = torch.randn(pool, kv_heads, dim, generator=g).to(dtype)
    v = torch.randn(pool, kv_heads, dim, generator=g).to(dtype)
    slots = torch.randperm(pool, generator=g)[: sum(lens)].to(torch.int32)
    indptr = torch.tensor([0, *np.cumsum(lens)], dtype=torch.int32)
    scale = dim**-0.5
    want = _naive_decode(q, k, v, lens, slots, scale, window)
    tol = {"rtol": 2e-2, "atol": 2e-2} if dtype == torch.bfloat16 else {"rtol": 1e-4, "atol": 1e-4}
    for backend in ("torch", "triton"):
        got = decode_attention(
            q.to(DEVICE), k.to(DEVICE), v.to(DEVICE), indptr.to(DEVICE), slots.to(DEVICE),
            scale=scale, window=window, num_splits=num_splits, backend=backend,
        )  # fmt: skip
        assert got.dtype == dtype and got.shape == q.shape
        torch.testing.assert_close(got.double().cpu(), want, **tol)


def test_decode_attention_errors_and_splits() -> None:
    q, k = torch.zeros(2, 4, 8), torch.zeros(10, 2, 8)
    indptr, idx = torch.tensor([0, 1, 2], dtype=torch.int32), torch.zeros(2, dtype=torch.int32)
    with pytest.raises(ValueError, match="int32"):
        decode_attention(q, k, k, indptr.long(), idx, scale=1.0, backend="torch")
    with pytest.raises(ValueError, match=r"kv_indptr must be \[B \+ 1\]"):
        decode_attention(q, k, k, indptr[:2], idx, scale=1.0, backend="torch")
    with pytest.raises(ValueError, match="KV heads 3"):
        decode_attention(q, torch.zeros(10, 3, 8), torch.zeros(10, 3, 8), indptr, idx, scale=1.0, backend="torch")
    with pytest.raises(ValueError, match="num_splits"):
        decode_attention(q, k, k, indptr, idx, scale=1.0, num_splits=0, backend="torch")
    with pytest.raises(ValueError, match="window must be ≥ 0"):
        decode_attention(q, k, k, indptr, idx, scale=1.0, window=-1, backend="torch")
    with pytest.raises(ValueError, match="share one dtype"):
        decode_attention(q, k.double(), k.double(), indptr, idx, scale=1.0, backend="torch")
    with pytest.raises(ValueError, match="kv_indices must be 1-D"):
        decode_attention(q, k, k, indptr, idx[None], scale=1.0, backend="torch")
    with pytest.raises(ValueError, match="must be ≥ 1"):
        decode_num_splits(0, 8, 132)
    assert decode_num_splits(1, 8, 132) == 64
    assert decode_num_splits(8, 8, 132) == 8
    assert decode_num_splits(64, 8, 132) == 1
    assert decode_num_splits(32, 8, 132) == 2
    assert decode_num_splits(1, 1, 132, max_splits=16) == 16


@needs_triton
@pytest.mark.parametrize("kind", ["fma", "dot"])
@pytest.mark.parametrize("m", [1, 3, 8])
@pytest.mark.parametrize("with_bias", [False, True])
def test_gemv_triton_matches_torch(kind: str, m: int, with_bias: bool) -> None:
    from structgen.kernels.linear_triton import GemvConfig, gemv_triton

    if kind == "fma" and m != 1:
        pytest.skip("the fma GEMV takes one row")
    g = torch.Generator().manual_seed(3)
    n, k = 37, 100  # neither a multiple of the blocks
    x = torch.randn(m, k, generator=g).to(DEVICE)
    w = torch.randn(n, k, generator=g).to(DEVICE)
    b = torch.randn(n, generator=g).to(DEVICE) if with_bias else None
    y = gemv_triton(x, w, b, GemvConfig(kind, 16, 32, 4, 2))
    # compiled on CUDA, a float32 tl.dot runs in TF32 (10-bit mantissa): its tolerance
    tol = {"rtol": 1e-2, "atol": 5e-2} if DEVICE.type == "cuda" and kind == "dot" else {"rtol": 1e-4, "atol": 1e-4}
    torch.testing.assert_close(y, torch.nn.functional.linear(x, w, b), **tol)


@needs_triton
@pytest.mark.parametrize(
    ("kind", "fusion"), [("fma", "norm"), ("fma", "gated"), ("fma", "residual"), ("fma", "norm+residual"), ("dot", "residual")]
)
def test_gemv_fusions_match_unfused(kind: str, fusion: str) -> None:
    """The norm prologue (γ in the K loop, 1/rms in the epilogue), the SwiGLU prologue (fma
    kernel) and the in-place residual epilogue (both kernels) equal the unfused ops."""
    from structgen.kernels.linear_triton import GemvConfig, gemv_triton

    g = torch.Generator().manual_seed(5)
    m = 1 if kind == "fma" else 3
    n, k, eps = 37, 100, 1e-5
    x = torch.randn(m, 2 * k if fusion == "gated" else k, generator=g).to(DEVICE)
    w = torch.randn(n, k, generator=g).to(DEVICE)
    b = torch.randn(n, generator=g).to(DEVICE)
    gamma = torch.rand(k, generator=g).to(DEVICE) + 0.5
    residual = torch.randn(m, n, generator=g).to(DEVICE)
    act = rms_norm(x, gamma, eps, backend="torch") if "norm" in fusion else silu_and_mul(x, backend="torch") if fusion == "gated" else x
    want = torch.nn.functional.linear(act, w, b) + (residual if "residual" in fusion else 0)
    res = residual.clone() if "residual" in fusion else None
    y = gemv_triton(
        x, w, b, GemvConfig(kind, 16, 32, 4, 2), norm_weight=gamma if "norm" in fusion else None, eps=eps,
        gated=fusion == "gated", residual=res,
    )  # fmt: skip
    if res is not None:
        assert y is res  # added in place
    tol = {"rtol": 1e-2, "atol": 5e-2} if DEVICE.type == "cuda" and kind == "dot" else {"rtol": 1e-4, "atol": 1e-4}
    torch.testing.assert_close(y, want, **tol)
    # the dispatcher's unfused path (torch) gives the same, residual included
    res2 = residual.clone() if "residual" in fusion else None
    y2 = linear(
        x, w, b, norm_weight=gamma if "norm" in fusion else None, eps=eps, gated=fusion == "gated", residual=res2, backend="torch"
    )  # fmt: skip
    torch.testing.assert_close(y2, want, rtol=1e-4, atol=1e-4)
    if res2 is not None:
        assert y2 is res2


def test_linear_fusion_errors() -> None:
    x = torch.randn(1, 8)
    w = torch.randn(4, 8)
    with pytest.raises(ValueError, match="do not chain"):
        linear(x, w, gated=True)  # gated needs [M, 2K]
    with pytest.raises(ValueError, match="exclude each other"):
        linear(torch.randn(1, 16), w, norm_weight=torch.ones(8), gated=True)
    with pytest.raises(ValueError, match=r"norm_weight must be \[8\]"):
        linear(x, w, norm_weight=torch.ones(1))  # would broadcast silently in rms_norm
    with pytest.raises(ValueError, match=r"residual must be \[1, 4\]"):
        linear(x, w, residual=torch.zeros(1, 5))
    with pytest.raises(ValueError, match="residual must be"):
        linear(x, w, residual=torch.zeros(1, 4, dtype=torch.float64))
    # the dispatcher's Triton path at decode sizes (interpreter on CPU) runs a dot config's norm unfused
    if triton_available():
        xd, wd, g1 = x.to(DEVICE), w.to(DEVICE), (torch.rand(8) + 0.5).to(DEVICE)
        want = torch.nn.functional.linear(rms_norm(xd, g1, 1e-5, backend="torch"), wd)
        tol = {"rtol": 1e-2, "atol": 5e-2} if DEVICE.type == "cuda" else {"rtol": 1e-4, "atol": 1e-4}  # TF32 tl.dot on CUDA
        torch.testing.assert_close(linear(xd, wd, norm_weight=g1, eps=1e-5, backend="triton"), want, **tol)
    from structgen.kernels import adds_in_place

    assert not adds_in_place(x, w)  # CPU: the add is left to the next norm (fused_add_rms_norm)
    if torch.cuda.is_available():
        assert adds_in_place(x.cuda(), w.cuda()) and not adds_in_place(torch.randn(9, 8, device="cuda"), w.cuda())
    if triton_available():
        from structgen.kernels.linear_triton import GemvConfig, gemv_triton

        cfg = GemvConfig("fma", 4, 8, 1, 1)
        with pytest.raises(ValueError, match="norm_weight must be"):
            gemv_triton(x, w, None, cfg, norm_weight=torch.ones(7))
        with pytest.raises(ValueError, match="residual must be"):
            gemv_triton(x, w, None, cfg, residual=torch.zeros(1, 4, dtype=torch.float64))
        with pytest.raises(ValueError, match="residual must be"):
            gemv_triton(x, w, None, cfg, residual=torch.zeros(2, 4))
        with pytest.raises(ValueError, match="no norm / gated prologue"):
            gemv_triton(x, w, None, GemvConfig("dot", 16, 8, 1, 1), norm_weight=torch.ones(8))
        with pytest.raises(ValueError, match="no norm / gated prologue"):
            gemv_triton(torch.randn(1, 16), w, None, GemvConfig("dot", 16, 8, 1, 1), gated=True)


def test_gemv_errors_and_dispatch() -> None:
    from structgen.kernels.linear_triton import GemvConfig, gemv_triton, tuned_config

    x = torch.randn(2, 8)
    w = torch.randn(4, 8)
    assert tuned_config(4096, 4096, 1) is not None and tuned_config(4096, 4096, 9) is None
    assert tuned_config(6144, 4096, 1) == GemvConfig("fma", 16, 512, 4, 3)  # qkv: fma, its norm fused
    assert tuned_config(6144, 4096, 2) is None  # cuBLAS for 2 ≤ M ≤ 8
    torch.testing.assert_close(linear(x, w), x @ w.T)  # auto on CPU: torch
    with pytest.raises(ValueError, match="unknown kernel backend"):
        linear(torch.randn(20, 8), w, backend="cuda")  # checked for every shape, not only decode-sized ones
    if triton_available():
        with pytest.raises(ValueError, match="one row"):
            gemv_triton(x, w, None, GemvConfig("fma", 4, 8, 1, 1))
        with pytest.raises(ValueError, match="do not chain"):
            gemv_triton(x, torch.randn(4, 9), None, GemvConfig("dot", 16, 16, 1, 1))
        with pytest.raises(ValueError, match="kind"):
            gemv_triton(x, w, None, GemvConfig("mma", 16, 16, 1, 1))
        if DEVICE.type == "cpu":
            torch.testing.assert_close(linear(x, w, backend="triton"), x @ w.T, rtol=1e-4, atol=1e-4)


def test_pdl_only_on_hopper_cuda() -> None:
    if not triton_available():
        pytest.skip("triton not installed")
    from structgen.kernels.pdl import use_pdl

    assert not use_pdl(torch.zeros(1))  # CPU tensors (and the interpreter) never launch with PDL
    if torch.cuda.is_available() and torch.cuda.get_device_capability()[0] < 9:
        assert not use_pdl(torch.zeros(1, device="cuda"))
