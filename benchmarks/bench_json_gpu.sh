#!/usr/bin/env bash
# A full GPU run of `structgen bench json` (H100 / H200):
# Llama-3-8B configuration with random bf16 weights, the real Llama-3 tokenizer, concurrency
# 1/16/64/256, every engine mode, and the HF transformers baselines on the same weights.
#   bash benchmarks/bench_json_h200.sh TOKENIZER_DIR MASKBENCH_DIR OUT_DIR
# MASKBENCH_DIR: the 256 MaskBench schemas (of JSONSchemaBench's maskbench/data, seed 0) that
# the compiler accepts after bound_schema; outlines-core is left out there (its eager index
# takes seconds to minutes per schema on a 128k vocabulary).
set -euo pipefail
TOK=$1 MB=$2 OUT=$3
COMMON=(--config llama3-8b --random-weights --tokenizer "$TOK" --concurrency 1 16 64 256 --waves 2 --no-progress --out "$OUT")
python3 -m structgen.cli bench json "${COMMON[@]}" --workload character,extraction,shared-prefix --shots 24 --num-requests 512 \
    --modes default,no-jump-forward,no-radix,unconstrained,no-cuda-graph --baselines hf-xgrammar,hf-outlines-core
python3 -m structgen.cli bench json "${COMMON[@]}" --append --workload maskbench --maskbench-dir "$MB" --num-requests 256 \
    --modes default,no-jump-forward,unconstrained --baselines hf-xgrammar
