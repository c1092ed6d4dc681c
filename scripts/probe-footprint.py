#!/usr/bin/env python3
"""Shows that `torchlint probe` takes nothing of the GPU it measures (issue 36).

On a GPU machine, runs one small script plainly and under the probe, and prints:

- the device memory in use as the script sees it before its first allocation (its own CUDA
  context plus everything else on the card), plainly and under the probe: the same within
  2 MiB when the probe holds no context of its own;
- whether a script that fills the card to 100 MiB short of what it found free (plainly) still
  fits under the probe;
- what the probe's report says of its own footprint and where its figures came from.

Exits 1 when a check fails, 0 otherwise (2 without a GPU or torch). Python 3 stdlib only; the
script it runs needs torch.

Usage: python3 scripts/probe-footprint.py --torchlint target/release/torchlint [--python PY]
       [--no-nvml]   (point the probe at a missing NVML: its in-process fallback)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

MIB = 1 << 20
TOLERANCE = 2 * MIB
SPARE = 100 * MIB

# The probe runs a script only when it has a finding to watch: `total += loss` (TL102) on a
# small CPU model gives it one, and the device holds only what the script put there.
SCRIPT = '''\
import sys
import torch
from torch import nn

free, total = torch.cuda.mem_get_info()  # creates the script's own context, nothing more
print(f"USED_AT_START {total - free}", flush=True)
fill = int(sys.argv[1]) if len(sys.argv) > 1 else 0
if fill:
    block = torch.empty(fill, dtype=torch.uint8, device="cuda")
    print(f"FILLED {fill}", flush=True)
model = nn.Linear(8, 1)
criterion = nn.MSELoss()
total = 0
for step in range(40):
    x, y = torch.randn(4, 8), torch.randn(4, 1)
    loss = criterion(model(x), y)
    total += loss
print("done", float(total))
'''


def used_at_start(output: str) -> int | None:
    for line in output.splitlines():
        if line.startswith("USED_AT_START "):
            return int(line.split()[1])
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torchlint", default="target/release/torchlint")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--no-nvml", action="store_true")
    args = parser.parse_args()

    check = subprocess.run(
        [args.python, "-c", "import torch; print(torch.cuda.is_available())"],
        capture_output=True, text=True,
    )
    if check.stdout.strip() != "True":
        print(f"no GPU for {args.python} (torch says: {check.stdout.strip() or check.stderr.strip()})")
        return 2

    env = dict(os.environ)
    if args.no_nvml:
        env["TORCHLINT_NVML_LIBRARY"] = "/nonexistent/libnvidia-ml.so.1"
    failures = []
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "fits.py"
        script.write_text(SCRIPT)

        def plain(*extra):
            run = subprocess.run([args.python, str(script), *extra], capture_output=True, text=True)
            return run, used_at_start(run.stdout)

        def probed(*extra):
            report = Path(folder) / "report.json"
            run = subprocess.run(
                [args.torchlint, "probe", "--python", args.python, "--output-format", "json",
                 "--timeout", "300", str(script), "--", *extra],
                capture_output=True, text=True, env=env,
            )
            report.write_text(run.stdout)
            # The script's stdout goes to our stderr when the report is JSON.
            return run, used_at_start(run.stderr)

        plain_run, plain_used = plain()
        probed_run, probed_used = probed()
        if plain_used is None or probed_used is None:
            print("the script did not report its start:", plain_run.stderr[-2000:], probed_run.stderr[-2000:])
            return 1
        difference = probed_used - plain_used
        print(f"in use at the script's start, plainly:        {plain_used / MIB:9.1f} MiB")
        print(f"in use at the script's start, under the probe: {probed_used / MIB:9.1f} MiB")
        print(f"difference:                                    {difference / MIB:+9.1f} MiB (target: within {TOLERANCE / MIB:.0f} MiB)")
        if abs(difference) > TOLERANCE:
            failures.append("the probe changes the memory in use at the script's start")

        try:
            report = json.loads(probed_run.stdout)
        except json.JSONDecodeError:
            report = {}
        device = report.get("device") or {}
        print(f"report: device memory from {json.dumps(device.get('source'))}, "
              f"probe's footprint {json.dumps(report.get('footprint'))}")
        footprint = (report.get("footprint") or {}).get("device")
        if not args.no_nvml and footprint != 0:
            failures.append(f"the report gives the probe's device footprint as {footprint}, not 0")

        # Fill the card to SPARE short of what the script found free when run plainly.
        free_check = subprocess.run(
            [args.python, "-c", "import torch; f, t = torch.cuda.mem_get_info(); print(f)"],
            capture_output=True, text=True,
        )
        fill = int(free_check.stdout.strip()) - SPARE
        plain_fill, _ = plain(str(fill))
        probed_fill, _ = probed(str(fill))
        plain_fits = f"FILLED {fill}" in plain_fill.stdout
        probed_fits = f"FILLED {fill}" in probed_fill.stderr
        print(f"filling to {SPARE / MIB:.0f} MiB short of free ({fill / MIB:.0f} MiB): "
              f"plainly {'fits' if plain_fits else 'OOM'}, under the probe {'fits' if probed_fits else 'OOM'}")
        if plain_fits and not probed_fits:
            failures.append("a script that fits by itself runs out of memory under the probe")
            print(probed_fill.stderr[-1500:])
        if not plain_fits:
            print("(the plain run did not fit either: the card is busy; the check says nothing)")

    for failure in failures:
        print(f"FAIL: {failure}")
    if not failures:
        print("PASS")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
