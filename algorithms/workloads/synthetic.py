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
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

from ..cluster import Cluster, Device, Link
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
    draw = rng.random  # the edge trials' draws (10^7 of them for 10^6 ops), without the attribute lookup
    g = OpGraph(name or f"synthetic-l{levels}-s{seed}")
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
    all_nodes = [n for lvl in level_nodes for n in lvl]
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
    ngh = g.nx
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
            nb = [m for m in list(ngh.successors(cur)) + list(ngh.predecessors(cur)) if m in free]
            rng.shuffle(nb)
            for m in nb:
                if len(group) >= size:
                    break
                group.append(m)
                free.discard(m)
                frontier.append(m)
        while len(group) < size and free:
            m = rng.choice(sorted(free))
            group.append(m)
            free.discard(m)
        if len(group) < 2:
            free.add(seed_node)
            continue
        gname = f"g{gid}"
        gid += 1
        dt = next((g.op(m)["device_type"] for m in group if g.op(m)["device_type"]), None)
        for m in group:
            a = g.op(m)
            a["colocation"] = gname
            a["device_type"] = dt
    g.invalidate()


def _add_backward(g: OpGraph, fwd: list[str], factor: float) -> None:
    """The backward and update ops of a training step (module docstring), added in bulk and streamed (no list
    of the 10^6 new edges): the grads, the edges into and between them, then (wgrad, update) per parameter
    op and their edges.  Node and adjacency orders are those op-by-op insertion gave: an op's out-edges
    were added forward edges first, then to its grad, its wgrad and its update.  O(V + E)."""
    attrs_of = g.nx.nodes
    edges_fwd = [(u, v) for u, nbrs in g.nx.succ.items() for v in nbrs]
    # each new op's name is made once and that string object names it everywhere: as the graph's key and in
    # every adjacency dict of its edges (issue 22: a name made again per edge was a second string per edge
    # end, kept by the adjacency dicts: about 100 bytes per edge, and a hash and comparison per lookup)
    grad_of = {f: f"{f}/grad" for f in fwd}

    def grads() -> Iterator[tuple[str, dict]]:
        for f in fwd:
            a = attrs_of[f]
            share = factor - 1.0 if a["persistent_bytes"] > 0 and factor > 1 else factor
            yield (
                grad_of[f],
                op_attrs(
                    type="SyntheticGrad",
                    phase="backward",
                    compute_s=a["compute_s"] * share,
                    persistent_bytes=0,
                    temporary_bytes=a["output_bytes"],
                    output_bytes=a["output_bytes"],
                    colocation=None,
                    device_type=a["device_type"],
                    forward_of=f,
                ),
            )

    def grad_edges() -> Iterator[tuple[str, str, float, bool]]:
        for f in fwd:
            yield f, grad_of[f], attrs_of[f]["output_bytes"], False
        for u, v in edges_fwd:  # the grad of v outputs v's output size
            yield grad_of[v], grad_of[u], attrs_of[v]["output_bytes"], False

    params = [f for f in fwd if attrs_of[f]["persistent_bytes"] > 0]
    wgrad_of = {f: f"{f}/wgrad" for f in params}
    update_of = {f: f"{f}/update" for f in params}

    def updates() -> Iterator[tuple[str, dict]]:
        for f in params:
            a = attrs_of[f]
            # the weight gradient is its own op and tensor (as TensorFlow's gradient of a MatMul is two MatMuls)
            yield (
                wgrad_of[f],
                op_attrs(
                    type="SyntheticWeightGrad",
                    phase="backward",
                    compute_s=a["compute_s"] * min(1.0, factor),
                    persistent_bytes=0,
                    temporary_bytes=0,
                    output_bytes=a["persistent_bytes"],
                    colocation=None,
                    device_type=a["device_type"],
                    forward_of=f,
                ),
            )
            if a["colocation"] is None:
                a["colocation"] = f"var:{f}"
            yield (
                update_of[f],
                op_attrs(
                    type="ApplyGradient",
                    phase="update",
                    compute_s=a["compute_s"] * 0.1,
                    persistent_bytes=0,
                    temporary_bytes=0,
                    output_bytes=0,
                    colocation=a["colocation"],
                    device_type=a["device_type"],
                    forward_of=None,
                ),
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
    g.add_edges(grad_edges())
    g.add_ops(updates())
    g.add_edges(update_edges())
    g.invalidate()


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
