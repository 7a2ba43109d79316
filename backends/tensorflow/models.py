"""The TensorFlow model zoo, built from raw ops in `tf.compat.v1` graph mode.

Keras 3 (TensorFlow 2.16 and later) removed `tf.compat.v1.layers` and the v1 RNN cells, so every model here is
written with `tf.matmul`, `tf.nn.conv2d`, `tf.nn.fused_batch_norm` and hand-written LSTM cells, inside a
`tf.Graph` of its own. Families (the `family` key of conf/model/*.yaml):

* ``linreg``: Baechi's linear-regression training graph (Baechi, Figure 2): ``y = x W + b``, squared loss.
* ``mlp``: dense layers with ReLU, softmax cross-entropy.
* ``inception_v3``: Szegedy et al. 2016 (stem, 3x Inception-A, reduction-A, 4x Inception-B, reduction-B,
  2x Inception-C, global pooling, classifier), every channel count multiplied by ``width``; each convolution is
  followed by a training-mode fused batch normalisation and a ReLU, as in the reference TF-Slim model.
* ``gnmt``: GNMT as Baechi 5.1 uses it: source and target embeddings, a ``layers``-deep LSTM encoder and
  decoder with residual connections from layer ``residual_from`` on, Bahdanau (additive) attention queried by
  the bottom decoder layer whose context feeds every decoder layer (as GNMT does), output projection, softmax
  cross-entropy. The LSTM cells are unrolled over ``seq_len`` time steps. The encoder is unidirectional (GNMT's
  first encoder layer is bidirectional; the choice keeps the four encoder layers alike, which the expert
  placement of Baechi 5.3 assumes).
* ``transformer``: encoder-decoder Transformer (post-norm, sinusoidal positions, causal decoder self-attention).
* ``gpt``: a decoder-only causal Transformer stack with a large embedding table.

Op names follow name scopes that placers and expert rules can rely on. GNMT: ``embed``, ``enc/l0`` ..
``enc/l3``, ``dec/l0`` .. ``dec/l3``, ``attention``, ``proj``, ``loss`` (one scope per layer and time step,
e.g. ``enc/l1/t3/MatMul``); Transformer and GPT: ``embed``, ``enc/l<i>``, ``dec/l<i>``, ``proj``, ``loss``;
Inception-V3: ``stem``, ``mixed0`` .. ``mixed10``, ``logits``, ``loss``. Input batches are constants under
``data/`` generated from the model's seed, so a training step reads no feed and every run of the same
config sees the same data and the same initial weights (seeded initialisers).

The training op comes from the v1 optimizers (``sgd``, ``rmsprop`` (Baechi trains Inception-V3 with RMSProp),
``momentum``, ``adam``); its gradients live under ``gradients/`` and its updates under the optimizer's scope.

Building is O(number of ops), dominated by TensorFlow's own graph construction.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf

from algorithms.errors import ConfigError

log = logging.getLogger(__name__)
v1 = tf.compat.v1

FAMILIES = ("linreg", "mlp", "inception_v3", "gnmt", "transformer", "gpt")
OPTIMIZERS = ("sgd", "rmsprop", "momentum", "adam")


@dataclass
class TFModel:
    """A built model: its graph, the training op, the loss, and the config it came from.

    `cfg` is the plain model config (conf/model/*.yaml); `optimizer_scope` is the name scope of the update
    ops (e.g. ``RMSProp``); `optimizer_vars` the op names of the optimizer's own variables (slots such as
    ``<var>/RMSProp`` and non-slot ones such as Adam's ``beta1_power``); `batch_size` the batch the graph
    was built for (static shapes).
    """

    cfg: dict[str, Any]
    name: str
    family: str
    graph: tf.Graph
    loss: tf.Tensor
    train_op: tf.Operation
    init_op: tf.Operation
    batch_size: int
    seed: int
    optimizer_scope: str
    optimizer_vars: frozenset[str] = frozenset()
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def fetch_ops(self) -> list[tf.Operation]:
        """The ops a training step runs: the update op and the loss."""
        return [self.train_op, self.loss.op]


# --------------------------------------------------------------------------- config helpers
def _get(cfg: Mapping[str, Any], key: str, default: Any = None, *, required: bool = False) -> Any:
    if key in cfg and cfg[key] is not None:
        return cfg[key]
    if required:
        raise ConfigError(
            f"model config {cfg.get('name', '?')!r}: key {key!r} is required for family {cfg.get('family')!r}"
        )
    return default


def _int(cfg: Mapping[str, Any], key: str, default: int | None = None) -> int:
    value = _get(cfg, key, default, required=default is None)
    try:
        out = int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"model.{key} must be an integer, got {value!r}") from None
    if out <= 0:
        raise ConfigError(f"model.{key} must be > 0, got {out}")
    return out


def _seed(cfg: Mapping[str, Any]) -> int:
    s = cfg.get("seed", 0)
    try:
        return int(s) if s is not None else 0
    except (TypeError, ValueError):
        raise ConfigError(f"model.seed must be an integer, got {s!r} (resolve the config first)") from None


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


# --------------------------------------------------------------------------- families
def _linreg(cfg: Mapping[str, Any], rng: np.random.Generator, batch: int) -> tf.Tensor:
    features = _int(cfg, "features")
    with v1.name_scope("data/"):
        x = tf.constant(rng.standard_normal((batch, features)).astype(np.float32), name="x")
        y = tf.constant(rng.standard_normal((batch, 1)).astype(np.float32), name="y")
    pred = dense(x, 1, "linreg")
    with v1.name_scope("loss/"):
        return tf.reduce_mean(tf.square(pred - y), name="mse")


def _mlp(cfg: Mapping[str, Any], rng: np.random.Generator, batch: int) -> tf.Tensor:
    n_in = _int(cfg, "in_features")
    classes = _int(cfg, "classes")
    hidden = cfg.get("hidden") or []
    if isinstance(hidden, (int, float)):
        hidden = [hidden]
    with v1.name_scope("data/"):
        x = tf.constant(rng.standard_normal((batch, n_in)).astype(np.float32), name="x")
        labels = tf.constant(rng.integers(0, classes, size=batch).astype(np.int32), name="labels")
    h = x
    for k, units in enumerate(hidden):
        h = dense(h, int(units), f"l{k}", tf.nn.relu)
    logits = dense(h, classes, "out")
    return _xent(logits, labels)


def _xent(logits: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
    with v1.name_scope("loss/"):
        per = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
        return tf.reduce_mean(per, name="mean")


def _inception_v3(cfg: Mapping[str, Any], rng: np.random.Generator, batch: int) -> tf.Tensor:
    size = _int(cfg, "image_size")
    classes = _int(cfg, "classes")
    width = float(_get(cfg, "width", 1.0))
    if size < 75:
        raise ConfigError(f"model.image_size={size}: Inception-V3 needs images of at least 75x75")

    def ch(c: int) -> int:
        return max(2, int(round(c * width)))

    with v1.name_scope("data/"):
        x = tf.constant(rng.standard_normal((batch, size, size, 3)).astype(np.float32), name="images")
        labels = tf.constant(rng.integers(0, classes, size=batch).astype(np.int32), name="labels")
    with v1.variable_scope("stem"):
        x = conv_bn(x, ch(32), 3, 3, "conv0", 2, "VALID")
        x = conv_bn(x, ch(32), 3, 3, "conv1", 1, "VALID")
        x = conv_bn(x, ch(64), 3, 3, "conv2")
        x = _pool(x, "max", 3, 2, "VALID", "pool0")
        x = conv_bn(x, ch(80), 1, 1, "conv3", 1, "VALID")
        x = conv_bn(x, ch(192), 3, 3, "conv4", 1, "VALID")
        x = _pool(x, "max", 3, 2, "VALID", "pool1")

    def block_a(x: tf.Tensor, scope: str, pool_ch: int) -> tf.Tensor:
        with v1.variable_scope(scope):
            b0 = conv_bn(x, ch(64), 1, 1, "b1x1")
            b1 = conv_bn(conv_bn(x, ch(48), 1, 1, "b5x5_0"), ch(64), 5, 5, "b5x5_1")
            b2 = conv_bn(x, ch(64), 1, 1, "b3x3dbl_0")
            b2 = conv_bn(conv_bn(b2, ch(96), 3, 3, "b3x3dbl_1"), ch(96), 3, 3, "b3x3dbl_2")
            b3 = conv_bn(_pool(x, "avg", 3, 1, "SAME", "pool"), ch(pool_ch), 1, 1, "bpool")
            return tf.concat([b0, b1, b2, b3], axis=3, name="concat")

    def reduction_a(x: tf.Tensor, scope: str) -> tf.Tensor:
        with v1.variable_scope(scope):
            b0 = conv_bn(x, ch(384), 3, 3, "b3x3", 2, "VALID")
            b1 = conv_bn(x, ch(64), 1, 1, "b3x3dbl_0")
            b1 = conv_bn(conv_bn(b1, ch(96), 3, 3, "b3x3dbl_1"), ch(96), 3, 3, "b3x3dbl_2", 2, "VALID")
            b2 = _pool(x, "max", 3, 2, "VALID", "pool")
            return tf.concat([b0, b1, b2], axis=3, name="concat")

    def block_b(x: tf.Tensor, scope: str, c7: int) -> tf.Tensor:
        with v1.variable_scope(scope):
            b0 = conv_bn(x, ch(192), 1, 1, "b1x1")
            b1 = conv_bn(x, ch(c7), 1, 1, "b7x7_0")
            b1 = conv_bn(conv_bn(b1, ch(c7), 1, 7, "b7x7_1"), ch(192), 7, 1, "b7x7_2")
            b2 = conv_bn(x, ch(c7), 1, 1, "b7x7dbl_0")
            b2 = conv_bn(b2, ch(c7), 7, 1, "b7x7dbl_1")
            b2 = conv_bn(b2, ch(c7), 1, 7, "b7x7dbl_2")
            b2 = conv_bn(b2, ch(c7), 7, 1, "b7x7dbl_3")
            b2 = conv_bn(b2, ch(192), 1, 7, "b7x7dbl_4")
            b3 = conv_bn(_pool(x, "avg", 3, 1, "SAME", "pool"), ch(192), 1, 1, "bpool")
            return tf.concat([b0, b1, b2, b3], axis=3, name="concat")

    def reduction_b(x: tf.Tensor, scope: str) -> tf.Tensor:
        with v1.variable_scope(scope):
            b0 = conv_bn(conv_bn(x, ch(192), 1, 1, "b3x3_0"), ch(320), 3, 3, "b3x3_1", 2, "VALID")
            b1 = conv_bn(x, ch(192), 1, 1, "b7x7x3_0")
            b1 = conv_bn(b1, ch(192), 1, 7, "b7x7x3_1")
            b1 = conv_bn(b1, ch(192), 7, 1, "b7x7x3_2")
            b1 = conv_bn(b1, ch(192), 3, 3, "b7x7x3_3", 2, "VALID")
            b2 = _pool(x, "max", 3, 2, "VALID", "pool")
            return tf.concat([b0, b1, b2], axis=3, name="concat")

    def block_c(x: tf.Tensor, scope: str) -> tf.Tensor:
        with v1.variable_scope(scope):
            b0 = conv_bn(x, ch(320), 1, 1, "b1x1")
            b1 = conv_bn(x, ch(384), 1, 1, "b3x3_0")
            b1 = tf.concat([conv_bn(b1, ch(384), 1, 3, "b3x3_1a"), conv_bn(b1, ch(384), 3, 1, "b3x3_1b")], axis=3)
            b2 = conv_bn(conv_bn(x, ch(448), 1, 1, "b3x3dbl_0"), ch(384), 3, 3, "b3x3dbl_1")
            b2 = tf.concat([conv_bn(b2, ch(384), 1, 3, "b3x3dbl_2a"), conv_bn(b2, ch(384), 3, 1, "b3x3dbl_2b")], axis=3)
            b3 = conv_bn(_pool(x, "avg", 3, 1, "SAME", "pool"), ch(192), 1, 1, "bpool")
            return tf.concat([b0, b1, b2, b3], axis=3, name="concat")

    x = block_a(x, "mixed0", 32)
    x = block_a(x, "mixed1", 64)
    x = block_a(x, "mixed2", 64)
    x = reduction_a(x, "mixed3")
    for k, c7 in enumerate((128, 160, 160, 192)):
        x = block_b(x, f"mixed{4 + k}", c7)
    x = reduction_b(x, "mixed8")
    x = block_c(x, "mixed9")
    x = block_c(x, "mixed10")
    with v1.variable_scope("logits"):
        pooled = tf.reduce_mean(x, axis=[1, 2], name="global_pool")
        logits = dense(pooled, classes, "fc")
    return _xent(logits, labels)


def _gnmt(cfg: Mapping[str, Any], rng: np.random.Generator, batch: int) -> tf.Tensor:
    vocab, hidden = _int(cfg, "vocab"), _int(cfg, "hidden")
    layers, steps = _int(cfg, "layers"), _int(cfg, "seq_len")
    residual_from = int(_get(cfg, "residual_from", 2))
    with v1.name_scope("data/"):
        src = tf.constant(rng.integers(0, vocab, size=(batch, steps)).astype(np.int32), name="source")
        tgt_in = tf.constant(rng.integers(0, vocab, size=(batch, steps)).astype(np.int32), name="target_in")
        tgt_out = tf.constant(rng.integers(0, vocab, size=(batch, steps)).astype(np.int32), name="target_out")
    with v1.variable_scope("embed"):
        init = v1.random_uniform_initializer(-0.1, 0.1)
        src_table = _var("source_table", [vocab, hidden], init)
        tgt_table = _var("target_table", [vocab, hidden], init)
        src_emb = tf.unstack(tf.nn.embedding_lookup(src_table, src), axis=1, name="source_steps")
        tgt_emb = tf.unstack(tf.nn.embedding_lookup(tgt_table, tgt_in), axis=1, name="target_steps")

    # encoder: layer by layer over all time steps
    inputs = src_emb
    for k in range(layers):
        cell = LSTMLayer(f"enc/l{k}", hidden, hidden, batch)
        state = (cell.h0, cell.c0)
        outs = []
        for t in range(steps):
            state = cell.step(t, inputs[t], state)
            h = state[0]
            if k >= residual_from:
                with v1.name_scope(f"enc/l{k}/t{t}/"):
                    h = tf.add(h, inputs[t], name="residual")
            outs.append(h)
        inputs = outs
    enc_out = inputs

    # Bahdanau attention: score(s, h_i) = v . tanh(W1 h_i + W2 s)
    with v1.variable_scope("attention"):
        init = _glorot(hidden, hidden)
        w_keys = _var("w_keys", [hidden, hidden], init)
        w_query = _var("w_query", [hidden, hidden], init)
        v_att = _var("v", [hidden], _glorot(hidden, 1))
        memory = tf.stack(enc_out, axis=1, name="memory")  # [B, T, H]
        keys = tf.reshape(
            tf.matmul(tf.reshape(memory, [batch * steps, hidden]), w_keys), [batch, steps, hidden], name="keys"
        )
        w_query_r = tf.identity(w_query, name="w_query_read")
        v_r = tf.identity(v_att, name="v_read")

    def attend(t: int, query: tf.Tensor) -> tf.Tensor:
        with v1.name_scope(f"attention/t{t}/"):
            q = tf.expand_dims(tf.matmul(query, w_query_r), 1)  # [B, 1, H]
            score = tf.reduce_sum(v_r * tf.tanh(keys + q), axis=2)  # [B, T]
            alpha = tf.nn.softmax(score)
            return tf.reduce_sum(tf.expand_dims(alpha, 2) * memory, axis=1, name="context")

    cells = [LSTMLayer(f"dec/l{k}", 2 * hidden, hidden, batch) for k in range(layers)]
    states = [(c.h0, c.c0) for c in cells]
    with v1.name_scope("attention/"):
        context = tf.zeros([batch, hidden], name="context0")
    tops = []
    for t in range(steps):
        below = tgt_emb[t]
        for k, cell in enumerate(cells):
            with v1.name_scope(f"dec/l{k}/t{t}/"):
                x = tf.concat([below, context], axis=1, name="input")
            states[k] = cell.step(t, x, states[k])
            h = states[k][0]
            if k >= residual_from:
                with v1.name_scope(f"dec/l{k}/t{t}/"):
                    h = tf.add(h, below, name="residual")
            if k == 0:
                context = attend(t, h)
            below = h
        tops.append(below)

    with v1.variable_scope("proj"):
        top = tf.reshape(tf.stack(tops, axis=1), [batch * steps, hidden])
        logits = dense(top, vocab, "out")
    with v1.name_scope("loss/"):
        labels = tf.reshape(tgt_out, [batch * steps])
    return _xent(logits, labels)


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


def _transformer(cfg: Mapping[str, Any], rng: np.random.Generator, batch: int) -> tf.Tensor:
    layers, heads = _int(cfg, "layers"), _int(cfg, "heads")
    d, vocab, steps = _int(cfg, "hidden"), _int(cfg, "vocab"), _int(cfg, "seq_len")
    ffn = _int(cfg, "ffn", 4 * d)
    with v1.name_scope("data/"):
        src = tf.constant(rng.integers(0, vocab, size=(batch, steps)).astype(np.int32), name="source")
        tgt_in = tf.constant(rng.integers(0, vocab, size=(batch, steps)).astype(np.int32), name="target_in")
        tgt_out = tf.constant(rng.integers(0, vocab, size=(batch, steps)).astype(np.int32), name="target_out")
    with v1.variable_scope("embed"):
        x = _embed(src, "source_table", vocab, d)
        y = _embed(tgt_in, "target_table", vocab, d)
    for k in range(layers):
        with v1.variable_scope(f"enc/l{k}"):
            x = layer_norm(x + _attention(x, x, heads, "attn", False), "ln0")
            x = layer_norm(x + _ffn(x, ffn, "ffn"), "ln1")
    for k in range(layers):
        with v1.variable_scope(f"dec/l{k}"):
            y = layer_norm(y + _attention(y, y, heads, "self_attn", True), "ln0")
            y = layer_norm(y + _attention(y, x, heads, "cross_attn", False), "ln1")
            y = layer_norm(y + _ffn(y, ffn, "ffn"), "ln2")
    with v1.variable_scope("proj"):
        flat = tf.reshape(y, [batch * steps, d])
        logits = dense(flat, vocab, "out")
    with v1.name_scope("loss/"):
        labels = tf.reshape(tgt_out, [batch * steps])
    return _xent(logits, labels)


def _gpt(cfg: Mapping[str, Any], rng: np.random.Generator, batch: int) -> tf.Tensor:
    layers, heads = _int(cfg, "layers"), _int(cfg, "heads")
    d, vocab, steps = _int(cfg, "hidden"), _int(cfg, "vocab"), _int(cfg, "seq_len")
    ffn = _int(cfg, "ffn", 4 * d)
    with v1.name_scope("data/"):
        tokens = rng.integers(0, vocab, size=(batch, steps + 1)).astype(np.int32)
        ids = tf.constant(tokens[:, :-1], name="tokens")
        nxt = tf.constant(tokens[:, 1:], name="next_tokens")
    with v1.variable_scope("embed"):
        y = _embed(ids, "table", vocab, d)
    for k in range(layers):
        with v1.variable_scope(f"dec/l{k}"):
            y = y + _attention(layer_norm(y, "ln0"), layer_norm(y, "ln0b"), heads, "self_attn", True)
            y = y + _ffn(layer_norm(y, "ln1"), ffn, "ffn")
    with v1.variable_scope("proj"):
        flat = tf.reshape(layer_norm(y, "ln_f"), [batch * steps, d])
        logits = dense(flat, vocab, "out")
    with v1.name_scope("loss/"):
        labels = tf.reshape(nxt, [batch * steps])
    return _xent(logits, labels)


_BUILDERS: dict[str, Callable[[Mapping[str, Any], np.random.Generator, int], tf.Tensor]] = {
    "linreg": _linreg,
    "mlp": _mlp,
    "inception_v3": _inception_v3,
    "gnmt": _gnmt,
    "transformer": _transformer,
    "gpt": _gpt,
}


def _optimizer(cfg: Mapping[str, Any]) -> Any:
    kind = str(_get(cfg, "optimizer", "sgd")).lower()
    lr = float(_get(cfg, "lr", 0.01))
    if kind == "sgd":
        return v1.train.GradientDescentOptimizer(lr)
    if kind == "rmsprop":
        return v1.train.RMSPropOptimizer(
            lr, decay=float(_get(cfg, "rms_decay", 0.9)), epsilon=float(_get(cfg, "rms_epsilon", 1.0))
        )
    if kind == "momentum":
        return v1.train.MomentumOptimizer(lr, momentum=float(_get(cfg, "momentum", 0.9)))
    if kind == "adam":
        return v1.train.AdamOptimizer(lr)
    raise ConfigError(f"model.optimizer={kind!r} is not known to the TensorFlow backend; use one of {OPTIMIZERS}")


def build_model(model_cfg: Mapping[str, Any], batch_size: int | None = None) -> TFModel:
    """Build the training graph of `model_cfg` (a plain dict of conf/model/*.yaml).

    `batch_size` overrides the config's batch size (the op names do not depend on it, so a graph built at
    another batch size lines up op by op with the first one). Raises `ConfigError` for an unknown family or
    optimizer or a bad size.
    """
    cfg = dict(model_cfg)
    family = str(cfg.get("family") or cfg.get("name") or "")
    if family not in _BUILDERS:
        raise ConfigError(f"model.family={family!r} has no TensorFlow model; available: {sorted(_BUILDERS)}")
    batch = int(batch_size) if batch_size is not None else _int(cfg, "batch_size")
    if batch <= 0:
        raise ConfigError(f"batch size must be > 0, got {batch}")
    cfg["batch_size"] = batch
    seed = _seed(cfg)
    rng = np.random.default_rng(seed)
    graph = tf.Graph()
    with graph.as_default():
        v1.set_random_seed(seed)
        loss = _BUILDERS[family](cfg, rng, batch)
        opt = _optimizer(cfg)
        train_op = opt.minimize(loss)
        init_op = v1.global_variables_initializer()
        opt_vars = frozenset(v.op.name for v in opt.variables())
    n_params = sum(int(np.prod(v.shape)) for v in graph.get_collection(v1.GraphKeys.TRAINABLE_VARIABLES))
    log.info(
        "built %s (%s): %d ops, %d parameters, batch %d",
        cfg.get("name", family),
        family,
        len(graph.get_operations()),
        n_params,
        batch,
    )
    return TFModel(
        cfg=cfg,
        name=str(cfg.get("name", family)),
        family=family,
        graph=graph,
        loss=loss,
        train_op=train_op,
        init_op=init_op,
        batch_size=batch,
        seed=seed,
        optimizer_scope=opt.get_name(),
        optimizer_vars=opt_vars,
        info={"parameters": n_params},
    )
