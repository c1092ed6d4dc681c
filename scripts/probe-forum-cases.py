#!/usr/bin/env python3
"""Runs `torchlint probe` on the forum cases in scripts/probe_cases/ and checks that each is
named right: the line and the category (a leak on a line, optimizer state, fragmentation, a
one-time peak). The GPU check of issue 18; Python 3.8+ stdlib only:

    python3 scripts/probe-forum-cases.py --torchlint target/release/torchlint [--python python3]

Prints one row per check, then the probe's text report of each case with --verbose. Exits 1
when a check fails.
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

CASES = Path(__file__).resolve().parent / "probe_cases"


def probe(args, script, options, script_args=()):
    command = [args.torchlint, "probe", str(CASES / script), "--python", args.python,
               "--output-format", "json", *options]
    if script_args:
        command += ["--", *script_args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        report = {}
    return report, done


def verdict(report, code, line):
    for finding in report.get("findings", []):
        if finding["code"] == code and finding["line"] == line:
            return finding["verdict"]
    return {}


def largest_part(split):
    parts = (split or {}).get("parts", [])
    return max(parts, key=lambda item: item["bytes"])["what"] if parts else None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torchlint", required=True)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    rows = []

    def check(case, what, ok, seen):
        rows.append((case, what, "ok" if ok else "FAIL", str(seen)[:150]))

    def check_held_by_activations(case, oom, place):
        """An out-of-memory error that tensors caused, not fragmentation: activations are the
        largest part of its budget, and `place` (file:line) holds the most."""
        check(case, "not fragmentation",
              (oom.get("fragmentation") or "").startswith("not fragmentation"), oom.get("fragmentation"))
        # --max-memory reads the allocation stacks: activations are told from other tensors.
        check(case, "activations hold the memory",
              largest_part(oom.get("budget")) == "activations (made in a forward)", oom.get("budget"))
        held = [line["place"] for line in oom.get("held_by", [])]
        check(case, "held at the error by " + place, held[:1] == [place], held)

    # 1. Evaluation without no_grad, every epoch's loss kept: out of memory in the third epoch
    #    under a 1.3 GiB cap, with the evaluation line on the stack.
    report, done = probe(args, "eval_without_no_grad.py", ["--until-exit", "--max-memory", "1.3"])
    oom = report.get("out_of_memory") or {}
    check("eval_without_no_grad", "runs out of memory", bool(oom), oom.get("message"))
    check("eval_without_no_grad", "in the third epoch",
          "epoch 1 " in done.stderr and "epoch 2 " not in done.stderr, done.stderr[-300:])
    check("eval_without_no_grad", "the evaluation line on its stack",
          "TL101:26" in oom.get("findings_on_stack", []), oom.get("findings_on_stack"))
    check("eval_without_no_grad", "TL101:26 confirmed",
          verdict(report, "TL101", 26).get("status") == "confirmed", verdict(report, "TL101", 26).get("summary"))
    check_held_by_activations("eval_without_no_grad", oom, "eval_without_no_grad.py:26")

    # 2. losses.append(loss): each step's graph kept.
    report, _ = probe(args, "losses_append.py", [])
    found = verdict(report, "TL102", 17)
    check("losses_append", "TL102:17 confirmed", found.get("status") == "confirmed", found.get("summary"))

    # 3. Per-batch features kept on the GPU.
    report, _ = probe(args, "features_list.py", ["--attribute", "--until-exit"])
    found = verdict(report, "TL104", 13)
    check("features_list", "TL104:13 confirmed, grows on the GPU",
          found.get("status") == "confirmed" and found.get("class") == "grows-gpu",
          (found.get("class"), found.get("summary")))
    attributed = report.get("attribution") or {}
    growing = [(line["place"], line["findings"]) for line in attributed.get("growing", [])]
    check("features_list", "--attribute: line 13 grows, with its finding",
          growing[:1] == [("features_list.py:13", ["TL104"])], growing)
    per_step = (attributed.get("growing") or [{}])[0].get("per_step") or 0
    check("features_list", "--attribute: 4 MiB per step (256 x 4096 float32)",
          abs(per_step - (4 << 20)) < (256 << 10), per_step)

    # 3b. A forward hook that keeps every output (TL111): the list it appends to grows on the GPU.
    report, _ = probe(args, "hook_features.py", [])
    found = verdict(report, "TL111", 13)
    check("hook_features", "TL111:13 confirmed, grows on the GPU",
          found.get("status") == "confirmed" and found.get("class") == "grows-gpu",
          (found.get("class"), found.get("summary")))

    # 4. AdamW against SGD with momentum: the budget shows twice the optimizer state.
    states = {}
    for optimizer in ("adamw", "sgd"):
        report, _ = probe(args, "optimizer_state.py", [], [optimizer])
        split = report.get("budget") or {}
        states[optimizer] = (split.get("optimizers") or [{}])[0]
        params = split.get("parameters")
        # The run's budget is the one read at the most allocated memory: a peak, or the end
        # when the end holds as much (SGD: nothing transient is left after the last step).
        check("optimizer_state " + optimizer, "budget read on the device at a peak or the end",
              split.get("device") is True and split.get("at") in ("peak", "exit"),
              (split.get("device"), split.get("at")))
        check("optimizer_state " + optimizer, "parameters of 8 Linear(4096, 4096)",
              params == 8 * (4096 * 4096 + 4096) * 4, params)
    adamw, sgd = states["adamw"].get("bytes") or 0, states["sgd"].get("bytes") or 1
    check("optimizer_state", "AdamW state about twice SGD-momentum's",
          states["adamw"].get("class") == "AdamW" and states["sgd"].get("class") == "SGD"
          and 1.9 < adamw / sgd < 2.1, (states["adamw"], states["sgd"]))

    # 5. Fragmentation: the cache holds more free memory than the request, in no block of it.
    report, _ = probe(args, "fragmentation.py", ["--max-memory", "1"])
    oom = report.get("out_of_memory") or {}
    stack = [frame["line"] for frame in oom.get("stack", [])]
    check("fragmentation", "out of memory at line 13", stack[:1] == [13], stack)
    check("fragmentation", "called fragmentation",
          (oom.get("fragmentation") or "").startswith("fragmentation:"), oom.get("fragmentation"))

    # 6. A plain too-big batch: a one-time peak, no leak confirmed.
    report, _ = probe(args, "too_big_batch.py", ["--max-memory", "2"])
    oom = report.get("out_of_memory") or {}
    check("too_big_batch", "runs out of memory in the first step", bool(oom), oom.get("message"))
    check_held_by_activations("too_big_batch", oom, "too_big_batch.py:13")  # the forward
    confirmed = [f["code"] for f in report.get("findings", []) if f["verdict"]["status"] == "confirmed"]
    check("too_big_batch", "no leak confirmed", not confirmed, confirmed)

    width = max(len(row[0]) for row in rows)
    for case, what, status, seen in rows:
        print(f"{case:<{width}}  {status:<4}  {what}: {seen}")
    failed = sum(1 for row in rows if row[2] != "ok")
    print(f"\n{len(rows) - failed} of {len(rows)} checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
