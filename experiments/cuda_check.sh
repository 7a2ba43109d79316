#!/usr/bin/env bash
# The CUDA path of the process-per-device runtime on a GPU host (issue 16), in one go: the fidelity sweep on
# one GPU, the CUDA-marked tests, whether NCCL takes two ranks on one GPU, and the sweep on two GPUs where there
# are two (or where NCCL takes two ranks on one). Writes its logs and the sweeps' JSON under $1 (default
# ./cuda_check). Needs the project's Python dependencies importable (hydra-core, omegaconf, orjson, scipy, ...).
# First, Celeritas' Table 2 / Table 5 / Figure 5 at the paper's sizes with GPU op times
# (experiments/celeritas_gpu.py; its profiled graphs land in $1/celeritas_graphs.tar).
# CELERITAS=skip leaves that out; FIDELITY_WARMUP / FIDELITY_STEPS / FIDELITY_ROUNDS set the gpu1 sweep's;
# then the same sweep with the step replayed as a CUDA graph (runtime.cuda_graph; CUDA_GRAPH=skip leaves it out);
# EAGER=skip leaves out the eager sweep; MEMORY_GAP=skip leaves out experiments/cuda_memory_gap.py on the
# full-size models (the allocator's peak against the tensors').
# TWO_RANKS_ON_ONE_GPU=skip leaves out the NCCL two-ranks-on-one-GPU probe (NCCL 2.28 refused it).
#     bash experiments/cuda_check.sh /tmp/cuda_check
# A bare GPU host (the lab's lent machines) has torch but not the project's other dependencies: the script
# installs them from ./.whl (wheels downloaded beforehand, e.g. `pip download --no-deps --python-version 3.12
# --only-binary=:all: -d .whl orjson hydra-core omegaconf antlr4-python3-runtime==4.9.3 pymetis`) when an import
# fails, and stops if that does not help.
set -u
if ! python3 -c "import orjson, omegaconf, hydra" 2>/dev/null; then
    ls .whl/*.whl >/dev/null 2>&1 || { echo "missing dependencies and no ./.whl to install them from" >&2; exit 2; }
    python3 -m pip install -q --no-deps --no-index --break-system-packages .whl/*.whl 2>&1 | grep -v WARNING
    python3 -c "import orjson, omegaconf, hydra" || exit 2
fi
out=${1:-cuda_check}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
models="mlp_tiny gnmt_tiny transformer_tiny inception_v3_tiny"
nvidia-smi -L | tee "$out/gpu.txt"
python3 -c "import torch; print('torch', torch.__version__, 'nccl', torch.cuda.nccl.version(), torch.cuda.get_device_name(), torch.cuda.device_count(), 'GPUs')" | tee -a "$out/gpu.txt"
if [ "${CELERITAS:-run}" != skip ]; then
    graphs=$(mktemp -d)
    timeout "${CELERITAS_TIMEOUT:-300}" python3 experiments/celeritas_gpu.py --json "$out/celeritas_gpu.json" \
        --graphs "$graphs" --budget-s "${CELERITAS_BUDGET:-200}" 2>&1 | grep -v "it/s\]" | tee "$out/celeritas_gpu.txt"
    tar -cf "$out/celeritas_graphs.tar" -C "$graphs" .
fi
if [ "${EAGER:-run}" != skip ]; then
    timeout "${FIDELITY_TIMEOUT:-280}" python3 experiments/fidelity.py --models $models --placers single --clusters gpu1 \
        --warmup "${FIDELITY_WARMUP:-5}" --steps "${FIDELITY_STEPS:-30}" --rounds "${FIDELITY_ROUNDS:-2}" \
        --json "$out/fidelity_gpu1.json" 2>&1 | grep -v "it/s\]" | tee "$out/fidelity_gpu1.txt"
fi
if [ "${CUDA_GRAPH:-run}" != skip ]; then  # the same sweep with the step replayed as a CUDA graph
    timeout "${FIDELITY_TIMEOUT:-280}" python3 experiments/fidelity.py --models $models --placers single --clusters gpu1 \
        --warmup "${FIDELITY_WARMUP:-5}" --steps "${FIDELITY_STEPS:-30}" --rounds "${FIDELITY_ROUNDS:-2}" --cuda-graph \
        --json "$out/fidelity_gpu1_graph.json" 2>&1 | grep -v "it/s\]" | tee "$out/fidelity_gpu1_graph.txt"
fi
if [ "${MEMORY_GAP:-run}" != skip ]; then  # where the allocator's peak exceeds the tensors' (cuda_memory_gap.py)
    timeout "${MEMORY_GAP_TIMEOUT:-200}" python3 experiments/cuda_memory_gap.py --models mlp gnmt transformer \
        inception_v3 --json "$out/cuda_memory_gap.json" 2>&1 | grep -v "it/s\]" | tee "$out/cuda_memory_gap.txt"
fi
timeout "${PYTEST_TIMEOUT:-150}" python3 -m pytest -q -p no:cacheprovider -m cuda tests/backends/test_torch_distributed.py \
    tests/backends/test_torch_runtime.py tests/backends/test_torch_cudagraph.py 2>&1 | tee "$out/pytest_cuda.txt"
two=0
if [ "$(python3 -c 'import torch; print(torch.cuda.device_count())')" -ge 2 ]; then
    two=1
elif [ "${TWO_RANKS_ON_ONE_GPU:-try}" != skip ]; then
    timeout 60 python3 -c "
from backends.torch.distributed import nccl_pingpong
print('two NCCL ranks on one GPU:', nccl_pingpong([1024, 1 << 20], 2, 50))" > "$out/nccl_one_gpu.txt" 2>&1 && two=1
    tail -3 "$out/nccl_one_gpu.txt"
fi
if [ "$two" = 1 ]; then
    timeout "${FIDELITY_TIMEOUT:-280}" python3 experiments/fidelity.py --models $models --clusters gpu2 --warmup 5 \
        --steps 20 --rounds 2 --json "$out/fidelity_gpu2.json" 2>&1 | grep -v "it/s\]" | tee "$out/fidelity_gpu2.txt"
fi
