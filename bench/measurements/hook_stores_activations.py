#!/usr/bin/env python3
"""TL111 `hook-stores-activations`: what a forward hook that appends its module's output to a
list nothing empties costs in a training loop, against the same hook storing
`output.detach()`, emptying the list every step, and storing `output.detach().cpu()`.

Prints, per variant, device memory allocated after each of a few steps and the growth per step.
A benchmark, not a test: needs torch and a CUDA device (runs on the CPU otherwise, reporting
the process's resident set). Usage: python3 bench/measurements/hook_stores_activations.py [--steps N]
"""

import argparse
import gc
import resource

import torch
import torch.nn as nn
import torch.nn.functional as F


def memory(device):
    if device.type == "cuda":
        torch.cuda.synchronize()
        return torch.cuda.memory_allocated()
    # The current resident set, not the peak: a variant after one that grew would read flat.
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize()


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
    per_step = (seen[-1] - seen[1]) / max(1, steps - 2)
    del model, opt, x, y, loss, features
    gc.collect()
    return seen, per_step


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=12)
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    print(f"torch {torch.__version__}, device {device}"
          + (f" ({torch.cuda.get_device_name()})" if device.type == "cuda" else ""))
    print("model: 2 conv layers (3→64→64, 3×3) on a 32×3×64×64 batch; the hook is on the first ReLU "
          f"(its output: {32 * 64 * 64 * 64 * 4 / 2**20:.0f} MiB in float32)")
    variants = ["output (never emptied)", "output.detach()", "emptied every step",
                "output.detach().cpu()"]
    for variant in variants:
        seen, per_step = run(variant, args.steps, device)
        mib = [round(value / 2**20, 1) for value in seen]
        print(f"{variant:24s} MiB after each step: {mib}")
        print(f"{'':24s} growth per step: {per_step / 2**20:.2f} MiB")


if __name__ == "__main__":
    main()
