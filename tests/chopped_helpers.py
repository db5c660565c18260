"""What the CPU kernel's and the GPU path's chopped-transfer tests share: the rule (buffer cap, random and
regular input choppers, output choppers, a write from the first sweep) and the tile (fast array read through
a bounded periphery with bound management, BL 5)."""

from aimc.devices import AnalogTile, PeripheryConfig, UpdateConfig
from aimc.trainers.algorithms.chopped_kernel import TransferRule

RULE = TransferRule(
    scale=40.0,
    transfer_bl=2,
    momentum=0.25,
    forget_buffer=False,
    no_buffer=False,
    buffer_cap=1.5,
    chop_prob=0.3,
    chop_random=True,
    period=3,
    out_chop_prob=0.2,
    dynamic=False,
    beta=0.0,
    write_after=-1,
)


def transfer_tile(n_out: int, n_in: int, device, mode: str) -> AnalogTile:
    """Arrays A (gain 1) and C (gain 0) of `device`, the update in `mode`, seed 3."""
    return AnalogTile(
        n_out,
        n_in,
        device,
        gains=(1.0, 0.0),
        forward=PeripheryConfig(out_bound=0.3, max_bm_reads=3),
        update=UpdateConfig(mode=mode, desired_bl=5),
        seed=3,
    )
