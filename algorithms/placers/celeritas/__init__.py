"""Celeritas (seed 002, sections 4 and 5): fast device placement for large training graphs.

Modules
-------
common         the averaged cost model, edge costs, effective device types, and `CoarseState` (memory,
               colocation and received-copy book-keeping while coarse nodes are assigned)
topo           DFS-TOPO (4.2.2) and CPD-TOPO (5.1.3, Algorithm 1 function CPD_Topo; equations 2 and 3)
ccr            the communication-to-computing ratio (equation 1)
fusion         Optimal Operation Fusion: the breakpoint dynamic program (equations 4 to 6, Algorithm 1
               function Optimal_BP) and the coarse graph (Lemma 2, through `algorithms.passes.contract`)
order_place    Order-Place (5.2 and 6.2.2): coarse nodes in CPD-TOPO order, each device filled before the next
adjusting      Adjusting Placement (Algorithm 2; equations 7 to 9) with best-effort out-of-memory handling
placer         `CeleritasPlacer` and `OrderPlacePlacer`: fusion + placement, end to end
metis          `MetisPlacer`, the METIS k-way baseline of 6.2.2 (pymetis)
standard_eval  the framework-free parts of the Standard Evaluation (4.2.1; Table 5, Figure 5)
"""

from .metis import MetisPlacer
from .placer import CeleritasPlacer, OrderPlacePlacer
from .standard_eval import SequentialDfsTopoPlacer

__all__ = ["CeleritasPlacer", "MetisPlacer", "OrderPlacePlacer", "SequentialDfsTopoPlacer"]
