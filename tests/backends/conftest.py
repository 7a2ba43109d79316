"""Fixtures shared by the backend tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def torch_one_thread():
    """Run a torch test with one intra-op thread (tiny models; the machine is small and shared)."""
    torch = pytest.importorskip("torch")
    prev = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(prev)
