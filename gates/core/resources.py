"""Where the shipped contract set and JSON Schemas are, installed or in a checkout."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # jsonschema loads on first use: a warm audit validates nothing
    from jsonschema import Draft202012Validator

_PACKAGE = Path(__file__).resolve().parent.parent
_CHECKOUT = _PACKAGE.parent


def _data_dir(packaged: str, in_checkout: str) -> Path:
    installed = _PACKAGE / "_data" / packaged
    return installed if installed.is_dir() else _CHECKOUT / in_checkout


def contracts_dir() -> Path:
    """The default GLM-5.2 contract set (repository `contracts/`)."""
    return _data_dir("contracts", "contracts")


def example_dir() -> Path:
    """The glm52-minimal example workspace that `gates demo` copies."""
    return _data_dir("examples/glm52-minimal", "examples/glm52-minimal")


def real_example_dir() -> Path:
    """The glm5-real example workspace (transformers against PaddleFormers) the demo's real
    port act copies."""
    return _data_dir("examples/glm5-real", "examples/glm5-real")


def schemas_dir() -> Path:
    """The JSON Schemas of the receipt envelope and every artifact kind."""
    return _data_dir("schemas", "receipts/schemas")


@functools.cache
def schema(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((schemas_dir() / f"{name}.schema.json").read_bytes())
    return loaded


@functools.cache
def validator(name: str) -> Draft202012Validator:
    """A compiled validator for ``<name>.schema.json``, built once per process."""
    from jsonschema import Draft202012Validator  # noqa: PLC0415  (slow import, first use only)

    return Draft202012Validator(schema(name))
