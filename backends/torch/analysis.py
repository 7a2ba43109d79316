"""What a placed, scheduled step does where, before anything runs: `StepAnalysis` checks the placement and
the per-device orders (every op once, on its device; no deadlock, by a static replay over the op
dependencies, O(V + E)), then works out which values each device sends to which others, when each device
drops what it holds (after the last local use; parameters and optimizer state are replaced in place by their
new values), which factory ops to retarget to their device, and moves the persistent values (parameters,
optimizer state, inputs) to their devices.

Both torch runtimes use it: the thread runtime (`backends.torch.runtime.PlacedExecutor` extends it) and the
process-per-device runtime's workers (`backends.torch.worker`, through ``PlacedExecutor(start_threads=False)``).
Setup is O(N + U) for N traced nodes and U uses.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from algorithms.errors import InvalidPlacement, InvalidSchedule

from .devices import PhysDevice
from .program import Program, has_device_kwarg, resolve


class StepAnalysis:
    """A captured program bound to a placement, a schedule and physical devices: the checks and the per-device
    bookkeeping of one step (see the module docstring). O(N + U)."""

    def __init__(
        self,
        prog: Program,
        placement: Mapping[str, str],
        schedule: Mapping[str, Sequence[str]],
        devices: Sequence[PhysDevice],
        params: Sequence[torch.Tensor],
        states: Sequence[torch.Tensor],
        batch: Sequence[torch.Tensor],
        *,
        share_storages: bool = False,
    ):
        self.prog = prog
        self.devices = list(devices)
        self.pos = {d.name: i for i, d in enumerate(self.devices)}
        for op in prog.op_nodes:
            if op not in placement:
                raise InvalidPlacement(f"op {op!r} is not placed")
            if placement[op] not in self.pos:
                raise InvalidPlacement(
                    f"op {op!r} is placed on unknown device {placement[op]!r}; devices: {list(self.pos)}"
                )
        self.order: list[list[str]] = [[] for _ in self.devices]
        seen: set[str] = set()
        for dev, ops in schedule.items():
            if dev not in self.pos:
                raise InvalidSchedule(f"schedule names unknown device {dev!r}; devices: {list(self.pos)}")
            for op in ops:
                if op not in prog.op_nodes:
                    raise InvalidSchedule(f"schedule of {dev!r} names op {op!r}, which the graph lacks")
                if op in seen:
                    raise InvalidSchedule(f"op {op!r} is scheduled twice")
                if placement[op] != dev:
                    raise InvalidSchedule(f"op {op!r} is scheduled on {dev!r} but placed on {placement[op]!r}")
                seen.add(op)
                self.order[self.pos[dev]].append(op)
        missing = [op for op in prog.op_nodes if op not in seen]
        if missing:
            raise InvalidSchedule(
                f"op {missing[0]!r} is missing from the schedule of device "
                f"{placement[missing[0]]!r} ({len(missing)} ops missing)"
            )
        self.node_dev: dict[int, int] = {nid: self.pos[placement[op]] for nid, op in prog.op_of.items()}
        self._check_deadlock(placement)
        nodes = prog.nodes
        P = prog.n_params
        # What a training step hands to the next one: the loss, new parameters and new optimizer state.  The
        # gradients are also program outputs (for the correctness check) but are freed after their last use,
        # as a training step frees them; `step(retain_grads=True)` keeps them, outside the accounting.
        self.grad_nids = set(prog.outputs[1 : 1 + P])
        keep = set(prog.outputs) - self.grad_nids
        # In-place updates: a parameter (or state) and its new value on the same device share one storage in
        # a real optimizer step (p.sub_(lr * g)); the captured program is functional, so the old value is
        # released once its new value exists and its last local reader has run (it stays in memory otherwise).
        ph_of_index = {r.index: r.nid for r in nodes if r.kind == "placeholder"}
        self.replaces: dict[int, int] = {}  # new-value nid -> placeholder nid it replaces
        for k in range(P + P * prog.n_state):
            out_nid, ph_nid = prog.outputs[1 + P + k], ph_of_index[k]
            if nodes[out_nid].kind == "call" and self.node_dev[out_nid] == self.node_dev[ph_nid]:
                self.replaces[out_nid] = ph_nid
        self.replaced_ph = set(self.replaces.values())
        # remote destinations of every value, and when each device drops what it holds
        self.sends: dict[int, list[int]] = defaultdict(list)
        self.frees: list[dict[int, list[int]]] = [defaultdict(list) for _ in self.devices]
        self.drop_now: set[int] = set()
        local_use: set[tuple[int, int]] = set()
        self.local_read: set[int] = set()  # placeholders read by an op on their own device
        lasts: list[dict[int, int]] = []  # per device: value -> the node of its last use there
        at: dict[int, int] = {}  # node -> its position in its device's order
        for d, ops in enumerate(self.order):
            last: dict[int, int] = {}
            for op in ops:
                for nid in prog.op_nodes[op]:
                    r = nodes[nid]
                    if r.kind != "call":
                        continue
                    at[nid] = len(at)
                    for i in r.inputs:
                        if nodes[i].kind == "const":
                            continue
                        last[i] = nid
                        if self.node_dev[i] != d and d not in self.sends[i]:
                            self.sends[i].append(d)
                        if self.node_dev[i] == d:
                            local_use.add((i, d))
            lasts.append(last)
        #: per device: a received view -> (the storage's owner, which is received instead, and the view nodes
        #: from it to the view, run there on the received owner); see `_share_sent_storages`
        self.rebuilt: list[dict[int, tuple[int, list[int]]]] = [{} for _ in self.devices]
        if share_storages:
            self._share_sent_storages(lasts, at)
        for d, last in enumerate(lasts):
            for i, nid in last.items():
                if i not in keep or self.node_dev[i] != d:
                    self.frees[d][nid].append(i)
            for i in last:
                if nodes[i].kind == "placeholder" and self.node_dev[i] == d:
                    self.local_read.add(i)
        for r in nodes:
            if r.kind == "call" and r.nid not in keep and (r.nid, self.node_dev[r.nid]) not in local_use:
                self.drop_now.add(r.nid)
        # storages several values hold (a call node's, and its views' on the same device, `Program.alias_owner`):
        # the owner's bytes are freed when the last of them is (`release_bytes`)
        # (a value handed to the next step, the loss or a new parameter, holds nothing here: the op graph has
        # no values that outlive the step, and frees the loss op's output after its consumers)
        self.storage_holders: dict[int, int] = {}
        for i, owner in prog.alias_owner.items():
            if i not in keep and self.node_dev.get(i) == self.node_dev.get(owner):
                self.storage_holders[owner] = self.storage_holders.get(owner, 1) + 1
        self.placeholder_dev = {r.nid: self.node_dev[r.nid] for r in nodes if r.kind == "placeholder"}
        self.consts = [{nid: c.to(d.torch_device) for nid, c in prog.consts.items()} for d in self.devices]
        # factory ops were traced with the trace device baked into their `device` argument: retarget them
        self.kwargs: list[dict[int, dict]] = [dict() for _ in self.devices]
        for r in nodes:
            if has_device_kwarg(r):
                d = self.node_dev[r.nid]
                self.kwargs[d][r.nid] = {**r.kwargs, "device": self.devices[d].torch_device}
        # persistent values (parameters, optimizer state, inputs) on their devices
        flat = [*params, *states, *batch]
        self.store: dict[int, torch.Tensor] = {}
        for r in nodes:
            if r.kind == "placeholder":
                self.store[r.nid] = flat[r.index].detach().to(self.devices[self.node_dev[r.nid]].torch_device)

    def _share_sent_storages(self, lasts: list[dict[int, int]], at: dict[int, int]) -> None:
        """Send a storage once per device that reads it: where a device reads two or more values of one storage
        made on another device (a ReLU's output and the ``detach`` of it that the backward reads; a tensor and
        its transpose), receive the storage's owner alone and rebuild the views there by running their view
        nodes on it. Both sending each value apart and this run the same ops; this sends fewer bytes and
        messages, and the receiver holds the storage once, as the simulator's one copy per (op, device)
        counts (inception_v3_tiny under m-TOPO, session 29: the worker held 92 KB, 9 %, more than predicted on
        one device from four such pairs; under Celeritas 48 of its 764 messages were such duplicates).

        A view is rebuilt only when every node from the owner to it is on the owner's device, holds the
        owner's storage (`Program.alias_owner`) and reads no other value than the one before it (constants
        aside), and when the owner's bytes are at most those of the values it replaces. The owner's last use
        on the receiver becomes the latest of its own and the rebuilt views'. Used by the process-per-device
        runtime's gloo workers and by the planned thread step (`PlacedExecutor.step_planned`); the free-running
        thread step and NCCL workers (which match sends to receives by order, and were not run with it) send
        every value. O(sent values + their view chains)."""
        prog = self.prog
        nodes, owner_of = prog.nodes, prog.alias_owner
        groups: dict[tuple[int, int], list[int]] = defaultdict(list)
        for i, dests in self.sends.items():
            o = owner_of.get(i, i)
            if self.node_dev.get(o) == self.node_dev[i]:
                for d in dests:
                    groups[(o, d)].append(i)
        for (o, d), vals in groups.items():
            if len(vals) < 2 or nodes[o].kind != "call":
                continue
            chains = {v: self._view_chain(v, o) for v in vals if v != o}
            views = [v for v, chain in chains.items() if chain is not None]
            if not views or (o not in vals and len(views) < 2):
                continue
            replaced = sum(nodes[v].nbytes for v in views) + (nodes[o].nbytes if o in vals else 0.0)
            if nodes[o].nbytes > replaced:
                continue
            last = lasts[d]
            for v in views:
                self.sends[v].remove(d)
                self.rebuilt[d][v] = (o, chains[v])  # type: ignore[assignment]
                if v in last and (o not in last or at[last[v]] > at[last[o]]):
                    last[o] = last[v]
            if d not in self.sends[o]:
                self.sends[o].append(d)

    def _view_chain(self, v: int, o: int) -> list[int] | None:
        """The nodes from storage owner `o` (exclusive) to its view `v`, in the order they run, or None when one
        of them is on another device, does not hold `o`'s storage or reads another value (see
        `_share_sent_storages`)."""
        nodes, owner_of = self.prog.nodes, self.prog.alias_owner
        chain: list[int] = []
        cur = v
        while cur != o:
            r = nodes[cur]
            if r.kind != "call" or owner_of.get(cur) != o or self.node_dev.get(cur) != self.node_dev[o]:
                return None
            if has_device_kwarg(r):
                return None
            ins = [i for i in dict.fromkeys(r.inputs) if nodes[i].kind != "const"]
            if len(ins) != 1:
                return None
            chain.append(cur)
            cur = ins[0]
        chain.reverse()
        return chain

    def rebuild_view(self, d: int, v: int, get: Callable[[int], Any]) -> Any:
        """The value of view `v` on device `d`, rebuilt from its storage's owner (`get` returns the received
        owner) by running the view nodes of `rebuilt[d][v]`."""
        o, chain = self.rebuilt[d][v]
        vals: dict[int, Any] = {o: get(o)}
        consts = self.consts[d]

        def arg(j: int) -> Any:
            return vals[j] if j in vals else consts[j]

        for c in chain:
            r = self.prog.nodes[c]
            vals[c] = r.target(*resolve(r.args, arg), **resolve(r.kwargs, arg))
        return vals[v]

    def received_bytes(self, d: int, i: int) -> float:
        """Bytes device `d` holds for a value `i` it received: 0 for a view rebuilt on the received storage."""
        return 0.0 if i in self.rebuilt[d] else self.prog.nodes[i].nbytes

    def new_holders(self) -> dict[int, int]:
        """One step's count of the live values holding each shared storage (for `release_bytes`)."""
        return dict(self.storage_holders)

    def release_bytes(self, holders: dict[int, int], i: int) -> float:
        """Bytes freed when the step drops its home value `i`: the storage `i` allocated, or, for a value that
        shares its storage with others (a view and its source), that storage once the last of them is dropped,
        else 0. `holders` is the step's `new_holders()`. O(1)."""
        nodes = self.prog.nodes
        owner = self.prog.alias_owner.get(i, i)
        if owner not in holders or self.node_dev.get(owner) != self.node_dev.get(i):
            return nodes[i].alloc_bytes if nodes[i].kind == "call" else 0.0
        holders[owner] -= 1
        return nodes[owner].alloc_bytes if holders[owner] == 0 else 0.0

    # ------------------------------------------------------------------ checks
    def _check_deadlock(self, placement: Mapping[str, str]) -> None:
        """Replay the per-device orders over op dependencies; raise InvalidSchedule if some device is stuck."""
        prog = self.prog
        preds: dict[str, set[str]] = {op: set() for op in prog.op_nodes}
        for op, nids in prog.op_nodes.items():
            for nid in nids:
                for i in prog.nodes[nid].inputs:
                    src = prog.op_of.get(i)
                    if src is not None and src != op:
                        preds[op].add(src)
        done: set[str] = set()
        ptr = [0] * len(self.order)
        progress = True
        while progress:
            progress = False
            for d, ops in enumerate(self.order):
                while ptr[d] < len(ops) and preds[ops[ptr[d]]] <= done:
                    done.add(ops[ptr[d]])
                    ptr[d] += 1
                    progress = True
        if len(done) < len(prog.op_nodes):
            stuck = [
                (self.devices[d].name, ops[ptr[d]], sorted(preds[ops[ptr[d]]] - done)[:3])
                for d, ops in enumerate(self.order)
                if ptr[d] < len(ops)
            ]
            desc = "; ".join(f"device {dv!r} waits at op {op!r} for {w}" for dv, op, w in stuck)
            raise InvalidSchedule(f"schedule deadlocks: {desc}")
