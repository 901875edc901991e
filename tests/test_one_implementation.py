"""One implementation of each thing (issue 34), read from the code itself: exactly one module
parses safetensors headers, one applies the naming rules, one writes indented JSON, and no C
source or build hook ships. A second copy of any of them fails here, naming the module."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tests.helpers import REPO_ROOT

PACKAGE = REPO_ROOT / "gates"


def modules() -> Iterator[tuple[str, ast.Module]]:
    """Each module of gates/ (its path from the repository root) and its syntax tree."""
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(REPO_ROOT).as_posix(), ast.parse(path.read_text(encoding="utf-8"))


def calls(tree: ast.Module) -> Iterator[ast.Call]:
    return (node for node in ast.walk(tree) if isinstance(node, ast.Call))


def called(call: ast.Call) -> str:
    """The dotted name a call calls (`json.dumps`, `read_header`), or ""."""
    func, parts = call.func, []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if isinstance(func, ast.Name):
        parts.append(func.id)
        return ".".join(reversed(parts))
    return ""


def imported(tree: ast.Module) -> set[str]:
    """Every module a module imports (an `import x.y` and a `from x.y import z` both give
    `x.y`), at any depth of its text."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def test_one_module_parses_safetensors_headers() -> None:
    """A header is parsed where the 8-byte little-endian length is unpacked and the JSON
    after it decoded; the safetensors library itself is used only for the replay's own
    saved states (written and read back by gates, never an audited checkpoint)."""
    unpacking, decoding = set(), set()
    library = set()
    for path, tree in modules():
        for call in calls(tree):
            name = called(call)
            literal = call.args[0] if call.args else None
            length = isinstance(literal, ast.Constant) and "Q" in str(literal.value)
            if name in {"struct.unpack", "struct.unpack_from"} and length:
                unpacking.add(path)
            if name == "int.from_bytes":
                unpacking.add(path)
            if name in {"json.loads", "strict_loads"}:
                decoding.add(path)
        if any(
            module == "safetensors" or module.startswith("safetensors.")
            for module in imported(tree)
        ):
            library.add(path)
    assert unpacking & decoding == {"gates/safetensors/header.py"}
    assert library == {"gates/replay/state.py"}


def test_one_module_applies_the_naming_rules() -> None:
    """Rule trees (`Node`s) are made and rule patterns compiled only in rules.py; the naming
    package holds the rule kinds, their readers (AOA statements, contract params), the one
    interpreter of the trees and the placeholders and families that reports use, and
    nothing that applies a rule a second way."""
    makers = {
        path
        for path, tree in modules()
        for call in calls(tree)
        if called(call).rsplit(".", 1)[-1] in {"Node", "_node", "compile_pattern", "Pattern"}
    }
    assert makers == {"gates/naming/rules.py"}
    naming = {path.name for path in (PACKAGE / "naming").glob("*.py")}
    assert naming == {
        "__init__.py",
        "rules.py",
        "interpret.py",
        "rule_kinds.py",
        "aoa.py",
        "rulefile.py",
        "config_placeholders.py",
        "families.py",
    }


def test_one_module_writes_indented_json() -> None:
    """Output files and every `--format json` rendering are indented by one writer (the
    standard library's encoder, NaN refused); no other JSON library is imported."""
    indenting = {
        path
        for path, tree in modules()
        for call in calls(tree)
        if called(call) == "json.dumps" and any(k.arg == "indent" for k in call.keywords)
    }
    assert indenting == {"gates/core/json_writer.py"}
    others = {"orjson", "ujson", "simplejson", "rapidjson", "msgspec"}
    importing = {path for path, tree in modules() if imported(tree) & others}
    assert importing == set()


def test_content_ids_live_apart_from_the_writer() -> None:
    """The canonical form and content ids (what a receipt's identity rests on) are defined
    in one module, which writes no file."""
    defining = {
        path
        for path, tree in modules()
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name in {"canonical_json", "content_id"}
    }
    assert defining == {"gates/core/content_ids.py"}
    tree = ast.parse((PACKAGE / "core" / "content_ids.py").read_text(encoding="utf-8"))
    assert not {called(call) for call in calls(tree)} & {"open", "write_bytes", "write_text"}


def test_no_c_source_and_no_build_hook() -> None:
    sources = [
        path.relative_to(REPO_ROOT).as_posix()
        for suffix in ("*.c", "*.h", "*.pyx", "*.cpp")
        for path in PACKAGE.rglob(suffix)
    ]
    assert sources == []
    assert not (REPO_ROOT / "hatch_build.py").exists()
    assert "hatch_build" not in (REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8")


def test_the_checks_see_the_modules_they_name() -> None:
    """The listing reads real files: the modules it names exist where it looks."""
    for relpath in (
        "gates/safetensors/header.py",
        "gates/naming/rules.py",
        "gates/core/json_writer.py",
        "gates/core/content_ids.py",
    ):
        assert (REPO_ROOT / relpath).is_file(), relpath
