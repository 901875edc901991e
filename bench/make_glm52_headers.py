"""Write the full-size GLM-5.2 key set as header-only checkpoints (real names and shapes from
the official config.json, no data: each shard's data section is a hole).

Usage: python bench/make_glm52_headers.py OUT [--keep-mtp-indexer]
  OUT/reference  the official HF/torch naming (59,870 tensors, 282 shards)
  OUT/candidate  the PaddleFormers naming and layout (40,330 tensors; the MTP indexer
                 tensors missing, as in the seed PR, unless --keep-mtp-indexer)
Then: gates inventory diff OUT/reference OUT/candidate (with OUT below an external root
or inside the workspace).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from glm52_keyset import load_config, paddle_keyset, reference_keyset, write_header_only


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--keep-mtp-indexer", action="store_true")
    args = parser.parse_args()
    config = load_config()
    reference = reference_keyset(config)
    candidate = paddle_keyset(
        reference, config["num_hidden_layers"], drop_mtp_indexer=not args.keep_mtp_indexer
    )
    for side, keys in (("reference", reference), ("candidate", candidate)):
        shards = write_header_only(args.out / side, keys)
        print(f"{args.out / side}: {len(keys)} tensors in {shards} shards")
    # the official checkpoint ships its config.json: the rules' {mtp} comes from it
    (args.out / "reference" / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
