"""`gates.structure_parity/v1` (receipts/schemas/structure_parity.schema.json):
`gates inventory diff`, both inventories and every difference, classified."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, StrictStr

from gates.outputs.common import COUNT, Closed

FORMAT = "gates.structure_parity/v1"


class Side(Closed):
    path: StrictStr
    tensor_count: COUNT
    valid: bool = Field(strict=True)
    problems: list[StrictStr]


class Counts(Closed):
    naming: COUNT
    layout: COUNT
    dtype: COUNT
    structural: COUNT
    candidate_only: COUNT = 0
    expected_absent: COUNT = 0


class Difference(Closed):
    kind: Literal[
        "naming", "layout", "dtype", "structural", "candidate_only", "expected_absent"
    ] = Field(alias="class")
    reference: list[StrictStr]
    candidate: list[StrictStr]
    rules: list[StrictStr]
    detail: StrictStr


class StructureParity(Closed):
    format: Literal["gates.structure_parity/v1"]
    reference: Side
    candidate: Side
    rules: StrictStr | None
    matched: COUNT
    counts: Counts
    differences: list[Difference]
    rule_problems: list[StrictStr]
    notes: list[StrictStr] | None = None
