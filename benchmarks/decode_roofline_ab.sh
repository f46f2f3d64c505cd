#!/usr/bin/env bash
# A/B of decode_roofline.py across commits on one device lease (what decode-extend-graphs-ab.md records).
#   here (needs git):     bash benchmarks/decode_roofline_ab.sh prepare DIR REV [REV ...]
#   on the device:        bash benchmarks/decode_roofline_ab.sh run DIR OUT [decode_roofline.py args ...]
# prepare unpacks each REV's package (structgen + fsm/kernels/schemas as its subpackages) and its
# decode_roofline.py into DIR/REV; carry DIR to the device. run puts each tree first on
# PYTHONPATH in turn (the flashinfer wheels etc. already on PYTHONPATH stay behind it) and writes
# OUT/REV/decode-roofline.{md,json}, printing the table rows.
set -euo pipefail
cmd=${1:?prepare or run}; dir=${2:?DIR}; shift 2
case $cmd in
  prepare)
    for rev in "$@"; do
      rm -rf "$dir/$rev"; mkdir -p "$dir/$rev"
      git archive "$rev" structgen fsm kernels schemas benchmarks/decode_roofline.py benchmarks/_gpu_common.py | tar x -C "$dir/$rev"
      rm -rf "$dir/$rev/structgen/assets"
      mv "$dir/$rev/fsm" "$dir/$rev/kernels" "$dir/$rev/schemas" "$dir/$rev/structgen/"
    done ;;
  run)
    out=${1:?OUT}; shift; mkdir -p "$out"
    for tree in "$dir"/*/; do
      rev=$(basename "$tree")
      STRUCTGEN_COMMIT=$rev PYTHONPATH="$tree${PYTHONPATH:+:$PYTHONPATH}" \
        python3 "$tree/benchmarks/decode_roofline.py" "$@" --out "$out/$rev" > "$out/$rev.log" 2>&1 || tail -5 "$out/$rev.log"
      echo "== $rev $*"; grep '^| [0-9]' "$out/$rev/decode-roofline.md" || true
    done ;;
  *) echo "usage: $0 prepare DIR REV... | run DIR OUT [args]" >&2; exit 2 ;;
esac
