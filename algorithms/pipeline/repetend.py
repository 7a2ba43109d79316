"""The candidate repetends of Tessel's search and the cheap bounds that rank them (Lin et al., section IV-B).

A repetend for N_R micro-batches is an index assignment n_0..n_{K-1} in [0, N_R): block B_i of the repetend
runs micro-batch n_i (equation 3). This module enumerates the assignments Properties IV.1 and IV.2 leave
(``iter_repetend_assignments``), the memory the warm-up leaves at repetend entry (``entry_memory``, equation 5)
and a necessary condition on the repetend's period from dependencies and per-device energy alone
(``dependency_period_ok`` / ``dependency_period_bound``), used to order candidates before any Z3 call.
"""

from __future__ import annotations

from collections.abc import Sequence

import z3

from .blocks import MicroBatchSpec


def iter_repetend_assignments(spec: MicroBatchSpec, n_r: int):
    """IterRepetendBlocks: index assignments for N_R micro-batches pruned by Properties IV.1 and IV.2.

    Blocks are visited in topological order; block j may take 0 .. min over its predecessors' indices
    (IV.2), roots 0 .. N_R - 1. Only assignments using both 0 and N_R - 1 are yielded (IV.1 symmetry, and the
    smaller N_R already covered the rest).
    """
    K = spec.K
    n = [0] * K

    def rec(j: int, hi_seen: int):
        if j == K:
            if hi_seen == n_r - 1 and min(n) == 0:
                yield tuple(n)
            return
        top = min((n[p] for p in spec.preds[j]), default=n_r - 1)
        for v in range(top, -1, -1):
            n[j] = v
            yield from rec(j + 1, max(hi_seen, v))

    yield from rec(0, -1)


def entry_memory(spec: MicroBatchSpec, n: Sequence[int]) -> dict[str, int]:
    """E_d: memory the warm-up (equation 5) leaves on each device at repetend entry."""
    out = {d: 0 for d in spec.devices}
    for i, b in enumerate(spec.blocks):
        for d in b.devices:
            out[d] += n[i] * b.memory
    return out


def dependency_period_ok(
    spec: MicroBatchSpec, n: Sequence[int], p: int, energetic: bool = True, pin_first: bool = False
) -> bool:
    """Necessary condition for a repetend with period ``p`` and starts in [0, p): O(K + E + sum_d K_d^3).

    Earliest starts by a longest-path pass over the periodic dependency constraints
    s_j >= s_i + t_i - (n_i - n_j) p, latest starts by the reverse pass from s <= p - 1; then, with
    ``energetic``, for every device and every window [a, b) between an earliest start and a latest end, the
    blocks that must run inside it have to fit (energetic reasoning; blocks of one device cannot overlap on the
    line either). Monotone in p, so a binary search finds the smallest p that passes.
    """
    K = spec.K
    est = [0] * K
    for j in range(K):
        for i in spec.preds[j]:
            v = est[i] + spec.blocks[i].time - (n[i] - n[j]) * p
            if v > est[j]:
                est[j] = v
        if est[j] > p - 1:
            return False
    if not energetic:
        return True
    lst = [p - 1] * K
    if pin_first:
        lst[0] = 0  # only valid when the solver also pins block 0 to the window start
    for i in reversed(range(K)):
        for j in spec.succs[i]:
            v = lst[j] - spec.blocks[i].time + (n[i] - n[j]) * p
            if v < lst[i]:
                lst[i] = v
        if lst[i] < est[i]:
            return False
    for d in spec.devices:
        idx = spec.on_device(d)
        if len(idx) < 2:
            continue
        lct = {i: lst[i] + spec.blocks[i].time for i in idx}
        for a in {est[i] for i in idx}:
            for b in {lct[i] for i in idx}:
                if b <= a:
                    continue
                need = sum(spec.blocks[i].time for i in idx if est[i] >= a and lct[i] <= b)
                if need > b - a:
                    return False
    return True


def dependency_period_bound(spec: MicroBatchSpec, n: Sequence[int], lo: int, hi: int) -> int | None:
    """Smallest p in [lo, hi] passing ``dependency_period_ok`` (monotone in p), None if none."""
    if not dependency_period_ok(spec, n, hi):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if dependency_period_ok(spec, n, mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def repetend_size_bound(spec: MicroBatchSpec, memory: int | None, period: int) -> int:
    """The largest useful N_R for repetends of period >= ``period`` under ``memory``: 1 + max (n_max - n_min).

    Derived from the memory model and the dependencies, not from a fixed device count: an assignment needs
    n_i - n_j >= 0 on every dependency i -> j (IV.2), and a drop above u_ij = ceil((P - 1 + t_i) / P) only
    adds slack, since with 0 <= s < P a drop of u_ij already satisfies s_i + t_i <= s_j + (n_i - n_j) P (the
    assignment with every drop cut to what its starts need has smaller indices everywhere). The entry memory
    sum_i n_i m_i (equation 5) must fit ``memory`` on every device. The maximum of n_max under these linear
    constraints with n_min = 0 is found with ``z3.Optimize`` (K integer variables; deterministic). Grows with
    the device count through the length of the dependency chains: V at D devices under memory D gives D + 1.
    Each weakly connected component of the blocks (X has two) gets its own n_min = 0 (see ``components``).
    Our derivation: the paper bounds N_R by CalMaxInflight (floor(M / peak)), which ignores that memory-free
    blocks (full-device blocks with m = 0) let more micro-batches be in flight than any device holds.
    """
    K = spec.K
    ctx = z3.Context()  # a fresh context per call: Z3 answers do not depend on earlier calls
    n = [z3.Int(f"nb_{b.name}", ctx) for b in spec.blocks]
    top = z3.Int("nb_top", ctx)
    opt = z3.Optimize(ctx=ctx)
    for i in range(K):
        opt.add(n[i] >= 0, top >= n[i])
        for j in spec.succs[i]:
            u = -(-(period - 1 + spec.blocks[i].time) // period)
            opt.add(n[i] - n[j] >= 0, n[i] - n[j] <= u)
    opt.add(z3.Or([top == x for x in n]))
    for comp in components(spec):
        opt.add(z3.Or([n[i] == 0 for i in comp]))
    if memory is not None:
        for d in spec.devices:
            terms = [n[i] * spec.blocks[i].memory for i in spec.on_device(d) if spec.blocks[i].memory]
            if terms:
                opt.add(z3.Sum(terms) <= memory)
    opt.maximize(top)
    if opt.check() != z3.sat:
        return 1
    return int(opt.model().eval(top, model_completion=True).as_long()) + 1


def components(spec: MicroBatchSpec) -> list[list[int]]:
    """The weakly connected components of a micro-batch's blocks (block indices, in order). O(K + E).

    Shifting every index of one component by a constant relabels micro-batches of that component only; when the
    component leaves no memory behind (net delta 0 on every device) the entry memory and every constraint stay
    the same, so the searches fix the smallest index of each component to 0.
    """
    parent = list(range(spec.K))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for j, ps in enumerate(spec.preds):
        for i in ps:
            parent[find(i)] = find(j)
    out: dict[int, list[int]] = {}
    for i in range(spec.K):
        out.setdefault(find(i), []).append(i)
    return list(out.values())
