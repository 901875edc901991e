"""The detection power of sampled replay: n windows of w steps over N steps.

A plain value at the bottom, so that the alignment carries it as a figure and every
report renders it in its own words (the status block in its language)."""

from __future__ import annotations

from dataclasses import dataclass


def escape_probability(fraction: float, windows: int) -> float:
    """About (1 - f)^n: the chance that n windows all miss a fabricated fraction f."""
    return float((1.0 - fraction) ** windows)


@dataclass(frozen=True)
class DetectionPower:
    """What n sampled windows of ``width`` steps over ``total_steps`` steps can catch."""

    windows: int
    width: int
    total_steps: int

    @property
    def escape_tenth(self) -> float:
        """The chance that a run which fabricated 10% of its steps escapes."""
        return escape_probability(0.1, self.windows)

    @property
    def escape_one_step(self) -> float:
        """The chance that a run which fabricated one window's worth of steps escapes."""
        return escape_probability(min(1.0, self.width / max(self.total_steps, 1)), self.windows)

    def fields(self) -> dict[str, str | int]:
        """The values a sentence about it is formatted from (gates/locales: replay_power)."""
        return {
            "windows": self.windows,
            "width": self.width,
            "total": self.total_steps,
            "tenth": f"{self.escape_tenth:.2f}",
            "one_step": f"{self.escape_one_step:.2f}",
        }

    def sentence(self) -> str:
        """The plain English sentence every report carries next to formal_alignment_steps."""
        if self.windows == 0:
            return "replay: none required: a run's numbers are taken as signed (no re-execution)"
        return ENGLISH.format(**self.fields())


ENGLISH = (
    "replay: {windows} window(s) of {width} step(s) over {total} steps: a run that "
    "fabricated a fraction f of its steps escapes with probability about (1 - f)^{windows} "
    "(f = 10%: {tenth}; f = 1 step: {one_step})"
)
