"""Results of ``structgen bench peers``: every endpoint's rows appended to one ``peers.json``
(each run with its engine, version and flags), rendered as one table per workload with the
ratio of structgen's req/s to each peer's at the same concurrency."""

from __future__ import annotations

import json
import os
from typing import Any

from structgen.bench.common import run_meta


def rerender(out_dir: str) -> str:
    """Render ``out_dir/peers.json`` again into ``out_dir/peers.md`` (no request sent); returns
    the markdown. Raises ``FileNotFoundError`` when there is no ``peers.json``."""
    with open(os.path.join(out_dir, "peers.json"), encoding="utf-8") as f:
        text = render(json.load(f))
    with open(os.path.join(out_dir, "peers.md"), "w", encoding="utf-8") as f:
        f.write(text)
    return text


def append_run(out_dir: str, endpoint_meta: dict[str, Any], rows: list[dict[str, Any]], command: str) -> dict[str, Any]:
    """Add one endpoint's rows to ``out_dir/peers.json`` (created if absent; rows of the same
    endpoint, workload and concurrency are replaced, others kept) and re-render ``peers.md``;
    returns the whole document."""
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "peers.json")
    doc: dict[str, Any] = {"runs": []}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    earlier = [r for r in doc["runs"] if r["endpoint"]["label"] == endpoint_meta["label"]]
    fresh = {_key(r) for r in rows}
    kept = [r for run in earlier for r in run["rows"] if _key(r) not in fresh]
    commands = [c for run in earlier for c in run.get("commands", [run["meta"]["command"]])] + [command]
    doc["runs"] = [r for r in doc["runs"] if r["endpoint"]["label"] != endpoint_meta["label"]]
    doc["runs"].append({"endpoint": endpoint_meta, "meta": run_meta(command), "commands": commands, "rows": kept + rows})
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
    with open(os.path.join(out_dir, "peers.md"), "w", encoding="utf-8") as f:
        f.write(render(doc))
    return doc


def _key(row: dict[str, Any]) -> tuple[str, int]:
    """A row's table: its workload, with warm-grammar rows apart from cold ones; and its level."""
    w = row["workload"] + (" (warm grammars)" if row.get("grammars") == "warm" else "")
    return w, row["concurrency"]


def _mib(v: int | None) -> str:
    return "—" if v is None else f"{v:,}"


def _invalid(row: dict[str, Any]) -> str:
    """``N (M)``: answers that do not validate, M of them cut at ``max_tokens`` (— for rows that predate the count)."""
    return "—" if "invalid" not in row else f"{row['invalid']} ({row['invalid_cut']})"


def _valid_per_s(row: dict[str, Any]) -> str:
    """Answers that validate per second of the level's wall time (every request sent counts, so
    a failed or invalid answer adds nothing)."""
    done = row["requests"] - row["failed"]
    if done <= 0:
        return "0.00"
    return f"{row['req_per_s'] * row['valid'] * row['requests'] / done:.2f}"  # req/s counts the completed ones


def _ms(d: dict[str, float]) -> str:
    return f"{d['p50']:.1f} / {d['p99']:.1f}"


def render(doc: dict[str, Any]) -> str:
    """Markdown: the engines (version, flags, machine, commit), then per workload one row per
    (concurrency, engine)."""
    runs = doc["runs"]
    lines = ["# structgen and its peers, one load generator over HTTP", ""]
    for run in runs:
        ep, meta = run["endpoint"], run["meta"]
        lines.append(
            f"- **{ep['label']}** ({ep['flavor']}): {ep.get('engine', '')}; machine {meta['machine']}; commit {meta['commit']}, "
            f"{meta['date']}; " + "; ".join(f"`{c}`" for c in run.get("commands", [meta["command"]]))
        )
    mine = [run for run in runs if run["endpoint"]["label"] == "structgen"] or [
        run for run in runs if run["endpoint"]["flavor"] == "structgen"
    ][:1]
    ours = {_key(r): r for run in mine for r in run["rows"]}
    workloads = list(dict.fromkeys(_key(r)[0] for run in runs for r in run["rows"]))
    for w in workloads:
        lines += [
            "",
            f"## {w}",
            "",
            "| concurrency | engine | req/s | valid answers/s | out tok/s | TTFT p50 / p99 (ms) | TPOT p50 / p99 (ms) | valid "
            "| invalid (cut) | max_tokens cuts | failed | peak GPU MiB | structgen ÷ engine (req/s) |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        rows = sorted(
            ((r, run["endpoint"]["label"]) for run in runs for r in run["rows"] if _key(r)[0] == w), key=lambda x: x[0]["concurrency"]
        )
        for r, label in rows:
            base = ours.get((w, r["concurrency"]))
            ratio = f"{base['req_per_s'] / r['req_per_s']:.2f}×" if base and r["req_per_s"] else "—"
            lines.append(
                f"| {r['concurrency']} | {label} | {r['req_per_s']:.2f} | {_valid_per_s(r)} | {r['out_tok_per_s']:.0f} | "
                f"{_ms(r['ttft_ms'])} | "
                f"{_ms(r['tpot_ms'])} | {100 * r['valid']:.1f}% | {_invalid(r)} | {r['max_tokens_cuts']} | {r['failed']} | "
                f"{_mib(r.get('peak_gpu_mib'))} | {ratio} |"
            )
    lines += [
        "",
        "Every request streams, greedy, the same prompt and `max_tokens` for every engine; every object schema is unique to its "
        "request (an optional property named after the request is added), so each is new to the server when it arrives. "
        "req/s counts completed requests over the level's wall time; tokens "
        "are each server's own completion-token counts; TTFT = first streamed text; TPOT = (last − first) / (tokens − 1); "
        "*valid* = output validates (`jsonschema`) or fully matches the regex (`re.fullmatch`), over every request sent; "
        "*valid answers/s* = those answers per second of the level's wall time; "
        "*invalid (cut)* = answers whose output does not, and of them those that ended at `max_tokens`; *peak GPU MiB* = the most "
        "`nvidia-smi` reported in use while the level ran (— where it was not sampled). Tables marked *warm grammars* sent "
        "each level's requests once, untimed, before timing them.",
    ]
    return "\n".join(lines) + "\n"
