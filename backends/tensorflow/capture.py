"""Capture a TensorFlow training graph as an `OpGraph` (Baechi 4.1: "Graph Generator").

What one training step runs becomes the op graph: the transitive fan-in (data and control inputs) of the
update op and the loss. Initialisers, `IsInitialized` checks and the `init` op are left out because a step never
runs them (the runtime places them with their variables).

* Edges: one tensor edge per (producer, consumer) pair carrying the static size of the tensors that flow
  (a tensor read twice by one consumer counts once); control inputs become control edges.
* Sizes: static shapes times the dtype size; an unknown first dimension is the batch size, any other
  unknown dimension counts as 1 (logged). Resource handles and variants carry no bytes.
* Memory (static estimate, replaced by measurements in `profile`): variables (`VarHandleOp`: shape x dtype)
  and constants are persistent memory; every other op's output is output memory, except ops that forward
  their input buffer (Identity, Reshape, ReadVariableOp, ...), which allocate nothing.
* Colocation (Baechi 3.1, thesis 6.2): the ``_class`` attribute's ``loc:@<op>`` entries, plus TensorFlow's
  implicit rule that an op reading a resource handle runs where the resource lives, are merged with a
  union-find; the group's root (the op the ``loc:@`` entries name, the variable when there is one) is the
  `colocation` value. Groups with a single captured op get no colocation.
* Phases: ops under ``gradients/`` are backward; the optimizer's scope (``GradientDescent/``, ``RMSProp/``,
  ...) and its slot variables are update; every other op of the step is forward. (`other` is not produced:
  the step has no op outside these three.)
* `forward_of`: a gradient op ``gradients/<forward op>_grad/...`` belongs to ``<forward op>`` (the longest
  such prefix naming a captured op); a gradient op outside any ``_grad`` scope (e.g. the ``AddN`` that sums a
  tensor's gradients) takes the forward op of its consumers when they all agree.
* Device types: an op with no GPU kernel registered gets ``device_type: "CPU"``. When this TensorFlow build
  has no GPU kernels at all (tensorflow-cpu), the registry cannot tell, and only ops that handle strings or
  are host-only by nature (py_func, save/restore, print) are marked CPU.

Complexity: O(V + E) over the TensorFlow graph, plus one kernel-registry lookup per distinct op type.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Iterable
from typing import Any

import tensorflow as tf

from algorithms.graph import OpGraph

from .models import TFModel

log = logging.getLogger(__name__)

#: Op types whose output shares its input's buffer (no new allocation).
FORWARDING_TYPES = frozenset(
    {
        "Identity",
        "IdentityN",
        "Reshape",
        "ReadVariableOp",
        "Squeeze",
        "ExpandDims",
        "StopGradient",
        "NoOp",
        "Snapshot",
        "PreventGradient",
    }
)
#: Op types with persistent buffers.
PERSISTENT_TYPES = frozenset({"Const", "VarHandleOp", "VariableV2", "Variable"})
#: Host-only op types (no device kernel in any build).
HOST_ONLY_TYPES = frozenset(
    {
        "PyFunc",
        "PyFuncStateless",
        "EagerPyFunc",
        "SaveV2",
        "RestoreV2",
        "MergeV2Checkpoints",
        "Print",
        "PrintV2",
        "StringFormat",
        "ShardedFilename",
    }
)
_GRAD_ROOT = re.compile(r"^gradients(_\d+)?/")


def tensor_bytes(t: tf.Tensor, batch_size: int) -> int:
    """Static size of a tensor in bytes; unknown first dim = batch, other unknown dims = 1. O(rank)."""
    dt = t.dtype.base_dtype
    if dt in (tf.resource, tf.variant, tf.string):
        return 0
    shape = t.shape
    if shape.rank is None:
        log.debug("tensor %s has unknown rank; counted as 0 bytes", t.name)
        return 0
    n = 1
    for k, d in enumerate(shape.as_list()):
        if d is None:
            d = batch_size if k == 0 else 1
        n *= d
    return int(n * dt.size)


def variable_bytes(op: tf.Operation) -> int:
    """Bytes held by a variable op, from its `shape` and `dtype` attributes."""
    try:
        shape = tf.TensorShape(op.get_attr("shape"))
        dtype = tf.as_dtype(op.get_attr("dtype"))
    except ValueError:
        return 0
    if not shape.is_fully_defined():
        return 0
    n = 1
    for d in shape.as_list():
        n *= d
    return int(n * dtype.size)


@functools.cache
def _gpu_kernels_built() -> bool:
    from tensorflow.python.framework import kernels

    return any(k.device_type == "GPU" for k in kernels.get_registered_kernels_for_op("MatMul").kernel)


@functools.cache
def _has_gpu_kernel(op_type: str) -> bool:
    from tensorflow.python.framework import kernels

    try:
        return any(k.device_type == "GPU" for k in kernels.get_registered_kernels_for_op(op_type).kernel)
    except Exception:  # an op type without any registered kernel
        return False


def cpu_only(op: tf.Operation) -> bool:
    """Whether `op` cannot run on a GPU (see the module docstring for how a CPU-only build decides)."""
    if op.type in HOST_ONLY_TYPES:
        return True
    if _gpu_kernels_built():
        return op.type not in ("NoOp",) and not _has_gpu_kernel(op.type)
    return any(t.dtype.base_dtype == tf.string for t in list(op.outputs) + list(op.inputs))


def fan_in(roots: Iterable[tf.Operation]) -> set[tf.Operation]:
    """Every op the given ops need (data and control inputs, transitively). O(V + E)."""
    seen: set[tf.Operation] = set()
    stack = list(roots)
    while stack:
        op = stack.pop()
        if op in seen:
            continue
        seen.add(op)
        stack.extend(t.op for t in op.inputs)
        stack.extend(op.control_inputs)
    return seen


def colocation_roots(graph: tf.Graph) -> dict[str, str]:
    """op name -> colocation root name for every op of `graph` in a group of two or more ops.

    Groups join an op with every op its ``_class`` attribute names (``loc:@name``) and an op reading a
    resource tensor with the resource's producer. The root is the first variable op of the group named by a
    ``loc:@`` entry, else the first named op, else the group's first op, in graph order. O(V + E) with a
    union-find.
    """
    ops = graph.get_operations()
    order = {op.name: k for k, op in enumerate(ops)}
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(a: str, b: str) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            if order.get(ra, 1 << 60) <= order.get(rb, 1 << 60):
                parent[rb] = ra
            else:
                parent[ra] = rb

    named: set[str] = set()
    for op in ops:
        try:
            locs = op.get_attr("_class")
        except ValueError:
            locs = []
        for loc in locs:
            s = loc.decode() if isinstance(loc, bytes) else str(loc)
            if s.startswith("loc:@"):
                target = s[5:]
                named.add(target)
                union(op.name, target)
        for t in op.inputs:
            if t.dtype.base_dtype == tf.resource:
                union(op.name, t.op.name)
    members: dict[str, list[str]] = {}
    for name in list(parent):
        members.setdefault(find(name), []).append(name)
    out: dict[str, str] = {}
    by_name = {op.name: op for op in ops}
    for group in members.values():
        if len(group) < 2:
            continue
        group.sort(key=lambda n: order.get(n, 1 << 60))
        targets = [n for n in group if n in named]
        variables = [n for n in targets if n in by_name and by_name[n].type in PERSISTENT_TYPES - {"Const"}]
        root = (variables or targets or group)[0]
        for n in group:
            out[n] = root
    return out


def _forward_of(name: str, known: set[str]) -> str | None:
    m = _GRAD_ROOT.match(name)
    if not m:
        return None
    parts = name[m.end() :].split("/")
    best = None
    for k, part in enumerate(parts):
        if part.endswith("_grad"):
            cand = "/".join(parts[:k] + [part[:-5]])
            if cand in known:
                best = cand
    return best


_VARIABLE_TYPES = ("VarHandleOp", "VariableV2", "Variable")


def _mark_params(ops: list[tf.Operation], names: set[str], nxg: Any) -> None:
    """`param`, as the PyTorch capture writes it: a model variable (a forward-phase variable op) names itself,
    and an update op names the variable it writes (input 0 of TensorFlow's ``ResourceApply*`` / ``Apply*`` and
    ``AssignSub*`` ops), so that Baechi's forward-only placement folds each update into its variable (3.3).
    The optimizer's slot variables (update phase) get none. O(V)."""
    for op in ops:
        if op.type in _VARIABLE_TYPES and nxg.nodes[op.name]["phase"] == "forward":
            nxg.nodes[op.name]["param"] = op.name
    for op in ops:
        if nxg.nodes[op.name]["phase"] != "update" or not op.inputs:
            continue
        src = op.inputs[0].op
        if src.type in _VARIABLE_TYPES and src.name in names and nxg.nodes[src.name]["phase"] == "forward":
            nxg.nodes[op.name]["param"] = src.name


def capture(model: TFModel) -> OpGraph:
    """The training step of `model` as an `OpGraph` (see the module docstring). O(V + E)."""
    g = model.graph
    needed = fan_in(model.fetch_ops)
    ops = [op for op in g.get_operations() if op in needed]
    names = {op.name for op in ops}
    roots = colocation_roots(g)
    group_size: dict[str, int] = {}
    for op in ops:
        r = roots.get(op.name)
        if r is not None:
            group_size[r] = group_size.get(r, 0) + 1
    batch = model.batch_size
    opt_prefix = model.optimizer_scope + "/"
    graph = OpGraph(f"{model.name}-b{batch}")
    n_unknown = 0
    for op in ops:
        name = op.name
        if _GRAD_ROOT.match(name):
            phase = "backward"
        elif name == model.optimizer_scope or name.startswith(opt_prefix) or name in model.optimizer_vars:
            phase = "update"
        else:
            phase = "forward"
        persistent = output = 0
        if op.type in ("VarHandleOp", "VariableV2", "Variable"):
            persistent = variable_bytes(op)
        elif op.type == "Const":
            persistent = sum(tensor_bytes(t, batch) for t in op.outputs)
        elif op.type not in FORWARDING_TYPES:
            output = sum(tensor_bytes(t, batch) for t in op.outputs)
        for t in op.outputs:
            if t.shape.rank is not None and None in t.shape.as_list()[1:]:
                n_unknown += 1
        root = roots.get(name)
        colocation = root if root is not None and group_size.get(root, 0) >= 2 else None
        graph.add_op(
            name,
            type=op.type,
            phase=phase,
            compute_s=0.0,
            persistent_bytes=persistent,
            temporary_bytes=0,
            output_bytes=output,
            colocation=colocation,
            device_type="CPU" if cpu_only(op) else None,
            forward_of=_forward_of(name, names) if phase == "backward" else None,
        )
    for op in ops:
        seen_tensors: set[str] = set()
        for t in op.inputs:
            if t.name in seen_tensors:
                continue
            seen_tensors.add(t.name)
            graph.add_edge(t.op.name, op.name, bytes=tensor_bytes(t, batch))
        for c in op.control_inputs:
            graph.add_edge(c.name, op.name, control=True)
    nxg = graph.nx
    _mark_params(ops, names, nxg)
    # gradient ops outside a "_grad" scope (gradient sums): follow their consumers' forward op
    for name in reversed(graph.topological_order()):
        a = nxg.nodes[name]
        if a["phase"] != "backward" or a["forward_of"] is not None:
            continue
        fws = {nxg.nodes[s]["forward_of"] for s in nxg.successors(name)}
        if len(fws) == 1:
            (fw,) = fws
            if fw is not None:
                a["forward_of"] = fw
    graph.invalidate()
    if n_unknown:
        log.info("%s: %d tensors with unknown non-batch dimensions (counted as 1)", graph.name, n_unknown)
    log.info(
        "captured %s: %d ops, %d edges, %d colocation groups",
        graph.name,
        len(graph),
        graph.number_of_edges(),
        len(graph.colocation_groups()),
    )
    return graph.validate()
