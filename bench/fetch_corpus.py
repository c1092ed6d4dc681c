#!/usr/bin/env python3
"""Fetch the pinned benchmark corpus: real PyTorch code from five published packages.

Each pin is downloaded with `pip download --no-deps` (whatever pip picks, wheel or sdist)
into bench/corpus/downloads/<name>-<version>/ and extracted into bench/corpus/<name>-<version>/.
Idempotent: a pin whose folder is already extracted is skipped, and an archive already
downloaded is not downloaded again. Python 3.11 stdlib only.

Usage: python3 bench/fetch_corpus.py
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

# Pinned so that numbers from different days and machines are comparable: a new release
# would change the corpus under the benchmark.
PINS = [
    ("transformers", "5.24.0"),
    ("yolov5", "7.0.14"),
    ("torchtune", "0.6.1"),
    ("mmengine", "0.10.7"),
    ("pytorch-ignite", "0.5.5"),
]

BENCH = Path(__file__).resolve().parent
CORPUS = BENCH / "corpus"
DOWNLOADS = CORPUS / "downloads"

# Written last into an extracted folder; its absence means the extraction did not finish.
COMPLETE_MARKER = ".extracted"


def download(name: str, version: str) -> Path:
    """The archive of one pin, downloaded unless already there."""
    # One folder per pin, so the archive is found without guessing how pip spells its
    # file name (pytorch-ignite ships as pytorch_ignite-0.5.5-py3-none-any.whl).
    dest = DOWNLOADS / f"{name}-{version}"
    archives = list_archives(dest)
    if not archives:
        dest.mkdir(parents=True, exist_ok=True)
        print(f"downloading {name}=={version}", flush=True)
        subprocess.run(
            [
                sys.executable, "-m", "pip", "download",
                "--no-deps",
                # The corpus is read, never installed or run: the interpreter
                # running this script need not satisfy the package's Requires-Python.
                "--ignore-requires-python",
                "--disable-pip-version-check",
                "--quiet",
                "--dest", str(dest),
                f"{name}=={version}",
            ],
            check=True,
        )
        archives = list_archives(dest)
    if len(archives) != 1:
        sys.exit(f"error: expected one archive in {dest}, found {[a.name for a in archives]}")
    return archives[0]


def list_archives(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted(
        p for p in folder.iterdir()
        if p.is_file() and p.name.endswith((".whl", ".zip", ".tar.gz", ".tgz"))
    )


def extract(archive: Path, target: Path) -> None:
    """Extracts into a temporary sibling, then renames: an interrupted run leaves no
    half-extracted folder that a later run would take for a complete one."""
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=CORPUS))
    try:
        # mkdtemp makes the folder private (0700); the corpus is ordinary readable data.
        staging.chmod(0o755)
        if archive.name.endswith((".whl", ".zip")):
            # Wheels are zip files; zipfile already refuses paths that escape the target.
            with zipfile.ZipFile(archive) as zf:
                zf.extractall(staging)
        else:
            with tarfile.open(archive) as tf:
                # The "data" filter rejects absolute paths, `..`, links out of the tree
                # and device files; Python 3.11.4+ has it.
                if hasattr(tarfile, "data_filter"):
                    tf.extractall(staging, filter="data")
                else:
                    tf.extractall(staging)
        (staging / COMPLETE_MARKER).write_text(f"{archive.name}\n")
        if target.exists():
            shutil.rmtree(target)  # a leftover without the marker
        staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def count_tree(folder: Path) -> tuple[int, int, int]:
    """(.py files, bytes of .py files, bytes of all files) under folder."""
    py_files = py_bytes = all_bytes = 0
    for dirpath, _dirnames, filenames in os.walk(folder):
        for filename in filenames:
            size = os.path.getsize(os.path.join(dirpath, filename))
            all_bytes += size
            if filename.endswith(".py"):
                py_files += 1
                py_bytes += size
    return py_files, py_bytes, all_bytes


def main() -> int:
    CORPUS.mkdir(parents=True, exist_ok=True)
    total_files = total_py = total_all = 0
    for name, version in PINS:
        target = CORPUS / f"{name}-{version}"
        if (target / COMPLETE_MARKER).is_file():
            state = "already extracted"
        else:
            archive = download(name, version)
            extract(archive, target)
            state = f"extracted {archive.name}"
        files, py_bytes, all_bytes = count_tree(target)
        total_files += files
        total_py += py_bytes
        total_all += all_bytes
        print(f"  {name}=={version}: {files} .py files, {py_bytes / 1e6:.1f} MB ({state})")
    print(
        f"corpus {CORPUS}: {total_files} .py files, {total_py / 1e6:.1f} MB of .py, "
        f"{total_all / 1e6:.1f} MB extracted in all"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
