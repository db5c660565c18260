"""Named presets of real and paper devices, with the source of their numbers.

aihwkit presets (`aihwkit_*`): the fields aihwkit 1.1.0's preset classes set (`simulator/presets/devices.py`,
IBM aihwkit, Apache-2.0), which fit the cited measurements; every other field at aihwkit's default (the
family defaults here are aihwkit's), write noise and the capacitor's leakage included; `reram_sb`, `reram_es`,
`capacitor`, `ecram`, `ecram_mo`, `gokmen_vlasov` are their responses alone (all fields given). Paper presets: R1
Table 8 (Wu et al., NeurIPS 2025; dw_min = 2 tau / 1200 as in R1's code), R1 Fig. 2 (least squares), R3
(few-state devices).
"""

from __future__ import annotations

from dataclasses import dataclass

from aimc.common.errors import ConfigError
from aimc.devices.device_base import DeviceBase
from aimc.devices.families.constant import ConstantStep, Ideal
from aimc.devices.families.exp_step import ExpStep
from aimc.devices.families.exponential import Exponential
from aimc.devices.families.linear import Linear, LinearStep, SoftBounds
from aimc.devices.families.power import Power
from aimc.devices.families.soft_bounds_reference import SoftBoundsReference
from aimc.devices.one_sided import OneSided
from aimc.devices.periphery import PeripheryConfig
from aimc.devices.response import DeviceConfig, parse_device
from aimc.devices.unit_cells import VectorUnitCell
from aimc.devices.update import UpdateConfig


@dataclass(frozen=True)
class Preset:
    device: DeviceConfig
    description: str
    source: str

    def sources(self) -> str:
        """Where each number comes from: the fields the source sets, then every other field at its family's
        default (for aihwkit's families: aihwkit 1.1.0's PulsedDevice and family defaults)."""
        dev = self.device
        values = dev.model_dump()
        given = [k for k in values if k in dev.model_fields_set and k != "kind"]
        rest = [k for k in values if k not in dev.model_fields_set and k != "kind"]
        line = lambda keys: ", ".join(f"{k}={values[k]}" for k in keys)  # noqa: E731
        return f"  from {self.source}: {line(given)}\n  {dev.kind} defaults: {line(rest)}"


_AIHWKIT = "aihwkit 1.1.0 "


def _reram_array(**numbers: float) -> SoftBoundsReference:
    """aihwkit 1.1.0's ReRAM array presets: the fields ReRamArrayOM and ReRamArrayHfO2 share, and `numbers`."""
    return SoftBoundsReference(
        enforce_consistency=True,
        dw_min_dtod_log_normal=True,
        up_down=0.0,
        w_max=1.0,
        w_min=-1.0,
        mult_noise=False,
        up_down_dtod=0.01,
        corrupt_devices_range=0.01,
        corrupt_devices_prob=0.0,
        subtract_symmetry_point=True,
        reference_std=0.05,
        **numbers,
    )


PRESETS: dict[str, Preset] = {
    "ideal": Preset(Ideal(tau=1.0, dw_min=2.0 / 1200), "symmetric constant step, 1200 states", "R1 (ideal device)"),
    # aihwkit presets' responses alone (the names of earlier versions)
    "reram_sb": Preset(
        SoftBounds(
            dw_min=0.002,
            up_down=0.0,
            w_max=1.25,
            w_min=-0.75,
            mult_noise=False,
            dw_min_dtod=0.3,
            up_down_dtod=0.01,
            w_max_dtod=0.3 / 1.25,
            w_min_dtod=0.3 / 0.75,
            dw_min_std=3.75,
        ),
        "ReRAM, soft bounds, noisy; the response of aihwkit_reram_sb without its write noise",
        "aihwkit ReRamSBPresetDevice: loose fit to Gong et al., Nat. Commun. 2018",
    ),
    "reram_es": Preset(
        ExpStep(
            dw_min=0.00135,
            up_down=0.259359,
            w_max=1.0,
            w_min=-1.0,
            a=-0.5,
            b=-0.5,
            gamma_up=5.0,
            gamma_down=5.0,
            A_up=-1.18445,
            A_down=-0.081404,
            dw_min_dtod=0.2,
            up_down_dtod=0.05,
            w_max_dtod=0.3,
            w_min_dtod=0.3,
            dw_min_std=5.0,
        ),
        "ReRAM, exponential step; aihwkit_reram_es without its write noise",
        "aihwkit ReRamESPresetDevice: fit to Gong et al., Nat. Commun. 2018",
    ),
    "ecram": Preset(
        LinearStep(
            dw_min=0.002,
            up_down=0.0,
            w_max=1.1724,
            w_min=-0.8276,
            mult_noise=True,
            gamma_up=0.1153,
            gamma_down=0.5085,
            dw_min_dtod=0.1,
            up_down_dtod=0.01,
            w_max_dtod=0.05,
            w_min_dtod=0.05,
            gamma_up_dtod=0.05,
            gamma_down_dtod=0.05,
            dw_min_std=0.3,
            mean_bound_reference=True,
        ),
        "Li-ion ECRAM, nearly linear (the numbers of aihwkit_ecram)",
        "aihwkit EcRamPresetDevice: fit to Tang et al., IEDM 2018",
    ),
    "ecram_mo": Preset(
        LinearStep(
            dw_min=2.8214e-4,
            up_down=0.0,
            w_max=1.1714,
            w_min=-0.8286,
            mult_noise=True,
            gamma_up=0.4152,
            gamma_down=0.7342,
            dw_min_dtod=0.1,
            up_down_dtod=0.01,
            w_max_dtod=0.05,
            w_min_dtod=0.05,
            gamma_up_dtod=0.05,
            gamma_down_dtod=0.05,
            dw_min_std=2.0,
            mean_bound_reference=True,
        ),
        "metal-oxide ECRAM (the numbers of aihwkit_ecram_mo)",
        "aihwkit EcRamMOPresetDevice: data of Kim et al., IEDM 2019",
    ),
    "capacitor": Preset(
        LinearStep(
            dw_min=0.005,
            up_down=0.0,
            w_max=1.0,
            w_min=-1.0,
            mult_noise=False,
            gamma_up=0.05,
            gamma_down=0.05,
            dw_min_dtod=0.1,
            up_down_dtod=0.06,
            w_max_dtod=0.07,
            w_min_dtod=0.07,
            gamma_up_dtod=0.01,
            gamma_down_dtod=0.01,
            dw_min_std=0.3,
            mean_bound_reference=True,
        ),
        "CMOS capacitor cell; aihwkit_capacitor without its leakage",
        "aihwkit CapacitorPresetDevice: fit to Li et al., VLSI 2018",
    ),
    "gokmen_vlasov": Preset(
        ConstantStep(
            dw_min=0.0016,
            dw_min_dtod=0.3,
            dw_min_std=0.3,
            up_down=0.0,
            up_down_dtod=0.01,
            w_max=1.0,
            w_min=-1.0,
            w_max_dtod=0.3,
            w_min_dtod=0.3,
        ),
        "RPU specification, constant step, 1250 states (= aihwkit_gokmen_vlasov)",
        "aihwkit GokmenVlasovPresetDevice: Gokmen & Vlasov, Front. Neurosci. 2016",
    ),
    # aihwkit's presets: exactly the fields its preset classes set (simulator/presets/devices.py)
    "aihwkit_reram_sb": Preset(
        SoftBoundsReference(
            dw_min=0.002,
            up_down=0.0,
            w_max=1.25,
            w_min=-0.75,
            mult_noise=False,
            dw_min_dtod=0.3,
            up_down_dtod=0.01,
            w_max_dtod=0.3 / 1.25,
            w_min_dtod=0.3 / 0.75,
            dw_min_std=3.75,
            write_noise_std=56.0,
        ),
        "ReRAM, soft bounds, additive cycle noise, write noise (a reference device with zero reference)",
        _AIHWKIT + "ReRamSBPresetDevice (loose fit to Gong et al., Nat. Commun. 2018)",
    ),
    "aihwkit_reram_es": Preset(
        ExpStep(
            dw_min=0.00135,
            dw_min_dtod=0.2,
            dw_min_std=5.0,
            up_down=0.259359,
            up_down_dtod=0.05,
            w_max=1.0,
            w_min=-1.0,
            A_up=-1.18445,
            A_down=-0.081404,
            gamma_up=5.0,
            gamma_down=5.0,
            a=-0.5,
            b=-0.5,
            write_noise_std=75.0,
        ),
        "ReRAM, exponential step, write noise",
        _AIHWKIT + "ReRamESPresetDevice (fit to Gong et al., Nat. Commun. 2018)",
    ),
    "aihwkit_ecram": Preset(
        LinearStep(
            dw_min=0.002,
            dw_min_dtod=0.1,
            w_max=1.1724,
            w_min=-0.8276,
            w_max_dtod=0.05,
            w_min_dtod=0.05,
            gamma_up=0.1153,
            gamma_down=0.5085,
        ),
        "Li-ion ECRAM, nearly linear",
        _AIHWKIT + "EcRamPresetDevice (fit to Tang et al., IEDM 2018)",
    ),
    "aihwkit_ecram_mo": Preset(
        LinearStep(
            dw_min=2.8214e-4,
            dw_min_dtod=0.1,
            dw_min_std=2.0,
            w_max=1.1714,
            w_min=-0.8286,
            w_max_dtod=0.05,
            w_min_dtod=0.05,
            gamma_up=0.4152,
            gamma_down=0.7342,
        ),
        "metal-oxide ECRAM",
        _AIHWKIT + "EcRamMOPresetDevice (data of Kim et al., IEDM 2019)",
    ),
    "aihwkit_capacitor": Preset(
        LinearStep(
            dw_min=0.005,
            dw_min_dtod=0.1,
            up_down_dtod=0.06,
            w_max=1.0,
            w_min=-1.0,
            w_max_dtod=0.07,
            w_min_dtod=0.07,
            gamma_up=0.05,
            gamma_down=0.05,
            gamma_up_dtod=0.01,
            gamma_down_dtod=0.01,
            mult_noise=False,
            lifetime=1e6,
            lifetime_dtod=0.3,
        ),
        "CMOS capacitor cell with leakage (decay per optimizer step)",
        _AIHWKIT + "CapacitorPresetDevice (fit to Li et al., VLSI 2018)",
    ),
    "aihwkit_idealized": Preset(
        ConstantStep(dw_min=0.0002, up_down_dtod=0.0, w_max=1.0, w_min=-1.0),
        "constant step, 10000 states, aihwkit's spreads",
        _AIHWKIT + "IdealizedPresetDevice",
    ),
    "aihwkit_gokmen_vlasov": Preset(
        ConstantStep(dw_min=0.0016, w_max=1.0, w_min=-1.0),
        "RPU specification, constant step, 1250 states",
        _AIHWKIT + "GokmenVlasovPresetDevice (Gokmen & Vlasov, Front. Neurosci. 2016)",
    ),
    # aihwkit 1.1.0's ReRAM array presets (SoftBoundsReference, log-normal step spread)
    "aihwkit_reram_array_om": Preset(
        _reram_array(
            dw_min=0.0949,
            dw_min_dtod=0.7829,
            w_max_dtod=0.3499,
            w_min_dtod=0.5695,
            dw_min_std=0.4158,
            write_noise_std=1.4113,
        ),
        "ReRAM array, optimized material: few states, large log-normal step spread, reference at the symmetric point",
        _AIHWKIT + "ReRamArrayOMPresetDevice (fit to Gong & Rasch et al., IEDM 2022)",
    ),
    "aihwkit_reram_array_hfo2": Preset(
        _reram_array(
            dw_min=0.4622,
            dw_min_dtod=0.7125,
            w_max_dtod=0.4295,
            w_min_dtod=0.599,
            dw_min_std=0.2174,
            write_noise_std=0.5841,
        ),
        "ReRAM array, HfO2: few states, large log-normal step spread, reference at the symmetric point",
        _AIHWKIT + "ReRamArrayHfO2PresetDevice (fit to Gong & Rasch et al., IEDM 2022)",
    ),
    "pcm_like": Preset(
        Exponential(gamma=2.0, tau=0.7, dw_min=2 * 0.7 / 1200, dw_min_std=0.3),
        "strongly saturating response of PCM's gradual SET (R1's exponential family, g = 2)",
        "shape and range of R1 Table 8's exponential g = 2, tau = 0.7 device; noise 30% (R1 Table 7 range)",
    ),
    "r1_power_0.5": Preset(Power(gamma=0.5, tau=0.6, dw_min=1e-3), "R1 power response g = 0.5", "R1 Table 8"),
    "r1_power_1": Preset(Power(gamma=1.0, tau=0.6, dw_min=1e-3), "R1 power response g = 1", "R1 Table 8"),
    "r1_power_2": Preset(Power(gamma=2.0, tau=0.7, dw_min=2 * 0.7 / 1200), "R1 power response g = 2", "R1 Table 8"),
    "r1_exp_0.5": Preset(Exponential(gamma=0.5, tau=0.6, dw_min=1e-3), "R1 exponential response g = 0.5", "R1 Table 8"),
    "r1_exp_2": Preset(
        Exponential(gamma=2.0, tau=0.7, dw_min=2 * 0.7 / 1200), "R1 exponential response g = 2", "R1 Table 8"
    ),
    "r1_lstsq": Preset(
        Linear(tau=3.5, dw_min=1e-4, c=0.2),
        "R1 Fig. 2 shifted-linear device (c = 0.2)",
        "R1 Fig. 2: tau = 3.5, dw_min = 1e-4, c in {0, 0.1, 0.2, 0.3}",
    ),
    "r3_10_states": Preset(Linear(tau=1.0, dw_min=0.2), "soft-bounds device with 10 states", "R3 (4 to 80 states)"),
    "r3_4_states": Preset(Linear(tau=1.0, dw_min=0.5), "soft-bounds device with 4 states", "R3 (4 to 80 states)"),
}

# aihwkit 1.1.0's PCMPresetUnitCell: two PCMPresetDevice (ExpStep) in a one-sided cell, refreshed after every
# mini-batch; reads of the refresh through PresetIOParameters (out_bound 20, out_noise 0.1, 7-bit DAC, 9-bit
# ADC), rewrites with PresetUpdateParameters(desired_bl=31).
PRESETS["aihwkit_pcm"] = Preset(
    OneSided(
        device=ExpStep(
            dw_min=0.01,
            up_down=0.0,
            w_max=2.0,
            w_min=0.0,
            a=-1.0,
            b=0.0,
            gamma_up=2.5,
            gamma_down=2.5,
            A_up=-27.235,
            A_down=-2.235,
            dw_min_dtod=0.2,
            up_down_dtod=0.05,
            w_max_dtod=0.1,
            w_min_dtod=0.0,
            dw_min_std=0.6,
            dw_min_std_add=0.042,
            dw_min_std_slope=0.108,
            write_noise_std=0.0,
            reset=0.01,
            reset_dtod=0.02,
        ),
        refresh_every=1,
        units_in_mbatch=True,
        refresh_forward=PeripheryConfig(out_bound=20.0, out_noise=0.1, inp_bits=7, out_bits=9),
        refresh_update=UpdateConfig(desired_bl=31),
    ),
    "PCM pair G+ - G- (one-sided cell, potentiation only), refreshed every mini-batch",
    _AIHWKIT + "PCMPresetUnitCell of two PCMPresetDevice (fit to Nandakumar et al., Front. Neurosci. 2020)",
)


# aihwkit 1.1.0's ReRamES2Preset ... Idealized4Preset: 2 or 4 devices of one aihwkit device preset per cross point
# (VectorUnitCell), one device drawn at random per update cycle (SINGLE_RANDOM), W their mean. A table of their own:
# PRESETS holds the single devices and the one-sided cell (the presets every fingerprint of scripts/fingerprints.py
# covers); get_preset and load_device resolve both.
UNIT_CELL_PRESETS: dict[str, Preset] = {}
for _name, _ak in (
    ("reram_es", "ReRamES"),
    ("reram_sb", "ReRamSB"),
    ("capacitor", "Capacitor"),
    ("ecram", "EcRam"),
    ("ecram_mo", "EcRamMO"),
    ("idealized", "Idealized"),
):
    for _n in (2, 4):
        UNIT_CELL_PRESETS[f"aihwkit_{_name}_{_n}"] = Preset(
            VectorUnitCell(devices=[PRESETS[f"aihwkit_{_name}"].device] * _n, update_policy="SINGLE_RANDOM"),
            f"{_n} devices of aihwkit_{_name} per cross point, one updated per cycle at random, W their mean",
            _AIHWKIT + f"{_ak}{_n}Preset (VectorUnitCell of {_n} {_ak}PresetDevice, SINGLE_RANDOM)",
        )


def get_preset(name: str) -> DeviceConfig:
    """The device config of preset `name`."""
    known = {**PRESETS, **UNIT_CELL_PRESETS}
    try:
        return known[name].device
    except KeyError:
        raise ConfigError(f"unknown device preset {name!r}; known: {', '.join(known)}") from None


def expand_preset_table(table: dict) -> dict:
    """A device table that starts from a preset, `{preset = "aihwkit_reram_es", write_noise_std = 0.0}`, as the
    preset's full table with the given fields changed; any other table unchanged. The family stays the preset's:
    a `kind` beside `preset` is refused."""
    if "preset" not in table:
        return table
    name = table["preset"]
    if not isinstance(name, str):
        raise ConfigError(f"device table: preset must be a preset name, not {name!r}")
    if "kind" in table:
        raise ConfigError(f"device table: give either preset ({name!r}) or kind ({table['kind']!r}), not both")
    return {**get_preset(name).model_dump(mode="json"), **{k: v for k, v in table.items() if k != "preset"}}


def load_device(spec: str | dict | DeviceConfig) -> DeviceConfig:
    """Resolve a device given as a preset name, a path to a JSON/TOML device file (the device table at the top
    level or under a `device` key, as `aimc fit` writes it), an inline dict with `kind` or with `preset` (see
    `expand_preset_table`), or a config object."""
    import json
    import tomllib
    from pathlib import Path

    if isinstance(spec, (DeviceBase, OneSided, VectorUnitCell)):
        return spec
    if isinstance(spec, dict):
        return parse_device(expand_preset_table(spec))
    if spec in PRESETS or spec in UNIT_CELL_PRESETS:
        return get_preset(spec)
    path = Path(spec)
    if path.suffix.lower() in (".json", ".toml"):
        if not path.is_file():
            raise ConfigError(f"device file {str(path)!r} does not exist")
        text = path.read_text()
        try:
            data = json.loads(text) if path.suffix.lower() == ".json" else tomllib.loads(text)
        except (json.JSONDecodeError, tomllib.TOMLDecodeError) as err:
            raise ConfigError(f"device file {str(path)!r} is not valid {path.suffix[1:].upper()}: {err}") from None
        return parse_device(data.get("device", data), where=str(path))
    raise ConfigError(f"unknown device {spec!r}: not a preset ({', '.join(PRESETS)}) nor a .json/.toml file")
