"""Step commitments and replay: a run commits, per step, its loss and a digest of its
training state and saves the full state every K steps; `gates replay` re-executes
sampled windows from the saved states and requires the same bits (docs/replay.md)."""
