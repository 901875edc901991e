"""Reading PaddleFormers AOA statements as naming rules.

A statement maps sources to targets with options (`L` for `model.layers`):

    L.$LAYER_ID.mlp.gate_proj.weight^T, L.$LAYER_ID.mlp.up_proj.weight^T
        -> L.$LAYER_ID.mlp.up_gate_proj.weight, fused_ffn
    L.$LAYER_ID.mlp.gate.weight -> L.$LAYER_ID.mlp.gate.weight, dtype='float32'

`src^T` transposes a source first; several sources fuse into one target
(`axis=N`, or `fused_ffn`: gate then up along the last axis); one source into
several targets splits (`axis=N`); `dtype=` declares a cast. `$LAYER_ID`
becomes `{layer}`, `$EXPERT_ID` `{expert}`, any other `$NAME` `{name}`.
"""

from __future__ import annotations

import re

from gates.naming.rule_kinds import Cast, Fuse, Rename, Rule, RuleError, Split, Transpose

_VARIABLE = re.compile(r"\$([A-Z_][A-Z0-9_]*)")
_KNOWN = {"LAYER_ID": "layer", "EXPERT_ID": "expert"}
_DTYPES = {"float32": "F32", "bfloat16": "BF16", "float16": "F16", "float64": "F64"}


def _pattern(text: str) -> str:
    return _VARIABLE.sub(
        lambda m: "{" + _KNOWN.get(m.group(1), m.group(1).lower()) + "}", text.strip()
    )


def _options(tokens: list[str], statement: str) -> tuple[list[str], dict[str, str]]:
    targets, options = [], {}
    for token in tokens:
        if "=" in token:
            key, _, value = token.partition("=")
            options[key.strip()] = value.strip().strip("'\"")
        elif token == "fused_ffn":  # noqa: S105  (an AOA flag, not a secret)
            options["fused_ffn"] = "true"
        elif token:
            targets.append(_pattern(token))
    if not targets:
        raise RuleError(f"AOA statement has no target: {statement!r}")
    unknown = set(options) - {"axis", "dtype", "fused_ffn"}
    if unknown:
        raise RuleError(f"AOA statement has unknown options {sorted(unknown)}: {statement!r}")
    return targets, options


def parse_statement(statement: str, number: int) -> list[Rule]:
    left, arrow, right = statement.partition("->")
    if not arrow:
        raise RuleError(f"AOA statement {number} has no '->': {statement!r}")
    sources = [token.strip() for token in left.split(",") if token.strip()]
    targets, options = _options([t.strip() for t in right.split(",")], statement)
    tag = f"aoa#{number}"
    rules: list[Rule] = [
        Transpose(kind="transpose", match=_pattern(s.removesuffix("^T")), name=f"{tag} ^T")
        for s in sources
        if s.endswith("^T")
    ]
    names = [_pattern(s.removesuffix("^T")) for s in sources]
    transposed = any(s.endswith("^T") for s in sources)
    axis = int(options["axis"]) if "axis" in options else (1 if transposed else 0)
    if len(names) > 1 and len(targets) == 1:
        rules.append(
            Fuse(kind="fuse", sources=tuple(names), target=targets[0], axis=axis, name=tag)
        )
    elif len(names) == 1 and len(targets) > 1:
        rules.append(
            Split(kind="split", source=names[0], targets=tuple(targets), axis=axis, name=tag)
        )
    elif len(names) == 1 and len(targets) == 1:
        if names[0] != targets[0]:
            rules.append(Rename(kind="rename", source=names[0], target=targets[0], name=tag))
    else:
        raise RuleError(f"AOA statement {number} maps several sources to several targets")
    if "dtype" in options:
        dtype = _DTYPES.get(options["dtype"])
        if dtype is None:
            raise RuleError(f"AOA statement {number}: unknown dtype {options['dtype']!r}")
        rules += [
            Cast(kind="cast", match=target, dtype=dtype, name=f"{tag} dtype") for target in targets
        ]
    return rules


def parse_aoa(statements: tuple[str, ...] | list[str]) -> list[Rule]:
    return [
        rule for number, text in enumerate(statements, 1) for rule in parse_statement(text, number)
    ]
