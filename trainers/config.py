"""Configs of the trainer layer: how layers map onto tiles, and which training algorithm runs.

Rates are unambiguous: `lr` is always the step of the gradient update in weight units per unit gradient
(W <- W - lr * grad, for the array that takes the gradient), `transfer_lr` the step of a transfer
(W <- W + transfer_lr * read(P)), both independent of any other rate.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Field, ValidationError, field_validator, model_validator

from aimc.common.errors import ConfigError
from aimc.common.validation import Float32Config, format_validation_error
from aimc.devices import DEVICE_TAGS, DeviceConfig, PeripheryConfig, UpdateConfig, expand_preset_table, load_device


class TileConfig(Float32Config):
    """How a torch layer becomes analog tiles."""

    device: Union[str, DeviceConfig] = Field("r1_power_1", description="device preset name, device file path, "
                                                                     "or an inline device table with `kind`, or with "
                                                                     "`preset` and the fields it changes")
    forward: PeripheryConfig = Field(default_factory=PeripheryConfig, description="read periphery, forward")
    backward: PeripheryConfig = Field(default_factory=PeripheryConfig, description="read periphery, backward")
    update: UpdateConfig = Field(default_factory=UpdateConfig, description="pulsed or expected update")
    max_in: int = Field(512, ge=1, description="largest tile input size; larger layers are split")
    max_out: int = Field(512, ge=1, description="largest tile output size; larger layers are split")
    bias: Literal["digital", "analog"] = Field("digital", description="bias kept digital or as an analog column")
    out_scale: Union[bool, Literal["column"]] = Field(
        False, description="learnable digital output scale: true, one per layer (aihwkit's learn_out_scaling); "
                           "\"column\", one per output (aihwkit's out_scaling_columnwise); false, none")

    def __init__(self, **data):
        """A problem is a ConfigError with one line per field, named as in an experiment config (`tile.device:
        unknown device ...`), the same message from Python as from `aimc train`."""
        try:
            super().__init__(**data)
        except ValidationError as err:
            raise ConfigError(format_validation_error(err, "tile", hidden=DEVICE_TAGS)) from None

    @field_validator("device", mode="before")
    @classmethod
    def _from_preset(cls, device: object) -> object:
        """An inline table with `preset` becomes that preset's table with its other keys changed."""
        if isinstance(device, dict):
            try:
                return expand_preset_table(device)
            except ConfigError as err:
                raise ValueError(str(err)) from None
        return device

    @field_validator("device")
    @classmethod
    def _known_device(cls, device: Union[str, DeviceConfig]) -> Union[str, DeviceConfig]:
        """A preset name or device file is checked now, not when a layer is built (the name is kept)."""
        if isinstance(device, str):
            try:
                load_device(device)
            except ConfigError as err:
                raise ValueError(str(err)) from None
        return device

    def resolved_device(self) -> DeviceConfig:
        return load_device(self.device)


ZeroShiftMode = Literal["cycles", "random"]
ZERO_SHIFT_MODE = ("how the zero shift drives P to its symmetric point: \"cycles\", alternating up/down pulse pairs "
                   "(Kim et al. 2019; zero_shift_cycles pairs); \"random\", zero_shift_cycles single pulses of "
                   "random sign (Algorithm 1 of arXiv:2602.21321; default count the device's number of states)")


class _Trainer(Float32Config):
    lr: float = Field(0.05, gt=0, description="gradient step (weight units per unit gradient)")


class DigitalSGDConfig(_Trainer):
    """Floating-point SGD on the digital model (the reference)."""

    algorithm: Literal["sgd"] = "sgd"
    lr: float = Field(0.1, gt=0, description="SGD learning rate")


class AnalogSGDConfig(_Trainer):
    """Analog SGD: the gradient pulsed into the single array (R1 Sec. 3)."""

    algorithm: Literal["analog_sgd"] = "analog_sgd"


class _Transfer(_Trainer):
    fast_lr: float | None = Field(None, gt=0, description="gradient step onto the fast array, constant under "
                                  "lr_decay (aihwkit's TransferCompound fast_lr, 1.0 by default there); None: lr. "
                                  "lr still steps the digital parameters")
    transfer_lr: float = Field(0.01, gt=0, description="transfer step beta (weight units per unit read)")
    transfer_every: int = Field(1, ge=1, description="steps between two transfers (k)")
    n_columns: int = Field(1, ge=1, description="columns of P read and transferred per transfer (n)")
    transfer_bl: int | None = Field(None, ge=1, le=32, description="longest pulse train of a transfer (most "
                                    "pulses per element and transfer); None: the tile's update BL. aihwkit gives "
                                    "transfers their own update settings (BL 31 by default)")


WITH_RESET_PROB = ("probability per read column that the transfer's columns of the fast array are reset (aihwkit "
                   "1.1.0's with_reset_prob): after the read, before the write, w = clip(b + reset_std xi); needs a "
                   "device with reset (aihwkit's families)")


class TikiTakaConfig(_Transfer):
    """Tiki-Taka v1 (R2): gradient into P, periodic column-wise transfer of P into W; forward uses W only."""

    algorithm: Literal["tiki_taka"] = "tiki_taka"
    with_reset_prob: float = Field(0.0, ge=0, le=1, description=WITH_RESET_PROB)


class TTv2Config(_Transfer):
    """TTv2 (Gokmen 2021): digital buffer H accumulates reads of P; one pulse into W where |H| >= threshold."""

    algorithm: Literal["ttv2"] = "ttv2"
    threshold: float = Field(1.0, gt=0, description="transfer threshold in units of dw_min")
    with_reset_prob: float = Field(0.0, ge=0, le=1, description=WITH_RESET_PROB)


class ResidualConfig(_Transfer):
    """Residual learning (R1 Sec. 4): mixed weight W + gamma P, gradient at the mixed weight, zero-shifted P."""

    algorithm: Literal["residual"] = "residual"
    gamma: float = Field(0.5, gt=0, description="gain of the residual array P in the mixed weight")
    zero_shift: bool = Field(True, description="zero-shift P to its symmetric point before training")
    zero_shift_cycles: int | None = Field(None, ge=1, description="up/down pulse pairs of the zero shift; None: "
                                                               "the device's number of states (slow on big layers)")
    zero_shift_mode: ZeroShiftMode = Field("cycles", description=ZERO_SHIFT_MODE)


class ResidualV2Config(ResidualConfig):
    """Residual learning v2 (R1 Sec. 5): EMA buffer H of P's reads, one-pulse threshold transfer into W."""

    algorithm: Literal["residual_v2"] = "residual_v2"
    buffer_beta: float = Field(0.1, gt=0, le=1, description="EMA rate of the buffer H <- (1-b) H + b read(P)")
    threshold: float = Field(1.0, gt=0, description="transfer threshold in units of dw_min")


class MultiTileConfig(_Transfer):
    """Multi-tile residual learning (R3): N+1 arrays, W_bar = sum_n gamma^n W(n), transfer every T_n."""

    algorithm: Literal["multi_tile"] = "multi_tile"
    n_tiles: int = Field(4, ge=2, le=10, description="number of arrays N + 1")
    gamma: float = Field(0.5, gt=0, lt=1, description="geometric gain between consecutive arrays")
    period_ratio: float | None = Field(None, ge=1, description="ratio of the transfer periods of consecutive "
                                       "arrays: T_n = transfer_every * round(period_ratio^(N - n)); None: 1/gamma "
                                       "(R3 Appendix K's MNIST runs: 5)")
    transfer_lr_growth: float = Field(1.0, gt=0, description="the transfer out of array N - k has the rate "
                                      "transfer_lr * transfer_lr_growth^k (k = 0 the fastest; R3 Appendix K: 1.2)")
    zero_shift: bool = Field(True, description="zero-shift the fast arrays before training")
    zero_shift_cycles: int | None = Field(None, ge=1, description="up/down pulse pairs of the zero shift; None: "
                                                               "the device's number of states (slow on big layers)")
    zero_shift_mode: ZeroShiftMode = Field("cycles", description=ZERO_SHIFT_MODE)
    warm_start: bool = Field(False, description="R3 Algorithm 1's warm start: the fastest array is transferred "
                             "into one array at a time, the slowest first, moving on when the epoch training loss "
                             "plateaus; the cascade starts after the last switch")


class CTTv2Config(_Trainer):
    """Chopped Tiki-Taka v2 (aihwkit 1.1.0 ChoppedTransferCompound; Rasch et al., Nat. Commun. 15:7133,
    2024, arXiv:2303.04721). Names and defaults are aihwkit's `build_config("c-ttv2")`; every `*_every` is in
    rank-1 updates (one input vector; one output pixel of a convolution), unless `units_in_mbatch`."""

    algorithm: Literal["c_ttv2"] = "c_ttv2"
    fast_lr: float = Field(0.1, gt=0, description="gradient step onto the fast array A: with auto_scale the "
                           "pulse fraction fast_lr * BL * dw_A / (m_x m_d) (weight units per unit d x); without, "
                           "fast_lr itself (weight units per unit d x)")
    scale_fast_lr: bool = Field(False, description="multiply the fast step by lr (later aihwkit versions; "
                                "aihwkit 1.1.0 never does)")
    auto_scale: bool = Field(True, description="scale the fast step by running estimates m_x, m_d of max|x|, max|d|")
    auto_momentum: float = Field(0.99, gt=0, lt=1, description="EMA momentum of m_x, m_d (per batch of m vectors: "
                                 "each vector moves the EMA by (1 - auto_momentum) / m)")
    transfer_lr: float = Field(1.0, gt=0, description="transfer rate lr_T (weight units of C per unit read of A, "
                               "before the buffer granularity): the buffer grows by lr_T * read / granularity")
    scale_transfer_lr: bool = Field(True, description="lr_T = transfer_lr * lr (true) or transfer_lr (false)")
    transfer_every: float = Field(1.0, description="rank-1 updates between two column reads (or mini-batches "
                                  "with units_in_mbatch), rounded to an integer >= 1; if < 0, the read period is "
                                  "round(n_states / n_in * |transfer_every|) rank-1 updates, n_states = (w_max - "
                                  "w_min) / dw_A of the fast device (aihwkit's calcNumStates): |transfer_every| "
                                  "n_states updates per sweep")
    step: float = Field(1.0, gt=0, description="write into C: lr = step * dw_C per unit of the thresholded buffer "
                        "(1: exactly n pulses; otherwise a pulsed update of C with transfer_bl slots and no update "
                        "management: with transfer_bl 1 each pulse fires with probability min(step, 1))")
    units_in_mbatch: bool = Field(False, description="transfer_every counts mini-batches instead of rank-1 updates")
    in_chop_prob: float = Field(0.1, ge=0, le=1, description="chopper switching of a column: probability per read "
                                "(in_chop_random) or the reciprocal of the period in sweeps (regular)")
    in_chop_random: bool = Field(True, description="switch input choppers at random (true) or regularly (false)")
    out_chop_prob: float = Field(0.0, ge=0, le=1, description="probability per sweep that a row's output chopper "
                                 "switches")
    buffer_granularity: float = Field(1.0, gt=0, description="buffer threshold in units of dw_A (times the "
                                      "auto_granularity factor)")
    auto_granularity: float = Field(0.0, ge=0, description="if > 0, the threshold is multiplied by "
                                    "auto_granularity / (n_in * transfer_every): rank-1 updates of constant gradient "
                                    "that fill the buffer to one pulse")
    momentum: float = Field(0.0, ge=0, le=1, description="buffer kept after a pulse: H <- momentum H "
                            "(forget_buffer) or H <- H - (1 - momentum) n")
    forget_buffer: bool = Field(True, description="after a pulse keep momentum * H (true) or subtract the pulses")
    no_buffer: bool = Field(False, description="each read is thresholded alone (no memory in H)")
    correct_gradient_magnitudes: bool = Field(False, description="divide the buffer increment by the fast step and "
                                              "use dw_C / dw_A (aihwkit's correct_gradient_magnitudes)")
    transfer_bl: int = Field(1, ge=1, le=32, description="most pulses per element and column write into C")
    gamma: float = Field(0.0, ge=0, description="gain of the de-chopped A in the forward weight C + gamma A (later "
                         "aihwkit versions; needs in_chop_prob = out_chop_prob = 0); the transfer rate is "
                         "multiplied by gamma where gamma > 0")
    with_reset_prob: float = Field(0.0, ge=0, le=1, description="resets during transfers: 0 only (aihwkit 1.1.0's "
                                   "ChoppedTransferCompound accepts the field but resets nothing)")

    @field_validator("transfer_every")
    @classmethod
    def _some_period(cls, te: float) -> float:
        if te == 0:
            raise ValueError("transfer_every = 0: give the rank-1 updates between two reads (> 0), or a multiple of "
                             "the fast device's number of states per sweep (< 0)")
        return te

    @field_validator("with_reset_prob")
    @classmethod
    def _no_reset(cls, p: float) -> float:
        if p > 0:
            raise ValueError(f"with_reset_prob = {p}: resets during transfers are not provided for c_ttv2 and agad "
                             "(aihwkit 1.1.0's ChoppedTransferCompound resets nothing either); use tiki_taka or ttv2")
        return p

    @model_validator(mode="after")
    def _gamma_without_choppers(self):
        if self.gamma > 0 and (self.in_chop_prob > 0 or self.out_chop_prob > 0):
            raise ValueError(f"gamma = {self.gamma} needs in_chop_prob = out_chop_prob = 0: the forward gain of the "
                             "fast array is one number per tile, it cannot follow per-column choppers")
        return self


class AGADConfig(CTTv2Config):
    """AGAD (aihwkit 1.1.0 DynamicTransferCompound; Rasch et al. 2024): c-TTv2 whose reads are taken relative to
    a reference latched from the running mean of the reads at each chopper switch; no writes into C during the
    first chopper period. Defaults are aihwkit's `build_config("agad")`."""

    algorithm: Literal["agad"] = "agad"
    in_chop_prob: float = Field(0.1, gt=0, le=1, description="1 / chopper period: the input choppers switch "
                                "every N_s = max(ceil(1 / in_chop_prob), 2) sweeps (and at random with this "
                                "probability per read when in_chop_random)")
    in_chop_random: bool = Field(False, description="also switch at random with probability in_chop_prob per read")
    tail_weightening: float = Field(5.0, gt=0, description="running mean rate beta = min(tail_weightening / N_s, 1)")
    buffer_cap: float = Field(0.0, ge=0, description="if > 0 (and not forget_buffer), |H| <= buffer_cap * "
                              "transfer_bl")
    experimental_correct_accumulation: bool = Field(False, description="divide the buffer increment by the reads "
                                                    "of the column in the current chopper phase so far, at most "
                                                    "1 / dw_A (exact with regular switching)")
    experimental_fast_lr_feedback: bool = Field(False, description="rescale the fast step once per "
                                                "experimental_feedback_mod chopper periods (n_in |transfer_every| "
                                                "N_s updates) by target / (largest change of the reference at its "
                                                "latches since): aihwkit 1.1.0's C++-only option")
    experimental_feedback_target: float = Field(0.1, gt=0, description="feedback target as a fraction of the fast "
                                                "device's w_max - dw_A, w_max = n_states dw_A / 2 (clipped to "
                                                "[dw_A, w_max])")
    experimental_feedback_mod: int = Field(1, ge=1, description="chopper periods between two feedback steps")


class RiderConfig(_Transfer):
    """RIDER (arXiv:2602.21321, Algorithm 2): residual learning whose reference Q tracks the symmetric point of P
    on the fly: mixed weight W + gamma (P - Q), Q <- (1 - tracking_rate) Q + tracking_rate P per read column,
    W <- W + transfer_lr (P - Q); no zero shift needed."""

    algorithm: Literal["rider"] = "rider"
    gamma: float = Field(0.1, gt=0, description="gain of P - Q in the mixed weight")
    tracking_rate: float = Field(0.1, gt=0, le=1, description="EMA rate eta of the digital reference Q, per read "
                                 "of a column (Q <- (1 - eta) Q + eta P)")
    threshold: float | None = Field(None, gt=0, description="None: each read moves W by a pulsed update of "
                                    "transfer_lr c (P - Q~) (Eq. 11b / 18b); a number: the reads accumulate in a "
                                    "digital buffer H += transfer_lr c (P - Q~) that fires whole pulses into W "
                                    "where |H| >= threshold * dw_min (as TT-v2, and as the paper's aihwkit runs "
                                    "transfer through DynamicTransferCompound's buffer)")
    zero_shift: bool = Field(False, description="zero-shift P before training as well (not needed by RIDER)")
    zero_shift_cycles: int | None = Field(None, ge=1, description="pulse pairs (or pulses) of that zero shift")
    zero_shift_mode: ZeroShiftMode = Field("cycles", description=ZERO_SHIFT_MODE)


class ERiderConfig(RiderConfig):
    """E-RIDER (arXiv:2602.21321, Algorithm 3): RIDER with a chopper c = +-1 per tile on the gradient of P and in the
    mixed weight W + gamma c (P - Q~); the analog reference Q~ is reprogrammed to Q at each chopper switch."""

    algorithm: Literal["e_rider"] = "e_rider"
    chop_prob: float = Field(0.05, gt=0, le=1, description="chopper switching per step: probability "
                             "(chop_random) or 1 / period in steps, period max(ceil(1 / chop_prob), 2)")
    chop_random: bool = Field(True, description="switch at random (Eq. 17 of arXiv:2602.21321) or regularly")


class MixedPrecisionConfig(_Trainer):
    """Mixed precision: digital gradient accumulator; whole pulses fired where it reaches dw_min (R3 baseline)."""

    algorithm: Literal["mixed_precision"] = "mixed_precision"
    threshold: float = Field(1.0, gt=0, description="pulse threshold in units of dw_min")


TrainerConfig = Annotated[
    Union[DigitalSGDConfig, AnalogSGDConfig, TikiTakaConfig, TTv2Config, ResidualConfig, ResidualV2Config,
          MultiTileConfig, MixedPrecisionConfig, CTTv2Config, AGADConfig,
          RiderConfig, ERiderConfig],
    Field(discriminator="algorithm"),
]
ALGORITHMS = ("sgd", "analog_sgd", "tiki_taka", "ttv2", "residual", "residual_v2", "multi_tile",
              "mixed_precision", "c_ttv2", "agad", "rider", "e_rider")
