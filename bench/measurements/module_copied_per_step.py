#!/usr/bin/env python3
"""TL113 `module-copied-per-step`: what copying the model (`copy.deepcopy(model)`, an EMA
teacher rebuilt each step) or building a new optimizer on every batch costs, against doing
either once before the loop.

Prints, per variant, the peak memory of a step above the memory before the loop, and the time
per step. A benchmark, not a test: needs torch and a CUDA device (runs on the CPU otherwise,
reporting the process's resident set). Usage:
python3 bench/measurements/module_copied_per_step.py [--steps N]
"""

import argparse
import copy
import gc
import resource
import subprocess
import sys
import time

import torch
import torch.nn as nn

sys.dont_write_bytecode = True  # no __pycache__ beside the scripts
from measure import current_memory, pick_device  # noqa: E402


def peak(device):
    if device.type == "cuda":
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated()
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def run(variant, steps, device):
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Linear(2048, 2048) for _ in range(6)]).to(device)
    x = torch.randn(64, 2048, device=device)
    teacher = copy.deepcopy(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    start = current_memory(device)
    began = time.perf_counter()
    for _ in range(steps):
        if variant == "deepcopy(model) every step":
            teacher = copy.deepcopy(model)
        elif variant == "new Adam every step":
            opt = torch.optim.Adam(model.parameters(), lr=1e-4)
        with torch.no_grad():
            target = teacher(x)
        loss = (model(x) - target).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    elapsed = (time.perf_counter() - began) / steps
    above = peak(device) - start
    state = sum(t.numel() * t.element_size() for s in opt.state.values() for t in s.values()
                if torch.is_tensor(t))
    del model, teacher, opt, x
    gc.collect()
    return above, elapsed, state


VARIANTS = ["once before the loop", "deepcopy(model) every step", "new Adam every step"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--variant", choices=VARIANTS)
    args = parser.parse_args()
    if args.variant:
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        above, elapsed, state = run(args.variant, args.steps, device)
        print(f"{args.variant:28s} peak above start {above / 2**20:7.1f} MiB, "
              f"{elapsed * 1000:7.1f} ms per step, Adam state at the end {state / 2**20:.0f} MiB")
        return
    pick_device()
    print("model: 6 × Linear(2048, 2048), 25.2 M parameters (96 MiB in float32); Adam; batch 64")
    # One process per variant: a peak (of the allocator, or the resident set) is per process.
    for variant in VARIANTS:
        subprocess.run([sys.executable, __file__, "--steps", str(args.steps), "--variant", variant],
                       check=True)


if __name__ == "__main__":
    main()
