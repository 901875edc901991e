"""The options every checker shares: where its receipt goes (-o), a throwaway mode
(--no-receipt) and --force; and the checker's own command line, recorded in its receipt so
that `gates refresh` can re-run it from the recorded inputs."""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import click

from gates.core.echo import Output

F = TypeVar("F", bound=Callable[..., Any])

#: Options that say how to show or write, not what to check: never recorded.
_NOT_RECORDED = ("out", "no_receipt", "force_replace")


def _echo(text: str) -> None:
    click.echo(text)


def _to_output(ctx: click.Context, param: click.Parameter, value: str) -> Output:
    """--format as the output object every command writes through."""
    del ctx, param
    return Output(value, _echo)


class RendererChoice(click.Choice[str]):
    """The `--format` choices of a command: the keys of its renderer map (``where``,
    `module:ATTRIBUTE`), so help and behaviour cannot drift. The module is imported when a
    choice is first needed (the command runs or shows its help), never when the command
    line starts: the CLI loads only the command it runs."""

    def __init__(self, where: str) -> None:
        # imported by name, so only gates' own modules: never a path a workspace could supply
        if not where.startswith("gates."):
            raise ValueError(f"renderer map {where!r} is not one of gates' modules")
        self.where = where
        self._keys: tuple[str, ...] | None = None
        super().__init__(())

    @property
    def choices(self) -> tuple[str, ...]:
        if self._keys is None:
            module, _, attribute = self.where.partition(":")
            renderers: Mapping[str, object] = getattr(importlib.import_module(module), attribute)
            self._keys = tuple(sorted(renderers))
        return self._keys

    @choices.setter
    def choices(self, value: Iterable[str]) -> None:
        del value  # click's __init__ sets them; the map's keys are the choices


def rendered_by(where: str, default: str) -> Callable[[F], F]:
    """--format CHOICE, the choices the keys of the renderer map at ``where``
    (`module:ATTRIBUTE`), handed to the command as ``out`` (an `Output`)."""
    return click.option(
        "--format",
        "out",
        type=RendererChoice(where),
        default=default,
        show_default=True,
        callback=_to_output,
    )


def recorded_argv(ctx: click.Context) -> tuple[str, ...]:
    """The checker's arguments as `gates` parsed them (options that differ from their
    default, then the arguments), e.g. ("check", "loss", "--required-steps", "5", "a", "b")."""
    names: list[str] = []
    current: click.Context | None = ctx
    while current is not None and current.parent is not None:
        names.insert(0, current.info_name or "")
        current = current.parent
    options: list[str] = []
    arguments: list[str] = []
    for param in ctx.command.params:
        if param.name in _NOT_RECORDED or param.name is None:
            continue
        value = ctx.params.get(param.name)
        if isinstance(param, click.Argument):
            if value is not None:
                arguments += [str(v) for v in value] if isinstance(value, tuple) else [str(value)]
            continue
        if not isinstance(param, click.Option) or value in (None, (), False, param.default):
            continue
        flag = max(param.opts, key=len)
        if param.is_flag:
            if value is True:
                options.append(flag)
        elif param.multiple:
            for item in value:
                options += [flag, str(item)]
        else:
            options += [flag, str(value)]
    return (*names, *options, *arguments)


def _workspace_command(ctx: click.Context) -> tuple[str, ...]:
    """`gates -C FOLDER ...` when the checker ran from a subfolder (paths are relative to it)."""
    argv = recorded_argv(ctx)
    root_params = ctx.find_root().params
    folder = Path(root_params.get("directory") or ".")
    prefix: tuple[str, ...] = ("gates",)
    try:
        from gates.workspace.repository import open_workspace

        root = open_workspace(folder).root
        relative = folder.resolve().relative_to(root).as_posix()
    except Exception:  # noqa: BLE001  (no workspace: the checker itself will say so)
        relative = "."
    if relative != ".":
        prefix += ("-C", relative)
    return (*prefix, *argv)


def checker_options(default: str) -> Callable[[F], F]:
    """-o/--output, --no-receipt and --force for a checker command, which gets them as its
    ``checker`` argument (a `CheckerMode`) for its invocation."""

    def decorate(function: F) -> F:
        @click.option(
            "-o",
            "--output",
            metavar="RECEIPT",
            default=default,
            show_default=True,
            help="Receipt path; the checker output goes beside it (.json).",
        )
        @click.option(
            "--no-receipt",
            is_flag=True,
            help="Throwaway check: show the figures, write no output and no receipt.",
        )
        @click.option(
            "--force",
            "force_replace",
            is_flag=True,
            help="Replace the output even by a failed, unsigned or probe one.",
        )
        @functools.wraps(function)
        def wrapper(*args: Any, no_receipt: bool, force_replace: bool, **kwargs: Any) -> Any:
            from gates.core.invocation import CheckerMode

            ctx = click.get_current_context()
            checker = CheckerMode(no_receipt, force_replace, _workspace_command(ctx))
            return function(*args, checker=checker, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate
