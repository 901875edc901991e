"""Small candidate config classes in their own git repositories, for the config-semantics tests.

`src/glmcfg/base.py` is a plain-Python stand-in for a PretrainedConfig (to_dict,
from_dict, to_json_string, from_json_file, save_pretrained, from_pretrained);
`src/glmcfg/configuration.py` is the candidate class, fixed or with one of the
historical bugs; `src/glmcfg/modeling.py` is model code that reads every
attribute of the GLM-5.2 table.
"""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path

import git

from tests.helpers import REPO_ROOT, commit_all, write

OFFICIAL = REPO_ROOT / "examples" / "glm52-minimal" / "model" / "glm52" / "config.json"
OFFICIAL_REL = "model/glm52/config.json"
CLASS = "glmcfg.configuration:GlmMoeDsaConfig"
TABLE = REPO_ROOT / "contracts" / "config-semantics.toml"
REVISION = "b4734de4facf877f85769a911abafc5283eab3d9"

BASE = """\
import copy
import json
import os


class PretrainedConfig:
    model_type = ""
    attribute_map = {}

    def __init__(self, **kwargs):
        for key, value in kwargs.items():
            setattr(self, key, value)

    def to_dict(self):
        out = copy.deepcopy(self.__dict__)
        out["model_type"] = self.model_type
        return out

    @classmethod
    def from_dict(cls, data):
        return cls(**copy.deepcopy(data))

    def to_json_string(self):
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_json_file(cls, path):
        with open(path, encoding="utf-8") as handle:
            return cls.from_dict(json.load(handle))

    def save_pretrained(self, folder):
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as handle:
            handle.write(self.to_json_string())

    @classmethod
    def from_pretrained(cls, folder):
        return cls.from_json_file(os.path.join(folder, "config.json"))
"""

# The candidate class as it should be: every official key an attribute, the RoPE
# base read from rope_parameters, the indexer's interleave under its Paddle name.
FIXED = """\
from glmcfg.base import PretrainedConfig


class GlmMoeDsaConfig(PretrainedConfig):
    model_type = "glm_moe_dsa"

    def __init__(self, rope_parameters=None, indexer_rope_interleave=True, use_qk_norm=True,
                 rope_scaling=None, **kwargs):
        super().__init__(**kwargs)
        default_rope = {"rope_type": "default", "rope_theta": 10000.0}
        self.rope_parameters = dict(rope_parameters or default_rope)
        self.rope_theta = self.rope_parameters["rope_theta"]
        self.indexer_rope_interleave = indexer_rope_interleave
        self.rotary_interleaved = indexer_rope_interleave
        self.use_qk_norm = use_qk_norm
        default_scaling = {"rope_type": "default", "partial_rotary_factor": 0.5}
        self.rope_scaling = dict(rope_scaling or default_scaling)

    def to_dict(self):
        out = super().to_dict()
        for derived in ("rope_theta", "rotary_interleaved"):
            out.pop(derived)
        return out
"""

# Review P1: the official indexer_rope_interleave sits in an extra field nothing
# reads; rotary_interleaved keeps its default.
PARKED = FIXED.replace(
    "        self.indexer_rope_interleave = indexer_rope_interleave\n"
    "        self.rotary_interleaved = indexer_rope_interleave\n",
    "        self.extra_fields = {'indexer_rope_interleave': indexer_rope_interleave}\n"
    "        self.rotary_interleaved = False\n",
)

# CI: rope_scaling's partial_rotary_factor is lost across to_dict -> from_dict
# (to_dict writes rope_scaling = None when it holds the default).
PARTIAL_LOST = FIXED.replace(
    "            out.pop(derived)\n",
    "            out.pop(derived)\n"
    "        if out['rope_scaling'].get('partial_rotary_factor') == 0.5:\n"
    "            out['rope_scaling'] = {'rope_type': 'default'}\n",
)

# The PR-branch revision: save_pretrained writes rope_parameters without
# rope_type; from_pretrained refills the default, so reload looks equal.
TYPE_STRIPPED = FIXED.replace(
    "    def to_dict(self):\n",
    "    def save_pretrained(self, folder):\n"
    "        import json, os\n"
    "        os.makedirs(folder, exist_ok=True)\n"
    "        out = self.to_dict()\n"
    "        out['rope_parameters'] = {'rope_theta': out['rope_parameters']['rope_theta']}\n"
    "        with open(os.path.join(folder, 'config.json'), 'w') as handle:\n"
    "            json.dump(out, handle)\n"
    "\n"
    "    @classmethod\n"
    "    def from_pretrained(cls, folder):\n"
    "        loaded = super().from_pretrained(folder)\n"
    "        loaded.rope_parameters.setdefault('rope_type', 'default')\n"
    "        return loaded\n"
    "\n"
    "    def to_dict(self):\n",
)


def table_attributes() -> list[str]:
    params = tomllib.loads(TABLE.read_text(encoding="utf-8"))["params"]
    names = [attribute for row in params["keys"] for attribute in _listed(row.get("attribute"))]
    return names + [row["attribute"] for row in params["implied"]]


def _listed(value: str | list[str] | None) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else value


def modeling_source(attributes: list[str]) -> str:
    """Model code that reads each attribute (a nested key by a literal subscript)."""
    lines = ["def layer_plan(config):", "    return {"]
    for attribute in attributes:
        first, *rest = attribute.split(".")
        expression = f"config.{first}" + "".join(f"[{part!r}]" for part in rest)
        lines.append(f"        {attribute!r}: {expression},")
    lines += ["    }", ""]
    return "\n".join(lines)


def candidate_files(
    configuration: str, *, unread: tuple[str, ...] = (), also_read: tuple[str, ...] = ()
) -> dict[str, str]:
    attributes = [a for a in table_attributes() if a not in unread] + list(also_read)
    return {
        "src/glmcfg/__init__.py": "",
        "src/glmcfg/base.py": BASE,
        "src/glmcfg/configuration.py": configuration,
        "src/glmcfg/modeling.py": modeling_source(attributes),
        OFFICIAL_REL: OFFICIAL.read_text(encoding="utf-8"),
        ".gitignore": "__pycache__/\n",
    }


def set_files(root: Path, repo: git.Repo, files: dict[str, str]) -> None:
    for relpath, text in files.items():
        write(root, relpath, text)
    commit_all(repo, "candidate")


def table_with(
    root: Path, extra: str, *, name: str = "table.toml", replace: dict[str, str] | None = None
) -> str:
    """A copy of the shipped table with ``extra`` TOML appended (outside contracts/)."""
    text = TABLE.read_text(encoding="utf-8")
    for old, new in (replace or {}).items():
        assert old in text, old
        text = text.replace(old, new)
    path = root / "tables" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n" + extra, encoding="utf-8")
    return f"tables/{name}"


def env_json(framework: str, *, revision: str | None, sha256: str) -> str:
    return json.dumps(
        {
            "framework": framework,
            "framework_version": "3.3.1",
            "device_name": "cpu",
            "weights_loaded": True,
            "revision": revision,
            "model_config_sha256": sha256,
        }
    )


def copy_official(target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(OFFICIAL, target)
