"""Measurement protocols run on simulated devices the way a lab runs them on real ones.

Every protocol fires single pulses (+1 up, -1 down) into the elements of a `ConductanceArray` and reads
every element after every pulse with Gaussian read noise. Each element is one device of the trace set, so
the device-to-device spread of the device config shows up as spread between traces. Reads are weights
mapped to conductance linearly: G = g_mid + g_scale * w; the map is written into the trace metadata
(`g_mid`, `g_scale`) so that a fit can use it.
"""

from __future__ import annotations

import json

import numpy as np

from aimc.calibration.traces import TraceSet, from_arrays
from aimc.common import seeds
from aimc.devices import ConductanceArray, DeviceConfig, load_device


def cycle_polarity(n_pulses: int, n_cycles: int) -> np.ndarray:
    """Polarity before each read of `n_cycles` cycles of n_pulses up then n_pulses down, read 0 first (0)."""
    if n_pulses < 1 or n_cycles < 1:
        raise ValueError(f"n_pulses ({n_pulses}) and n_cycles ({n_cycles}) must be >= 1")
    one = np.concatenate([np.ones(n_pulses, np.int8), -np.ones(n_pulses, np.int8)])
    return np.concatenate([[0], np.tile(one, n_cycles)]).astype(np.int8)


def measure(
    device: DeviceConfig | str,
    polarity: np.ndarray,
    n_devices: int = 16,
    read_noise: float = 0.0,
    seed: int = 0,
    reset_pulses: int = 0,
    g_mid: float = 20.0,
    g_scale: float = 10.0,
    unit: str = "uS",
) -> TraceSet:
    """Run a pulse sequence on `n_devices` elements of `device` and read after every pulse.

    polarity: (n_reads,) shared by all elements or (n_reads, n_devices); entry k is the pulse fired before
    read k (0: none). read_noise: std of each read (weight units). reset_pulses: down pulses fired first
    without reads (a RESET to the low state). g_mid, g_scale: conductance at w = 0 and per unit weight (unit).
    """
    device = load_device(device)
    pol = np.asarray(polarity, np.int64)
    if pol.ndim == 1:
        pol = np.broadcast_to(pol[:, None], (len(pol), n_devices))
    if pol.ndim != 2 or pol.shape[1] != n_devices or not np.all(np.isin(pol, (-1, 0, 1))):
        raise ValueError(f"polarity must hold -1, 0, +1 with shape (n_reads,) or (n_reads, {n_devices})")
    if read_noise < 0 or g_scale <= 0 or n_devices < 1:
        raise ValueError("read_noise must be >= 0, g_scale > 0, n_devices >= 1")
    arr = ConductanceArray(n_devices, 1, device, seed=seed)
    if reset_pulses > 0:
        arr.pulse(np.full((n_devices, 1), -int(reset_pulses)))
    reads = np.empty(pol.shape)
    for k in range(pol.shape[0]):
        if pol[k].any():
            arr.pulse(pol[k].reshape(n_devices, 1))
        reads[k] = arr.read_weights(read_noise)[:, 0]
    meta = {
        "source": "aimc.calibration.protocols.measure",
        "seed": str(seed),
        "read_noise_w": repr(read_noise),
        "g_mid": repr(float(g_mid)),
        "g_scale": repr(float(g_scale)),
        "device": json.dumps(device.model_dump(mode="json"), separators=(",", ":")),
    }
    return from_arrays(g_mid + g_scale * reads, pol, unit=unit, meta=meta)


def measure_cycles(
    device: DeviceConfig | str,
    n_pulses: int | None = None,
    n_cycles: int = 2,
    n_devices: int = 16,
    read_noise: float = 0.0,
    seed: int = 0,
    **kw,
) -> TraceSet:
    """Potentiation/depression cycles: from the low state (a RESET of n_pulses down pulses), n_cycles times
    n_pulses up then n_pulses down, read after each. n_pulses defaults to 1.5 x the number of states, so the
    trace reaches both bounds. Other keywords go to `measure`."""
    device = load_device(device)
    if n_pulses is None:
        n_pulses = int(np.ceil(1.5 * device.n_states))
    kw.setdefault("reset_pulses", n_pulses)
    return measure(device, cycle_polarity(n_pulses, n_cycles), n_devices, read_noise, seed, **kw)


def measure_random(
    device: DeviceConfig | str,
    n_reads: int,
    n_devices: int = 16,
    p_up: float = 0.5,
    read_noise: float = 0.0,
    seed: int = 0,
    **kw,
) -> TraceSet:
    """Random pulse sequence: before each read, each element gets an up pulse with probability p_up, else a
    down pulse (independent per element and read). Other keywords go to `measure`."""
    if not 0.0 <= p_up <= 1.0:
        raise ValueError(f"p_up must be in [0, 1], got {p_up}")
    rng = seeds.generator(int(seed), seeds.PROTOCOL)
    pol = np.where(rng.random((n_reads, n_devices)) < p_up, 1, -1).astype(np.int8)
    pol[0] = 0
    return measure(device, pol, n_devices, read_noise, seed, **kw)
