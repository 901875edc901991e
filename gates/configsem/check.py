"""The config-semantics check: the official config as the candidate class consumes it.

Criteria, each naming the keys that fail:
``official_pinned`` (the file's sha256 is the pinned one), ``table_covers_official``
(every official key has a row), ``candidate_loads`` (import and load in a
subprocess, quietly, in time), ``meaning_held`` (each mapped attribute holds the
official value), ``consumed`` (each mapped attribute is read by the source
tree), ``round_trips`` (every save/load path keeps every mapped value, and the
saved config.json keeps every official key and value), and, when env.json
files are named, ``env_agreement`` (their revision and model_config_sha256
are the pins).
"""

from __future__ import annotations

import importlib.util
import json
import math
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gates.configsem.official import OfficialConfig
from gates.configsem.probe import ProbeResult, Tree, run_probe
from gates.configsem.reads import Read, SourceIndex
from gates.configsem.table import Table, covering_row, leaf_keys, lookup
from gates.core.criteria import Criterion

NOT_EVALUATED = "not evaluated: the candidate class did not load"
SHOWN = 5


@dataclass(frozen=True)
class Candidate:
    """Where the candidate class comes from, and the tree whose reads count."""

    class_path: str
    import_from: Path | None  # a source tree folder, or None for an installed package
    label: str  # how the source is named in reports (workspace path or "installed")
    tree: Tree  # the workspace whose commit the sandbox shows


@dataclass
class KeyResult:
    """One table row against one candidate attribute: the per-key table of the report."""

    key: str
    official: Any
    in_official: bool
    attribute: str | None
    how: str
    value: Any = None
    present: bool = False
    read_at: str | None = None
    problems: list[str] = field(default_factory=list)
    note: str = ""

    @property
    def status(self) -> str:
        if self.problems:
            return self.problems[0]
        return "ok" if self.attribute and self.in_official else self.note

    def document(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "official": self.official,
            "in_official": self.in_official,
            "attribute": self.attribute,
            "how": self.how,
            "value": self.value if self.present else None,
            "present": self.present,
            "read_at": self.read_at,
            "status": self.status,
            "problems": self.problems,
        }


@dataclass(frozen=True)
class ConfigReport:
    criteria: tuple[Criterion, ...]
    rows: tuple[KeyResult, ...]
    facts: dict[str, Any]

    @property
    def passed(self) -> bool:
        return all(c.met for c in self.criteria)


def same_value(official: Any, candidate: Any) -> bool:
    """Equal meaning of two JSON values: numbers by value (a bool is not a number)."""
    if isinstance(official, bool) or isinstance(candidate, bool):
        return type(official) is type(candidate) and official == candidate
    if isinstance(official, int | float) and isinstance(candidate, int | float):
        return math.isclose(official, candidate, rel_tol=0.0, abs_tol=0.0) or official == candidate
    if isinstance(official, list) and isinstance(candidate, list):
        return len(official) == len(candidate) and all(
            same_value(a, b) for a, b in zip(official, candidate, strict=True)
        )
    if isinstance(official, dict) and isinstance(candidate, dict):
        return official.keys() == candidate.keys() and all(
            same_value(official[k], candidate[k]) for k in official
        )
    return type(official) is type(candidate) and bool(official == candidate)


def shown(value: Any, limit: int = 60) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _names_of(path: str) -> list[str]:
    return path.split(".")


def module_file(root: Path, module: str) -> str | None:
    """The file of dotted ``module`` under ``root`` (a package's __init__.py), relative."""
    parts = module.split(".")
    for relpath in ("/".join(parts) + ".py", "/".join(parts) + "/__init__.py"):
        if (root / relpath).is_file():
            return relpath
    return None


def installed_root(module: str) -> tuple[Path, str] | None:
    """The folder holding the top-level package of ``module``, found without importing it.

    Returns (the folder above the package, the module's file relative to it).
    """
    top = module.split(".", maxsplit=1)[0]
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    base = Path(next(iter(spec.submodule_search_locations))).parent
    relpath = module_file(base, module)
    return (base, relpath) if relpath else None


class _Scan:
    """The source-tree scan, run in a thread while the subprocess imports the class: the
    class's own tree, then each further package the contract names (``packages``: where the
    model code that consumes the config lives, PaddleFleet beside PaddleFormers), found
    installed without importing it; one that is not installed is listed in ``missing``."""

    def __init__(
        self,
        root: Path | None,
        names: set[str],
        exclude: str | None,
        packages: tuple[str, ...] = (),
    ):
        self.root, self.names, self.exclude = root, names, exclude
        self.packages = packages
        self.index: SourceIndex | None = None
        self.others: list[tuple[str, SourceIndex]] = []  # (package, its index)
        self.missing: list[str] = []
        self.found: dict[str, Read] = {}
        self.error: str | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        if self.root is None:
            return
        try:
            self.index = SourceIndex.load(self.root)
            self.found = self.index.find(self.names, exclude=self.exclude)
            for package in self.packages:
                self._package(package)
        except OSError as exc:
            self.error = f"cannot scan the source tree: {exc}"

    def _package(self, package: str) -> None:
        found = installed_root(package)
        if found is None:
            self.missing.append(package)
            return
        folder = found[0] / package
        if self.root is not None and folder.resolve() == self.root.resolve():
            return  # the class's own package, scanned already
        index = SourceIndex.load(folder)
        self.others.append((package, index))
        self.found |= _prefixed(package, index.find(self.names - set(self.found)))

    def indexes(self) -> list[tuple[str | None, SourceIndex]]:
        """Every scanned index, the class's own first (its paths unprefixed)."""
        first: list[tuple[str | None, SourceIndex]] = [(None, self.index)] if self.index else []
        return first + [(package, index) for package, index in self.others]

    def scanned(self) -> str:
        """The scanned trees as reports name them: `paddleformers/, paddlefleet/ (not
        installed)`."""
        shown = [f"{self.root.name}/"] if self.root is not None else []
        shown += [f"{package}/" for package, _ in self.others]
        shown += [f"{package}/ (not installed: not scanned)" for package in self.missing]
        return ", ".join(shown)

    def files(self) -> int:
        return sum(len(index.texts) for _, index in self.indexes())

    def start(self) -> _Scan:
        self._thread.start()
        return self

    def join(self) -> None:
        self._thread.join()


def _prefixed(package: str | None, reads: dict[str, Read]) -> dict[str, Read]:
    """Reads found in a further package, their paths shown under its name."""
    if package is None:
        return reads
    return {name: Read(f"{package}/{read.path}", read.line) for name, read in reads.items()}


def _scan_plan(candidate: Candidate) -> tuple[Path | None, str | None]:
    """(the folder whose reads count, the class's own file relative to it), found lexically.

    A source folder as given; for an installed package, its top-level package folder.
    """
    module = candidate.class_path.partition(":")[0]
    if candidate.import_from is not None:
        return candidate.import_from, module_file(candidate.import_from, module)
    found = installed_root(module)
    if found is None:
        return None, None
    base, relpath = found
    top = module.split(".")[0]
    return base / top, relpath.removeprefix(top + "/")


def run_check(
    table: Table,
    official: OfficialConfig,
    candidate: Candidate,
    *,
    env: list[tuple[str, dict[str, Any] | str]],
) -> ConfigReport:
    """Evaluate every criterion; ``env`` holds each env.json as (path, document or problem)."""
    names: set[str] = set()
    for attribute in table.attributes():
        names.update(_names_of(attribute))
    scan_root, exclude = _scan_plan(candidate)
    scan = _Scan(scan_root, names, exclude, table.model_packages).start()
    probe = run_probe(
        candidate.class_path,
        official.raw,
        table.attributes(),
        import_from=candidate.import_from,
        timeout_s=table.timeout_s,
        tree=candidate.tree,
    )
    scan.join()
    reads = _reads_with_aliases(scan, probe)
    rows = _rows(table, official, probe, reads)
    criteria = [
        _pinned(table, official),
        _coverage(table, official),
        _loads(candidate, probe),
    ]
    if probe.loaded:
        criteria += [_meaning(rows), _consumed(rows, scan, probe), _trips(rows, probe)]
    else:
        criteria += [
            Criterion(name, False, NOT_EVALUATED)
            for name in ("meaning_held", "consumed", "round_trips")
        ]
    if env:
        criteria.append(env_agreement(table, official.sha256, env))
    facts = {
        "class": candidate.class_path,
        "source": candidate.label,
        "module_file": probe.report.get("module_file"),
        "distribution": probe.report.get("distribution"),
        "loaded_via": probe.report.get("loaded_via"),
        "scanned": str(scan_root) if scan_root else None,
        "scanned_files": scan.files(),
        "scanned_packages": [package for package, _ in scan.others],
        "missing_packages": list(scan.missing),
        "official": official.path,
        "official_sha256": official.sha256,
    }
    return ConfigReport(tuple(criteria), tuple(rows), facts)


def _reads_with_aliases(scan: _Scan, probe: ProbeResult) -> dict[str, Read]:
    """Reads by name; a read of an attribute_map alias counts for the attribute it maps to."""
    reads = dict(scan.found)
    aliases: dict[str, str] = probe.report.get("attribute_map") or {}
    wanted = {alias: target for alias, target in aliases.items() if target in scan.names}
    for package, index in scan.indexes() if wanted else []:
        exclude = scan.exclude if package is None else None
        for alias, read in _prefixed(package, index.find(wanted, exclude=exclude)).items():
            reads.setdefault(wanted[alias], read)
    return reads


def _attribute_read(attribute: str, reads: dict[str, Read]) -> Read | None:
    """The attribute is read, and so is each key nested below it (literal subscript/.get)."""
    found = [reads.get(name) for name in _names_of(attribute)]
    if any(read is None for read in found):
        return None
    return found[-1]


def _rows(
    table: Table, official: OfficialConfig, probe: ProbeResult, reads: dict[str, Read]
) -> list[KeyResult]:
    values: dict[str, Any] = probe.report.get("values") or {}
    rows: list[KeyResult] = []
    for row in table.keys:
        present, value = lookup(official.document, row.key)
        if row.ignored is not None:
            rows.append(
                KeyResult(row.key, value, present, None, "ignored", note=f"ignored: {row.ignored}")
            )
            continue
        for attribute in row.attribute:
            result = KeyResult(row.key, value, present, attribute, row.how, note=row.note)
            _fill(result, values.get(attribute), reads, probe.loaded)
            if not present:
                result.problems = []
                result.note = "absent from the official config: not judged"
            rows.append(result)
    for implied in table.implied:
        result = KeyResult(
            "(implied)", implied.value, True, implied.attribute, "implied", note=implied.why
        )
        _fill(result, values.get(implied.attribute), reads, probe.loaded)
        rows.append(result)
    for leaf in leaf_keys(official.document):
        if covering_row(table, leaf) is None:
            rows.append(
                KeyResult(
                    leaf,
                    lookup(official.document, leaf)[1],
                    True,
                    None,
                    "-",
                    problems=["not in the table"],
                )
            )
    return rows


def _fill(
    result: KeyResult, read: dict[str, Any] | None, reads: dict[str, Read], loaded: bool
) -> None:
    if not loaded or result.attribute is None:
        return
    where = _attribute_read(result.attribute, reads)
    result.read_at = where.where() if where else None
    if read is None or not read.get("present"):
        error = read.get("error") if read else None
        result.problems.append(
            f"no attribute {result.attribute}" + (f" ({error})" if error else "")
        )
        return
    result.present, result.value = True, read["value"]
    if not same_value(result.official, result.value):
        result.problems.append(f"holds {shown(result.value)}, official {shown(result.official)}")
    if where is None:
        result.problems.append(f"{result.attribute} is read nowhere in the source tree")


def _judged(rows: list[KeyResult]) -> list[KeyResult]:
    return [r for r in rows if r.attribute is not None and r.in_official]


def _pinned(table: Table, official: OfficialConfig) -> Criterion:
    name, files, key = "official_pinned", (official.path,), "official"
    if table.sha256 is None:
        detail = f"{official.path}: no sha256 pin (it is {official.sha256})"
        return Criterion(name, False, detail, files=files, key=key)
    if table.sha256 != official.sha256:
        detail = f"{official.path}: sha256 {official.sha256} is not the pinned {table.sha256}"
        return Criterion(name, False, detail, files=files, key=key)
    detail = f"{official.path}: sha256 {official.sha256}"
    return Criterion(name, True, detail, files=files, key=key)


def _coverage(table: Table, official: OfficialConfig) -> Criterion:
    leaves = leaf_keys(official.document)
    missing = [leaf for leaf in leaves if covering_row(table, leaf) is None]
    if missing:
        return Criterion(
            "table_covers_official",
            False,
            f"{len(missing)} official key(s) not in the table: {', '.join(missing[: SHOWN * 2])}",
        )
    ignored = sum(1 for row in table.keys if row.ignored is not None)
    return Criterion(
        "table_covers_official",
        True,
        f"all {len(official.document)} official keys covered ({ignored} ignored with a reason)",
    )


def _loads(candidate: Candidate, probe: ProbeResult) -> Criterion:
    if probe.failure:
        return Criterion("candidate_loads", False, probe.failure)
    if probe.stdout.strip():
        first = probe.stdout.strip().splitlines()[0][:200]
        return Criterion(
            "candidate_loads", False, f"{candidate.class_path} printed to stdout: {first!r}"
        )
    distribution = probe.report.get("distribution")
    origin = (
        f"{distribution['name']} {distribution['version']}"
        if candidate.import_from is None and distribution
        else f"from {candidate.label}/"
    )
    via = probe.report.get("loaded_via")
    return Criterion("candidate_loads", True, f"{candidate.class_path} ({origin}) loaded via {via}")


def _listing(rows: list[KeyResult]) -> str:
    return "; ".join(f"{r.key} -> {r.attribute}: {r.problems[0]}" for r in rows[:SHOWN])


def _meaning(rows: list[KeyResult]) -> Criterion:
    judged = _judged(rows)
    bad = [r for r in judged if any(p.startswith(("no attribute", "holds ")) for p in r.problems)]
    for row in bad:
        row.problems.sort(key=lambda p: not p.startswith(("no attribute", "holds ")))
    if bad:
        more = f" (and {len(bad) - SHOWN} more)" if len(bad) > SHOWN else ""
        return Criterion("meaning_held", False, f"{len(bad)} wrong: {_listing(bad)}{more}")
    return Criterion(
        "meaning_held", True, f"all {len(judged)} mapped attributes hold the official meaning"
    )


def _consumed(rows: list[KeyResult], scan: _Scan, probe: ProbeResult) -> Criterion:
    if scan.error or scan.root is None:
        detail = scan.error or "the candidate's source tree could not be located"
        return Criterion("consumed", False, detail)
    imported = probe.report.get("module_file")
    if imported and not Path(imported).resolve().is_relative_to(scan.root.resolve()):
        return Criterion(
            "consumed", False, f"scanned {scan.root}, but the class was imported from {imported}"
        )
    judged = [r for r in _judged(rows) if r.present]
    unread = sorted({r.attribute for r in judged if r.read_at is None and r.attribute})
    if unread:
        more = f" (and {len(unread) - SHOWN * 2} more)" if len(unread) > SHOWN * 2 else ""
        return Criterion(
            "consumed",
            False,
            f"{len(unread)} attribute(s) read nowhere in {scan.scanned()}: "
            f"{', '.join(unread[: SHOWN * 2])}{more}",
        )
    missing = f"; not scanned: {', '.join(scan.missing)} (not installed)" if scan.missing else ""
    return Criterion(
        "consumed",
        True,
        f"every mapped attribute is read ({scan.files()} files scanned){missing}",
    )


def _trips(rows: list[KeyResult], probe: ProbeResult) -> Criterion:
    problems: list[str] = []
    if probe.report.get("error"):
        problems.append(f"round trips failed: {probe.report['error']}")
    judged = [r for r in _judged(rows) if r.present]
    for trip in probe.report.get("trips") or []:
        if trip["error"]:
            problems.append(f"{trip['name']}: {trip['error']}")
            continue
        for row in judged:
            after = trip["values"].get(row.attribute) or {}
            if not after.get("present"):
                message = f"{row.attribute} gone after {trip['name']}"
            elif not same_value(row.value, after["value"]):
                change = f"{shown(row.value)} -> {shown(after['value'])}"
                message = f"{row.attribute} {change} after {trip['name']}"
            else:
                continue
            row.problems.append(message)
            problems.append(f"{row.key}: {message}")
    problems += _saved_file(rows, probe)
    stray = probe.report.get("stray_files") or []
    if stray:
        problems.append(f"wrote outside its save folder: {', '.join(stray[:SHOWN])}")
    if problems:
        more = f" (and {len(problems) - SHOWN} more)" if len(problems) > SHOWN else ""
        return Criterion("round_trips", False, "; ".join(problems[:SHOWN]) + more)
    return Criterion(
        "round_trips",
        True,
        "to_dict, to_json_string and save_pretrained keep every value; "
        "the saved config.json keeps every official key",
    )


def _saved_file(rows: list[KeyResult], probe: ProbeResult) -> list[str]:
    saved = probe.report.get("saved")
    if not saved:
        return []
    if saved["error"]:
        return [saved["error"]]
    document = saved["document"]
    problems = []
    by_key = {r.key: r for r in rows if r.attribute is not None}
    for key, row in by_key.items():
        if not row.in_official or key == "(implied)":
            continue
        for leaf, value in (
            leaf_keys({key: row.official}).items()
            if isinstance(row.official, dict)
            else [(key, row.official)]
        ):
            present, found = lookup(document, leaf)
            if not present:
                message = f"{leaf} dropped from the saved config.json"
            elif not same_value(value, found):
                message = f"{leaf} saved as {shown(found)}, official {shown(value)}"
            else:
                continue
            row.problems.append(message)
            problems.append(message)
    return problems


def env_agreement(
    table: Table, official_sha256: str | None, env: list[tuple[str, dict[str, Any] | str]]
) -> Criterion:
    """Each env.json records the pinned revision and config sha256 (the file's, unpinned)."""
    name, key = "env_agreement", "env"
    want_sha = table.sha256 or official_sha256
    if want_sha is None:
        return Criterion(name, False, "not evaluated: no sha256 pin to compare with", key=key)
    want_revision = table.revision or None
    problems: list[tuple[str, str]] = []
    for path, document in env:
        if isinstance(document, str):
            problems.append((path, f"{path}: {document}"))
            continue
        revision, sha = document.get("revision"), document.get("model_config_sha256")
        if revision != want_revision:
            problems.append(
                (path, f"{path}: revision {revision} is not the pinned {want_revision}")
            )
        if sha != want_sha:
            problems.append(
                (path, f"{path}: model_config_sha256 {sha} is not the pinned {want_sha}")
            )
    if problems:
        shown = problems[:SHOWN]
        files = tuple(dict.fromkeys(path for path, _ in shown))
        detail = "; ".join(why for _, why in shown)
        return Criterion(name, False, detail, files=files, key=key)
    return Criterion(
        name,
        True,
        f"{len(env)} env.json record revision {want_revision} "
        f"and model_config_sha256 {want_sha[:12]}...",
        files=tuple(path for path, _ in env),
        key=key,
    )
