"""Inception-V3 (Szegedy et al., "Rethinking the Inception Architecture", CVPR 2016), written for capture.

Layout as in the paper and torchvision: stem (five convolutions, two max-pools), three Inception-A modules
(mixed_5b..5d), reduction (mixed_6a), four Inception-B modules with factorised 7x7 convolutions
(mixed_6b..6e), reduction (mixed_7a), two Inception-C modules (mixed_7b, 7c), global average pooling,
classifier "fc", cross-entropy "loss". `width` multiplies every channel count; the auxiliary classifier and
dropout are left out (they do not change the structure the placers see). Batch normalisation uses batch
statistics only (``track_running_stats=False``) so that a training step is a pure function of parameters and
inputs (no running-average buffers mutated in place). The smallest image size is 75. Building is O(params).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from algorithms.errors import ConfigError

from .common import CrossEntropy, generator, need, scaled


class ConvBN(nn.Module):
    """Convolution (no bias) + batch normalisation + ReLU."""

    def __init__(self, cin: int, cout: int, kernel, stride=1, padding=0):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, kernel, stride=stride, padding=padding, bias=False)
        self.bn = nn.BatchNorm2d(cout, eps=1e-3, track_running_stats=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.bn(self.conv(x)))


class InceptionA(nn.Module):
    def __init__(self, cin: int, pool: int, w: float):
        super().__init__()
        c = partial(scaled, width=w)
        self.b1x1 = ConvBN(cin, c(64), 1)
        self.b5x5_1 = ConvBN(cin, c(48), 1)
        self.b5x5_2 = ConvBN(c(48), c(64), 5, padding=2)
        self.b3x3dbl_1 = ConvBN(cin, c(64), 1)
        self.b3x3dbl_2 = ConvBN(c(64), c(96), 3, padding=1)
        self.b3x3dbl_3 = ConvBN(c(96), c(96), 3, padding=1)
        self.bpool = ConvBN(cin, c(pool), 1)
        self.out_channels = c(64) + c(64) + c(96) + c(pool)

    def forward(self, x):
        a = self.b1x1(x)
        b = self.b5x5_2(self.b5x5_1(x))
        d = self.b3x3dbl_3(self.b3x3dbl_2(self.b3x3dbl_1(x)))
        p = self.bpool(F.avg_pool2d(x, 3, stride=1, padding=1))
        return torch.cat([a, b, d, p], 1)


class ReductionA(nn.Module):
    def __init__(self, cin: int, w: float):
        super().__init__()
        c = partial(scaled, width=w)
        self.b3x3 = ConvBN(cin, c(384), 3, stride=2)
        self.b3x3dbl_1 = ConvBN(cin, c(64), 1)
        self.b3x3dbl_2 = ConvBN(c(64), c(96), 3, padding=1)
        self.b3x3dbl_3 = ConvBN(c(96), c(96), 3, stride=2)
        self.out_channels = c(384) + c(96) + cin

    def forward(self, x):
        a = self.b3x3(x)
        b = self.b3x3dbl_3(self.b3x3dbl_2(self.b3x3dbl_1(x)))
        return torch.cat([a, b, F.max_pool2d(x, 3, stride=2)], 1)


class InceptionB(nn.Module):
    def __init__(self, cin: int, c7: int, w: float):
        super().__init__()
        c = partial(scaled, width=w)
        c7 = c(c7)
        self.b1x1 = ConvBN(cin, c(192), 1)
        self.b7x7_1 = ConvBN(cin, c7, 1)
        self.b7x7_2 = ConvBN(c7, c7, (1, 7), padding=(0, 3))
        self.b7x7_3 = ConvBN(c7, c(192), (7, 1), padding=(3, 0))
        self.b7x7dbl_1 = ConvBN(cin, c7, 1)
        self.b7x7dbl_2 = ConvBN(c7, c7, (7, 1), padding=(3, 0))
        self.b7x7dbl_3 = ConvBN(c7, c7, (1, 7), padding=(0, 3))
        self.b7x7dbl_4 = ConvBN(c7, c7, (7, 1), padding=(3, 0))
        self.b7x7dbl_5 = ConvBN(c7, c(192), (1, 7), padding=(0, 3))
        self.bpool = ConvBN(cin, c(192), 1)
        self.out_channels = 4 * c(192)

    def forward(self, x):
        a = self.b1x1(x)
        b = self.b7x7_3(self.b7x7_2(self.b7x7_1(x)))
        d = self.b7x7dbl_5(self.b7x7dbl_4(self.b7x7dbl_3(self.b7x7dbl_2(self.b7x7dbl_1(x)))))
        p = self.bpool(F.avg_pool2d(x, 3, stride=1, padding=1))
        return torch.cat([a, b, d, p], 1)


class ReductionB(nn.Module):
    def __init__(self, cin: int, w: float):
        super().__init__()
        c = partial(scaled, width=w)
        self.b3x3_1 = ConvBN(cin, c(192), 1)
        self.b3x3_2 = ConvBN(c(192), c(320), 3, stride=2)
        self.b7x7x3_1 = ConvBN(cin, c(192), 1)
        self.b7x7x3_2 = ConvBN(c(192), c(192), (1, 7), padding=(0, 3))
        self.b7x7x3_3 = ConvBN(c(192), c(192), (7, 1), padding=(3, 0))
        self.b7x7x3_4 = ConvBN(c(192), c(192), 3, stride=2)
        self.out_channels = c(320) + c(192) + cin

    def forward(self, x):
        a = self.b3x3_2(self.b3x3_1(x))
        b = self.b7x7x3_4(self.b7x7x3_3(self.b7x7x3_2(self.b7x7x3_1(x))))
        return torch.cat([a, b, F.max_pool2d(x, 3, stride=2)], 1)


class InceptionC(nn.Module):
    def __init__(self, cin: int, w: float):
        super().__init__()
        c = partial(scaled, width=w)
        self.b1x1 = ConvBN(cin, c(320), 1)
        self.b3x3_1 = ConvBN(cin, c(384), 1)
        self.b3x3_2a = ConvBN(c(384), c(384), (1, 3), padding=(0, 1))
        self.b3x3_2b = ConvBN(c(384), c(384), (3, 1), padding=(1, 0))
        self.b3x3dbl_1 = ConvBN(cin, c(448), 1)
        self.b3x3dbl_2 = ConvBN(c(448), c(384), 3, padding=1)
        self.b3x3dbl_3a = ConvBN(c(384), c(384), (1, 3), padding=(0, 1))
        self.b3x3dbl_3b = ConvBN(c(384), c(384), (3, 1), padding=(1, 0))
        self.bpool = ConvBN(cin, c(192), 1)
        self.out_channels = c(320) + 4 * c(384) + c(192)

    def forward(self, x):
        a = self.b1x1(x)
        b = self.b3x3_1(x)
        b = torch.cat([self.b3x3_2a(b), self.b3x3_2b(b)], 1)
        d = self.b3x3dbl_2(self.b3x3dbl_1(x))
        d = torch.cat([self.b3x3dbl_3a(d), self.b3x3dbl_3b(d)], 1)
        p = self.bpool(F.avg_pool2d(x, 3, stride=1, padding=1))
        return torch.cat([a, b, d, p], 1)


class InceptionV3(nn.Module):
    """The whole network; forward(images, labels) returns the mean cross-entropy loss."""

    def __init__(self, classes: int, width: float):
        super().__init__()
        c = partial(scaled, width=width)
        self.stem = nn.ModuleDict(
            {
                "conv1a": ConvBN(3, c(32), 3, stride=2),
                "conv2a": ConvBN(c(32), c(32), 3),
                "conv2b": ConvBN(c(32), c(64), 3, padding=1),
                "conv3b": ConvBN(c(64), c(80), 1),
                "conv4a": ConvBN(c(80), c(192), 3),
            }
        )
        blocks: list[tuple[str, nn.Module]] = []
        cin = c(192)
        for name, pool in (("mixed_5b", 32), ("mixed_5c", 64), ("mixed_5d", 64)):
            m = InceptionA(cin, pool, width)
            blocks.append((name, m))
            cin = m.out_channels
        m = ReductionA(cin, width)
        blocks.append(("mixed_6a", m))
        cin = m.out_channels
        for name, c7 in (("mixed_6b", 128), ("mixed_6c", 160), ("mixed_6d", 160), ("mixed_6e", 192)):
            m = InceptionB(cin, c7, width)
            blocks.append((name, m))
            cin = m.out_channels
        m = ReductionB(cin, width)
        blocks.append(("mixed_7a", m))
        cin = m.out_channels
        for name in ("mixed_7b", "mixed_7c"):
            m = InceptionC(cin, width)
            blocks.append((name, m))
            cin = m.out_channels
        for name, m in blocks:
            self.add_module(name, m)
        self.block_names = [n for n, _ in blocks]
        self.fc = nn.Linear(cin, classes)
        self.loss = CrossEntropy()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        s = self.stem
        x = s["conv2b"](s["conv2a"](s["conv1a"](x)))
        x = F.max_pool2d(x, 3, stride=2)
        x = s["conv4a"](s["conv3b"](x))
        x = F.max_pool2d(x, 3, stride=2)
        for name in self.block_names:
            x = getattr(self, name)(x)
        x = torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)
        return self.loss(self.fc(x), y)


def build_inception_v3(cfg: Mapping[str, Any]):
    size, width, classes = int(need(cfg, "image_size")), float(need(cfg, "width")), int(need(cfg, "classes"))
    if size < 75:
        raise ConfigError(f"model {cfg.get('name')!r}: image_size {size} is below Inception-V3's minimum of 75")
    seed = int(cfg.get("seed") or 0)
    module = InceptionV3(classes, width)

    def make_batch(b: int):
        g = generator(seed, 1000 + b)
        return torch.randn(b, 3, size, size, generator=g), torch.randint(0, classes, (b,), generator=g)

    return module, make_batch
