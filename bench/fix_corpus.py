#!/usr/bin/env python3
"""Applies every fix to a copy of a corpus and checks the result: the issue-17 check that
`--fix --unsafe-fixes` leaves every file parsable by Python's own `ast`, and that a second run
changes nothing. Prints the fixes applied per rule. Python 3 stdlib only.

Usage: python3 bench/fix_corpus.py [--torchlint PATH] [CORPUS ...]
(default corpora: the pinned corpus, bench/corpus, and the dev corpus, ../shared/corpus/dev/scripts)

A benchmark-style script, not a test: it exits 1 when a fixed file no longer parses or a second
run still fixes something, else 0.
"""

import argparse
import ast
import collections
import re
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULTS = [REPO / "bench" / "corpus", REPO.parent / "shared" / "corpus" / "dev" / "scripts"]
FIXED_LINE = re.compile(r"^\s+(\d+) × (TL\d+) \(([a-z0-9-]+)\)$")


def parses(path):
    try:
        source = path.read_bytes()
    except OSError:
        return True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # invalid escape sequences and the like are not ours
        try:
            ast.parse(source, filename=str(path))
            return True
        except (SyntaxError, ValueError):
            return False


def fix(torchlint, root):
    done = subprocess.run(
        [torchlint, "check", "--no-cache", "--fix-only", "--unsafe-fixes", "--show-fixes", str(root)],
        capture_output=True, text=True, cwd=root,
    )
    counts = collections.Counter()
    for line in done.stdout.splitlines():
        match = FIXED_LINE.match(line)
        if match:
            counts[f"{match.group(2)} {match.group(3)}"] += int(match.group(1))
    return done, counts


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torchlint", default=str(REPO / "target" / "release" / "torchlint"))
    parser.add_argument("corpora", nargs="*", type=Path, default=DEFAULTS)
    args = parser.parse_args()
    failed = False
    for corpus in args.corpora:
        if not corpus.is_dir():
            print(f"{corpus}: not there (bench/fetch_corpus.py fetches the pinned corpus); skipped")
            continue
        with tempfile.TemporaryDirectory(prefix="torchlint-fix-") as tmp:
            root = Path(tmp) / corpus.name
            # The copy is ours to fix: a read-only original (a shared corpus) is left alone by
            # --fix, as any read-only file is, so its copy is made writable.
            shutil.copytree(corpus, root, symlinks=True, copy_function=shutil.copyfile)
            for folder in [root, *(p for p in root.rglob("*") if p.is_dir() and not p.is_symlink())]:
                folder.chmod(0o755)
            files = [p for p in root.rglob("*.py") if p.is_file()]
            broken_before = {p for p in files if not parses(p)}
            done, counts = fix(args.torchlint, root)
            if done.returncode != 0:
                print(f"{corpus}: torchlint exited {done.returncode}:\n{done.stderr[-2000:]}")
                failed = True
            broken = sorted(p for p in files if not parses(p) and p not in broken_before)
            again, more = fix(args.torchlint, root)
            print(f"{corpus}: {len(files)} files, {sum(counts.values())} fixes applied")
            for rule, count in sorted(counts.items()):
                print(f"  {count:5}  {rule}")
            print(f"  files that no longer parse with ast: {len(broken)}")
            for path in broken[:20]:
                print(f"    {path.relative_to(root)}")
            print(f"  fixes a second run applied: {sum(more.values())}")
            failed |= bool(broken) or bool(more)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
