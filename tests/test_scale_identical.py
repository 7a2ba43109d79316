"""Issue 22: the speed work on the simulator, the memory accounting and the placers must leave results
identical.  Every placer's placement, predicted makespan, and the simulated makespan, start times, peak memory
and memory timeline per device on four fixed graphs (600-1300 ops, seeds fixed, parallel and sequential
communication, ample and tight memory) are compared with values recorded from the code before that work
(`tests/scale_fixture.py`, `tests/data/scale_reference.json`)."""

from __future__ import annotations

import json

import pytest

from tests.scale_fixture import CASES, PATH, case_results

with open(PATH, encoding="utf-8") as _f:
    REFERENCE = json.load(_f)


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_results_identical_to_reference(case):
    got = json.loads(json.dumps(case_results(case)))  # the same JSON round trip as the recorded file
    want = REFERENCE[case[0]]
    assert set(got) == set(want)
    for key in sorted(want):
        assert got[key] == want[key], f"{case[0]}: {key} differs from the reference"
