#!/usr/bin/env bash
# The peer race on the GPU box: one seeded random-weight checkpoint (bf16, a real tokenizer) on
# local disk, then structgen and vLLM (xgrammar, guidance) served from it in turn, each driven by
# `structgen bench peers` with the same workloads, concurrency levels and requests.
#
#   usage: bash benchmarks/peer_race.sh STEP OUT
#     STEP: checkpoint | structgen | vllm-xgrammar | vllm-guidance | sglang-xgrammar | sglang-llguidance
#   env:   TOKENIZER (tokenizer folder, for `checkpoint`), CKPT (default /tmp/peer-ckpt),
#          PRESET (default llama3-8b), VSITE (vLLM's site folder, for vllm-*),
#          SSITE (SGLang's site folder, for sglang-*), MASKBENCH (maskbench/data folder, for
#          the maskbench workload), WARM (set: --warm-grammars, each level's requests sent once
#          untimed before the timed pass),
#          WARM_WORKLOADS (comma list: after the cold passes, the same server runs these workloads
#          again with --warm-grammars, the warm line),
#          WORKLOADS (default character,extraction), CONC (default "16 64 256"), NREQ (default 256),
#          CONC_<workload> / NREQ_<workload> (that workload's own levels and requests, the name with
#          "-" as "_", e.g. CONC_maskbench="16 64" NREQ_maskbench=128), WARM_CONC (the warm line's
#          levels, default CONC), NREQ1 (requests at concurrency 1, default 12), SERVE_ARGS (extra
#          `structgen serve` flags), LABEL (endpoint label, default structgen)
#
# Each engine runs with its documented single-GPU defaults plus what a user sets for structured
# outputs: vLLM's engine-level disable_any_whitespace (its per-request field is ignored by the
# xgrammar backend, and without it random weights emit whitespace until max_tokens); SGLang's
# --constrained-json-disable-any-whitespace for the same reason, and its FlashInfer attention
# backend (its Hopper default, FA3, ships as a 1.8 GB extension that is not staged there).
set -euo pipefail
step=$1
out=$2
ckpt=${CKPT:-/tmp/peer-ckpt}
mkdir -p "$out"
wl=${WORKLOADS:-character,extraction}
mb=()
[ -n "${MASKBENCH:-}" ] && mb=(--maskbench-dir "$MASKBENCH")
[ -n "${WARM:-}" ] && mb+=(--warm-grammars)
# the cold passes: one `bench peers` call per workload, each at its own levels (CONC_<w>, NREQ_<w>)
passes=()
IFS=, read -r -a wls <<< "$wl"
for w in "${wls[@]}"; do
    v=${w//-/_}
    c=CONC_$v n=NREQ_$v
    passes+=("--workload $w --concurrency ${!c:-${CONC:-16 64 256}} --num-requests ${!n:-${NREQ:-256}}")
done
# concurrency 1 with fewer requests (and its own schema draw), after the others on the same server
single=(--workload "$wl" --concurrency 1 --num-requests "${NREQ1:-12}" --seed 100 --out "$out" "${mb[@]}")
warm=()
if [ -n "${WARM_WORKLOADS:-}" ]; then
    read -r -a wconc <<< "${WARM_CONC:-${CONC:-16 64 256}}"
    warm=(--workload "$WARM_WORKLOADS" --concurrency "${wconc[@]}" --num-requests "${NREQ:-256}" --seed 200 --out "$out" --warm-grammars "${mb[@]}")
fi

stop() { kill "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }
# wait for the server PID to answer GET /health on PORT; fail at once when it exits (a server that
# dies during start-up must not hold the machine until the load generator's time-out)
ready() {
    for _ in $(seq 1 900); do
        kill -0 "$1" 2>/dev/null || return 1
        python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$2/health', timeout=2)" 2>/dev/null && return 0
        sleep 1
    done
    return 1
}

# race the server PID (port PORT, log LOG) as endpoint ENDPOINT (LABEL=FLAVOR@URL), ENGINE describing
# its version and flags; extra arguments go to every `bench peers` call (e.g. --served-model)
race_server() {
    local pid=$1 port=$2 log=$3 endpoint=$4 engine=$5
    shift 5
    ready "$pid" "$port" || { tail -60 "$log"; stop "$pid"; exit 1; }
    local p
    for p in "${passes[@]}"; do
        read -r -a levels <<< "$p"
        python3 -P -m structgen bench peers --endpoint "$endpoint" --engine "$engine" "$@" "${levels[@]}" --out "$out" \
            --wait-ready-s 900 "${mb[@]}" || { tail -40 "$log"; stop "$pid"; exit 1; }
    done
    python3 -P -m structgen bench peers --endpoint "$endpoint" --engine "$engine" "$@" "${single[@]}" || true
    if [ ${#warm[@]} -gt 0 ]; then
        python3 -P -m structgen bench peers --endpoint "$endpoint" --engine "$engine" "$@" "${warm[@]}" || true
    fi
    stop "$pid"
}

case $step in
checkpoint)
    python3 benchmarks/write_checkpoint.py "${PRESET:-llama3-8b}" "$TOKENIZER" "$ckpt"
    ;;
structgen)
    read -r -a serve_args <<< "${SERVE_ARGS:-}"
    python3 -P -m structgen serve --model "$ckpt" --port 8100 --log-level warning "${serve_args[@]}" > "$out/structgen-server.log" 2>&1 &
    race_server $! 8100 "$out/structgen-server.log" "${LABEL:-structgen}=structgen@http://127.0.0.1:8100" \
        "structgen serve ${SERVE_ARGS:-(defaults)}, commit ${STRUCTGEN_COMMIT:-$(git rev-parse --short HEAD)}"
    ;;
vllm-xgrammar | vllm-guidance)
    backend=${step#vllm-}
    cfg="{\"backend\": \"$backend\", \"disable_any_whitespace\": true}"
    version=$(PYTHONPATH="$VSITE" python3 -c "import vllm; print(vllm.__version__)" 2>/dev/null | tail -1)
    PYTHONPATH="$VSITE" VLLM_USE_FLASHINFER_SAMPLER=0 python3 -m vllm.entrypoints.openai.api_server --model "$ckpt" \
        --served-model-name peer --port 8200 --seed 0 --structured-outputs-config "$cfg" > "$out/$step-server.log" 2>&1 &
    race_server $! 8200 "$out/$step-server.log" "$step=vllm@http://127.0.0.1:8200" \
        "vLLM $version, --structured-outputs-config '$cfg', otherwise defaults" --served-model peer
    ;;
sglang-xgrammar | sglang-llguidance)
    backend=${step#sglang-}
    version=$(PYTHONPATH="$SSITE" python3 -c "import sglang; print(sglang.__version__)" 2>/dev/null | tail -1)
    flags="--grammar-backend $backend --constrained-json-disable-any-whitespace --attention-backend flashinfer"
    read -r -a sflags <<< "$flags"
    PYTHONPATH="$SSITE" python3 -m sglang.launch_server --model-path "$ckpt" --served-model-name peer --port 8300 \
        --random-seed 0 "${sflags[@]}" > "$out/$step-server.log" 2>&1 &
    race_server $! 8300 "$out/$step-server.log" "$step=sglang@http://127.0.0.1:8300" \
        "SGLang $version, $flags, otherwise defaults" --served-model peer
    ;;
*)
    echo "unknown step $step" >&2
    exit 2
    ;;
esac
