"""Statistical inference noise models of analog memory chips (PCM, ReRAM) on torch tensors, after IBM aihwkit
1.1.0's aihwkit.inference (docs/inference.md): weight <-> conductance converters, noise models (programming
noise, drift coefficients, drift and read noise up to an inference time) and drift compensation.

This package needs torch; aimc.devices itself does not import it.
"""

from aimc.devices.inference.compensation import (
    DriftCompensation,
    GlobalDriftCompensation,
    GlobalDriftCompensationWithExactReference,
    PerColumnDriftCompensation,
    ReadFn,
)
from aimc.devices.inference.conductance import (
    ConductanceConverter,
    SingleDeviceConductanceConverter,
    SinglePairConductanceConverter,
)
from aimc.devices.inference.custom_drift import CustomDriftPCMLikeNoiseModel
from aimc.devices.inference.noise_model import DriftState, NoiseModel
from aimc.devices.inference.pcm import PCMLikeNoiseModel
from aimc.devices.inference.reram import ReRamCMONoiseModel, ReRamWan2022NoiseModel
from aimc.devices.inference.state_independent import StateIndependentNoiseModel

NOISE_MODELS = {
    cls.__name__: cls
    for cls in (
        PCMLikeNoiseModel,
        CustomDriftPCMLikeNoiseModel,
        StateIndependentNoiseModel,
        ReRamWan2022NoiseModel,
        ReRamCMONoiseModel,
    )
}
"""The noise models by their (aihwkit) class names, for configurations that name one."""
DRIFT_COMPENSATIONS = {
    cls.__name__: cls
    for cls in (GlobalDriftCompensation, GlobalDriftCompensationWithExactReference, PerColumnDriftCompensation)
}
"""The drift compensations by their (aihwkit) class names."""

__all__ = [
    "ConductanceConverter",
    "CustomDriftPCMLikeNoiseModel",
    "DRIFT_COMPENSATIONS",
    "DriftCompensation",
    "DriftState",
    "GlobalDriftCompensation",
    "GlobalDriftCompensationWithExactReference",
    "NOISE_MODELS",
    "NoiseModel",
    "PCMLikeNoiseModel",
    "PerColumnDriftCompensation",
    "ReRamCMONoiseModel",
    "ReRamWan2022NoiseModel",
    "ReadFn",
    "SingleDeviceConductanceConverter",
    "SinglePairConductanceConverter",
    "StateIndependentNoiseModel",
]
