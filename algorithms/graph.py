"""The op graph: the training step as a DAG of ops joined by tensor edges.

`OpGraph` keeps its ops and edges in a `networkx.DiGraph` (node and edge attributes as in the graph JSON of
docs/formats.md) and offers a compiled, integer-indexed view (`OpGraph.index()`) that the simulator and the
placers use on their hot paths.

Units: bytes and seconds everywhere.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import json
import math
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn

import networkx as nx
import orjson  # a faster JSON codec for graphs and artifacts of 10^5-10^6 ops (issue 22); the formats are the same

from .errors import InvalidGraph

FORMAT = "opgraph/1"
PHASES = ("forward", "backward", "update", "other")
DEVICE_TYPES = ("CPU", "GPU", "TPU")
#: Numeric op attributes every op must carry (non-negative, finite).
COST_KEYS = ("compute_s", "persistent_bytes", "temporary_bytes", "output_bytes")
#: Op attributes written to JSON, in this order.
OP_KEYS = (
    "name",
    "type",
    "phase",
    "compute_s",
    "persistent_bytes",
    "temporary_bytes",
    "output_bytes",
    "colocation",
    "device_type",
    "forward_of",
)


def _check_costs(name: str, a: Mapping[str, Any]) -> None:
    """`OpGraph.validate`'s check of an op's costs and sizes (`COST_KEYS`, in that order): `InvalidGraph`
    naming the op and the first key missing or not a finite number >= 0."""
    for key in COST_KEYS:
        v = a.get(key)
        if v is None:
            raise InvalidGraph(f"op {name!r}: missing {key}")
        _check_number(v, f"op {name!r}: {key}")


def _check_number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidGraph(f"{what} must be a number, got {value!r}")
    if math.isnan(value) or math.isinf(value) or value < 0:
        raise InvalidGraph(f"{what} must be finite and >= 0, got {value!r}")
    return float(value)


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for the block (back on after it, if it was on); as a decorator,
    ``@gc_paused()``, off for each call of the function.  Nested uses leave it to the outermost.

    Building a graph or its index allocates millions of dicts, lists and tuples, none of them in a cycle;
    each collection the allocations trigger walks every object already built, so that at 10^6 ops the
    collector took about 40% of the graph's build, index and load time (docs/scale.md, session 7).  The
    simulator and the list placers (`simulator.simulate`, `safeguards.place_checked`) run under it too: they
    allocate a few small tuples per op and event and make no cycles, and every full collection would walk
    the graph's millions of objects (100K random ops, simulate: 2.4-2.8 -> 1.8 s CPU).
    Reference counting still frees everything as usual; only cycles made inside the block wait for the
    next collection after it."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


@dataclass
class GraphIndex:
    """Integer-indexed, read-only view of an `OpGraph` for fast algorithms.

    Ops are numbered 0..n-1 in a deterministic topological order (`topo` is simply range(n) in that
    numbering). `succ[i]` / `pred[i]` hold (neighbour index, bytes) pairs, control edges with 0 bytes.
    """

    names: list[str]
    pos: dict[str, int]
    succ: list[list[tuple[int, float]]]
    pred: list[list[tuple[int, float]]]
    compute_s: list[float]
    compute_by_type: list[dict[str, float] | None]
    persistent: list[float]
    temporary: list[float]
    output: list[float]
    colocation: list[str | None]
    device_type: list[str | None]
    phase: list[str]
    #: bytes a copy of the op's output takes on a device that receives it: the largest tensor the op sends
    #: (its largest out-edge), at least its output bytes.  An op whose output is a view of another tensor
    #: (output_bytes 0, e.g. a transpose) still costs the receiver the whole tensor.
    copy_bytes: list[float] = field(default_factory=list)
    #: latencies one transfer of the op's output pays: the tensors a coarse op sends on one edge
    #: (``send_tensors``, written by `algorithms.passes.contract`), 1 for an op of the original graph
    copy_tensors: list[float] = field(default_factory=list)

    @property
    def n(self) -> int:
        return len(self.names)

    def exec_time(self, i: int, dev_type: str, speed: float) -> float:
        """Execution time of op i on a device of this type and speed."""
        by = self.compute_by_type[i]
        base = by.get(dev_type, self.compute_s[i]) if by else self.compute_s[i]
        return base / speed


class OpGraph:
    """A training-step DAG. Nodes are op names; attributes follow the graph JSON format.

    Build with `add_op` / `add_edge`, or `OpGraph.from_dict` / `OpGraph.load`. Mutating `self.nx` directly is
    allowed, but call `invalidate()` afterwards so that the cached index is rebuilt.
    """

    def __init__(self, name: str = "graph"):
        self.name = name
        self.nx = nx.DiGraph()
        self._index: GraphIndex | None = None

    # ----------------------------------------------------------------- building
    def add_op(self, name: str, **attrs: Any) -> None:
        """Add an op; its attributes are `op_attrs`' keyword arguments (compute_s, the byte counts, type, phase,
        colocation, device_type, forward_of, compute_s_by_type, any extra ones), with its defaults."""
        if name in self.nx:
            raise InvalidGraph(f"duplicate op name {name!r}")
        self.nx.add_node(name, **op_attrs(**attrs))
        self._index = None

    def add_edge(self, src: str, dst: str, bytes: float = 0, control: bool = False) -> None:
        """Add a tensor (or control) edge. A second tensor between the same pair adds its bytes."""
        for end, role in ((src, "source"), (dst, "destination")):
            if end not in self.nx:
                raise InvalidGraph(f"edge {src!r} -> {dst!r}: unknown {role} op {end!r}")
        if self.nx.has_edge(src, dst):
            data = self.nx.edges[src, dst]
            if not control:
                data["bytes"] = data["bytes"] + bytes if not data["control"] else bytes
                data["control"] = False
        else:
            self.nx.add_edge(src, dst, bytes=bytes if not control else 0, control=bool(control))
        self._index = None

    @gc_paused()
    def add_ops(self, ops: Iterable[tuple[str, dict[str, Any]]]) -> None:
        """Add many ops at once: (name, attributes) pairs, the attributes a complete dict as `add_op` builds it
        (every key of `OP_KEYS` but the name, in that order, then any extra ones; see `op_attrs`).  The dicts
        are taken over, not copied.  Same result as `add_op` one op at a time, at a fraction of the cost
        (issue 22: the networkx calls were most of the time of building a 10^6-op graph).  O(ops)."""
        g = self.nx
        node, succ, pred = g._node, g._succ, g._pred  # networkx's documented DiGraph data structure
        for name, attrs in ops:
            if name in node:
                raise InvalidGraph(f"duplicate op name {name!r}")
            node[name] = attrs
            succ[name] = {}
            pred[name] = {}
        _clear_nx_cache(g)
        self._index = None

    @gc_paused()
    def add_edges(self, edges: Iterable[tuple[str, str, float, bool]]) -> None:
        """Add many edges at once: (src, dst, bytes, control) tuples, with `add_edge`'s meaning (a second
        tensor between the same pair adds its bytes) and errors, in one pass.  O(edges)."""
        g = self.nx
        succ, pred = g._succ, g._pred
        _clear_nx_cache(g)
        self._index = None
        for src, dst, b, control in edges:
            try:  # both ends known: the usual case, two subscripts (issue 22: 3.4 x 10^6 edges at 10^6 ops)
                su = succ[src]
                pd = pred[dst]
            except (KeyError, TypeError):
                _raise_unknown_end(succ, src, dst)
            data = su.get(dst)
            if data is None:
                data = {"bytes": 0 if control else b, "control": True if control else False}
                su[dst] = data
                pd[src] = data
            elif not control:
                data["bytes"] = data["bytes"] + b if not data["control"] else b
                data["control"] = False

    def invalidate(self) -> None:
        self._index = None

    # ----------------------------------------------------------------- access
    def __len__(self) -> int:
        return self.nx.number_of_nodes()

    def __contains__(self, name: object) -> bool:
        return name in self.nx

    def __iter__(self) -> Iterator[str]:
        return iter(self.nx.nodes)

    @property
    def ops(self) -> Iterable[str]:
        return self.nx.nodes

    def op(self, name: str) -> dict[str, Any]:
        return self.nx.nodes[name]

    def edges(self) -> Iterable[tuple[str, str, dict[str, Any]]]:
        return self.nx.edges(data=True)

    def number_of_edges(self) -> int:
        return self.nx.number_of_edges()

    def successors(self, name: str) -> Iterable[str]:
        return self.nx.successors(name)

    def predecessors(self, name: str) -> Iterable[str]:
        return self.nx.predecessors(name)

    def topological_order(self) -> list[str]:
        """Deterministic topological order (Kahn with insertion-order tie-breaking)."""
        return list(self.index().names)

    def colocation_groups(self) -> dict[str, list[str]]:
        """Colocation group name -> member ops (in graph insertion order)."""
        groups: dict[str, list[str]] = {}
        for name, attrs in self.nx.nodes(data=True):
            g = attrs.get("colocation")
            if g is not None:
                groups.setdefault(g, []).append(name)
        return groups

    def total_memory(self) -> float:
        """Static sum of every op's persistent, temporary and output bytes (an upper bound of need)."""
        return sum(
            a["persistent_bytes"] + a["temporary_bytes"] + a["output_bytes"] for _, a in self.nx.nodes(data=True)
        )

    def index(self) -> GraphIndex:
        """The compiled integer view, rebuilt lazily after a change. O(V + E)."""
        if self._index is None:
            self._index = self._build_index()
        return self._index

    @gc_paused()
    def _build_index(self) -> GraphIndex:
        """The index (`GraphIndex`): from arrays for a graph of `INDEX_ARRAYS_MIN_OPS` ops or more, else (and as
        the reference: `tests/test_graph_index_arrays.py`) op by op in Python.  The same index either way."""
        if len(self.nx) >= INDEX_ARRAYS_MIN_OPS:
            return self._build_index_arrays()
        return self._build_index_python()

    def _build_index_arrays(self) -> GraphIndex:
        """`_build_index_python` with the per-edge work done by numpy and C-level iteration (issue 22: 3.4 x
        10^6 edges at 10^6 ops): the edges' ends as arrays in insertion order, Kahn's order compiled
        (`graph_kernel.kahn`, `_kahn` without numba), each op's successor and predecessor lists sliced from one
        list of (neighbour, bytes) pairs per direction (predecessors by a stable sort on the destination:
        sources in insertion order, as `_build_index_python` appends them).  The numbers and byte counts are
        the same objects as there (positions shared with `pos`, byte counts interned).  (Keeping the CSR
        arrays for the compiled kernels, which build them from the lists, raised a 10^6-op whole run's peak by
        about 80 MB for no measurable time.)  O((V + E) log V)."""
        import numpy as np

        g = self.nx
        names = list(g._node)  # insertion order
        n = len(names)
        gsucc = g._succ
        adj = [gsucc[u] for u in names]
        ptr = np.zeros(n + 1, np.int64)
        np.cumsum(np.fromiter(map(len, adj), np.int64, n), out=ptr[1:])
        m = int(ptr[-1])
        at = dict(zip(names, range(n)))
        dst = np.fromiter(map(at.__getitem__, itertools.chain.from_iterable(adj)), np.int64, m)
        del at
        num = _float_interner()  # one float object per distinct integer byte count (as `_build_index_python`)
        b_obj = [
            0.0 if d.get("control") else (b if type(b := d.get("bytes", 0)) is float else num(b))
            for nb in adj
            for d in nb.values()
        ]  # `num` inline for floats (returned as they are)
        del adj
        ins = _kahn_arrays(ptr, dst, n)
        if ins is None:
            _topological_order(g)  # raises InvalidGraph naming the ops of a cycle
            raise AssertionError("Kahn's order and _topological_order disagree on a cycle")
        ids = list(range(n))  # the positions: one int object each, shared by `pos`, `succ` and `pred`
        order = list(map(names.__getitem__, _ints(ins)))
        del names
        pos = dict(zip(order, ids))
        topo_of = np.empty(n, np.int64)  # insertion position -> topological position
        topo_of[ins] = np.arange(n, dtype=np.int64)
        deg = np.diff(ptr)
        pu = topo_of[np.repeat(np.arange(n, dtype=np.int64), deg)]  # each edge's ends, topological positions
        pv = topo_of[dst]
        del dst, topo_of
        # successors: op by op in topological order, each op's out-edges in adjacency order
        pairs = list(zip(map(ids.__getitem__, _ints(pv)), b_obj))
        lo = ptr[ins]
        succ = [pairs[a:b] for a, b in zip(_ints(lo), _ints(lo + deg[ins]))]
        del pairs, lo
        # predecessors: by destination, then by the source's insertion position (the edges' order)
        by_dst = np.argsort(pv, kind="stable")
        pred_ptr = np.zeros(n + 1, np.int64)
        np.cumsum(np.bincount(pv, minlength=n), out=pred_ptr[1:])
        del pv
        pairs = list(zip(map(ids.__getitem__, _ints(pu[by_dst])), map(b_obj.__getitem__, _ints(by_dst))))
        del pu, by_dst
        pred = [pairs[a:b] for a, b in zip(_ints(pred_ptr[:-1]), _ints(pred_ptr[1:]))]
        del pairs, pred_ptr
        # each op's largest out-edge (for its copy size), in topological order
        largest = np.full(n, -np.inf)
        if m:
            has = deg > 0
            largest[has] = np.fmax.reduceat(np.array(b_obj, np.float64), ptr[:-1][has])  # NaN never wins ``>``
        del b_obj
        try:
            return self._index_attributes_by_key(order, pos, succ, pred, num, largest[ins])
        except Exception:  # a malformed attribute: the op-by-op pass raises what it raised
            return self._index_attributes(order, pos, succ, pred, num)

    def _index_attributes_by_key(
        self,
        order: list[str],
        pos: dict[str, int],
        succ: list[list[tuple[int, float]]],
        pred: list[list[tuple[int, float]]],
        num: Callable[[Any], float],
        largest: Any,
    ) -> GraphIndex:
        """`_index_attributes` an attribute at a time (a list comprehension per attribute, `num` inline for
        floats) and the copy sizes from the CSR arrays (the op's largest out-edge, found op by op only for the
        ops where one exceeds the output bytes; `largest`: each op's largest out-edge, -inf without one): the same
        lists, the same objects.  O(V + E)."""
        import numpy as np

        attrs = list(map(self.nx._node.__getitem__, order))
        compute_s = [float(a["compute_s"]) for a in attrs]
        by_type = [a.get("compute_s_by_type") or None for a in attrs]
        persistent = [x if type(x := a["persistent_bytes"]) is float else num(x) for a in attrs]
        temporary = [x if type(x := a["temporary_bytes"]) is float else num(x) for a in attrs]
        output = [x if type(x := a["output_bytes"]) is float else num(x) for a in attrs]
        colocation = [a.get("colocation") for a in attrs]
        device_type = [a.get("device_type") for a in attrs]
        phase = [a.get("phase", "forward") for a in attrs]
        copy_tensors = [1.0 if (x := a.get("send_tensors")) is None else float(x) for a in attrs]
        del attrs
        # copy_bytes[i]: the first out-edge's bytes larger than every earlier one and than the output, if any
        copy_bytes = list(output)
        for i in np.flatnonzero(largest > np.array(output, np.float64)).tolist():
            out = output[i]
            for _, b in succ[i]:
                if b > out:
                    out = b
            copy_bytes[i] = out
        return GraphIndex(
            names=order,
            pos=pos,
            succ=succ,
            pred=pred,
            compute_s=compute_s,
            compute_by_type=by_type,
            persistent=persistent,
            temporary=temporary,
            output=output,
            colocation=colocation,
            device_type=device_type,
            phase=phase,
            copy_bytes=copy_bytes,
            copy_tensors=copy_tensors,
        )

    def _build_index_python(self) -> GraphIndex:
        g = self.nx
        names = list(g._node)  # insertion order
        at = {name: k for k, name in enumerate(names)}
        gsucc = g._succ
        # successors as insertion positions, and the edges' bytes (control edges 0), in adjacency order
        out_ins = [[at[v] for v in gsucc[u]] for u in names]
        num = _float_interner()  # issue 22: one float object per distinct integer byte count, not one per use
        out_b = [[0.0 if d.get("control") else num(d.get("bytes", 0)) for d in gsucc[u].values()] for u in names]
        gpred = g._pred
        ins = _kahn(out_ins, [len(gpred[u]) for u in names])
        if ins is None:
            _topological_order(g)  # raises InvalidGraph naming the ops of a cycle
            raise AssertionError("Kahn's order and _topological_order disagree on a cycle")
        order = [names[k] for k in ins]
        n = len(order)
        ids = list(range(n))  # the positions: one int object each, shared by `pos`, `succ` and `pred`
        topo_of = [0] * n  # insertion position -> topological position
        for i, k in zip(ids, ins):
            topo_of[k] = i
        pos = dict(zip(order, ids))
        del ids
        succ: list[list[tuple[int, float]]] = [[] for _ in order]
        pred: list[list[tuple[int, float]]] = [[] for _ in order]
        for k in range(n):  # sources in insertion order: the order of g.edges(), which pred lists follow
            pu = topo_of[k]
            su = succ[pu]
            for kv, b in zip(out_ins[k], out_b[k]):
                pv = topo_of[kv]
                su.append((pv, b))
                pred[pv].append((pu, b))
        del out_ins, out_b
        return self._index_attributes(order, pos, succ, pred, num)

    def _index_attributes(
        self,
        order: list[str],
        pos: dict[str, int],
        succ: list[list[tuple[int, float]]],
        pred: list[list[tuple[int, float]]],
        num: Callable[[Any], float],
    ) -> GraphIndex:
        """The index of ops in `order` with this adjacency: the ops' attributes read in one pass.  O(V + E)."""
        n = len(order)
        data = self.nx._node
        compute_s = [0.0] * n
        by_type: list[dict[str, float] | None] = [None] * n
        persistent = [0.0] * n
        temporary = [0.0] * n
        output = [0.0] * n
        colocation: list[str | None] = [None] * n
        device_type: list[str | None] = [None] * n
        phase = ["forward"] * n
        copy_bytes = [0.0] * n
        copy_tensors = [1.0] * n
        for i, name in enumerate(order):  # one pass over the ops (issue 22: 10^5-10^6 of them)
            a = data[name]
            compute_s[i] = float(a["compute_s"])
            by_type[i] = a.get("compute_s_by_type") or None
            persistent[i] = num(a["persistent_bytes"])
            temporary[i] = num(a["temporary_bytes"])
            out = output[i] = num(a["output_bytes"])
            colocation[i] = a.get("colocation")
            device_type[i] = a.get("device_type")
            phase[i] = a.get("phase", "forward")
            st = a.get("send_tensors")
            if st is not None:
                copy_tensors[i] = float(st)
            for _, b in succ[i]:
                if b > out:
                    out = b
            copy_bytes[i] = out
        return GraphIndex(
            names=order,
            pos=pos,
            succ=succ,
            pred=pred,
            compute_s=compute_s,
            compute_by_type=by_type,
            persistent=persistent,
            temporary=temporary,
            output=output,
            colocation=colocation,
            device_type=device_type,
            phase=phase,
            copy_bytes=copy_bytes,
            copy_tensors=copy_tensors,
        )

    def copy(self, name: str | None = None) -> OpGraph:
        other = OpGraph(name or self.name)
        other.nx = self.nx.copy()
        return other

    def subgraph(self, ops: Iterable[str], name: str | None = None) -> OpGraph:
        other = OpGraph(name or self.name)
        other.nx = self.nx.subgraph(list(ops)).copy()
        return other

    # ----------------------------------------------------------------- validation
    def validate(self, cluster: Any = None) -> OpGraph:
        """Raise `InvalidGraph` naming the culprit if the graph is malformed; return self.

        Checks that there is at least one op, costs and sizes (present, finite, >= 0), phases, `forward_of`
        targets, colocation groups whose
        ops ask for different device types, cycles (naming the ops of one cycle) and, when a cluster is given,
        ops or groups whose device type no device of the cluster has. O(V + E).

        The cycle check builds the index (`index()`, kept for the placers and the simulator, which need it
        next): change ops or edges after validating only as the class docstring says, then `invalidate()`.
        """
        g = self.nx
        if len(g) == 0:
            raise InvalidGraph(f"graph {self.name!r} has no ops: there is nothing to place")
        inf = math.inf
        num = (float, int)
        # colocation groups: one device type at most; the first conflict (in op order) is raised after the
        # per-op and per-edge checks, as a separate pass after them would (issue 22: one pass over 10^6 ops)
        want: dict[str, tuple[str, str]] = {}
        conflict: str | None = None
        types_asked: set[str] = set()
        for name, a in g._node.items():  # g.nodes(data=True), without its view's per-item cost
            c, p, tm = a.get("compute_s"), a.get("persistent_bytes"), a.get("temporary_bytes")
            o = a.get("output_bytes")
            if not (
                type(c) in num
                and 0 <= c < inf
                and type(p) in num
                and 0 <= p < inf
                and type(tm) in num
                and 0 <= tm < inf
                and type(o) in num
                and 0 <= o < inf
            ):  # the usual case, checked inline (NaN fails the comparison); else the check that names the key
                _check_costs(name, a)
            by = a.get("compute_s_by_type")
            if by:
                for t, v in by.items():
                    if t not in DEVICE_TYPES:
                        raise InvalidGraph(
                            f"op {name!r}: compute_s_by_type has unknown device type {t!r}; "
                            f"expected one of {DEVICE_TYPES}"
                        )
                    _check_number(v, f"op {name!r}: compute_s_by_type[{t}]")
            if a.get("phase", "forward") not in PHASES:
                raise InvalidGraph(f"op {name!r}: phase {a.get('phase')!r} is not one of {PHASES}")
            dt = a.get("device_type")
            if dt is not None:
                if dt not in DEVICE_TYPES:
                    raise InvalidGraph(f"op {name!r}: device_type {dt!r} is not one of {DEVICE_TYPES}")
                types_asked.add(dt)
                grp = a.get("colocation")
                if grp is not None and conflict is None:
                    if grp in want and want[grp][0] != dt:
                        other_op, other_dt = want[grp][1], want[grp][0]
                        conflict = (
                            f"colocation group {grp!r}: op {other_op!r} asks for {other_dt} but op {name!r} "
                            f"asks for {dt}"
                        )
                    want.setdefault(grp, (dt, name))
            fw = a.get("forward_of")
            if fw is not None and fw not in g:
                raise InvalidGraph(f"op {name!r}: forward_of names unknown op {fw!r}")
        for u, nbrs in g._succ.items():  # g.edges(data=True), without its per-edge view objects
            for v, d in nbrs.items():
                b = d.get("bytes")
                if not ((type(b) is float or type(b) is int) and 0 <= b < inf):
                    _check_number(b, f"edge {u!r} -> {v!r}: bytes")
        if conflict is not None:
            raise InvalidGraph(conflict)
        try:  # the index's topological order finds cycles, and is kept for the placers (issue 22)
            self.index()
            acyclic = True
        except InvalidGraph:
            acyclic = False
        if not acyclic:
            cycle = nx.find_cycle(g)
            ops = [u for u, _ in cycle]
            raise InvalidGraph(f"graph {self.name!r} has a cycle through ops {ops}")
        if cluster is not None and not types_asked <= {d.type for d in cluster.devices}:
            types = {d.type for d in cluster.devices}
            for name, a in g.nodes(data=True):
                dt = a.get("device_type")
                if dt is not None and dt not in types:
                    raise InvalidGraph(
                        f"op {name!r} needs device type {dt} but cluster "
                        f"{getattr(cluster, 'name', '')!r} only has {sorted(types)}"
                    )
        return self

    # ----------------------------------------------------------------- (de)serialisation
    @gc_paused()
    def to_dict(self) -> dict[str, Any]:
        ops = [_op_record(name, a) for name, a in self.nx.nodes(data=True)]
        return {"format": FORMAT, "name": self.name, "ops": ops, "edges": list(self._edge_records())}

    def _edge_records(self) -> Iterator[dict[str, Any]]:
        for u, nbrs in self.nx._succ.items():  # the order of nx.edges()
            for v, d in nbrs.items():
                yield {"src": u, "dst": v, "bytes": d.get("bytes", 0), "control": bool(d.get("control", False))}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, validate: bool = True) -> OpGraph:
        return cls._from_dict(data, validate=validate, take=False)

    @classmethod
    @gc_paused()
    def _from_dict(cls, data: Mapping[str, Any], *, validate: bool, take: bool) -> OpGraph:
        """`from_dict`; with `take` the op records of `data` become the graph's attribute dicts (their "name"
        popped) instead of copies: for `load`, whose parsed JSON is its own (issue 22: at 10^6 ops a copy
        of every record costs several hundred MB)."""
        if not isinstance(data, Mapping):
            raise InvalidGraph("graph JSON must be an object with keys 'format', 'name', 'ops', 'edges'")
        fmt = data.get("format", FORMAT)
        if fmt != FORMAT:
            raise InvalidGraph(f"unsupported graph format {fmt!r}; expected {FORMAT!r}")
        for key in ("ops", "edges"):
            if not isinstance(data.get(key), list):
                raise InvalidGraph(f"graph JSON: key {key!r} must be a list")
        g = cls(str(data.get("name", "graph")))
        records: dict[str, dict[str, Any]] = {}
        for k, rec in enumerate(data["ops"]):
            if not isinstance(rec, Mapping) or "name" not in rec:
                raise InvalidGraph(f"graph JSON: ops[{k}] has no 'name'")
            rec = rec if take and type(rec) is dict else dict(rec)
            name = rec.pop("name")
            if not isinstance(name, str) or not name:
                raise InvalidGraph(f"graph JSON: ops[{k}] has an invalid name {name!r}")
            if name in records:
                raise InvalidGraph(f"duplicate op name {name!r} (ops[{k}])")
            for key in COST_KEYS:
                if key not in rec:
                    raise InvalidGraph(f"op {name!r}: missing {key}")
            rec.setdefault("type", "Op")
            rec.setdefault("phase", "forward")
            for key in ("colocation", "device_type", "forward_of"):
                rec.setdefault(key, None)
            if rec.get("compute_s_by_type") is None:
                rec.pop("compute_s_by_type", None)
            records[name] = rec
        g.add_ops(records.items())
        # each edge end becomes the op's own name object (issue 22: the JSON's strings, one per edge end, were
        # kept as the adjacency dicts' keys: about 120 bytes per edge, 400 MB at 10^6 ops)
        own_name = {name: name for name in records}
        del records
        g.add_edges(_edge_tuples(data["edges"], own_name))  # checked one by one, in the file's order, as add_edge did
        if validate:
            g.validate()
        return g

    def save(self, path: str | os.PathLike) -> None:
        """Write the graph JSON atomically (temporary file, then rename).

        The bytes are those of ``atomic_write_json(path, self.to_dict())``, written a slice of records at a
        time (`SAVE_CHUNK`), so that at 10^6 ops the whole list of records and the whole encoded text are
        never in memory together (issue 22).  A value that path refuses or writes through `json.dumps` (a
        non-finite number, a non-string key in an extra attribute) sends the whole graph through it, with
        its error.  O(V + E)."""
        path = os.fspath(path)
        try:
            _write_atomically(path, self._json_pieces())
        except _NotPlainJSON:
            atomic_write_json(path, self.to_dict())

    def _json_pieces(self) -> Iterator[bytes]:
        head = {"format": FORMAT, "name": self.name}
        yield _plain_dumps(head)[:-1] + b',"ops":['
        ops = (_op_record(name, a) for name, a in self.nx._node.items())
        yield from _joined_chunks(ops)
        yield b'],"edges":['
        yield from _joined_chunks(self._edge_records())
        yield b"]}"

    @classmethod
    def load(cls, path: str | os.PathLike, *, validate: bool = True) -> OpGraph:
        try:
            with gc_paused():  # millions of parsed objects, no cycles (`gc_paused`)
                data = _read_json(path)
        except FileNotFoundError:
            raise InvalidGraph(f"graph file {os.fspath(path)!r} does not exist") from None
        except UnicodeDecodeError as exc:
            raise InvalidGraph(
                f"graph file {os.fspath(path)!r} is not UTF-8 text (byte {exc.start}: {exc.reason}); "
                f"graph JSON must be UTF-8"
            ) from None
        except json.JSONDecodeError as exc:
            raise InvalidGraph(f"graph file {os.fspath(path)!r} is not valid JSON: {exc}") from None
        except OSError as exc:
            raise InvalidGraph(f"graph file {os.fspath(path)!r} cannot be read: {exc}") from None
        g = cls._from_dict(data, validate=False, take=True)
        del data  # the parsed JSON goes before the index is built (peak memory)
        if validate:
            g.validate()
        return g

    def __repr__(self) -> str:
        return f"OpGraph({self.name!r}, ops={len(self)}, edges={self.number_of_edges()})"


#: Records per piece of `OpGraph.save`.
SAVE_CHUNK = 20000


class _NotPlainJSON(Exception):
    """A value that `atomic_write_json` does not write with orjson's plain encoding."""


def _plain_dumps(obj: Any) -> bytes:
    """orjson's compact encoding of `obj`, as `atomic_write_json` writes it, or `_NotPlainJSON`."""
    data = _dumps(obj, None)
    if data is None:
        raise _NotPlainJSON
    return data


def _joined_chunks(records: Iterator[Mapping[str, Any]], indent: int | None = None) -> Iterator[bytes]:
    """The JSON list items of `records` as `atomic_write_json` encodes a list of them (compact, or two-space
    indentation when `indent` is given), separated, `SAVE_CHUNK` at a time, without the brackets; raises
    `_NotPlainJSON` where that encoding does not apply."""
    sep, cut = (b",", 1) if indent is None else (b",\n", 2)
    first = True
    while True:
        chunk = list(itertools.islice(records, SAVE_CHUNK))
        if not chunk:
            return
        with gc_paused():
            data = _dumps(chunk, indent)
        if data is None:
            raise _NotPlainJSON
        yield (data[cut:-cut] if first else sep + data[cut:-cut])
        first = False


def atomic_write_json_list(
    path: str | os.PathLike, make_records: Callable[[], Iterable[Mapping[str, Any]]], indent: int | None = None
) -> None:
    """Write the JSON list of the records ``make_records()`` yields, atomically: the bytes of
    ``atomic_write_json(path, list(make_records()), indent)``, encoded `SAVE_CHUNK` records at a time so that
    the whole list and its whole text are never in memory together (issue 22: timeline.json of 10^5-10^6
    ops).  A record that encoding refuses (a non-finite number, a non-string key) sends the whole list through
    `atomic_write_json`, with its error; `make_records` is then called a second time.  O(records)."""
    path = os.fspath(path)
    opening, closing = (b"[", b"]") if indent is None else (b"[\n", b"\n]")

    def pieces() -> Iterator[bytes]:
        started = False
        for piece in _joined_chunks(iter(make_records()), indent):
            if not started:
                yield opening
                started = True
            yield piece
        yield closing if started else b"[]"

    try:
        _write_atomically(path, pieces())
    except _NotPlainJSON:
        atomic_write_json(path, list(make_records()), indent)


def atomic_write_json_with_list(
    path: str | os.PathLike,
    key: str,
    make_records: Callable[[], Iterable[Mapping[str, Any]]],
    rest: Mapping[str, Any] | None = None,
) -> None:
    """Write the JSON object ``{key: [records...], **rest}`` atomically and compactly: the bytes of
    ``atomic_write_json(path, {key: list(make_records()), **rest})``, the records encoded `SAVE_CHUNK` at a time
    as in `atomic_write_json_list` (trace.json's events, issue 22).  Anything that encoding refuses sends the
    whole object through `atomic_write_json`, with its error.  O(records)."""
    path = os.fspath(path)
    rest = dict(rest or {})
    if key in rest:
        raise ValueError(f"{path}: key {key!r} is both the list's and in the rest of the object")

    def pieces() -> Iterator[bytes]:
        tail = _plain_dumps(rest)[1:-1] if rest else b""  # the rest's members, braces stripped
        yield b"{" + _plain_dumps(key) + b":["
        yield from _joined_chunks(iter(make_records()))
        yield b"]" + (b"," + tail if tail else b"") + b"}"

    try:
        _write_atomically(path, pieces())
    except _NotPlainJSON:
        atomic_write_json(path, {key: list(make_records()), **rest})


def _op_record(name: str, a: Mapping[str, Any]) -> dict[str, Any]:
    """An op's record in the graph JSON: the keys of `OP_KEYS` in that order, then the extra attributes."""
    rec: dict[str, Any] = {"name": name}
    for k in OP_KEYS[1:]:
        rec[k] = a.get(k)
    if a.get("compute_s_by_type"):
        rec["compute_s_by_type"] = dict(a["compute_s_by_type"])
    for k, v in a.items():  # keep extra attributes (e.g. "members", "module")
        if k not in rec:
            rec[k] = v
    return rec


def _edge_tuples(edges: list[Any], own_name: Mapping[str, str] | None = None) -> Iterator[tuple[str, str, float, bool]]:
    """The (src, dst, bytes, control) tuples of the graph JSON's edge records, each checked as `from_dict`
    documents (the ends are checked by `OpGraph.add_edges`).  An end that `own_name` holds is replaced by its
    value, the graph's own string for that name (the same name).  O(edges)."""
    inf = math.inf
    canonical = own_name.get if own_name is not None else None
    for k, e in enumerate(edges):
        if not isinstance(e, Mapping) or "src" not in e or "dst" not in e:
            raise InvalidGraph(f"graph JSON: edges[{k}] needs 'src' and 'dst'")
        if "bytes" not in e and not e.get("control"):
            raise InvalidGraph(f"edge {e['src']!r} -> {e['dst']!r}: missing bytes")
        b = e.get("bytes", 0)
        if not ((type(b) is float or type(b) is int) and 0 <= b < inf):
            _check_number(b, f"edge {e['src']!r} -> {e['dst']!r}: bytes")
        src, dst = e["src"], e["dst"]
        if canonical is not None and type(src) is str and type(dst) is str:
            src, dst = canonical(src, src), canonical(dst, dst)
        yield src, dst, b, bool(e.get("control", False))


def op_attrs(
    *,
    compute_s: float = 0.0,
    persistent_bytes: float = 0,
    temporary_bytes: float = 0,
    output_bytes: float = 0,
    type: str = "Op",
    phase: str = "forward",
    colocation: str | None = None,
    device_type: str | None = None,
    forward_of: str | None = None,
    compute_s_by_type: Mapping[str, float] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """The attribute dict `OpGraph.add_op` stores for an op with these arguments (for `OpGraph.add_ops`)."""
    attrs = {
        "type": type,
        "phase": phase,
        "compute_s": compute_s,
        "persistent_bytes": persistent_bytes,
        "temporary_bytes": temporary_bytes,
        "output_bytes": output_bytes,
        "colocation": colocation,
        "device_type": device_type,
        "forward_of": forward_of,
    }
    if compute_s_by_type:
        attrs["compute_s_by_type"] = dict(compute_s_by_type)
    if extra:
        attrs.update(extra)
    return attrs


def _float_interner() -> Callable[[Any], float]:
    """``float`` for the numbers of a graph's attributes, returning one float object per distinct integer value
    (issue 22: byte counts are mostly ints, and ``float`` of an int makes a new 24-byte object each time: at
    300,000 ops the index held 1.4 million of them, 33 MB, for about a hundred distinct values).  A float is
    returned as it is (as ``float`` does; ints are keyed apart from it, so -0.0 stays -0.0); other numbers
    are converted by ``float``.  The same values either way."""
    memo: dict[int, float] = {}

    def num(x: Any) -> float:
        if type(x) is float:
            return x
        if type(x) is int:
            v = memo.get(x)
            if v is None:
                v = memo[x] = float(x)
            return v
        return float(x)

    return num


def _raise_unknown_end(succ: Mapping[Any, Any], src: Any, dst: Any) -> NoReturn:
    """`OpGraph.add_edges`' error for an edge with an end that names no op: the source when it is unknown
    (an unhashable name, a list or an object, names no op), else the destination."""
    try:
        su = succ.get(src)
        known_dst = dst in succ
    except TypeError:
        su, known_dst = (None, False) if not isinstance(src, str) else (succ.get(src), False)
    end, role = (src, "source") if su is None else (dst, "destination")
    assert su is None or not known_dst, "both ends are known"
    raise InvalidGraph(f"edge {src!r} -> {dst!r}: unknown {role} op {end!r}")


def _clear_nx_cache(g: nx.DiGraph) -> None:
    """Drop networkx's cached views of `g` (networkx >= 3.3 caches backend conversions), as its own mutators
    do, after `g`'s dicts were filled directly."""
    cache = getattr(g, "__networkx_cache__", None)
    if cache:
        cache.clear()


def _read_json(path: str | os.PathLike) -> Any:
    """Parse a UTF-8 JSON file with orjson, and with the standard library what orjson refuses (the NaN and
    Infinity literals Python's json accepts, invalid JSON) so that errors and results stay `json.load`'s.
    A gzip file (its magic bytes, whatever its name) is decompressed first."""
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        import gzip

        raw = gzip.decompress(raw)
    text = raw.decode("utf-8")  # a UnicodeDecodeError names the byte, as json.load's would
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


def _kahn(out: list[list[int]], indeg: list[int] | None = None) -> list[int] | None:
    """Kahn's algorithm on ops numbered 0..n-1 in insertion order (`out[k]`: the successors of op k), ties
    broken by the smallest number: the order `_topological_order` gives, as numbers; None when there is a
    cycle.  O((V + E) log V)."""
    import heapq

    n = len(out)
    if indeg is None:
        indeg = [0] * n
        for vs in out:
            for v in vs:
                indeg[v] += 1
    else:
        indeg = list(indeg)
    heap = [k for k, d in enumerate(indeg) if d == 0]  # already a heap: ascending
    res: list[int] = []
    push, pop = heapq.heappush, heapq.heappop
    while heap:
        k = pop(heap)
        res.append(k)
        for m in out[k]:
            d = indeg[m] - 1
            indeg[m] = d
            if d == 0:
                push(heap, m)
    return res if len(res) == n else None


#: `OpGraph._build_index` builds the index from arrays (`OpGraph._build_index_arrays`) from this many ops on
INDEX_ARRAYS_MIN_OPS = 2000


def _ints(a: Any) -> Iterable[int]:
    """The Python ints of a 1-d int64 array, one at a time (a memoryview: no list of them all at once)."""
    return memoryview(a)


def _kahn_arrays(ptr: Any, dst: Any, n: int) -> Any:
    """`_kahn` on the CSR arrays of the successors (int64), compiled (`graph_kernel.kahn`) when numba is
    installed: the order as an int64 array, None when there is a cycle."""
    import numpy as np

    try:
        from .graph_kernel import kahn
    except ImportError:
        bounds = ptr.tolist()
        flat = dst.tolist()
        res = _kahn([flat[bounds[k] : bounds[k + 1]] for k in range(n)])
        return None if res is None else np.array(res, np.int64)
    order = kahn(ptr, dst, n)
    return order if len(order) == n else None


def _topological_order(g: nx.DiGraph) -> list[str]:
    """Kahn's algorithm, ties broken by node insertion order; raises InvalidGraph on a cycle. O(V + E)."""
    import heapq

    names = list(g.nodes)
    order_of = {n: i for i, n in enumerate(names)}
    indeg = [d for _, d in g.in_degree()]  # in insertion order, as `names`
    heap = [k for k, d in enumerate(indeg) if d == 0]  # insertion positions: the smallest goes first
    heapq.heapify(heap)
    out: list[str] = []
    succ = g.succ
    while heap:
        n = names[heapq.heappop(heap)]
        out.append(n)
        for m in succ[n]:
            k = order_of[m]
            indeg[k] -= 1
            if indeg[k] == 0:
                heapq.heappush(heap, k)
    if len(out) != len(names):
        cycle = nx.find_cycle(g.subgraph([names[k] for k, d in enumerate(indeg) if d > 0]))
        raise InvalidGraph(f"graph has a cycle through ops {[u for u, _ in cycle]}")
    return out


def non_finite_path(obj: Any, path: str = "") -> str | None:
    """The key path (e.g. ``predicted_step_s`` or ``ops[3].compute_s``) of the first NaN or infinite float in a
    JSON-like value, None when there is none. O(size of obj)."""
    if isinstance(obj, float):
        return None if math.isfinite(obj) else (path or "<value>")
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            p = non_finite_path(v, f"{path}.{k}" if path else str(k))
            if p is not None:
                return p
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            p = non_finite_path(v, f"{path}[{i}]")
            if p is not None:
                return p
    return None


def _all_finite(obj: Any) -> bool:
    """True when no float in the JSON-like value is NaN or infinite (False may also mean a sum of finite
    numbers overflowed: the caller then looks closer). O(size), a list of numbers at C speed, the scalars of a
    dict or list inline (issue 22: a 10^6-op graph's records)."""
    if isinstance(obj, float):
        return obj - obj == 0.0
    if isinstance(obj, Mapping):
        values: Iterable[Any] = obj.values()
    elif isinstance(obj, (list, tuple)):
        try:
            total = sum(obj)  # numbers only; NaN and infinities carry through a sum
        except TypeError:
            try:  # a list of number pairs (a memory timeline)
                total = sum(map(sum, obj))
            except TypeError:
                values = obj
            else:
                return not isinstance(total, float) or total - total == 0.0
        else:
            return not isinstance(total, float) or total - total == 0.0
    else:
        return True
    for v in values:
        t = type(v)
        if t is float:
            if v - v != 0.0:
                return False
        elif t is str or t is int or v is None or t is bool:
            continue
        elif not _all_finite(v):
            return False
    return True


def _dumps(obj: Any, indent: int | None) -> bytes | None:
    """orjson's encoding of `obj` (two-space indentation when `indent` is given), or None where it does not
    apply (a value it cannot encode, a non-finite number, which it would write as null)."""
    try:
        data = orjson.dumps(obj, option=orjson.OPT_INDENT_2 if indent is not None else 0)
    except TypeError:  # orjson.JSONEncodeError: e.g. a non-string key, which json.dumps converts
        return None
    if b"null" in data and not _all_finite(obj):
        return None
    return data


def atomic_write_json(path: str | os.PathLike, obj: Any, indent: int | None = None) -> None:
    """Write strict JSON (no NaN or Infinity, which are not JSON) to a temporary file in the same folder and
    rename it into place; a non-finite number raises ValueError naming the file and the key.

    Encoded by orjson (issue 22: faster on artifacts of 10^5-10^6 ops): the
    same keys and values as `json.dumps`, in the same order, with orjson's spacing (compact, or two-space
    indentation when `indent` is given) and shortest float forms (``1e-5`` for ``1e-05``); anything orjson
    cannot encode goes through `json.dumps` as before."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    data = _dumps(obj, indent)
    if data is None:
        try:
            data = json.dumps(obj, indent=indent, allow_nan=False).encode("utf-8")
        except ValueError:
            bad = non_finite_path(obj)
            if bad is None:
                raise
            raise ValueError(f"{path}: {bad} is not a finite number (NaN and Infinity are not JSON)") from None
    _write_atomically(path, (data,))


def _write_atomically(path: str, pieces: Iterable[bytes]) -> None:
    """Write the bytes of `pieces` to a temporary file in `path`'s folder and rename it into place; on any
    error (also one raised while the pieces are produced) the temporary file is removed."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            for piece in pieces:
                f.write(piece)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
