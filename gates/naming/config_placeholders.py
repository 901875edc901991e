"""Rule placeholders read from a checkpoint's `config.json` (the Hugging Face layout).

`mtp`, the MTP layer index, is `num_hidden_layers`: the MTP layer follows the
last decoder layer. Read from the reference checkpoint's config.json (else
the candidate's), one contract serves a 2-layer test model and the 78-layer
GLM-5.2. A value the contract sets still wins; when the checkpoint says
otherwise, that is reported as a note. A placeholder the rules use that
neither source sets is a rule problem: an unfixed `{mtp}` would match every
layer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from gates.naming.rules import RuleSet

CONFIG_NAME = "config.json"
#: placeholder -> the config.json key that sets it
FROM_CONFIG = {"mtp": "num_hidden_layers"}


@dataclass(frozen=True)
class Resolved:
    ruleset: RuleSet
    notes: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()


def _config_values(folder: Path, label: str) -> tuple[dict[str, str], str | None]:
    """The placeholders one config.json sets, or a note saying why it cannot be used."""
    path = folder / CONFIG_NAME
    where = f"{label}/{CONFIG_NAME}"
    if path.is_symlink() or not path.is_file():
        return {}, None
    try:
        config = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        return {}, f"{where} is not readable JSON ({exc}); its placeholders are not used"
    if not isinstance(config, dict):
        return {}, f"{where} is not a JSON object; its placeholders are not used"
    values: dict[str, str] = {}
    for placeholder, key in FROM_CONFIG.items():
        value = config.get(key)
        if value is None:
            continue
        if type(value) is not int or value < 0:
            return {}, f"{where}: {key} is {value!r}, not a non-negative integer; not used"
        values[placeholder] = str(value)
    return values, None


def _used(ruleset: RuleSet, placeholder: str) -> bool:
    marker = "{" + placeholder + "}"
    texts = [rule.model_dump_json() for rule in ruleset.rules]
    return any(marker in text for text in texts) or any(
        f"${placeholder.upper()}" in statement for statement in ruleset.aoa
    )


def resolve(ruleset: RuleSet, sides: list[tuple[Path, str]]) -> Resolved:
    """Fill the placeholders the contract leaves open from the first side's config.json that
    sets them (``sides``: (folder, label) of the reference, then the candidate)."""
    notes: list[str] = []
    found: dict[str, tuple[str, str]] = {}  # placeholder -> (value, label)
    for folder, label in sides:
        values, note = _config_values(folder, label)
        if note:
            notes.append(note)
        for placeholder, value in values.items():
            if placeholder not in found:
                found[placeholder] = (value, label)
            elif found[placeholder][0] != value:
                first_value, first_label = found[placeholder]
                notes.append(
                    f"{placeholder}: {first_label}/{CONFIG_NAME} gives {first_value}, "
                    f"{label}/{CONFIG_NAME} gives {value}; using {first_value}"
                )
    placeholders = dict(ruleset.placeholders)
    for placeholder, (value, label) in found.items():
        key = FROM_CONFIG[placeholder]
        contract_value = placeholders.get(placeholder)
        if contract_value is None:
            placeholders[placeholder] = value
        elif contract_value != value:
            notes.append(
                f"{placeholder}: the contract sets {contract_value}, {label}/{CONFIG_NAME} has "
                f"{key} = {value}; using the contract's {contract_value}"
            )
    problems = [
        f"placeholder {{{placeholder}}} is not set: no {CONFIG_NAME} with {key} in the "
        f"checkpoints and no placeholders.{placeholder} in the contract"
        for placeholder, key in FROM_CONFIG.items()
        if placeholder not in placeholders and _used(ruleset, placeholder)
    ]
    updated = ruleset.model_copy(update={"placeholders": placeholders})
    return Resolved(updated, tuple(notes), tuple(problems))
