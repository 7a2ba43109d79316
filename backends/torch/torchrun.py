"""Run the process-per-device runtime under ``torchrun`` (several hosts, or a launcher of your choice).

    # on the launching machine: write the job (model, placement, schedule, cluster) for the workers
    job = write_job(TorchDistributedRuntime(steps=10), backend, model, graph, placement, schedule, cluster,
                    "job.pkl")
    # on every host (N hosts, K devices each, N * K = cluster devices, ranks in the cluster's device order):
    torchrun --nnodes N --nproc-per-node K --rdzv-backend c10d --rdzv-endpoint HOST0:29500 \\
        -m backends.torch.torchrun job.pkl reports/
    # back on the launching machine, with reports/ gathered from the hosts (a shared disk or a copy):
    result = read_result(runtime, job, "reports/")

Each rank runs `distributed._worker_main` with the rendezvous from torchrun's environment (``env://``) and
writes its report to ``reports/rank<k>.pkl``; CPU workers pin to the cores of their device that exist on their
host, GPU workers take the GPU of their local rank. Cost: as `TorchDistributedRuntime.run`.
"""

from __future__ import annotations

import os
import pickle
import sys
from pathlib import Path
from typing import Any

from algorithms.errors import ConfigError

from ..base import RunResult
from .distributed import Prepared, TorchDistributedRuntime, WorkerError, _worker_main


def write_job(
    runtime: TorchDistributedRuntime,
    backend: Any,
    model: Any,
    graph: Any,
    placement: Any,
    schedule: Any,
    cluster: Any,
    path: str | os.PathLike,
) -> Prepared:
    """Prepare the run and write the workers' job to `path` (port 0: rendezvous from torchrun)."""
    prepared = runtime.prepare(backend, model, graph, placement, schedule, cluster)
    prepared.job.port = 0
    Path(path).write_bytes(pickle.dumps(prepared.job))
    return prepared


def read_result(runtime: TorchDistributedRuntime, prepared: Prepared, reports_dir: str | os.PathLike) -> RunResult:
    """The RunResult from the per-rank reports torchrun's workers wrote."""
    reports = []
    for k, name in enumerate(prepared.names):
        f = Path(reports_dir) / f"rank{k}.pkl"
        if not f.exists():
            raise WorkerError(f"no report from rank {k} (device {name!r}) in {reports_dir}")
        rank, rep = pickle.loads(f.read_bytes())
        if "error" in rep:
            raise WorkerError(f"worker for device {name!r} failed: {rep['error']}")
        reports.append(rep)
    return runtime.finish(prepared, reports)


class _FileReport:
    def __init__(self, folder: Path):
        self.folder = folder

    def put(self, item: tuple[int, dict[str, Any]]) -> None:
        tmp = self.folder / f".rank{item[0]}.tmp"
        tmp.write_bytes(pickle.dumps(item))
        os.replace(tmp, self.folder / f"rank{item[0]}.pkl")


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        raise ConfigError("usage: torchrun ... -m backends.torch.torchrun JOB.pkl REPORTS_DIR")
    job = pickle.loads(Path(args[0]).read_bytes())
    out = Path(args[1])
    out.mkdir(parents=True, exist_ok=True)
    rank = int(os.environ["RANK"])
    if int(os.environ.get("WORLD_SIZE", len(job.devices))) != len(job.devices):
        raise ConfigError(
            f"torchrun started {os.environ.get('WORLD_SIZE')} ranks; the job has {len(job.devices)} devices"
        )
    _worker_main(rank, job, _FileReport(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
