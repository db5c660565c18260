"""Read periphery of a crossbar: y = W x through DAC, output noise, ADC and bound management.

Model (aihwkit 1.1.0's forward pass, forward and backward alike; the defaults are R1's hardware settings:
DAC 7 bit, input bound 1, ADC 9 bit, output bound 12, output noise 0.06, noise and bound management on,
[R1] Wu et al., NeurIPS 2025, arXiv:2502.06309): each input vector is divided by its absolute maximum
(noise management; PeripheryConfig.noise_management lists the other scales), clipped to +-inp_bound and
quantized to 2^inp_bits - 1 levels; the analog MVM adds N(0, out_noise^2) to every output; outputs are
clipped to +-out_bound and quantized to 2^out_bits - 1 levels; where an output saturates and bound
management is on, that sample is read again with its input halved, until the input's divisor exceeds
`max_bm_factor` or `max_bm_res` / the DAC's step (aihwkit's limits: with a 7-bit DAC the fifth read, at 1/16
of the input, is the last), and the last read is clipped.
The result is scaled back to the units of x. The output noise of sample b comes from stream (seed, counter,
b) of the caller's `devices.rng.Stream`, one counter per read (and per bound-management re-read).
average_abs_max noise management keeps a running average across reads: the caller holds it (an AnalogTile
one for its forward and backward reads together, as aihwkit 1.1.0's CPU tile).
"""

from __future__ import annotations

from functools import cached_property
from typing import Literal

import numpy as np
from numba import njit, prange, uint64
from pydantic import Field

from aimc.common.validation import Float32Config
from aimc.devices.converters import dac_input, level_step, quantize
from aimc.devices.crossbar_product import dac_product, product
from aimc.devices.noise_management import fresh_average, nm_scales
from aimc.devices.rng import Stream, normal_step, stream_seed

NM_CODES = {False: 0, True: 1, "abs_max": 1, "max": 2, "constant": 3, "abs_max_np_sum": 4, "average_abs_max": 5}
"""The kernels' code of each noise_management value."""


class PeripheryConfig(Float32Config):
    """DAC/ADC and noise of one read direction. Defaults are R1's hardware settings."""

    inp_bound: float = Field(1.0, gt=0, description="DAC input range +-inp_bound (normalized units)")
    inp_bits: int | None = Field(7, ge=1, le=24, description="DAC resolution in bits; None: no quantization")
    out_bound: float = Field(12.0, gt=0, description="ADC output range +-out_bound (normalized units)")
    out_bits: int | None = Field(9, ge=1, le=24, description="ADC resolution in bits; None: no quantization")
    out_noise: float = Field(0.06, ge=0, description="std of additive output noise (normalized units)")
    noise_management: bool | Literal["abs_max", "max", "constant", "abs_max_np_sum", "average_abs_max"] = Field(
        True,
        description="the scale each input vector is divided by: true or abs_max its max |x|, max its max x (a "
        "vector with max x <= 0 reads 0), constant nm_thres, abs_max_np_sum max |x| raised towards "
        "max(sum x+, -sum x-) nm_assumed_wmax / out_bound, average_abs_max a running average of max |x| "
        "(nm_decay); false none (aihwkit's NoiseManagementType)",
    )
    nm_thres: float = Field(
        0.0,
        ge=0,
        description="constant: the scale (0: 1); abs_max, max, abs_max_np_sum: the most max |x| or max x may "
        "count for (0: no limit); unused by average_abs_max",
    )
    nm_assumed_wmax: float = Field(
        0.6, gt=0, description="abs_max_np_sum: the |weight| assumed for every element (normalized units)"
    )
    nm_decay: float = Field(
        0.001, ge=0, le=1, description="average_abs_max: the weight of each new vector's max |x| in the average"
    )
    bound_management: bool = Field(True, description="re-read saturated samples with the input halved")
    max_bm_factor: int = Field(1000, ge=1, description="bound management stops once the input is divided by more")
    max_bm_res: float = Field(
        0.25, gt=0, description="bound management stops once the input's divisor exceeds max_bm_res / the DAC step"
    )
    max_bm_reads: int | None = Field(None, ge=1, le=30, description="at most this many reads per sample; None: no cap")
    ideal: bool = Field(False, description="exact floating-point MVM: no DAC, noise, ADC or bounds")

    @classmethod
    def perfect(cls) -> PeripheryConfig:
        """An exact read, y = W x."""
        return cls(ideal=True)

    @property
    def nm_code(self) -> int:
        """noise_management as the kernels take it: 0 none, 1 abs_max, 2 max, 3 constant, 4 abs_max_np_sum,
        5 average_abs_max."""
        return NM_CODES[self.noise_management]

    @cached_property
    def read_settings(self) -> tuple:
        """The read's converter, noise and bound settings as the kernels take them: (inp_bound, inp_bits (0: no
        DAC), nm_settings, out_noise, out_bound, out_bits (0: no ADC), bound management's saturation check)."""
        return (
            self.inp_bound,
            self.inp_bits or 0,
            self.nm_settings,
            self.out_noise,
            self.out_bound,
            self.out_bits or 0,
            self.bm_reads > 1,
        )

    @cached_property
    def nm_settings(self) -> tuple:
        """Noise management as `nm_scales` takes it: (nm_code, nm_thres, nm_assumed_wmax, out_bound, the DAC
        step (0: no DAC), max_bm_res, nm_decay)."""
        inp_res = float(level_step(self.inp_bound, self.inp_bits)) if self.inp_bits is not None else 0.0
        return (
            self.nm_code,
            float(self.nm_thres),
            float(self.nm_assumed_wmax),
            float(self.out_bound),
            inp_res,
            float(self.max_bm_res),
            float(self.nm_decay),
        )

    @cached_property
    def one_hot_scale(self) -> float:
        """The noise-management scale of a one-hot input of 1 (1 unless nm_thres limits or sets it, or
        abs_max_np_sum raises it; a fresh running average of average_abs_max is 1)."""
        return float(nm_scales(np.ones((1, 1), np.float32), self.nm_settings, fresh_average())[0])

    @cached_property
    def bm_reads(self) -> int:
        """Reads per sample at most: 1 without bound management; else read k (from 0) divides the input by
        2^k and is the last once 2^k > max_bm_factor or, with a DAC, 2^k > max_bm_res / (2 inp_bound /
        (2^inp_bits - 2)) (aihwkit 1.1.0's test after each read, in float32), capped by max_bm_reads."""
        if not self.bound_management:
            return 1
        cap = self.max_bm_reads or 31
        res_limit = np.inf
        if self.inp_bits is not None:
            step = np.float32(2.0 * self.inp_bound) / np.float32(2.0**self.inp_bits - 2.0)
            res_limit = float(np.float32(self.max_bm_res) / step)
        for k in range(cap):
            if 2.0**k > self.max_bm_factor or 2.0**k > res_limit:
                return k + 1
        return cap


@njit(cache=True, inline="always")
def finish_row(out, s, out_noise, bound, bits, check, seed, counter, i) -> bool:
    """Add out_noise * N(0, 1) to the output row `out` (from stream (seed, counter, i)); unless `check` finds
    a saturated output (|y| >= bound), clip, quantize and multiply it by s in place. Returns whether the row
    is finished (False: saturated, left for a re-read). s = 0 (a row of zeros under noise management): the
    row is 0."""
    n = out.shape[0]
    if s == 0:
        for j in range(n):
            out[j] = 0
        return True
    b32 = np.float32(bound)
    step = level_step(bound, bits)
    if out_noise > 0:
        rs = stream_seed(uint64(seed), uint64(counter), uint64(i))
        for j in range(n):
            xi, rs = normal_step(rs)
            out[j] += np.float32(out_noise * xi)
    if check:
        for j in range(n):
            if abs(out[j]) >= b32:
                return False
    if bits > 0:
        for j in range(n):
            out[j] = quantize(out[j], b32, step) * s
    else:
        for j in range(n):
            out[j] = min(max(out[j], -b32), b32) * s
    return True


@njit(cache=True, parallel=True)
def _finish_rows(y, rows, row_scale, out_noise, bound, bits, check, seed, counter, done) -> None:
    """finish_row for the rows `rows` of y (row i from stream (seed, counter, i)), row rows[k] scaled by
    row_scale[k]; done[k]: that row finished (True) or saturated (False, left for a re-read)."""
    for k in prange(len(rows)):
        done[k] = finish_row(y[rows[k]], row_scale[k], out_noise, bound, bits, check, seed, counter, rows[k])


@njit(cache=True)
def read_one_hot(col, periphery, seed, counter, out) -> int:
    """out = the read of a column col (out,) (an array's w - reference) through the periphery with a one-hot
    input of 1: analog_mvm(col[:, None], [[1]], ...) on the calling thread, bit-identical to it (bound
    management re-reads included; noise management divides the input 1 by nm_scale). counter: the stream's
    last counter; returns it after the reads (an ideal read takes none). periphery: the settings (ideal,
    inp_bound, inp_bits, out_noise, out_bound, out_bits, bound_management, reads: PeripheryConfig.bm_reads,
    nm_scale: PeripheryConfig.one_hot_scale), converters as _read's (bits 0: none)."""
    ideal, inp_bound, inp_bits, out_noise, out_bound, out_bits, bound_management, reads, nm_scale = periphery
    if ideal:
        for o in range(col.shape[0]):
            out[o] = col[o]
        return counter
    b32 = np.float32(inp_bound)
    step = level_step(inp_bound, inp_bits)
    s_nm = np.float32(nm_scale)
    factor = np.float32(1.0)  # the input of each attempt: 1, then halved (divided by s_nm before the DAC)
    for attempt in range(reads):
        v = factor / s_nm
        q = quantize(v, b32, step) if inp_bits > 0 else min(max(v, -b32), b32)
        for o in range(col.shape[0]):
            out[o] = np.float32(0.0) + q * col[o]
        counter += 1
        check = bound_management and attempt < reads - 1  # the last attempt is clipped
        if finish_row(out, s_nm / factor, out_noise, out_bound, out_bits, check, seed, counter, 0):
            return counter
        factor *= np.float32(0.5)
    return counter


@njit(cache=True)
def _read(mat, transposed, x, inp_bound, inp_bits, nm, out_noise, out_bound, out_bits, check, seed, counter, average):
    """One read of the whole batch in one call (`read_rows` of all its rows). Returns (y, input scales,
    finished rows)."""
    batch = x.shape[0]
    y = np.zeros((batch, mat.shape[1] if transposed else mat.shape[0]), np.float32)
    scale = np.empty(batch, np.float32)
    done = np.empty(batch, np.bool_)
    settings = (inp_bound, inp_bits, nm, out_noise, out_bound, out_bits, check)
    read_rows(mat, transposed, x, 0, y, scale, done, *settings, seed, counter, average)
    return y, scale, done


@njit(cache=True)
def read_rows(
    mat,
    transposed,
    x,
    first,
    y,
    scale,
    done,
    inp_bound,
    inp_bits,
    nm,
    out_noise,
    out_bound,
    out_bits,
    check,
    seed,
    counter,
    average,
) -> None:
    """Rows first, ..., first + len(x) - 1 of the read of all rows of a batch (mat: `_row_major`'s): noise
    management (nm_scales), DAC and product (crossbar_product.dac_product), output noise and ADC
    (_finish_rows) of their inputs x (rows, in) into y[first:stop] (zero on entry), the input scales
    scale[first:stop] and the finished flags done[first:stop]. Row i's output noise comes from stream
    (seed, counter, i), so a read taken block by block of rows equals `_read` of the whole batch, bit for bit
    (each output is the same dot product, in the same order; average_abs_max's running average, `average`,
    is carried from block to block in row order)."""
    stop = first + x.shape[0]
    s = nm_scales(x, nm, average)
    scale[first:stop] = s
    dac_product(mat, transposed, x, s, inp_bound, inp_bits, y[first:stop])
    _finish_rows(y, np.arange(first, stop), s, out_noise, out_bound, out_bits, check, seed, counter, done[first:stop])


def _row_major(weight: np.ndarray) -> tuple[np.ndarray, bool]:
    """(mat, transposed) for crossbar_product: weight (out, in) itself when row-major, else its row-major
    transpose (a zero-copy view when weight is a transposed array, as in backward reads)."""
    weight = np.asarray(weight, dtype=np.float32)
    if weight.flags.c_contiguous:
        return weight, False
    if weight.T.flags.c_contiguous:
        return weight.T, True
    return np.ascontiguousarray(weight), False


def analog_mvm(
    weight: np.ndarray, x: np.ndarray, cfg: PeripheryConfig, stream: Stream, nm_average: np.ndarray | None = None
) -> np.ndarray:
    """y[b] = weight @ x[b] read through the periphery; weight (out, in), x (batch, in) -> (batch, out).

    stream: the source of the output noise (one counter per read; an empty batch takes none). nm_average:
    the running average of average_abs_max noise management (float32 (1,), `fresh_average()` before the
    first vector; updated in place, one update per vector; None: a fresh one for this read alone); other
    noise-management types leave it alone. The common case (no saturated output) is one Numba call; an ideal
    read is numpy's exact float32 product.
    """
    x = np.require(x, np.float32, ["C", "W"])  # a read-only x would compile the read again
    if len(x) == 0:  # an empty batch reads nothing (and takes no counter)
        return np.zeros((0, np.shape(weight)[0]), np.float32)
    if cfg.ideal:
        return np.ascontiguousarray(x @ np.asarray(weight, dtype=np.float32).T)
    mat, transposed = _row_major(weight)
    y, scale, done = _read(
        mat,
        transposed,
        x,
        *cfg.read_settings,
        stream.seed,
        stream.take(),
        fresh_average() if nm_average is None else nm_average,
    )
    if not done.all():
        reread_saturated(y, x, np.flatnonzero(~done), scale, cfg, mat, transposed, stream)
    return y


def reread_saturated(y, x, todo, scale, cfg, mat, transposed, stream) -> None:
    """Bound management: read the saturated rows `todo` of y again with their input halved once more per
    attempt, up to cfg.bm_reads reads in all (the last one is clipped); y is finished in place. x: the
    batch's inputs, indexed by vectors of rows (x[rows] (len(rows), in) float32)."""
    inp_bits, out_bits = cfg.inp_bits or 0, cfg.out_bits or 0
    factor = np.float32(1.0)
    for attempt in range(1, cfg.bm_reads):
        if len(todo) == 0:
            break
        factor *= np.float32(0.5)
        unit = np.ones(len(todo), np.float32)
        xs = dac_input(x[todo] * (factor / scale[todo])[:, None], cfg.inp_bound, inp_bits, unit)
        ys = np.zeros((len(todo), y.shape[1]), np.float32)
        product(mat, transposed, xs, ys)
        y[todo] = ys
        check = attempt < cfg.bm_reads - 1
        done = np.empty(len(todo), np.bool_)
        _finish_rows(
            y,
            todo,
            scale[todo] / factor,
            cfg.out_noise,
            cfg.out_bound,
            out_bits,
            check,
            stream.seed,
            stream.take(),
            done,
        )
        todo = todo[~done]
