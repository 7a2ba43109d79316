"""`graph.gc_paused` (issue 22), as a decorator and a block: the collector is off inside, restored afterwards,
even on errors; nested uses leave it to the outermost."""

import gc

import pytest

from algorithms.graph import gc_paused


@gc_paused()
def _state(fail: bool = False) -> bool:
    if fail:
        raise ValueError("boom")
    return gc.isenabled()


def test_paused_inside_and_restored():
    assert gc.isenabled()
    assert _state() is False
    assert gc.isenabled()
    with pytest.raises(ValueError, match="boom"):
        _state(fail=True)
    assert gc.isenabled()


def test_left_off_when_it_was_off():
    gc.disable()
    try:
        assert _state() is False
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_nested_block_leaves_it_to_the_outermost():
    with gc_paused():
        assert _state() is False
        assert not gc.isenabled()  # the inner call did not turn it back on
    assert gc.isenabled()
