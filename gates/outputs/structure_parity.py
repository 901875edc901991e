"""`gates.structure_parity/v1` (receipts/schemas/structure_parity.schema.json):
`gates inventory diff`, both inventories and every difference, classified."""

from __future__ import annotations

from itertools import chain
from operator import itemgetter
from typing import Any, Literal, get_args

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


class Difference(Closed):
    kind: Literal["naming", "layout", "dtype", "structural"] = Field(alias="class")
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


#: a difference's keys as its JSON names them, and the classes it may have
DIFFERENCE_KEYS = tuple(field.alias or name for name, field in Difference.model_fields.items())
CLASSES = frozenset(get_args(Difference.model_fields["kind"].annotation))
_LIST_KEYS = ("reference", "candidate", "rules")


def differences_fit(differences: object) -> bool:
    """True only when ``differences`` surely fits `list[Difference]`: a list of plain dicts
    with exactly `DIFFERENCE_KEYS`, a class in `CLASSES`, lists or tuples of strings (the
    model's lax lists take a tuple; the survey hands over tuples) and a string detail, all
    of the exact types. Checked a column at a time, without a model per difference
    (60,000 of them cost pydantic 0.08 s). False means "ask the model", never "rejected":
    what else pydantic's lax mode takes (a str subclass, `kind` for `class`) goes to
    pydantic, which decides and words the error."""
    columns = _columns(differences)
    if columns is None:
        return False
    strings = (columns["class"], columns["detail"])
    if not set(map(type, chain(*strings))) <= {str} or not set(columns["class"]) <= CLASSES:
        return False
    lists = [columns[key] for key in _LIST_KEYS]
    if not set(map(type, chain(*lists))) <= {list, tuple}:
        return False
    return set(map(type, chain.from_iterable(chain(*lists)))) <= {str}


def _columns(differences: object) -> dict[str, list[Any]] | None:
    """Each key's values, when ``differences`` is a list of plain dicts with exactly the
    keys `DIFFERENCE_KEYS` (as many keys as those, each of them there, each a plain str:
    a key of another type could compare equal to one of them and still be refused by the
    model); else None."""
    if type(differences) is not list or not set(map(type, differences)) <= {dict}:
        return None
    if not set(map(len, differences)) <= {len(DIFFERENCE_KEYS)}:
        return None
    if not set(map(type, chain.from_iterable(differences))) <= {str}:
        return None
    try:
        return {key: list(map(itemgetter(key), differences)) for key in DIFFERENCE_KEYS}
    except KeyError:
        return None
