"""The thesis' TensorFlow-Examples networks (backends/tensorflow/examples.py): their structure, the dynamic
RNN's copy-through and last-relevant gather against a numpy reading of the same step, training, and capture."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import yaml

tf = pytest.importorskip("tensorflow")

from algorithms.errors import ConfigError  # noqa: E402
from backends.tensorflow.capture import capture  # noqa: E402
from backends.tensorflow.models import build_model  # noqa: E402

CONF = Path(__file__).resolve().parent.parent / "conf" / "model"


def _cfg(name: str, **over):
    cfg = yaml.safe_load((CONF / f"{name}.yaml").read_text())
    cfg.update(seed=0, **over)
    return cfg


def _forward_types(model) -> Counter:
    return Counter(
        op.type
        for op in model.graph.get_operations()
        if not op.name.startswith(("gradients", model.optimizer_scope, "data/"))
    )


def _shape(model, name: str) -> list[int]:
    (var,) = [v for v in model.graph.get_collection("trainable_variables") if v.op.name == name]
    return var.shape.as_list()


def test_convolutional_network_has_the_examples_layers():
    model = build_model(_cfg("convolutional_network", batch_size=4))
    types = _forward_types(model)
    assert types["Conv2D"] == 2 and types["MaxPool"] == 2 and types["BiasAdd"] == 2
    assert types["MatMul"] == 2  # the dense layer of 1,024 and the classifier
    assert _shape(model, "fc1/weights") == [7 * 7 * 64, 1024]
    assert model.optimizer_scope == "Adam"


def test_recurrent_network_unrolls_one_cell_over_the_rows():
    model = build_model(_cfg("recurrent_network", batch_size=4))
    steps = {m.group(1) for op in model.graph.get_operations() if (m := re.match(r"rnn/(t\d+)/", op.name))}
    assert steps == {f"t{k}" for k in range(28)}
    assert _forward_types(model)["MatMul"] == 28 + 1
    assert _shape(model, "rnn/kernel") == [28 + 128, 4 * 128]


def test_dynamic_rnn_copies_state_through_past_each_length_and_gathers_the_last_relevant_output():
    batch, steps = 16, 20
    model = build_model(_cfg("dynamic_rnn", batch_size=batch))
    g = model.graph
    assert _forward_types(model)["Select"] == 3 * steps
    outs = [g.get_tensor_by_name(f"rnn/t{t}/output:0") for t in range(steps)]
    last = g.get_tensor_by_name("last_relevant/GatherV2:0")
    lengths = g.get_tensor_by_name("data/lengths:0")
    with tf.compat.v1.Session(graph=g) as sess:
        sess.run(model.init_op)
        per_step, gathered, n = sess.run([outs, last, lengths])
    per_step = np.stack(per_step, axis=1)  # [B, T, H]
    assert n.min() >= 3 and n.max() <= steps and len(set(n.tolist())) > 1
    for b in range(batch):
        assert np.all(per_step[b, n[b] :] == 0.0), b  # zeros past the sequence's end
        assert np.all(np.abs(per_step[b, : n[b]]).sum(axis=1) > 0), b
        np.testing.assert_array_equal(gathered[b], per_step[b, n[b] - 1])


@pytest.mark.parametrize("name", ["convolutional_network", "recurrent_network", "dynamic_rnn"])
def test_the_examples_train_and_capture(name):
    model = build_model(_cfg(name, batch_size=8))
    with tf.compat.v1.Session(graph=model.graph) as sess:
        sess.run(model.init_op)
        losses = [sess.run([model.train_op, model.loss])[1] for _ in range(4)]
    assert np.all(np.isfinite(losses)) and losses[-1] < losses[0], losses
    graph = capture(model)
    assert len(graph) > 100
    assert any(len(g) > 1 for g in graph.colocation_groups().values())


def test_a_dynamic_rnn_needs_one_feature_per_step():
    with pytest.raises(ConfigError, match="n_input"):
        build_model(_cfg("dynamic_rnn", batch_size=4, n_input=3))
