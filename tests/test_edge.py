"""Inputs are resolved once, at the edge: the command line (gates/cli/) and the commands
(gates/commands/) read the environment and build one `Invocation`; nothing below them reads
it, and no mode travels in a ContextVar, a `global` or a module-level object. The training
process reads the run protocol's variables through gates/core/run_protocol.py alone."""

from __future__ import annotations

import ast
from pathlib import Path

from gates.core.invocation import CheckerMode, Given, read_invocation
from tests.helpers import REPO_ROOT

PACKAGE = REPO_ROOT / "gates"

#: Where the environment may be read: the edge, and the training process's one reader.
EDGE = ("gates/cli/", "gates/commands/", "gates/core/run_protocol.py")

#: What the environment is read through.
ENVIRONMENT_NAMES = {"environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"}

#: Module-level state a function changes, kept on purpose (module:name -> why).
KEPT = {
    # in the training process, a memo of a pure conversion (a Paddle generator's engine
    # state, a list of ~6,000 ints, to a read-only array): equal states give the same
    # array; no behaviour depends on it
    "gates/replay/capture.py:_ENGINES",
}

MUTATORS = {
    "append", "extend", "insert", "remove", "pop", "popitem", "clear", "update", "add",
    "discard", "setdefault", "sort", "reverse",
}  # fmt: skip
MUTABLE_CALLS = {"dict", "list", "set", "bytearray", "defaultdict", "OrderedDict", "Counter"}


def below_the_edge() -> list[Path]:
    return sorted(
        path
        for path in PACKAGE.rglob("*.py")
        if not path.relative_to(REPO_ROOT).as_posix().startswith(EDGE)
    )


def environment_reads(tree: ast.AST) -> list[str]:
    """Every `os.environ`, `os.getenv`, ... and every `from os import environ`."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ENVIRONMENT_NAMES:
            if isinstance(node.value, ast.Name) and node.value.id in {"os", "posix"}:
                found.append(f"line {node.lineno}: os.{node.attr}")
        elif isinstance(node, ast.ImportFrom) and node.module in {"os", "posix"}:
            names = {alias.name for alias in node.names} & ENVIRONMENT_NAMES
            found += [f"line {node.lineno}: from os import {name}" for name in sorted(names)]
    return found


def mode_channels(tree: ast.AST) -> list[str]:
    """ContextVars, thread-locals and `global` statements."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            found.append(f"line {node.lineno}: global {', '.join(node.names)}")
        elif isinstance(node, ast.Import | ast.ImportFrom):
            module = node.module if isinstance(node, ast.ImportFrom) else None
            names = {alias.name for alias in node.names}
            if module == "contextvars" or "contextvars" in names:
                found.append(f"line {node.lineno}: contextvars")
        elif (
            isinstance(node, ast.Attribute)
            and node.attr in {"ContextVar", "local"}
            and isinstance(node.value, ast.Name)
            and node.value.id in {"contextvars", "threading"}
        ):
            found.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
    return found


def _stateful_classes(tree: ast.Module) -> set[str]:
    """Classes of the module whose methods (other than __init__) assign to ``self``."""
    stateful = set()
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        for method in node.body:
            if not isinstance(method, ast.FunctionDef) or method.name == "__init__":
                continue
            for inner in ast.walk(method):
                targets = (
                    inner.targets
                    if isinstance(inner, ast.Assign)
                    else [inner.target]
                    if isinstance(inner, ast.AugAssign | ast.AnnAssign)
                    else []
                )
                for target in targets:
                    if (
                        isinstance(target, ast.Attribute)
                        and isinstance(target.value, ast.Name)
                        and target.value.id == "self"
                    ):
                        stateful.add(node.name)
    return stateful


def _module_bindings(tree: ast.Module) -> dict[str, ast.expr]:
    bound: dict[str, ast.expr] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and node.value is not None:
            for target in node.targets:
                if isinstance(target, ast.Name):
                    bound[target.id] = node.value
        elif (
            isinstance(node, ast.AnnAssign)
            and node.value is not None
            and isinstance(node.target, ast.Name)
        ):
            bound[node.target.id] = node.value
    return bound


def _is_mutable(value: ast.expr, stateful: set[str]) -> bool:
    if isinstance(value, ast.Dict | ast.List | ast.Set):
        return True
    if isinstance(value, ast.Call):
        called = value.func.id if isinstance(value.func, ast.Name) else None
        return called in MUTABLE_CALLS or called in stateful
    return False


def _changed_in_functions(tree: ast.Module) -> set[str]:
    """Module-level names a function changes: item stores and deletes, mutating methods,
    attribute stores."""
    changed = set()
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.Subscript | ast.Attribute) and isinstance(
                node.ctx, ast.Store | ast.Del
            ):
                if isinstance(node.value, ast.Name):
                    changed.add(node.value.id)
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in MUTATORS
                and isinstance(node.func.value, ast.Name)
            ):
                changed.add(node.func.value.id)
    return changed


def module_state(tree: ast.Module, where: str) -> list[str]:
    """Module-level containers or stateful objects that a function of the module changes,
    or that are mutable objects of the module's own stateful classes."""
    stateful = _stateful_classes(tree)
    bound = _module_bindings(tree)
    changed = _changed_in_functions(tree)
    found = []
    for name, value in bound.items():
        if f"{where}:{name}" in KEPT or not _is_mutable(value, stateful):
            continue
        calls_stateful = (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id in stateful
        )
        if name in changed or calls_stateful:
            found.append(f"line {value.lineno}: module-level {name} is changed at run time")
    return found


def problems_of(path: Path) -> list[str]:
    where = path.relative_to(REPO_ROOT).as_posix()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = environment_reads(tree) + mode_channels(tree) + module_state(tree, where)
    return [f"{where}: {problem}" for problem in found]


def test_nothing_below_the_command_layer_reads_the_environment_or_keeps_a_mode() -> None:
    files = below_the_edge()
    assert len(files) > 150  # the walk sees the whole package
    assert [problem for path in files for problem in problems_of(path)] == []


def test_the_walk_finds_each_hidden_channel() -> None:
    source = """
import os
import contextvars
from os import environ
from contextvars import ContextVar

_MODE = contextvars.ContextVar("mode")
_SILENCED = False
_SEEN: dict[str, int] = {}
_TABLE = {"a": 1}

class _Buffer:
    def __init__(self):
        self.data = b""
    def grow(self, n):
        self.data = bytes(n)

_SHARED = _Buffer()

def quiet():
    global _SILENCED
    _SILENCED = True

def remember(key):
    _SEEN[key] = 1
    return os.environ.get("GATES_X"), os.getenv("GATES_Y"), _TABLE["a"]
"""
    tree = ast.parse(source)
    found = environment_reads(tree) + mode_channels(tree) + module_state(tree, "x.py")
    text = "\n".join(found)
    for expected in (
        "os.environ",
        "os.getenv",
        "from os import environ",
        "contextvars",
        "contextvars.ContextVar",
        "global _SILENCED",
        "module-level _SEEN",
        "module-level _SHARED",
    ):
        assert expected in text, expected
    assert "_TABLE" not in text  # a table only read is a constant


def test_the_training_process_reads_the_run_protocol_through_one_module() -> None:
    readers = [
        path.relative_to(REPO_ROOT).as_posix()
        for path in PACKAGE.rglob("*.py")
        if environment_reads(ast.parse(path.read_text(encoding="utf-8")))
    ]
    below = [r for r in readers if not r.startswith(("gates/cli/", "gates/commands/"))]
    assert below == ["gates/core/run_protocol.py"]


def test_the_invocation_takes_options_over_variables() -> None:
    variables = {
        "GATES_SIGNING_KEY": "/keys/ci.key",
        "GATES_TRUST": "/etc/gates/trust.toml",
        "GATES_POLICY_REF": "refs/heads/main",
        "GATES_CACHE_DIR": "/cache",
        "GATES_SANDBOX": "unshare",
        "PADDLE_TRAINER_ID": "1",
        "PADDLE_TRAINERS_NUM": "4",
        "PADDLE_NPROC_PER_NODE": "2",
    }
    from_variables = read_invocation(variables)
    assert from_variables.signing_key == Path("/keys/ci.key")
    assert from_variables.trust == Given(Path("/etc/gates/trust.toml"), "GATES_TRUST")
    assert from_variables.policy_ref == Given("refs/heads/main", "GATES_POLICY_REF")
    assert (from_variables.cache_folder, from_variables.sandbox) == (Path("/cache"), "unshare")
    launcher = from_variables.launcher
    assert (launcher.rank, launcher.world, launcher.local_size, launcher.world_size) == (
        "1",
        "4",
        "2",
        4,
    )
    chosen = read_invocation(
        variables,
        policy_ref="refs/heads/protected",
        trust=Path("/other/trust.toml"),
        verify_all=True,
        checker=CheckerMode(no_receipt=True),
    )
    assert chosen.policy_ref == Given("refs/heads/protected", "--policy-ref")
    assert chosen.trust == Given(Path("/other/trust.toml"), "--trust")
    assert (chosen.caching, chosen.checker.no_receipt) == (None, True)  # --verify-all: no cache


def test_the_invocation_defaults_ask_for_nothing() -> None:
    nothing = read_invocation({"HOME": "/home/u"})
    assert (nothing.signing_key, nothing.trust, nothing.policy_ref) == (None, None, None)
    assert nothing.cache_folder == Path("/home/u/.cache/gates")
    assert read_invocation({"GATES_CACHE_DIR": "off"}).caching is None
    assert read_invocation({"XDG_CACHE_HOME": "/xdg"}).cache_folder == Path("/xdg/gates")
    assert nothing.pre_commit_store is None
    under_hook = read_invocation({"PRE_COMMIT": "1", "PRE_COMMIT_HOME": "/pc"})
    assert under_hook.pre_commit_store == Path("/pc")


def test_progress_is_shown_on_a_terminal_only_and_never_beside_json() -> None:
    assert read_invocation({}, terminal=True).progress.shown
    assert not read_invocation({}, terminal=False).progress.shown
    assert not read_invocation({}, terminal=True, machine_output=True).progress.shown
    assert not read_invocation({"GATES_PROGRESS": "0"}, terminal=True).progress.shown
    assert read_invocation({"GATES_PROGRESS_DELAY": "0.5"}).progress.delay == 0.5
    assert read_invocation({"GATES_PROGRESS_DELAY": "soon"}).progress.delay == 2.0
