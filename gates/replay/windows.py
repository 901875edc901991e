"""Which windows a replay re-executes: drawn from a seed the runner cannot predict.

The seed comes from the verifier: `--seed` (CI passes its own), or the policy
commit and the replay's time. Anyone can recompute the windows from the seed
(`sample_windows`), so a replay cannot pick the windows it likes.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass

from gates.core.detection import DetectionPower
from gates.core.errors import GatesError

SEED_SOURCES = ("ci", "policy+time")


@dataclass(frozen=True)
class Window:
    """Steps ``first``..``last`` (inclusive) are checked; execution resumes after ``resume``."""

    first: int
    last: int
    resume: int = 0

    @property
    def label(self) -> str:
        return f"{self.first}-{self.last}" if self.last != self.first else str(self.first)


def derived_seed(policy_commit: str | None, when: str) -> str:
    return hashlib.sha256(f"{policy_commit or 'no-policy-ref'}|{when}".encode()).hexdigest()


def sample_windows(seed: str, total_steps: int, count: int, width: int) -> list[Window]:
    """``count`` distinct windows of ``width`` steps within 1..total_steps, sorted."""
    if width < 1:
        raise GatesError(f"window width {width} is not a positive number of steps")
    if width > total_steps:
        raise GatesError(f"windows of {width} steps do not fit in a run of {total_steps} steps")
    firsts = range(1, total_steps - width + 2)
    generator = random.Random(int.from_bytes(hashlib.sha256(seed.encode()).digest(), "big"))  # noqa: S311  (a public, recomputable draw)
    chosen = sorted(generator.sample(firsts, min(count, len(firsts))))
    return [Window(first, first + width - 1) for first in chosen]


def parse_window(text: str, total_steps: int) -> Window:
    """`FIRST:LAST` (or one step) asked for by hand; refused past the run's end."""
    first_text, _, last_text = text.partition(":")
    if not first_text.isdigit() or (last_text and not last_text.isdigit()):
        raise GatesError(f"window {text!r} is not FIRST:LAST", hint="e.g. --window 41:43")
    first, last = int(first_text), int(last_text or first_text)
    if first < 1 or last < first:
        raise GatesError(f"window {text}: steps run 1..{total_steps}, FIRST <= LAST")
    if last > total_steps:
        raise GatesError(
            f"window {text} ends past the run's last step {total_steps}",
            hint=f"pick steps within 1..{total_steps}",
        )
    return Window(first, last)


def with_resume(window: Window, saved_steps: list[int]) -> Window:
    """Resume from the latest saved state at or before the window's first step - 1."""
    before = [step for step in saved_steps if step <= window.first - 1]
    if not before:
        raise GatesError(f"no saved state at or before step {window.first - 1}")
    return Window(window.first, window.last, max(before))


def detection_power(windows: int, width: int, total_steps: int) -> str:
    """The plain sentence every report carries next to formal_alignment_steps."""
    return DetectionPower(windows, width, total_steps).sentence()
