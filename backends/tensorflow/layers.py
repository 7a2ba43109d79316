"""Raw-op layers of the TensorFlow model zoo (`tf.compat.v1` graph mode, no Keras): seeded variables, dense,
convolution + fused batch norm + ReLU, pooling, layer norm, an unrolled LSTM cell, multi-head attention, the
Transformer feed-forward block, sinusoidal positions, embeddings and softmax cross-entropy.

Each layer adds its ops under the name scope it is given, which the placers' expert rules rely on (see
`backends.tensorflow.models`). Building a layer is O(its ops).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf

from algorithms.errors import ConfigError

v1 = tf.compat.v1


# --------------------------------------------------------------------------- raw-op layers
def _glorot(fan_in: int, fan_out: int) -> Any:
    limit = math.sqrt(6.0 / max(1, fan_in + fan_out))
    return v1.random_uniform_initializer(-limit, limit)


def _var(name: str, shape: list[int], init: Any) -> tf.Tensor:
    """A trainable resource variable (each use as a tensor adds a ReadVariableOp colocated with it)."""
    var = v1.get_variable(name, shape=shape, dtype=tf.float32, initializer=init, use_resource=True)
    return var


def dense(x: tf.Tensor, units: int, scope: str, activation: Callable | None = None) -> tf.Tensor:
    """``activation(x @ kernel + bias)`` with variables under `scope`."""
    n_in = int(x.shape[-1])
    with v1.variable_scope(scope):
        kernel = _var("kernel", [n_in, units], _glorot(n_in, units))
        bias = _var("bias", [units], v1.zeros_initializer())
        y = tf.matmul(x, kernel) + bias
        return activation(y) if activation is not None else y


def conv_bn(
    x: tf.Tensor, filters: int, kh: int, kw: int, scope: str, stride: int = 1, padding: str = "SAME"
) -> tf.Tensor:
    """Convolution (no bias), training-mode fused batch normalisation, ReLU (TF-Slim's conv2d + batch_norm)."""
    c_in = int(x.shape[-1])
    with v1.variable_scope(scope):
        kernel = _var("weights", [kh, kw, c_in, filters], _glorot(kh * kw * c_in, kh * kw * filters))
        gamma = _var("gamma", [filters], v1.ones_initializer())
        beta = _var("beta", [filters], v1.zeros_initializer())
        y = tf.nn.conv2d(x, kernel, strides=[1, stride, stride, 1], padding=padding)
        y, _, _ = v1.nn.fused_batch_norm(y, gamma, beta, epsilon=1e-3, is_training=True)
        return tf.nn.relu(y)


def _pool(x: tf.Tensor, kind: str, size: int, stride: int, padding: str, name: str) -> tf.Tensor:
    fn = tf.nn.max_pool2d if kind == "max" else tf.nn.avg_pool2d
    return fn(x, ksize=size, strides=stride, padding=padding, name=name)


def layer_norm(x: tf.Tensor, scope: str) -> tf.Tensor:
    """Layer normalisation over the last axis with a learned gain and bias."""
    d = int(x.shape[-1])
    with v1.variable_scope(scope):
        gain = _var("gain", [d], v1.ones_initializer())
        bias = _var("bias", [d], v1.zeros_initializer())
        mean, var = tf.nn.moments(x, axes=[-1], keepdims=True)
        return (x - mean) * tf.math.rsqrt(var + 1e-6) * gain + bias


class LSTMLayer:
    """One LSTM layer with hand-written cells: ``[i, f, g, o] = [x, h] @ W + b``,
    ``c' = sigmoid(f + 1) c + sigmoid(i) tanh(g)``, ``h' = sigmoid(o) tanh(c')`` (forget bias 1).

    Variables live under `scope`; each time step's ops under the absolute name scope ``<scope>/t<step>/`` so
    that every op of the layer starts with `scope` however the steps interleave with other layers.
    """

    def __init__(self, scope: str, n_in: int, hidden: int, batch: int):
        self.scope, self.hidden = scope, hidden
        with v1.variable_scope(scope):
            self.kernel = _var("kernel", [n_in + hidden, 4 * hidden], _glorot(n_in + hidden, 4 * hidden))
            self.bias = _var("bias", [4 * hidden], v1.zeros_initializer())
            self.w = tf.identity(self.kernel, name="kernel_read")
            self.b = tf.identity(self.bias, name="bias_read")
            self.h0 = tf.zeros([batch, hidden], name="h0")
            self.c0 = tf.zeros([batch, hidden], name="c0")

    def step(self, t: int, x: tf.Tensor, state: tuple[tf.Tensor, tf.Tensor]) -> tuple[tf.Tensor, tf.Tensor]:
        h, c = state
        with v1.name_scope(f"{self.scope}/t{t}/"):
            z = tf.matmul(tf.concat([x, h], axis=1), self.w) + self.b
            i, f, g, o = tf.split(z, 4, axis=1)
            c_new = tf.sigmoid(f + 1.0) * c + tf.sigmoid(i) * tf.tanh(g)
            h_new = tf.sigmoid(o) * tf.tanh(c_new)
        return h_new, c_new


def _xent(logits: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
    with v1.name_scope("loss/"):
        per = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
        return tf.reduce_mean(per, name="mean")


# --------------------------------------------------------------------------- attention blocks
def _attention(q_in: tf.Tensor, kv_in: tf.Tensor, heads: int, scope: str, causal: bool) -> tf.Tensor:
    """Multi-head scaled dot-product attention (Vaswani et al. 2017) on [B, T, D] tensors."""
    b, tq, d = (int(s) for s in q_in.shape)
    tk = int(kv_in.shape[1])
    if d % heads:
        raise ConfigError(f"model.hidden={d} is not divisible by model.heads={heads}")
    dh = d // heads
    with v1.variable_scope(scope):

        def proj(x: tf.Tensor, name: str, t: int) -> tf.Tensor:
            y = dense(tf.reshape(x, [b * t, d]), d, name)
            return tf.transpose(tf.reshape(y, [b, t, heads, dh]), [0, 2, 1, 3])  # [B, h, T, dh]

        q, k, v = proj(q_in, "q", tq), proj(kv_in, "k", tk), proj(kv_in, "v", tk)
        scores = tf.matmul(q, k, transpose_b=True) / math.sqrt(dh)
        if causal:
            mask = np.triu(np.full((tq, tk), -1e9, dtype=np.float32), k=1)
            scores = scores + tf.constant(mask, name="causal_mask")
        ctx = tf.matmul(tf.nn.softmax(scores), v)  # [B, h, T, dh]
        ctx = tf.reshape(tf.transpose(ctx, [0, 2, 1, 3]), [b * tq, d])
        return tf.reshape(dense(ctx, d, "out"), [b, tq, d])


def _ffn(x: tf.Tensor, ffn: int, scope: str) -> tf.Tensor:
    b, t, d = (int(s) for s in x.shape)
    with v1.variable_scope(scope):
        h = dense(tf.reshape(x, [b * t, d]), ffn, "in", tf.nn.relu)
        return tf.reshape(dense(h, d, "out"), [b, t, d])


def _positions(steps: int, d: int) -> np.ndarray:
    pos = np.arange(steps)[:, None]
    i = np.arange(d)[None, :]
    angle = pos / np.power(10000.0, (2 * (i // 2)) / d)
    return np.where(i % 2 == 0, np.sin(angle), np.cos(angle)).astype(np.float32)


def _embed(ids: tf.Tensor, table_name: str, vocab: int, d: int) -> tf.Tensor:
    steps = int(ids.shape[1])
    table = _var(table_name, [vocab, d], v1.random_normal_initializer(stddev=d**-0.5))
    return tf.nn.embedding_lookup(table, ids) * math.sqrt(d) + tf.constant(_positions(steps, d))
