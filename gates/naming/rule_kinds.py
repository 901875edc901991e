"""The kinds of naming rule, as validated data (see gates/naming/rules.py for their meaning).

The lowest layer of the naming rules: `aoa` builds these from AOA statements
and `rules` applies them; neither is imported here.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt


class RuleError(ValueError):
    """A rule that cannot be compiled or applied as written."""


class _Rule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = ""


class Rename(_Rule):
    kind: Literal["rename"]
    source: str
    target: str


class Transpose(_Rule):
    kind: Literal["transpose"]
    match: str


class Fuse(_Rule):
    kind: Literal["fuse"]
    sources: Annotated[tuple[str, ...], Field(min_length=2)]
    target: str
    axis: StrictInt = 0


class Split(_Rule):
    kind: Literal["split"]
    source: str
    targets: Annotated[tuple[str, ...], Field(min_length=2)]
    axis: StrictInt = 0
    sizes: tuple[StrictInt, ...] | None = None


class Cast(_Rule):
    kind: Literal["cast"]
    match: str
    dtype: str


Rule = Annotated[Rename | Transpose | Fuse | Split | Cast, Field(discriminator="kind")]
