"""The aimc side of docs/porting.md: an aihwkit 1.1.0 training script, ported line by line.

    python examples/port_from_aihwkit.py [--algorithm analog_sgd|tiki_taka] [--epochs 3] [--n-train 6000]

A 784-128-10 network on the shipped MNIST subset, on a soft-bounds device with aihwkit's default
periphery (7-bit DAC, 9-bit ADC, output noise 0.06, noise and bound management) and pulsed updates
(BL 31, update management), trained with Analog SGD (aihwkit: `SingleRPUConfig` + `AnalogSGD`) or Tiki-Taka
(aihwkit: `UnitCellRPUConfig(device=TransferCompound(...))`). It then reads the weights back, writes them
again, lists the tiles, and saves and reloads model and optimizer state. Prints the test accuracy per epoch.
"""

from __future__ import annotations

import argparse
import io

import torch
import torch.nn.functional as F
from torch import nn

from aimc import trainers
from aimc.datasets import load_dataset
from aimc.devices import PeripheryConfig, SoftBounds, UpdateConfig


def tile_config() -> trainers.TileConfig:
    """aihwkit: rpu_config = SingleRPUConfig(device=SoftBoundsDevice(...)); rpu_config.forward... ."""
    periphery = PeripheryConfig(
        inp_bits=7,
        inp_bound=1.0,
        out_bits=9,
        out_bound=12.0,
        out_noise=0.06,
        noise_management=True,
        bound_management=True,
    )
    return trainers.TileConfig(
        device=SoftBounds(dw_min=0.001, w_max=0.6, w_min=-0.6, dw_min_dtod=0.3, dw_min_std=0.3, up_down=0.0),
        forward=periphery,
        backward=periphery,
        update=UpdateConfig(mode="pulsed", desired_bl=31, update_management=True, update_bl_management=True),
        max_in=512,
        max_out=512,
        bias="digital",
        out_scale=False,
    )


def trainer_config(algorithm: str, lr: float):
    """aihwkit: AnalogSGD(model.parameters(), lr=lr); opt.regroup_param_groups(model)."""
    if algorithm == "tiki_taka":  # TransferCompound(transfer_every=1, n_reads_per_transfer=1, ...)
        return trainers.TikiTakaConfig(lr=lr, transfer_lr=lr, transfer_every=1, n_columns=1)
    return trainers.AnalogSGDConfig(lr=lr)


def main(argv: list[str] | None = None) -> dict[str, float | bool]:
    """Train, check the weight and state round trips; returns the final test accuracy (0..1), the test
    accuracy after writing the read-back weights again, and whether the reloaded model reads the same outputs."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--algorithm", choices=["analog_sgd", "tiki_taka"], default="analog_sgd")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--n-train", type=int, default=6000)
    p.add_argument("--lr", type=float, default=0.1)
    args = p.parse_args(argv)

    torch.manual_seed(0)
    x_train, y_train, x_test, y_test = load_dataset("mnist_small", n_train=args.n_train).tensors()
    x_train, x_test = x_train.flatten(1), x_test.flatten(1)

    model = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
    model = trainers.convert(model, tile_config(), seed=0)  # aihwkit: convert_to_analog(model, rpu_config)
    opt = trainers.build_optimizer(model, trainer_config(args.algorithm, args.lr))

    accuracy = 0.0
    for epoch in range(1, args.epochs + 1):
        model.train()
        order = torch.randperm(len(y_train))
        for i in range(0, len(order), 10):
            idx = order[i : i + 10]
            opt.zero_grad()
            F.cross_entropy(model(x_train[idx]), y_train[idx]).backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            accuracy = float((model(x_test).argmax(1) == y_test).float().mean())
        print(f"epoch {epoch}: test accuracy {100 * accuracy:.2f}%")

    # aihwkit: weights, biases = layer.get_weights(); layer.set_weights(weights, biases)
    for layer in (model[0], model[2]):
        weights, biases = layer.get_weights()
        layer.set_weights(weights, biases)
    model.eval()
    with torch.no_grad():
        rewritten = float((model(x_test).argmax(1) == y_test).float().mean())
    print(f"after get_weights / set_weights: test accuracy {100 * rewritten:.2f}%")
    # aihwkit: for tile in model.analog_tiles(): ...
    for layer in trainers.analog_layers(model):
        print(layer.label(), "on", len(layer.tiles), "tile(s) of", [(t.out_size, t.in_size) for t in layer.tiles])
    print("costs:", {k: v for k, v in opt.costs().items() if k in ("pulses", "reads", "steps")})

    # aihwkit: torch.save(model.state_dict(), f); a fresh analog model loads it
    buf = io.BytesIO()
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, buf)
    buf.seek(0)
    state = torch.load(buf, weights_only=True)
    fresh = trainers.convert(nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10)), tile_config(), seed=0)
    fresh.load_state_dict(state["model"])
    trainers.build_optimizer(fresh, trainer_config(args.algorithm, args.lr)).load_state_dict(state["optimizer"])
    fresh.eval()
    with torch.no_grad():
        same = bool(torch.equal(fresh(x_test[:100]), model(x_test[:100])))
    print("reloaded model reads the same outputs:", same)
    return {"accuracy": accuracy, "rewritten_accuracy": rewritten, "same_after_reload": same}


if __name__ == "__main__":
    main()
