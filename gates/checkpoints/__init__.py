"""Checkpoints: safetensors headers, file hygiene, canonical hashes, naming rules."""
