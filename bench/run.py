#!/usr/bin/env python3
"""Benchmark torchlint on a pinned real-world corpus: full lint against a parse-only pass.

A benchmark, not a test: it prints numbers and PASS/FAIL against the target, and exits 0
whatever they are. Python 3 stdlib only.

Usage: python3 bench/run.py [--torchlint PATH] [--before PATH] [--ruff PATH] [--rounds N]
                            [--split]

--before runs an older binary's full lint in the same rounds (a change's cost as a ratio
measured in one run); --ruff (default: `ruff` on PATH) times `ruff check --select B` over
the same corpus beside it. --split also times a lint with only TL001 (syntax errors) enabled,
which builds the semantic models and project facts and runs no analysis rule, and splits the
lint's cost over parse-only between those and the rules.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

# Importing the sibling script would otherwise leave a bench/__pycache__/ behind.
sys.dont_write_bytecode = True
from fetch_corpus import COMPLETE_MARKER, CORPUS, PINS  # noqa: E402

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent

# The target: linting costs at most a quarter more than parsing the same files.
TARGET_RATIO = 1.25

# Passed relative to the repo root, where every run starts, so that paths in findings and
# errors read as bench/corpus/... and match what a user would type.
CORPUS_ARG = str(CORPUS.relative_to(REPO))

# Mirrors DEFAULT_EXCLUDES in src/settings/mod.rs, only to measure how many MB torchlint
# reads; the file count is cross-checked against torchlint's own, so drift is noticed.
DEFAULT_EXCLUDES = {
    ".git", ".hg", ".svn", ".venv", "venv", ".tox", ".nox", ".eggs", "__pycache__",
    "__pypackages__", ".mypy_cache", ".ruff_cache", ".torchlint_cache",
    ".ipynb_checkpoints", "build", "dist", "site-packages", "node_modules",
}


@dataclass
class Run:
    wall_s: float
    cpu_s: float  # user + system, all threads: shows how much of the 2 cores was used
    maxrss_mib: float
    exit_code: int


def timed_run(cmd: list[str], stdout, stderr) -> Run:
    """Runs cmd to completion and returns its wall time and its own rusage.

    os.wait4 gives the rusage of exactly this child, whereas getrusage(RUSAGE_CHILDREN)
    reports the maximum RSS over every child ever reaped, so it cannot tell runs apart.
    """
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=REPO, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    # We reaped it ourselves; tell Popen so it does not wait for it again.
    proc.returncode = os.waitstatus_to_exitcode(status)
    return Run(
        wall_s=wall,
        cpu_s=usage.ru_utime + usage.ru_stime,
        maxrss_mib=usage.ru_maxrss / 1024,  # KiB on Linux
        exit_code=proc.returncode,
    )


def ensure_corpus() -> None:
    if all((CORPUS / f"{name}-{version}" / COMPLETE_MARKER).is_file() for name, version in PINS):
        return
    print("corpus missing or incomplete; fetching it", flush=True)
    subprocess.run([sys.executable, str(BENCH / "fetch_corpus.py")], check=True)


def corpus_size() -> tuple[int, int]:
    """(files, bytes) of the .py/.pyi files torchlint's default discovery would lint."""
    files = size = 0
    for dirpath, dirnames, filenames in os.walk(CORPUS):
        dirnames[:] = [d for d in dirnames if d not in DEFAULT_EXCLUDES]
        for filename in filenames:
            if filename.endswith((".py", ".pyi")) and filename not in DEFAULT_EXCLUDES:
                files += 1
                size += os.path.getsize(os.path.join(dirpath, filename))
    return files, size


def summarize_errors(stderr_text: str) -> list[str]:
    """The `error:` lines, grouped by message with the file name taken out."""
    lines = [line for line in stderr_text.splitlines() if line.startswith("error:")]
    if not lines:
        return ["  (none)"]
    file_re = re.compile(re.escape(CORPUS_ARG) + r"/\S+?\.pyi?\b")
    groups: Counter[str] = Counter()
    examples: dict[str, list[str]] = {}
    for line in lines:
        paths = file_re.findall(line)
        key = file_re.sub("<file>", line)
        groups[key] += 1
        examples.setdefault(key, []).extend(paths)
    out = [f"  {len(lines)} error line(s), {len(groups)} distinct message(s):"]
    for key, count in groups.most_common():
        out.append(f"  {count:>5} x {shorten(key, 300)}")
        for path in examples[key][:5]:
            out.append(f"          {path}")
        if len(examples[key]) > 5:
            out.append(f"          ... and {len(examples[key]) - 5} more")
    return out


def shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--torchlint", type=Path, default=REPO / "target" / "release" / "torchlint",
        help="the binary to benchmark (default: target/release/torchlint)",
    )
    parser.add_argument("--before", type=Path, help="an older torchlint binary to run beside it")
    parser.add_argument("--ruff", default=shutil.which("ruff"), help="a Ruff binary to time beside it")
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds of each mode (default 5)")
    parser.add_argument(
        "--split", action="store_true",
        help="also time the lint with only TL001 (syntax errors) enabled, and split the lint's "
        "cost over parse-only into the semantic model and project facts, and the rules",
    )
    args = parser.parse_args()

    binary = args.torchlint.resolve()
    if not binary.is_file():
        print(f"error: no torchlint binary at {binary}", file=sys.stderr)
        print("build it first, from the repo root: cargo build --release", file=sys.stderr)
        return 2
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")

    ensure_corpus()

    lint_cmd = [str(binary), "check", "--no-cache", "--exit-zero", "--output-format", "json", "--quiet", CORPUS_ARG]
    parse_cmd = [str(binary), "check", "--parse-only", "--quiet", CORPUS_ARG]
    # Other programs timed in the same rounds, by the name their row gets.
    others: dict[str, list[str]] = {}
    if args.before:
        if not args.before.is_file():
            print(f"error: no torchlint binary at {args.before}", file=sys.stderr)
            return 2
        others["before"] = [str(args.before.resolve()), *lint_cmd[1:]]
    if args.split:
        # TL001 reads only what the parser reports, so this run builds every file's semantic
        # model, summary and fact-base answers as a full lint does, and runs no analysis rule.
        others["no rules"] = [*lint_cmd[:2], "--select", "TL001", *lint_cmd[2:]]
    if args.ruff:
        others["ruff -B"] = [args.ruff, "check", "--select", "B", "--no-cache", "--exit-zero", "--quiet", CORPUS_ARG]

    version = subprocess.run([str(binary), "--version"], capture_output=True, text=True).stdout.strip()
    print(f"binary:  {binary} ({version})")
    print(f"cpus:    {os.cpu_count()}")
    # Timings are only meaningful on an otherwise idle machine; say when it is not.
    load_before = os.getloadavg()[0]
    print(f"load:    {load_before:.2f} (1-minute average, before the runs)")
    if load_before >= 0.5:
        print("warning: the machine is not idle; other processes will inflate and scatter the timings")
    print(f"lint:    {' '.join(lint_cmd[1:])}")
    print(f"parse:   {' '.join(parse_cmd[1:])}")
    for name, cmd in others.items():
        print(f"{name + ':':<8} {' '.join(cmd)}")

    with tempfile.TemporaryDirectory(prefix="torchlint-bench-") as tmp:
        tmp = Path(tmp)
        # One untimed run of each mode first. It warms the OS page cache, so that neither
        # mode's timings pay for the first read from disk, and its output is what the
        # per-rule counts and the error summary are taken from.
        print("warm-up: one untimed run of each mode", flush=True)
        json_path, lint_err_path = tmp / "lint.json", tmp / "lint.stderr"
        with open(json_path, "wb") as out, open(lint_err_path, "wb") as err:
            warm_lint = timed_run(lint_cmd, out, err)
        # Without --quiet, parse-only prints "parsed N files": torchlint's own file count.
        parse_err_path = tmp / "parse.stderr"
        with open(parse_err_path, "wb") as err:
            warm_parse = timed_run([c for c in parse_cmd if c != "--quiet"], subprocess.DEVNULL, err)
        for cmd in others.values():
            timed_run(cmd, subprocess.DEVNULL, subprocess.DEVNULL)

        lint_stderr = lint_err_path.read_text(errors="replace")
        parse_stderr = parse_err_path.read_text(errors="replace")
        try:
            findings = json.loads(json_path.read_text())
        except json.JSONDecodeError as error:
            print(f"warning: the JSON output did not parse ({error}); no per-rule counts")
            findings = []

        # Timed rounds, alternating the modes so that drift in machine load (other
        # processes, thermal state) falls on both alike.
        lint_runs: list[Run] = []
        parse_runs: list[Run] = []
        other_runs: dict[str, list[Run]] = {name: [] for name in others}
        for round_no in range(1, args.rounds + 1):
            # stderr to a file, not a pipe: nothing has to drain it while the clock runs,
            # and the exit codes below can be explained afterwards.
            with open(tmp / "timed.stderr", "wb") as err:
                lint_runs.append(timed_run(lint_cmd, subprocess.DEVNULL, err))
                parse_runs.append(timed_run(parse_cmd, subprocess.DEVNULL, err))
                for name, cmd in others.items():
                    other_runs[name].append(timed_run(cmd, subprocess.DEVNULL, subprocess.DEVNULL))
            timings = "".join(f", {name} {runs[-1].wall_s:.3f} s" for name, runs in other_runs.items())
            print(
                f"round {round_no}/{args.rounds}: lint {lint_runs[-1].wall_s:.3f} s, "
                f"parse-only {parse_runs[-1].wall_s:.3f} s{timings}",
                flush=True,
            )

    files, size = corpus_size()
    match = re.search(r"parsed (\d+) files", parse_stderr)
    tl_files = int(match.group(1)) if match else None

    def row(name: str, runs: list[Run]) -> str:
        walls = [r.wall_s for r in runs]
        cpus = [r.cpu_s for r in runs]
        return (
            f"{name:<12} {statistics.median(walls):>10.3f} {min(walls):>10.3f} "
            f"{statistics.median(cpus):>12.3f} {max(r.maxrss_mib for r in runs):>14.1f}"
        )

    lint_med = statistics.median(r.wall_s for r in lint_runs)
    parse_med = statistics.median(r.wall_s for r in parse_runs)
    lint_min = min(r.wall_s for r in lint_runs)
    parse_min = min(r.wall_s for r in parse_runs)
    ratio_med = lint_med / parse_med
    ratio_min = lint_min / parse_min

    print()
    print(f"corpus: {files} files, {size / 1e6:.1f} MB (.py/.pyi under {CORPUS_ARG}, default excludes applied)")
    if tl_files is not None and tl_files != files:
        print(f"note: torchlint reported parsing {tl_files} files, not {files}: discovery differs from this script's walk")
    print(f"rounds: {args.rounds} timed per mode, after 1 untimed warm-up each")
    print()
    print(f"{'mode':<12} {'median s':>10} {'min s':>10} {'median cpu s':>12} {'peak RSS MiB':>14}")
    print(row("full lint", lint_runs))
    print(row("parse-only", parse_runs))
    for name, runs in other_runs.items():
        print(row(name, runs))
    # The CPU-time ratio barely moves when other processes compete for the cores, unlike
    # wall time, so it is the figure to trust on a busy machine.
    ratio_cpu = statistics.median(r.cpu_s for r in lint_runs) / statistics.median(r.cpu_s for r in parse_runs)
    print(f"{'ratio':<12} {ratio_med:>10.3f} {ratio_min:>10.3f} {ratio_cpu:>12.3f}   (lint / parse-only)")
    for name, runs in other_runs.items():
        wall = lint_med / statistics.median(r.wall_s for r in runs)
        cpu = statistics.median(r.cpu_s for r in lint_runs) / statistics.median(r.cpu_s for r in runs)
        rss = max(r.maxrss_mib for r in lint_runs) / max(r.maxrss_mib for r in runs)
        print(f"{'ratio':<12} {wall:>10.3f} {'':>10} {cpu:>12.3f} {rss:>14.3f}   (lint / {name})")
    if args.split:
        # CPU time: the split is of the work done, which wall time on a shared machine blurs.
        def cpu(runs: list[Run]) -> float:
            return statistics.median(r.cpu_s for r in runs)

        over = cpu(lint_runs) - cpu(parse_runs)
        facts = cpu(other_runs["no rules"]) - cpu(parse_runs)
        if over > 0:
            print(
                f"split:       of the lint's {over:.3f} cpu s over parse-only, the semantic model and "
                f"project facts {facts:.3f} s ({facts / over:.0%}), the rules {over - facts:.3f} s "
                f"({(over - facts) / over:.0%}); each as a share of parse-only: "
                f"{facts / cpu(parse_runs):.3f} and {(over - facts) / cpu(parse_runs):.3f}"
            )
    print()
    print(f"throughput: full lint {size / 1e6 / lint_med:.1f} MB/s, parse-only {size / 1e6 / parse_med:.1f} MB/s (medians)")
    verdict = "PASS" if ratio_med <= TARGET_RATIO else "FAIL"
    print(f"target: full lint <= {TARGET_RATIO}x parse-only (median): {verdict} ({ratio_med:.3f}x)")

    codes = sorted({r.exit_code for r in lint_runs + [warm_lint]})
    parse_codes = sorted({r.exit_code for r in parse_runs + [warm_parse]})
    if codes != [0] or parse_codes != [0]:
        # 2 means torchlint reported errors (listed below); the timings still stand.
        print(f"note: exit codes: full lint {codes}, parse-only {parse_codes}")

    print()
    print(f"findings per rule ({len(findings)} in all, from the warm-up JSON run):")
    by_code = Counter(f.get("code") for f in findings)
    names = {f.get("code"): f.get("name", "") for f in findings}
    for code, count in sorted(by_code.items(), key=lambda item: (-item[1], str(item[0]))):
        print(f"  {count:>6}  {code}  {names[code]}")
    if not by_code:
        print("  (none)")

    print()
    print("stderr `error:` lines of one full-lint run:")
    for line in summarize_errors(lint_stderr):
        print(line)
    other = [l for l in lint_stderr.splitlines() if l.strip() and not l.startswith("error:")]
    if other:
        print(f"  plus {len(other)} other stderr line(s), first: {shorten(other[0], 200)}")
    # Both modes read and decode the same files, so their IO/decoding errors should match;
    # a difference points at errors only one of them reports.
    parse_errors = sum(1 for l in parse_stderr.splitlines() if l.startswith("error:"))
    lint_errors = sum(1 for l in lint_stderr.splitlines() if l.startswith("error:"))
    print(f"  (parse-only printed {parse_errors} `error:` line(s), full lint {lint_errors})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
