"""Baechi's graph optimizer (seed 001, sections 3.1-3.3 and 4.1) as a chain of graph passes, and the profile
perturbation of Figure 8.  One module per question:
`grouping` (which ops share a device), `fusion` (which ops become one), `forward_only` (whether backward ops
follow their forward ops), `perturbation` (how wrong may the profile be); the contraction they share is
`algorithms.passes.contract`.

    ColocationGrouping      colocation groups from the ops' `colocation` fields (3.1)
    CoPlacement             (i) an op whose output only its next op uses goes with it, (ii) a backward op
                            goes with its forward op (3.2)
    ForwardOnlyPlacement    place forward ops only and let backward ops follow them, when one device could
                            hold the model; otherwise force forward/backward co-placement (3.3)
    OperatorFusion          fuse directly connected ops of one group with the cycle-safe rule (3.3, Fig. 5)
    ProfilePerturbation     multiply compute and communication costs by seeded random factors (5.3, Fig. 8)

Groups are carried by the ops' `colocation` attribute, which every placer honours (co-adjusted placement,
3.1): a co-placement group is a colocation group.  Merging groups only makes them larger, so a placement of
the coarse graph, expanded through the `CoarseMap`, still satisfies the original graph's colocation
constraints.  Ops that ask for different device types are never put in one group.

Every pass returns a new graph (the input is left alone), checks that it is a DAG (raising `InvalidGraph`
otherwise) and returns a `CoarseMap` whose members are listed in a topological order of the input graph.
"""

from .forward_only import ForwardOnlyPlacement
from .fusion import OperatorFusion
from .grouping import ColocationGrouping, CoPlacement
from .perturbation import ProfilePerturbation

__all__ = ["CoPlacement", "ColocationGrouping", "ForwardOnlyPlacement", "OperatorFusion", "ProfilePerturbation"]
