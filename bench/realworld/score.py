#!/usr/bin/env python3
"""Score torchlint on the real-world corpus: lint each case's checkout, compare the findings
in the labelled file with its labels, and print recall and precision per rule.

Usage: python3 bench/realworld/score.py [--torchlint PATH] [--checkouts DIR]
           [--mode project|file] [--case ID ...] [--select CODES] [--json OUT]
           [--min-precision P] [--min-recall R] [-v]

--mode project (default) lints the whole checkout, as `torchlint .` in the repository would;
--mode file lints only the labelled file from the checkout's root, as pre-commit or an
editor does. A finding is a true positive when its code and line equal a hazard's; findings
on `unsure` lines do not count; every other finding in the labelled file is a false positive
(marked TRAP when it is on a labelled trap). Findings in other files are not scored.
Run extract.py first. Exit status 1 when a --min-* threshold is missed or a case could not be
linted, else 0. Python 3.11 standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

sys.dont_write_bytecode = True
from cases import HERE, Case, load_cases  # noqa: E402

REPO = HERE.parent.parent


@dataclass
class Outcome:
    case: Case
    findings: list[dict]  # in the labelled file
    error: str | None
    seconds: float


def lint(torchlint: Path, checkouts: Path, case: Case, mode: str) -> Outcome:
    root = checkouts / case.id
    if not (root / case.path).is_file():
        return Outcome(case, [], f"{root / case.path} is missing: run extract.py", 0.0)
    target = case.path if mode == "file" else "."
    command = [str(torchlint), "check", "--no-cache", "--exit-zero", "--output-format", "json", target]
    start = time.perf_counter()
    run = subprocess.run(command, cwd=root, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    # Exit 2 with another file of the project unreadable (a broken notebook) still reports
    # every other file: the case is scored unless the labelled file is the one named.
    other_file_failed = run.returncode == 2 and case.path not in run.stderr and run.stdout.strip()
    if run.returncode != 0 and not other_file_failed:
        return Outcome(case, [], f"exit {run.returncode}: {run.stderr.strip()[:500]}", seconds)
    try:
        findings = json.loads(run.stdout)
    except ValueError as error:
        return Outcome(case, [], f"unreadable JSON: {error}", seconds)
    wanted = os.path.normpath(case.path)
    mine = [
        f
        for f in findings
        if os.path.normpath(os.path.relpath(os.path.join(root, f["filename"]), root)) == wanted
    ]
    return Outcome(case, mine, None, seconds)


def line_text(checkouts: Path, case: Case, line: int) -> str:
    try:
        lines = (checkouts / case.id / case.path).read_text(encoding="utf-8", errors="replace").splitlines()
        return lines[line - 1].strip() if 0 < line <= len(lines) else ""
    except OSError:
        return ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torchlint", type=Path, default=REPO / "target" / "release" / "torchlint")
    parser.add_argument("--checkouts", type=Path, default=HERE / "checkouts")
    parser.add_argument("--mode", choices=("project", "file"), default="project")
    parser.add_argument("--case", action="append", default=[])
    parser.add_argument("--select", default="", help="comma-separated codes to score")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--min-precision", type=float)
    parser.add_argument("--min-recall", type=float)
    parser.add_argument("-v", "--verbose", action="store_true", help="also list true positives")
    args = parser.parse_args()

    select = {code.strip() for code in args.select.split(",") if code.strip()}
    # Syntax errors (TL001) are the parser's, not a memory hazard: never scored.
    ignored = {"TL001"}
    cases = [c for c in load_cases() if not args.case or c.id in args.case]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        outcomes = list(pool.map(lambda c: lint(args.torchlint, args.checkouts, c, args.mode), cases))

    stats = defaultdict(lambda: defaultdict(int))
    misses, false_positives, hits, errors = [], [], [], []
    for outcome in outcomes:
        case = outcome.case
        if outcome.error:
            errors.append((case, outcome.error))
            continue
        keep = lambda code: code not in ignored and (not select or code in select)  # noqa: E731
        hazards = {(h.code, h.line): h for h in case.hazards if keep(h.code)}
        traps = {(t.code, t.line): t for t in case.traps}
        unsure = {(u.code, u.line) for u in case.unsure}
        reported = {}
        for finding in outcome.findings:
            key = (finding["code"], finding["location"]["row"])
            if keep(key[0]):
                reported.setdefault(key, finding)
        for key, hazard in hazards.items():
            stats[hazard.code]["hazards"] += 1
            stats[hazard.code]["fixed"] += hazard.fixed
            if key in reported:
                stats[hazard.code]["tp"] += 1
                stats[hazard.code]["tp_fixed"] += hazard.fixed
                hits.append((case, hazard, reported[key]))
            else:
                stats[hazard.code]["fn"] += 1
                misses.append((case, hazard))
        for key, finding in reported.items():
            if key in hazards or key in unsure:
                continue
            stats[key[0]]["fp"] += 1
            false_positives.append((case, finding, traps.get(key)))

    def ratio(a: int, b: int) -> float:
        return a / b if b else 1.0

    print(f"{'code':6} {'hazards':>7} {'fixed':>5} {'tp':>4} {'fp':>4} {'fn':>4} {'prec':>5} {'recall':>6} {'fixed recall':>12}")
    total = defaultdict(int)
    for code in sorted(stats):
        s = stats[code]
        for k, v in s.items():
            total[k] += v
        print(
            f"{code:6} {s['hazards']:7} {s['fixed']:5} {s['tp']:4} {s['fp']:4} {s['fn']:4} "
            f"{ratio(s['tp'], s['tp'] + s['fp']):5.2f} {ratio(s['tp'], s['tp'] + s['fn']):6.2f} "
            f"{ratio(s['tp_fixed'], s['fixed']):12.2f}"
        )
    precision = ratio(total["tp"], total["tp"] + total["fp"])
    recall = ratio(total["tp"], total["tp"] + total["fn"])
    fixed_recall = ratio(total["tp_fixed"], total["fixed"])
    print(
        f"{'total':6} {total['hazards']:7} {total['fixed']:5} {total['tp']:4} {total['fp']:4} "
        f"{total['fn']:4} {precision:5.2f} {recall:6.2f} {fixed_recall:12.2f}"
    )

    checkouts = args.checkouts
    if misses:
        print("\nmissed:")
        for case, hazard in misses:
            mark = " [fixed]" if hazard.fixed else ""
            print(f"  {case.id}: {case.path}:{hazard.line} {hazard.code}{mark}  {hazard.note}")
            print(f"      | {line_text(checkouts, case, hazard.line)}")
    if false_positives:
        print("\nfalse positives:")
        for case, finding, trap in false_positives:
            row = finding["location"]["row"]
            mark = f" TRAP ({trap.note})" if trap else ""
            print(f"  {case.id}: {case.path}:{row} {finding['code']}{mark}  {finding.get('message', '')[:160]}")
            print(f"      | {line_text(checkouts, case, row)}")
    if args.verbose and hits:
        print("\nfound:")
        for case, hazard, finding in hits:
            print(f"  {case.id}: {case.path}:{hazard.line} {hazard.code}  {finding.get('message', '')[:160]}")
    if errors:
        print("\nnot linted:")
        for case, error in errors:
            print(f"  {case.id}: {error}")

    seconds = sum(o.seconds for o in outcomes)
    print(
        f"\n{len(cases)} cases, {args.mode} mode, {seconds:.1f} s of lint: "
        f"precision {precision:.2f} recall {recall:.2f} (tp {total['tp']} fp {total['fp']} fn {total['fn']}); "
        f"recall of the fixed hazards {fixed_recall:.2f}"
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "precision": precision,
                    "recall": recall,
                    "fixed_recall": fixed_recall,
                    "per_code": {code: dict(s) for code, s in stats.items()},
                    "missed": [{"case": c.id, "code": h.code, "line": h.line} for c, h in misses],
                    "false_positives": [
                        {"case": c.id, "code": f["code"], "line": f["location"]["row"]}
                        for c, f, _ in false_positives
                    ],
                },
                indent=2,
            )
        )
    failed = bool(errors)
    if args.min_precision is not None and precision < args.min_precision:
        failed = True
    if args.min_recall is not None and recall < args.min_recall:
        failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
