"""The static read analysis of `gates check config`, differentially against a full ast walk.

The scanner parses only the files a regular expression marks as possibly reading
a name; the reference parses every file. On generated modules (reads, stores,
comments, strings, getattr, subscripts, .get) both must find the same first
read of every name, in the same file and line.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gates.configsem.reads import Read, SourceIndex, module_reads

NAMES = ["rope_theta", "rope_type", "index_topk", "index_topk_freq", "hidden_size", "dtype"]

FORMS = [
    "value = config.{name}",  # attribute load
    "config.{name} = 1",  # store: not a read
    "config . {name}",  # spaced load
    "value = getattr(config, '{name}')",
    'value = getattr(config, "{name}", None)',
    "value = config.rope_parameters.get('{name}')",
    'value = config.rope_parameters["{name}"]',
    'config.rope_parameters["{name}"] = 2',  # store: not a read
    "# config.{name} in a comment",
    "text = 'config.{name} in a string'",
    "del config.{name}",
    "value = f'{{config.{name}}}'",
    "def {name}(self):\n    return 0",
    "class K:\n    {name} = 3",
    "value = config.{name}_suffix",
    "value = config.prefix_{name}",
    "x = [config.hidden_size for config in []]",
    "if (",  # a file that is not valid Python: its reads do not count
]

lines = st.tuples(st.sampled_from(FORMS), st.sampled_from(NAMES)).map(
    lambda pair: pair[0].format(name=pair[1])
)
modules = st.lists(lines, max_size=12).map("\n".join)
trees = st.dictionaries(
    st.sampled_from(["a.py", "pkg/b.py", "pkg/c.py", "pkg/sub/d.py", "z.py"]), modules, max_size=5
)


def reference(texts: dict[str, str], names: list[str], exclude: str | None) -> dict[str, Read]:
    found: dict[str, Read] = {}
    for relpath, text in texts.items():
        if relpath == exclude:
            continue
        try:
            reads = module_reads(ast.parse(text))
        except SyntaxError:
            continue
        for name in names:
            if name in reads and name not in found:
                found[name] = Read(relpath, reads[name])
    return found


@settings(max_examples=150, deadline=None)
@given(
    texts=trees,
    names=st.lists(st.sampled_from(NAMES), min_size=1, unique=True),
    exclude=st.sampled_from([None, "a.py", "pkg/b.py"]),
)
@pytest.mark.slow
def test_the_scanner_finds_exactly_what_a_full_ast_walk_finds(
    texts: dict[str, str], names: list[str], exclude: str | None
) -> None:
    ordered = dict(sorted(texts.items()))
    index = SourceIndex(Path(), texts=ordered)
    assert index.find(names, exclude=exclude) == reference(ordered, names, exclude)


def test_reads_stores_and_look_alikes(tmp_path: Path) -> None:
    source = "\n".join(
        [
            "config.rope_theta = 8e6",  # 1: store
            "# config.index_topk",  # 2: comment
            "doc = 'config.dtype'",  # 3: string
            "a = config.hidden_size",  # 4: read
            "b = getattr(config, 'index_topk')",  # 5: read
            "c = config.rope_parameters['rope_type']",  # 6: read of a nested key
            "d = config.rope_theta_scaled",  # 7: another name
        ]
    )
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "modeling.py").write_text(source + "\n")
    (tmp_path / "pkg" / "configuration.py").write_text("x = config.dtype\n")
    index = SourceIndex.load(tmp_path)
    found = index.find(
        ["rope_theta", "index_topk", "dtype", "hidden_size", "rope_type"],
        exclude="pkg/configuration.py",
    )
    assert {name: read.where() for name, read in found.items()} == {
        "hidden_size": "pkg/modeling.py:4",
        "index_topk": "pkg/modeling.py:5",
        "rope_type": "pkg/modeling.py:6",
    }
