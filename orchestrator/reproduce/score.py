"""Scoring one scoreboard entry: ranks, Kendall's tau-b between the paper's and the lab's ordering, the verdict.

Ranks. Every entry compares items (placers, schedulers, graphs, ...) by one quantity where lower is better
(step time, traffic, deviation; an entry where higher is better negates its values). An item's rank is its
position in the ascending order; equal values share a rank; an out-of-memory item (value None) ranks after every
item that fits, tied with the other OOM items. A paper ordering may be given as ranks directly (the thesis'
figures are bar charts described in words: "MITE and DFS performed best", i.e. tied groups).

Kendall's tau-b over the items both sides have (Kendall 1945; with ties):

    tau_b = (C - D) / sqrt((n0 - n1) * (n0 - n2))

with C concordant and D discordant pairs, n0 = n(n - 1)/2, n1 and n2 the pairs tied in the first and the second
ordering. O(n^2) for n items (n <= 21 here). Undefined (None) with fewer than two common items or when one side
ties every pair.

Ties within the spread (`within_spread`). Where the lab's values are means over several seeds or independent
measurements (an entry's `seed`: graph seeds, or `profiler.trial` for the entries read from measured profiles),
two items whose means are no further apart than the larger of their two standard deviations are not ordered
by the lab: the pair counts as tied on the lab's side (in n2), as the report and the fidelity figures treat
measured steps within their spread. A choice: the larger standard deviation, not a significance test, since
three repetitions give no usable test, and the same rule as the rest of the lab's. Ten fresh profiles of one
model (session 31) moved each placer's predicted step by 3-6 %, and two placers 2 % apart on average swapped
places in 4 of 10: a single profile cannot order them, and the verdict then depended on the hour it was taken.

Verdict (`verdict`):

* **yes**: tau >= 0.8 and the entry's headline relation (the paper's main claim for that table, e.g. "m-SCT is
  within 1% of the expert") holds in the lab's figures;
* **partly**: not yes, but tau >= 0.4 or the headline holds;
* **no**: tau < 0.4 (or undefined) and the headline fails;
* **not run**: no lab figures for the entry (no runs of its preset in the store, or no preset).

An entry without an ordering (tau None, e.g. a single relation) is judged on its headline alone: yes when it
holds, no when it does not.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

YES, PARTLY, NO, NOT_RUN = "yes", "partly", "no", "not run"
TAU_YES = 0.8
TAU_PARTLY = 0.4
#: The seed param of the entries read from presets that measure their profile (profiler=measured): their presets
#: run `PROFILE_TRIALS` independent profiles (`MeasuredProfiler.trial`), the lab's values are the means over them,
#: and pairs within the spread are tied (`within_spread`).
TRIAL = "profiler.trial"
PROFILE_TRIALS = 3


def ranks(values: Mapping[str, float | None]) -> dict[str, float]:
    """Ascending ranks (1 = best); equal values share the lowest rank of their group; None (OOM) ranks last."""
    finite = sorted({v for v in values.values() if v is not None})
    pos = {v: i + 1 for i, v in enumerate(finite)}
    last = len(finite) + 1
    return {k: float(pos[v]) if v is not None else float(last) for k, v in values.items()}


def within_spread(values: Mapping[str, float | None], spread: Mapping[str, float]) -> Callable[[str, str], bool] | None:
    """The pairs the lab does not order: both items have a value and a spread, and their values are no further
    apart than the larger spread (see the module docstring). None without any spread."""
    if not spread:
        return None

    def tied(x: str, y: str) -> bool:
        vx, vy = values.get(x), values.get(y)
        if vx is None or vy is None or x not in spread or y not in spread:
            return False
        return abs(vx - vy) <= max(spread[x], spread[y])

    return tied


def kendall_tau_b(
    a: Mapping[str, float], b: Mapping[str, float], tied_b: Callable[[str, str], bool] | None = None
) -> float | None:
    """Kendall's tau-b between two rankings over their common keys (see the module docstring); `tied_b` names
    further pairs that count as tied in `b` (`within_spread`)."""
    keys = [k for k in a if k in b]
    n = len(keys)
    if n < 2:
        return None
    conc = disc = tie_a = tie_b = 0
    for i in range(n):
        for j in range(i + 1, n):
            da = a[keys[i]] - a[keys[j]]
            db = b[keys[i]] - b[keys[j]]
            if db != 0 and tied_b is not None and tied_b(keys[i], keys[j]):
                db = 0
            if da == 0:
                tie_a += 1
            if db == 0:
                tie_b += 1
            if da == 0 or db == 0:
                continue
            if (da > 0) == (db > 0):
                conc += 1
            else:
                disc += 1
    n0 = n * (n - 1) // 2
    den = math.sqrt((n0 - tie_a) * (n0 - tie_b))
    if den == 0:
        return None
    return (conc - disc) / den


def verdict(tau: float | None, headline: bool | None, has_lab: bool) -> str:
    """The entry's verdict from its tau and whether its headline holds (None: no headline / not checkable)."""
    if not has_lab:
        return NOT_RUN
    if tau is None:
        if headline is None:
            return NOT_RUN
        return YES if headline else NO
    head_ok = headline is not False  # an entry without a headline is judged on tau alone
    if tau >= TAU_YES and head_ok:
        return YES
    if tau >= TAU_PARTLY or headline is True:
        return PARTLY
    return NO


def median(xs: Sequence[float]) -> float | None:
    s = sorted(xs)
    if not s:
        return None
    m = len(s) // 2
    return s[m] if len(s) % 2 else (s[m - 1] + s[m]) / 2
