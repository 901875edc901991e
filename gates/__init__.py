"""gates: evidence-gated governance for cross-framework training alignment."""

__version__ = "0.3.0"
