"""Runs in a subprocess (``python -P worker.py REQUEST``): the only place candidate code runs.

Standard library only, and it imports nothing from gates: it loads the official
config with the candidate class, reads the table's attributes after loading and
after each save/load path, reads the saved config.json itself, lists files
written outside the save folder, and writes one JSON result file. It prints
nothing: anything on stdout came from the candidate.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import math
import os
import sys
from pathlib import Path
from typing import Any


def _line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}".rstrip(": ")


def plain(value: Any, depth: int = 0) -> Any:
    """A JSON value standing for ``value``: containers as lists/objects, others by repr."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"__repr__": repr(value)}
    if depth < 8 and isinstance(value, list | tuple):
        return [plain(item, depth + 1) for item in value]
    if depth < 8 and isinstance(value, dict):
        return {str(key): plain(item, depth + 1) for key, item in value.items()}
    return {"__repr__": f"{type(value).__name__}: {value!r}"[:300]}


def read_attribute(config: object, path: str) -> dict[str, Any]:
    """``{"present": bool, "value": ...}`` for dotted ``path`` (attributes, then dict keys)."""
    first, *rest = path.split(".")
    try:
        current: Any = getattr(config, first)
    except AttributeError:
        return {"present": False, "value": None}
    except Exception as error:  # noqa: BLE001  (a property of candidate code that raises)
        return {"present": False, "value": None, "error": _line(error)}
    for part in rest:
        if isinstance(current, dict):
            if part not in current:
                return {"present": False, "value": None}
            current = current[part]
        elif hasattr(current, part):
            current = getattr(current, part)
        else:
            return {"present": False, "value": None}
    return {"present": True, "value": plain(current)}


def read_all(config: object, paths: list[str]) -> dict[str, Any]:
    return {path: read_attribute(config, path) for path in paths}


def _distribution(module_name: str) -> dict[str, str] | None:
    top = module_name.split(".", maxsplit=1)[0]
    names = importlib.metadata.packages_distributions().get(top, [])
    for name in names:
        try:
            return {"name": name, "version": importlib.metadata.version(name)}
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def load(cls: Any, folder: Path, document: dict[str, Any]) -> tuple[object, str]:
    """Load the official config the way the model will: from_pretrained of its folder."""
    if hasattr(cls, "from_pretrained"):
        return cls.from_pretrained(str(folder)), "from_pretrained"
    if hasattr(cls, "from_dict"):
        return cls.from_dict(dict(document)), "from_dict"
    return cls(**document), "constructor"


# The same rules as gates.core.content_ids.strict_loads: this script imports nothing from gates.
def _pairs_once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def read_saved(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {"error": "save_pretrained wrote no config.json", "document": None}
    try:
        document = json.loads(
            path.read_text(encoding="utf-8"),
            object_pairs_hook=_pairs_once,
            parse_constant=_no_constant,
        )
    except (ValueError, UnicodeDecodeError) as error:
        return {"error": f"the saved config.json is not valid JSON: {error}", "document": None}
    if not isinstance(document, dict):
        return {"error": "the saved config.json is not a JSON object", "document": None}
    return {"error": None, "document": plain(document)}


def round_trips(cls: Any, config: Any, sandbox: Path, paths: list[str]) -> list[dict[str, Any]]:
    """Each save/load path, then the table's attributes of what it loaded (or its error line)."""
    json_file = sandbox / "out" / "trip.json"
    save = sandbox / "out" / "save"

    def via_dict() -> object:
        return cls.from_dict(config.to_dict())

    def via_json() -> object:
        json_file.write_text(config.to_json_string(), encoding="utf-8")
        return cls.from_json_file(str(json_file))

    def via_save() -> object:
        config.save_pretrained(str(save))
        return cls.from_pretrained(str(save))

    paths_taken = (
        ("to_dict", "from_dict", via_dict),
        ("to_json_string", "from_json_file", via_json),
        ("save_pretrained", "from_pretrained", via_save),
    )
    trips: list[dict[str, Any]] = []
    for write, read, run in paths_taken:
        trip: dict[str, Any] = {"name": f"{write} -> {read}", "error": None, "values": {}}
        if not (hasattr(config, write) and hasattr(cls, read)):
            trip["error"] = f"no {write}/{read}"
        else:
            try:
                trip["values"] = read_all(run(), paths)
            except Exception as error:  # noqa: BLE001  (candidate code: any failure is a finding)
                trip["error"] = _line(error)
        trips.append(trip)
    return trips


def stray_files(sandbox: Path, expected: set[Path]) -> list[str]:
    """Files under the sandbox that are not ours and not in the save folder (HOME excepted)."""
    found = []
    allowed = (sandbox / "out" / "save", sandbox / "home")
    for folder, _, files in os.walk(sandbox):
        for name in files:
            path = Path(folder) / name
            if path in expected or any(path.is_relative_to(root) for root in allowed):
                continue
            found.append(path.relative_to(sandbox).as_posix())
    return sorted(found)


def probe(request: dict[str, Any]) -> dict[str, Any]:
    sandbox = Path(request["sandbox"])
    paths: list[str] = request["attributes"]
    module_name, _, class_name = request["class"].partition(":")
    result: dict[str, Any] = {"stage": "import"}
    try:
        module = importlib.import_module(module_name)
        cls = getattr(module, class_name)
    except BaseException as error:  # noqa: BLE001  (SystemExit from candidate code included)
        result["error"] = _line(error)
        return result
    result["module_file"] = getattr(module, "__file__", None)
    result["distribution"] = _distribution(module_name)
    attribute_map = getattr(cls, "attribute_map", None)
    result["attribute_map"] = (
        {str(k): str(v) for k, v in attribute_map.items()}
        if isinstance(attribute_map, dict)
        else {}
    )
    result["stage"] = "load"
    official_folder = sandbox / "official"
    document = json.loads((official_folder / "config.json").read_text(encoding="utf-8"))
    try:
        config, how = load(cls, official_folder, document)
    except BaseException as error:  # noqa: BLE001
        result["error"] = _line(error)
        return result
    result["loaded_via"] = how
    result["values"] = read_all(config, paths)
    result["stage"] = "round_trips"
    try:
        result["trips"] = round_trips(cls, config, sandbox, paths)
    except BaseException as error:  # noqa: BLE001
        result["error"] = _line(error)
        return result
    result["saved"] = read_saved(sandbox / "out" / "save" / "config.json")
    expected = {
        official_folder / "config.json",
        sandbox / "request.json",
        sandbox / "out" / "trip.json",
    }
    result["stray_files"] = stray_files(sandbox, expected)
    result["stage"] = "done"
    return result


def main() -> None:
    request_path = Path(sys.argv[1])
    request = json.loads(request_path.read_text(encoding="utf-8"))
    sys.path[:0] = request["sys_path"]
    result = probe(request)
    Path(request["result"]).write_text(json.dumps(result, allow_nan=False), encoding="utf-8")


if __name__ == "__main__":
    main()
