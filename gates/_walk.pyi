"""gates/_walk.c: the warm path's walk in C (gates.fastpath.tree_rows)."""

def tree_rows(
    top: bytes, skip_top: bytes, skip_all: bytes, skip: tuple[bytes, ...], track_newest: bool, /
) -> tuple[bytes, int]: ...
