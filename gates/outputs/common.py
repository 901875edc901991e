"""Pieces the checker output models share."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr

SHA256 = Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{64}$")]
RECEIPT_ID = Annotated[StrictStr, Field(pattern=r"^sha256:[0-9a-f]{64}$")]
COUNT = Annotated[StrictInt, Field(ge=0)]
STEP = Annotated[StrictInt, Field(ge=1)]


class Closed(BaseModel):
    """A part of a document whose schema allows no other keys."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Open(BaseModel):
    """A part of a document whose schema allows other keys beside the ones it names."""

    model_config = ConfigDict(extra="allow", frozen=True)
