#!/usr/bin/env python
"""A sequence of updates on a small c-TTv2 or AGAD tile with aihwkit 1.1.0: mean and spread of the arrays after.

Runs inside the separate aihwkit venv (~/aihwkit-venv). Argument: a JSON spec with "algorithm" ("c-ttv2" or
"agad", aihwkit's build_config names), "device" (ConstantStepDevice fields), "compound" (fields of the
compound to override), "update_bl" (the fast update's desired_bl), "lr", "batches" (a list of [x, d]
mini-batches, x (m, in), d (m, out)), "reps" and optionally "perfect_reads" (default true; false: the column
reads of A through aihwkit's default transfer_forward periphery). Every repetition builds a fresh tile
(weights 0), runs the batches through tile.update and records the fast array A (hidden_weights_0) and the slow
array C (hidden_weights_1, the weight). Prints one JSON line: mean and std over repetitions of both.
"""

import json
import sys

import numpy as np
import torch
from aihwkit.simulator.configs import ConstantStepDevice, build_config
from aihwkit.simulator.tiles import AnalogTile


def main():
    spec = json.loads(open(sys.argv[1]).read())
    torch.set_num_threads(1)
    torch.manual_seed(spec.get("seed", 0))
    cfg = build_config(spec["algorithm"], device=ConstantStepDevice(**spec["device"]))
    for k, v in spec["compound"].items():
        setattr(cfg.device, k, v)
    cfg.update.desired_bl = spec["update_bl"]
    cfg.device.transfer_forward.is_perfect = spec.get("perfect_reads", True)
    cfg.forward.is_perfect = True
    cfg.backward.is_perfect = True
    batches = [(torch.tensor(x, dtype=torch.float32), torch.tensor(d, dtype=torch.float32)) for x, d in spec["batches"]]
    n_out, n_in = batches[0][1].shape[1], batches[0][0].shape[1]
    out = {"A": [], "C": []}
    for _ in range(spec["reps"]):
        tile = AnalogTile(n_out, n_in, cfg, bias=False)
        tile.set_weights(torch.zeros(n_out, n_in))
        tile.set_learning_rate(spec["lr"])
        for x, d in batches:
            tile.update(x, d)
        hidden = dict(zip(tile.tile.get_hidden_parameter_names(), tile.tile.get_hidden_parameters()))
        out["A"].append(hidden["hidden_weights_0"].numpy().astype(float))
        out["C"].append(hidden["hidden_weights_1"].numpy().astype(float))
    res = {}
    for key, vals in out.items():
        res[key + "_mean"] = np.mean(vals, axis=0).tolist()
        res[key + "_std"] = np.std(vals, axis=0).tolist()
    print(json.dumps(res))


if __name__ == "__main__":
    main()
