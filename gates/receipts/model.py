"""The receipt envelope as a pydantic model (receipts/schemas/receipt.schema.json mirrors it)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StringConstraints,
    model_validator,
)
from pydantic.alias_generators import to_camel

from gates.receipts.kinds import ArtifactKind, EvidenceClass, Framework

__all__ = ["ArtifactKind", "EvidenceClass", "Framework", "Provenance", "Receipt", "Subject"]

RECEIPT_VERSION = "gates.receipt/v1"
RECEIPT_SUFFIX = ".receipt.json"

Sha256Hex = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
ReceiptId = Annotated[str, StringConstraints(pattern=r"^sha256:[0-9a-f]{64}$")]
CommitSha = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{40}([0-9a-f]{24})?$")]
ProfileKey = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*$")]


def _json_integer(value: object) -> object:
    """JSON Schema's `integer`: any number without a fraction (1.0 too), never a bool or string."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("must be a JSON integer")
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError("must be a JSON integer")
        return int(value)
    return value


JsonInt = Annotated[int, BeforeValidator(_json_integer)]


class _Envelope(BaseModel):
    # Not strict=True: strict mode would refuse JSON strings for enums and lists
    # for tuples. Receipts read from disk pass the JSON Schema (strict on types)
    # first, and the scalar fields below use strict types.
    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        alias_generator=to_camel,
        populate_by_name=True,
    )


class Subject(_Envelope):
    """One artifact file: its workspace-relative path, sha256 and size in bytes."""

    path: Annotated[str, StringConstraints(min_length=1)]
    sha256: Sha256Hex
    size: Annotated[JsonInt, Field(ge=0)]


Timestamp = Annotated[str, StringConstraints(pattern=r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")]


IsolationMechanism = Literal["bwrap", "unshare", "none", "recorded"]


class RunIsolation(_Envelope):
    """How a run was isolated (docs/sandbox.md): "none" for `gates run --no-sandbox`,
    "recorded" for a run signed after the fact (no sandbox vouched for it)."""

    mechanism: IsolationMechanism
    version: str = ""
    network: StrictBool = False
    commit: str = ""
    tree: str = ""
    environment: tuple[str, ...] = ()
    inputs: dict[str, str] = Field(default_factory=dict)
    # shown as private writable copies (their files' digests, before, are in `inputs`)
    writable_copies: tuple[str, ...] = ()


class RunRecord(_Envelope):
    """What `gates run` saw of a launch (only in run attestations)."""

    cwd: str
    started_at: Timestamp
    ended_at: Timestamp
    exit_status: JsonInt
    signal: str | None
    isolation: RunIsolation | None = None
    run_id: str | None = None  # the id gates gave the run (GATES_RUN_ID, manifest run_id)


class Signature(_Envelope):
    keyid: str
    sig: str


class Dsse(BaseModel):
    """A DSSE envelope; its field names are the DSSE spec's, not camel-cased ones."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    payload: str
    payloadType: Literal["application/vnd.in-toto+json"]  # noqa: N815  (the spec's name)
    signatures: Annotated[tuple[Signature, ...], Field(min_length=1)]


class Provenance(_Envelope):
    """Where and how the subjects were produced, as seen when the receipt was made."""

    git_head: CommitSha | None
    pin: CommitSha | None
    dirty: StrictBool
    freeze_verdict: Literal["pass", "blocked"]
    freeze_reasons: tuple[str, ...]
    source_tree: Sha256Hex | None
    command: tuple[str, ...] | None = None
    environment: dict[str, str] = Field(default_factory=dict)
    profile: dict[ProfileKey, str] = Field(default_factory=dict)
    inputs: tuple[ReceiptId, ...] = ()
    tool: str
    run: RunRecord | None = None


class Receipt(_Envelope):
    """The envelope: subjects, provenance, and the evidence stamp.

    ``formalWeight`` is 1 exactly when ``evidenceClass`` is ``formal``; a probe
    receipt says why in ``stampReasons``.
    """

    receipt_version: Literal["gates.receipt/v1"]
    id: ReceiptId
    kind: ArtifactKind
    framework: Framework | None
    created_at: Timestamp
    subjects: Annotated[tuple[Subject, ...], Field(min_length=1)]
    provenance: Provenance
    evidence_class: EvidenceClass
    formal_weight: Annotated[Literal[0, 1], BeforeValidator(_json_integer)]
    stamp_reasons: tuple[str, ...]
    attestation: Dsse | None = None

    @model_validator(mode="after")
    def _stamp_is_consistent(self) -> Receipt:
        formal = self.evidence_class is EvidenceClass.FORMAL
        if formal != (self.formal_weight == 1):
            raise ValueError("formalWeight must be 1 for formal receipts and 0 for probe ones")
        if formal and self.provenance.freeze_verdict != "pass":
            raise ValueError("a formal receipt needs freezeVerdict=pass at creation")
        return self
