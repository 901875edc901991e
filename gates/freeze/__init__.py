"""The source freeze: is the tree the pinned one, and is the worktree clean."""
