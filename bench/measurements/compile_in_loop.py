#!/usr/bin/env python3
"""TL203 `compile-in-loop`: what calling `torch.compile` inside the training loop costs, against
compiling once before it: graphs compiled, time per step, and device memory (allocated, and
reserved: CUDA graph pools of mode="reduce-overhead" are reserved, not allocated).

Variants, one process each (dynamo's caches and counters are per process):
- compile once before the loop;
- `torch.compile(model)` again every step (same module: dynamo's cache may answer);
- `torch.compile(lambda x: model(x) * scale)` every step, `scale` changing: a new closure;
- the same two with mode="reduce-overhead" (CUDA graphs; GPU only).

A benchmark, not a test: needs torch (and a CUDA device for the reduce-overhead variants).
Usage: python3 bench/measurements/compile_in_loop.py [--steps N]
"""

import argparse
import subprocess
import sys
import time

import torch
import torch.nn as nn

sys.dont_write_bytecode = True  # no __pycache__ beside the scripts
from measure import current_memory, pick_device  # noqa: E402


def reserved(device):
    return torch.cuda.memory_reserved() if device.type == "cuda" else 0


def run(variant, steps, device):
    import torch._dynamo.utils as dynamo_utils

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1024)).to(device)
    x = torch.randn(256, 1024, device=device)
    mode = "reduce-overhead" if "reduce-overhead" in variant else None
    compiled = torch.compile(model, mode=mode) if variant.startswith("once") else None
    times, allocated, held = [], [], []
    for step in range(steps):
        began = time.perf_counter()
        scale = 1.0 + step / steps
        if variant.startswith("compile(model)"):
            compiled = torch.compile(model, mode=mode)
        elif variant.startswith("compile(closure)"):
            compiled = torch.compile(lambda t: model(t) * scale, mode=mode)
        with torch.no_grad():
            out = compiled(x)
        del out
        allocated.append(current_memory(device))
        held.append(reserved(device))
        times.append(time.perf_counter() - began)
    graphs = dynamo_utils.counters["stats"]["unique_graphs"]
    return times, allocated, held, graphs


VARIANTS = ["once before the loop", "compile(model) every step", "compile(closure) every step",
            "once before the loop, reduce-overhead", "compile(model) every step, reduce-overhead",
            "compile(closure) every step, reduce-overhead"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--variant", choices=VARIANTS)
    args = parser.parse_args()
    if args.variant:
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        times, allocated, held, graphs = run(args.variant, args.steps, device)
        mib = lambda values: [round(v / 2**20, 1) for v in values]  # noqa: E731
        print(f"{args.variant}: {graphs} graphs compiled in {args.steps} steps; "
              f"first step {times[0]:.2f} s, later steps {sum(times[1:]) / (len(times) - 1):.3f} s "
              f"on average, slowest later step {max(times[1:]):.2f} s")
        print(f"    allocated MiB after each step {mib(allocated)}")
        if device.type == "cuda":
            print(f"    reserved MiB after each step  {mib(held)}")
        return
    device = pick_device()
    print("model: Linear(1024, 4096), GELU, Linear(4096, 1024), batch 256, forward under no_grad")
    for variant in VARIANTS:
        if "reduce-overhead" in variant and device.type != "cuda":
            continue
        subprocess.run([sys.executable, __file__, "--steps", str(args.steps), "--variant", variant],
                       check=False, timeout=600)


if __name__ == "__main__":
    main()
