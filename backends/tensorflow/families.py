"""The model families of the TensorFlow zoo (`linreg`, `mlp`, `inception_v3`, `gnmt`, `transformer`, `gpt`, and the
thesis' `convnet` and `lstm_classifier` of `backends.tensorflow.examples`):
one builder per family that reads its keys of the model config, adds the forward graph and the loss to the
current `tf.Graph` and returns the loss. `backends.tensorflow.models` describes each family and its op names
and wraps a builder with the optimizer (`build_model`). Building is O(number of ops).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import tensorflow as tf

from algorithms.errors import ConfigError

from .config import _get, _int
from .examples import BUILDERS as EXAMPLES
from .layers import (
    LSTMLayer,
    _attention,
    _embed,
    _ffn,
    _glorot,
    _pool,
    _var,
    _xent,
    conv_bn,
    dense,
    layer_norm,
)

v1 = tf.compat.v1


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
    **EXAMPLES,  # the thesis' TensorFlow-Examples networks (backends.tensorflow.examples)
}
