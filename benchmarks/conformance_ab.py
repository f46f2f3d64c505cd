"""Per-schema first-mask times of two trees, from ``structgen bench conformance`` JSON reports.

    python benchmarks/conformance_ab.py --old OLD1.json [OLD2.json ...] --new NEW1.json [NEW2.json ...]

Each tree's time for a schema is its median over that tree's runs; the ratio new ÷ old is taken
per schema over the schemas every run compiles, and reported at p10 / p50 / p90, over all of
them and over those the old tree compiles in under 10 ms (the small schemas).  Printed as
Markdown, with each run's commit and date."""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

from structgen.bench.common import percentile


def first_masks(path: str) -> tuple[dict[str, float], dict[str, Any]]:
    """(schema name -> first mask ms for the compiled schemas, the report's meta) of one report.
    Raises ``ValueError`` naming the file when it is not a conformance report."""
    try:
        data = json.loads(Path(path).read_text())
        items, meta = data["items"], data["meta"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{path}: not a structgen bench conformance JSON report ({type(e).__name__}: {e})") from None
    times = {f"{i['suite']}/{i['name']}": float(i["first_mask_ms"]) for i in items if i.get("first_mask_ms") is not None}
    return times, meta


def quantiles(xs: list[float]) -> tuple[float, float, float]:
    """p10, p50, p90 of ``xs``, linear between ranks (NaN when empty)."""
    return percentile(xs, 0.1, interpolate=True), percentile(xs, 0.5, interpolate=True), percentile(xs, 0.9, interpolate=True)


def compare(old: list[str], new: list[str]) -> str:
    """The Markdown comparison of the ``old`` and ``new`` trees' reports (paths).  Raises
    ``ValueError`` for a file that is not a report or when fewer than two schemas compiled in
    every run."""
    runs = {"old": [first_masks(p) for p in old], "new": [first_masks(p) for p in new]}
    common = set.intersection(*(set(t) for tree in runs.values() for t, _ in tree))
    med = {k: {s: statistics.median(t[s] for t, _ in tree) for s in common} for k, tree in runs.items()}
    if len(common) < 2:
        raise ValueError(f"{len(common)} schemas compiled in every run: too few to compare")
    ratios = [med["new"][s] / med["old"][s] for s in common if med["old"][s] > 0]
    small_keys = [s for s in common if 0 < med["old"][s] < 10.0]
    small = [med["new"][s] / med["old"][s] for s in small_keys]
    lines = ["| tree | runs (commit, date) |", "|---|---|"]
    for k, tree in runs.items():
        lines.append(f"| {k} | " + ", ".join(f"{meta.get('commit', '?')} {meta.get('date', '')}".strip() for _, meta in tree) + " |")
    lines += [
        "",
        "| schemas | count | old p50 / p90 (ms) | new p50 / p90 (ms) | new ÷ old p10 / p50 / p90 |",
        "|---|---|---|---|---|",
    ]
    for label, keys, rs in (
        ("compiled by every run", common, ratios),
        ("old under 10 ms", small_keys, small),
    ):
        o = quantiles([med["old"][s] for s in keys])
        n = quantiles([med["new"][s] for s in keys])
        r = quantiles(rs)
        lines.append(f"| {label} | {len(rs)} | {o[1]:.2f} / {o[2]:.1f} | {n[1]:.2f} / {n[2]:.1f} | {r[0]:.3f} / {r[1]:.3f} / {r[2]:.3f} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", nargs="+", required=True, help="the old tree's conformance JSON reports")
    ap.add_argument("--new", nargs="+", required=True, help="the new tree's conformance JSON reports")
    args = ap.parse_args()
    try:
        print(compare(args.old, args.new))
    except ValueError as e:
        ap.error(str(e))


if __name__ == "__main__":
    main()
