"""Programmatic dependent launch (PDL, Hopper and later) for the decode step's Triton kernels.

A kernel launched with PDL may start while the kernel before it on the stream is still running;
``griddepcontrol.wait`` (:func:`gdc_wait`) then blocks until that kernel has finished and its
writes are visible, and ``griddepcontrol.launch_dependents`` (:func:`gdc_launch_dependents`) lets
the next PDL kernel start.  A PDL kernel must wait before it reads anything an earlier kernel
wrote and before it writes anything (its output may reuse memory an earlier kernel still
reads); what it does before the wait (address arithmetic, L2 prefetch of weights nobody writes)
overlaps the previous kernel's tail and the launch latency.  Kernels launched without PDL
(cuBLAS, FlashInfer) keep full stream ordering.  CUDA programming guide §4.5; CUTLASS example
63 prefetches GEMM weights the same way.
"""

from __future__ import annotations

import dataclasses
import functools

import torch
import triton
import triton.language as tl

try:  # Triton's own griddepcontrol builtins where it has them
    from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait
except ImportError:  # pragma: no cover - older Triton: the same PTX inline

    @triton.jit
    def gdc_wait():  # type: ignore[no-untyped-def]
        """Block until the previous kernel on the stream has completed (a no-op without PDL)."""
        tl.inline_asm_elementwise("griddepcontrol.wait; // $0", "=r", [], dtype=tl.int32, is_pure=False, pack=1)

    @triton.jit
    def gdc_launch_dependents():  # type: ignore[no-untyped-def]
        """Allow the next PDL-launched kernel to start (it still waits for this one to finish)."""
        tl.inline_asm_elementwise("griddepcontrol.launch_dependents; // $0", "=r", [], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def prefetch_l2(ptrs):  # type: ignore[no-untyped-def]
    """``prefetch.global.L2`` of the line holding each pointer of ``ptrs`` (no value read)."""
    tl.inline_asm_elementwise("prefetch.global.L2 [$1]; // $0", "=r,l", [ptrs], dtype=tl.int32, is_pure=False, pack=1)


@functools.cache
def _supported(index: int) -> bool:
    if torch.cuda.get_device_capability(index)[0] < 9:
        return False
    try:
        from triton.backends.nvidia.compiler import CUDAOptions
    except Exception:
        return False
    return "launch_pdl" in {f.name for f in dataclasses.fields(CUDAOptions)}


def use_pdl(t: torch.Tensor) -> bool:
    """Whether kernels on ``t``'s device launch with PDL: CUDA compute capability ≥ 9 and a
    Triton that knows the ``launch_pdl`` option (never on CPU / under the interpreter)."""
    if not t.is_cuda:
        return False
    return _supported(t.device.index if t.device.index is not None else torch.cuda.current_device())
