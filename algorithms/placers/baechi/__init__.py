"""Baechi's placers (seed 001, sections 2-4): m-TOPO, m-ETF and m-SCT, and their placement-time execution
model (`exec_model`), pair queues (`pair_queue`, `sct_queue`) and the SCT LP (`sct_lp`)."""

from .m_etf import METFPlacer
from .m_sct import MSCTPlacer, favorite_children
from .m_topo import MTOPOPlacer

__all__ = ["METFPlacer", "MSCTPlacer", "MTOPOPlacer", "favorite_children"]
