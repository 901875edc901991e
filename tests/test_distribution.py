"""The distribution's name and version, as the install instructions name them.

"gates" on the package index is an unrelated project: every doc that says how
to install names "gates-align", at the version pyproject builds (the version
the git tag vX.Y.Z names).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import gates

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_the_distribution_is_gates_align_with_the_package_version() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == "gates-align"
    assert project["dynamic"] == ["version"]  # read from gates/__init__.py: one source
    assert project["scripts"]["gates"] == "gates.cli.app:main"
    assert project["scripts"]["audit-source-freeze"] == "gates.commands.freeze_script:run"


def test_no_doc_installs_the_unrelated_gates_package() -> None:
    bare = re.compile(r"pip install (?:-U |--upgrade )?['\"]?gates(?:\[[^\]]*\])?(?:[=<>~ '\"]|$)")
    offenders = [
        f"{doc.relative_to(ROOT)}:{number}: {line.strip()}"
        for doc in DOCS
        for number, line in enumerate(doc.read_text().splitlines(), start=1)
        if bare.search(line)
    ]
    assert offenders == []


def test_every_version_the_docs_name_is_the_package_version() -> None:
    named = re.compile(
        r"gates-align(?:\[[^\]]*\])?==([0-9][0-9.]*)"  # pip install gates-align==X
        r"|rev: v([0-9][0-9.]*)"  # pre-commit
        r"|/gates(?:/[\w./-]+)?@v(\d+\.\d+\.\d+)"  # uses: <org>/gates/...@vX
        r'|GATES_VERSION: "([0-9][0-9.]*)"'  # the GitLab template
        r"|gates-align:([0-9][0-9.]*)"  # the container image's tag
    )
    versions = {
        next(group for group in match.groups() if group)
        for doc in [*DOCS, *sorted((ROOT / "ci").rglob("*")), ROOT / "action.yml"]
        if doc.suffix != ".lock"
        if doc.is_file()
        for match in named.finditer(doc.read_text())
    }
    assert versions == {gates.__version__}
