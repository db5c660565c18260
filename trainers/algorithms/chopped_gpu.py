"""The chopped transfer of a mini-batch on a GPU tile (devices.gpu.tile.GpuTile): the twin of
chopped_kernel.chopped_transfer_kernel as a host loop over the batch's pieces and reads, each step on the
device through the tile's verbs and one kernel of this module.

The recursion is sequential over the reads; within a read each output row is independent. Per piece of
vectors: the chopped vectors and their steps with torch, then the tile's pulsed or expected update of A
(GpuTile.update; skip_update where no vector fires). Per read of column k, in order:

    GpuTile.read_column     one kernel, one thread (bound management's re-reads decide on the whole column)
    buffer_read_kernel      a thread per output row: chopped_kernel.buffer_row (the buffer, threshold and AGAD
                            reference rule, the same function the CPU kernel runs)
    pulses.any()            where writes into C are on: whether any row got pulses (one copy to the host)

then, where pulses came, the queue of C's pulses on the device (a torch copy; GpuTile.pulse where a column is
queued twice) or, with step != 1, a pulsed update of C (GpuTile.update). The choppers' switches, the schedule
and AGAD's feedback are host numbers (chopped_kernel.switch_choppers, fast_step, increment_scale: the same
functions as the CPU kernel's); c_out goes to the device when it changes. Under Numba's CUDA simulator the
result is the CPU kernel's bit for bit; on a GPU the rows' float32 arithmetic may be fused (FMA) apart from
the CPU's in the last bit.
"""

from __future__ import annotations

import numpy as np
import torch
from numba import cuda

from aimc.devices.gpu.runtime import launch, to_device
from aimc.trainers.algorithms.chopped_kernel import (
    ChopperState,
    TransferResult,
    TransferRule,
    buffer_row,
    buffer_rule,
    fast_step,
    increment_scale,
    switch_choppers,
)


@cuda.jit
def buffer_read_kernel(v, k, c_in_k, c_out, s, buf, latch, h_buf, p_ref, m_run, pulses, change):
    """Thread i: row i of the read v (out,) float32 of column k (chopped_kernel.buffer_row with buf =
    buffer_rule(rule), the increment s, sign c_in_k c_out[i]): H[i, k], AGAD's Pref[i, k] and M[i, k] (arrays
    (0, 0) without the dynamic reference) in place, pulses[i] the pulses n into C[i, k], change[i] the
    latch's |change of Pref[i, k]| (0 without a latch)."""
    i = cuda.grid(1)
    if i >= v.shape[0]:
        return
    dynamic = buf[5]
    ref = p_ref[i, k] if dynamic else np.float32(0.0)
    m = m_run[i, k] if dynamic else np.float32(0.0)
    h, q, ref, m, ch = buffer_row(buf, s, c_in_k * c_out[i], v[i], h_buf[i, k], ref, m, latch)
    if dynamic:
        p_ref[i, k] = ref
        m_run[i, k] = m
    h_buf[i, k] = h
    pulses[i] = q
    change[i] = ch


def chopped_transfer_gpu(
    tile,
    arrays: tuple[int, int],
    x,
    d,
    steps: np.ndarray | float,
    rule: TransferRule,
    uniforms: np.ndarray,
    state: ChopperState,
    reads: tuple[int, int],
    position: tuple[int, int],
) -> TransferResult:
    """chopped_kernel.chopped_transfer for a GpuTile `tile`: the same arguments (x, d tensors on the tile's
    device or numpy arrays) and result. `state` stays numpy on the host: H, M and Pref go to the device for
    the call and come back changed; the choppers, AGAD's switched and feedback change on the host."""
    dev = tile.torch_device
    fast_i, slow_i = arrays
    x = torch.as_tensor(x, dtype=torch.float32, device=dev)
    d = torch.as_tensor(d, dtype=torch.float32, device=dev)
    n, n_in = x.shape
    n_out = d.shape[1]
    per_vector = not np.isscalar(steps)
    eta = np.ascontiguousarray(steps, np.float64) if per_vector else np.zeros(0)
    lr = 1.0 if per_vector else float(steps)
    uniforms = np.ascontiguousarray(uniforms, np.float64)
    h_host, c_in, c_out, m_host, p_host, switched, fb, _, queued = state
    h_buf, m_run, p_ref = (to_device(a, dev) for a in (h_host, m_host, p_host))
    c_out_dev = to_device(c_out, dev)
    pending = torch.zeros((n_out, n_in), dtype=torch.int64, device=dev)  # the queue of C's pulses
    pulses = torch.empty(n_out, dtype=torch.int64, device=dev)
    change = torch.empty(n_out, dtype=torch.float32, device=dev)
    buf = buffer_rule(rule)
    dw_a, dw_c = tile.granularity(fast_i), tile.granularity(slow_i)
    write_cfg = tile.update_cfg.model_copy(
        update=dict(desired_bl=rule.transfer_bl, update_management=False, update_bl_management=False)
    )
    first, every = int(reads[0]), int(reads[1])
    col, sweeps = int(position[0]), int(position[1])
    up_pulses = tr_pulses = n_reads = 0

    def flush() -> int:
        """Fire the queued pulses into C and clear the queue; returns pulses fired."""
        fired = tile.pulse(pending, slow_i)
        pending.zero_()
        queued[:] = False
        return fired

    ui = 0
    start = 0
    r = first  # the vector after which the next read comes
    while True:
        end = min(r + 1, n)
        if end > start:  # the fast update of vectors start .. end - 1 with the current choppers
            step_b = [fast_step(rule, eta, fb, b, n) for b in range(start, end)]
            xs = x[start:end] * to_device(c_in, dev)
            ds = d[start:end] * c_out_dev
            if per_vector:
                ds = ds * to_device(np.asarray(step_b, np.float32), dev)[:, None]
            if bool(((xs != 0).any(dim=1) & (ds != 0).any(dim=1)).any()):
                up_pulses += tile.update(xs, ds, lr, fast_i)
            else:  # the update would take its counters and change nothing (no vector with x and d nonzero)
                tile.skip_update(fast_i)
            start = end
        if r >= n:
            break
        r += every
        k = col  # the read of column k
        v = tile.read_column(fast_i, k)
        n_reads += 1
        s = increment_scale(rule, sweeps, dw_a)
        latch = bool(rule.dynamic and switched[k])
        args = (v, k, float(c_in[k]), c_out_dev, float(s), buf, latch, h_buf, p_ref, m_run, pulses, change)
        launch(buffer_read_kernel, n_out, *args)
        if latch:
            if rule.fast_lr_feedback:
                fb[1] = max(fb[1], float(change.max()))
            switched[k] = False
        if sweeps > rule.write_after and bool(pulses.any()):
            if rule.step != 1.0:
                x_write = torch.zeros((1, n_in), dtype=torch.float32, device=dev)
                x_write[0, k] = 1.0
                d_write = (-pulses).to(torch.float32)[None, :]
                tr_pulses += tile.update(x_write, d_write, rule.step * dw_c, slow_i, write_cfg)
            else:
                if queued[k]:
                    tr_pulses += flush()
                pending[:, k] = pulses
                queued[k] = True
        ui, sweeps = switch_choppers(rule, uniforms, ui, k, sweeps, c_in, c_out, switched)
        if k == n_in - 1 and rule.out_chop_prob > 0:
            c_out_dev = to_device(c_out, dev)
        col = (k + 1) % n_in
    if queued.any():
        tr_pulses += flush()
    for host, on_device in ((h_host, h_buf), (m_host, m_run), (p_host, p_ref)):
        host[...] = on_device.cpu().numpy()
    tile.invalidate()
    return TransferResult(col, sweeps, up_pulses, tr_pulses, n_reads)
