"""The sequential-mode transfer order shared by the simulator and the placers (`algorithms.comm_queue`)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from algorithms.comm_queue import FifoLinks, KeyedLinks, transfer_key

transfers = st.lists(
    st.tuples(
        st.integers(0, 20).map(float),  # request time (integers: ties happen)
        st.integers(0, 3),  # src
        st.integers(0, 3),  # dst
        st.floats(0.1, 5.0),  # duration
    ),
    min_size=1,
    max_size=25,
)


def fifo(items):
    """Start of every transfer when they are served in key order (the simulator's view)."""
    links = FifoLinks(4)
    return {k: links.reserve(k[0], s, d, dt) for k, s, d, dt in sorted(items)}


@settings(max_examples=200, deadline=None)
@given(transfers, st.randoms(use_true_random=False))
def test_keyed_links_agree_with_fifo_whatever_the_order_they_are_learnt_in(raw, rnd):
    """Transfers learnt of in any order: a probe that reports no delay gives the start the simulator's
    first-in first-out service gives the transfer among all those known, and leaves the others' starts as
    they were; a probe that reports a delay is followed by re-timing every known transfer (as the placers
    re-time their plans)."""
    items = [(transfer_key(t, k, 0), s, d, dt) for k, (t, s, d, dt) in enumerate(raw)]
    rnd.shuffle(items)
    links = KeyedLinks(4)
    known: list = []
    for item in items:
        key, s, d, dt = item
        ((s0, e),), delay = links.probe([item])
        truth = fifo(known + [item])
        if delay == 0.0:
            assert s0 == truth[key]
            assert all(fifo(known)[k] == truth[k] for k, *_ in known)
        else:
            assert any(fifo(known)[k] < truth[k] for k, *_ in known)  # a planned transfer really moves
        known.append(item)
        links = KeyedLinks(4)  # re-time: rebuild from the simulator's view
        for k, ks, kd, kdt in known:
            start = truth[k]
            links.add(k, ks, kd, start, start + kdt)
