"""The kinds of naming rule, as validated data (see gates/naming/rules.py for their meaning),
and the declarations that stand beside them (tensors only the candidate has, activation
pairs that cannot be compared).

The lowest layer of the naming rules: `aoa` builds these from AOA statements
and `rules` applies them; neither is imported here.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StringConstraints


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
    """Permute the axes of the tensors matching ``match``: ``axes`` is the permutation (the
    result's axis i is the source's axis ``axes[i]``, numpy's `transpose`); without it, a
    2-D tensor swaps its two axes (torch `[out, in]` against Paddle `[in, out]`)."""

    kind: Literal["transpose"]
    match: str
    axes: tuple[StrictInt, ...] | None = None


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


class Stack(_Rule):
    """The tensors matching ``source`` that differ only in the placeholder ``index`` (a
    number: 0, 1, ... with none missing) stacked, in the order of their index, along a new
    axis ``axis`` into ``target`` (which does not use ``index``): per-expert Linears into
    one 3-D expert tensor."""

    kind: Literal["stack"]
    source: str
    target: str
    index: Annotated[str, StringConstraints(pattern=r"^[a-z_][a-z0-9_]*$")] = "expert"
    axis: StrictInt = 0


class Unstack(_Rule):
    """Each tensor matching ``source`` cut along ``axis`` into one tensor per position, that
    axis removed, named by ``target`` with the position as the placeholder ``index``: one
    3-D expert tensor into per-expert Linears."""

    kind: Literal["unstack"]
    source: str
    target: str
    index: Annotated[str, StringConstraints(pattern=r"^[a-z_][a-z0-9_]*$")] = "expert"
    axis: StrictInt = 0


class Reshape(_Rule):
    """The tensors matching ``match`` take ``shape`` (one dimension may be -1: whatever the
    element count leaves); the element order is kept (row-major)."""

    kind: Literal["reshape"]
    match: str
    shape: Annotated[tuple[StrictInt, ...], Field(min_length=1)]


Rule = Annotated[
    Rename | Transpose | Fuse | Split | Cast | Stack | Unstack | Reshape,
    Field(discriminator="kind"),
]

Reason = Annotated[str, StringConstraints(min_length=1, strip_whitespace=True)]


class CandidateOnly(BaseModel):
    """Candidate tensors (names matching ``match``, a pattern) that no reference tensor
    accounts for on purpose, and why. Shown with the reason in every report; never a
    structural difference, never counted as explained by a rule."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    match: str
    reason: Reason


class NotComparable(BaseModel):
    """A reference tensor and the candidate tensor it maps to that hold different things
    (router logits against top-k indices): shown with the reason, never compared, never
    counted equal and never explained. Both names are patterns after the rules."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    reference: str
    candidate: str
    reason: Reason
