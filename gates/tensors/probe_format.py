"""The consumption probe's output format name (importable without numpy)."""

PROBE_FORMAT = "gates.consumption_probe/v1"
