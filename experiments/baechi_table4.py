"""Baechi Table 4 and Figure 9 from the job folders of `gnmt_mem_limited` / `inception_mem_limited` sweeps,
side by side with the paper, against both baselines (issue 17, items 5 and 6).

Table 4's parentheses are the slowdown of each placer under insufficient memory against *its own* step with
sufficient memory (Table 3). Table 3 is run with Baechi's forward-operator-based placement (Baechi 3.3: with
sufficient memory only forward ops are placed and each backward op follows its forward op), so the paper's
comparison is forced forward/backward pairs (insufficient memory) against forward-operator-based placement
(sufficient memory): both keep every backward op with its forward op. This script shows that comparison and,
beside it, the one against an unconstrained placement (optimizer=none: every op placed freely, sufficient
memory), which also counts what forcing the pairs costs.

Input: job folders (the ``multirun/<date>/<time>`` folders of the sweeps; every ``result.json`` below them is
read with its ``config.json`` and ``placement.json``). Run the presets' sweeps (see their headers)::

    python -m orchestrator +experiment=gnmt_mem_limited -m
    python -m orchestrator +experiment=gnmt_mem_limited optimizer=none cluster.need_fraction=2.0 -m
    python experiments/baechi_table4.py multirun/<date>/<time> multirun/<date>/<time2> [--out table4.md]

Rows: model, placer. Columns: the step at the lowest need fraction found (the insufficient-memory run, with its
optimizer), the slowdown against the same placer and optimizer at the largest need fraction (the paper's
baseline when that optimizer applies forward-operator-based placement there), the slowdown against
optimizer=none at the largest fraction (unconstrained), the paper's figure, and for every placer that fits,
the share of ops whose device is the same as in its sufficient-memory placement (the paper: m-SCT's placement
of GNMT is identical) and Figure 9's peak memory per device over its limit.
"""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path
from typing import Any

#: Baechi Table 4: step (s) and slowdown against sufficient memory, per model and placer (None: OOM).
PAPER: dict[str, dict[str, tuple[float, float] | None]] = {
    "inception_v3": {
        "single": None,
        "expert": None,
        "m_topo": (0.690, 58.6),
        "m_etf": (0.312, 13.8),
        "m_sct": (0.292, 7.9),
    },
    "gnmt": {
        "single": None,
        "expert": (0.221, 3.2),
        "m_topo": (0.272, 2.6),
        "m_etf": (0.230, 2.6),
        "m_sct": (0.212, 0.0),
    },
}
PLACERS = ("single", "expert", "m_topo", "m_etf", "m_sct", "celeritas")


def load(dirs: list[Path]) -> list[dict[str, Any]]:
    """Every job under `dirs`: its result, need fraction, and placement (None where it was not written)."""
    out = []
    for d in dirs:
        for res in sorted(d.rglob("result.json")):
            r = json.loads(res.read_text())
            cfg = json.loads((res.parent / "config.json").read_text())
            pl = res.parent / "placement.json"
            r["need_fraction"] = cfg["cluster"].get("need_fraction")
            r["placement"] = json.loads(pl.read_text()) if pl.exists() else None
            r["folder"] = str(res.parent)
            out.append(r)
    return out


def _ok(r: dict[str, Any] | None) -> bool:
    return r is not None and r.get("status") == "ok" and r.get("predicted_step_s") is not None


def _slow(r: dict[str, Any] | None, base: dict[str, Any] | None) -> str:
    if not (_ok(r) and _ok(base)):
        return "-"
    assert r is not None and base is not None
    return f"{(r['predicted_step_s'] / base['predicted_step_s'] - 1) * 100:+.1f}%"


def same_devices(a: dict[str, str] | None, b: dict[str, str] | None) -> str:
    """Share of the ops placed in both placements that are on the same device, devices matched up to a
    renaming (identical devices: the best one-to-one mapping of a's devices to b's, by brute force over the
    permutations of at most 8 devices)."""
    if not a or not b:
        return "-"
    common = [op for op in a if op in b]
    if not common:
        return "-"
    da, db = sorted(set(a.values())), sorted(set(b.values()))
    names = sorted(set(da) | set(db))
    if len(names) > 8:
        return f"{sum(a[op] == b[op] for op in common) / len(common):.0%}"
    pairs: dict[tuple[str, str], int] = {}
    for op in common:
        pairs[(a[op], b[op])] = pairs.get((a[op], b[op]), 0) + 1
    best = max(sum(pairs.get((x, y), 0) for x, y in zip(names, perm)) for perm in itertools.permutations(names))
    return f"{best / len(common):.0%}"


def figure9(r: dict[str, Any]) -> str:
    peak, lim = r.get("peak_memory_bytes") or {}, r.get("memory_limit_bytes") or {}
    return " ".join(f"{peak[d] / lim[d]:.2f}" for d in sorted(peak) if lim.get(d))


def table(jobs: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| model | placer | insufficient: step (s) | vs forward-op-based, sufficient (paper's baseline) "
        "| vs unconstrained, sufficient | paper: step (slowdown) | same devices as sufficient "
        "| Figure 9: peak / limit per device |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for model in sorted({j["model"] for j in jobs}):
        mj = [j for j in jobs if j["model"] == model]
        fracs = sorted({j["need_fraction"] for j in mj if j["need_fraction"] is not None})
        if len(fracs) < 2:
            continue
        low, high = fracs[0], fracs[-1]
        limited_opt = next((j["optimizer"] for j in mj if j["need_fraction"] == low and j["optimizer"] != "none"), None)

        def pick(placer: str, frac: float, opt: str | None, jobs: list[dict[str, Any]] = mj) -> dict[str, Any] | None:
            m = [j for j in jobs if j["placer"] == placer and j["need_fraction"] == frac and j["optimizer"] == opt]
            return m[-1] if m else None

        for placer in PLACERS:
            lim = pick(placer, low, limited_opt)
            if lim is None:
                continue
            fwd = pick(placer, high, limited_opt)
            free = pick(placer, high, "none")
            step = f"{lim['predicted_step_s']:.3f}" if _ok(lim) else lim.get("status", "?").upper()
            paper = PAPER.get(model, {}).get(placer, "n/a")
            ptxt = "OOM" if paper is None else ("-" if paper == "n/a" else f"{paper[0]:.3f} ({paper[1]:.1f}%)")
            same = same_devices(lim.get("placement"), fwd.get("placement") if fwd else None) if _ok(lim) else "-"
            lines.append(
                f"| {model} ({low:g} of need, {limited_opt}) | {placer} | {step} | {_slow(lim, fwd)} | "
                f"{_slow(lim, free)} | {ptxt} | {same} | {figure9(lim) if _ok(lim) else '-'} |"
            )
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="+", type=Path, help="job folders of the sweeps (multirun/<date>/<time>)")
    ap.add_argument("--out", type=Path, help="also write the table (Markdown) here")
    args = ap.parse_args()
    lines = table(load(args.dirs))
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
