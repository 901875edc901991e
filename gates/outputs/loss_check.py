"""`gates.loss_check/v1` (receipts/schemas/loss_check.schema.json): `gates check loss REF CAND`
(mode `pair`) and `gates check determinism RUN RUN ...` (mode `determinism`)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StrictBool, StrictFloat, StrictInt, TypeAdapter

from gates.outputs.common import COUNT, RECEIPT_ID, SHA256, STEP, Closed, Open

FORMAT = "gates.loss_check/v1"


class LossInput(Closed):
    """One loss series the check read, and the receipt that bound it (if any)."""

    path: Annotated[str, Field(min_length=1, strict=True)]
    receipt: RECEIPT_ID | None
    steps: STEP
    rounded: StrictBool
    series_sha256: SHA256


class PairCheck(Open):
    """Reference against candidate, step by step."""

    format: Literal["gates.loss_check/v1"]
    mode: Literal["pair"]
    reference: LossInput
    candidate: LossInput
    required_steps: COUNT
    length_match: StrictBool
    enough_steps: StrictBool
    consistent_steps: COUNT
    first_divergence_step: STEP | None
    max_diff: Annotated[StrictInt | StrictFloat, Field(ge=0)]
    max_ulp: COUNT
    ulp_dtype: Literal["float32", "float64"]
    bit_exact_required_steps: StrictBool
    bit_comparable: StrictBool


class DeterminismCheck(Open):
    """Repeats of one side and profile, and whether they are bit-identical."""

    format: Literal["gates.loss_check/v1"]
    mode: Literal["determinism"]
    runs: Annotated[list[LossInput], Field(min_length=2)]
    steps: STEP
    deterministic_steps: COUNT
    first_differing_step: STEP | None
    lengths_match: StrictBool
    rounded: StrictBool
    deterministic: StrictBool
    series_sha256: SHA256 | None


LossCheck = Annotated[PairCheck | DeterminismCheck, Field(discriminator="mode")]
LOSS_CHECK: TypeAdapter[PairCheck | DeterminismCheck] = TypeAdapter(LossCheck)
