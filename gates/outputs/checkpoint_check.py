"""`gates.checkpoint_check/v1` (receipts/schemas/checkpoint_check.schema.json):
`gates check checkpoint`, whole (`full`), by slices (`partial`) or slices merged (`merged`)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StrictBool, StrictStr

from gates.outputs.common import COUNT, SHA256, Closed

FORMAT = "gates.checkpoint_check/v1"


class RankShards(Closed):
    rank: COUNT
    shards: list[StrictStr]
    bytes: COUNT


class ShardRange(Closed):
    index: COUNT
    count: Annotated[int, Field(ge=1, strict=True)]
    shards: list[StrictStr]


class Against(Closed):
    """The comparison with a reference checkpoint through the naming rules."""

    reference: StrictStr
    reference_digest: SHA256 | None
    structural_differences: COUNT
    hash_match: StrictBool | None
    mapped_reference_digest: SHA256 | None
    unequal_tensors: list[StrictStr]
    mapping_problems: list[StrictStr]
    #: "<tensor>: <reason>" of each tensor a declaration sets aside (candidate-only, expected
    #: absent), never counted equal
    declared: list[StrictStr] | None = None


class CheckpointCheck(Closed):
    format: Literal["gates.checkpoint_check/v1"]
    mode: Literal["full", "partial", "merged"]
    path: Annotated[str, Field(min_length=1, strict=True)]
    valid: StrictBool
    problems: list[StrictStr]
    hygiene_clean: StrictBool
    hygiene: list[StrictStr]
    incomplete: list[StrictStr] | None = None
    ranks: list[RankShards] | None = None
    tensor_count: COUNT
    shard_count: COUNT
    digest: SHA256 | None
    layout_digest: SHA256
    shard_range: ShardRange | None = None
    tensor_contents: dict[str, SHA256] | None = None
    against: Against | None = None

    @property
    def hash_match(self) -> bool | None:
        """The checker's claim against its reference (None without `--against`)."""
        return self.against.hash_match if self.against else None
