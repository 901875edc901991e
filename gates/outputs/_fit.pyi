"""gates/outputs/_fit.c: the quick check of a survey's differences in C
(gates.outputs.structure_parity.differences_fit)."""

def rows_fit(
    rows: object,
    strings: tuple[str, ...],
    lists: tuple[str, ...],
    chosen: str,
    choices: frozenset[str],
    /,
) -> bool: ...
