"""The config of an inference tile: periphery, noise model, drift compensation, clipping, weight modifier and
mapping, field by field as aihwkit 1.1.0's InferenceRPUConfig (docs/porting.md).

An inference tile holds digital target weights trained by any torch optimizer; `program` writes them once
with the noise model's programming noise and `drift` ages them. During training, the weight modifier and
the forward periphery's output noise make the training hardware-aware (docs/inference.md).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from aimc.common.validation import Float32Config
from aimc.devices.periphery import PeripheryConfig

ModifierType = Literal[
    "none",
    "add_normal",
    "mult_normal",
    "discretize",
    "discretize_add_normal",
    "poly",
    "prog_noise",
    "pcm_noise",
    "drop_connect",
    "copy",
]
"""aihwkit's WeightModifierType members, in snake case (ADD_NORMAL -> "add_normal"). DoReFa is not offered."""

ClipType = Literal["none", "fixed_value", "layer_gaussian", "average_channel_max"]
"""aihwkit's WeightClipType members, in snake case."""

NoiseModelName = Literal["pcm", "custom_drift_pcm", "state_independent", "reram_wan2022", "reram_cmo", "none"]
"""The noise models of aimc.devices.inference by name: PCMLikeNoiseModel (aihwkit's default),
CustomDriftPCMLikeNoiseModel, StateIndependentNoiseModel, ReRamWan2022NoiseModel, ReRamCMONoiseModel; "none"
programs the targets exactly and does not drift."""

CompensationName = Literal["global", "global_exact_reference", "per_column", "none"]
"""GlobalDriftCompensation, GlobalDriftCompensationWithExactReference, PerColumnDriftCompensation, or none."""


class WeightModifierParameter(Float32Config):
    """Perturbation of the forward/backward weights in every training forward pass (hardware-aware
    training); the optimizer updates the unperturbed weights (straight-through). amax is max |W| of the
    layer (rel_to_actual_wmax) or assumed_wmax. Definitions as aihwkit 1.1.0's binary (measured):
    add_normal W + std_dev amax xi; mult_normal W (1 + std_dev amax xi); discretize amax res round(W / (amax
    res)); discretize_add_normal: discretize, then add_normal; poly W + std_dev amax P(|W| / amax) xi with
    P(x) = sum_k coeffs[k] x^k; prog_noise: poly divided by g_max, the sign of W kept (mirrored at zero);
    pcm_noise: the tile's noise model's programming noise (and drift to pcm_t_inference when > 0); with
    pdrop > 0 each weight is then set to 0 with probability pdrop (any type, drop_connect alone)."""

    type: ModifierType = Field("none", description="the perturbation (aihwkit's WeightModifierType)")
    std_dev: float = Field(0.0, ge=0, description="std of the Gaussian noise, relative to amax")
    res: float = Field(0.0, ge=0, le=1, description="discretisation step relative to amax (0: none)")
    sto_round: bool = Field(False, description="stochastic rounding in the discretisation")
    pdrop: float = Field(0.0, ge=0, lt=1, description="drop-connect probability of each weight")
    enable_during_test: bool = Field(False, description="also perturb the weights in eval mode (unprogrammed)")
    rel_to_actual_wmax: bool = Field(True, description="amax = max |W| (False: assumed_wmax)")
    assumed_wmax: float = Field(1.0, gt=0, description="amax when rel_to_actual_wmax is False")
    coeffs: list[float] = Field(
        [0.0105392, 0.0768, -0.046925], min_length=1, description="polynomial of poly / prog_noise"
    )
    g_max: float = Field(25.0, gt=0, description="prog_noise: the conductance (uS) amax maps to")
    pcm_t_inference: float = Field(0.0, ge=0, description="pcm_noise: drift time (s) after programming")

    @model_validator(mode="after")
    def _needs_parameters(self) -> WeightModifierParameter:
        if self.type in ("discretize", "discretize_add_normal") and self.res <= 0:
            raise ValueError(f"modifier.res: the {self.type} modifier needs res > 0")
        if self.type == "drop_connect" and self.pdrop <= 0:
            raise ValueError("modifier.pdrop: the drop_connect modifier needs pdrop > 0")
        return self


class WeightClipParameter(Float32Config):
    """Clipping of the weights before every training forward pass and before programming (aihwkit clips
    after every optimizer step): fixed_value to +-fixed_value; layer_gaussian to +-sigma std(W) (and at most
    fixed_value when > 0); average_channel_max to +- the mean over output rows of max_j |W_ij|."""

    type: ClipType = Field("none", description="the clipping rule (aihwkit's WeightClipType)")
    fixed_value: float = Field(-1.0, description="clip bound of fixed_value (also a cap for the others when > 0)")
    sigma: float = Field(2.5, gt=0, description="layer_gaussian: the bound in standard deviations of W")

    @model_validator(mode="after")
    def _fixed_needs_value(self) -> WeightClipParameter:
        if self.type == "fixed_value" and self.fixed_value <= 0:
            raise ValueError("clip.fixed_value: the fixed_value clip needs fixed_value > 0")
        return self


class MappingParameter(Float32Config):
    """How a layer's weights map onto the conductance range: with weight_scaling_omega > 0 the tile holds
    W / s with s = max|W| / omega (per output row when weight_scaling_columnwise), and the output is
    multiplied by the digital scale s (learned when learn_out_scaling; one per output when
    out_scaling_columnwise, else one per layer). A layer with more than max_input_size inputs or
    max_output_size outputs is split into a grid of tiles of even sizes (aihwkit's tile arrays): each tile
    has its own periphery read, modifier and clip statistics, conductance range, drift compensation."""

    digital_bias: bool = Field(True, description="the bias is added digitally (the only mapping offered)")
    weight_scaling_omega: float = Field(0.0, ge=0, description="abs max of the tile weights after scaling (0: none)")
    weight_scaling_columnwise: bool = Field(False, description="one scale per output row instead of per layer")
    learn_out_scaling: bool = Field(False, description="the output scales are trained parameters")
    out_scaling_columnwise: bool = Field(False, description="learned scales: one per output (else one per layer)")
    max_input_size: int = Field(512, ge=0, description="most inputs of one tile (0: no split)")
    max_output_size: int = Field(512, ge=0, description="most outputs of one tile (0: no split)")

    @model_validator(mode="after")
    def _bias_digital(self) -> MappingParameter:
        if not self.digital_bias:
            raise ValueError("mapping.digital_bias: only a digital bias is offered (a bias column is not)")
        return self


class InferenceTileConfig(Float32Config):
    """An inference tile (aihwkit's InferenceRPUConfig): `convert(model, InferenceTileConfig())` maps Linear
    and Conv2d layers onto it. forward: the read periphery in training and inference; backward: the
    periphery of the gradient read (exact, as aihwkit's inference tile); the update is the digital
    optimizer's."""

    forward: PeripheryConfig = Field(default_factory=PeripheryConfig, description="periphery of the forward read")
    backward: PeripheryConfig = Field(default_factory=PeripheryConfig.perfect, description="periphery of backward")
    noise_model: NoiseModelName = Field("pcm", description="the statistical model of the devices")
    noise_model_options: dict[str, Any] = Field(
        default_factory=dict, description="keyword arguments of the noise model (e.g. g_max, prog_noise_scale)"
    )
    drift_compensation: CompensationName = Field(
        "global", description="scale of the outputs that undoes the mean drift (none: no compensation)"
    )
    clip: WeightClipParameter = Field(default_factory=WeightClipParameter)
    modifier: WeightModifierParameter = Field(default_factory=WeightModifierParameter)
    mapping: MappingParameter = Field(default_factory=MappingParameter)

    @model_validator(mode="after")
    def _stateless_reads(self) -> InferenceTileConfig:
        """average_abs_max needs the running average a training tile holds (`AnalogTile.nm_average`); the
        inference layers' reads keep none."""
        for name in ("forward", "backward"):
            if getattr(self, name).noise_management == "average_abs_max":
                raise ValueError(f"{name}.noise_management: average_abs_max is not available on inference tiles")
        return self
