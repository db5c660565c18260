"""aimc device layer: resistive elements, crossbar arrays, pulse kernels and read periphery (numpy only)."""

from aimc.devices.threads import limit_blas_threads, set_kernel_threads

limit_blas_threads()

from aimc.devices import bits, kernels, normals, periphery, prefetch, rng, threads, threshold  # noqa: E402
from aimc.devices.array import ConductanceArray  # noqa: E402
from aimc.devices.jit_cache import flush_stale  # noqa: E402
from aimc.devices.periphery import PeripheryConfig, analog_mvm  # noqa: E402
from aimc.devices.presets import PRESETS, Preset, get_preset, load_device  # noqa: E402
from aimc.devices.response import (  # noqa: E402
    DEVICE_KINDS,
    ConstantStep,
    DeviceConfig,
    ElementParams,
    Exponential,
    ExpStep,
    Ideal,
    Linear,
    LinearStep,
    PiecewiseStep,
    Power,
    PowStep,
    SoftBounds,
    Tabulated,
    device_schema,
    parse_device,
)
from aimc.devices.rng import Stream  # noqa: E402
from aimc.devices.tile import AnalogTile  # noqa: E402
from aimc.devices.update import UpdateConfig  # noqa: E402

# before any kernel runs: no stale cached kernels
flush_stale([rng, prefetch, bits, normals, threads, kernels, periphery, threshold], [])

__all__ = [
    "AnalogTile", "ConductanceArray", "ConstantStep", "DEVICE_KINDS", "DeviceConfig",
    "ElementParams", "ExpStep", "Exponential", "Ideal", "Linear", "LinearStep", "PRESETS", "PeripheryConfig",
    "PiecewiseStep", "PowStep", "Power", "SoftBounds", "Tabulated", "UpdateConfig", "analog_mvm",
    "Preset", "Stream", "device_schema", "get_preset", "limit_blas_threads", "load_device", "parse_device",
    "set_kernel_threads",
]
