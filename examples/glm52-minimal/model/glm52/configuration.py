"""The candidate's GLM-5.2 config class: the official config.json as the Paddle model reads it.

Every official key is kept as an attribute of its own name (and written back
by save_pretrained), and three meanings are carried where the Paddle model
code (plan.py) reads them: the RoPE base from rope_parameters, the DSA
indexer's RoPE layout under the Paddle name rotary_interleaved, and q/k
normalization, which GLM-5.2 always applies.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, ClassVar

CONFIG_NAME = "config.json"
DERIVED = ("rope_theta", "rotary_interleaved")


class GlmMoeDsaConfig:
    model_type = "glm_moe_dsa"
    attribute_map: ClassVar[dict[str, str]] = {}

    def __init__(
        self,
        rope_parameters: dict[str, Any] | None = None,
        indexer_rope_interleave: bool = True,
        use_qk_norm: bool = True,
        **kwargs: Any,
    ) -> None:
        for key, value in kwargs.items():
            setattr(self, key, value)
        self.rope_parameters = dict(rope_parameters or {"rope_type": "default", "rope_theta": 1e4})
        self.rope_theta = self.rope_parameters["rope_theta"]
        # The official file names the indexer's RoPE layout indexer_rope_interleave;
        # the Paddle indexer reads rotary_interleaved.
        self.indexer_rope_interleave = indexer_rope_interleave
        self.rotary_interleaved = indexer_rope_interleave
        self.use_qk_norm = use_qk_norm

    def to_dict(self) -> dict[str, Any]:
        out = {k: copy.deepcopy(v) for k, v in vars(self).items() if k not in DERIVED}
        out["model_type"] = self.model_type
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GlmMoeDsaConfig:
        return cls(**copy.deepcopy(data))

    def to_json_string(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json_file(cls, path: str) -> GlmMoeDsaConfig:
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))

    def save_pretrained(self, folder: str) -> None:
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / CONFIG_NAME).write_text(self.to_json_string(), encoding="utf-8")

    @classmethod
    def from_pretrained(cls, folder: str) -> GlmMoeDsaConfig:
        return cls.from_json_file(str(Path(folder) / CONFIG_NAME))
