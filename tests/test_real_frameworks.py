"""What real model code does to gates, each through the CLI: a framework that writes beside
the weights it reads (PaddleFormers' HF conversion writes `flex-ckpt.auto_generated.metadata`
and a lock there), a consumption probe that dies by a signal, a probe entry that imports
third-party packages lazily (transformers importing torch), and the configuration a probe
records."""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from pathlib import Path

import pytest

from tests.helpers import (
    CPU_PROFILE,
    REPO_ROOT,
    SOURCE_FILES,
    Workspace,
    commit_all,
    declare_entrypoints,
    make_repo,
    profile_args,
    run_gates,
    signed_run,
    write,
)

pytestmark = pytest.mark.slow

EXAMPLE = REPO_ROOT / "examples" / "glm52-minimal"

#: A trainer that reads its weights and, as PaddleFormers' conversion does, writes a
#: metadata file and a lock beside them.
CONVERTER = """import json, os
from pathlib import Path

weights = Path("weights")
data = (weights / "model.safetensors").read_bytes()
(weights / "flex-ckpt.auto_generated.metadata").write_text("{}")
(weights / ".lock").touch()
(Path(os.environ["GATES_RUN_DIR"]) / "read.json").write_text(json.dumps(len(data)))
"""


def _workspace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], files: dict[str, str]
) -> Workspace:
    root = tmp_path / "ws"
    repo = make_repo(root, {**SOURCE_FILES, **files})
    assert run_gates(capsys, "-C", str(root), "init", "--pin", "HEAD").code == 0
    declare_entrypoints(root)
    return Workspace(root, repo, repo.head.commit.hexsha)


def test_weights_the_framework_writes_beside_need_a_writable_copy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    weights = "weights-bytes\n"
    ws = _workspace(
        tmp_path, capsys, {"trainer/convert.py": CONVERTER, "weights/model.safetensors": weights}
    )
    program = (sys.executable, "trainer/convert.py")
    refused = signed_run(ws.root, capsys, "paddle", [], program=program, expect=1)
    assert "Read-only file system" in refused.out + refused.err
    config = ws.root / "gates.toml"
    config.write_text(config.read_text() + '\n[sandbox]\nwritable_copies = ["weights"]\n')
    commit_all(ws.repo, "weights as a writable copy")
    ws.gates(capsys, "freeze", "pin", "HEAD")
    signed_run(ws.root, capsys, "paddle", [], program=program)
    assert json.loads((ws.root / "results/paddle/read.json").read_text()) == len(weights)
    assert not (ws.root / "weights/.lock").exists()  # the copy is private and discarded
    receipt = json.loads((ws.root / "results/paddle/run.receipt.json").read_text())
    isolation = receipt["provenance"]["run"]["isolation"]
    assert isolation["writableCopies"] == ["weights"]
    digest = hashlib.sha256(weights.encode()).hexdigest()
    assert isolation["inputs"] == {"weights/model.safetensors": f"sha256:{digest}"}


def test_a_writable_copy_must_be_in_the_commit_and_outside_the_evidence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = _workspace(tmp_path, capsys, {})
    config = ws.root / "gates.toml"
    base = config.read_text()
    for entry, message in (
        ("nowhere", "writable copy nowhere is neither in the commit under audit nor a declared"),
        ("results/torch", "writable copy results/torch lies in an evidence location"),
        ("../up", "writable copy ../up: give a workspace-relative path"),
    ):
        config.write_text(base + f'\n[sandbox]\nwritable_copies = ["{entry}"]\n')
        result = ws.gates(
            capsys,
            "run",
            "--framework",
            "paddle",
            "--force",
            "--probe",
            *profile_args(CPU_PROFILE),
            "--",
            sys.executable,
            "-c",
            "pass",
        )
        assert result.code == 2 and message in result.err, result.err


SEGFAULT = """import ctypes
import sys

def build():
    sys.stderr.write("Loading weights: 100%|##########| 41/41\\r")
    sys.stderr.write("Loading weights: 100%|##########| 41/41 [00:00<00:00]\\n")
    sys.stderr.write("about to read address 0\\n")
    sys.stderr.flush()
    ctypes.string_at(0)
"""


def test_a_probe_that_segfaults_is_reported_as_the_signal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = _workspace(tmp_path, capsys, {"probes/crash.py": SEGFAULT})
    result = ws.gates(capsys, "probe", "consumed", "probes/crash.py:build")
    assert result.code == 2
    line = result.err.strip()
    assert line.count("\n") == 0, result.err
    assert "the probe ended without a result: killed by SIGSEGV (11)" in line
    assert "its stderr ended: " in line and line.endswith("about to read address 0")
    assert "41/41 [00:00<00:00]" in line and "41/41\r" not in line


LAZY_IMPORTS = """import importlib
import numpy as np

def build():
    first = importlib.import_module("xml.dom.minidom")
    weights = {"w": np.ones(4, np.float32), "unused": np.ones(2, np.float32)}
    def forward():
        # a module of the environment imported during build() and again lazily (as
        # transformers imports torch): the same module object, never a second copy
        assert importlib.import_module("xml.dom.minidom") is first
        return {"logits": weights["w"] * 2, "aux": None}
    return forward, weights, {"sequence_length": 16, "index_topk": 32}
"""


def test_a_probe_keeps_third_party_modules_and_records_its_configuration(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = _workspace(tmp_path, capsys, {"probes/lazy.py": LAZY_IMPORTS})
    result = ws.gates(capsys, "probe", "consumed", "probes/lazy.py:build", "--format", "json")
    assert result.code == 0, result.err
    found = json.loads(result.out)
    assert found["configuration"] == {"sequence_length": 16, "index_topk": 32}
    assert {t["name"]: t["consumed"] for t in found["tensors"]} == {"unused": False, "w": True}
    text = ws.gates(capsys, "probe", "consumed", "probes/lazy.py:build")
    assert "configuration: sequence_length=16, index_topk=32" in text.out


def test_a_probe_configuration_that_is_not_json_scalars_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entry = "import numpy as np\ndef build():\n    return (lambda: np.ones(1)), {}, {'x': [1]}\n"
    ws = _workspace(tmp_path, capsys, {"probes/bad.py": entry})
    result = ws.gates(capsys, "probe", "consumed", "probes/bad.py:build")
    assert result.code == 2 and result.err.count("\n") == 1
    assert "must return its configuration as a mapping of names to numbers" in result.err


REQUIREMENT = """
[[params.probe_requires]]
tensors = "*.indexer.*"
condition = "sequence_length > index_topk"
why = "the DSA indexer selects every key while the sequence is not longer than index_topk"
"""


def _probe_with(example: Path, sequence: int | None) -> None:
    """A probe entry over the example's MTP forward that records the configuration it
    claims (the forward is the same: what the contract reads is the recorded configuration)."""
    recorded = "" if sequence is None else f", {{'sequence_length': {sequence}, 'index_topk': 16}}"
    write(
        example,
        "model/probe_recorded.py",
        f"from probe_mtp import build as mtp\n\ndef build():\n    forward, tensors = mtp()\n"
        f"    return forward, tensors{recorded}\n",
    )


def _inventory(example: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    audit = json.loads(run_gates(capsys, "-C", str(example), "audit", "--format", "json").out)
    contract = next(c for c in audit["contracts"] if c["id"].endswith("tensor-inventory"))
    found: dict[str, object] = next(
        c for c in contract["criteria"] if c["name"] == "no_structural_difference"
    )
    return found


@pytest.mark.parametrize(
    ("sequence", "explained", "reason"),
    [
        (12, False, "the probe ran with sequence_length=12, index_topk=16"),
        (None, False, "the probe recorded no sequence_length"),
        (64, True, "5 expected_absent, not consumed"),
    ],
)
def test_a_probe_not_longer_than_index_topk_explains_no_indexer_tensor(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    sequence: int | None,
    explained: bool,
    reason: str,
) -> None:
    example = tmp_path / "example"
    shutil.copytree(EXAMPLE, example, ignore=shutil.ignore_patterns("__pycache__"))
    contract = example / "contracts/tensor-inventory.toml"
    contract.write_text(contract.read_text() + REQUIREMENT)
    _probe_with(example, sequence)
    repo = make_repo(example, {".gitignore": ".gates/\n__pycache__/\n"})
    commit_all(repo, "example")
    assert run_gates(capsys, "-C", str(example), "freeze", "pin", "HEAD").code == 0
    commit_all(repo, "pin")
    probed = run_gates(
        capsys, "-C", str(example), "probe", "consumed", "model/probe_recorded.py:build"
    )
    assert probed.code == 0, probed.err
    criterion = _inventory(example, capsys)
    assert criterion["met"] is explained, criterion
    assert reason in str(criterion["detail"])
    if not explained:
        assert "missing on the candidate side (expected as model.layers.1.transformer_la" in str(
            criterion["detail"]
        )
        assert "(expected_absent, unexplained: the DSA indexer selects every key" in str(
            criterion["detail"]
        )


def test_a_probe_requirement_that_does_not_parse_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    example = tmp_path / "example"
    shutil.copytree(EXAMPLE, example, ignore=shutil.ignore_patterns("__pycache__"))
    contract = example / "contracts/tensor-inventory.toml"
    contract.write_text(contract.read_text() + REQUIREMENT.replace(" > ", " longer than "))
    repo = make_repo(example, {".gitignore": ".gates/\n__pycache__/\n"})
    commit_all(repo, "example")
    audit = json.loads(run_gates(capsys, "-C", str(example), "audit", "--format", "json").out)
    contract_result = next(c for c in audit["contracts"] if c["id"].endswith("tensor-inventory"))
    assert contract_result["dischargeStatus"] == "error"
    detail = json.dumps(contract_result["criteria"])
    assert "params.probe_requires.0.condition" in detail and "expected NAME OP NAME" in detail
