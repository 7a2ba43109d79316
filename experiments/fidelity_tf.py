"""Predicted against measured step time on TensorFlow's distributed runtime (issue 16, TensorFlow half).

For a cluster (cpu2 by default: two devices, one core each):

1. fit the communication model from gRPC transfers between two pinned worker processes, 1 KB to 64 MB
   (`dist_profile.comm_benchmark_distributed`; fit, residual and the empty step of two workers printed);
2. per model, profile every op in a pinned one-worker process with the worker's thread count
   (`dist_profile.profile_distributed`), printing the traced op sum, the measured single-device step and the
   empty step (the fixed per-step cost of client, master and executor);
3. per placer (`single`, `m_etf`, `expert` where the model has rules, and `layer_split` for the MLP: its
   hidden layers on different devices), predict with `algorithms.simulator.simulate` on the profiled graph and
   the fitted cluster (first-in first-out dispatch, the closest of the simulator's policies to TensorFlow's
   ready queue) plus the measured empty step of as many workers as the placement uses
   (`dist_profile.predicted_step`), and measure with `TFDistributedRuntime` (one pinned `tf.distribute.Server`
   process per device; warm-up, then the median of --steps);
   Both predictions charge each transfer's processor time to the sending and the receiving worker (the fit's
   `send_overhead_s` / `recv_overhead_s`, measured in the bursts). They are given twice: with the isolated
   transfer fit and parallel links (``pred``), and with
   sequential sends (Baechi 3.4: one tensor at a time per sender) whose latency is the marginal cost of a
   transfer in a burst of small ones (``seq``: what a step moving hundreds of small tensors sees);
4. with ``--message-costs in_step`` (the default) fit the hop latency and the per-message costs to the
   runtime's own placed steps of a calibration program (`backends.tensorflow.calibrate`), predicted beside
   the burst benchmark's (``cal``);
5. print per run: predicted, measured median and IQR, relative error (predicted - measured) / measured,
   predicted and measured peak memory of the busiest device, traffic, and the correctness check; per model the
   median |error| and Kendall's tau between predicted and measured orders.

With ``--rounds N`` (default 3) every model is profiled N times and every placement runs once per round, in a
new random order each round; the prediction uses the mean of the rounds' profiles (placements are made on the
first), the measured step is the median over every round's steps. This machine's speed drifts by tens of
percent over seconds, so one profile and one run taken minutes apart compare two different machines.

Timings on a shared machine are noisy: run it alone (the load average is printed before and after).

    python experiments/fidelity_tf.py
    python experiments/fidelity_tf.py --models mlp_tiny gnmt_tiny --placers single m_etf expert --steps 20
    python experiments/fidelity_tf.py --json /tmp/fidelity_tf.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import random
import statistics
import time
from pathlib import Path
from typing import Any

from fidelity import save_case
from predicted_vs_measured_tf import load_cluster, placers
from tf_message_kinds import non_constant_messages

from algorithms.cluster import Link
from algorithms.placement import check_placement
from algorithms.placers.baseline import ExpertPlacer
from algorithms.simulator import simulate
from backends.profilers import mean_profile

log = logging.getLogger("fidelity_tf")

# a split the MLP has no expert rules for: its layers over two devices, backward with its forward
SPLITS = {"mlp": [["l0", 0], ["l1", 1], ["out", 1], ["loss", 1]]}


def summary_lines(
    name: str, rows: list[dict[str, Any]], message_costs: str, model_calibration: bool, tau: bool = True
) -> list[str]:
    """One line per prediction variant of `rows` (one model's runs, or all runs with ``tau=False``): the median
    |error|, Kendall's tau between predicted and measured steps, and the pairs the measurement resolves (medians
    further apart than the larger IQR, `orchestrator.report.fidelity.resolved_order`): how many, how many the
    prediction reverses, and tau over them."""
    from orchestrator.report.fidelity import resolved_order

    variants = [
        ("", "predicted_step_s", "rel_error"),
        (f" ({message_costs} message costs, cal_ms)", "predicted_step_calibrated_s", "rel_error_calibrated"),
        (" (the same without the per-byte time)", "predicted_step_no_byte_costs_s", "rel_error_no_byte_costs"),
    ]
    if model_calibration:
        variants.append(
            (
                " (costs calibrated on its own block placements, mcal_ms)",
                "predicted_step_model_calibrated_s",
                "rel_error_model_calibrated",
            )
        )
        variants.append(
            (
                " (own block placements' costs where they exchange enough messages)",
                "predicted_step_rule_s",
                "rel_error_rule",
            )
        )
        variants.append(
            (
                " (own block placements' costs, the calibration program's hop kept)",
                "predicted_step_own_hop_kept_s",
                "rel_error_own_hop_kept",
            )
        )
        variants.append(
            (
                " (the same where they exchange enough messages)",
                "predicted_step_rule_hop_kept_s",
                "rel_error_rule_hop_kept",
            )
        )
    variants.append(
        (
            " (the message throughput bound, serial_ms: the larger of cal_ms and the single-device step plus the "
            "calibration's step per non-constant message for each)",
            "predicted_step_serial_s",
            "rel_error_serial",
        )
    )
    variants.append((" (sequential sends, burst latency)", "predicted_step_sequential_s", "rel_error_sequential"))
    variants.append(
        (" (pulled receives, requested when idle; benchmark costs)", "predicted_step_pulled_s", "rel_error_pulled")
    )
    variants.append(
        (
            f" (pulled receives, requested when idle; {message_costs} costs fitted with them)",
            "predicted_step_pulled_calibrated_s",
            "rel_error_pulled_calibrated",
        )
    )
    out = []
    for label, pred_key, err_key in variants:
        if any(r.get(err_key) is None for r in rows):  # rows of an older sweep, or a variant not computed
            continue
        med = statistics.median(abs(r[err_key]) for r in rows)
        line = f"{name}{label}: median |error| {med:.1%}"
        if tau:
            t = kendall_tau([r[pred_key] for r in rows], [r["measured_step_s"] for r in rows])
            t_res, n_res, _, n_rev = resolved_order(
                [
                    {
                        "predicted_step_s": r[pred_key],
                        "measured_step_s": r["measured_step_s"],
                        "measured_step_iqr_s": r.get("measured_step_iqr_s"),
                    }
                    for r in rows
                ]
            )
            n = len(rows) * (len(rows) - 1) // 2
            line += (
                f", Kendall tau {t if t is None else round(t, 2)}; pairs resolved {n_res}/{n} ({n_rev} reversed), "
                f"tau over them {'-' if t_res is None else round(t_res, 2)}"
            )
        out.append(line)
    return out


COST_KEYS = ("send_overhead_s", "recv_overhead_s", "send_byte_s", "recv_byte_s")


def serial_message_cost(cal: Any) -> tuple[float, int] | None:
    """The message throughput bound's cost (docs/fidelity.md, session 44): the calibration program's measured step
    on its block placement with the most non-constant messages, less its single-device step (the profile's, the
    median over rounds), per non-constant message; with that count. None without the calibration's measurements."""
    data = getattr(cal, "measured", None)
    if data is None or not data.runs or not data.profile_step_s:
        return None
    single = statistics.median(data.profile_step_s)
    n, step = max((non_constant_messages(data.profile, p), t) for _, p, _, t in data.runs)
    return ((step - single) / n, n) if n > 0 else None


def anatomy_line(an: dict[str, Any]) -> str:
    """One line of a traced step's anatomy (`backends.tensorflow.step_anatomy.anatomy`)."""
    hop = an.get("hop_quantiles_s")
    late = an.get("requested_late")
    devs = ", ".join(
        f"{d}: busy/profile {v['busy_over_profile']:.2f}" if v.get("busy_over_profile") else f"{d}: -"
        for d, v in sorted(an["devices"].items())
    )
    first = ", ".join(
        f"{d} {1e3 * v['first_request_s']:.2f} ms"
        for d, v in sorted(an["devices"].items())
        if v.get("first_request_s") is not None
    )
    return (
        f"span {1e3 * an['span_s']:.2f} ms, no task busy {an.get('all_idle_share', 0.0):.0%}; "
        f"{an['receives']} receives, "
        + ("hop p10/p50/p90 " + "/".join(f"{1e3 * h:.2f}" for h in hop) + " ms" if hop else "no hop")
        + (f", {late:.0%} requested after their tensor was ready" if late is not None else "")
        + f"; first request {first or '-'}; {devs}"
    )


def kendall_tau(a: list[float], b: list[float]) -> float | None:
    """Kendall's tau-b between two orders (None for fewer than two items)."""
    if len(a) < 2:
        return None
    from scipy.stats import kendalltau

    tau = kendalltau(a, b).statistic
    return None if tau != tau else float(tau)


def pooled(results: list[Any]) -> Any:
    """One result for a placement run in several rounds: the first, with the median and IQR over every round's
    counted steps (those no slow spell of a worker's core touched, `RunResult.counted_times`) and the worst
    correctness check."""
    from backends.tensorflow.distributed import iqr

    if len(results) == 1:
        return results[0]
    times = [t for r in results for t in r.counted_times()]
    extra = dict(results[0].extra)
    for key in ("loss_match", "grad_match", "update_match", "correct"):
        extra[key] = all(r.extra.get(key) for r in results)
    return dataclasses.replace(
        results[0],
        measured_step_s=statistics.median(times),
        step_iqr_s=iqr(times),
        step_times_s=times,
        slow_steps=[],
        extra=extra,
    )


def in_step(base: Any, fit: Any, args: Any, model_cfg: Any = None) -> tuple[Any, Any, dict[str, float]]:
    """The in-step calibration (`backends.tensorflow.calibrate.calibrate_in_step`) on the calibration program,
    or on block placements of `model_cfg`'s model: the fit, the cluster with its latency and the burst
    benchmark's bandwidth, and the per-message costs."""
    from backends.tensorflow.calibrate import calibrate_in_step

    total = fit.send_overhead_s + fit.recv_overhead_s
    cal = calibrate_in_step(
        base.with_comm(fit.latency_s, fit.bytes_per_s),
        step_overhead_s=fit.step_overhead_s,
        send_share=fit.send_overhead_s / total if total > 0 else 0.5,
        benchmark_costs=(fit.send_overhead_s, fit.recv_overhead_s),
        rounds=min(2, args.rounds),
        seed=args.seed,
        model_cfg=model_cfg,
        byte_costs=model_cfg is None,  # the wide program's per-byte time: with the calibration program only
        order=args.order,
    )
    costs = {
        "send_overhead_s": cal.send_overhead_s,
        "recv_overhead_s": cal.recv_overhead_s,
        "send_byte_s": cal.send_byte_s,
        "recv_byte_s": cal.recv_byte_s,
    }
    return cal, base.with_comm(cal.latency_s, fit.bytes_per_s), costs


def refitted(
    base: Any,
    fit: Any,
    cal: Any,
    recv_requests: str = "posted",
    latency_s: float | None = None,
    order: str = "executor",
) -> tuple[Any, Any, dict[str, float]]:
    """`cal`'s measurements fitted again (`backends.tensorflow.calibrate.refit`), with `recv_requests` receives
    and, given `latency_s`, the hop held there (only the per-message times free): the fit, the cluster with its
    latency, and the costs (the per-byte ones 0 where `cal` ran no wide program, as a model's own blocks)."""
    from backends.tensorflow.calibrate import refit

    total = fit.send_overhead_s + fit.recv_overhead_s
    again = refit(
        cal,
        step_overhead_s=fit.step_overhead_s,
        recv_requests=recv_requests,
        send_share=fit.send_overhead_s / total if total > 0 else 0.5,
        benchmark_costs=(fit.send_overhead_s, fit.recv_overhead_s),
        latency_s=latency_s,
        order=order,
    )
    costs = {k: getattr(again, k) for k in COST_KEYS}
    return again, base.with_comm(again.latency_s, fit.bytes_per_s), costs


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="+", default=["mlp_tiny", "gnmt_tiny"])
    ap.add_argument("--cluster", default="cpu2")
    ap.add_argument("--placers", nargs="+", default=["single", "m_etf", "expert", "layer_split"])
    ap.add_argument("--profile-warmup", type=int, default=5)
    ap.add_argument("--profile-steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--comm-repeats", type=int, default=5)
    ap.add_argument("--comm-sizes", nargs="*", type=int, default=None, help="bytes (default 1 KB .. 64 MB)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--rounds", type=int, default=3, help="profile and run every placement this many times, interleaved"
    )
    ap.add_argument(
        "--message-costs",
        choices=["in_step", "benchmark"],
        default="in_step",
        help="in_step: latency and per-message costs fitted to the runtime's placed steps of a calibration "
        "program (backends.tensorflow.calibrate; the burst benchmark's prediction is printed beside it); "
        "benchmark: the burst benchmark's only",
    )
    ap.add_argument(
        "--model-calibration",
        action="store_true",
        help="also fit the latency and per-message costs to block placements of each evaluated model itself "
        "(backends.tensorflow.calibrate.calibrate_in_step(model_cfg=...); none of them a placement under "
        "evaluation) and print that prediction too (mcal_ms)",
    )
    ap.add_argument(
        "--own-costs-min-messages",
        type=int,
        default=200,
        help="with --model-calibration, the rule's threshold: a model's own block placements' costs are used when "
        "the busiest of them exchanges at least this many messages per step, else the calibration program's",
    )
    ap.add_argument(
        "--order",
        choices=["executor", "schedule"],
        default="executor",
        help="executor: each worker's executor orders its ready ops and the simulator dispatches first-in "
        "first-out; schedule: each placement runs in the order the simulator's first-in first-out dispatch gives "
        "it with the in-step costs (fixed on the first round's profile), enforced by control edges "
        "(TFDistributedRuntime(order='schedule')), and every prediction replays that order; the calibration's "
        "block placements run and are simulated in their topological order",
    )
    ap.add_argument("--json", default=None, help="write the rows to this JSON file")
    ap.add_argument(
        "--save-cases",
        type=Path,
        default=None,
        help="write each run's prediction inputs here (fidelity.save_case: in-step costs as <placer>, those fitted "
        "with pulled receives as <placer>@pulled, the burst benchmark's as <placer>@benchmark; the empty step "
        "predicted_step adds in 'step_overhead_s')",
    )
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )

    from backends.tensorflow import TFBackend
    from backends.tensorflow.config import load_model_cfg
    from backends.tensorflow.dist_profile import comm_benchmark_distributed, predicted_step, profile_distributed
    from backends.tensorflow.distributed import TFDistributedRuntime

    load0 = os.getloadavg()
    print(f"load average at start: {load0[0]:.2f} (1 min), host cores {sorted(os.sched_getaffinity(0))}")
    backend = TFBackend()
    base = load_cluster(args.cluster)
    t0 = time.perf_counter()
    fit = comm_benchmark_distributed(base, args.comm_sizes, args.comm_repeats)
    links = {pair: Link(lat, bw) for pair, (lat, bw) in fit.links.items()}
    cluster = base.with_comm(fit.latency_s, fit.bytes_per_s, links)
    # the same fit, but each sender moves one tensor at a time at the marginal cost of a transfer in a burst
    seq_latency = max(fit.latency_s, fit.per_transfer_s)
    seq_cluster = dataclasses.replace(cluster, mode="sequential", latency_s=seq_latency, links={})
    print(
        f"comm fit ({time.perf_counter() - t0:.0f} s) from gRPC transfers between 2 pinned workers: latency "
        f"{fit.latency_s * 1e6:.1f} us, bandwidth {fit.bytes_per_s / 1e6:.1f} MB/s; residual rms "
        f"{fit.residual_rms_s * 1e3:.3f} ms, largest relative residual {fit.residual_max_rel:.2f}; empty step on "
        f"2 workers {fit.step_overhead_s * 1e3:.3f} ms; a 256-byte transfer in a burst costs "
        f"{fit.per_transfer_s * 1e6:.1f} us (bursts {[(int(k), round(t * 1e3, 3)) for k, t in fit.burst_medians]} ms), "
        f"of which {fit.send_overhead_s * 1e6:.1f} us of the sender's and {fit.recv_overhead_s * 1e6:.1f} us of the "
        "receiver's processor time"
    )
    for pair, pts in fit.medians.items():
        print(f"  {pair}: " + ", ".join(f"{int(b)}B {t * 1e3:.3f}ms" for b, t in pts))
    cal = None
    cal_cluster, cal_costs = cluster, {"send_overhead_s": fit.send_overhead_s, "recv_overhead_s": fit.recv_overhead_s}
    pull_cluster, pull_costs = cal_cluster, cal_costs  # the costs of the pulled-receive predictions
    if args.message_costs == "in_step":
        t0 = time.perf_counter()
        cal, cal_cluster, cal_costs = in_step(base, fit, args)
        print(
            f"in-step calibration ({time.perf_counter() - t0:.0f} s): latency {cal.latency_s * 1e6:.1f} us, per "
            f"message send {cal.send_overhead_s * 1e6:.1f} us, receive {cal.recv_overhead_s * 1e6:.1f} us; relative "
            f"RMS {100 * cal.rel_rms:.1f}% (burst benchmark's costs {100 * cal.rel_rms_benchmark:.1f}%): "
            + ", ".join(
                f"{r['messages']} msgs {1e3 * r['measured_s']:.3g}/{1e3 * r['predicted_s']:.3g}"
                f"/{1e3 * r['predicted_benchmark_s']:.3g} ms"
                for r in cal.placements
            )
            + " (measured/in-step/benchmark)"
        )
        print(
            f"per byte: send {cal.send_byte_s * 1e9:.2f} ns, receive {cal.recv_byte_s * 1e9:.2f} ns; wide program "
            f"relative RMS {100 * cal.rel_rms_bytes:.1f}%: "
            + ", ".join(
                f"{r['messages']} msgs {1e3 * r['measured_s']:.3g}/{1e3 * r['predicted_s']:.3g} ms "
                f"({1e3 * r['predicted_without_byte_costs_s']:.3g} without)"
                for r in cal.byte_placements
            )
        )
    if cal is not None:
        pull, pull_cluster, pull_costs = refitted(base, fit, cal, recv_requests="when_idle", order=args.order)
        print(
            f"the same calibration steps fitted with pulled receives (requested when idle): latency "
            f"{pull.latency_s * 1e6:.1f} us, per message send {pull.send_overhead_s * 1e6:.1f} us, receive "
            f"{pull.recv_overhead_s * 1e6:.1f} us, per byte {pull.send_byte_s * 1e9:.2f} + "
            f"{pull.recv_byte_s * 1e9:.2f} ns; relative RMS {100 * pull.rel_rms:.1f}% (posted: "
            f"{100 * cal.rel_rms:.1f}%), wide program {100 * pull.rel_rms_bytes:.1f}% (posted: "
            f"{100 * cal.rel_rms_bytes:.1f}%)"
        )
    serial = serial_message_cost(cal)
    if serial is not None:
        print(
            f"message throughput bound: {serial[0] * 1e6:.1f} us of step per non-constant message (the calibration "
            f"program's placement with the most, {serial[1]})"
        )
    runtime = TFDistributedRuntime(warmup=args.warmup, steps=args.steps, check_correctness=True, order=args.order)
    rows: list[dict[str, Any]] = []
    rng = random.Random(args.seed)
    for name in args.models:
        cfg = load_model_cfg(name, None, seed=args.seed)
        model = backend.build(cfg)
        captured = backend.capture(model)
        candidates = placers(cfg, None, args.seed)
        family = str(cfg.get("family", ""))
        if family in SPLITS:
            candidates.append(("layer_split", ExpertPlacer(SPLITS[family], strip_prefixes=["gradients/"]), None))
        profiles, infos = [], []
        assigns: dict[str, dict[str, str]] = {}
        scheds: dict[str, dict[str, list[str]]] = {}  # --order schedule: each placement's enforced order
        runs: dict[str, list[Any]] = {}
        for rnd in range(args.rounds):
            g = profile_distributed(model, captured, cluster, warmup=args.profile_warmup, steps=args.profile_steps)
            profiles.append(g)
            infos.append(g.nx.graph["profile"])
            if rnd == 0:  # placements are made on the first round's profile
                for label, placer, why in candidates:
                    if label not in args.placers:
                        continue
                    if placer is None:
                        print(f"{label:<12} skipped: {why}")
                        continue
                    try:
                        assigns[label] = dict(placer.place(g, cluster).assignment)
                        check_placement(g, cluster, assigns[label])
                    except Exception as exc:  # report and go on with the other placers
                        assigns.pop(label, None)
                        print(f"{label:<12} placement failed: {type(exc).__name__}: {exc}")
                        continue
                    if args.order == "schedule":  # the simulator's first-in first-out order, with the in-step costs
                        first = simulate(g, cal_cluster, assigns[label], record_memory=False, **cal_costs)
                        scheds[label] = {d: list(ops) for d, ops in first.order.items()}
            order = list(assigns)
            rng.shuffle(order)  # a new order every round: a drift of the machine's speed does not favour one
            for label in order:
                done = runtime.run(backend, model, g, assigns[label], scheds.get(label, {}), cluster)
                runs.setdefault(label, []).append(done)
        graph = mean_profile(profiles)
        # the single-device step the message throughput bound starts from (its placement's prediction)
        one = {op: cluster.names[0] for op in graph.nx.nodes}
        sim_one = simulate(graph, cal_cluster, one, record_memory=False, **cal_costs)
        pred_one = predicted_step(sim_one.makespan, graph, {2: fit.step_overhead_s}, 1)
        info = infos[0]
        mcal_cluster, mcal_costs = None, {}
        hop_cluster, hop_costs = None, {}
        mcal_msgs = 0  # the most messages per step among the model's own block placements
        if args.model_calibration:
            t0 = time.perf_counter()
            mcal, mcal_cluster, mcal_costs = in_step(base, fit, args, model_cfg=cfg)
            mcal_msgs = max((int(r["messages"]) for r in mcal.placements), default=0)
            if cal is not None:  # the same steps with the calibration program's hop kept (docs/fidelity.md, s36)
                hop, hop_cluster, hop_costs = refitted(base, fit, mcal, latency_s=cal.latency_s, order=args.order)
                print(
                    f"{name}: its own block placements with the calibration program's hop kept "
                    f"({cal.latency_s * 1e6:.1f} us): per message send {hop.send_overhead_s * 1e6:.1f} us, receive "
                    f"{hop.recv_overhead_s * 1e6:.1f} us; relative RMS {100 * hop.rel_rms:.1f}%"
                )
            print(
                f"{name}: calibration on its own block placements ({time.perf_counter() - t0:.0f} s): latency "
                f"{mcal.latency_s * 1e6:.1f} us, per message send {mcal.send_overhead_s * 1e6:.1f} us, receive "
                f"{mcal.recv_overhead_s * 1e6:.1f} us; relative RMS {100 * mcal.rel_rms:.1f}%: "
                + ", ".join(
                    f"{r['messages']} msgs {1e3 * r['measured_s']:.3g}/{1e3 * r['predicted_s']:.3g} ms"
                    for r in mcal.placements
                )
            )
        steps_ms = ", ".join(f"{1e3 * i['untraced_step_s']:.3g} ({i.get('pairs_counted')} pairs)" for i in infos)
        print(
            f"\n{name}: {len(graph)} ops; profiled in a pinned worker ({info['setting']}), {args.rounds} round(s): "
            f"traced op sum {info['traced_op_sum_s'] * 1e3:.3f} ms, measured single-device step per round "
            f"{steps_ms} ms, empty step {info['step_overhead_s'] * 1e3:.3f} ms, op times scaled by {info['scale']:.3f}"
        )
        print(
            f"{'placer':<12}{'dev':>4}{'sim_ms':>9}{'pred_ms':>9}{'meas_ms':>9}{'iqr_ms':>8}{'error':>8}"
            f"{'seq_ms':>9}{'seq_err':>8}{'cal_ms':>9}{'cal_err':>8}"
            f"{'pred_MB':>9}{'meas_MB':>9}{'traffic_B':>11}{'meas_B':>9}  check"
        )
        for label, assign in assigns.items():
            res = pooled(runs[label])
            rounds_ex = [r.extra for r in runs[label]]
            per_msg = {"send_overhead_s": fit.send_overhead_s, "recv_overhead_s": fit.recv_overhead_s}
            sched = scheds.get(label)  # None: the simulator's own dispatch (--order executor)
            sim = simulate(graph, cluster, assign, schedule=sched, **per_msg)
            used = len(set(assign.values()))
            pred = predicted_step(sim.makespan, graph, {2: fit.step_overhead_s}, used)
            sim_seq = simulate(graph, seq_cluster, assign, schedule=sched, **per_msg)
            pred_seq = predicted_step(sim_seq.makespan, graph, {2: fit.step_overhead_s}, used)
            sim_cal = simulate(graph, cal_cluster, assign, schedule=sched, record_memory=False, **cal_costs)
            pred_cal = predicted_step(sim_cal.makespan, graph, {2: fit.step_overhead_s}, used)
            err_cal = (pred_cal - res.measured_step_s) / res.measured_step_s
            # the message throughput bound (docs/fidelity.md, session 44): the single-device step plus the
            # calibration's step per non-constant message for each, where that is longer than cal_ms
            n_nc = non_constant_messages(graph, assign)
            pred_serial = pred_cal if serial is None or used == 1 else max(pred_cal, pred_one + serial[0] * n_nc)
            # the same without the per-byte processor time (the wide program's), for comparison
            no_bytes = {k: v for k, v in cal_costs.items() if not k.endswith("_byte_s")}
            sim_nb = simulate(graph, cal_cluster, assign, schedule=sched, record_memory=False, **no_bytes)
            pred_nb = predicted_step(sim_nb.makespan, graph, {2: fit.step_overhead_s}, used)
            pred_mcal = None
            if mcal_cluster is not None:
                sim_mcal = simulate(graph, mcal_cluster, assign, schedule=sched, record_memory=False, **mcal_costs)
                pred_mcal = predicted_step(sim_mcal.makespan, graph, {2: fit.step_overhead_s}, used)
            pred_hop = None
            if hop_cluster is not None:
                sim_hop = simulate(graph, hop_cluster, assign, schedule=sched, record_memory=False, **hop_costs)
                pred_hop = predicted_step(sim_hop.makespan, graph, {2: fit.step_overhead_s}, used)
            enough = mcal_msgs >= args.own_costs_min_messages
            pred_rule_hop = pred_hop if pred_hop is not None and enough else pred_cal
            # the rule under test (docs/fidelity.md, session 36): the model's own costs where its block
            # placements exchange enough messages to fit them, else the calibration program's
            pred_rule = pred_mcal if pred_mcal is not None and mcal_msgs >= args.own_costs_min_messages else pred_cal
            # TensorFlow's receives are pulled: requested when the receiving executor first idles (simulate's
            # recv_requests="when_idle"), with either cost model
            sim_pull = simulate(
                graph, cluster, assign, schedule=sched, record_memory=False, recv_requests="when_idle", **per_msg
            )
            pred_pull = predicted_step(sim_pull.makespan, graph, {2: fit.step_overhead_s}, used)
            sim_pull_cal = simulate(
                graph,
                pull_cluster,
                assign,
                schedule=sched,
                record_memory=False,
                recv_requests="when_idle",
                **pull_costs,
            )
            pred_pull_cal = predicted_step(sim_pull_cal.makespan, graph, {2: fit.step_overhead_s}, used)
            if args.save_cases is not None:
                overhead = {"step_overhead_s": pred - sim.makespan}  # what predicted_step adds for `used` workers
                case_sched: dict[str, list[str]] = sched or {}
                save_case(args.save_cases, name, args.cluster, label, (graph, assign, case_sched, None, "arrival"),
                          cal_cluster, tuple(cal_costs.get(k, 0.0) for k in COST_KEYS), extra=overhead)  # fmt: skip
                save_case(args.save_cases, name, args.cluster, f"{label}@pulled",
                          (graph, assign, case_sched, None, "arrival"), pull_cluster,
                          tuple(pull_costs.get(k, 0.0) for k in COST_KEYS), extra=overhead)  # fmt: skip
                bench = (fit.send_overhead_s, fit.recv_overhead_s, 0.0, 0.0)
                save_case(args.save_cases, name, args.cluster, f"{label}@benchmark",
                          (graph, assign, case_sched, None, "arrival"), cluster, bench, extra=overhead)  # fmt: skip
            err = (pred - res.measured_step_s) / res.measured_step_s
            err_seq = (pred_seq - res.measured_step_s) / res.measured_step_s
            dev_peak = max(sim.peak_memory, key=lambda d: sim.peak_memory[d])
            ex = res.extra
            ok = ex.get("correct")
            row = {
                "model": name,
                "placer": label,
                "devices_used": used,
                "simulated_makespan_s": sim.makespan,
                "predicted_step_s": pred,
                "measured_step_s": res.measured_step_s,
                "measured_step_iqr_s": res.step_iqr_s,
                "measured_steps": len(res.step_times_s),  # counted, over every round
                # per round: steps a slow spell of a worker's core touched, left out (None: every step counted)
                "slow_steps": [e.get("slow_steps") for e in rounds_ex],
                "spells_prevail": [e.get("spells_prevail") for e in rounds_ex],
                "rel_error": err,
                "predicted_step_sequential_s": pred_seq,
                "rel_error_sequential": err_seq,
                # the in-step calibration's latency and costs (the burst benchmark's without --message-costs in_step)
                "predicted_step_calibrated_s": pred_cal,
                "rel_error_calibrated": err_cal,
                "predicted_step_pulled_s": pred_pull,
                "rel_error_pulled": (pred_pull - res.measured_step_s) / res.measured_step_s,
                "predicted_step_pulled_calibrated_s": pred_pull_cal,
                "rel_error_pulled_calibrated": (pred_pull_cal - res.measured_step_s) / res.measured_step_s,
                "nonconstant_messages": n_nc,
                "predicted_step_serial_s": pred_serial,
                "rel_error_serial": (pred_serial - res.measured_step_s) / res.measured_step_s,
                "predicted_step_no_byte_costs_s": pred_nb,
                "rel_error_no_byte_costs": (pred_nb - res.measured_step_s) / res.measured_step_s,
                "message_costs": args.message_costs,
                # --model-calibration: the costs fitted to this model's own block placements
                "model_calibration_messages": mcal_msgs if pred_mcal is not None else None,
                "predicted_step_own_hop_kept_s": pred_hop,
                "rel_error_own_hop_kept": None
                if pred_hop is None
                else (pred_hop - res.measured_step_s) / res.measured_step_s,
                "predicted_step_rule_hop_kept_s": pred_rule_hop,
                "rel_error_rule_hop_kept": (pred_rule_hop - res.measured_step_s) / res.measured_step_s,
                "predicted_step_rule_s": pred_rule,
                "rel_error_rule": (pred_rule - res.measured_step_s) / res.measured_step_s,
                "predicted_step_model_calibrated_s": pred_mcal,
                "rel_error_model_calibrated": None
                if pred_mcal is None
                else (pred_mcal - res.measured_step_s) / res.measured_step_s,
                "host_interference": ex.get("host_interference"),
                "predicted_peak_bytes": sim.peak_memory,
                "measured_peak_bytes": res.peak_memory_bytes,
                "measured_rss_growth_bytes": ex["rss_growth_bytes"],
                "predicted_traffic_bytes": sim.traffic_bytes,
                "measured_traffic_bytes": res.traffic_bytes,
                "loss_match": ex.get("loss_match"),
                "grad_match": ex.get("grad_match"),
                "grad_max_rel_error": ex.get("grad_max_rel_error"),
                "update_match": ex.get("update_match"),
                "update_max_rel_error": ex.get("update_max_rel_error"),
                "loss_after_update_rel_error": ex.get("loss_after_update_rel_error"),
                "workers": res.workers,
                "oversubscribed": ex["oversubscribed"],
                # the last round's traced step (backends.tensorflow.step_anatomy)
                "step_anatomy": runs[label][-1].extra.get("step_anatomy"),
                # each round's workers' processor time per measured step, {device: s} (procfs)
                "worker_cpu_per_step_s": [e.get("worker_cpu_per_step_s") for e in rounds_ex],
            }
            rows.append(row)
            print(
                f"{label:<12}{used:>4}{sim.makespan * 1e3:>9.3f}{pred * 1e3:>9.3f}{res.measured_step_s * 1e3:>9.3f}"
                f"{(res.step_iqr_s or 0) * 1e3:>8.3f}{err:>+8.1%}{pred_seq * 1e3:>9.3f}{err_seq:>+8.1%}"
                f"{pred_cal * 1e3:>9.3f}{err_cal:>+8.1%}"
                f"{sim.peak_memory[dev_peak] / 1e6:>9.3f}"
                f"{res.peak_memory_bytes.get(dev_peak, 0) / 1e6:>9.3f}{sim.traffic_bytes:>11.0f}"
                f"{res.traffic_bytes:>9.0f}  {'ok' if ok else 'MISMATCH'}"
                + (
                    ""
                    if pred_mcal is None
                    else f"  mcal_ms {pred_mcal * 1e3:.3f} ({row['rel_error_model_calibrated']:+.1%})"
                )
            )
        for row in rows:
            if row["model"] == name and row["devices_used"] > 1 and row["step_anatomy"]:
                print(f"  {row['placer']:<10} traced step: {anatomy_line(row['step_anatomy'])}")
        mine = [r for r in rows if r["model"] == name]
        if mine:
            for line in summary_lines(name, mine, args.message_costs, args.model_calibration):
                print(line)
    if rows:
        for line in summary_lines("all runs", rows, args.message_costs, args.model_calibration, tau=False):
            print(line)
    load1 = os.getloadavg()
    print(f"\nload average at end: {load1[0]:.2f} (1 min); above ~{len(os.sched_getaffinity(0))} the timings are noisy")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1, default=str)
    return rows


if __name__ == "__main__":
    main()
