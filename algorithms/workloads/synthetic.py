"""Synthetic workloads: the thesis' level-based random DAG generator and its device generator
(seed 004, chapter 6.2), and Baechi's linear-regression training graph (seed 001, Figure 2).

Level-based DAG (thesis 6.2)
----------------------------
The graph is generated level by level; an edge always goes from a lower level to a higher one, so no cycle can
arise. When level L is created, every node of an earlier level L' is linked to every node of L with probability
`edge_probability`, restricted to ``L - L' <= edge_level_limit`` (the thesis' "edge level limit"; 0 means no
limit) and optionally damped by ``edge_decay ** (L - L' - 1)`` (the thesis' "function lowering the probability
the more distant two levels are"). Then `random_edges` long-range edges are added between two random nodes,
from the lower level to the higher, skipped when the edge exists or both nodes share a level.

Every node draws #ops, memory demand and output-tensor size uniformly from the given integer ranges (the
thesis uses 1..100 for all three); the JSON costs are these numbers times `compute_unit_s`,
`memory_unit_bytes` and `tensor_unit_bytes`. A node's memory demand becomes its `persistent_bytes` (the
thesis' memory model is static: a node needs its memory for the whole run). Every out-edge carries the
node's output size (thesis 2.2).

Colocation groups follow the shape the thesis measured on TensorFlow graphs (Figure 6.1): many small groups
and few large ones. Group sizes are drawn from a Zipf-like law on 2..`max_group_size` until
`colocated_fraction` of the nodes are grouped; each group grows from a random seed node through its
neighbours (as a TF variable gathers its read/assign ops), topping up with random nodes when the neighbourhood
is exhausted. Device-type constraints are drawn per node with probabilities `p_cpu_only` / `p_gpu_only`; a
group takes the first constraint drawn among its members, so a group never asks for two types.

With `training=True` the generated DAG is the forward pass of a training step: each forward op f gets a
backward op ``f/grad`` (`forward_of` = f) with the reversed edges between backward ops and the activation edge
f -> f/grad. Every op holding persistent memory (a parameter) also gets a weight-gradient op ``f/wgrad``
(`forward_of` = f, output = the parameter's size; in TensorFlow the gradient of a MatMul is likewise two ops, one
per tensor) and an ``f/update`` op after it (phase "update", colocated with f). Backward compute totals
`backward_factor` times the forward op's (split (factor - 1) : 1 between grad and wgrad for parameter ops), so
every op produces one tensor and every out-edge of an op carries that tensor.

Complexity: O(levels^2 * width^2) edge trials without a level limit, O(levels * limit * width^2) with one.
From `COMPILED_MIN_OPS` forward ops on, the levels' draws (widths, node draws, edge trials) are made by a
compiled port of the same loop (`level_kernel`, numba) that consumes the same Mersenne Twister stream: the
same graph, op for op and edge for edge, at a few nanoseconds per trial (issue 22: 10^7 trials at 10^6 ops).
"""

from __future__ import annotations

import functools
import random
from collections.abc import Iterator, Sequence
from itertools import chain, repeat
from typing import Any

import numpy as np

from ..cluster import Cluster, Device, Link
from ..errors import ConfigError
from ..graph import OpGraph, gc_paused, op_attrs


def _irange(rng: random.Random, r: Sequence[float]) -> int:
    lo, hi = int(r[0]), int(r[1])
    return rng.randint(lo, hi)


#: `level_dag` hands its ops and edges to the graph in batches of at least this many ops (whole levels)
_BATCH_OPS = 4096


@gc_paused()
def level_dag(
    *,
    levels: int = 20,
    min_nodes_per_level: int = 2,
    max_nodes_per_level: int = 8,
    edge_probability: float = 0.3,
    edge_level_limit: int = 5,
    edge_decay: float = 1.0,
    random_edges: int = 0,
    ops_range: Sequence[int] = (1, 100),
    memory_range: Sequence[int] = (1, 100),
    tensor_range: Sequence[int] = (1, 100),
    compute_unit_s: float = 1e-5,
    memory_unit_bytes: float = 1e4,
    tensor_unit_bytes: float = 1e4,
    colocated_fraction: float = 0.0,
    max_group_size: int = 8,
    p_cpu_only: float = 0.0,
    p_gpu_only: float = 0.0,
    training: bool = False,
    backward_factor: float = 2.0,
    seed: int = 0,
    stream: int = 0,
    name: str | None = None,
) -> OpGraph:
    """Generate a random level-based DAG as described in the module docstring (deterministic by seed).

    `stream` picks an independent random stream for the same `seed`: graphs whose shape parameters draw the same
    widths and node costs (the thesis' graphs 4 and 5 share levels, widths and edge level limit; the edge trials
    consume the generator the same way whatever the edge probability) would otherwise get identical nodes and
    node counts. Stream 0 is the plain `random.Random(seed)` (the graphs generated before streams existed)."""
    if levels < 1 or min_nodes_per_level < 1 or max_nodes_per_level < min_nodes_per_level:
        raise ValueError("need levels >= 1 and 1 <= min_nodes_per_level <= max_nodes_per_level")
    if not 0 <= edge_probability <= 1 or not 0 <= colocated_fraction <= 1:
        raise ValueError("edge_probability and colocated_fraction must lie in [0, 1]")
    if p_cpu_only + p_gpu_only > 1:
        raise ValueError("p_cpu_only + p_gpu_only must not exceed 1")
    if isinstance(stream, bool) or not isinstance(stream, int) or stream < 0:
        raise ValueError(f"stream must be an integer >= 0, got {stream!r}")
    rng = random.Random(seed) if stream == 0 else random.Random(f"level_dag/{seed}/{stream}")
    g = OpGraph(name or f"synthetic-l{levels}-s{seed}")
    kernel_args = _kernel_args(
        levels, min_nodes_per_level, max_nodes_per_level, edge_probability, edge_level_limit, edge_decay,
        ops_range, memory_range, tensor_range, p_cpu_only, p_gpu_only,
    )  # fmt: skip
    if kernel_args is not None:  # the same draws, compiled (`level_kernel`)
        all_nodes, level_of, out_size = _levels_compiled(
            g, rng, kernel_args, compute_unit_s, memory_unit_bytes, tensor_unit_bytes
        )
    else:
        all_nodes, level_of, out_size = _levels_python(
            g, rng, levels, min_nodes_per_level, max_nodes_per_level, edge_probability, edge_level_limit,
            edge_decay, ops_range, memory_range, tensor_range, compute_unit_s, memory_unit_bytes,
            tensor_unit_bytes, p_cpu_only, p_gpu_only,
        )  # fmt: skip
    added, tries = 0, 0
    while added < random_edges and tries < 20 * random_edges + 100:
        tries += 1
        a, b = rng.choice(all_nodes), rng.choice(all_nodes)
        if level_of[a] == level_of[b]:
            continue
        if level_of[a] > level_of[b]:
            a, b = b, a
        if g.nx.has_edge(a, b):
            continue
        g.add_edge(a, b, bytes=out_size[a])
        added += 1
    if colocated_fraction > 0:
        _add_colocation_groups(g, rng, all_nodes, colocated_fraction, max_group_size)
    if training:
        _add_backward(g, all_nodes, backward_factor)
    return g


def _levels_python(
    g: OpGraph,
    rng: random.Random,
    levels: int,
    min_nodes_per_level: int,
    max_nodes_per_level: int,
    edge_probability: float,
    edge_level_limit: int,
    edge_decay: float,
    ops_range: Sequence[int],
    memory_range: Sequence[int],
    tensor_range: Sequence[int],
    compute_unit_s: float,
    memory_unit_bytes: float,
    tensor_unit_bytes: float,
    p_cpu_only: float,
    p_gpu_only: float,
) -> tuple[list[str], dict[str, int], dict[str, float]]:
    """`level_dag`'s levels, their forward ops and the edges between them, drawn from `rng` op by op and trial
    by trial and added to `g`; returns the ops in creation order, each op's level and output size.  The
    reference for `_levels_compiled` and the code for small graphs."""
    draw = rng.random  # the edge trials' draws (10^7 of them for 10^6 ops), without the attribute lookup
    level_nodes: list[list[str]] = []
    level_of: dict[str, int] = {}
    out_size: dict[str, float] = {}
    # ops and edges are added in bulk, whole levels at a time (issue 22: a 10^6-op graph), in the order in
    # which they were drawn, so that the graph (node order, adjacency order) is the one op-by-op insertion
    # gave: a batch's ops first, then its edges (into its ops, from its own or earlier ops) in drawing order.
    # The cyclic GC stays off for the whole generation (`gc_paused`; no cycles are made); batches of several
    # levels spare the per-call cost on chains (one op per level)
    k = 0
    records: list[tuple[str, dict]] = []
    edges: list[tuple[str, str, float, bool]] = []
    for lv in range(levels):
        width = rng.randint(min_nodes_per_level, max_nodes_per_level)
        cur = []
        for _ in range(width):
            nm = f"n{k}"
            k += 1
            ops = _irange(rng, ops_range)
            mem = _irange(rng, memory_range)
            ten = _irange(rng, tensor_range)
            dt = None
            u = rng.random()
            if u < p_cpu_only:
                dt = "CPU"
            elif u < p_cpu_only + p_gpu_only:
                dt = "GPU"
            out_size[nm] = ten * tensor_unit_bytes
            records.append(
                (
                    nm,
                    op_attrs(
                        type="Synthetic",
                        phase="forward",
                        compute_s=ops * compute_unit_s,
                        persistent_bytes=mem * memory_unit_bytes,
                        temporary_bytes=0,
                        output_bytes=out_size[nm],
                        device_type=dt,
                        level=lv,
                    ),
                )
            )
            level_of[nm] = lv
            cur.append(nm)
        lo = 0 if edge_level_limit <= 0 else max(0, lv - edge_level_limit)
        for plv in range(lo, lv):
            p = edge_probability * (edge_decay ** (lv - plv - 1))
            if p <= 0:
                continue
            for u_ in level_nodes[plv]:
                size = out_size[u_]
                for v_ in cur:
                    if draw() < p:
                        edges.append((u_, v_, size, False))
        level_nodes.append(cur)
        if len(records) >= _BATCH_OPS or lv == levels - 1:
            g.add_ops(records)
            g.add_edges(edges)
            records, edges = [], []
    return [n for lvl in level_nodes for n in lvl], level_of, out_size


#: `level_dag` draws its levels with the compiled kernel (`level_kernel`, numba) from this many forward ops
#: on (levels times the mean width); smaller graphs need no compiled code loaded
COMPILED_MIN_OPS = 5000


@functools.cache
def _kernel() -> Any:
    """`level_kernel.draw_levels`, or None without numba."""
    try:
        from .level_kernel import draw_levels
    except ImportError:
        return None
    return draw_levels


def _kernel_args(
    levels: int,
    wmin: int,
    wmax: int,
    edge_probability: float,
    edge_level_limit: int,
    edge_decay: float,
    ops_range: Sequence[int],
    memory_range: Sequence[int],
    tensor_range: Sequence[int],
    p_cpu_only: float,
    p_gpu_only: float,
) -> tuple | None:
    """`level_kernel.draw_levels`' arguments but the generator's state, or None where `_levels_python` is
    used: a small graph, numba missing, arguments the kernel does not take (a draw range that is empty or of
    2^32 values or more; widths or levels not integers).  The edge probabilities per level distance are
    computed here, by the Python expression of `_levels_python` (and its errors, e.g. an overflow)."""
    if type(levels) is not int or type(wmin) is not int or type(wmax) is not int or type(edge_level_limit) is not int:
        return None
    if levels * (wmin + wmax) / 2 < COMPILED_MIN_OPS or wmax - wmin >= 2**32 - 1:
        return None
    try:
        ranges = np.array([[int(r[0]), int(r[1])] for r in (ops_range, memory_range, tensor_range)], np.int64)
    except (TypeError, ValueError, OverflowError, IndexError):
        return None
    span = ranges[:, 1] - ranges[:, 0]
    if (span < 0).any() or (span >= 2**32 - 1).any():
        return None
    if not all(isinstance(x, (int, float)) for x in (edge_probability, edge_decay, p_cpu_only, p_gpu_only)):
        return None
    if _kernel() is None:
        return None
    dmax = levels - 1 if edge_level_limit <= 0 else min(edge_level_limit, levels - 1)
    probs = np.zeros(dmax + 1, np.float64)
    for dist in range(1, dmax + 1):
        probs[dist] = edge_probability * (edge_decay ** (dist - 1))
    return (
        levels,
        wmin,
        wmax,
        ranges,
        float(p_cpu_only),
        float(p_cpu_only + p_gpu_only),
        probs,
        edge_level_limit,
        levels * wmax,
    )


def _unit_values(lo: int, hi: int, unit: float, draws: list[int]) -> list[float]:
    """``[d * unit for d in draws]`` (the Python expression: an int unit keeps ints), one object per
    distinct value when the range is small."""
    if hi - lo <= 4096:
        table = [v * unit for v in range(lo, hi + 1)]
        return [table[d - lo] for d in draws]
    return [d * unit for d in draws]


def _levels_compiled(
    g: OpGraph,
    rng: random.Random,
    args: tuple,
    compute_unit_s: float,
    memory_unit_bytes: float,
    tensor_unit_bytes: float,
) -> tuple[list[str], dict[str, int], dict[str, float]]:
    """`_levels_python` with the draws made by `level_kernel.draw_levels` (`args` from `_kernel_args`): the
    same ops, attributes and edges in the same order, and `rng` left in the same state.  O(V + E) here,
    O(trials) compiled."""
    version, state, gauss = rng.getstate()
    mt = np.array(state[:624], np.int64)
    st = np.array([state[624]], np.int64)
    width, draws, dtc, esrc, edst = _kernel()(mt, st, *args)
    rng.setstate((version, tuple(mt.tolist()) + (int(st[0]),), gauss))
    nf = len(dtc)
    names = [f"n{k}" for k in range(nf)]
    lvl_obj = list(range(len(width)))  # one int object per level, as the loop variable was
    lv_of: list[int] = []
    for lv, w in zip(lvl_obj, width.tolist()):
        lv_of.extend([lv] * w)
    ranges = args[3]
    ops_l, mem_l, ten_l = draws.T.tolist()
    cs = _unit_values(int(ranges[0, 0]), int(ranges[0, 1]), compute_unit_s, ops_l)
    pb = _unit_values(int(ranges[1, 0]), int(ranges[1, 1]), memory_unit_bytes, mem_l)
    ob = _unit_values(int(ranges[2, 0]), int(ranges[2, 1]), tensor_unit_bytes, ten_l)
    del ops_l, mem_l, ten_l, draws
    dts = [None, "CPU", "GPU"]
    g.add_ops(
        (
            nm,
            {
                "type": "Synthetic",
                "phase": "forward",
                "compute_s": c,
                "persistent_bytes": m,
                "temporary_bytes": 0,
                "output_bytes": o,
                "colocation": None,
                "device_type": dts[d],
                "forward_of": None,
                "level": lv,
            },
        )
        for nm, c, m, o, d, lv in zip(names, cs, pb, ob, dtc.tolist(), lv_of)
    )  # the dicts `op_attrs` makes, keys in its order
    src, dst = esrc.tolist(), edst.tolist()
    del esrc, edst
    g.add_edges(zip(map(names.__getitem__, src), map(names.__getitem__, dst), map(ob.__getitem__, src), repeat(False)))
    return names, dict(zip(names, lv_of)), dict(zip(names, ob))


def _zipf_size(rng: random.Random, max_size: int) -> int:
    sizes = list(range(2, max(2, max_size) + 1))
    weights = [1.0 / (s - 1) ** 2 for s in sizes]
    return rng.choices(sizes, weights)[0]


def _add_colocation_groups(g: OpGraph, rng: random.Random, nodes: list[str], fraction: float, max_size: int) -> None:
    target = int(round(fraction * len(nodes)))
    free = set(nodes)
    order = list(nodes)
    rng.shuffle(order)
    gid = 0
    succ, pred, attrs = g.nx._succ, g.nx._pred, g.nx._node  # networkx's dicts, without its views' calls
    sorted_nodes: list[str] | None = None  # `sorted(free)` is these, filtered (issue 22: no sort per top-up)
    for seed_node in order:
        if target - (len(nodes) - len(free)) < 2:
            break
        if seed_node not in free:
            continue
        size = min(_zipf_size(rng, max_size), target - (len(nodes) - len(free)))
        group = [seed_node]
        free.discard(seed_node)
        frontier = [seed_node]
        while frontier and len(group) < size:
            cur = frontier.pop(0)
            nb = [m for m in list(succ[cur]) + list(pred[cur]) if m in free]
            rng.shuffle(nb)
            for m in nb:
                if len(group) >= size:
                    break
                group.append(m)
                free.discard(m)
                frontier.append(m)
        while len(group) < size and free:
            if sorted_nodes is None:
                sorted_nodes = sorted(nodes)
            m = rng.choice(list(filter(free.__contains__, sorted_nodes)))  # = rng.choice(sorted(free))
            group.append(m)
            free.discard(m)
        if len(group) < 2:
            free.add(seed_node)
            continue
        gname = f"g{gid}"
        gid += 1
        dt = next((attrs[m]["device_type"] for m in group if attrs[m]["device_type"]), None)
        for m in group:
            a = attrs[m]
            a["colocation"] = gname
            a["device_type"] = dt
    g.invalidate()


def _add_backward(g: OpGraph, fwd: list[str], factor: float) -> None:
    """The backward and update ops of a training step (module docstring), added in bulk and streamed (no list
    of the 10^6 new edges): the grads, the edges into and between them, then (wgrad, update) per parameter
    op and their edges.  Node and adjacency orders are those op-by-op insertion gave: an op's out-edges
    were added forward edges first, then to its grad, its wgrad and its update.  O(V + E)."""
    attrs_of = g.nx._node  # networkx's node dict (its NodeView costs a call per lookup: 10^6 of them)
    edges_fwd = [(u, v) for u, nbrs in g.nx._succ.items() for v in nbrs]
    # each new op's name is made once and that string object names it everywhere: as the graph's key and in
    # every adjacency dict of its edges (issue 22: a name made again per edge was a second string per edge
    # end, kept by the adjacency dicts: about 100 bytes per edge, and a hash and comparison per lookup)
    grad_of = {f: f"{f}/grad" for f in fwd}

    def grads() -> Iterator[tuple[str, dict]]:
        for f in fwd:  # the dicts `op_attrs` makes, keys in its order
            a = attrs_of[f]
            share = factor - 1.0 if a["persistent_bytes"] > 0 and factor > 1 else factor
            yield (
                grad_of[f],
                {
                    "type": "SyntheticGrad",
                    "phase": "backward",
                    "compute_s": a["compute_s"] * share,
                    "persistent_bytes": 0,
                    "temporary_bytes": a["output_bytes"],
                    "output_bytes": a["output_bytes"],
                    "colocation": None,
                    "device_type": a["device_type"],
                    "forward_of": f,
                },
            )

    out_of = [attrs_of[f]["output_bytes"] for f in fwd]
    grad_names = list(map(grad_of.__getitem__, fwd))
    # the edges into and between the grads, as C-level iterators: f -> f/grad, then v/grad -> u/grad per edge
    # u -> v (the grad of v outputs v's output size)
    grad_edges = chain(
        zip(fwd, grad_names, out_of, repeat(False)),
        (
            (grad_of[v], grad_of[u], attrs_of[v]["output_bytes"], False)
            for u, v in edges_fwd  # fmt: skip
        ),
    )

    params = [f for f in fwd if attrs_of[f]["persistent_bytes"] > 0]
    wgrad_of = {f: f"{f}/wgrad" for f in params}
    update_of = {f: f"{f}/update" for f in params}
    wshare = min(1.0, factor)

    def updates() -> Iterator[tuple[str, dict]]:
        for f in params:
            a = attrs_of[f]
            # the weight gradient is its own op and tensor (as TensorFlow's gradient of a MatMul is two MatMuls)
            yield (
                wgrad_of[f],
                {
                    "type": "SyntheticWeightGrad",
                    "phase": "backward",
                    "compute_s": a["compute_s"] * wshare,
                    "persistent_bytes": 0,
                    "temporary_bytes": 0,
                    "output_bytes": a["persistent_bytes"],
                    "colocation": None,
                    "device_type": a["device_type"],
                    "forward_of": f,
                },
            )
            if a["colocation"] is None:
                a["colocation"] = f"var:{f}"
            yield (
                update_of[f],
                {
                    "type": "ApplyGradient",
                    "phase": "update",
                    "compute_s": a["compute_s"] * 0.1,
                    "persistent_bytes": 0,
                    "temporary_bytes": 0,
                    "output_bytes": 0,
                    "colocation": a["colocation"],
                    "device_type": a["device_type"],
                    "forward_of": None,
                },
            )

    def update_edges() -> Iterator[tuple[str, str, float, bool]]:
        for f in params:
            a = attrs_of[f]
            wgrad, update = wgrad_of[f], update_of[f]
            yield grad_of[f], wgrad, a["output_bytes"], False
            yield f, wgrad, a["output_bytes"], False
            yield wgrad, update, a["persistent_bytes"], False
            yield f, update, 0, True

    g.add_ops(grads())
    g.add_edges(grad_edges)
    del out_of, grad_names
    g.add_ops(updates())
    g.add_edges(update_edges())
    g.invalidate()


def thesis_costs(
    graph: OpGraph,
    *,
    ops_range: Sequence[int] = (1, 100),
    memory_range: Sequence[int] = (1, 100),
    tensor_range: Sequence[int] = (1, 100),
    compute_unit_s: float = 1e-4,
    memory_unit_bytes: float = 1e4,
    tensor_unit_bytes: float = 1e4,
    p_cpu_only: float = 0.05,
    p_gpu_only: float = 0.05,
    seed: int = 0,
) -> OpGraph:
    """`graph`'s structure with the thesis' random costs (seed 004, 6.1-6.2), as `level_dag` draws them.

    The thesis evaluates on graphs extracted from TensorFlow (7.2) but takes only their structure from it: "for
    the evaluations the data is extended by the tensor sizes, #ops, device constraints and RAM demand" (6.1),
    drawn as for its synthetic graphs ("the edge weights are set randomly in a range of 1 and 100 as well as the
    number of operations per node. The memory demand of a node is also set randomly within this range", 6.2).
    Every op draws #ops, memory demand and output size from the integer ranges (compute_s = #ops x
    `compute_unit_s`, persistent_bytes = memory x `memory_unit_bytes`, output_bytes = size x
    `tensor_unit_bytes`, no temporary bytes) and a device-type constraint with `p_cpu_only` / `p_gpu_only`; a
    colocation group takes the first constraint drawn among its members; every tensor edge carries its source's
    output size (2.2). Op names, edges, colocation groups and phases are kept; per-device-type times dropped.
    The defaults are the `thesis_synthetic` preset's units, so both kinds of graph meet the devices in the same
    regime. Draws follow the graph's op order with `seed`: a graph gets the same costs every time (the thesis
    stored each extended graph in a CSV file and read it for every run). O(V + E)."""
    for key, r in (("ops_range", ops_range), ("memory_range", memory_range), ("tensor_range", tensor_range)):
        if len(r) != 2 or not 0 <= int(r[0]) <= int(r[1]):
            raise ConfigError(f"{key} must be [low, high] with 0 <= low <= high, got {list(r)}")
    if min(compute_unit_s, memory_unit_bytes, tensor_unit_bytes) <= 0:
        raise ConfigError("compute_unit_s, memory_unit_bytes and tensor_unit_bytes must be > 0")
    if p_cpu_only < 0 or p_gpu_only < 0 or p_cpu_only + p_gpu_only > 1:
        raise ConfigError(f"p_cpu_only + p_gpu_only must lie in [0, 1], got {p_cpu_only} and {p_gpu_only}")
    rng = random.Random(seed)
    group_type: dict[str, str | None] = {}
    size: dict[str, float] = {}
    records: list[tuple[str, dict[str, Any]]] = []
    for op in graph.ops:
        a = dict(graph.op(op))
        ops, mem, ten = _irange(rng, ops_range), _irange(rng, memory_range), _irange(rng, tensor_range)
        u = rng.random()
        dt = "CPU" if u < p_cpu_only else "GPU" if u < p_cpu_only + p_gpu_only else None
        grp = a.get("colocation")
        if grp is not None and group_type.get(grp) is None:
            group_type[grp] = dt
        size[op] = ten * tensor_unit_bytes
        a.update(
            compute_s=ops * compute_unit_s,
            persistent_bytes=mem * memory_unit_bytes,
            temporary_bytes=0,
            output_bytes=size[op],
            device_type=dt,
        )
        a.pop("compute_s_by_type", None)
        records.append((op, a))
    for _, a in records:  # a group's constraint: the first drawn among its members (None if none drew one)
        if a.get("colocation") is not None:
            a["device_type"] = group_type[a["colocation"]]
    out = OpGraph(name=graph.name)
    out.add_ops((op, op_attrs(**a)) for op, a in records)
    out.add_edges((u, v, 0.0 if e.get("control") else size[u], bool(e.get("control"))) for u, v, e in graph.edges())
    return out


def thesis_devices(
    n: int = 7,
    *,
    p_cpu: float = 0.6,
    p_gpu: float = 0.4,
    speed_range: Sequence[float] = (10, 100),
    memory_range: Sequence[float] = (2e9, 16e9),
    transfer_range: Sequence[float] = (10, 60),
    transfer_unit_bytes_per_s: float = 1e8,
    speed_unit: float = 1.0,
    memory_noise: float = 0.1,
    latency_s: float = 0.0,
    mode: str = "parallel",
    seed: int = 0,
    name: str = "thesis_hetero",
) -> Cluster:
    """The thesis' device generator (6.2): types drawn CPU 60% / GPU 40% (remaining probability TPU),
    speed uniform in `speed_range` (operations per time unit), memory falling linearly with speed from
    `memory_range[1]` (slowest) to `memory_range[0]` (fastest) with +-`memory_noise` relative jitter, and a
    symmetric transfer rate per device pair uniform in `transfer_range` (times `transfer_unit_bytes_per_s`)."""
    rng = random.Random(seed)
    s_lo, s_hi = float(speed_range[0]), float(speed_range[1])
    m_lo, m_hi = float(memory_range[0]), float(memory_range[1])
    devs = []
    for i in range(n):
        u = rng.random()
        t = "CPU" if u < p_cpu else ("GPU" if u < p_cpu + p_gpu else "TPU")
        speed = rng.uniform(s_lo, s_hi)
        frac = 0.0 if s_hi == s_lo else (speed - s_lo) / (s_hi - s_lo)
        mem = (m_hi - frac * (m_hi - m_lo)) * (1 + rng.uniform(-memory_noise, memory_noise))
        devs.append(Device(f"{t.lower()}{i}", t, mem, speed * speed_unit))
    links = {}
    for i in range(n):
        for j in range(i + 1, n):
            rate = rng.uniform(float(transfer_range[0]), float(transfer_range[1])) * transfer_unit_bytes_per_s
            links[(devs[i].name, devs[j].name)] = Link(latency_s, rate)
    mean_rate = (float(transfer_range[0]) + float(transfer_range[1])) / 2 * transfer_unit_bytes_per_s
    return Cluster(devs, latency_s, mean_rate, mode, links, name)


def linreg_graph(*, batch: int = 128, features: int = 1024, flop_s: float = 1e-9) -> OpGraph:
    """Baechi's working example (Figure 2): a linear-regression training step with SGD.

    Ops: inputs X and Y, variables Weight and Step, Pred = X @ Weight, Error = Pred - Y, Loss = mean(Error^2),
    Grad (gradient of the loss w.r.t. Weight), ApplyGrad (Weight -= lr * Grad) and UpdateStep (Step += 1).
    Colocation groups as in the paper: {Weight, ApplyGrad} and {Step, UpdateStep}. Compute times are
    flop counts times `flop_s`; sizes are float32 tensors.
    """
    f4 = 4
    g = OpGraph(f"linreg-b{batch}")
    xb, yb, wb = batch * features * f4, batch * f4, features * f4
    g.add_op("X", type="Placeholder", phase="other", output_bytes=xb)
    g.add_op("Y", type="Placeholder", phase="other", output_bytes=yb)
    g.add_op("Weight", type="VariableV2", phase="forward", persistent_bytes=wb, output_bytes=wb, colocation="Weight")
    g.add_op("Step", type="VariableV2", phase="other", persistent_bytes=8, output_bytes=8, colocation="Step")
    g.add_op("Pred", type="MatMul", phase="forward", compute_s=2 * batch * features * flop_s, output_bytes=yb)
    g.add_op("Error", type="Sub", phase="forward", compute_s=batch * flop_s, output_bytes=yb)
    g.add_op("Loss", type="Mean", phase="forward", compute_s=2 * batch * flop_s, output_bytes=f4)
    g.add_op(
        "Grad",
        type="MatMul",
        phase="backward",
        compute_s=2 * batch * features * flop_s,
        output_bytes=wb,
        forward_of="Pred",
    )
    g.add_op(
        "ApplyGrad",
        type="ApplyGradientDescent",
        phase="update",
        compute_s=2 * features * flop_s,
        output_bytes=wb,
        colocation="Weight",
    )
    g.add_op("UpdateStep", type="AssignAdd", phase="update", compute_s=flop_s, output_bytes=8, colocation="Step")
    for s, d, b in [
        ("X", "Pred", xb),
        ("Weight", "Pred", wb),
        ("Pred", "Error", yb),
        ("Y", "Error", yb),
        ("Error", "Loss", yb),
        ("Error", "Grad", yb),
        ("X", "Grad", xb),
        ("Grad", "ApplyGrad", wb),
        ("Weight", "ApplyGrad", wb),
        ("Grad", "UpdateStep", 0),
        ("Step", "UpdateStep", 8),
    ]:
        g.add_edge(s, d, bytes=b, control=(b == 0))
    return g
