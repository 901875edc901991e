"""Reading PaddleFormers AOA statements as naming rules.

A statement maps sources to targets with options (`L` for `model.layers`):

    L.$LAYER_ID.mlp.gate_proj.weight^T, L.$LAYER_ID.mlp.up_proj.weight^T
        -> L.$LAYER_ID.mlp.up_gate_proj.weight, fused_ffn
    L.$LAYER_ID.mlp.gate.weight -> L.$LAYER_ID.mlp.gate.weight, dtype='float32'
    L.$LAYER_ID.self_attn.q_proj.weight^T, L.$LAYER_ID.self_attn.k_proj.weight^T,
    L.$LAYER_ID.self_attn.v_proj.weight^T -> L.$LAYER_ID.self_attn.qkv_proj.weight,
        fused_qkv, num_heads=32, num_key_value_groups=8

`src^T` transposes a source first; several sources fuse into one target and one
source into several targets splits, along `axis=N` (1 when not given, as in Paddle's
AOA engine); `fused_ffn` fuses gate then up; `dtype=` declares a cast; `permute='[..]'`
permutes a source's axes. `fused_qkv` with `num_heads=H, num_key_value_groups=G` fuses
q, k and v as Paddle lays them out: for each of the G key-value groups its H/G query
heads, then its key head, then its value head (q cut in H equal parts along the axis,
k and v in G); `fused -> q, k, v` with the same options is the inverse. `$LAYER_ID`
becomes `{layer}`, `$EXPERT_ID` `{expert}`, any other `$NAME` `{name}`.
"""

from __future__ import annotations

import re

from gates.naming.rule_kinds import Cast, Fuse, Rename, Rule, RuleError, Split, Transpose

_VARIABLE = re.compile(r"\$([A-Z_][A-Z0-9_]*)")
_KNOWN = {"LAYER_ID": "layer", "EXPERT_ID": "expert"}
_DTYPES = {"float32": "F32", "bfloat16": "BF16", "float16": "F16", "float64": "F64"}
_FLAGS = ("fused_ffn", "fused_qkv")
_VALUED = ("axis", "dtype", "num_heads", "num_key_value_groups", "permute")
_PERMUTATION = re.compile(r"^\[\s*(\d+(\s*,\s*\d+)*)?\s*\]$")


def _pattern(text: str) -> str:
    return _VARIABLE.sub(
        lambda m: "{" + _KNOWN.get(m.group(1), m.group(1).lower()) + "}", text.strip()
    )


def _split_top(text: str) -> list[str]:
    """``text`` cut at its commas, except inside brackets (`permute='[1, 0]'`)."""
    tokens: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == "," and depth == 0:
            tokens.append("".join(current))
            current = []
        else:
            current.append(char)
    tokens.append("".join(current))
    return [token.strip() for token in tokens]


def _options(tokens: list[str], statement: str) -> tuple[list[str], dict[str, str]]:
    targets, options = [], {}
    for token in tokens:
        if "=" in token:
            key, _, value = token.partition("=")
            options[key.strip()] = value.strip().strip("'\"")
        elif token in _FLAGS:
            options[token] = "true"
        elif token:
            targets.append(_pattern(token))
    if not targets:
        raise RuleError(f"AOA statement has no target: {statement!r}")
    unknown = set(options) - {*_FLAGS, *_VALUED}
    if unknown:
        raise RuleError(
            f"AOA statement has unknown options {sorted(unknown)} (known: "
            f"{', '.join(sorted((*_FLAGS, *_VALUED)))}): {statement!r}"
        )
    return targets, options


def _integer(options: dict[str, str], key: str, number: int) -> int:
    value = options[key]
    try:
        return int(value)
    except ValueError:
        raise RuleError(f"AOA statement {number}: {key}={value!r} is not an integer") from None


def _permutation(text: str, number: int) -> tuple[int, ...] | None:
    """The axes of `permute='[...]'` (None for `[]`: swap the two axes of a 2-D tensor)."""
    found = _PERMUTATION.match(text.strip())
    if found is None:
        raise RuleError(f"AOA statement {number}: permute={text!r} is not a list of axes")
    if not found.group(1):
        return None
    return tuple(int(part) for part in found.group(1).split(","))


def parse_statement(statement: str, number: int) -> list[Rule]:
    left, arrow, right = statement.partition("->")
    if not arrow:
        raise RuleError(f"AOA statement {number} has no '->': {statement!r}")
    sources = [token for token in _split_top(left) if token]
    targets, options = _options(_split_top(right), statement)
    tag = f"aoa#{number}"
    axes = _permutation(options["permute"], number) if "permute" in options else None
    names = [_pattern(s.removesuffix("^T")) for s in sources]
    rules: list[Rule] = [
        Transpose(kind="transpose", match=name, name=f"{tag} ^T")
        for source, name in zip(sources, names, strict=True)
        if source.endswith("^T")
    ]
    if "permute" in options:
        rules += [
            Transpose(kind="transpose", match=name, axes=axes, name=f"{tag} permute")
            for name in names
        ]
    axis = _integer(options, "axis", number) if "axis" in options else 1
    if "fused_qkv" in options:
        rules += _fused_qkv(names, targets, options, axis, number)
    elif {"num_heads", "num_key_value_groups"} & set(options):
        raise RuleError(
            f"AOA statement {number}: num_heads and num_key_value_groups belong to fused_qkv"
        )
    elif len(names) > 1 and len(targets) == 1:
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


def _fused_qkv(
    sources: list[str], targets: list[str], options: dict[str, str], axis: int, number: int
) -> list[Rule]:
    """q, k, v -> fused (or fused -> q, k, v) in Paddle's grouped order, as splits and a
    fusion: each of q, k and v cut into heads (parts named `<source>#qkv.<i>`), then the
    parts concatenated group by group."""
    tag = f"aoa#{number}"
    missing = [key for key in ("num_heads", "num_key_value_groups") if key not in options]
    if missing:
        raise RuleError(f"AOA statement {number}: fused_qkv needs {' and '.join(missing)}")
    heads = _integer(options, "num_heads", number)
    groups = _integer(options, "num_key_value_groups", number)
    if heads <= 0 or groups <= 0 or heads % groups:
        raise RuleError(
            f"AOA statement {number}: num_heads ({heads}) must be a positive multiple of "
            f"num_key_value_groups ({groups})"
        )
    if len(sources) == 3 and len(targets) == 1:
        q, k, v = sources
        fused, merging = targets[0], True
    elif len(sources) == 1 and len(targets) == 3:
        q, k, v = targets
        fused, merging = sources[0], False
    else:
        raise RuleError(
            f"AOA statement {number}: fused_qkv maps q, k, v to one tensor or one to q, k, v"
        )
    parts = {
        name: [f"{name}#qkv.{i}" for i in range(count)]
        for name, count in ((q, heads), (k, groups), (v, groups))
    }
    per_group = heads // groups
    order = [
        part
        for group in range(groups)
        for part in (
            *parts[q][group * per_group : (group + 1) * per_group],
            parts[k][group],
            parts[v][group],
        )
    ]
    rules: list[Rule] = []
    if merging:
        for name, pieces in parts.items():
            rules.append(_cut(name, pieces, axis, f"{tag} heads"))
        rules.append(Fuse(kind="fuse", sources=tuple(order), target=fused, axis=axis, name=tag))
        return rules
    rules.append(Split(kind="split", source=fused, targets=tuple(order), axis=axis, name=tag))
    for name, pieces in parts.items():
        rules.append(_joined(pieces, name, axis, f"{tag} heads"))
    return rules


def _cut(source: str, pieces: list[str], axis: int, tag: str) -> Rule:
    if len(pieces) == 1:
        return Rename(kind="rename", source=source, target=pieces[0], name=tag)
    return Split(kind="split", source=source, targets=tuple(pieces), axis=axis, name=tag)


def _joined(pieces: list[str], target: str, axis: int, tag: str) -> Rule:
    if len(pieces) == 1:
        return Rename(kind="rename", source=pieces[0], target=target, name=tag)
    return Fuse(kind="fuse", sources=tuple(pieces), target=target, axis=axis, name=tag)


def parse_aoa(statements: tuple[str, ...] | list[str]) -> list[Rule]:
    return [
        rule for number, text in enumerate(statements, 1) for rule in parse_statement(text, number)
    ]
