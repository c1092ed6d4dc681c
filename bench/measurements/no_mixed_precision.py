#!/usr/bin/env python3
"""TL301 `no-mixed-precision`: what a float32 training step holds against the same step under
`torch.autocast` (bfloat16, and float16 with a GradScaler): the peak device memory of a step
above what the model and its optimizer state hold before it (activations saved for backward,
gradients, workspaces), and the step's time.

The model is a small GPT-style encoder (`nn.TransformerEncoder`, 8 layers, d_model 1024, 16
heads, batch 16 × 512 tokens), trained with AdamW; each variant runs in its own process so
that the allocator's peak is its own.

A benchmark, not a test: needs torch and a CUDA device (on the CPU it says so and exits 0).
Usage: python3 bench/measurements/no_mixed_precision.py [--steps N] [--layers N] [--batch N]
"""

import argparse
import subprocess
import sys
import time

import torch
import torch.nn as nn

sys.dont_write_bytecode = True  # no __pycache__ beside the scripts
from measure import pick_device  # noqa: E402

VARIANTS = ["float32", "autocast bfloat16", "autocast float16 + GradScaler"]


def run(variant, steps, layers, batch):
    device = torch.device("cuda")
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(1024, 16, 4096, batch_first=True, dropout=0.0)
    model = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False).to(device)
    head = nn.Linear(1024, 1024).to(device)
    params = list(model.parameters()) + list(head.parameters())
    optimizer = torch.optim.AdamW(params, lr=1e-4)
    scaler = torch.amp.GradScaler("cuda") if "GradScaler" in variant else None
    dtype = {"bfloat16": torch.bfloat16, "float16": torch.float16}.get(variant.split()[1], None) \
        if variant.startswith("autocast") else None
    x = torch.randn(batch, 512, 1024, device=device)
    times = []
    for step in range(steps):
        if step == 1:
            # The model, its gradients and AdamW's state exist from the first step on.
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            before = torch.cuda.memory_allocated()
        began = time.perf_counter()
        with torch.autocast("cuda", dtype=dtype, enabled=dtype is not None):
            loss = head(model(x)).float().pow(2).mean()
        optimizer.zero_grad(set_to_none=False)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - began)
    peak = torch.cuda.max_memory_allocated()
    parameters = sum(p.numel() * p.element_size() for p in params)
    print(f"{variant:32s} parameters {parameters / 2**20:7.0f} MiB, held before a step "
          f"{before / 2**20:7.0f} MiB, peak of a step above that {(peak - before) / 2**20:7.0f} MiB, "
          f"step {sorted(times[1:])[len(times[1:]) // 2] * 1000:6.1f} ms")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--variant", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.variant:
        run(args.variant, args.steps, args.layers, args.batch)
        return
    device = pick_device()
    if device.type != "cuda":
        print("needs a CUDA device: autocast's saving is the GPU's")
        return
    for variant in VARIANTS:
        subprocess.run([sys.executable, __file__, "--variant", variant, "--steps", str(args.steps),
                        "--layers", str(args.layers), "--batch", str(args.batch)], check=True)


if __name__ == "__main__":
    main()
