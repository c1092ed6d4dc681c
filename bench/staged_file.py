#!/usr/bin/env python3
"""One staged file in a big repository, as pre-commit runs torchlint: `torchlint trainer.py`
inside a copy of the pinned transformers package made a git repository (about 2,900 files).

Prints, for each binary given, the median wall time of a cold run (empty cache), a warm run
(the cache the cold run left), an edited run (the named file just edited, the rest cached), a
`--no-cache` run and a `--no-cache` run of the whole repository, with Ruff's one-file run beside them
(`ruff check --select B`, warm and `--no-cache`) and the ratios the issue sets targets on.
Optionally a generated module (`--generated MB`: that many MB of short lines, as generated
protobuf or data modules are) is put next to the file first.

A benchmark, not a test: it prints numbers and exits 0. Python 3 stdlib only.

Usage: python3 bench/staged_file.py [--torchlint PATH] [--before PATH] [--ruff PATH]
                                    [--rounds N] [--generated MB]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.dont_write_bytecode = True
from fetch_corpus import CORPUS  # noqa: E402
from generated_module import write_generated_module  # noqa: E402

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
PACKAGE = CORPUS / "transformers-5.24.0" / "transformers"
STAGED = Path("transformers") / "trainer.py"


def timed(cmd: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def median(cmd: list[str], cwd: Path, rounds: int, before=None) -> float:
    times = []
    for _ in range(rounds):
        if before:
            before()
        times.append(timed(cmd, cwd))
    return statistics.median(times)


def make_repository(root: Path, generated_mb: int) -> None:
    shutil.copytree(PACKAGE, root / "transformers")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    if generated_mb:
        write_generated_module(root / "transformers" / "generated_data.py", generated_mb)


def measure_torchlint(binary: str, root: Path, rounds: int) -> dict[str, float]:
    cache = root / ".bench_cache"
    lint = [binary, "--exit-zero", "--cache-dir", str(cache), str(STAGED)]

    def clear():
        shutil.rmtree(cache, ignore_errors=True)

    cold = median(lint, root, rounds, before=clear)
    timed(lint, root)  # fill the cache
    warm = median(lint, root, rounds)
    staged = root / STAGED
    original = staged.read_bytes()
    edits = iter(range(rounds))

    def edit():
        staged.write_bytes(original + b"\n# edit %d\n" % next(edits))

    # The file staged was just edited (as pre-commit usually sees it); its project is cached.
    edited = median(lint, root, rounds, before=edit)
    staged.write_bytes(original)
    no_cache = median([binary, "--exit-zero", "--no-cache", str(STAGED)], root, rounds)
    whole = median([binary, "--exit-zero", "--no-cache", "."], root, rounds)
    clear()
    return {"cold": cold, "warm": warm, "edited": edited, "no-cache": no_cache, "whole repository": whole}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torchlint", default=str(REPO / "target" / "release" / "torchlint"))
    parser.add_argument("--before", help="an older torchlint binary to run beside it")
    parser.add_argument("--ruff", default=shutil.which("ruff"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--generated", type=int, default=0, metavar="MB")
    args = parser.parse_args()
    if not PACKAGE.is_dir():
        print(f"missing {PACKAGE}: run python3 bench/fetch_corpus.py first")
        return 0
    with tempfile.TemporaryDirectory(prefix="torchlint-staged-") as tmp:
        root = Path(tmp)
        make_repository(root, args.generated)
        files = sum(1 for _ in root.rglob("*.py"))
        print(f"{STAGED} named in a git repository of {files} Python files"
              + (f", with a {args.generated} MB generated module" if args.generated else ""))
        ruff = None
        if args.ruff:
            ruff_cmd = [args.ruff, "check", "--select", "B", "--exit-zero", "--quiet"]
            timed(ruff_cmd + [str(STAGED)], root)
            ruff = {
                "warm": median(ruff_cmd + [str(STAGED)], root, args.rounds),
                "no-cache": median(ruff_cmd + ["--no-cache", str(STAGED)], root, args.rounds),
            }
            print(f"  ruff --select B: warm {ruff['warm']:.3f} s, --no-cache {ruff['no-cache']:.3f} s")
        runs = [("torchlint", args.torchlint)]
        if args.before:
            runs.append(("before", args.before))
        results = {}
        for label, binary in runs:
            results[label] = measure_torchlint(binary, root, args.rounds)
            times = results[label]
            line = ", ".join(f"{k} {v:.3f} s" for k, v in times.items())
            print(f"  {label}: {line}")
            if ruff:
                print(f"    warm ÷ Ruff's one-file run: {times['warm'] / ruff['warm']:.1f}× (target ≤ 2×)")
            print(f"    cold ÷ the whole repository linted: {times['cold'] / times['whole repository']:.2f}× (target ≤ 1×)")
        if args.before:
            now, old = results["torchlint"], results["before"]
            ratios = ", ".join(f"{k} {now[k] / old[k]:.2f}×" for k in now)
            print(f"  torchlint ÷ before: {ratios}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
