"""The warm path's walk in C (gates/_walk.c) against its Python reference
(gates.fastpath.python_tree_rows): the same rows, byte for byte, and the same newest
timestamp, on random trees; or the same refusal."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gates import fastpath
from tests.helpers import needs_compiler

try:
    from gates import _walk as native
except ImportError:  # no C compiler at install: test_the_install_built_the_c_walk says more
    native = None
needs_native = pytest.mark.skipif(
    native is None, reason="gates/_walk.c was not compiled at install (no C compiler)"
)

#: names that sort against each other in every way: prefixes, dots, case, non-ASCII, and
#: bytes that are not UTF-8 (the file system's names are bytes)
NAMES = st.sampled_from(
    [
        *(b"a", b"ab", b"a.b", b"a0", b"B", b"z", b" sp ace", b"__pycache__", b".git"),
        *(b"\xc3\xa9t\xc3\xa9", b"\xff", b"x\x80y", b"step00001.json", b"step00001.receipt.json"),
    ]
)
#: times around now, long ago, before 1970 and past what 64 bits of nanoseconds hold
TIMES = st.one_of(
    st.integers(-(10**18), 10**18),
    st.sampled_from([-(2**63), -(2**63) + 1, 2**63 - 1]),
    st.integers(2**63 - 10**9, 2**63 + 10**9),
    st.just(1_700_000_000_123_456_789),
)
KINDS = st.sampled_from(["file"] * 4 + ["folder"] * 3 + ["link", "dangling", "folder-link"])


@st.composite
def trees(draw: st.DrawFn) -> list[tuple[str, tuple[bytes, ...], int]]:
    """(kind, path, mtime) entries, each below a folder made before it."""
    made: list[tuple[str, tuple[bytes, ...], int]] = []
    folders: list[tuple[bytes, ...]] = [()]
    for _ in range(draw(st.integers(0, 14))):
        parent = draw(st.sampled_from(folders))
        path = (*parent, draw(NAMES))
        if any(entry[1] == path for entry in made):
            continue
        kind = draw(KINDS)
        made.append((kind, path, draw(TIMES)))
        if kind == "folder":
            folders.append(path)
    return made


def build(root: Path, entries: list[tuple[str, tuple[bytes, ...], int]]) -> None:
    """The entries under ``root``: a name's bytes as the file system's (a name that is not
    UTF-8 stays its bytes through os.fsdecode's surrogateescape)."""
    target = root / "target-file"
    for kind, parts, mtime in entries:
        path = root.joinpath(*map(os.fsdecode, parts))
        if kind == "folder":
            path.mkdir()
            continue
        if kind == "file":
            path.write_bytes(b"x" * (mtime % 7))
        elif kind == "link":
            if not target.exists():
                target.write_bytes(b"t")
            path.symlink_to(target)
        elif kind == "dangling":
            path.symlink_to("nowhere")
        else:
            path.symlink_to(root)  # a symlinked folder: both refuse the tree
        with contextlib.suppress(OSError, OverflowError, ValueError):  # a time not held here
            os.utime(path, ns=(mtime, mtime), follow_symlinks=False)


def both(top: str, skip_top: str, skip_all: str, skip: tuple[str, ...]) -> list[object]:
    """Each walk's (rows, newest) or that it refused the tree, with and without the files'
    times. Where a tree has two reasons to refuse, the walks may name either (Python's
    the first in the listing's order, C's the first by name): each must name one under it."""
    seen: list[object] = []
    for walk in (fastpath.python_tree_rows, fastpath.tree_rows):
        for track_newest in (True, False):
            try:
                seen.append(walk(top, skip_top, skip_all, skip, track_newest=track_newest))
            except fastpath.IneligibleError as exc:
                assert str(exc).startswith(top), exc
                assert str(exc).endswith(("a symlinked folder", "beyond 64 bits")), exc
                seen.append("refused")
    return seen


@needs_native
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    entries=trees(),
    skip_top=st.sampled_from(["", ".git", "a"]),
    skip_all=st.sampled_from(["", "__pycache__", "ab"]),
    skipped=st.sets(st.sampled_from(["a", "ab", "a/a", "z/B", "é" + "té"])),
)
def test_the_c_walk_gives_the_python_rows(
    entries: list[tuple[str, tuple[bytes, ...], int]],
    skip_top: str,
    skip_all: str,
    skipped: set[str],
) -> None:
    assert fastpath._native_tree_rows is native.tree_rows, "the warm path uses the C walk"
    with tempfile.TemporaryDirectory() as folder:
        build(Path(folder), entries)
        python_tracked, python_plain, c_tracked, c_plain = both(
            folder, skip_top, skip_all, tuple(sorted(skipped))
        )
    assert c_tracked == python_tracked
    assert c_plain == python_plain


@needs_native
def test_a_workspace_walks_the_same_in_c_and_in_python(tmp_path: Path) -> None:
    """A few thousand files in folders of hundreds, as a run's receipts lie."""
    for run in range(3):
        folder = tmp_path / f"results/run{run}"
        folder.mkdir(parents=True)
        for step in range(700):
            (folder / f"step{step:05d}.json").write_text("{}")
            (folder / f"step{step:05d}.receipt.json").write_text("{}")
    (tmp_path / ".git").mkdir()
    (tmp_path / "results/run1/link.json").symlink_to(tmp_path / "results/run0/step00001.json")
    c, python = (
        walk(str(tmp_path), ".git", "", ("results/run2",), track_newest=True)
        for walk in (fastpath.tree_rows, fastpath.python_tree_rows)
    )
    assert c == python
    assert c[0].count(b".receipt.json\0f") == 2 * 700  # run2 is named, not entered


@needs_native
def test_a_link_whose_path_is_longer_than_the_kernel_takes_keys_its_target(
    tmp_path: Path,
) -> None:
    """The link's folder opens (its path is under PATH_MAX) but the link's own path is over
    it: both walks resolve the link from its folder and key its target, none takes it for
    a dangling one (the Python walk did, by its whole path)."""
    folder = tmp_path
    while len(os.fsencode(folder)) < 4096 - 300:
        folder = folder / ("d" * 200)
        folder.mkdir()
    target = tmp_path / "target.json"
    target.write_text("{}")
    link = folder / ("l" * 250)
    handle = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:  # made from its folder: by its whole path the kernel refuses it
        os.symlink(target, link.name, dir_fd=handle)
    finally:
        os.close(handle)
    assert len(os.fsencode(link)) > 4096
    c, python = (
        walk(str(tmp_path), "", "", (), track_newest=True)
        for walk in (fastpath.tree_rows, fastpath.python_tree_rows)
    )
    assert c == python
    assert b"l" * 250 + b"\0f" in c[0]
    assert c[0].count(b"\0/") == folder.relative_to(tmp_path).as_posix().count("/") + 1
    row = c[0].split(b"l" * 250, 1)[1]
    assert row[38:39] == b"t"  # the target's key follows the link's own


@needs_native
def test_an_unreadable_top_is_refused_alike(tmp_path: Path) -> None:
    missing = str(tmp_path / "gone")
    refusals = []
    for walk in (fastpath.tree_rows, fastpath.python_tree_rows):
        with pytest.raises(fastpath.IneligibleError) as raised:
            walk(missing, "", "", (), track_newest=False)
        refusals.append(str(raised.value))
    assert refusals == [f"{missing}: unreadable"] * 2


@needs_compiler
def test_the_install_built_the_c_walk() -> None:
    """Where the interpreter's C compiler is, `make` installs gates with its walk in C
    (hatch_build.py); a build that silently fell back would leave the warm audit slow."""
    assert native is not None, "gates._walk did not build: see pip's output for hatch_build.py"
    assert fastpath._native_tree_rows is native.tree_rows
    assert Path(native.__file__).parent == Path(fastpath.__file__).parent
