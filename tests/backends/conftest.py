"""Fixtures shared by the backend tests; a framework's test files are not collected where it is not installed
(so that they import it at the top)."""

from __future__ import annotations

import importlib.util

import pytest

collect_ignore_glob = [
    pattern
    for module, pattern in (("torch", "test_torch_*.py"), ("tensorflow", "test_tf_*.py"))
    if importlib.util.find_spec(module) is None
]


@pytest.fixture
def torch_one_thread():
    """Run a torch test with one intra-op thread (tiny models; the machine is small and shared)."""
    torch = pytest.importorskip("torch")
    prev = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(prev)
