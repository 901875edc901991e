"""The names of a training state's parts and files: what the audit reads of step
commitments without importing the numeric code that captures and saves states."""

from __future__ import annotations

PARTS = ("parameters", "optimizer", "rng", "data", "schedule")


def state_file_name(step: int) -> str:
    return f"step-{step:06d}.safetensors"
