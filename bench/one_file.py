#!/usr/bin/env python3
"""What one file costs: a one-line file, a 300-line training script and transformers'
`trainer.py` (about 5,000 lines), each linted alone outside any repository, against
`torchlint --version` (the process's own start-up) and Ruff's run on the same file.

Prints the median wall time of each (N rounds, interleaved) and the ratios the issue sets
targets on: the one-line file at most 1.5x `--version`. `--before PATH` runs an older binary
beside the new one.

A benchmark, not a test: it prints numbers and exits 0. Python 3 stdlib only.

Usage: python3 bench/one_file.py [--torchlint PATH] [--before PATH] [--ruff PATH] [--rounds N]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.dont_write_bytecode = True
from fetch_corpus import CORPUS  # noqa: E402
from staged_file import timed  # noqa: E402

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
TRAINER = CORPUS / "transformers-5.24.0" / "transformers" / "trainer.py"
EXAMPLE = REPO / "examples" / "train.py"

# The target for a one-line file, against `torchlint --version`.
TARGET_ONE_LINE = 1.5


def script(lines: int) -> str:
    """A training script of about `lines` lines: the bundled example, repeated in functions."""
    body = EXAMPLE.read_text(encoding="utf-8") if EXAMPLE.is_file() else "x = 1\n"
    out, n = [], 0
    while sum(part.count("\n") for part in out) < lines:
        out.append(f"def part_{n}():\n" + "".join(f"    {line}\n" for line in body.splitlines()))
        n += 1
    return "import torch\n" + "".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torchlint", default=str(REPO / "target" / "release" / "torchlint"))
    parser.add_argument("--before", help="an older torchlint binary to run beside it")
    parser.add_argument("--ruff", default=shutil.which("ruff"))
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="torchlint-one-file-") as tmp:
        root = Path(tmp)
        (root / "one_line.py").write_text("x = 1\n")
        (root / "script.py").write_text(script(300))
        files = ["one_line.py", "script.py"]
        if TRAINER.is_file():
            shutil.copy(TRAINER, root / "trainer.py")
            files.append("trainer.py")
        commands: dict[str, list[str]] = {"torchlint --version": [args.torchlint, "--version"]}
        binaries = [("torchlint", args.torchlint)]
        if args.before:
            binaries.append(("before", args.before))
        for label, binary in binaries:
            for name in files:
                commands[f"{label} {name}"] = [binary, "--no-cache", "--exit-zero", name]
        if args.ruff:
            for name in files:
                commands[f"ruff {name}"] = [args.ruff, "check", "--select", "B", "--no-cache",
                                            "--exit-zero", "--quiet", name]
        times: dict[str, list[float]] = {label: [] for label in commands}
        for _ in range(args.rounds):
            for label, cmd in commands.items():
                times[label].append(timed(cmd, root))
        median = {label: statistics.median(values) * 1000 for label, values in times.items()}
        for label, ms in median.items():
            print(f"  {label:32} {ms:8.1f} ms")
        version = median["torchlint --version"]
        ratio = median["torchlint one_line.py"] / version
        verdict = "PASS" if ratio <= TARGET_ONE_LINE else "FAIL"
        print(f"one-line file ÷ --version: {ratio:.2f}× (target ≤ {TARGET_ONE_LINE}×) {verdict}")
        for name in files:
            if args.ruff:
                print(f"{name} ÷ Ruff: {median[f'torchlint {name}'] / median[f'ruff {name}']:.2f}×")
            if args.before:
                print(f"{name} ÷ before: {median[f'torchlint {name}'] / median[f'before {name}']:.2f}×")
    return 0


if __name__ == "__main__":
    sys.exit(main())
