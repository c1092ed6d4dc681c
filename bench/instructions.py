#!/usr/bin/env python3
"""Instructions, not seconds: what linting `trainer.py` and one editor keystroke cost, counted
by valgrind's callgrind, for when wall times scatter too much on a shared machine to tell a
few percent apart (they do on a 2-core VM with neighbours).

- **trainer.py alone** (outside any repository): the full lint and the parse-only run; their
  difference is what the analysis costs (with the rules' one-time query compiling).
- **a keystroke**: `torchlint server` driven by `bench/server_latency.py` with A and then B
  edits; (instructions at B - at A) / (B - A) is one edit's cost, start-up left out.

`--before PATH` counts an older binary the same way, and prints the ratios. Counts are
deterministic to a fraction of a percent; they leave out cache misses, which wall time feels.

A benchmark, not a test: it prints numbers and exits 0 (also without valgrind, saying so).
Python 3 stdlib only; valgrind on PATH.

Usage: python3 bench/instructions.py [--torchlint PATH] [--before PATH] [--edits A,B]
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.dont_write_bytecode = True
from fetch_corpus import CORPUS  # noqa: E402

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
TRAINER = CORPUS / "transformers-5.24.0" / "transformers" / "trainer.py"


def totals(profile: Path) -> int:
    """The instruction count a callgrind profile ends with."""
    for line in profile.read_text(encoding="utf-8", errors="replace").splitlines():
        match = re.match(r"(?:totals|summary):\s*(\d+)", line)
        if match:
            return int(match.group(1))
    raise SystemExit(f"error: no totals in {profile}")


def counted(binary: Path, args: list[str], cwd: Path, scratch: Path) -> int:
    profile = scratch / "callgrind.out"
    profile.unlink(missing_ok=True)
    subprocess.run(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={profile}", str(binary), *args],
        cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        check=False,
    )
    return totals(profile)


def drive_server(command: Path, edits: int) -> None:
    """One server session of `edits` keystrokes (server_latency.py's), run by `command`."""
    subprocess.run(
        [sys.executable, str(BENCH / "server_latency.py"), "--torchlint", str(command),
         "--rounds", "1", "--edits", str(edits)],
        cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        check=False,
    )


def warm_project_cache(binary: Path) -> None:
    """One short server session, not counted: it leaves the project's result cache as this
    binary writes it. Both counted sessions then open the document on a warm cache; were one
    to find another binary's cache (cold) and the other its own, their difference would carry
    a whole project's lint, not only keystrokes."""
    drive_server(binary, 2)


def server_edits(binary: Path, edits: int, scratch: Path) -> int:
    """Instructions of a server session of `edits` keystrokes (server_latency.py's)."""
    profile = scratch / f"server.{edits}.out"
    wrapper = scratch / "server-under-callgrind"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'exec valgrind --tool=callgrind --callgrind-out-file="{profile}" "{binary}" "$@"\n',
        encoding="utf-8",
    )
    wrapper.chmod(0o755)
    drive_server(wrapper, edits)
    return totals(profile)


def measure(name: str, binary: Path, edits: tuple[int, int], scratch: Path) -> dict[str, float]:
    alone = scratch / "alone"
    alone.mkdir(exist_ok=True)
    shutil.copy(TRAINER, alone / "trainer.py")
    lint = counted(binary, ["check", "--no-cache", "--exit-zero", "--quiet", "trainer.py"],
                   alone, scratch)
    parse = counted(binary, ["check", "--parse-only", "--quiet", "trainer.py"], alone, scratch)
    warm_project_cache(binary)
    low, high = (server_edits(binary, n, scratch) for n in edits)
    per_edit = (high - low) / (edits[1] - edits[0])
    print(f"{name:<10} trainer.py: lint {lint / 1e6:8.1f} M, parse-only {parse / 1e6:8.1f} M, "
          f"analysis {(lint - parse) / 1e6:7.1f} M; a keystroke {per_edit / 1e6:6.2f} M")
    return {"lint": lint, "analysis": lint - parse, "keystroke": per_edit}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--torchlint", type=Path, default=REPO / "target" / "release" / "torchlint")
    parser.add_argument("--before", type=Path, help="an older binary, counted the same way")
    parser.add_argument("--edits", default="10,50", help="the two session lengths, A,B")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        print("valgrind is not on PATH: nothing counted (apt-get install valgrind)")
        return 0
    if not TRAINER.is_file():
        print(f"{TRAINER} is missing: run bench/fetch_corpus.py first")
        return 0
    low, high = (int(n) for n in args.edits.split(","))
    if not 0 < low < high:
        print("error: --edits wants A,B with 0 < A < B", file=sys.stderr)
        return 2
    binaries = [("torchlint", args.torchlint.resolve())]
    if args.before:
        binaries.append(("before", args.before.resolve()))
    results = {}
    for name, binary in binaries:
        if not binary.is_file():
            print(f"error: no torchlint binary at {binary}", file=sys.stderr)
            return 2
        with tempfile.TemporaryDirectory(prefix="torchlint-instructions-") as scratch:
            results[name] = measure(name, binary, (low, high), Path(scratch))
    if "before" in results:
        now, before = results["torchlint"], results["before"]
        print("torchlint / before: " + ", ".join(
            f"{key} {now[key] / before[key]:.3f}x" for key in ("lint", "analysis", "keystroke")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
