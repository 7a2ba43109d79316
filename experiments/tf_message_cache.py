"""Does a TensorFlow transfer cost more when the sender's ops sweep a large working set? (issue 16)

inception_v3_tiny's transfers cost a placed step about twice what gnmt_tiny's do (docs/fidelity.md, sessions
36-38), and a profile of the workers (perf, session 38) shows every part of a transfer's processor time, gRPC's
own code included, 1.7 times larger per transfer in inception_v3_tiny, its ops 1.5 times slower than on one
device and glibc's allocator three times busier: as if the same code ran on colder caches. One candidate is the
working set of the ops between the transfers: inception_v3_tiny's convolutions stream through feature maps and
filters, gnmt_tiny's element-wise ops through a few hundred bytes.

This script isolates that on two pinned gRPC workers (`backends.tensorflow.workers.WorkerPool`). For each
working set W it builds a chain of `--ops` element-wise ops on the first worker, each reading and writing a
W-byte tensor, and after every op a slice of its output (`--slice-bytes`, 256 by default) that an ``Identity``
reads: on the second worker (the transfer variant) or on the first (the local one). Steps of the two variants
alternate (`--repeats` pairs); the median difference over the chain's transfers is what one transfer added to
the step, as the sender's blocking share plus whatever the transfers did to the chain's ops. If transfers cost
more beside larger working sets, that figure grows with W; if they cost more above TensorFlow's 1 KB copy
threshold, it grows with the slice.

    python experiments/tf_message_cache.py --sizes 4096 65536 1048576 4194304 16777216
    python experiments/tf_message_cache.py --sizes 65536 --slice-bytes 256 1024 1028 4096 16384
"""

from __future__ import annotations

import argparse
import os
import statistics

from predicted_vs_measured_tf import load_cluster


def main(argv: list[str] | None = None) -> dict[tuple[int, int], dict[str, float]]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", nargs="+", type=int, default=[4096, 65536, 1048576, 4194304, 16777216])
    ap.add_argument(
        "--slice-bytes", nargs="+", type=int, default=[256], help="bytes of each transferred slice (a list: each "
        "working set is run with each; TensorFlow's gRPC path copies a tensor of at most 1,024 bytes into the "
        "message and sends a larger one by reference)",
    )  # fmt: skip
    ap.add_argument("--ops", type=int, default=64, help="element-wise ops in the chain (one transfer after each)")
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--cluster", default="cpu2")
    args = ap.parse_args(argv)

    import tensorflow as tf

    from backends.tensorflow.dist_profile import _alternating
    from backends.tensorflow.session import session_config
    from backends.tensorflow.workers import WorkerPool

    v1 = tf.compat.v1
    v1.disable_eager_execution()
    cluster = load_cluster(args.cluster)
    a, b = cluster.names[:2]
    print(f"load average at start: {os.getloadavg()[0]:.2f} (1 min); {args.ops} ops per chain, {args.repeats} pairs")
    out: dict[tuple[int, int], dict[str, float]] = {}
    graph = tf.Graph()
    with WorkerPool(cluster, [a, b]) as pool:
        dev = pool.device_map()
        variants = {}
        with graph.as_default():
            for w in args.sizes:
                for sb in args.slice_bytes:
                    k = max(1, sb // 4)
                    n = max(k, w // 4)
                    tag = f"w{w}_s{sb}"
                    with tf.device(dev[a]):
                        x = v1.get_variable(tag, shape=[n], initializer=v1.ones_initializer(), use_resource=True)
                        y = x.value()
                        slices = []
                        for i in range(args.ops):
                            y = tf.multiply(y, 1.0000001, name=f"{tag}/op{i}")
                            slices.append(tf.slice(y, [0], [k], name=f"{tag}/slice{i}"))
                        local_reads = [tf.identity(s, name=f"{tag}/local{i}") for i, s in enumerate(slices)]
                    with tf.device(dev[b]):
                        remote_reads = [tf.identity(s, name=f"{tag}/remote{i}") for i, s in enumerate(slices)]
                        nb = tf.no_op(name=f"{tag}/noop_b")
                    variants[(w, sb)] = (tf.group(*local_reads, y, nb), tf.group(*remote_reads, y))
            init = v1.global_variables_initializer()
        with v1.Session(pool.target, graph=graph, config=session_config()) as sess:
            sess.run(init)
            for (w, sb), (local, remote) in variants.items():
                for _ in range(3):
                    sess.run(local)
                    sess.run(remote)
                pairs = _alternating(sess, local, remote, args.repeats)
                loc = statistics.median(p[0] for p in pairs)
                rem = statistics.median(p[1] for p in pairs)
                diff = statistics.median(r - lo for lo, r in pairs)
                per = diff / args.ops
                out[(w, sb)] = {"local_s": loc, "remote_s": rem, "per_transfer_s": per}
                print(
                    f"W {w:>9} B, slices of {sb:>6} B: local chain {loc * 1e3:7.3f} ms "
                    f"({loc / args.ops * 1e6:6.1f} us per op), with transfers {rem * 1e3:7.3f} ms; "
                    f"one transfer adds {per * 1e6:6.1f} us"
                )
    print(f"load average at end: {os.getloadavg()[0]:.2f} (1 min)")
    return out


if __name__ == "__main__":
    main()
