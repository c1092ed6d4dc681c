#!/usr/bin/env python3
"""Benchmark the probe's slowdown of a real training loop: probe vs plain run, same script.

A benchmark, not a test: it prints per-step times and the ratio against the issue's target
(probe <= 1.05x plain) and exits 0 whatever they are. It needs a Python with torch; on a GPU
machine the model trains on the GPU. The watched line is hit on every step, and `--hits` is
set above the step count so that every step is observed (the worst case: by default the probe
stops observing a line after 30 hits).

Usage: python3 bench/probe_overhead.py --torchlint target/release/torchlint [--python PY]
       [--steps 600] [--rounds 3] [--attribute]

--attribute probes with `--attribute` as well (allocation stacks recorded on every
allocation, a snapshot at each new peak), a third column beside the default mode.

A GPU's step time drifts by several percent from one process to the next (clocks, placement),
more than the probe costs. So each round runs the plain script twice, before and after the
probed run, and the ratio is taken per round against the mean of its two plain runs; the
verdict is the median of those ratios, and the two plain runs' own ratio (plain against plain)
says how large the noise is.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

TARGET = 1.05

# A small transformer encoder step: a few ms on a modern GPU, the scale of real steps.
SCRIPT = '''\
import sys, time
import torch
from torch import nn

steps = int(sys.argv[1])
device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
layer = nn.TransformerEncoderLayer(d_model=512, nhead=8, dim_feedforward=2048, batch_first=True)
model = nn.Sequential(nn.TransformerEncoder(layer, num_layers=4), nn.Linear(512, 10)).to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
criterion = nn.CrossEntropyLoss()
x = torch.randn(32, 128, 512, device=device)
y = torch.randint(0, 10, (32,), device=device)
running = 0.0
times = []
for step in range(steps):
    start = time.perf_counter()
    optimizer.zero_grad(set_to_none=True)
    out = model(x).mean(dim=1)
    loss = criterion(out, y)
    loss.backward()
    optimizer.step()
    running += loss.item()  # WATCHED: hit once per step; .item() syncs, so the step is timed whole
    times.append(time.perf_counter() - start)
warm = times[len(times) // 5:]
print(f"STEP_MS {1000 * sum(warm) / len(warm):.4f} device={device}")
'''


def step_ms(output: str) -> float:
    for line in output.splitlines():
        if line.startswith("STEP_MS "):
            return float(line.split()[1])
    raise RuntimeError(f"no STEP_MS line in:\n{output[-2000:]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torchlint", required=True, type=Path)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--attribute", action="store_true", help="also time `probe --attribute`")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as scratch:
        script = Path(scratch) / "train_step_loop.py"
        script.write_text(SCRIPT)
        line = next(i for i, text in enumerate(SCRIPT.splitlines(), 1) if "# WATCHED" in text)
        plain_cmd = [args.python, str(script), str(args.steps)]
        probe_cmd = [
            str(args.torchlint.resolve()), "probe", str(script), "--python", args.python,
            "--hits", str(args.steps * 10), "--timeout", "590", "--watch", f"TL102:{line}",
            "--output-format", "json", "--", str(args.steps),
        ]
        attribute_cmd = probe_cmd[:3] + ["--attribute"] + probe_cmd[3:]
        env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
        plain, probed, attributed, plain_after = [], [], [], []
        modes = [(plain, plain_cmd), (probed, probe_cmd)]
        if args.attribute:
            modes.append((attributed, attribute_cmd))
        modes.append((plain_after, plain_cmd))
        ratios, attribute_ratios, noise = [], [], []
        for round_no in range(1, args.rounds + 1):
            # Alternate, so that drift in the machine's state hits every mode alike.
            for runs, cmd in modes:
                done = subprocess.run(cmd, cwd=scratch, capture_output=True, text=True, env=env)
                runs.append(step_ms(done.stdout + done.stderr))
            baseline = (plain[-1] + plain_after[-1]) / 2
            ratios.append(probed[-1] / baseline)
            noise.append(plain_after[-1] / plain[-1])
            extra = ""
            if attributed:
                attribute_ratios.append(attributed[-1] / baseline)
                extra = f", --attribute {attributed[-1]:.3f} ms/step ({attribute_ratios[-1]:.3f}x)"
            print(f"round {round_no}/{args.rounds}: plain {plain[-1]:.3f} and {plain_after[-1]:.3f} ms/step, "
                  f"probe {probed[-1]:.3f} ms/step ({ratios[-1]:.3f}x){extra}")

    plain_med = statistics.median(plain + plain_after)
    probe_med = statistics.median(probed)
    ratio = statistics.median(ratios)
    print(f"\nsteps per run: {args.steps} (first 20% not timed), every step's watched line observed")
    print(f"plain: {plain_med:.3f} ms/step (median of {2 * args.rounds}), probe: {probe_med:.3f} ms/step")
    print(f"noise: the second plain run against the first, per round: "
          f"{min(noise):.3f}x to {max(noise):.3f}x (median {statistics.median(noise):.3f}x)")
    print(f"probe cost per observed step: {1000 * (probe_med - plain_med):+.1f} us (medians)")
    verdict = "PASS" if ratio <= TARGET else "FAIL"
    print(f"target: probe <= {TARGET}x plain (median of per-round ratios): {verdict} ({ratio:.3f}x)")
    if attribute_ratios:
        print(f"probe --attribute: {statistics.median(attributed):.3f} ms/step, "
              f"{statistics.median(attribute_ratios):.3f}x plain (median of per-round ratios; no target)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
