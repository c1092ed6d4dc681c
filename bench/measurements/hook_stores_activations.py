#!/usr/bin/env python3
"""TL111 `hook-stores-activations`: what a forward hook that appends its module's output to a
list nothing empties costs in a training loop, against the same hook storing
`output.detach()`, emptying the list every step, and storing `output.detach().cpu()`.

Prints, per variant, device memory allocated after each of a few steps and the growth per step.
A benchmark, not a test: needs torch and a CUDA device (runs on the CPU otherwise, reporting
the process's resident set).

Usage: python3 bench/measurements/hook_stores_activations.py [--steps N]
"""

import argparse
import gc
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.dont_write_bytecode = True  # no __pycache__ beside the scripts
from measure import current_memory as memory, pick_device, report_steps  # noqa: E402


def run(variant, steps, device):
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(),
        nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10),
    ).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(32, 3, 64, 64, device=device)
    y = torch.randint(0, 10, (32,), device=device)
    features = []

    def keep(module, inputs, output):
        if variant == "output.detach()":
            features.append(output.detach())
        elif variant == "output.detach().cpu()":
            features.append(output.detach().cpu())
        else:
            features.append(output)

    model[1].register_forward_hook(keep)
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    start = memory(device)
    seen = []
    for _ in range(steps):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if variant == "emptied every step":
            features.clear()
        seen.append(memory(device) - start)
    features.clear()  # the hook closes over the list: emptied, not deleted
    del model, opt, x, y, loss
    gc.collect()
    return seen


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=12)
    args = parser.parse_args()
    device = pick_device()
    print("model: 2 conv layers (3→64→64, 3×3) on a 32×3×64×64 batch; the hook is on the first "
          f"ReLU (its output: {32 * 64 * 64 * 64 * 4 / 2**20:.0f} MiB in float32)")
    variants = ["output (never emptied)", "output.detach()", "emptied every step",
                "output.detach().cpu()"]
    for variant in variants:
        report_steps(variant, run(variant, args.steps, device), 24)


if __name__ == "__main__":
    main()
