"""``EngineConfig``: the engine's settings, one frozen dataclass holding the layer configs
(memory, scheduler, compiler) that the model runner and scheduler are built from."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TypedDict

import torch

from structgen.engine.scheduler import SchedulerConfig
from structgen.fsm import CompilerConfig
from structgen.kernels import BACKENDS as KERNEL_BACKENDS
from structgen.runtime.attention import check_attention_backend
from structgen.runtime.flashinfer_backend import check_decode_kernel, check_prefill_kernel
from structgen.runtime.memory import MemoryConfig

SMALL_MODEL_PARAMS = 200_000_000  # below this, a CPU model runs on one thread unless told otherwise


def cpu_threads_for(config_threads: int | None, num_params: int) -> int | None:
    """The intra-op thread count to set for a CPU model of ``num_params`` parameters (None:
    leave torch's): ``config_threads`` when given, else none when ``OMP_NUM_THREADS`` is set
    (the user chose), else 1 below :data:`SMALL_MODEL_PARAMS`."""
    if config_threads is not None:
        return config_threads
    if os.environ.get("OMP_NUM_THREADS"):
        return None
    return 1 if num_params < SMALL_MODEL_PARAMS else None


def auto_worker_processes(device: torch.device, cpus: int | None = None, *, reserved: int = 1) -> tuple[int, int]:
    """(compile processes, row processes) for ``--compile-processes auto`` /
    ``--row-processes auto``: on a CUDA device with ≥ 8 CPU cores, three quarters of the cores
    (at most 32) compile and the cores but a quarter and ``reserved`` (the engine's; the
    server's front end is a second; at most 31) compute first-visit mask rows, so a cold
    schema's grammar work runs beside the forward instead of on the engine thread.  The two
    pools together outnumber the cores: compile processes sit idle between bursts of new
    schemas, and in a burst more of them shorten the queue (16 cores: 12 + 11; against 4 + 11,
    TTFT p99 at 256 new schemas at once 0.77–0.81 s against 1.21–1.24 s, c64 within its
    run-to-run spread: ``benchmarks/results/bench-json-gpu/compile-processes-h200.md``).
    Elsewhere none (threads), since a CPU model needs the cores itself."""
    cpus = cpus or os.cpu_count() or 1
    if device.type != "cuda" or cpus < 8:
        return 0, 0
    compile_procs = min(32, max(1, 3 * cpus // 4))
    return compile_procs, max(1, min(cpus - reserved - cpus // 4, 31))


class WorkerProcesses(TypedDict):
    """``CompilerConfig`` fields from the ``--compile-processes`` / ``--row-processes`` flags."""

    processes: int
    row_processes: int


def worker_processes(compile_processes: int | str, row_processes: int | str, device: str, *, reserved: int = 1) -> WorkerProcesses:
    """``CompilerConfig`` fields ``processes`` / ``row_processes`` from the ``serve`` / ``bench
    json`` flags: a count, or "auto" (:func:`auto_worker_processes` for ``device`` and
    ``reserved`` cores; auto row processes are 0 without compile processes).  Raises
    ``ValueError`` naming the flag."""
    auto = auto_worker_processes(EngineConfig(device=device).torch_device(), reserved=reserved)
    out: dict[str, int] = {}
    for flag, name, raw, guess in (
        ("--compile-processes", "processes", str(compile_processes), auto[0]),
        ("--row-processes", "row_processes", str(row_processes), auto[1]),
    ):
        if raw == "auto":
            out[name] = guess if name == "processes" or out.get("processes") else 0
        elif raw.isdigit():
            out[name] = int(raw)
        else:
            raise ValueError(f"{flag} {raw!r}: give a number of processes (0 or more) or auto")
    return WorkerProcesses(processes=out["processes"], row_processes=out["row_processes"])


@dataclass(frozen=True)
class EngineConfig:
    """Engine settings: ``device`` ("auto": CUDA when available, else CPU), ``dtype`` ("auto",
    "float32", "bfloat16", "float16"), ``seed`` (generator of unseeded sampled requests),
    ``mask_backend`` ("auto" | "torch" | "triton") and ``attention_backend`` ("auto" |
    "torch" | "flashinfer") kernel choices, ``decode_kernel`` (the decode graphs' attention:
    "auto" | "flashinfer" | "triton"), ``prefill_kernel`` (FlashInfer's paged prefill, which
    extend batches run, jump-forward chains mixed with decodes among them: "fa2" (the default),
    "fa3", or "auto" for FlashInfer's choice, FA3 on Hopper; on an H100 FA2 with
    ``extend_as_decode`` served cold ``extraction`` and ``shared-prefix`` 9% faster on average,
    ``shared-prefix`` at c256 19%, benchmarks/results/bench-json-gpu/kernels-ab-h100.md),
    ``extend_as_decode`` (on by default: an extend batch of at most twice
    ``cuda_graph_max_bs`` tokens whose rows would read at most twice its KV runs through the
    decode graphs, one row per token: FlashInfer's decode kernel instead of its paged prefill,
    which on Hopper costs 1.4–2.8× as much for the same decode rows; a chain's KV is read once
    per token), ``cuda_graph`` / ``cuda_graph_max_bs`` /
    ``cuda_graph_max_extend_tokens`` (decode and small-extend graphs with FlashInfer on CUDA; 0
    extend tokens: decode graphs only), ``mask_pool_rows`` (device-resident FSM mask rows),
    ``random_weights_seed`` (draw weights on the device instead of reading a checkpoint: for
    benchmarks of large configurations), ``gc_freeze`` (move the heap into the garbage
    collector's permanent generation after start-up and whenever a newly compiled grammar
    starts serving, so full collections never walk model, tokenizer and automaton objects:
    such a pass walks every cached automaton while all running requests wait; vLLM freezes
    its start-up heap the same way; :meth:`Engine.close` unfreezes; a server's front end
    follows it for its own heap), ``cpu_threads`` (torch's
    intra-op threads when the model runs on the CPU, set process-wide at start-up; None: 1 for
    a model under :data:`SMALL_MODEL_PARAMS` parameters, whose small matrix products gain
    nothing from more threads and lose many times over on a busy machine, torch's default for
    larger ones, and ``OMP_NUM_THREADS`` whenever it is set; CUDA runs are unaffected),
    ``switch_interval_s`` (the interpreter's thread switch interval, ``sys.setswitchinterval``,
    set process-wide at start-up and restored by :meth:`Engine.close`: compile results and
    row-worker replies are read on threads of the engine's process, and each blocking read
    waits for the GIL up to this long while the engine loop runs Python; None, the default:
    left as it is; on a 2-core CPU 0.5 ms cut a cold grammar's wait beyond its compile from
    66.8 to 11.3 ms, while on an H200 cold ``extraction`` showed no gain at 16 or 64 clients
    and a higher TTFT p50 at 256), and the layer configs.  Raises ``ValueError`` for values out of range."""

    device: str = "auto"
    dtype: str = "auto"
    seed: int = 0
    mask_backend: str = "auto"
    attention_backend: str = "auto"
    decode_kernel: str = "auto"
    prefill_kernel: str = "fa2"
    extend_as_decode: bool = True
    cuda_graph: bool = True
    cuda_graph_max_bs: int = 256
    cuda_graph_max_extend_tokens: int = 1024
    mask_pool_rows: int = 4096
    random_weights_seed: int | None = None
    gc_freeze: bool = True
    cpu_threads: int | None = None
    switch_interval_s: float | None = None
    memory: MemoryConfig = field(default_factory=MemoryConfig)
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    compiler: CompilerConfig = field(default_factory=CompilerConfig)

    def __post_init__(self) -> None:
        if self.device != "auto":
            try:
                dev = torch.device(self.device)
            except RuntimeError:
                raise ValueError(f"device {self.device!r} is not a device: use auto, cpu, cuda or cuda:N") from None
            if dev.type == "cuda" and not torch.cuda.is_available():
                raise ValueError(f"device {self.device!r}: this torch build ({torch.__version__}) sees no CUDA device; use cpu or auto")
        if self.mask_backend not in KERNEL_BACKENDS:
            raise ValueError(f"mask_backend must be one of {', '.join(KERNEL_BACKENDS)}; got {self.mask_backend!r}")
        check_attention_backend(self.attention_backend)
        check_decode_kernel(self.decode_kernel)
        check_prefill_kernel(self.prefill_kernel)
        if self.cuda_graph_max_bs < 1:
            raise ValueError(f"cuda_graph_max_bs must be ≥ 1, got {self.cuda_graph_max_bs}")
        if self.cuda_graph_max_extend_tokens < 0:
            raise ValueError(f"cuda_graph_max_extend_tokens must be ≥ 0, got {self.cuda_graph_max_extend_tokens}")
        if not isinstance(self.extend_as_decode, bool):
            raise ValueError(f"extend_as_decode must be a bool, got {self.extend_as_decode!r}")
        if self.mask_pool_rows < 1:
            raise ValueError(f"mask_pool_rows must be ≥ 1, got {self.mask_pool_rows}")
        if not isinstance(self.gc_freeze, bool):
            raise ValueError(f"gc_freeze must be a bool, got {self.gc_freeze!r}")
        threads = self.cpu_threads
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
            raise ValueError(f"cpu_threads must be an integer ≥ 1 (or None: chosen by model size), got {self.cpu_threads!r}")
        if self.switch_interval_s is not None and not 0 < self.switch_interval_s <= 1:
            raise ValueError(f"switch_interval_s must be in (0, 1] seconds (or None), got {self.switch_interval_s!r}")
        if self.random_weights_seed is not None and self.random_weights_seed < 0:
            raise ValueError(f"random_weights_seed must be ≥ 0, got {self.random_weights_seed}")

    def runner_settings(self) -> dict[str, object]:
        """The settings a :class:`~structgen.engine.model_runner.ModelRunner` is built with
        (weights, pools, kernels, captured graph sizes): an engine may reuse a runner only when
        these are equal (``cuda_graph`` aside, which switches replays on and off)."""
        return {
            "device": self.device,
            "dtype": self.dtype,
            "memory": self.memory,
            "max_running_requests": self.scheduler.max_running_requests,
            "random_weights_seed": self.random_weights_seed,
            "attention_backend": self.attention_backend,
            "decode_kernel": self.decode_kernel,
            "prefill_kernel": self.prefill_kernel,
            "extend_as_decode": self.extend_as_decode,
            "cuda_graph_max_bs": self.cuda_graph_max_bs,
            "cuda_graph_max_extend_tokens": self.cuda_graph_max_extend_tokens,
        }

    def torch_device(self) -> torch.device:
        """``device`` resolved: "auto" is CUDA when available, else the CPU."""
        if self.device == "auto":
            return torch.device("cuda" if torch.cuda.is_available() else "cpu")
        return torch.device(self.device)
