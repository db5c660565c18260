"""aimc trainer layer: PyTorch models on analog tiles and the analog training algorithms.

model = trainers.convert(model, TileConfig(...))          # Linear/Conv/RNN/LSTM/GRU -> Analog...
opt = trainers.build_optimizer(model, ResidualConfig())   # torch.optim conventions
... opt.zero_grad(); loss.backward(); opt.step()
opt.costs(); opt.latency_estimate(); trainers.to_digital(model)
"""

from aimc.trainers import guards  # noqa: F401  (refuses torch optimizers on analog layers)
from aimc.trainers.algorithms import (
    ALGORITHMS,
    OPTIMIZERS,
    AGADConfig,
    AnalogOptimizer,
    AnalogSGDConfig,
    CTTv2Config,
    DigitalSGDConfig,
    ERiderConfig,
    LatencyModel,
    MixedPrecisionConfig,
    MultiTileConfig,
    ResidualConfig,
    ResidualV2Config,
    RiderConfig,
    TikiTakaConfig,
    TrainerConfig,
    TTv2Config,
    build_optimizer,
)
from aimc.trainers.config import TileConfig
from aimc.trainers.conv_layers import (
    AnalogConv1d,
    AnalogConv2d,
    AnalogConv3d,
    AnalogConvTranspose1d,
    AnalogConvTranspose2d,
    AnalogConvTranspose3d,
)
from aimc.trainers.convert import WeightClipWarning, convert, digital_layers, to_digital
from aimc.trainers.inference_config import InferenceTileConfig
from aimc.trainers.inference_layers import InferenceConv2d, InferenceLinear, inference_layers
from aimc.trainers.inference_program import drift, program, unprogram
from aimc.trainers.layers import AnalogLinear, analog_layers
from aimc.trainers.recurrent_layers import AnalogGRU, AnalogLSTM, AnalogRNN

__all__ = [
    "AGADConfig",
    "ALGORITHMS",
    "AnalogConv1d",
    "AnalogConv2d",
    "AnalogConv3d",
    "AnalogConvTranspose1d",
    "AnalogConvTranspose2d",
    "AnalogConvTranspose3d",
    "AnalogGRU",
    "AnalogLSTM",
    "AnalogLinear",
    "AnalogOptimizer",
    "AnalogRNN",
    "AnalogSGDConfig",
    "CTTv2Config",
    "DigitalSGDConfig",
    "ERiderConfig",
    "InferenceConv2d",
    "InferenceLinear",
    "InferenceTileConfig",
    "LatencyModel",
    "MixedPrecisionConfig",
    "MultiTileConfig",
    "OPTIMIZERS",
    "ResidualConfig",
    "ResidualV2Config",
    "RiderConfig",
    "TTv2Config",
    "TikiTakaConfig",
    "TileConfig",
    "TrainerConfig",
    "WeightClipWarning",
    "analog_layers",
    "build_optimizer",
    "convert",
    "digital_layers",
    "drift",
    "inference_layers",
    "program",
    "to_digital",
    "unprogram",
]
