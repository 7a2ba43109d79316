"""What a GPU worker's allocator holds beside the tensors (`backends.torch.cuda_memory`): sizes as PyTorch
chooses them, checked against the H100 figures of session 24, and bad settings refused naming the variable."""

import pytest

from algorithms.errors import ConfigError
from backends.torch.cuda_memory import cublas_workspace_bytes, cublaslt_workspace_bytes, framework_reserve_bytes

MIB = 2**20


def test_default_workspaces_by_compute_capability():
    assert cublas_workspace_bytes(9, {}) == 32 * MIB  # Hopper
    assert cublas_workspace_bytes(8, {}) == 8 * MIB + 128 * 1024  # Ampere and before
    assert cublaslt_workspace_bytes({}) == MIB


def test_reserve_matches_the_h100_allocator_peaks():
    # measured on an H100 (session 24): allocator peak less the tensors' for a one-GPU step
    assert framework_reserve_bytes(9, False, {}) / 1e6 == pytest.approx(34.6, abs=0.05)  # eager, one stream
    assert framework_reserve_bytes(9, True, {}) / 1e6 == pytest.approx(103.8, abs=0.05)  # graphed, three
    small = {"CUBLAS_WORKSPACE_CONFIG": ":4096:1"}
    assert framework_reserve_bytes(9, False, small) / 1e6 == pytest.approx(5.24, abs=0.01)
    assert framework_reserve_bytes(9, True, small) / 1e6 == pytest.approx(15.7, abs=0.05)


def test_environment_settings_are_parsed():
    assert cublas_workspace_bytes(9, {"CUBLAS_WORKSPACE_CONFIG": ":4096:2:16:8"}) == 8 * MIB + 128 * 1024
    assert cublas_workspace_bytes(7, {"CUBLAS_WORKSPACE_CONFIG": ":0:0"}) == 0
    assert cublaslt_workspace_bytes({"CUBLASLT_WORKSPACE_SIZE": "4096"}) == 4 * MIB


@pytest.mark.parametrize("value", ["4096:8", ":4096", ":a:8", ":4096:-1", ":4096:8:16"])
def test_a_bad_cublas_setting_is_refused_naming_it(value):
    with pytest.raises(ConfigError, match="CUBLAS_WORKSPACE_CONFIG"):
        cublas_workspace_bytes(9, {"CUBLAS_WORKSPACE_CONFIG": value})


@pytest.mark.parametrize("value", ["1MB", "-4"])
def test_a_bad_cublaslt_setting_is_refused_naming_it(value):
    with pytest.raises(ConfigError, match="CUBLASLT_WORKSPACE_SIZE"):
        cublaslt_workspace_bytes({"CUBLASLT_WORKSPACE_SIZE": value})


def test_requested_peaks_reads_the_later_steps_of_gpu_workers():
    from orchestrator.stages.run import requested_peaks

    extra = {
        "allocator_peaks_bytes": {
            "gpu0": {
                "first_step": {"allocated": 9.0, "requested": 8.0},
                "later_steps": {"allocated": 6.0, "requested": 5.5},
            },
            "gpu1": {"first_step": {}, "later_steps": {"allocated": 4.0, "requested": float("nan")}},
            "cpu0": None,
        }
    }
    assert requested_peaks(extra) == {"gpu0": 5.5}
    assert requested_peaks({}) == {}
