"""aimc device layer: resistive elements, crossbar arrays, pulse kernels and read periphery (numpy only).

Importing it limits numpy's BLAS to `AIMC_BLAS_THREADS` threads (default 1) for the whole process
(`limit_blas_threads`, threadpoolctl): spinning BLAS threads slow the parallel Numba kernel that follows a
BLAS call up to 10x (devices/threads.py). Set AIMC_BLAS_THREADS=0 before the import to leave BLAS as it is,
or `threadpoolctl.threadpool_limits` after it to change the limit.
"""

import warnings

from numba.core.errors import NumbaPerformanceWarning

from aimc.devices.threads import check_kernel_threads, limit_blas_threads, set_kernel_threads

limit_blas_threads()
# built with parallel=True for the parallel pipeline's clean-up of their serial code, not for a parallel loop (their
# docstrings): Numba's warning that it found none is expected for these (pyproject.toml repeats it for pytest)
warnings.filterwarnings(
    "ignore",
    r"(?s).*no transformation for parallel execution.*"
    r"def (pulsed_update_kernel|pieces_update_kernel|pulse_columns_kernel|coincide_rows_serial|coincide_rows)",
    NumbaPerformanceWarning,
)

from aimc.devices import (  # noqa: E402
    array_update,
    bits,
    characteristics,
    coincidences,
    column_read,
    converters,
    crossbar_product,
    device_base,
    effective_weight,
    effects,
    expected_update,
    kernel_bundles,
    loops,
    noise_management,
    normals,
    one_sided_update,
    patch_read,
    periphery,
    prefetch,
    pulse_trains,
    pulsed_redraw,
    pulsed_set,
    pulsed_update,
    pulses,
    response_step,
    rng,
    threads,
    threshold,
)
from aimc.devices.array import ConductanceArray  # noqa: E402
from aimc.devices.device_base import ElementParams  # noqa: E402
from aimc.devices.families import FAMILY_MODULES, paper  # noqa: E402
from aimc.devices.families.constant import ConstantStep, Ideal  # noqa: E402
from aimc.devices.families.exp_step import ExpStep  # noqa: E402
from aimc.devices.families.exponential import Exponential  # noqa: E402
from aimc.devices.families.linear import Linear, LinearStep, SoftBounds, soft_bounds_pmax  # noqa: E402
from aimc.devices.families.power import Power, PowStep, PowStepReference  # noqa: E402
from aimc.devices.families.soft_bounds_reference import SoftBoundsReference  # noqa: E402
from aimc.devices.families.table import PiecewiseStep, Tabulated  # noqa: E402
from aimc.devices.jit_cache import flush_stale  # noqa: E402
from aimc.devices.one_sided import OneSided  # noqa: E402
from aimc.devices.one_sided_array import OneSidedArray  # noqa: E402
from aimc.devices.periphery import PeripheryConfig, analog_mvm  # noqa: E402
from aimc.devices.presets import (  # noqa: E402
    PRESETS,
    UNIT_CELL_PRESETS,
    Preset,
    expand_preset_table,
    get_preset,
    load_device,
)
from aimc.devices.response import DEVICE_KINDS, DEVICE_TAGS, DeviceConfig, device_schema, parse_device  # noqa: E402
from aimc.devices.rng import Stream  # noqa: E402
from aimc.devices.tile import AnalogTile  # noqa: E402
from aimc.devices.unit_cell_array import UnitCellArray  # noqa: E402
from aimc.devices.unit_cells import ReferenceUnitCell, VectorUnitCell  # noqa: E402
from aimc.devices.update import UpdateConfig  # noqa: E402

CACHED_MODULES = (
    rng,
    prefetch,
    bits,
    normals,
    threads,
    loops,
    response_step,
    kernel_bundles,
    pulses,
    pulse_trains,
    pulsed_redraw,
    coincidences,
    pulsed_update,
    expected_update,
    characteristics,
    effective_weight,
    effects,
    noise_management,
    converters,
    crossbar_product,
    periphery,
    patch_read,
    threshold,
    one_sided_update,
    pulsed_set,
    array_update,
    column_read,
    paper,
    *FAMILY_MODULES,
)
"""Every module with cached Numba kernels (and kernel_bundles, the kernels' argument types): a change to any of
them flushes all their caches, because a kernel's cache does not notice a change in a kernel it inlines from
another module."""
# before any kernel runs: no stale cached kernels (device_base: the parameter columns and family codes the
# kernels bake in)
flush_stale(list(CACHED_MODULES), [device_base])

__all__ = [
    "AnalogTile",
    "check_kernel_threads",
    "ConductanceArray",
    "ConstantStep",
    "DEVICE_KINDS",
    "DEVICE_TAGS",
    "DeviceConfig",
    "ElementParams",
    "ExpStep",
    "Exponential",
    "Ideal",
    "Linear",
    "LinearStep",
    "PRESETS",
    "PeripheryConfig",
    "OneSided",
    "OneSidedArray",
    "PiecewiseStep",
    "PowStep",
    "PowStepReference",
    "Power",
    "ReferenceUnitCell",
    "SoftBounds",
    "SoftBoundsReference",
    "Tabulated",
    "UNIT_CELL_PRESETS",
    "UnitCellArray",
    "UpdateConfig",
    "VectorUnitCell",
    "analog_mvm",
    "Preset",
    "Stream",
    "device_schema",
    "expand_preset_table",
    "get_preset",
    "limit_blas_threads",
    "load_device",
    "parse_device",
    "set_kernel_threads",
    "soft_bounds_pmax",
]
