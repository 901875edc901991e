"""PaddleFleet's compiled ops are not on the package index; PaddleFormers' MoE layers import
this one flag at import time. No DeepEP here (README.md)."""


def is_deep_ep_available() -> bool:
    return False
