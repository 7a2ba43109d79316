"""The array forms of the plots' merging (`_merge_spans_arrays`, `_envelope_arrays`, issue 22) give the spans and
points of the list forms they replaced in the pictures, bit for bit, on random timelines (touching, overlapping,
nested and zero-width spans; gaps at the merge threshold)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator import plots

_t = st.one_of(st.integers(0, 40).map(lambda k: k * 0.05), st.floats(0.0, 2.0, allow_nan=False))


@settings(max_examples=400, deadline=None)
@given(
    spans=st.lists(st.tuples(_t, st.one_of(st.just(0.0), _t)), max_size=60),
    gap=st.sampled_from([0.0, 0.05, 0.1, 1e-3, 0.3]),
)
def test_merge_spans_arrays_equals_merge_spans(spans, gap) -> None:
    spans.sort()
    want = plots._merge_spans(spans, gap)
    s, w = plots._merge_spans_arrays(np.array([a for a, _ in spans]), np.array([b for _, b in spans]), gap)
    assert list(zip(s.tolist(), w.tolist())) == want


@settings(max_examples=400, deadline=None)
@given(
    steps=st.lists(st.tuples(st.one_of(st.just(0.0), _t), st.integers(0, 10**12)), min_size=1, max_size=80),
    t_max=st.sampled_from([0.0, 1.0, 2.0, 3.7]),
)
def test_envelope_arrays_equals_envelope(steps, t_max) -> None:
    ts = np.cumsum([d for d, _ in steps])  # a timeline in time order
    tl = [(float(t), float(m)) for t, (_, m) in zip(ts, steps)]
    want = plots._envelope(tl, t_max)
    xs, ys = plots._envelope_arrays(np.array([t for t, _ in tl]), np.array([m for _, m in tl]), t_max)
    assert list(zip(xs.tolist(), ys.tolist())) == want
