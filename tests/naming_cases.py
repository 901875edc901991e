"""Naming-rule cases the tests share: the shipped rules, and seeded random inventories and rules
cut from their names."""

from __future__ import annotations

import random
import tomllib

from gates.naming.rules import RuleSet
from tests.helpers import REPO_ROOT

Inventory = dict[str, tuple[str, tuple[int, ...]]]

WORDS = ["model", "layers", "experts", "mlp", "up", "gate", "w", "x", "a"]
NUMBERS = ["0", "1", "2", "10", "007"]
ODD = ["", "l1", "1x", "\u00b2", "{L}", "%s"]
LEAVES = ["weight", "bias", "up_proj.weight", "gate_proj.weight", "down_proj.weight"]


def shipped_rules(mtp: str) -> RuleSet:
    text = (REPO_ROOT / "contracts" / "tensor-inventory.toml").read_text(encoding="utf-8")
    params = tomllib.loads(text)["params"]
    return RuleSet(rules=params["rules"], placeholders={"mtp": mtp})


def random_name(rng: random.Random) -> str:
    parts = ["model", "layers", rng.choice(NUMBERS)]
    if rng.random() < 0.5:
        parts += ["mlp", "experts", rng.choice(NUMBERS)]
    if rng.random() < 0.3:
        parts.append(rng.choice(WORDS + NUMBERS))
    if rng.random() < 0.03:
        parts.insert(rng.randrange(len(parts)), rng.choice(ODD))
    return ".".join([*parts, rng.choice(LEAVES)])


def random_inventory(rng: random.Random) -> Inventory:
    names = {random_name(rng) for _ in range(rng.randint(0, 40))}
    if rng.random() < 0.2:
        names.add("lm_head.weight")
    dims = [1, 2, 3, 4]
    return {
        name: (
            rng.choice(["F32", "BF16"]) if rng.random() < 0.1 else "BF16",
            tuple(rng.choice(dims) for _ in range(rng.choice([2, 2, 2, 1, 3]))),
        )
        # the set sorted first: its own order follows Python's hash seed
        for name in sorted(sorted(names), key=lambda _: rng.random())
    }


def random_pattern(rng: random.Random, names: list[str]) -> str:
    """A pattern cut from one of the names (so that it matches some): parts become
    placeholders, runs of parts `{prefix}` or `{rest}`; now and then a number stays (the
    pattern fixes it), a placeholder repeats, or two run together or sit inside a part."""
    parts = (rng.choice(names) if names else "model.layers.1.weight").split(".")
    pieces: list[str] = []
    index = 0
    while index < len(parts):
        part, roll = parts[index], rng.random()
        if roll < 0.15 and index == 0:
            index = rng.randint(1, len(parts))
            pieces.append("{prefix}")
            continue
        if roll < 0.1 and index > 0:
            pieces.append("{rest}")
            break
        if part.isdigit():
            pieces.append(rng.choice(["{layer}", "{expert}", "{n}", "{mtp}", part, "{name}"]))
        elif roll < 0.4:
            pieces.append(rng.choice(["{name}", f"{{part:{part}|other}}", f"{{w{index}}}"]))
        else:
            pieces.append(part)
        index += 1
    pieces = list(dict.fromkeys(pieces)) if rng.random() < 0.9 else pieces
    text = ".".join(pieces)
    roll = rng.random()
    if roll < 0.05:
        text = text.replace(".", "", 1)  # two placeholders (or a literal) run together
    elif roll < 0.1:
        text += ".{name}.{name}"
    elif roll < 0.15:
        text = text.replace(".{", ".x{", 1)
    return text


def random_target(rng: random.Random, source: str) -> str:
    names = [s for s in source.split(".") if s.startswith("{") and s.endswith("}")]
    kept = [n.split(":")[0] + "}" if ":" in n else n for n in names]
    if rng.random() < 0.1:
        kept.append("{unbound}")
    rng.shuffle(kept)
    return ".".join(["paddle", *kept, rng.choice(["w", "fused"])])


def random_rule(rng: random.Random, names: list[str]) -> dict[str, object]:
    kind = rng.choice(["rename", "rename", "transpose", "cast", "fuse", "fuse", "split"])
    source = random_pattern(rng, names)
    if kind == "rename":
        return {"kind": kind, "source": source, "target": random_target(rng, source)}
    if kind in {"transpose", "cast"}:
        return {"kind": kind, "match": source, **({"dtype": "F32"} if kind == "cast" else {})}
    if kind == "fuse":
        stem = source.removesuffix(".gate_proj.weight").removesuffix(".up_proj.weight")
        sources = [f"{stem}.gate_proj.weight", f"{stem}.up_proj.weight"]
        if rng.random() < 0.2:
            sources = [source, random_pattern(rng, names)]
        target = rng.choice([f"{stem}.up_gate_proj.weight", random_target(rng, stem)])
        return {"kind": kind, "sources": sources, "target": target, "axis": rng.choice([0, 1, 2])}
    return {"kind": kind, "source": source, "targets": [f"{source}.a", f"{source}.b"]}


def random_case(
    rng: random.Random,
) -> tuple[Inventory, list[dict[str, object]], dict[str, str], RuleSet | None]:
    """A random inventory, rules cut from its names and placeholders now and then; the rule
    set None when its rules do not validate."""
    reference = random_inventory(rng)
    rules = [random_rule(rng, list(reference)) for _ in range(rng.randint(1, 5))]
    placeholders = {"mtp": rng.choice(["1", "x", "layers"])} if rng.random() < 0.5 else {}
    try:
        ruleset = RuleSet.model_validate({"rules": rules, "placeholders": placeholders})
    except ValueError:
        return reference, rules, placeholders, None
    return reference, rules, placeholders, ruleset
