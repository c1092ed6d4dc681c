#!/usr/bin/env python3
"""Extract the real-world corpus: for each case in cases/*.toml, the Python files of its
repository as they were at the fix's parent commit, from local git clones.

Usage: python3 bench/realworld/extract.py --clones DIR [--out DIR] [--case ID ...]

DIR holds one git repository per case repository, found as any of DIR/owner+name/repo,
DIR/owner+name, DIR/owner/name or DIR/name (bare or not; what the library's `fetch` and a
plain `git clone` leave). Each case becomes OUT/<id>/ (default bench/realworld/checkouts/,
git-ignored): every .py, .pyi and .ipynb file of the repository at the parent commit, so that
torchlint sees the project the file lives in. Extraction is skipped for a case whose folder
already holds that commit. Python 3.11 standard library and git only.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

sys.dont_write_bytecode = True
from cases import HERE, load_cases  # noqa: E402

SUFFIXES = (".py", ".pyi", ".ipynb")
MARKER = ".torchlint-realworld-commit"


def find_clone(clones: Path, repo: str) -> Path | None:
    owner, name = repo.split("/", 1)
    for candidate in (
        clones / f"{owner}+{name}" / "repo",
        clones / f"{owner}+{name}",
        clones / owner / name,
        clones / name,
    ):
        if candidate.is_dir() and git(candidate, "rev-parse", "--git-dir").returncode == 0:
            return candidate
    return None


def git(repo: Path, *args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, check=False, **kwargs
    )


def extract(clone: Path, commit: str, out: Path) -> int:
    listing = git(clone, "ls-tree", "-r", "-z", "--full-tree", commit)
    if listing.returncode != 0:
        raise RuntimeError(listing.stderr.decode(errors="replace").strip())
    blobs = []
    for entry in listing.stdout.split(b"\0"):
        if not entry:
            continue
        meta, _, path = entry.partition(b"\t")
        mode, kind, sha = meta.split()
        name = path.decode(errors="surrogateescape")
        # Symlinks (mode 120000) and submodules are left out, as a checkout without them.
        if kind == b"blob" and mode != b"120000" and name.endswith(SUFFIXES):
            blobs.append((sha.decode(), name))
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    # One `cat-file --batch` for every blob: thousands of files in one process.
    request = "".join(f"{sha}\n" for sha, _ in blobs).encode()
    batch = git(clone, "cat-file", "--batch", input=request)
    if batch.returncode != 0:
        raise RuntimeError(batch.stderr.decode(errors="replace").strip())
    data, at = batch.stdout, 0
    for _, name in blobs:
        header_end = data.index(b"\n", at)
        header = data[at:header_end].split()
        if header[-1] == b"missing":
            # Snapshots leave out very large files: the checkout lacks them too.
            at = header_end + 1
            continue
        size = int(header[2])
        body = data[header_end + 1 : header_end + 1 + size]
        at = header_end + 1 + size + 1
        target = out / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(body)
    (out / MARKER).write_text(commit + "\n")
    return len(blobs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clones", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=HERE / "checkouts")
    parser.add_argument("--case", action="append", default=[], help="only these case ids")
    args = parser.parse_args()

    failures = 0
    for case in load_cases():
        if args.case and case.id not in args.case:
            continue
        out = args.out / case.id
        marker = out / MARKER
        if marker.is_file() and marker.read_text().strip() == case.parent:
            print(f"{case.id}: already extracted")
            continue
        clone = find_clone(args.clones, case.repo)
        if clone is None:
            print(f"{case.id}: no clone of {case.repo} under {args.clones}", file=sys.stderr)
            failures += 1
            continue
        try:
            count = extract(clone, case.parent, out)
        except RuntimeError as error:
            print(f"{case.id}: {case.repo}@{case.parent[:12]}: {error}", file=sys.stderr)
            failures += 1
            continue
        if not (out / case.path).is_file():
            print(f"{case.id}: {case.path} is not in {case.repo}@{case.parent[:12]}", file=sys.stderr)
            failures += 1
            continue
        print(f"{case.id}: {count} files from {case.repo}@{case.parent[:12]}")
    if failures:
        print(f"{failures} case(s) could not be extracted", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
