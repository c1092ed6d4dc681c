#!/usr/bin/env python3
"""Takes the `torchlint` executable out of the wheel in WHEEL_DIR and archives it as
OUT_DIR/torchlint-TARGET.tar.gz (the name `cargo binstall` asks for, from Cargo.toml's
`[package.metadata.binstall]`), executable bit kept. The release workflow runs it after each
wheel build, so the binary attached to the GitHub release is the one the wheel installs.

Usage: binary-from-wheel.py WHEEL_DIR TARGET OUT_DIR   (Python 3 standard library only)
"""

from __future__ import annotations

import io
import sys
import tarfile
import zipfile
from pathlib import Path


def main(wheel_dir: str, target: str, out_dir: str) -> int:
    wheels = sorted(Path(wheel_dir).glob("torchlint-*.whl"))
    if len(wheels) != 1:
        print(f"expected one torchlint wheel in {wheel_dir}, found {len(wheels)}", file=sys.stderr)
        return 1
    with zipfile.ZipFile(wheels[0]) as wheel:
        names = [name for name in wheel.namelist()
                 if ".data/scripts/" in name and Path(name).name in ("torchlint", "torchlint.exe")]
        if len(names) != 1:
            print(f"{wheels[0].name} holds no torchlint executable", file=sys.stderr)
            return 1
        binary = wheel.read(names[0])
    name = Path(names[0]).name
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    archive = out / f"torchlint-{target}.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        info = tarfile.TarInfo(name)
        info.size = len(binary)
        info.mode = 0o755
        tar.addfile(info, io.BytesIO(binary))
    print(f"{archive} ({len(binary)} bytes, from {wheels[0].name})")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(*sys.argv[1:]))
