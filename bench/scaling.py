#!/usr/bin/env python3
"""How the cost of a full lint grows with the number of files: the pinned corpus, then the
same corpus copied N times into one run (each copy a project of its own, so every import
has N candidate files to choose from).

A benchmark, not a test: it prints times and the ratio of each to linear growth, and exits 0
whatever they are. Python 3 stdlib only. Needs bench/fetch_corpus.py to have run.

Usage: python3 bench/scaling.py [--torchlint PATH] [--copies N] [--rounds R]
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

sys.dont_write_bytecode = True
from fetch_corpus import COMPLETE_MARKER, CORPUS, PINS  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def timed(cmd: list[str]) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of one run."""
    start = time.perf_counter()
    process = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, _, usage = os.wait4(process.pid, 0)
    return time.perf_counter() - start, usage.ru_utime + usage.ru_stime


def measure(binary: Path, folder: Path, rounds: int) -> tuple[float, float, float]:
    """Median wall and CPU seconds of a full lint, and median CPU seconds of a parse-only run
    of the same files: what reading and parsing alone cost at this size on this machine
    (memory and page cache effects grow with the files too), so that the engine's own growth
    can be told from the machine's."""
    lint = [str(binary), "check", "--no-cache", "--exit-zero", "--quiet", str(folder)]
    parse = [str(binary), "check", "--parse-only", "--quiet", str(folder)]
    timed(lint)  # warm the page cache
    runs, parses = [], []
    for _ in range(rounds):
        runs.append(timed(lint))
        parses.append(timed(parse))
    return (
        statistics.median(r[0] for r in runs),
        statistics.median(r[1] for r in runs),
        statistics.median(r[1] for r in parses),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torchlint", type=Path, default=REPO / "target/release/torchlint")
    parser.add_argument("--copies", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    repos = [CORPUS / f"{name}-{version}" for name, version in PINS]
    if not all((repo / COMPLETE_MARKER).is_file() for repo in repos):
        print("the pinned corpus is missing: run python3 bench/fetch_corpus.py first")
        return 0
    with tempfile.TemporaryDirectory(prefix="torchlint-scaling-") as scratch:
        scratch = Path(scratch)
        results = []
        for copies in sorted({1, args.copies}):
            root = scratch / f"x{copies}"
            for copy in range(copies):
                for repo in repos:
                    shutil.copytree(repo, root / f"copy{copy}" / repo.name, symlinks=True)
            wall, cpu, parse_cpu = measure(args.torchlint, root, args.rounds)
            results.append((copies, wall, cpu, parse_cpu))
            print(
                f"{copies} cop{'y' if copies == 1 else 'ies'}: wall {wall:.2f} s, cpu {cpu:.2f} s "
                f"(parse-only cpu {parse_cpu:.2f} s; lint/parse {cpu / parse_cpu:.3f})"
            )
            shutil.rmtree(root)
    _, wall1, cpu1, parse1 = results[0]
    for copies, wall, cpu, parse_cpu in results[1:]:
        print(
            f"growth for {copies}x the files: wall {wall / wall1:.2f}x, cpu {cpu / cpu1:.2f}x "
            f"(linear: {copies:.2f}x; per copy: wall {wall / wall1 / copies:.2f}, "
            f"cpu {cpu / cpu1 / copies:.2f}; parse-only cpu per copy {parse_cpu / parse1 / copies:.2f})"
        )
        print(
            f"lint cost over parsing: {cpu1 / parse1:.3f} at 1 copy, {cpu / parse_cpu:.3f} at "
            f"{copies} (constant when the engine's cost grows linearly)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
