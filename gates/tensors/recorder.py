"""The documented import path of the tensor recorder (docs/tensors.md); it lives in
gates.training."""

from gates.training.tensor_recorder import TensorRecorder, receipt_dump

__all__ = ["TensorRecorder", "receipt_dump"]
