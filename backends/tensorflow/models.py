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
* ``convnet`` and ``lstm_classifier``: the thesis' three graphs from TensorFlow-Examples (convolutional_network,
  recurrent_network, dynamic_rnn; `backends.tensorflow.examples`).

Op names follow name scopes that placers and expert rules can rely on. GNMT: ``embed``, ``enc/l0`` ..
``enc/l3``, ``dec/l0`` .. ``dec/l3``, ``attention``, ``proj``, ``loss`` (one scope per layer and time step,
e.g. ``enc/l1/t3/MatMul``); Transformer and GPT: ``embed``, ``enc/l<i>``, ``dec/l<i>``, ``proj``, ``loss``;
Inception-V3: ``stem``, ``mixed0`` .. ``mixed10``, ``logits``, ``loss``. Input batches are constants under
``data/`` generated from the model's seed, so a training step reads no feed and every run of the same
config sees the same data and the same initial weights (seeded initialisers).

The training op comes from the v1 optimizers (``sgd``, ``rmsprop`` (Baechi trains Inception-V3 with RMSProp),
``momentum``, ``adam``); its gradients live under ``gradients/`` and its updates under the optimizer's scope.

Layout: the raw-op layers are in `layers.py`, one builder per family in `families.py`; this module holds the
built model (`TFModel`), the optimizers and `build_model`.

Building is O(number of ops), dominated by TensorFlow's own graph construction.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf

from algorithms.errors import ConfigError

from .config import _get, _int, _seed
from .families import _BUILDERS

log = logging.getLogger(__name__)
v1 = tf.compat.v1

FAMILIES = ("linreg", "mlp", "inception_v3", "gnmt", "transformer", "gpt", "convnet", "lstm_classifier")
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
