"""Order-Place (Celeritas sections 5.2 and 6.2.2): the coarse nodes in CPD-TOPO order, each device filled
up to its memory limit before moving on to the next.

The devices are taken in the cluster's order. A pointer marks the device being filled; a node goes to the
first device at or after the pointer that may run it (device type, colocation; see `CoarseState`) and still
has room for it, and the pointer moves there when the node could have gone anywhere. A node restricted to
devices behind the pointer (a pinned colocation group, a device type) searches from the first device. When no
device has room, the best-effort rule of 6.3 applies: the allowed device with the most memory left; every such
node is reported. The per-device order is the CPD-TOPO order. O(V' * D) for V' coarse nodes.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from .common import CoarseState

log = logging.getLogger(__name__)


def order_place(state: CoarseState, seq: Sequence[int]) -> list[int]:
    """Assign every coarse node (indices into `state.clusters`, visited in `seq` order); returns the device
    index of each coarse node and records best-effort nodes in `state.best_effort_nodes`."""
    nd = len(state.cluster.devices)
    cur = 0
    for c in seq:
        allowed = state.allowed(c)
        aset = set(allowed)
        unrestricted = len(allowed) == nd
        chosen = -1
        for k in list(range(cur, nd)) + list(range(0, cur)):
            if k in aset and state.fits(c, k):
                chosen = k
                break
        if chosen < 0:
            chosen = state.best_effort_device(c)
            state.best_effort_nodes.append(c)
            log.debug(
                "order-place: no device has room for coarse node %d (%.3g bytes); best effort on %s",
                c,
                state.need(c),
                state.cluster.devices[chosen].name,
            )
        elif unrestricted and chosen >= cur:
            cur = chosen
        state.commit(c, chosen)
    return list(state.coarse_dev)
