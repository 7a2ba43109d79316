"""The thesis' three TensorFlow graphs (seed 004, Table 7.2 and 6.1), rebuilt in `tf.compat.v1` graph mode.

The thesis extracted its "graphs from TensorFlow" from three programs of the TensorFlow-Examples repository
(aymericdamien/TensorFlow-Examples, ``examples/3_NeuralNetworks``, as followed on 28 February 2017, its
footnotes 1-3): ``convolutional_network``, ``recurrent_network`` and ``dynamic_rnn``. This module builds the
same networks with this zoo's raw-op layers, so that Figures 7.4 - 7.7 run on those models rather than on
stand-ins of a similar node count:

* ``convnet`` (convolutional_network): MNIST images (784 pixels, reshaped to 28x28x1); 5x5 convolution to 32
  channels with a bias and ReLU, 2x2 max pooling; 5x5 convolution to 64, bias, ReLU, 2x2 max pooling; a dense
  layer of 1,024 with ReLU; dropout (keep 0.75); a dense layer to the 10 classes; softmax cross-entropy
  against one-hot labels; Adam (lr 0.001); batch 128.
* ``lstm_classifier`` (recurrent_network): each image row is a time step (28 steps of 28 inputs); one basic LSTM
  cell of 128 units (forget bias 1) unrolled over the steps (``static_rnn``); the last step's output to the 10
  classes; softmax cross-entropy; Adam (lr 0.001); batch 128.
  With ``dynamic: true`` (dynamic_rnn): sequences of one feature and variable length (3 to ``steps`` = 20
  here, padded with zeros), 64 units, 2 classes, plain gradient descent (lr 0.01). The example passes the
  lengths to the unrolled RNN (``sequence_length``), which makes every step emit zeros and carry its state
  through once a sequence has ended (``where(t >= length, zeros, output)``, the same for the cell and the
  hidden state), and then gathers each sequence's last relevant output by the flat index
  ``range(batch) * steps + (length - 1)``.

Choices where the rebuild cannot match TensorFlow 1.0 op for op:
* TensorFlow 1.0's ``sequence_length`` path also wraps each step in two ``tf.cond`` that skip the cell when
  the whole batch is past (or before) the lengths' extremes. Control-flow ops have no place in a placed,
  captured graph (the lab's captures hold no ``Switch``/``Merge``); with lengths drawn from 3 to 20 in a batch
  of 128 both conditions are almost surely false, and the select path above is what runs, so it is built alone.
* The inputs are constants under ``data/`` drawn from the model's seed (MNIST-like pixels in [0, 1) and
  one-hot labels; the toy sequences of the example: half linear ramps, half random values, scaled by 1/1000)
  instead of placeholders fed by a reader, as everywhere in this zoo (`backends.tensorflow.models`).
* Weights are drawn from a unit normal, as the example's ``tf.random_normal`` does; the dropout has an op seed
  so that every run of the same config draws the same mask.
* The examples' accuracy ops and the variable initialisers are not part of a training step, so the capture
  leaves them out: the graphs here are the training step's ops, which is fewer nodes than Table 7.2's
  ``as_graph_def()`` counts (347, 3,069, 5,271), taken from the whole graph of TensorFlow 1.0.

Op names: ``data``, ``conv1``, ``conv2``, ``fc1``, ``out``, ``loss`` (convnet); ``rnn/t<k>`` for each time step,
``rnn`` for the cell's variables, ``out``, ``loss`` (lstm_classifier). Building is O(steps) ops.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import tensorflow as tf

from algorithms.errors import ConfigError

from .config import _int
from .layers import _var

v1 = tf.compat.v1


def _normal(name: str, shape: list[int]) -> tf.Tensor:
    """A trainable variable drawn from N(0, 1), the examples' ``tf.Variable(tf.random_normal(shape))``."""
    return _var(name, shape, v1.random_normal_initializer(stddev=1.0))


def _dense_xent(logits: tf.Tensor, onehot: tf.Tensor) -> tf.Tensor:
    """``reduce_mean(softmax_cross_entropy_with_logits(logits, labels))`` against one-hot labels."""
    with v1.name_scope("loss/"):
        per = tf.nn.softmax_cross_entropy_with_logits(labels=onehot, logits=logits)
        return tf.reduce_mean(per, name="mean")


def _onehot(rng: np.random.Generator, batch: int, classes: int, labels: np.ndarray | None = None) -> tf.Tensor:
    idx = rng.integers(0, classes, size=batch) if labels is None else labels
    return tf.constant(np.eye(classes, dtype=np.float32)[idx], name="labels")


def _convnet(cfg: Mapping[str, Any], rng: np.random.Generator, batch: int) -> tf.Tensor:
    """convolutional_network: two 5x5 convolutions with max pooling, a dense layer, dropout, the classifier."""
    side, classes = _int(cfg, "image_size"), _int(cfg, "classes")
    c1, c2, hidden = _int(cfg, "conv1"), _int(cfg, "conv2"), _int(cfg, "hidden")
    keep = float(cfg.get("keep_prob", 0.75))
    if not 0.0 < keep <= 1.0:
        raise ConfigError(f"model.keep_prob must be in (0, 1], got {keep}")
    if side % 4:
        raise ConfigError(f"model.image_size={side}: two 2x2 poolings need a multiple of 4")
    with v1.name_scope("data/"):
        x = tf.constant(rng.random((batch, side * side), dtype=np.float32), name="images")
        y = _onehot(rng, batch, classes)

    def conv(h: tf.Tensor, c_out: int, scope: str) -> tf.Tensor:
        with v1.variable_scope(scope):
            w = _normal("weights", [5, 5, int(h.shape[-1]), c_out])
            b = _normal("bias", [c_out])
            h = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(h, w, strides=[1, 1, 1, 1], padding="SAME"), b))
            return tf.nn.max_pool2d(h, ksize=2, strides=2, padding="SAME", name="pool")

    h = conv(tf.reshape(x, [-1, side, side, 1]), c1, "conv1")
    h = conv(h, c2, "conv2")
    flat = (side // 4) * (side // 4) * c2
    with v1.variable_scope("fc1"):
        w, b = _normal("weights", [flat, hidden]), _normal("bias", [hidden])
        h = tf.nn.relu(tf.add(tf.matmul(tf.reshape(h, [-1, flat]), w), b))
        if keep < 1.0:
            h = tf.nn.dropout(h, rate=1.0 - keep, seed=1)
    with v1.variable_scope("out"):
        w, b = _normal("weights", [hidden, classes]), _normal("bias", [classes])
        logits = tf.add(tf.matmul(h, w), b)
    return _dense_xent(logits, y)


def _lstm_step(
    x: tf.Tensor, state: tuple[tf.Tensor, tf.Tensor], w: tf.Tensor, b: tf.Tensor
) -> tuple[tf.Tensor, tf.Tensor]:
    """TensorFlow 1.0's ``BasicLSTMCell`` (forget bias 1): ``[i, j, f, o] = [x, h] W + b``,
    ``c' = c sigmoid(f + 1) + sigmoid(i) tanh(j)``, ``h' = tanh(c') sigmoid(o)``."""
    c, h = state
    z = tf.nn.bias_add(tf.matmul(tf.concat([x, h], axis=1), w), b)
    i, j, f, o = tf.split(z, 4, axis=1)
    c_new = c * tf.sigmoid(f + 1.0) + tf.sigmoid(i) * tf.tanh(j)
    return c_new, tf.tanh(c_new) * tf.sigmoid(o)


def _toy_sequences(rng: np.random.Generator, batch: int, steps: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """dynamic_rnn's toy data: lengths 3..steps, half linear ramps (class 0), half random values (class 1),
    each value divided by 1,000 and padded with zeros to `steps`; returns (x [B, T, 1], lengths, classes)."""
    max_value = 1000
    lengths = rng.integers(min(3, steps), steps + 1, size=batch)
    x = np.zeros((batch, steps, 1), dtype=np.float32)
    classes = np.zeros(batch, dtype=np.int64)
    for k, n in enumerate(lengths):
        if rng.random() < 0.5:
            start = int(rng.integers(0, max_value - n + 1))
            x[k, :n, 0] = np.arange(start, start + n) / max_value
        else:
            x[k, :n, 0] = rng.integers(0, max_value + 1, size=n) / max_value
            classes[k] = 1
    return x, lengths.astype(np.int32), classes


def _lstm_classifier(cfg: Mapping[str, Any], rng: np.random.Generator, batch: int) -> tf.Tensor:
    """recurrent_network (``dynamic: false``) or dynamic_rnn (``dynamic: true``): an unrolled basic LSTM cell,
    then a dense classifier on the last (relevant) output."""
    steps, n_in = _int(cfg, "steps"), _int(cfg, "n_input")
    hidden, classes = _int(cfg, "hidden"), _int(cfg, "classes")
    dynamic = bool(cfg.get("dynamic", False))
    if dynamic and n_in != 1:
        raise ConfigError(f"model.n_input={n_in}: dynamic_rnn's toy sequences have one feature per step")
    with v1.name_scope("data/"):
        if dynamic:
            xs, lengths, labels = _toy_sequences(rng, batch, steps)
            x = tf.constant(xs, name="sequences")
            seqlen = tf.constant(lengths, name="lengths")
            y = _onehot(rng, batch, classes, labels)
        else:
            x = tf.constant(rng.random((batch, steps, n_in), dtype=np.float32), name="images")
            y = _onehot(rng, batch, classes)
    with v1.variable_scope("rnn"):
        w = _var("kernel", [n_in + hidden, 4 * hidden], v1.glorot_uniform_initializer())
        b = _var("bias", [4 * hidden], v1.zeros_initializer())
        inputs = tf.split(tf.reshape(tf.transpose(x, [1, 0, 2]), [-1, n_in]), steps, axis=0)
        zeros = tf.zeros([batch, hidden], name="zero_state")
        state = (zeros, zeros)
        outputs = []
        for t, x_t in enumerate(inputs):
            with v1.name_scope(f"t{t}"):
                c_new, h_new = _lstm_step(x_t, state, w, b)
                if dynamic:  # TF 1.0's _rnn_step copy-through past each sequence's length
                    done = tf.greater_equal(tf.constant(t, tf.int32), seqlen, name="done")
                    outputs.append(v1.where(done, zeros, h_new, name="output"))
                    state = (v1.where(done, state[0], c_new, name="c"), v1.where(done, state[1], h_new, name="h"))
                else:
                    outputs.append(h_new)
                    state = (c_new, h_new)
    if dynamic:
        with v1.name_scope("last_relevant/"):
            stacked = tf.transpose(tf.stack(outputs), [1, 0, 2])  # [B, T, H]
            index = tf.range(0, batch) * steps + (seqlen - 1)
            last = tf.gather(tf.reshape(stacked, [-1, hidden]), index)
    else:
        last = outputs[-1]
    with v1.variable_scope("out"):
        w_out, b_out = _normal("weights", [hidden, classes]), _normal("bias", [classes])
        logits = tf.matmul(last, w_out) + b_out
    return _dense_xent(logits, y)


BUILDERS = {"convnet": _convnet, "lstm_classifier": _lstm_classifier}
