"""`algorithms.compiled.preload`: the kernels' one-off loading happens before the place stage's timer, once."""

import pytest

from algorithms import compiled


def test_small_graphs_load_nothing_and_large_ones_once():
    pytest.importorskip("numba")
    assert compiled.preload(compiled.min_ops() - 1) == 0.0
    compiled.preload(compiled.min_ops())
    assert compiled._warm.cache_info().currsize == 1
    assert compiled.preload(10**6) == 0.0  # already loaded in this process
    import sys

    assert all(name in sys.modules for name in compiled.KERNELS)
