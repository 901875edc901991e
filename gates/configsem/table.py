"""The semantics table: for each official key, the candidate attribute(s) carrying its meaning."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
)

from gates.core.errors import ConfigError, UnsafePathError
from gates.core.paths import check_relpath
from gates.core.validation import first_error

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
KeyPath = Annotated[str, StringConstraints(pattern=rf"^{_NAME}(\.{_NAME})*$")]
ClassPath = Annotated[str, StringConstraints(pattern=rf"^{_NAME}(\.{_NAME})*:{_NAME}$")]
PackageName = Annotated[str, StringConstraints(pattern=rf"^{_NAME}$")]
Sha256 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
Revision = Annotated[str, StringConstraints(pattern=r"^([0-9a-f]{40})?$")]

How = Literal["same", "renamed", "derived"]


class KeyRow(BaseModel):
    """One official key: where its meaning lives in the candidate, or why it is ignored."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: KeyPath
    attribute: tuple[KeyPath, ...] = ()
    how: How = "same"
    ignored: Annotated[str, StringConstraints(min_length=1)] | None = None
    note: str = ""

    @field_validator("attribute", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return (value,) if isinstance(value, str) else value


class ImpliedRow(BaseModel):
    """A meaning the official file implies without a key: the attribute must hold ``value``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    attribute: KeyPath
    value: Any
    why: Annotated[str, StringConstraints(min_length=1)]


class Table(BaseModel):
    """The contract's params: the official config, the candidate class and the table."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    official: str = "model/glm52/config.json"
    sha256: Sha256 | None = None
    revision: Revision = ""
    class_path: ClassPath | None = Field(default=None, alias="class")
    source: str = ""
    timeout_s: Annotated[float, Field(gt=0, le=3600)] = 180
    env: tuple[str, ...] = ()
    # more installed packages whose code reads the config (where the model code lives: the
    # candidate's config class in PaddleFormers, its GLM-5 layers in PaddleFleet)
    model_packages: tuple[PackageName, ...] = ()
    keys: tuple[KeyRow, ...] = Field(min_length=1)
    implied: tuple[ImpliedRow, ...] = ()

    def row(self, key: str) -> KeyRow | None:
        return next((row for row in self.keys if row.key == key), None)

    def mapped(self) -> tuple[KeyRow, ...]:
        return tuple(row for row in self.keys if row.ignored is None)

    def attributes(self) -> tuple[str, ...]:
        """Every candidate attribute path the table names, in table order, once."""
        seen: dict[str, None] = {}
        for row in self.mapped():
            seen.update(dict.fromkeys(row.attribute))
        seen.update(dict.fromkeys(row.attribute for row in self.implied))
        return tuple(seen)


def _row_problem(row: KeyRow) -> str | None:
    if row.ignored is not None:
        return "has both `ignored` and `attribute`" if row.attribute else None
    if not row.attribute:
        return "names no `attribute` (or say why it is `ignored`)"
    if row.how == "same" and row.attribute != (row.key,):
        named = ", ".join(row.attribute)
        return f"how = 'same' but the attribute is {named}; say 'renamed' or 'derived'"
    if row.how == "renamed" and row.key in row.attribute:
        return "how = 'renamed' but the attribute has the key's own name"
    return None


def parse_table(raw: dict[str, Any], *, source: str) -> Table:
    """Validate a contract's params as a semantics table; ConfigError names the first problem."""
    try:
        table = Table.model_validate(raw)
    except ValidationError as exc:
        first = first_error(exc, whole="params")
        raise ConfigError(f"params.{first.key}: {first.problem}", file=source) from None
    seen: set[str] = set()
    for index, row in enumerate(table.keys):
        where = f"params.keys[{index}] ({row.key})"
        if row.key in seen:
            raise ConfigError(
                f"{where}: the official key {row.key} is in the table twice", file=source
            )
        seen.add(row.key)
        row_problem = _row_problem(row)
        if row_problem:
            raise ConfigError(f"{where}: {row_problem}", file=source)
    for parent in seen:
        children = [key for key in seen if key.startswith(parent + ".")]
        if children:
            raise ConfigError(
                f"params.keys: {parent} and {children[0]} overlap; map the leaves only",
                file=source,
            )
    try:
        check_relpath(table.official, what="params.official")
        if table.source:
            check_relpath(table.source, what="params.source")
        for path in table.env:
            check_relpath(path, what="params.env")
    except UnsafePathError as exc:
        raise ConfigError(exc.message, file=source) from None
    return table


def leaf_keys(document: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Every key path of a JSON object down to the non-object values: `a.b` -> value.

    An empty object is a leaf of its own.
    """
    leaves: dict[str, Any] = {}
    for key, value in document.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            leaves.update(leaf_keys(value, path + "."))
        else:
            leaves[path] = value
    return leaves


def covering_row(table: Table, leaf: str) -> KeyRow | None:
    """The row whose key is ``leaf`` or one of its parents."""
    parts = leaf.split(".")
    for end in range(len(parts), 0, -1):
        row = table.row(".".join(parts[:end]))
        if row is not None:
            return row
    return None


def lookup(document: dict[str, Any], key: str) -> tuple[bool, Any]:
    """(present, value) of dotted ``key`` in a JSON object."""
    current: Any = document
    for part in key.split("."):
        if not isinstance(current, dict) or part not in current:
            return False, None
        current = current[part]
    return True, current
