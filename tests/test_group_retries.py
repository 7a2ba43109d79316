"""`pair_queue.place_with_group_retries`: the colocation retry budget is per group (issue 21, Baechi Table 4's
synthetic graph at 30% memory, where 28 to 38 distinct groups each needed one retry and a fixed total of 16 ran
out)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from algorithms.errors import InfeasiblePlacement
from algorithms.placers.baechi.pair_queue import GroupOverflow, place_with_group_retries


def fake_run(bad: list[set[int]], D: int, calls: list[int]):
    """A list placement of len(bad) colocation groups, each taking the lowest device it is not kept off; group g
    overflows on the devices in bad[g].  The first overflowing group (in group order) raises, as the pair queue
    stops at its first GroupOverflow."""

    def run(banned: set[int]) -> dict[int, int]:
        calls.append(len(banned))
        out = {}
        for g, b in enumerate(bad):
            free = [d for d in range(D) if g * D + d not in banned]
            if not free:
                raise InfeasiblePlacement(f"group {g} kept off every device")
            d = free[0]
            if d in b:
                raise GroupOverflow(f"group {g} overflows device {d}", g, d)
            out[g] = d
        return out

    return run


def test_many_groups_each_needing_one_retry_fit_with_the_default_budget():
    # 40 groups each overflow device 0 once (the pattern of Baechi Table 4's synthetic graph): 40 retries in
    # all, one per group; a fixed total budget of 16 raised here
    D, G = 4, 40
    calls: list[int] = []
    result, retries = place_with_group_retries(fake_run([{0}] * G, D, calls), D, 16)
    assert retries == G
    assert result == dict.fromkeys(range(G), 1)
    assert len(calls) == G + 1


def test_a_group_that_overflows_everywhere_is_retried_on_every_other_device_then_raises():
    D = 4
    calls: list[int] = []
    with pytest.raises(GroupOverflow, match="group 1 overflows device 3"):
        place_with_group_retries(fake_run([set(), set(range(D))], D, calls), D, 16)
    assert len(calls) == D  # the first pass and D - 1 retries


def test_zero_budget_raises_at_the_first_overflow():
    calls: list[int] = []
    with pytest.raises(GroupOverflow):
        place_with_group_retries(fake_run([{0}], 2, calls), 2, 0)
    assert calls == [0]


def test_an_overflow_on_a_device_the_group_is_kept_off_is_raised_not_retried():
    # a run that ignores `banned` would loop forever; the retry loop re-raises instead
    def run(banned: set[int]) -> None:
        raise GroupOverflow("always", 0, 0)

    with pytest.raises(GroupOverflow, match="always"):
        place_with_group_retries(run, 4, 16)


@settings(max_examples=200, deadline=None)
@given(
    D=st.integers(1, 5),
    budget=st.integers(0, 6),
    bad=st.lists(st.sets(st.integers(0, 4)), min_size=1, max_size=30),
)
def test_each_group_gets_its_own_budget(D, budget, bad):
    """Group g fits iff one of its first min(budget, D - 1) + 1 devices (in the order it tries them) is good;
    the retries are then the sum over the groups of the index of their first good device."""
    bad = [{d for d in b if d < D} for b in bad]
    per_group = min(budget, D - 1)
    first_good = [next((d for d in range(D) if d not in b), None) for b in bad]
    fits = all(f is not None and f <= per_group for f in first_good)
    calls: list[int] = []
    run = fake_run(bad, D, calls)
    if fits:
        result, retries = place_with_group_retries(run, D, budget)
        assert retries == sum(f for f in first_good if f is not None)
        assert result == dict(enumerate(first_good))
    else:
        with pytest.raises(InfeasiblePlacement):
            place_with_group_retries(run, D, budget)
    assert len(calls) <= len(bad) * per_group + 1
