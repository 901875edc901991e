"""A tensor the rules rename and cast is compared a block at a time (`_elementwise`), with
the same result as building the whole expected tensor (`_built`, the path every other tree
takes): on random casts between the float dtypes, both ways, with NaN payloads, infinities,
signed zeros and flipped bits, through `gates check tensors`, blocks of a few elements so
that a tensor spans many."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from gates.safetensors.dtypes import cast
from gates.tensors import compare
from tests.helpers import Workspace, write
from tests.tensorgen import write_dump

REF, CAND = "results/torch", "results/paddle"
FLOATS = ["BF16", "F16", "F32", "F64"]
NUMPY = {"F16": np.float16, "F32": np.float32, "F64": np.float64}
SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, 65504.0, 3.0e38]


def bits(rng: np.random.Generator, dtype: str, count: int) -> np.ndarray:
    """``count`` raw values of ``dtype`` (BF16 as uint16 bit patterns), some special."""
    values = rng.standard_normal(count) * 10.0 ** rng.integers(-3, 4, count)
    specials = rng.random(count) < 0.15
    values[specials] = rng.choice(SPECIAL, int(specials.sum()))
    if dtype == "BF16":
        return (values.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    with np.errstate(over="ignore"):
        return values.astype(NUMPY[dtype])


def spoiled(rng: np.random.Generator, array: np.ndarray) -> np.ndarray:
    """``array`` with a few bits flipped (a NaN's payload, a zero's sign, a low bit)."""
    out = np.ascontiguousarray(array).copy()
    raw = out.view(f"<u{out.itemsize}").reshape(-1)
    for _ in range(int(rng.integers(1, 4))):
        raw[int(rng.integers(raw.size))] ^= raw.dtype.type(1) << raw.dtype.type(
            int(rng.integers(raw.itemsize * 8))
        )
    return out


def case(rng: np.random.Generator) -> tuple[dict[str, Any], dict[str, Any], dict[str, str], str]:
    """Reference and candidate tensors, the candidate's dtypes and the rules: each tensor
    renamed and cast (sometimes twice), the candidate as the frameworks cast it or not."""
    ref: dict[str, Any] = {}
    cand: dict[str, Any] = {}
    dtypes: dict[str, str] = {}
    rules = ""
    for i in range(4):
        source, target = rng.choice(FLOATS), rng.choice(FLOATS)
        count = int(rng.integers(0, 40))
        shape = (count,) if rng.random() < 0.5 else (1, count)
        values = bits(rng, source, count).reshape(shape)
        ref[f"r{i}"] = values
        exact = cast(values.view(f"<u{values.itemsize}"), source, target)
        stored = rng.choice([target, source, rng.choice(FLOATS)]) if rng.random() < 0.3 else target
        if stored != target:
            exact = cast(exact, target, stored) if stored in FLOATS else exact
        candidate = exact.view(f"<u{exact.itemsize}").reshape(shape)
        cand[f"c{i}"] = spoiled(rng, candidate) if rng.random() < 0.5 and count else candidate
        dtypes[f"c{i}"] = stored
        rules += f'[[params.rules]]\nkind = "rename"\nsource = "r{i}"\ntarget = "c{i}"\n'
        rules += f'[[params.rules]]\nkind = "cast"\nmatch = "c{i}"\ndtype = "{target}"\n'
        if rng.random() < 0.3:
            again = rng.choice(FLOATS)
            rules += f'[[params.rules]]\nkind = "cast"\nmatch = "c{i}"\ndtype = "{again}"\n'
    return ref, cand, dtypes, rules


def check(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> tuple[int, Any]:
    result = ws.gates(
        capsys, "check", "tensors", REF, CAND, "--rules", "rules.toml", "--format", "json"
    )
    assert result.out, result.err
    document = json.loads(result.out)
    del document["receipt"]  # each run writes a new one
    return result.code, document


@pytest.mark.slow
def test_block_by_block_equals_the_whole_tensor_built(
    ws: Workspace, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(11)
    compared = equal = 0
    for _ in range(40):
        ref, cand, dtypes, rules = case(rng)
        ref_dtypes = {name: "BF16" for name, a in ref.items() if a.dtype == np.uint16}
        write_dump(ws.root / REF, {1: {"grad": ref}}, dtypes=ref_dtypes, framework="torch")
        raw_cand = {name: a.view(NUMPY_RAW[dtypes[name]]) for name, a in cand.items()}
        write_dump(ws.root / CAND, {1: {"grad": raw_cand}}, dtypes=dtypes)
        write(
            ws.root,
            "rules.toml",
            'id = "x.rules"\ntitle = "t"\ncheck = "tensor_inventory"\ndischarge = "d"\n'
            "[params]\n" + rules,
        )
        with monkeypatch.context() as patched:
            patched.setattr(compare, "BLOCK_BYTES", int(rng.choice([8, 24, 64])))
            blocks = check(ws, capsys)
        with monkeypatch.context() as patched:
            patched.setattr(compare, "ELEMENTWISE_OPS", frozenset({"rename"}))  # casts: built
            whole = check(ws, capsys)
        assert blocks == whole
        compared += sum(1 for u in whole[1]["unequal"] if u.get("reason", "").endswith("differ"))
        equal += whole[1]["totals"]["equal"]
    assert compared >= 50 and equal >= 20  # both outcomes, many times (115 and 42)


#: the candidate's stored numpy dtype, raw: write_dump takes BF16 as uint16 bit patterns
NUMPY_RAW = {"BF16": np.uint16, "F16": np.float16, "F32": np.float32, "F64": np.float64}


def test_a_signalling_nan_is_compared_without_a_warning(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    """numpy warns when a cast meets a signalling NaN (the tests make warnings errors, so
    a warning here is an internal error): under a cast rule, and measuring a difference."""
    signalling = np.array([0x7F800001, 0x3F800000], np.uint32).view(np.float32)
    with np.errstate(invalid="ignore"):
        quieted = signalling.astype(np.float64)  # as the frameworks widen it
    write_dump(ws.root / REF, {1: {"grad": {"r": signalling, "p": signalling}}}, framework="torch")
    other = signalling.copy()
    other.view(np.uint32)[0] = 0x7F800002  # another signalling payload: a difference
    write_dump(ws.root / CAND, {1: {"grad": {"c": quieted, "p": other}}})
    write(
        ws.root,
        "rules.toml",
        'id = "x.rules"\ntitle = "t"\ncheck = "tensor_inventory"\ndischarge = "d"\n[params]\n'
        '[[params.rules]]\nkind = "rename"\nsource = "r"\ntarget = "c"\n'
        '[[params.rules]]\nkind = "cast"\nmatch = "c"\ndtype = "F64"\n',
    )
    code, document = check(ws, capsys)
    assert code == 1
    assert [u["candidate"] for u in document["unequal"]] == ["p"]
    assert document["unequal"][0]["nonfinite_pairs"] == 1
