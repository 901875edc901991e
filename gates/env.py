"""The documented import path of the environment capture (docs/paddle.md); it lives in
gates.training."""

from gates.training.env import capture

__all__ = ["capture"]
