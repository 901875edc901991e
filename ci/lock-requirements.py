"""Write ci/requirements.lock: gates' runtime dependencies, pinned, with sha256 hashes.

    python3.11 ci/lock-requirements.py     # on x86_64 Linux, as GitHub's ubuntu-latest runs

pip resolves the dependencies of pyproject.toml without installing them
(`pip install --dry-run --report`) and the report names each file with its
sha256. The composite action installs them with `pip install --require-hashes`
(docs/ci.md). The hashes hold for the platform and Python the lock was made on.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "ci" / "requirements.lock"


def main() -> int:
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "report.json"
        command = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed"]
        command += ["--quiet", "--report", str(report), *dependencies]
        subprocess.run(command, check=True)
        installs = json.loads(report.read_text())["install"]
    lines = [
        "# gates' runtime dependencies, hash-locked; written by ci/lock-requirements.py for",
        f"# CPython {sys.version_info.major}.{sys.version_info.minor} on {sys.platform}"
        " x86_64. Do not edit: rerun the script.",
    ]
    for item in sorted(installs, key=lambda i: str(i["metadata"]["name"]).lower()):
        name, version = item["metadata"]["name"], item["metadata"]["version"]
        sha256 = item["download_info"]["archive_info"]["hashes"]["sha256"]
        lines.append(f"{name}=={version} \\\n    --hash=sha256:{sha256}")
    LOCK.write_text("\n".join(lines) + "\n")
    print(f"{LOCK.relative_to(ROOT)}: {len(installs)} packages")
    return 0


if __name__ == "__main__":
    sys.exit(main())
