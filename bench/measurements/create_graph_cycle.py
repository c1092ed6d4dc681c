#!/usr/bin/env python3
"""TL110 `create-graph-cycle`: what `loss.backward(create_graph=True)` in a training loop costs
when the parameters' gradients are never set to `None`, against the same loop that clears them
each step (`opt.zero_grad()`, whose default is `set_to_none=True`) and one that zeroes them in
place (`set_to_none=False`).

Prints, per variant, device memory allocated after each of a few steps and the growth per step.
A benchmark, not a test: needs torch and a CUDA device (runs on the CPU otherwise, reporting
the process's RSS). Usage: python3 bench/measurements/create_graph_cycle.py [--steps N]
"""

import argparse
import gc
import resource
import sys

import torch
import torch.nn as nn

sys.dont_write_bytecode = True  # no __pycache__ beside the scripts
from measure import pick_device, report_steps  # noqa: E402


def memory(device):
    if device.type == "cuda":
        torch.cuda.synchronize()
        return torch.cuda.memory_allocated()
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def run(variant, steps, device):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(512, 2048), nn.Tanh(), nn.Linear(2048, 512)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(256, 512, device=device)
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    start = memory(device)
    seen = []
    for _ in range(steps):
        if variant == "zero_grad()":
            opt.zero_grad()
        elif variant == "zero_grad(set_to_none=False)":
            opt.zero_grad(set_to_none=False)
        loss = model(x).pow(2).mean()
        loss.backward(create_graph=True)
        opt.step()
        seen.append(memory(device) - start)
    del model, opt, x, loss
    gc.collect()
    return seen


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=12)
    args = parser.parse_args()
    device = pick_device()
    for variant in ["never cleared", "zero_grad(set_to_none=False)", "zero_grad()"]:
        report_steps(variant, run(variant, args.steps, device), 30)


if __name__ == "__main__":
    main()
