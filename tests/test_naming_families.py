"""The rules applied a family at a time give what the rules applied name by name give: the
same nodes in the same order and the same problems (the first offending tensor named as
before), over seeded random rule sets and name sets, rules that fix a number among them,
and over the full GLM-5.2 key set with the shipped rules."""

from __future__ import annotations

import random
import tomllib

import pytest

from bench.glm52_keyset import load_config, reference_keyset
from gates.naming.by_family import _by_substitution, binds_numbers_alike, expect_by_family, index
from gates.naming.rules import Expectation, RuleSet, expect
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


def outcome(function, reference: Inventory, ruleset: RuleSet) -> object:  # type: ignore[no-untyped-def]
    """The nodes in order and the problems, or the exception (type and text) it raised."""
    try:
        found: Expectation = function(reference, ruleset)
    except Exception as exc:  # noqa: BLE001 - the per-name path's crash must be the same
        return (type(exc).__name__, str(exc))
    return list(found.nodes.items()), found.problems


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


@pytest.mark.slow
def test_the_family_path_equals_the_per_name_path_on_random_rules_and_names() -> None:
    rng = random.Random(2026)  # noqa: S311 - reproducible test inputs
    by_families = 0
    for _ in range(1500):
        reference, rules, placeholders, ruleset = random_case(rng)
        if ruleset is None:
            continue
        by_families += sum(
            binds_numbers_alike(text, placeholders)
            for rule in rules
            for key in ("source", "match", "sources")
            for text in ([rule[key]] if isinstance(rule.get(key), str) else rule.get(key, []))  # type: ignore[attr-defined]
        )
        assert outcome(expect_by_family, reference, ruleset) == outcome(
            expect, reference, ruleset
        ), (rules, placeholders, sorted(reference))
    assert by_families > 1000, "most random rules take the family path"


def test_a_rule_that_fixes_a_number_changes_only_that_member() -> None:
    reference = {f"model.layers.{n}.mlp.up_proj.weight": ("BF16", (2, 3)) for n in range(5)}
    ruleset = RuleSet.model_validate(
        {
            "rules": [
                {"kind": "transpose", "match": "model.layers.3.{rest}"},
                {"kind": "rename", "source": "model.{rest}", "target": "paddle.{rest}"},
            ]
        }
    )
    found = expect_by_family(reference, ruleset)
    assert outcome(expect_by_family, reference, ruleset) == outcome(expect, reference, ruleset)
    shapes = {name: node.shape for name, node in found.nodes.items()}
    assert shapes["paddle.layers.3.mlp.up_proj.weight"] == (3, 2)
    assert shapes["paddle.layers.4.mlp.up_proj.weight"] == (2, 3)


@pytest.mark.parametrize(
    ("names", "sources", "target"),
    [
        (["m.1.w", "m.2.w", "m.x.w"], ["m.{q}.w", "m.x.w"], "m.{q}.f"),  # m.x.w in three
        (["m.1.g", "m.1.u"], ["m.{n}.g", "m.{n}.g"], "m.{n}.f"),  # one tensor twice: a rule problem
        (["m.1.g", "m.1.u", "m.1.f"], ["m.{n}.g", "m.{n}.u"], "m.{n}.f"),  # onto a tensor
        (["m.1.g", "m.1.u", "m.2.g"], ["m.{n}.g", "m.{n}.u"], "m.{n}.u"),  # onto a part
        (["m.1.g", "m.1.u", "m.2.g", "m.2.u"], ["m.{n}.g", "m.{n}.u"], "m.f"),  # two onto one
    ],
)
def test_fusions_that_share_a_tensor_are_left_to_the_per_name_path(
    names: list[str], sources: list[str], target: str
) -> None:
    reference = dict.fromkeys(names, ("BF16", (2, 3)))
    ruleset = RuleSet.model_validate(
        {"rules": [{"kind": "fuse", "sources": sources, "target": target, "axis": 1}]}
    )
    assert outcome(expect_by_family, reference, ruleset) == outcome(expect, reference, ruleset)


@pytest.mark.parametrize(
    ("pattern", "alike"),
    [
        ("{prefix}.mlp.experts.{expert}.up_proj.weight", True),
        ("model.layers.{layer}.{part:mlp|self_attn}.{rest}", True),
        ("model.layers.{mtp}.shared_head.norm.weight", False),  # mtp = 78: fixes a layer
        ("model.layers.3.{rest}", False),
        ("{prefix}{rest}", False),  # where one ends inside a number is the number's
        ("model.layers.x{layer}.weight", False),
        ("{prefix}.{name}.{name}.weight", False),  # compares two numbers
        ("model.{part:mlp|w2}.{rest}", False),
    ],
)
def test_which_patterns_bind_numbers_alike(pattern: str, alike: bool) -> None:
    assert binds_numbers_alike(pattern, {"mtp": "78"}) is alike


@pytest.mark.slow
def test_the_full_size_key_set_through_the_shipped_rules() -> None:
    config = load_config()
    reference = reference_keyset(config)
    ruleset = shipped_rules(str(config["num_hidden_layers"]))
    families = index(list(reference))
    assert families is not None and len(families) < 40, "60,000 names in a few dozen families"
    by_families = [rule.name for rule in ruleset.rules if binds_numbers_alike(_text(rule), {})]
    assert "linear-transpose" in by_families and "ffn-fusion" in by_families
    assert outcome(expect_by_family, reference, ruleset) == outcome(expect, reference, ruleset)


def _text(rule: object) -> str:
    for key in ("source", "match"):
        if isinstance(getattr(rule, key, None), str):
            return str(getattr(rule, key))
    return str(rule.sources[0])  # type: ignore[attr-defined]


def test_a_fusion_that_names_one_tensor_twice_is_a_rule_problem_not_a_crash() -> None:
    reference = dict.fromkeys(["m.1.g", "m.1.u"], ("BF16", (2, 3)))
    ruleset = RuleSet.model_validate(
        {"rules": [{"kind": "fuse", "sources": ["m.{n}.g", "m.{n}.g"], "target": "m.{n}.f"}]}
    )
    for function in (expect, expect_by_family):
        assert function(reference, ruleset).problems == [
            "rule fuse#1: the sources name m.1.g twice; fuse distinct tensors"
        ]


SHAPED_PARTS = ["model", "layers", "experts", "mlp", "w", "", "0", "9", "10", "077", "123456"]


def test_families_by_shape_are_the_substitution_s() -> None:
    """`index` reads a name's family and numbers from its shape (each digit a zero) where
    every digit stands in a part of digits alone: the same families, members, order and
    numbers as the substitution over all names (kept for names like `fc1`)."""
    rng = random.Random(77)  # noqa: S311 - reproducible test inputs
    by_shape = 0
    for _ in range(1500):
        if rng.random() < 0.5:
            names = list(random_inventory(rng))
        else:
            names = [
                ".".join(rng.choice(SHAPED_PARTS) for _ in range(rng.randint(1, 6)))
                for _ in range(rng.randint(1, 30))
            ]
        if rng.random() < 0.1:
            names.append(rng.choice(["fc1.weight", "model.w2", "a.1b.c", "x.b2"]))
        if not names:
            assert index(names) == []
            continue
        found = index(names)
        if found is None:  # a brace, a newline, a non-ASCII character: neither path
            continue
        assert found == _by_substitution(names)
        by_shape += not any(
            any(c.isdigit() for c in p) and not p.isdigit() for n in names for p in n.split(".")
        )
    assert by_shape > 500  # the shape path decided most of them
