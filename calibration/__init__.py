"""aimc calibration: measure simulated devices, fit response families to pulse traces, report responses."""

from aimc.calibration.families import FAMILY_KINDS, families
from aimc.calibration.family_fit import FamilyFit, fit_family, fit_tabulated
from aimc.calibration.fit import FitResult, fit
from aimc.calibration.formats import FORMATS, read_matrix, read_runs, read_traces
from aimc.calibration.protocols import cycle_polarity, measure, measure_cycles, measure_random
from aimc.calibration.pulse_data import PulseData, WeightMap, predict, pulse_data, weight_map_for
from aimc.calibration.report import resolve, write_report
from aimc.calibration.response_numbers import device_numbers, implicit_penalty
from aimc.calibration.traces import TraceFormatError, TraceSet, from_arrays, read_csv, write_csv

__all__ = [
    "FAMILY_KINDS",
    "FORMATS",
    "FamilyFit",
    "FitResult",
    "PulseData",
    "TraceFormatError",
    "TraceSet",
    "WeightMap",
    "cycle_polarity",
    "device_numbers",
    "families",
    "fit",
    "fit_family",
    "fit_tabulated",
    "from_arrays",
    "implicit_penalty",
    "measure",
    "measure_cycles",
    "measure_random",
    "predict",
    "pulse_data",
    "read_csv",
    "read_matrix",
    "read_runs",
    "read_traces",
    "resolve",
    "weight_map_for",
    "write_csv",
    "write_report",
]
