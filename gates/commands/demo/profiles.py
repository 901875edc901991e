"""The training profile both examples' runs are made and judged under (CPU, one rank)."""

PROFILE = {
    "name": "minimum_complete",
    "mode": "optimizer",
    "device": "cpu",
    "dtype": "float32",
    "tp": "1",
    "pp": "1",
    "ep": "1",
    "etp": "1",
    "sp": "false",
    "world": "1",
}
