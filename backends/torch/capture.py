"""Capture a PyTorch training step as an `OpGraph`, and keep it executable op by op.

How
---
The training step (forward, loss, backward with ``torch.autograd.grad``, functional optimizer update) is one
Python function of (parameters, optimizer state, inputs). ``torch.fx.experimental.proxy_tensor.make_fx``
traces it into a graph of aten ops (real tensors, so the trace also checks that the step runs). Each traced
node is tagged through ``torch.fx.traceback``'s preserved node metadata (``node.meta["custom"]``):

* forward nodes with the module scope that produced them, maintained by forward pre/post hooks on every
  submodule (the module path with "/" separators, e.g. ``enc/l0``, plus the call number of that module, since
  unrolled LSTM cells and attention are called once per time step);
* backward nodes with the autograd sequence number of the forward node whose gradient they compute (pre-hooks
  on the autograd graph's nodes, the mechanism AOTAutograd uses to pair forward and backward nodes); the
  forward node that created autograd node k is the first forward fx node whose ``meta["seq_nr"]`` is k;
* update nodes with the parameter they update.

Grouping (the granularity knob)
-------------------------------
``operator``: one op per aten node (``operator.getitem`` nodes join their producer). ``module``: one op per
maximal run of consecutive traced nodes sharing a key (forward: scope and call; backward: the forward op they
differentiate; update: the parameter). A run of consecutive nodes of a topological order contracts without
creating a cycle, so both groupings give DAGs. Parameters (with their optimizer state) become ``Variable`` ops
holding persistent memory, colocated with their update ops (TensorFlow's colocation of a variable and its
apply op); every model input becomes an ``Input`` op.

Names: forward ops ``<scope>[/c<call>]/<aten>`` (operator) or ``<scope>[/c<call>]`` (module); backward ops
``gradients/<name of their forward op>``; update ops ``<param path>/update[/<aten>]``; variables
``<param path>`` (e.g. ``enc/l0/weight_ih``); inputs ``data/in<k>``. Duplicates get ``_<k>`` suffixes.

Cost: tracing runs one real training step; building the graph is O(N + U) for N traced nodes and U uses.
The executable form of a capture (`Program`, `run_program` and the helpers the runtimes share) is in
`program.py`.
"""

from __future__ import annotations

import logging
import operator
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch
import torch.fx as fx
import torch.fx.traceback as fx_traceback
from torch.fx.experimental.proxy_tensor import make_fx

from algorithms.errors import ConfigError, InvalidGraph
from algorithms.graph import OpGraph

from .models.common import TorchModel
from .program import NodeRec, Program, Ref, initial_states, n_state_of, resolve, tensors_of, value_nbytes

log = logging.getLogger(__name__)

GRANULARITIES = ("operator", "module")
ROOT_SCOPE = "main"


# ---------------------------------------------------------------------------- tracing
def _set_tag(tag: dict[str, Any]) -> None:
    fx_traceback.current_meta["custom"] = dict(tag)


@contextmanager
def _scope_hooks(module: torch.nn.Module) -> Iterator[None]:
    """Forward pre/post hooks that keep the current module scope (path + call number) in the trace tag."""
    stack: list[tuple[str, int]] = []
    calls: dict[str, int] = defaultdict(int)
    handles = []

    def tag_top():
        scope, call = stack[-1] if stack else (ROOT_SCOPE, 0)
        _set_tag({"phase": "forward", "scope": scope, "call": call})

    for path, mod in module.named_modules():
        scope = path.replace(".", "/") if path else ROOT_SCOPE

        def pre(mod, args, scope=scope):
            stack.append((scope, calls[scope]))
            calls[scope] += 1
            tag_top()

        def post(mod, args, out):
            stack.pop()
            tag_top()

        handles.append(mod.register_forward_pre_hook(pre))
        handles.append(mod.register_forward_hook(post))
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def _tag_backward(root: Any) -> None:
    """Pre-hooks on every autograd node reachable from `root` that tag the nodes its backward creates."""
    seen, todo = set(), [root]
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        seq = node._sequence_nr()

        def prehook(grad_outputs, seq=seq):
            _set_tag({"phase": "backward", "fwd_seq": seq})

        node.register_prehook(prehook)
        todo.extend(fn for fn, _ in node.next_functions)


def _step_function(model: TorchModel, names: list[str], n_state: int) -> Callable[..., tuple]:
    """The training step as a pure function of the flat inputs."""
    module = model.module
    P = len(names)
    lr, alpha, eps = model.lr, model.rms_alpha, model.rms_eps

    def step(*flat):
        params = flat[:P]
        states = flat[P : P + P * n_state]
        inputs = flat[P + P * n_state :]
        leaves = {}
        for i, (n, p) in enumerate(zip(names, params)):
            _set_tag({"phase": "forward", "var": i})
            leaves[n] = p.detach().requires_grad_(True)
        _set_tag({"phase": "forward", "scope": ROOT_SCOPE, "call": 0})
        loss = torch.func.functional_call(module, leaves, tuple(inputs))
        _tag_backward(loss.grad_fn)
        _set_tag({"phase": "backward", "fwd_seq": loss.grad_fn._sequence_nr()})
        grads = torch.autograd.grad(loss, list(leaves.values()), torch.ones_like(loss))
        new_params, new_states = [], []
        with torch.no_grad():
            for i, (p, g) in enumerate(zip(params, grads)):
                _set_tag({"phase": "update", "param": i})
                if n_state:
                    sq = states[i] * alpha + (1 - alpha) * g * g
                    new_params.append(p - lr * g / (sq.sqrt() + eps))
                    new_states.append(sq)
                else:
                    new_params.append(p - lr * g)
        _set_tag({"phase": "forward", "scope": "loss", "call": 0})
        return (loss.detach(), *grads, *new_params, *new_states)

    return step


def trace_program(
    model: TorchModel, granularity: str = "operator", batch_size: int | None = None, device: torch.device | str = "cpu"
) -> Program:
    """Trace the model's training step at `batch_size` and group it into ops. Cached on the model handle."""
    if granularity not in GRANULARITIES:
        raise ConfigError(f"backend.granularity {granularity!r} is not one of {GRANULARITIES}")
    b = int(batch_size or model.batch_size)
    key = ("program", granularity, b, str(device))
    if key in model.cache:
        return model.cache[key]
    names = [n for n, _ in model.module.named_parameters()]
    n_state = n_state_of(model)
    dev = torch.device(device)
    module = model.module.to(dev)
    params = [p.detach().clone() for p in module.parameters()]
    flat = [*params, *initial_states(model, params), *(t.to(dev) for t in model.make_batch(b))]
    step = _step_function(model, names, n_state)
    saved_meta = dict(fx_traceback.current_meta)
    try:
        with fx_traceback.preserve_node_meta(), _scope_hooks(module):
            gm = make_fx(step)(*flat)
    finally:
        fx_traceback.current_meta.clear()
        fx_traceback.current_meta.update(saved_meta)
    prog = _compile(gm, model, names, n_state, len(flat) - len(params) * (1 + n_state), b, granularity)
    _measure_sizes(prog, flat)
    _join_aliases(prog)
    _split_items(prog)
    model.cache[key] = prog
    log.info(
        "captured %s at batch %d: %d traced nodes, %d ops (%s granularity)",
        model.name,
        b,
        len(prog.nodes),
        len(prog.op_nodes),
        granularity,
    )
    return prog


def program_matching(
    model: TorchModel, graph: Any, granularity: str, batch_size: int | None, devices: Sequence[str]
) -> Program:
    """The traced step whose ops are `graph`'s: traced on the first of `devices` that gives them (an op's name
    can depend on the device it was captured on: a batch norm is ``cudnn_batch_norm`` on a GPU and
    ``native_batch_norm`` on the CPU). A GPU worker can run a CPU capture (its ops exist on CUDA too), a CPU
    worker cannot run a GPU one, so the runtimes pass ``["cuda", "cpu"]`` and ``["cpu"]``. Raises InvalidGraph
    naming the ops that differ. Cost: one trace per device tried (cached on the model)."""
    tried = []
    for dev in devices:
        prog = trace_program(model, granularity, batch_size, device=dev)
        extra = [op for op in graph.ops if op not in prog.op_nodes]
        if not extra and len(graph) == len(prog.op_nodes):
            return prog
        tried.append(f"on {dev}: e.g. {extra[:3] or sorted(set(prog.op_nodes) - set(graph.ops))[:3]}")
    hint = "" if "cuda" in devices else " (a graph captured on a GPU needs backend.device=cpu for CPU workers)"
    raise InvalidGraph(
        f"graph {graph.name!r} does not match the {granularity}-level capture of {model.name!r} at batch "
        f"{int(batch_size or model.batch_size)} ({'; '.join(tried)}); capture and run with the same backend "
        f"settings{hint}"
    )


# ---------------------------------------------------------------------------- grouping
def _aten_name(target: Any) -> str:
    if target is operator.getitem:
        return "getitem"
    name = getattr(target, "__name__", None) or str(target)
    return name.split(".")[0]


def _compile(
    gm: fx.GraphModule,
    model: TorchModel,
    names: list[str],
    n_state: int,
    n_inputs: int,
    batch_size: int,
    granularity: str,
) -> Program:
    P = len(names)
    nid_of: dict[fx.Node, int] = {}
    recs: list[NodeRec] = []
    outputs: list[int] = []
    consts: dict[int, torch.Tensor] = {}
    n_ph = 0

    def template(a):
        if isinstance(a, fx.Node):
            return Ref(nid_of[a])
        if isinstance(a, (list, tuple)):
            t = [template(x) for x in a]
            return t if isinstance(a, list) else tuple(t)
        if isinstance(a, dict):
            return {k: template(v) for k, v in a.items()}
        return a

    for node in gm.graph.nodes:
        if node.op == "output":
            outputs = [nid_of[a] for a in node.args[0]]
            continue
        nid = len(recs)
        inputs = list(dict.fromkeys(nid_of[a] for a in node.all_input_nodes))
        tag = dict(node.meta.get("custom") or {})
        if node.op == "placeholder":
            rec = NodeRec(nid, node.name, "placeholder", None, (), {}, [], index=n_ph, tag=tag)
            n_ph += 1
        elif node.op == "get_attr":
            rec = NodeRec(nid, node.name, "const", None, (), {}, [], tag=tag)
            consts[nid] = getattr(gm, node.target)
        elif node.op == "call_function":
            rec = NodeRec(
                nid, node.name, "call", node.target, template(node.args), template(node.kwargs), inputs, tag=tag
            )
            rec.tag["seq_nr"] = node.meta.get("seq_nr")
        else:
            raise InvalidGraph(
                f"captured step of {model.name!r} has an fx node of kind {node.op!r} "
                f"({node.name}); only placeholders, constants and functions are supported"
            )
        nid_of[node] = nid
        recs.append(rec)

    param_scope = [n.rsplit(".", 1) for n in names]
    param_path = [n.replace(".", "/") for n in names]
    # forward node that created each autograd sequence number
    creator: dict[int, int] = {}
    for r in recs:
        if r.kind == "call" and r.tag.get("phase") == "forward" and r.tag.get("seq_nr") is not None:
            creator.setdefault(r.tag["seq_nr"], r.nid)

    calls_per_scope: dict[str, set[int]] = defaultdict(set)
    for r in recs:
        if r.tag.get("phase") == "forward" and "scope" in r.tag:
            calls_per_scope[r.tag["scope"]].add(r.tag.get("call", 0))

    def fwd_base(r: NodeRec) -> str:
        scope = r.tag.get("scope", ROOT_SCOPE)
        many = len(calls_per_scope.get(scope, ())) > 1
        return f"{scope}/c{r.tag.get('call', 0)}" if many else scope

    op_nodes: dict[str, list[int]] = {}
    op_of: dict[int, str] = {}
    op_attrs: dict[str, dict[str, Any]] = {}
    used_names: dict[str, int] = {}

    def fresh(base: str) -> str:
        k = used_names.get(base, 0)
        used_names[base] = k + 1
        return base if k == 0 else f"{base}_{k}"

    def new_op(base: str, attrs: dict[str, Any]) -> str:
        name = fresh(base)
        op_nodes[name] = []
        op_attrs[name] = attrs
        return name

    # variables and inputs
    for r in recs:
        if r.kind != "placeholder":
            continue
        k = r.index
        if k < P:
            name = new_op(
                param_path[k],
                dict(
                    type="Variable",
                    phase="forward",
                    colocation=f"var:{names[k]}",
                    module=param_scope[k][0].replace(".", "/") if len(param_scope[k]) > 1 else ROOT_SCOPE,
                    param=names[k],
                ),
            )
            op_nodes[name].append(r.nid)
            op_of[r.nid] = name
        elif k < P + P * n_state:
            i = (k - P) % P
            owner = op_of[next(x.nid for x in recs if x.kind == "placeholder" and x.index == i)]
            op_nodes[owner].append(r.nid)
            op_of[r.nid] = owner
        else:
            name = new_op(f"data/in{k - P - P * n_state}", dict(type="Input", phase="other"))
            op_nodes[name].append(r.nid)
            op_of[r.nid] = name

    update_type = "ApplyRMSProp" if n_state else "ApplySGD"
    fwd_op_of_node: dict[int, str] = {}
    prev_key: Any = None
    cur_op: str | None = None
    for r in recs:
        if r.kind != "call":
            continue
        if r.target is operator.getitem and r.inputs and r.inputs[0] in op_of:
            src = op_of[r.inputs[0]]
            op_nodes[src].append(r.nid)
            op_of[r.nid] = src
            if r.inputs[0] in fwd_op_of_node:
                fwd_op_of_node[r.nid] = fwd_op_of_node[r.inputs[0]]
            continue
        if "var" in r.tag:  # the detach that makes a parameter a leaf belongs to its Variable op
            owner = op_of[next(x.nid for x in recs if x.kind == "placeholder" and x.index == r.tag["var"])]
            op_nodes[owner].append(r.nid)
            op_of[r.nid] = owner
            continue
        phase = r.tag.get("phase", "forward")
        aten = _aten_name(r.target)
        if phase == "update":
            i = int(r.tag["param"])
            key = ("update", i)
            attrs = dict(type=update_type, phase="update", colocation=f"var:{names[i]}", param=names[i])
            base = f"{param_path[i]}/update"
        elif phase == "backward":
            fw = creator.get(r.tag.get("fwd_seq"))
            fw_op = fwd_op_of_node.get(fw) if fw is not None else None
            key = ("backward", fw_op)
            base = f"gradients/{fw_op}" if fw_op else f"gradients/{ROOT_SCOPE}"
            attrs = dict(type="Gradient", phase="backward", forward_of=fw_op)
        else:
            key = ("forward", r.tag.get("scope", ROOT_SCOPE), r.tag.get("call", 0))
            base = fwd_base(r)
            attrs = dict(type=aten, phase="forward", module=r.tag.get("scope", ROOT_SCOPE))
        if granularity == "operator":
            if phase == "backward":
                attrs["type"] = aten
                base = f"gradients/{fwd_base(recs[fw]) if fw is not None else ROOT_SCOPE}/{aten}"
            elif phase == "update":
                attrs["type"] = aten
                base = f"{base}/{aten}"
            else:
                base = f"{base}/{aten}"
            cur_op = new_op(base, attrs)
        elif key != prev_key or cur_op is None:
            if phase == "forward":
                attrs["type"] = "Module"
            cur_op = new_op(base, attrs)
        prev_key = key
        op_nodes[cur_op].append(r.nid)
        op_of[r.nid] = cur_op
        if phase == "forward":
            fwd_op_of_node[r.nid] = cur_op
    # operator granularity: backward ops point at the forward op of their forward node
    if granularity == "operator":
        for r in recs:
            if r.kind == "call" and r.tag.get("phase") == "backward" and r.nid in op_of:
                fw = creator.get(r.tag.get("fwd_seq"))
                op_attrs[op_of[r.nid]]["forward_of"] = op_of.get(fw) if fw is not None else None
    for name, attrs in op_attrs.items():
        attrs.setdefault("forward_of", None)
        attrs["n_nodes"] = len(op_nodes[name])
        if attrs.get("forward_of") == name:
            attrs["forward_of"] = None
    return Program(
        model.name,
        batch_size,
        granularity,
        recs,
        op_nodes,
        op_of,
        op_attrs,
        names,
        n_state,
        n_inputs,
        outputs,
        gm,
        consts,
    )


def _measure_sizes(prog: Program, flat: Sequence[torch.Tensor]) -> None:
    """Fill every node's `nbytes` and `alloc_bytes` from one real execution (no freeing), and
    `prog.alias_owner`: a call node that allocates no storage and whose tensors all lie in the storage one
    earlier call node allocated (a view, ``detach``, ``_unsafe_view``) holds that node's storage. A tuple's item
    (``operator.getitem``) takes over the storage its producer allocated for it, or holds another node's, as a
    view does. Decided by the storages themselves, not by the ops' schemas (``_unsafe_view`` declares no alias).
    O(N)."""
    env: dict[int, Any] = {}
    owner_of_storage: dict[int, int] = {}  # storage data_ptr -> the call node that allocated it
    for r in prog.nodes:
        if r.kind == "placeholder":
            env[r.nid] = flat[r.index]
        elif r.kind == "const":
            env[r.nid] = prog.consts[r.nid].to(flat[0].device)
    get = env.__getitem__
    for r in prog.nodes:
        if r.kind == "call":
            env[r.nid] = r.target(*resolve(r.args, get), **resolve(r.kwargs, get))
        v = env[r.nid]
        r.nbytes = value_nbytes(v)
        if r.kind == "placeholder":
            r.alloc_bytes = r.nbytes
            continue
        if r.target is operator.getitem:
            # a tuple's item: the storages its producer allocated for it are this node's (the producer keeps
            # the rest), so that each item lives as long as its own readers (`_split_items`); an item that
            # lies in another node's storage (a ``split`` of a computed tensor) holds that storage, as a view does
            src, alloc, held = r.inputs[0], 0.0, set()
            for t in tensors_of(v):
                ptr = t.untyped_storage().data_ptr()
                if owner_of_storage.get(ptr) == src:
                    owner_of_storage[ptr] = r.nid
                    alloc += t.untyped_storage().nbytes()
                elif t.numel():
                    held.add(owner_of_storage.get(ptr))
            prog.nodes[src].alloc_bytes -= alloc
            r.alloc_bytes = alloc
            if not alloc and len(held) == 1 and None not in held:
                owner = held.pop()
                prog.alias_owner[r.nid] = prog.alias_owner.get(owner, owner)
            continue
        seen_in = {t.untyped_storage().data_ptr() for i in r.inputs for t in tensors_of(env[i])}
        alloc, seen = 0.0, set()
        for t in tensors_of(v):
            ptr = t.untyped_storage().data_ptr()
            if ptr in seen_in or ptr in seen:
                continue
            seen.add(ptr)
            alloc += t.untyped_storage().nbytes()
        r.alloc_bytes = alloc
        if r.kind == "call":
            for ptr in seen:
                owner_of_storage[ptr] = r.nid
            held = {owner_of_storage.get(t.untyped_storage().data_ptr()) for t in tensors_of(v) if t.numel()}
            if not seen and len(held) == 1 and None not in held:
                owner = held.pop()
                prog.alias_owner[r.nid] = prog.alias_owner.get(owner, owner)


def _join_aliases(prog: Program) -> None:
    """Move every node that holds another op's storage (`prog.alias_owner`) into the op of that storage's owner,
    so that an op's output bytes stay live while any view of them is (an op per aten view would hold 0 bytes and
    let its source's storage be counted free at the view, while the view keeps it: on an H100, the full-size
    models' allocators held 9-12 MB more than the op graph's peak before, session 27). An op left with no
    nodes goes; a backward op that pointed at it (``forward_of``) points at the op its node joined. A node only
    reads the owner's value (or a view of it), so the move contracts an edge into a node with one source op and
    keeps the graph acyclic (a node that also reads another op's value stays); ops are one device's work, so a
    joined view runs where its storage is. O(N + U)."""
    gone: dict[str, str] = {}
    for nid, owner in prog.alias_owner.items():
        src, dst = prog.op_of[nid], prog.op_of[owner]
        if src == dst or prog.op_attrs[dst].get("type") in ("Variable", "Input"):
            continue
        if any(prog.op_of.get(i, dst) != dst for i in prog.nodes[nid].inputs if prog.nodes[i].kind == "call"):
            continue  # it also reads another op's value: moving it could close a cycle
        prog.op_nodes[src].remove(nid)
        prog.op_nodes[dst].append(nid)
        prog.op_of[nid] = dst
        # its tuple items (operator.getitem, grouped with their producer) go with it
        for other in list(prog.op_nodes[src]):
            if prog.nodes[other].target is operator.getitem and prog.nodes[other].inputs[:1] == [nid]:
                prog.op_nodes[src].remove(other)
                prog.op_nodes[dst].append(other)
                prog.op_of[other] = dst
        prog.op_nodes[dst].sort()
        if not prog.op_nodes[src]:
            del prog.op_nodes[src]
            del prog.op_attrs[src]
            gone[src] = dst
    for name, attrs in prog.op_attrs.items():
        attrs["n_nodes"] = len(prog.op_nodes[name])
    if not gone:
        return

    def final(op: str) -> str:
        while op in gone:
            op = gone[op]
        return op

    for name, attrs in prog.op_attrs.items():
        fw = attrs.get("forward_of")
        if fw in gone:
            attrs["forward_of"] = final(fw) if final(fw) != name else None


def _split_items(prog: Program) -> None:
    """Give the items of a multi-output node that different ops read their own lifetimes: an op of the graph has
    one output, held until its last consumer has run, so a convolution backward's input gradient would wait for
    the weight update that reads its weight gradient, and a batch norm's output for the backward op that reads
    its saved statistics.

    For each tuple-producing node of an op P, its items (an ``operator.getitem`` node with the views joined into
    P that hold its storage, `_join_aliases`; not the items of a ``split``, which share one storage) are
    grouped by the set of ops that read them (a program output counts as a reader). When two or more groups
    are read outside P, the group of the tuple's first item stays in P and every other group moves to an op of its
    own, named ``<P>/out<k>`` after its first item's index, inserted right after P (so a topological order runs
    it next) and colocated with P (it reads P's tuple in the same process). Such an op holds its items from its
    start to its last reader; P holds them while it runs, as temporary bytes (`build_graph`). An item also read
    inside P, which cannot move without a cycle, keeps its group in P. In an order that runs other ops between
    P and such an op the simulator would not count its items in between, while a runtime holds them from P's run
    on: its ``items_of`` attribute names P, and the schedule stage runs it right after P
    (`algorithms.placement.items_follow_their_producer`). The one-device replay of inception_v3_tiny's step
    peaked 33 % above the graph's need before (session 28). O(N + U)."""
    readers: dict[int, list[int]] = defaultdict(list)
    for r in prog.nodes:
        if r.kind == "call":
            for i in r.inputs:
                readers[i].append(r.nid)
    outputs = set(prog.outputs)
    holding: dict[int, list[int]] = defaultdict(list)  # storage owner -> the nodes holding its storage
    for n, owner in prog.alias_owner.items():
        holding[owner].append(n)
    added: dict[str, list[tuple[str, list[int], dict[str, Any]]]] = defaultdict(list)
    for op, nids in prog.op_nodes.items():
        members = set(nids)
        items: dict[int, list[int]] = defaultdict(list)  # tuple node -> its getitem nodes in this op
        for nid in nids:
            r = prog.nodes[nid]
            if r.target is operator.getitem and r.inputs[0] in members and nid not in prog.alias_owner:
                items[r.inputs[0]].append(nid)
        moved: set[int] = set()
        for getitems in items.values():
            if len(getitems) < 2:
                continue
            groups: dict[frozenset[str], list[int]] = defaultdict(list)
            fixed: set[frozenset[str]] = set()
            items_of_tuple = set(getitems)
            for g in getitems:
                # the item, the views joined into this op that hold its storage, and their own items
                family = {g} | {n for n in holding[g] if n in members}
                family |= {
                    u for m in family for u in readers[m] if u in members and prog.nodes[u].target is operator.getitem
                }
                read_by = {u for m in family for u in readers[m]}
                outside = frozenset({prog.op_of[u] for u in read_by if prog.op_of[u] != op})
                key = outside | ({"<output>"} if family & outputs else set())
                if not key:
                    continue  # used inside the op only: temporary
                groups[key].extend(sorted(family))
                if any(prog.op_of[u] == op and u not in family for u in read_by):
                    fixed.add(key)
            if len(groups) < 2:
                continue
            # the group of the tuple's first item stays (a convolution backward's input gradient, a batch norm's
            # output): a rule of the graph's structure, so that the ops are the same at every batch size (the
            # largest group, the rule before, changed with it: Celeritas' Standard Evaluation profiles two)
            first = {k: min(prog.nodes[n].args[1] for n in fam if n in items_of_tuple) for k, fam in groups.items()}
            keep = fixed or {min(groups, key=first.__getitem__)}
            for key, fam in groups.items():
                if key in keep:
                    continue
                first = min(n for n in fam if prog.nodes[n].target is operator.getitem)
                index = prog.nodes[first].args[1]
                attrs = prog.op_attrs[op]
                colocation = attrs.get("colocation") or f"items:{op}"
                attrs["colocation"] = colocation
                new_attrs = {
                    k: attrs[k] for k in ("phase", "module", "forward_of", "param") if attrs.get(k) is not None
                }
                new_attrs.update(type="getitem", colocation=colocation, items_of=op)
                added[op].append((f"{op}/out{index}", sorted(fam), new_attrs))
                moved.update(fam)
        if moved:
            prog.op_nodes[op] = [n for n in nids if n not in moved]
    if not added:
        return
    op_nodes: dict[str, list[int]] = {}
    op_attrs: dict[str, dict[str, Any]] = {}
    for op, nids in prog.op_nodes.items():
        op_nodes[op], op_attrs[op] = nids, prog.op_attrs[op]
        for name, fam, attrs in added.get(op, ()):
            if name in prog.op_nodes or name in op_nodes:
                raise InvalidGraph(f"op name {name!r} of a tuple's items is taken")
            op_nodes[name], op_attrs[name] = fam, attrs
            for n in fam:
                prog.op_of[n] = name
    for name, attrs in op_attrs.items():
        attrs["n_nodes"] = len(op_nodes[name])
    prog.op_nodes, prog.op_attrs = op_nodes, op_attrs


# ---------------------------------------------------------------------------- OpGraph
def build_graph(prog: Program, name: str | None = None) -> OpGraph:
    """The OpGraph of a program with sizes from its measured nodes (compute_s left at 0).

    persistent_bytes: a Variable op's parameter and optimizer state; output_bytes: storage allocated by an op's
    nodes whose values are used outside the op or returned; temporary_bytes: storage allocated by nodes used
    only inside the op, and a tuple's items that an op of their own holds after this one (`_split_items`);
    edge bytes: the tensors crossing from one op to another (each tensor once per consumer op; 0 to an op of a
    tuple's items, which is colocated with its producer: the items' bytes there made the producer's copy on
    another device, its largest out-edge, count a weight gradient that never crosses, up to 12 % on session 29's
    inception_v3_tiny m-ETF); ``send_tensors`` (where above 1): the most storages one of the op's out-edges
    carries, the messages a worker sends for one transfer (`algorithms.simulator` charges each its latency and
    per-message time; a lower bound where two edges to one device carry different values). O(N + U).
    """
    g = OpGraph(name or f"{prog.model_name}-b{prog.batch_size}")
    used_outside: set[int] = set(prog.outputs)
    owner = prog.alias_owner
    edges: dict[tuple[str, str, int], float] = defaultdict(float)
    moved: dict[str, float] = defaultdict(float)  # op -> its tuples' items that an op of their own holds
    for r in prog.nodes:
        if r.kind == "call" and r.target is operator.getitem and r.alloc_bytes:
            if prog.op_of[r.nid] != prog.op_of[r.inputs[0]]:
                moved[prog.op_of[r.inputs[0]]] += r.alloc_bytes
    for r in prog.nodes:
        if r.kind != "call":
            continue
        dst = prog.op_of[r.nid]
        for i in dict.fromkeys(r.inputs):
            src = prog.op_of.get(i)
            if src is None or src == dst:
                continue
            used_outside.add(i)
            if r.target is operator.getitem:  # to an op of a tuple's items (`_split_items`): colocated, nothing
                edges.setdefault((src, dst, i), 0.0)  # crosses (bytes here would count in the producer's copy)
            else:
                edges[(src, dst, i)] = prog.nodes[i].nbytes
    # a storage is the op's output when any value held in it (the owner's, a view's, a tuple item's) leaves the op
    storage_out = {owner.get(i, i) for i in used_outside}
    for op, nids in prog.op_nodes.items():
        attrs = dict(prog.op_attrs[op])
        persistent = output = temporary = 0.0
        for nid in nids:
            r = prog.nodes[nid]
            if r.kind == "placeholder":
                persistent += r.nbytes
            elif nid in storage_out:
                output += r.alloc_bytes
            else:
                temporary += r.alloc_bytes
        if attrs.get("type") == "Variable":
            output = 0.0
        temporary += moved[op]  # made while the op runs, then held by their own op (`_split_items`)
        g.add_op(
            op, compute_s=0.0, persistent_bytes=persistent, temporary_bytes=temporary, output_bytes=output, **attrs
        )
    # the messages a transfer of the op's output takes: the storages one of its out-edges carries (a worker sends
    # each value apart, a storage's views once with it: `StepAnalysis._share_sent_storages`)
    storages: dict[tuple[str, str], set[int]] = defaultdict(set)
    for src, dst, i in edges:
        storages[(src, dst)].add(owner.get(i, i))
    send_tensors: dict[str, int] = {}
    for (src, _), held in storages.items():
        if len(held) > send_tensors.get(src, 1):
            send_tensors[src] = len(held)
    for (src, dst, _), b in edges.items():
        g.add_edge(src, dst, bytes=b)
    for op, k in send_tensors.items():
        g.nx.nodes[op]["send_tensors"] = float(k)
    g.invalidate()
    return g
