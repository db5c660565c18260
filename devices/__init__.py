"""aimc device layer: resistive elements, crossbar arrays, pulse kernels and read periphery (numpy only)."""

from devices.threads import limit_blas_threads, set_kernel_threads

limit_blas_threads()

from devices.array import ConductanceArray  # noqa: E402
from devices.periphery import PeripheryConfig, analog_mvm  # noqa: E402
from devices.presets import PRESETS, Preset, get_preset, load_device  # noqa: E402
from devices.response import (  # noqa: E402
    DEVICE_KINDS, ConfigError, ConstantStep, DeviceConfig, ElementParams, Exponential, ExpStep, Ideal, Linear,
    LinearStep, PiecewiseStep, Power, PowStep, SoftBounds, Tabulated, device_schema, parse_device,
)
from devices.rng import Stream  # noqa: E402
from devices.tile import AnalogTile  # noqa: E402
from devices.update import UpdateConfig  # noqa: E402
from devices import bits, kernels, normals, periphery, prefetch, rng, threads  # noqa: E402
from devices.jit_cache import flush_stale  # noqa: E402

flush_stale([rng, prefetch, bits, normals, threads, kernels, periphery], [])  # before any kernel runs: no stale cached kernels

__all__ = [
    "AnalogTile", "ConductanceArray", "ConfigError", "ConstantStep", "DEVICE_KINDS", "DeviceConfig",
    "ElementParams", "ExpStep", "Exponential", "Ideal", "Linear", "LinearStep", "PRESETS", "PeripheryConfig",
    "PiecewiseStep", "PowStep", "Power", "SoftBounds", "Tabulated", "UpdateConfig", "analog_mvm",
    "Preset", "Stream", "device_schema", "get_preset", "limit_blas_threads", "load_device", "parse_device", "set_kernel_threads",
]
