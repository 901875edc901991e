"""Tensor dumps: named tensors per step, written by the recorders, compared bit for bit."""
