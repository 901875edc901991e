"""The trust layer: signing keys, trust anchors, DSSE envelopes and the verdict's VSA.

The rest of gates calls into this package; it never reads the workspace's
worktree for anything that decides trust (see docs/trust.md).
"""
