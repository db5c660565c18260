"""The chopped-transfer rule the CPU kernel's and the GPU path's tests share: buffer cap, random and regular
input choppers, output choppers, a write from the first sweep."""

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
