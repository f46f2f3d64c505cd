#!/usr/bin/env bash
# The H200 warm-grammar runs of `structgen bench json` (session 10): Llama-3-8B configuration
# with random bf16 weights, the real Llama-3 tokenizer, engine grammars compiled with every
# reachable state's mask row precomputed before the clock (HF + xgrammar compiled before the
# clock too), and max_tokens covering every finite constraint's longest output.
#   bash benchmarks/bench_json_h200_warm.sh TOKENIZER_DIR OUT_DIR PART
# PART 1: character + extraction at c16/c64, engine modes and the HF + xgrammar baseline.
# PART 2: shared-prefix (24 shots) at c16/c64 with and without the radix cache.
# PART 3: c256 for character, extraction (engine default + baseline) and shared-prefix.
# PART 4: maskbench at c16/c64 (default, no-jump-forward; HF + xgrammar), reading .carry/maskbench.
# PART 5: maskbench at c64, one wave (64 requests): engine default and HF + xgrammar (PART 4's
#   baseline, 256 requests at c16 and c64, does not finish within a 10-minute device call).
# PART 6: PART 4 without the baseline.
# PART 7: extraction at c64 in steady state: 8 waves (512 requests), so the drain of the last
#   wave (a few long requests decoding alone) is a small part of the run; engine default and
#   no-jump-forward, HF + xgrammar.
# PART 8: concurrency 1 (4 requests) for character, extraction and shared-prefix: every engine
#   mode (CUDA graphs off included) and HF + xgrammar.
# PART prepare-maskbench (on the machine that has ../shared): copy the first 360 MaskBench files
#   in the benchmark's seed-0 order to .carry/maskbench, the folder PART 4 reads.
set -euo pipefail
TOK=$1 OUT=$2 PART=$3
COMMON=(--config llama3-8b --random-weights --tokenizer "$TOK" --waves 2 --no-progress --warm-grammars --num-requests 512)
case "$PART" in
1) python3 -m structgen.cli bench json "${COMMON[@]}" --out "$OUT/main" --concurrency 16 64 --workload character,extraction \
       --modes default,no-jump-forward,unconstrained --baselines hf-xgrammar ;;
2) python3 -m structgen.cli bench json "${COMMON[@]}" --out "$OUT/shared-prefix" --concurrency 16 64 --workload shared-prefix \
       --shots 24 --modes default,no-radix,no-jump-forward ;;
3) python3 -m structgen.cli bench json "${COMMON[@]}" --out "$OUT/c256" --concurrency 256 --workload character,extraction \
       --modes default --baselines hf-xgrammar
   python3 -m structgen.cli bench json "${COMMON[@]}" --out "$OUT/c256" --append --concurrency 256 --workload shared-prefix \
       --shots 24 --modes default,no-radix ;;
4) python3 -m structgen.cli bench json "${COMMON[@]}" --out "$OUT/maskbench" --num-requests 256 --concurrency 16 64 \
       --workload maskbench --maskbench-dir .carry/maskbench --modes default,no-jump-forward --baselines hf-xgrammar ;;
5) python3 -m structgen.cli bench json "${COMMON[@]}" --out "$OUT/maskbench-c64" --waves 1 --num-requests 64 --concurrency 64 \
       --workload maskbench --maskbench-dir .carry/maskbench --modes default --baselines hf-xgrammar ;;
6) python3 -m structgen.cli bench json "${COMMON[@]}" --out "$OUT/maskbench" --num-requests 256 --concurrency 16 64 \
       --workload maskbench --maskbench-dir .carry/maskbench --modes default,no-jump-forward ;;
7) python3 -m structgen.cli bench json "${COMMON[@]}" --out "$OUT/extraction-steady" --waves 8 --concurrency 64 \
       --workload extraction --modes default,no-jump-forward --baselines hf-xgrammar ;;
8) python3 -m structgen.cli bench json "${COMMON[@]}" --out "$OUT/c1" --concurrency 1 --workload character,extraction,shared-prefix \
       --shots 24 --modes default,no-jump-forward,no-radix,unconstrained,no-cuda-graph --baselines hf-xgrammar ;;
prepare-maskbench) python3 - <<'PY'
import random, shutil
from pathlib import Path
from structgen.bench_json import MASKBENCH_DIR
files = sorted(MASKBENCH_DIR.glob("*.json"))
random.Random(0).shuffle(files)  # the order maskbench_requests samples in
dst = Path(".carry/maskbench")
dst.mkdir(parents=True, exist_ok=True)
for f in files[:360]:
    shutil.copy(f, dst / f.name)
PY
   ;;
*) echo "PART must be 1 to 8 or prepare-maskbench" >&2; exit 2 ;;
esac
