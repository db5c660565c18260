"""Measure a preset the way a lab would, write the traces as CSV, fit every family (bootstrap intervals over
devices and cycles), write the report.

    python examples/calibrate_device.py [PRESET] [OUT_DIR]       (defaults: pcm_like, calibrate_out)

The fitted device file OUT_DIR/fit/device.json can be given to `aimc train` or `aimc report` as is.
"""

import sys
from pathlib import Path

from aimc.calibration import fit, measure_cycles, read_csv, write_csv, write_report
from aimc.devices import get_preset

preset = sys.argv[1] if len(sys.argv) > 1 else "pcm_like"
out = Path(sys.argv[2] if len(sys.argv) > 2 else "calibrate_out")
device = get_preset(preset)
n_pulses = min(int(1.5 * device.n_states), 600)  # long presets: a shorter cycle keeps the example quick
traces = measure_cycles(device, n_pulses=n_pulses, n_cycles=2, n_devices=16, read_noise=0.2 * device.dw_min, seed=0)
csv = write_csv(traces, out / f"{preset}_traces.csv")
# a progress bar per family on stderr; intervals of the best family from 100 refits of resampled devices and cycles
result = fit(read_csv(csv), source=str(csv), progress=True, intervals="bootstrap", n_boot=100)
result.save(out / "fit")
for row in result.ranking_table()[:5]:
    print(f"{row['kind']:<14} dBIC {row['delta_bic']:10.1f}")
best = result.best
print(f"95% intervals: {best.interval_text}")
for p, v in best.params.items():
    lo, hi = best.ci95[p]
    print(f"  {p:<12} {v:10.4g} [{lo:.4g}, {hi:.4g}]   (preset: {getattr(device, p, None)})")
print("writing the report (64 simulated elements per device) ...", flush=True)
page = write_report([out / "fit", preset], out / "report")
print(f"traces {csv}\ndevice {out / 'fit' / 'device.json'}\nreport {page}")
