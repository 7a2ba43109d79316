"""Where a TensorFlow worker's processor time goes in a placed step, per transfer, sampled with Linux perf
(issue 16).

For each model the script profiles the graph on a pinned worker, places it with `--placer`, and runs the placed
step (`--steps` measured steps after 3 warm-up steps) on pinned gRPC workers (`TFDistributedRuntime`) in a
background thread, and samples both worker processes for `--seconds`, from `--settle` seconds after both run
their executor's threads (their start-up, importing TensorFlow, left out), with
``perf record -e cpu-clock -g`` (``perf`` must be on the PATH; a VM without hardware counters still has the
cpu-clock software event). It groups the samples by what their call stack was doing and divides by the
transfers made in the sampled window: the traced step's receives times the measured steps per second in it
(the runtime's pace probes before and after each measured step mark the steps; the probes' own Python is in
the samples). The window must fall inside the measured steps (`--steps`: several hundred for the small models,
200 for inception_v3_tiny); the script stops if it does not. perf itself slows the steps; compare the models'
shares and their ratios rather than the absolute times.

Categories (first match along the stack, `category`): glibc's allocator; a context switch in the kernel
(through a futex, epoll, or another path); other kernel time (network or other); oneDNN / Eigen op kernels;
gRPC; TensorFlow's rendezvous and receive path; TensorFlow's executor; the Python interpreter; the rest.

    python experiments/tf_worker_perf.py --models gnmt_tiny transformer_tiny --placer m_etf --steps 2000
    python experiments/tf_worker_perf.py --models inception_v3_tiny --placer m_etf --steps 200
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from typing import Any

from predicted_vs_measured_tf import load_cluster, profiled_on_worker

MALLOC = {
    "_int_malloc", "_int_free", "malloc", "cfree@GLIBC_2.2.5", "unlink_chunk.constprop.0", "malloc_consolidate",
    "__libc_free", "__libc_malloc", "_int_free_merge_chunk", "_int_free_create_chunk", "__libc_calloc",
    "_int_realloc", "realloc", "__posix_memalign", "_int_memalign", "_mid_memalign",
}  # fmt: skip


def category(stack: list[str]) -> str:
    """The category of one sample from its call stack (leaf first), as the module docstring lists them."""
    leaf = stack[0] if stack else "?"
    sym = re.sub(r"\+0x[0-9a-f]+", "", leaf.split(" (")[0])
    full = " ".join(stack)
    if sym in MALLOC:
        return "allocator (glibc)"
    if "finish_task_switch" in sym or "_raw_spin_unlock_irqrestore" in sym:
        if "futex" in full:
            return "context switch (futex)"
        return "context switch (epoll)" if "epoll" in full else "context switch (other)"
    if "[kernel" in leaf:
        return "kernel: network" if ("tcp" in full or "sock" in full) else "kernel: other"
    if "Mkl" in full or "dnnl" in full or "Eigen::internal" in full or "TensorExecutor" in full:
        return "op kernels"
    if "grpc" in full.lower() or "ByteBuffer" in full:
        return "gRPC"
    if "Rendezvous" in full or "RecvTensor" in full or "TensorResponse" in full:
        return "TF rendezvous / receive"
    if "Executor" in full or "Propagator" in full or "ThreadPoolDevice" in full:
        return "TF executor"
    if "libpython" in leaf or re.search(r"/bin/python[\d.]*\)", leaf) or sym.startswith(("_Py", "Py")):
        return "Python"
    return "other"


def samples(perf_script: str) -> list[tuple[str, list[str]]]:
    """(thread name, stack leaf first) per sample of ``perf script -F comm,ip,sym,dso`` output."""
    out: list[tuple[str, list[str]]] = []
    comm, stack = None, []
    for line in perf_script.splitlines() + [""]:
        if not line.strip():
            if comm is not None:
                out.append((comm, stack))
            comm, stack = None, []
        elif not line[0].isspace():
            comm = line.split()[0]
        else:
            parts = line.strip().split(None, 1)
            stack.append(parts[1] if len(parts) > 1 else "?")
    return out


def worker_pids() -> list[int]:
    """The TensorFlow worker processes running now (``python -m backends.tensorflow.workers``)."""
    found = subprocess.run(["pgrep", "-f", "backends.tensorflow.workers"], capture_output=True, text=True)
    return [int(p) for p in found.stdout.split()]


def executing(pid: int) -> bool:
    """Whether worker `pid` has started its executor's thread pool (a ``tf_Compute`` thread): it has imported
    TensorFlow and joined a session, so what is sampled from then on is the session's steps."""
    try:
        return any(
            open(f"/proc/{pid}/task/{t}/comm").read().strip() == "tf_Compute" for t in os.listdir(f"/proc/{pid}/task")
        )
    except OSError:
        return False


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="+", default=["gnmt_tiny", "inception_v3_tiny"])
    ap.add_argument("--placer", default="m_etf")
    ap.add_argument("--cluster", default="cpu2")
    ap.add_argument("--steps", type=int, default=100, help="measured steps (the sampling must end inside them)")
    ap.add_argument("--seconds", type=float, default=5.0, help="seconds sampled")
    ap.add_argument(
        "--settle", type=float, default=10.0, help="seconds to wait, once the workers run their executors, before "
        "sampling (their import of TensorFlow ends and the warm-up steps pass)",
    )  # fmt: skip
    ap.add_argument("--frequency", type=int, default=1000, help="samples per second and thread")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if shutil.which("perf") is None:
        raise SystemExit("perf is not on the PATH")

    from backends.tensorflow import TFBackend
    from backends.tensorflow.distributed import TFDistributedRuntime
    from backends.tensorflow.workers import WorkerPool

    # the runtime asks the workers for their cores' paces before each measured step and after it: the times of
    # those calls mark the measured steps' boundaries
    pace_times: list[float] = []
    paces = WorkerPool.paces

    def timed_paces(pool: Any) -> list[float]:
        pace_times.append(time.perf_counter())
        return paces(pool)

    WorkerPool.paces = timed_paces  # type: ignore[method-assign]

    print(f"load average at start: {os.getloadavg()[0]:.2f} (1 min)")
    base = load_cluster(args.cluster)
    backend = TFBackend()
    report: dict[str, Any] = {}
    for name in args.models:
        if worker_pids():
            raise SystemExit("TensorFlow workers of another run are alive; their samples would mix with these")
        model, graph, candidates = profiled_on_worker(backend, name, base, args.seed, [args.placer])
        placer = candidates[args.placer]
        assign = dict(placer.place(graph, base).assignment)
        runtime = TFDistributedRuntime(warmup=3, steps=args.steps, check_correctness=False, max_interference=None)
        box: dict[str, Any] = {}
        pace_times.clear()

        def run(box=box, runtime=runtime, model=model, graph=graph, assign=assign) -> None:
            box["res"] = runtime.run(backend, model, graph, assign, {}, base)

        thread = threading.Thread(target=run)
        thread.start()
        while thread.is_alive() and not ((pids := worker_pids()) and all(executing(p) for p in pids)):
            time.sleep(0.02)
        time.sleep(args.settle)
        with tempfile.TemporaryDirectory() as tmp:
            data = os.path.join(tmp, "perf.data")
            t_start = time.perf_counter()
            subprocess.run(
                ["perf", "record", "-q", "-e", "cpu-clock", "-F", str(args.frequency), "-g", "-o", data,
                 "-p", ",".join(map(str, pids)), "--", "sleep", str(args.seconds)],
                check=True, capture_output=True,
            )  # fmt: skip
            t_end = time.perf_counter()
            thread.join()
            script = subprocess.run(
                ["perf", "script", "-i", data, "-F", "comm,ip,sym,dso"], capture_output=True, text=True
            ).stdout
        res = box["res"]
        receives = int(res.extra["step_anatomy"]["receives"])
        # the measured steps inside the sampled window, from the pace probes that bracket each of them
        marks = [t for t in pace_times if t_start <= t <= t_end]
        if len(marks) < 2 or pace_times[-1] <= t_end:
            raise SystemExit(f"{name}: the sampling did not fall inside the measured steps; raise --steps")
        steps_run = len(marks) - 1
        window = marks[-1] - marks[0]
        transfers = receives * steps_run * (t_end - t_start) / window
        got = samples(script)
        per_cat = collections.Counter(category(stack) for _, stack in got)
        per_thread = collections.Counter(re.sub(r"[^A-Za-z_]+$", "", comm) for comm, _ in got)
        us = 1e6 / args.frequency / transfers  # microseconds of processor time per sample, per transfer
        print(
            f"\n{name}, {args.placer}: {len(set(assign.values()))} devices, {receives} transfers per step, measured "
            f"step {res.measured_step_s * 1e3:.2f} ms; {len(got)} samples in {t_end - t_start:.1f} s, "
            f"{steps_run} measured steps; "
            f"processor time per transfer {len(got) * us:.1f} us"
        )
        print("  by thread: " + ", ".join(f"{t} {n / len(got):.0%}" for t, n in per_thread.most_common(4)))
        for cat, n in per_cat.most_common():
            print(f"  {cat:<26} {n * us:6.1f} us per transfer ({n / len(got):5.1%})")
        report[name] = {"receives": receives, "step_s": res.measured_step_s, "samples": len(got),
                        "us_per_transfer": {c: n * us for c, n in per_cat.items()}}  # fmt: skip
    print(f"\nload average at end: {os.getloadavg()[0]:.2f} (1 min)")
    return report


if __name__ == "__main__":
    main()
