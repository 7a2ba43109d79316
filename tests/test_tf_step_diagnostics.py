"""The pure parts of session 38's TensorFlow diagnostics: experiments/tf_worker_perf.py's reading of perf samples
and experiments/tf_op_inflation.py's traced-time arithmetic."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "experiments")]

TF_SO = "(/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/tensorflow/libtensorflow_cc.so.2)"

PERF_SCRIPT = f"""tf_Compute
\t    7f01 _int_malloc (/usr/lib/x86_64-linux-gnu/libc.so.6)
\t    7f02 tensorflow::GrpcWorker::GrpcRecvTensorAsync {TF_SO}

event_engine
\tffff finish_task_switch.isra.0 ([kernel.kallsyms])
\tffff __schedule ([kernel.kallsyms])
\tffff futex_wait ([kernel.kallsyms])

tf_Compute
\t    7f03 Eigen::ThreadPoolTempl<tsl::thread::EigenEnvironment>::MaybeGetTask {TF_SO}

python
\t    5f01 _PyEval_EvalFrameDefault (/root/.pyenv/versions/3.11.7/lib/libpython3.11.so.1.0)
"""


def test_perf_samples_are_split_and_categorised():
    from tf_worker_perf import category, samples

    got = samples(PERF_SCRIPT)
    assert [comm for comm, _ in got] == ["tf_Compute", "event_engine", "tf_Compute", "python"]
    assert len(got[0][1]) == 2 and got[0][1][0].startswith("_int_malloc")
    cats = [category(stack) for _, stack in got]
    # a TensorFlow frame whose library path contains "python" is not the interpreter's
    assert cats == ["allocator (glibc)", "context switch (futex)", "other", "Python"]
    assert category(["grpc_call_start_batch " + TF_SO]) == "gRPC"
    assert category(["tensorflow::MklConvOp<float>::Compute " + TF_SO]) == "op kernels"


def _stats(device: str, spans: list[tuple[str, int, int]]) -> SimpleNamespace:
    nodes = [
        SimpleNamespace(node_name=n, all_start_micros=s, all_end_rel_micros=d, op_end_rel_micros=d) for n, s, d in spans
    ]
    return SimpleNamespace(dev_stats=[SimpleNamespace(device=device, node_stats=nodes)])


def test_traced_times_overlap_and_ratios():
    from tf_op_inflation import overlap_share, ratio, traced_op_times

    dev = "/job:worker/replica:0/task:1/device:CPU:0"
    # a and b one after the other, c inside b for half of b's time; _Recv is not a graph op
    st = _stats(dev, [("a", 0, 10), ("b", 10, 20), ("c", 15, 10), ("_Recv", 0, 50)])
    names = {"a", "b", "c"}
    assert traced_op_times(st, names) == pytest.approx({"a": 1e-5, "b": 2e-5, "c": 1e-5})
    # 10 us of the 40 us of op time run two at a time: 2 x 10 us of the total is shared
    assert overlap_share(st, names)[dev] == pytest.approx(0.5)
    assert overlap_share(_stats(dev, [("a", 0, 10), ("b", 10, 20)]), names)[dev] == 0.0
    a, b, r = ratio({"a": 2.0, "b": 3.0}, {"a": 1.0, "b": 1.5, "c": 9.0}, ["a", "b", "c"])
    assert (a, b, r) == (5.0, 2.5, 2.0)
