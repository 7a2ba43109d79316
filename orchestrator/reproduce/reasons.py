"""Why the lab's figures differ from the paper's, entry by entry (`papers.ENTRIES` ids), written from the runs
behind docs/reproduction.md. Keep them in step with the measurements: rerun `python -m orchestrator.reproduce`
and rewrite a reason when its entry's figures change."""

from __future__ import annotations

REASONS: dict[str, str] = {}
