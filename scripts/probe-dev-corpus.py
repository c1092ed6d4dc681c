#!/usr/bin/env python3
"""Runs `torchlint probe` on every script of the labelled dev corpus and prints a table.

The GPU check of the probe (issue: every labelled TL102-TL105 hazard the script reaches is
confirmed, and no trap is confirmed). Traps are watched with the hidden `--watch CODE:LINE`
option, since the linter rightly reports nothing there: the probe must not confirm them
either. Python 3.11+ stdlib only; run it where the scripts' torch is installed:

    python3 scripts/probe-dev-corpus.py --torchlint target/release/torchlint \\
        --corpus ../shared/corpus/dev [--python python3] [--hits 30] [--timeout 120]

Exits 1 when a reached hazard is not confirmed or a trap is confirmed, else 0.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
import tomllib
from pathlib import Path

CHECKED_HAZARDS = {"TL102", "TL103", "TL104", "TL105"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torchlint", required=True, type=Path)
    parser.add_argument("--corpus", required=True, type=Path, help="folder with scripts/ and labels.toml")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--hits", type=int, default=30)
    parser.add_argument("--timeout", type=float, default=120)
    parser.add_argument("--only", help="run only scripts whose name contains this")
    parser.add_argument("--jobs", type=int, default=1, help="scripts probed at once (default 1)")
    args = parser.parse_args()

    labels = tomllib.loads((args.corpus / "labels.toml").read_text())
    torchlint = args.torchlint.resolve()
    # Each probe runs in a scratch folder: a relative interpreter path must not depend on it.
    if "/" in args.python:
        args.python = str(Path(args.python).absolute())
    rows: list[tuple[str, str, int, str, str, int, str]] = []
    failures = 0
    entries = [e for e in labels["file"] if not args.only or args.only in e["path"]]

    def run(entry):
        script = (args.corpus / "scripts" / entry["path"]).resolve()
        watches = [f"{t['code']}:{t['line']}" for t in entry.get("traps", [])]
        return probe(torchlint, script, args, watches)

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(run, entries))
    for entry, (report, error) in zip(entries, results):
        name = entry["path"]
        if report is None:
            print(f"{name}: probe failed: {error}", file=sys.stderr)
            failures += 1
            continue
        by_line = {(f["code"], f["line"]): f for f in report["findings"]}
        for kind, items in (("hazard", entry.get("hazards", [])), ("trap", entry.get("traps", []))):
            for item in items:
                found = by_line.get((item["code"], item["line"]))
                if found is None:
                    status, hits, summary = "not watched", 0, "no finding on this line"
                else:
                    verdict = found["verdict"]
                    status, hits, summary = verdict["status"], verdict["hits"], verdict["summary"]
                bad = (
                    kind == "hazard"
                    and item["code"] in CHECKED_HAZARDS
                    and status not in ("confirmed", "not-reached")
                ) or (kind == "trap" and status == "confirmed")
                failures += bad
                rows.append((name, item["code"], item["line"], kind, status + (" !!" if bad else ""), hits, summary))

    widths = [max(len(str(row[i])) for row in rows + [HEADER]) for i in range(6)]
    for row in [HEADER] + rows:
        cells = [str(cell).ljust(width) for cell, width in zip(row[:6], widths)]
        print("  ".join(cells) + "  " + str(row[6])[:110])
    hazards = [r for r in rows if r[3] == "hazard" and r[1] in CHECKED_HAZARDS]
    reached = [r for r in hazards if not r[4].startswith("not-reached")]
    confirmed = [r for r in hazards if r[4].startswith("confirmed")]
    traps = [r for r in rows if r[3] == "trap"]
    print(
        f"\nTL102-TL105 hazards: {len(hazards)}, reached {len(reached)}, confirmed {len(confirmed)}; "
        f"traps watched: {len(traps)}, confirmed {sum(r[4].startswith('confirmed') for r in traps)}; "
        f"failures: {failures}"
    )
    return 1 if failures else 0


HEADER = ("script", "rule", "line", "label", "verdict", "hits", "summary")


def probe(torchlint: Path, script: Path, args, watches: list[str]):
    command = [
        str(torchlint), "probe", str(script), "--output-format", "json",
        "--python", args.python, "--hits", str(args.hits), "--timeout", str(args.timeout),
        "--select", "ALL",
    ]
    for watch in watches:
        command += ["--watch", watch]
    # The scripts write checkpoints to the current folder: give each its own.
    with tempfile.TemporaryDirectory() as scratch:
        env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
        done = subprocess.run(command, cwd=scratch, capture_output=True, text=True, env=env)
    if done.returncode not in (0, 1):
        return None, done.stderr.strip()[-2000:]
    try:
        return json.loads(done.stdout), None
    except json.JSONDecodeError as error:
        return None, f"{error}: {done.stdout[-500:]}"


if __name__ == "__main__":
    sys.exit(main())
