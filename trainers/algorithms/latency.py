"""R1 Table 3's latency model of a training step on the chip."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LatencyModel:
    """R1 Table 3's cost model of one layer (ns): an MVM (forward, backward or one column read) takes
    t_mvm; a pulsed update takes bl pulse cycles of t_pulse plus t_pre of MVM pre-processing.

    [R1] Wu et al., NeurIPS 2025, arXiv:2502.06309."""

    t_mvm: float = 40.0
    t_pulse: float = 5.0
    t_pre: float = 5.9
    bl: int = 32

    @property
    def t_update(self) -> float:
        """One pulsed rank-update: 32 * 5 + 5.9 = 165.9 ns (R1 Table 3: 166 ns)."""
        return self.bl * self.t_pulse + self.t_pre
