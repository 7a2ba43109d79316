"""The scoreboard's written reasons quote no dated lab measurement (the rule in reasons.py's docstring)."""

from __future__ import annotations

import re

import pytest

from orchestrator.reproduce.reasons import REASONS

_MONTH = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|Sep(?:t(?:ember)?)?"
    r"|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
)
# What dates a figure to one run: "28 Nov", "Nov 28", "November 2026", "2026-11-28", "session 14",
# "measured on 24 Nov"; each is a lab measurement that goes stale when the runs change.
_DATED = {
    "day month": re.compile(rf"\b\d{{1,2}}(?:st|nd|rd|th)?\s+{_MONTH}\b"),
    "month day": re.compile(rf"\b{_MONTH}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?\b(?!\d)"),
    "month year": re.compile(rf"\b{_MONTH}\.?\s+\d{{4}}\b"),
    "ISO date": re.compile(r"\b\d{4}-\d{2}-\d{2}\b"),
    "session number": re.compile(r"\bsessions?\s+\d+", re.IGNORECASE),
    "measured on a date": re.compile(rf"\bmeasured on\s+(?:the\s+)?(?:\d{{1,2}}\b|{_MONTH}\b)", re.IGNORECASE),
}


@pytest.mark.parametrize("entry", sorted(REASONS))
def test_reason_quotes_no_dated_measurement(entry):
    text = REASONS[entry]
    found = [f"{kind}: {m.group(0)!r}" for kind, rx in _DATED.items() for m in rx.finditer(text)]
    assert not found, (
        f"{entry}'s reason dates a lab measurement ({'; '.join(found)}); quote the papers' figures and the "
        "lab's structural cause only, and record the measurement in docs/experiments.md"
    )


@pytest.mark.parametrize(
    "text",
    ["On 28 Nov GNMT's m-SCT", "Measured on 24 Nov", "(session 14, docs)", "on Nov 27 the", "in November 2026"],
)
def test_the_patterns_catch_dated_measurements(text):
    assert any(rx.search(text) for rx in _DATED.values())


@pytest.mark.parametrize(
    "text",
    ["the paper's R = 200", "Table 5 (5.5)", "backward_factor 2", "36,352 nodes", "did not fit the session"],
)
def test_the_patterns_leave_undated_text(text):
    assert not any(rx.search(text) for rx in _DATED.values())
