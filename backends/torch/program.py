"""The captured training step as an executable program: `Program` (traced nodes, their grouping into ops, the
step's flat interface) and running it op by op on one device (`run_program`, the single-device reference
and the profiler's timer), with the helpers the runtimes share (`resolve`, `tensors_of`, `value_nbytes`).

Produced by `backends.torch.capture.trace_program`; see there for how the nodes are traced and grouped.
"""

from __future__ import annotations

import operator
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx as fx

from .models.common import TorchModel


class Ref:
    """A reference to the value of traced node `nid` inside an argument template."""

    __slots__ = ("nid",)

    def __init__(self, nid: int):
        self.nid = nid

    def __repr__(self) -> str:
        return f"Ref({self.nid})"


@dataclass
class NodeRec:
    """One traced node, compiled for execution. `kind`: placeholder | const | call."""

    nid: int
    name: str
    kind: str
    target: Any
    args: Any
    kwargs: Any
    inputs: list[int]
    index: int = -1  # placeholder position or -1
    tag: dict[str, Any] = field(default_factory=dict)
    # measured on a real execution (bytes)
    nbytes: float = 0.0  # tensor bytes of the value (what a transfer moves)
    alloc_bytes: float = 0.0  # bytes of storage newly allocated (views allocate nothing)


@dataclass
class Program:
    """A captured training step: traced nodes, their grouping into ops, and the step's interface.

    Flat inputs: ``params (P) + states (P * n_state) + inputs (I)``; outputs: ``loss, grads (P),
    new params (P), new states (P * n_state)``.
    """

    model_name: str
    batch_size: int
    granularity: str
    nodes: list[NodeRec]
    op_nodes: dict[str, list[int]]  # op name -> node ids in execution order
    op_of: dict[int, str]  # node id -> op (consts have none)
    op_attrs: dict[str, dict[str, Any]]  # op name -> OpGraph attributes
    param_names: list[str]
    n_state: int
    n_inputs: int
    outputs: list[int]
    gm: fx.GraphModule = field(repr=False, default=None)
    consts: dict[int, torch.Tensor] = field(default_factory=dict, repr=False)
    #: node id -> the call node whose storage its value holds, for every call node that allocates nothing and
    #: whose tensors all live in one earlier call node's storage (views, ``detach``, ``_unsafe_view``, a tuple's
    #: item that lies in another node's storage): that storage is freed only when the owner and all of these are
    #: dead (`capture._measure_sizes`; `StepAnalysis.release_bytes`). A tuple's item that its producer allocated
    #: is a storage of its own (its node's ``alloc_bytes``), not an alias.
    alias_owner: dict[int, int] = field(default_factory=dict, repr=False)
    _alloc_when_run: list[float] | None = field(default=None, repr=False, compare=False)

    @property
    def n_params(self) -> int:
        return len(self.param_names)

    def flat_inputs(
        self,
        model: TorchModel,
        params: Sequence[torch.Tensor] | None = None,
        states: Sequence[torch.Tensor] | None = None,
        batch: Sequence[torch.Tensor] | None = None,
    ) -> list[torch.Tensor]:
        """The flat input list of one step from the model's current parameters (fresh optimizer state)."""
        if params is None:
            params = [p.detach() for p in model.module.parameters()]
        if states is None:
            states = initial_states(model, params)
        if batch is None:
            batch = model.make_batch(self.batch_size)
        return [*params, *states, *batch]

    def split_outputs(self, outs: Sequence[Any]) -> dict[str, Any]:
        """{"loss", "grads", "params", "states"} from the flat output list."""
        P = self.n_params
        return {
            "loss": outs[0],
            "grads": list(outs[1 : 1 + P]),
            "params": list(outs[1 + P : 1 + 2 * P]),
            "states": list(outs[1 + 2 * P :]),
        }

    def node_ids(self, op: str) -> list[int]:
        return self.op_nodes[op]

    def alloc_when_run(self) -> list[float]:
        """Bytes each node allocates when it runs, by node id: its ``alloc_bytes``, except that a tuple's items
        (``operator.getitem`` nodes that own their storage, `capture._measure_sizes`) are allocated by their
        producer when it runs, and the item nodes allocate nothing (each still frees its item's bytes). The
        runtimes' live-memory accounting counts this way: an item made by a node that also frees its inputs
        is then live before they go, as in the op graph. O(N), cached."""
        if self._alloc_when_run is None:
            run = [r.alloc_bytes for r in self.nodes]
            for r in self.nodes:
                if r.kind == "call" and r.target is operator.getitem and r.alloc_bytes:
                    run[r.inputs[0]] += r.alloc_bytes
                    run[r.nid] = 0.0
            self._alloc_when_run = run
        return self._alloc_when_run


# ---------------------------------------------------------------------------- optimizer state
def n_state_of(model: TorchModel) -> int:
    return 1 if model.optimizer == "rmsprop" else 0


def initial_states(model: TorchModel, params: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Fresh optimizer state (RMSProp's square averages start at zero; SGD has none)."""
    return [torch.zeros_like(p) for p in params] if model.optimizer == "rmsprop" else []


# ---------------------------------------------------------------------------- execution helpers
def resolve(a: Any, get: Callable[[int], Any]) -> Any:
    """Replace every `Ref` in an argument template by `get(nid)`."""
    if isinstance(a, Ref):
        return get(a.nid)
    if isinstance(a, list):
        return [resolve(x, get) for x in a]
    if isinstance(a, tuple):
        return tuple(resolve(x, get) for x in a)
    if isinstance(a, dict):
        return {k: resolve(v, get) for k, v in a.items()}
    return a


def tensors_of(v: Any) -> list[torch.Tensor]:
    if isinstance(v, torch.Tensor):
        return [v]
    if isinstance(v, (list, tuple)):
        return [t for x in v for t in tensors_of(x)]
    return []


def value_nbytes(v: Any) -> float:
    """Bytes a transfer of this value moves (numel x element size of every tensor in it)."""
    return float(sum(t.numel() * t.element_size() for t in tensors_of(v)))


def has_device_kwarg(r: Any) -> bool:
    """Whether node `r` is a call traced with a `device` argument (a factory op, ``aten.zeros(..., device=cpu)``)."""
    return r.kind == "call" and isinstance(r.kwargs, dict) and isinstance(r.kwargs.get("device"), torch.device)


def device_kwargs(r: Any, device: torch.device) -> dict[str, Any] | None:
    """Node `r`'s keyword arguments with the `device` it was traced with replaced by `device` (to run it on
    another device), or None where it has no such argument (`has_device_kwarg`)."""
    return {**r.kwargs, "device": device} if has_device_kwarg(r) else None


def run_program(
    prog: Program,
    flat: Sequence[torch.Tensor],
    *,
    on_op: Callable[[str, float], None] | None = None,
    order: Sequence[str] | None = None,
    free: bool = True,
) -> list[Any]:
    """Execute the captured step op by op on one device (the flat inputs' device); return the flat outputs.

    `order` is an op order (default: the capture order, which is topological); tensors are freed after their
    last use. `on_op(op, seconds)` is called after each op when given (the profiler times ops with it).
    O(N + U) Python work plus the ops' own cost.
    """
    import time

    env: dict[int, Any] = {}
    for r in prog.nodes:
        if r.kind == "placeholder":
            env[r.nid] = flat[r.index]
    dev = flat[0].device if flat else torch.device("cpu")
    for nid, c in prog.consts.items():
        env[nid] = c.to(dev)
    order = list(order) if order is not None else list(prog.op_nodes)
    keep = set(prog.outputs)
    last: dict[int, int] = {}
    if free:
        step_of: dict[int, int] = {}
        k = 0
        for op in order:
            for nid in prog.op_nodes[op]:
                step_of[nid] = k
                k += 1
        for r in prog.nodes:
            if r.kind == "call":
                for i in r.inputs:
                    last[i] = max(last.get(i, -1), step_of[r.nid])
    frees: dict[int, list[int]] = defaultdict(list)
    for i, k in last.items():
        if i not in keep and prog.nodes[i].kind == "call":
            frees[k].append(i)
    # a factory op captured with a device (``aten.zeros(..., device=cpu)``) runs on the inputs' device, as
    # `analysis.PlacedExecutor` does for a placed op
    moved = {r.nid: kw for r in prog.nodes if (kw := device_kwargs(r, dev)) is not None}
    k = 0
    get = env.__getitem__
    for op in order:
        t0 = time.perf_counter() if on_op else 0.0
        for nid in prog.op_nodes[op]:
            r = prog.nodes[nid]
            if r.kind == "call":
                env[nid] = r.target(*resolve(r.args, get), **resolve(moved.get(nid, r.kwargs), get))
            for i in frees.get(k, ()):
                env.pop(i, None)
            k += 1
        if on_op:
            on_op(op, time.perf_counter() - t0)
    return [env[i] for i in prog.outputs]
