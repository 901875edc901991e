"""The naming rules between the reference and the candidate checkpoints: one rule language."""
