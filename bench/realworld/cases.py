"""The real-world corpus manifest (cases/*.toml), read and checked."""

from __future__ import annotations

import re
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
CASES = HERE / "cases"

SHA = re.compile(r"^[0-9a-f]{40}$")
CODE = re.compile(r"^TL[0-9]{3}$")


@dataclass(frozen=True)
class Label:
    code: str
    line: int
    note: str
    fixed: bool = False


@dataclass
class Case:
    id: str
    repo: str
    fix: str
    parent: str
    path: str
    source: str
    fix_summary: str
    manifest: str
    hazards: list[Label] = field(default_factory=list)
    traps: list[Label] = field(default_factory=list)
    unsure: list[Label] = field(default_factory=list)


class ManifestError(Exception):
    pass


def _labels(raw, where: str) -> list[Label]:
    if not isinstance(raw, list):
        raise ManifestError(f"{where}: expected an array")
    labels = []
    for item in raw:
        if not (
            isinstance(item, dict)
            and isinstance(item.get("code"), str)
            and CODE.match(item["code"])
            and isinstance(item.get("line"), int)
            and item["line"] >= 1
        ):
            raise ManifestError(f"{where}: bad entry {item!r}")
        labels.append(
            Label(item["code"], item["line"], str(item.get("note", "")), bool(item.get("fixed")))
        )
    return labels


def load_cases(directory: Path = CASES) -> list[Case]:
    cases: list[Case] = []
    seen: dict[str, str] = {}
    for manifest in sorted(directory.glob("*.toml")):
        try:
            data = tomllib.loads(manifest.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as error:
            raise ManifestError(f"{manifest}: {error}") from error
        for index, raw in enumerate(data.get("case", [])):
            where = f"{manifest.name} case #{index + 1}"
            for key in ("id", "repo", "fix", "parent", "path"):
                if not isinstance(raw.get(key), str) or not raw[key]:
                    raise ManifestError(f"{where}: no `{key}`")
            if not (SHA.match(raw["fix"]) and SHA.match(raw["parent"])):
                raise ManifestError(f"{where}: `fix` and `parent` must be 40 hex digits")
            if raw["id"] in seen:
                raise ManifestError(f"{where}: id `{raw['id']}` is also in {seen[raw['id']]}")
            same_fix = [c for c in cases if c.repo == raw["repo"] and c.fix == raw["fix"] and c.path == raw["path"]]
            if same_fix:
                print(f"warning: {where}: the same fix and file as `{same_fix[0].id}`; skipped", file=sys.stderr)
                continue
            seen[raw["id"]] = manifest.name
            case = Case(
                id=raw["id"],
                repo=raw["repo"],
                fix=raw["fix"],
                parent=raw["parent"],
                path=raw["path"],
                source=str(raw.get("source", "")),
                fix_summary=str(raw.get("fix_summary", "")),
                manifest=manifest.name,
                hazards=_labels(raw.get("hazards", []), f"{where} hazards"),
                traps=_labels(raw.get("traps", []), f"{where} traps"),
                unsure=_labels(raw.get("unsure", []), f"{where} unsure"),
            )
            if not any(h.fixed for h in case.hazards):
                raise ManifestError(f"{where}: no hazard is marked `fixed = true`")
            cases.append(case)
    return cases
