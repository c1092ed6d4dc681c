#!/usr/bin/env python3
"""Benchmark the result cache on the pinned real-world corpus: a warm run (nothing changed
since the last run) against a cold one (empty cache).

A benchmark, not a test: it prints numbers and PASS/FAIL against the target, and exits 0
whatever they are (2 when the warm run's findings differ from the cold run's: a cache bug).
Python 3 stdlib only.

Usage: python3 bench/cache.py [--torchlint PATH] [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.dont_write_bytecode = True
from run import CORPUS_ARG, REPO, ensure_corpus, timed_run  # noqa: E402

# The target: a run with nothing changed takes at most a tenth of a cold run.
TARGET_RATIO = 0.10


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--torchlint", type=Path, default=REPO / "target" / "release" / "torchlint",
        help="the binary to benchmark (default: target/release/torchlint)",
    )
    parser.add_argument("--rounds", type=int, default=5, help="cold/warm pairs (default 5)")
    args = parser.parse_args()
    binary = args.torchlint.resolve()
    if not binary.is_file():
        print(f"error: no torchlint binary at {binary}; build it: cargo build --release", file=sys.stderr)
        return 2
    ensure_corpus()

    with tempfile.TemporaryDirectory(prefix="torchlint-cache-bench-") as scratch:
        cache = Path(scratch) / "cache"
        cmd = [str(binary), "check", "--cache-dir", str(cache), "--exit-zero",
               "--output-format", "json", "--quiet", CORPUS_ARG]
        print(f"binary:  {binary}")
        print(f"command: {' '.join(cmd[1:])}")
        print(f"load:    {os.getloadavg()[0]:.2f} (1-minute average, before the runs)")

        # Untimed: warms the OS page cache, and gives the findings both runs must print.
        reference = Path(scratch) / "reference.json"
        with open(reference, "wb") as out:
            timed_run(cmd[:2] + ["--no-cache"] + cmd[2:], out, subprocess.DEVNULL)

        cold_runs, warm_runs = [], []
        for round_ in range(args.rounds):
            shutil.rmtree(cache, ignore_errors=True)
            outputs = []
            for runs in (cold_runs, warm_runs):
                path = Path(scratch) / f"out-{len(runs)}.json"
                with open(path, "wb") as out:
                    runs.append(timed_run(cmd, out, subprocess.DEVNULL))
                outputs.append(path.read_bytes())
            if any(output != reference.read_bytes() for output in outputs):
                print("error: a cached run printed other findings than an uncached one", file=sys.stderr)
                return 2
            print(f"  round {round_ + 1}: cold {cold_runs[-1].wall_s:.3f} s, warm {warm_runs[-1].wall_s:.3f} s", flush=True)
        cache_bytes = sum(f.stat().st_size for f in cache.rglob("*") if f.is_file())

    cold = statistics.median(r.wall_s for r in cold_runs)
    warm = statistics.median(r.wall_s for r in warm_runs)
    ratio = warm / cold
    print()
    print(f"{'':<6} {'median s':>9} {'min s':>8} {'cpu s':>8} {'rss MiB':>8}")
    for name, runs in (("cold", cold_runs), ("warm", warm_runs)):
        print(f"{name:<6} {statistics.median(r.wall_s for r in runs):>9.3f} {min(r.wall_s for r in runs):>8.3f} "
              f"{statistics.median(r.cpu_s for r in runs):>8.3f} {max(r.maxrss_mib for r in runs):>8.1f}")
    print(f"cache size: {cache_bytes / 1024:.0f} KiB")
    verdict = "PASS" if ratio <= TARGET_RATIO else "FAIL"
    print(f"target: warm <= {TARGET_RATIO:.0%} of cold (median): {verdict} ({ratio:.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
