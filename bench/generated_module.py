#!/usr/bin/env python3
"""Benchmark what a generated module costs: named, and not named but in the repository.

A git repository holds a one-line `a.py` and a generated module (`generated_data.py`, that many
MB of short lines, as generated protobuf or data modules are). Two targets, as ratios measured
in one run:

- `torchlint a.py` with the module in the repository costs at most 2x the same run without
  it: a file the user did not name is paid for by its size check, not by linting it;
- `torchlint generated_data.py` (the user names it) costs at most 1.25x its parse-only run
  (`check --parse-only`): tree-sitter's parse is the floor, the rules add at most a quarter.

A benchmark, not a test: it prints numbers and PASS/FAIL, and exits 0 whatever they are.
Python 3 stdlib only.

Usage: python3 bench/generated_module.py [--torchlint PATH] [--before PATH] [--mb N] [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
NOT_NAMED_TARGET = 2.0
NAMED_TARGET = 1.25


def timed(cmd: list[str], cwd: Path) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of one run of `cmd`."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, _, usage = os.wait4(proc.pid, 0)
    return time.perf_counter() - start, usage.ru_maxrss / 1024


def write_generated_module(path: Path, megabytes: int) -> None:
    """That many MB of short lines, as generated protobuf or data modules are."""
    line = "X_%07d = 1\n"
    with open(path, "w") as out:
        written, i = 0, 0
        while written < megabytes * 1_000_000:
            text = line % i
            out.write(text)
            written += len(text)
            i += 1


def repository(root: Path, module_mb: int) -> Path:
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "a.py").write_text("import os\n")
    if module_mb:
        write_generated_module(root / "generated_data.py", module_mb)
    return root


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torchlint", default=str(REPO / "target" / "release" / "torchlint"))
    parser.add_argument("--before", metavar="PATH", help="an older binary, run in the same rounds")
    parser.add_argument("--mb", type=int, default=18, help="size of the generated module (MB)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    binaries = {"torchlint": args.torchlint}
    if args.before:
        binaries["before"] = args.before
    work = Path(tempfile.mkdtemp(prefix="torchlint-generated-"))
    try:
        with_module = repository(work / "with", args.mb)
        without = repository(work / "without", 0)
        runs: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for _ in range(args.rounds):
            for name, binary in binaries.items():
                cases = {
                    "a.py, module in the repository": ([binary, "--no-cache", "--exit-zero", "a.py"], with_module),
                    "a.py, no module": ([binary, "--no-cache", "--exit-zero", "a.py"], without),
                    "module named": ([binary, "check", "--no-cache", "--exit-zero", "--quiet",
                                      "generated_data.py"], with_module),
                    "module parse-only": ([binary, "check", "--parse-only", "--quiet",
                                           "generated_data.py"], with_module),
                }
                for case, (cmd, cwd) in cases.items():
                    runs.setdefault((name, case), []).append(timed(cmd, cwd))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(f"a one-line a.py and a {args.mb} MB generated module in a git repository; "
          f"{args.rounds} round(s), medians")
    median = {key: statistics.median(wall for wall, _ in values) for key, values in runs.items()}
    for (name, case), values in runs.items():
        rss = max(rss for _, rss in values)
        print(f"  {name:<10} {case:<32} {median[(name, case)]:8.3f} s  {rss:8.1f} MiB")
    for name in binaries:
        not_named = median[(name, "a.py, module in the repository")] / median[(name, "a.py, no module")]
        named = median[(name, "module named")] / median[(name, "module parse-only")]
        print(f"{name}: a.py with the module / without: {not_named:.2f}x (target <= {NOT_NAMED_TARGET}x) "
              f"{'PASS' if not_named <= NOT_NAMED_TARGET else 'FAIL'}")
        print(f"{name}: module named / its parse-only run: {named:.3f}x (target <= {NAMED_TARGET}x) "
              f"{'PASS' if named <= NAMED_TARGET else 'FAIL'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
