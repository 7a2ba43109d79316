"""TensorFlow: a device's ops run in a given order when `enforce_order` chains them (issue 16: the workers
follow schedule.json), and the distributed runtime's checks hold with the order enforced."""

from __future__ import annotations

import heapq

import pytest
import tensorflow as tf

from algorithms.cluster import uniform_cluster
from algorithms.errors import ConfigError, InvalidPlacement
from algorithms.graph import OpGraph
from algorithms.placers.baseline import ExpertPlacer
from algorithms.simulator import simulate
from backends.tensorflow import TFBackend
from backends.tensorflow.calibrate import tf_predictor
from backends.tensorflow.config import load_model_cfg
from backends.tensorflow.distributed import TFDistributedRuntime
from backends.tensorflow.models import build_model
from backends.tensorflow.runtime import enforce_order
from backends.tensorflow.session import session_config

pytestmark = pytest.mark.tf
v1 = tf.compat.v1


@pytest.fixture(scope="module")
def mlp():
    backend = TFBackend()
    m = backend.build(load_model_cfg("mlp_tiny"))
    return backend, m, backend.capture(m)


def latest_first(graph: OpGraph) -> list[str]:
    """A topological order that always runs the ready op whose name sorts last: valid, and unlike the order
    TensorFlow's executor picks by itself."""
    indeg = {n: 0 for n in graph.nx.nodes}
    for _, v in graph.nx.edges():
        indeg[v] += 1
    ready = [(_desc(n), n) for n, k in indeg.items() if k == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        _, n = heapq.heappop(ready)
        out.append(n)
        for v in graph.nx.successors(n):
            indeg[v] -= 1
            if indeg[v] == 0:
                heapq.heappush(ready, (_desc(v), v))
    return out


def _desc(name: str) -> tuple[int, ...]:
    return tuple(-ord(c) for c in name) + (1,)


def _traced_order(model, names: set[str]) -> tuple[list[str], list[float]]:
    """The order in which one traced training step started the ops `names` (one inter-op thread), and the
    losses of two steps."""
    config = session_config(inter_op_threads=1, intra_op_threads=1)
    trace = v1.RunOptions(trace_level=v1.RunOptions.FULL_TRACE)
    with v1.Session(graph=model.graph, config=config) as sess:
        sess.run(model.init_op)
        md = v1.RunMetadata()
        losses = [float(sess.run([model.train_op, model.loss], options=trace, run_metadata=md)[1])]
        losses.append(float(sess.run([model.train_op, model.loss])[1]))
    starts = {}
    for ds in md.step_stats.dev_stats:
        for ns in ds.node_stats:
            if ns.node_name in names:
                starts.setdefault(ns.node_name, (ns.all_start_micros, ns.all_start_nanos))
    seen = sorted(starts, key=lambda n: starts[n])
    return seen, losses


def test_enforced_order_is_the_order_the_executor_runs(mlp):
    _, m, g = mlp
    order = latest_first(g)
    free = build_model(m.cfg, m.batch_size)
    chained = build_model(m.cfg, m.batch_size)
    added = enforce_order(chained, {"cpu0": order})
    assert added > 0
    names = set(order)
    ran_free, losses_free = _traced_order(free, names)
    ran, losses = _traced_order(chained, names)
    pos = {n: k for k, n in enumerate(order)}
    # the chained step starts its ops exactly in the given order (ops the initializer needs stay free)...
    chain = [n for n in ran if n in pos and chained.graph.get_operation_by_name(n).control_inputs]
    assert len(chain) > len(order) // 2
    assert chain == sorted(chain, key=pos.__getitem__)
    # ... which TensorFlow's executor does not pick by itself (the test could fail)
    free_chain = [n for n in ran_free if n in set(chain)]
    assert free_chain != sorted(free_chain, key=pos.__getitem__)
    # and it computes the same step: the same losses before and after an update
    assert losses == pytest.approx(losses_free, rel=1e-6)


def test_init_runs_none_of_the_step_and_unknown_ops_are_refused(mlp):
    _, m, g = mlp
    chained = build_model(m.cfg, m.batch_size)
    enforce_order(chained, {"cpu0": latest_first(g)})
    # the initializer's ops (variable handles, constants) got no control input
    needs = {t.op.name for op in chained.init_op.control_inputs for t in op.inputs}
    assert needs and all(not chained.graph.get_operation_by_name(n).control_inputs for n in needs)
    with pytest.raises(InvalidPlacement, match="no_such_op"):
        enforce_order(build_model(m.cfg, m.batch_size), {"cpu1": ["no_such_op"]})
    with pytest.raises(ConfigError, match="order"):
        TFDistributedRuntime(order="fifo")


def test_predictor_replays_the_schedule_only_when_the_runtime_enforces_it(mlp):
    _, _, g = mlp
    cluster = uniform_cluster(2, 1e9)
    placement = {n: ("cpu0" if k % 2 else "cpu1") for k, n in enumerate(g.topological_order())}
    schedule = {d: [n for n in latest_first(g) if placement[n] == d] for d in ("cpu0", "cpu1")}
    free = tf_predictor(g, {2: 0.0})(cluster, placement, schedule, 1e-5, 1e-5)
    replayed = tf_predictor(g, {2: 0.0}, order="schedule")(cluster, placement, schedule, 1e-5, 1e-5)
    fifo = simulate(g, cluster, placement, send_overhead_s=1e-5, recv_overhead_s=1e-5, record_memory=False)
    sched = simulate(
        g, cluster, placement, schedule=schedule, send_overhead_s=1e-5, recv_overhead_s=1e-5, record_memory=False
    )
    assert free == pytest.approx(fifo.makespan) and replayed == pytest.approx(sched.makespan)
    assert sched.makespan != pytest.approx(fifo.makespan)


@pytest.mark.slow
def test_split_run_with_the_schedule_enforced_matches_one_device(mlp):
    backend, m, g = mlp
    cluster = uniform_cluster(2, 4e9)
    rules = [["l0", 0], ["l1", 1], ["out", 1], ["loss", 1]]
    placement = ExpertPlacer(rules, strip_prefixes=["gradients/"]).place(g, cluster).assignment
    schedule = {d: list(o) for d, o in simulate(g, cluster, placement).order.items()}
    res = TFDistributedRuntime(warmup=2, steps=5, order="schedule").run(backend, m, g, placement, schedule, cluster)
    ex = res.extra
    assert ex["schedule_enforced"] is True and ex["order_control_edges"] > 0
    assert ex["loss_match"] and ex["grad_match"] and ex["correct"] and ex["gradients_checked"] >= 6
    assert ex["misplaced_ops"] == 0 and len(res.step_times_s) == 5
