"""The detection power of sampled replay: a typed figure, rendered in each report's words."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gates.core.detection import DetectionPower
from gates.reporters.status_md import messages


def test_the_sentence_states_the_escape_probability_of_the_figures() -> None:
    power = DetectionPower(windows=8, width=1, total_steps=100)
    assert power.escape_tenth == 0.9**8
    assert power.escape_one_step == 0.99**8
    assert power.sentence() == (
        "replay: 8 window(s) of 1 step(s) over 100 steps: a run that fabricated a fraction f "
        "of its steps escapes with probability about (1 - f)^8 (f = 10%: 0.43; f = 1 step: 0.92)"
    )


def test_no_window_says_that_nothing_is_re_executed() -> None:
    assert DetectionPower(0, 1, 100).sentence().startswith("replay: none required")


def test_a_window_wider_than_the_run_catches_every_fabrication() -> None:
    assert DetectionPower(1, 200, 100).escape_one_step == 0.0


@given(
    st.integers(min_value=1, max_value=64),
    st.integers(min_value=1, max_value=16),
    st.integers(min_value=1, max_value=10_000),
)
def test_more_windows_never_let_more_escape(windows: int, width: int, total: int) -> None:
    fewer, more = DetectionPower(windows, width, total), DetectionPower(windows + 1, width, total)
    assert 0.0 <= more.escape_one_step <= fewer.escape_one_step <= 1.0
    assert 0.0 <= more.escape_tenth <= fewer.escape_tenth <= 1.0


def test_every_locale_words_the_figure_with_all_its_values() -> None:
    fields = DetectionPower(8, 1, 100).fields()
    for name in ("en", "zh"):
        text = messages(name)["replay_power"].format(**fields)
        for value in ("8", "100", "0.43", "0.92"):
            assert value in text, (name, value)
