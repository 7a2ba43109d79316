"""Pictures of a simulated step (thesis, seed 004, Figures 7.9 and 7.10).

Pure functions: they take an `algorithms.simulator.SimResult` or plain lists and write a PNG (to a temporary
file first, then renamed into place). Matplotlib runs on the Agg backend; nothing here touches MLflow.

* `device_utilization_png`: Figure 7.9, one row per device, one bar per executed op (its length is the op's
  duration), white gaps where the device idles.
* `executable_ops_png`: Figure 7.10, the number of executable ops a device had before each scheduling
  decision (the simulator's decision log, `simulate(..., record_decisions=True)` with a dispatch policy; the
  schedulers in `algorithms.schedulers.thesis` return it from `run`).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Sequence
from operator import itemgetter

import matplotlib
import numpy as np

from algorithms.sim_result import MemoryTimeline

matplotlib.use("Agg")
import matplotlib.pyplot as plt

#: bars (ops) of a timeline, and points of a memory curve per device, above which sub-pixel detail is merged
#: (issue 22: a picture of 10^5-10^6 ops would take minutes to draw and show nothing more)
MAX_BARS = 20_000
MAX_POINTS = 20_000
#: the resolution of the merging: 1 / PIXELS of the step (about a pixel of the 10-inch, 120-dpi figures)
PIXELS = 2_000


def _merge_spans(spans: list[tuple[float, float]], gap: float) -> list[tuple[float, float]]:
    """(start, width) spans, sorted, with the ones less than `gap` apart joined into one. O(len(spans))."""
    out: list[tuple[float, float]] = []
    for s, w in spans:
        if out and s - (out[-1][0] + out[-1][1]) < gap:
            ps, pw = out[-1]
            out[-1] = (ps, max(pw, s + w - ps))
        else:
            out.append((s, w))
    return out


def _envelope(tl: list[tuple[float, float]], t_max: float) -> list[tuple[float, float]]:
    """A memory timeline reduced to the largest value of each 1/PIXELS of the step (an upper envelope: the
    peak stays exact, a dip shorter than a pixel is not drawn). O(len(tl))."""
    width = t_max / PIXELS if t_max > 0 else 1.0
    out: list[tuple[float, float]] = []
    cur_bin = -1
    for t, m in tl:
        b = int(t / width)
        if b != cur_bin:
            out.append((b * width, m))
            cur_bin = b
        elif m > out[-1][1]:
            out[-1] = (out[-1][0], m)
    if tl:
        out.append((tl[-1][0], tl[-1][1]))  # where the curve ends up
    return out


def _merge_spans_arrays(start: np.ndarray, width: np.ndarray, gap: float) -> tuple[np.ndarray, np.ndarray]:
    """`_merge_spans` over arrays (spans sorted by (start, width)): the same (start, width) spans, bit for bit,
    without a Python step per span (issue 22).  A span opens a new bar when it starts `gap` or more after the
    furthest end so far; each bar's width is the largest ``start + width - bar start`` of its spans (its first
    span's own width for that one), as `_merge_spans` computes them.  The ends `_merge_spans` compares against
    (bar start + running width) are checked against that grouping, and any disagreement (a rounding at a tie,
    or negative widths) falls back to `_merge_spans` itself.  O(n)."""
    n = len(start)
    if n == 0 or (width < 0).any():
        merged = _merge_spans(list(zip(start.tolist(), width.tolist())), gap)
        return np.array([s for s, _ in merged]), np.array([w for _, w in merged])
    new = np.ones(n, dtype=bool)
    new[1:] = start[1:] - np.maximum.accumulate(start + width)[:-1] >= gap
    firsts = np.flatnonzero(new)
    bar_start = start[firsts][np.cumsum(new) - 1]
    reach = (start + width) - bar_start  # `s + w - ps` of _merge_spans
    reach[firsts] = width[firsts]
    # _merge_spans compares s with ps + pw (pw: the bar's running width): rounding is monotone, so the running
    # maximum of ps + reach is that sum, and bars only grow to the right, so the maximum need not restart per bar
    if not np.array_equal(start[1:] - np.maximum.accumulate(bar_start + reach)[:-1] >= gap, new[1:]):
        merged = _merge_spans(list(zip(start.tolist(), width.tolist())), gap)
        return np.array([s for s, _ in merged]), np.array([w for _, w in merged])
    return start[firsts], np.maximum.reduceat(reach, firsts)


def _envelope_arrays(t: np.ndarray, m: np.ndarray, t_max: float) -> tuple[np.ndarray, np.ndarray]:
    """`_envelope` over arrays (a timeline in time order): the same points, bit for bit. O(n)."""
    width = t_max / PIXELS if t_max > 0 else 1.0
    if len(t) == 0:
        return np.zeros(0), np.zeros(0)
    b = (t / width).astype(np.int64)  # int() of _envelope: truncation toward zero
    firsts = np.flatnonzero(np.concatenate(([True], b[1:] != b[:-1])))
    xs = np.append(b[firsts] * width, t[-1])
    ys = np.append(np.maximum.reduceat(m, firsts), m[-1])
    return xs, ys


def _timeline_arrays(tl: Sequence[tuple[float, float]]) -> tuple[np.ndarray, np.ndarray]:
    """A memory timeline's times and bytes as float64 arrays: a `MemoryTimeline`'s own arrays (issue 22: 4.6 M
    points at 10^6 ops, no tuple made per point), else read point by point (the same numbers)."""
    if isinstance(tl, MemoryTimeline):
        return tl.t, tl.v
    return (
        np.fromiter(map(itemgetter(0), tl), np.float64, len(tl)),
        np.fromiter(map(itemgetter(1), tl), np.float64, len(tl)),
    )


def _last_time(tl: Sequence[tuple[float, float]]) -> float:
    """The largest time of a non-empty memory timeline, as Python's ``max`` over its points gives it (numpy's
    over a `MemoryTimeline`'s array when it holds no NaN: the same value)."""
    if isinstance(tl, MemoryTimeline):
        m = tl.t.max()
        if m == m:
            return float(m)
    return max(map(itemgetter(0), tl))


_PALETTE = [
    "#4C72B0",
    "#DD8452",
    "#55A868",
    "#C44E52",
    "#8172B3",
    "#937860",
    "#DA8BC3",
    "#8C8C8C",
    "#CCB974",
    "#64B5CD",
]


def _save(fig, path: str | os.PathLike, dpi: int) -> str:
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".png", dir=folder)
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=dpi, format="png", bbox_inches="tight")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    finally:
        plt.close(fig)
    return path


def _time_scale(t_max: float) -> tuple[float, str]:
    if t_max <= 0 or t_max >= 1:
        return 1.0, "s"
    if t_max >= 1e-3:
        return 1e3, "ms"
    return 1e6, "µs"


def device_utilization_png(
    sim_result,
    path: str | os.PathLike,
    *,
    title: str | None = None,
    devices: Sequence[str] | None = None,
    dpi: int = 120,
) -> str:
    """Figure 7.9: a row per device (top to bottom in cluster order), a bar per executed op, idle gaps white.

    `devices` restricts or reorders the rows (default: every device of the result). Bars alternate colours so
    that adjacent ops stay distinguishable; a thin edge marks each op's boundary. Above `MAX_BARS` ops, ops
    less than 1/`PIXELS` of the step apart are drawn as one bar (said in the title; the utilisation printed
    is still the ops' own busy time). Returns the path written.
    """
    devs = list(devices) if devices is not None else list(sim_result.devices)
    row = {d: k for k, d in enumerate(devs)}
    # each op's row (-1: a device not drawn), over arrays: Python per op cost seconds at 10^6 ops (issue 22)
    row_of_device = np.array([row.get(d, -1) for d in sim_result.devices] + [-1], dtype=np.int64)
    start = np.asarray(sim_result.start, dtype=np.float64)
    end = np.asarray(sim_result.end, dtype=np.float64)
    op_row = row_of_device[np.asarray(sim_result.device_of, dtype=np.int64)] if len(start) else np.zeros(0, np.int64)
    ran = (start == start) & (end == end)  # NaN: never ran
    spans: list[tuple[np.ndarray, np.ndarray]] = []
    for k in range(len(devs)):
        mine = ran & (op_row == k)
        s, w = start[mine], end[mine] - start[mine]
        order = np.lexsort((w, s))  # the (start, width) order of sorted tuples
        spans.append((s[order], w[order]))
    t_max = max(float(sim_result.makespan), max((float((s + w).max()) for s, w in spans if len(s)), default=0.0))
    scale, unit = _time_scale(t_max)
    height = max(2.0, 0.35 * len(devs) + 1.2)
    merged = sum(len(s) for s, _ in spans) > MAX_BARS
    fig, ax = plt.subplots(figsize=(10, height))
    for k, (s, w) in enumerate(spans):
        busy = sum(w.tolist())
        if merged:
            s, w = _merge_spans_arrays(s, w, t_max / PIXELS)
        colors = [_PALETTE[j % 2 + 2 * (k % 2)] for j in range(len(s))]
        if len(s):
            ax.broken_barh(
                list(zip((s * scale).tolist(), (w * scale).tolist())),
                (k - 0.4, 0.8),
                facecolors=colors,
                edgecolor="black",
                linewidth=0.2 if not merged else 0.0,
            )
        util = busy / t_max if t_max > 0 else 0.0
        ax.text(t_max * scale * 1.005, k, f"{100 * util:.0f}%", va="center", fontsize=7)
    ax.set_yticks(range(len(devs)))
    ax.set_yticklabels(devs, fontsize=8)
    ax.set_ylim(len(devs) - 0.5, -0.5)
    ax.set_xlim(0, t_max * scale * 1.06 if t_max > 0 else 1)
    ax.set_xlabel(f"time ({unit})")
    ax.set_ylabel("device")
    note = f"; ops closer than 1/{PIXELS} of the step drawn as one bar" if merged else ""
    ax.set_title(title or f"Device utilization (makespan {t_max * scale:.4g} {unit}{note})", fontsize=10)
    ax.grid(axis="x", linewidth=0.3, alpha=0.5)
    return _save(fig, path, dpi)


def executable_ops_png(
    decisions: Iterable[Sequence],
    path: str | os.PathLike,
    *,
    title: str | None = None,
    devices: Sequence[str] | None = None,
    dpi: int = 120,
) -> str:
    """Figure 7.10: for each device, the number of executable ops before each of its scheduling decisions.

    `decisions` holds (time_s, device, n_executable) triples in decision order (`SimResult.decisions`). One line
    per device, x = the device's decision number, y = executable ops; the legend gives each device's mean.
    Returns the path written.
    """
    per: dict[str, list[int]] = {}
    for rec in decisions:
        _, dev, cnt = rec[0], rec[1], rec[2]
        per.setdefault(str(dev), []).append(int(cnt))
    devs = list(devices) if devices is not None else list(per)
    fig, ax = plt.subplots(figsize=(10, 4))
    for k, d in enumerate(devs):
        ys = per.get(d, [])
        if not ys:
            continue
        mean = sum(ys) / len(ys)
        ax.plot(
            range(1, len(ys) + 1),
            ys,
            drawstyle="steps-mid",
            linewidth=0.8,
            color=_PALETTE[k % len(_PALETTE)],
            label=f"{d} (mean {mean:.1f})",
        )
    ax.set_xlabel("scheduling decision on the device")
    ax.set_ylabel("executable ops")
    ax.set_ylim(bottom=0)
    ax.set_title(title or "Executable ops before each scheduling decision", fontsize=10)
    if any(per.get(d) for d in devs):
        ax.legend(fontsize=7, ncol=2 if len(devs) > 6 else 1, loc="upper right")
    ax.grid(linewidth=0.3, alpha=0.5)
    return _save(fig, path, dpi)


def memory_png(sim_result, path: str | os.PathLike, *, title: str | None = None, dpi: int = 120) -> str:
    """Memory in use over the step, one line per device, each device's limit drawn dashed in the same colour
    (Baechi Figure 9). The simulator's memory timeline is a step function; an OOM is marked with a cross.
    A device's timeline of more than `MAX_POINTS` changes is drawn as its upper envelope at 1/`PIXELS` of the
    step (the peak exact; said in the title)."""
    t_max = max([sim_result.makespan] + [_last_time(tl) for tl in sim_result.memory_timeline.values() if tl])
    scale, unit = _time_scale(t_max)
    peak = max(list(sim_result.peak_memory.values()) + [1.0])
    mscale, munit = next(((f, u) for f, u in ((1e9, "GB"), (1e6, "MB"), (1e3, "kB")) if peak >= f), (1.0, "B"))
    fig, ax = plt.subplots(figsize=(9, 3.6))
    enveloped = False
    for k, dev in enumerate(sim_result.devices):
        tl = sim_result.memory_timeline.get(dev) or [(0.0, 0.0)]
        if len(tl) > MAX_POINTS:
            ts, ms = _envelope_arrays(*_timeline_arrays(tl), t_max)
            xs = (ts * scale).tolist() + [t_max * scale]
            ys = (ms / mscale).tolist() + [ms[-1] / mscale]
            enveloped = True
        else:
            xs = [t * scale for t, _ in tl] + [t_max * scale]
            ys = [m / mscale for _, m in tl] + [tl[-1][1] / mscale]
        color = _PALETTE[k % len(_PALETTE)]
        ax.step(xs, ys, where="post", color=color, label=f"{dev} (peak {sim_result.peak_memory[dev] / mscale:.3g})")
        limit = sim_result.memory_limit.get(dev)
        if limit is not None and limit != float("inf") and limit <= 4 * peak:
            ax.axhline(limit / mscale, color=color, linestyle="--", linewidth=0.8)
    if sim_result.oom is not None:
        o = sim_result.oom
        ax.plot(
            [o.time_s * scale],
            [o.used_bytes / mscale],
            "x",
            color="red",
            markersize=10,
            label=f"OOM: {o.op} on {o.device}",
        )
    ax.set_xlabel(f"time ({unit})")
    ax.set_ylabel(f"memory in use ({munit})")
    note = f"; upper envelope at 1/{PIXELS} of the step" if enveloped else ""
    ax.set_title(title or f"memory over the step (dashed: device limits{note})")
    ax.legend(fontsize=7, loc="upper left", ncol=2)
    return _save(fig, path, dpi)


def placement_graph_png(
    graph,
    assignment,
    path: str | os.PathLike,
    *,
    devices: Sequence[str] | None = None,
    max_ops: int = 300,
    dpi: int = 120,
) -> str | None:
    """The placement drawn on the graph: ops laid out by topological generation (left to right), coloured by
    device; edges that cross devices drawn red. Returns None (draws nothing) above `max_ops` ops."""
    import networkx as nx

    if len(graph) > max_ops:
        return None
    g = graph.nx
    layer = {}
    for k, gen in enumerate(nx.topological_generations(g)):
        for n in gen:
            layer[n] = k
    h = g.copy()
    nx.set_node_attributes(h, layer, "layer")
    pos = nx.multipartite_layout(h, subset_key="layer")
    devs = list(devices) if devices is not None else sorted(set(assignment.values()))
    color = {d: _PALETTE[k % len(_PALETTE)] for k, d in enumerate(devs)}
    width = max(6.0, 0.35 * (max(layer.values(), default=0) + 1))
    fig, ax = plt.subplots(figsize=(min(width, 40), 6))
    cut = [(u, v) for u, v in g.edges if assignment[u] != assignment[v]]
    same = [(u, v) for u, v in g.edges if assignment[u] == assignment[v]]
    nx.draw_networkx_edges(g, pos, edgelist=same, ax=ax, edge_color="#999999", width=0.6, arrowsize=6)
    nx.draw_networkx_edges(g, pos, edgelist=cut, ax=ax, edge_color="#C44E52", width=0.9, arrowsize=7)
    nx.draw_networkx_nodes(
        g, pos, ax=ax, node_size=60 if len(g) > 60 else 160, node_color=[color[assignment[n]] for n in g.nodes]
    )
    if len(g) <= 40:
        nx.draw_networkx_labels(g, pos, ax=ax, font_size=6)
    for d in devs:
        ax.plot([], [], "o", color=color[d], label=d)
    ax.legend(fontsize=7, loc="upper left")
    ax.set_title(f"{graph.name}: placement ({len(cut)} of {g.number_of_edges()} edges cross devices, red)")
    ax.axis("off")
    return _save(fig, path, dpi)
