"""The lab's view of an experiment's runs table in the MLflow UI: the runs page URL and the saved column view
(an experiment tag the UI reads for `?viewStateShareKey=`)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any


def runs_page_url(experiment_id: str, host: str = "http://127.0.0.1:5000", share_key: str | None = None) -> str:
    """The MLflow UI page that lists an experiment's runs (MLflow 3 opens an experiment on its GenAI overview;
    the runs live at `#/experiments/<id>/runs`), with the lab's saved column view when `share_key` is given."""
    url = f"{host}/#/experiments/{experiment_id}/runs"
    return f"{url}?viewStateShareKey={share_key}" if share_key else url


#: The experiment tag prefix under which the MLflow UI keeps a shared view of the runs table.
VIEW_TAG_PREFIX = "mlflow.sharedViewState."
VIEW_KEY = "placement-lab"
#: Columns the lab's view shows in the runs table, beside the run name.
VIEW_COLUMNS = (
    "params.`placer`",
    "params.`model`",
    "params.`cluster`",
    "params.`need_fraction`",
    "tags.`status`",
    "metrics.`predicted_step_s`",
    "metrics.`measured_step_s`",
    "metrics.`peak_memory_bytes.max`",
    "metrics.`memory_limit_bytes`",
    "metrics.`placement_time_s`",
)


def set_runs_view(client: Any, experiment_id: str, expanded: Iterable[str] = ()) -> str:
    """Save the lab's view of the runs table as the experiment's shared view (an experiment tag the MLflow UI
    reads for `?viewStateShareKey=`): the columns of VIEW_COLUMNS, newest first, with the parent runs in
    `expanded` unfolded so that a sweep's jobs show. Returns the share key."""
    state = {
        "orderByKey": "attributes.start_time",
        "orderByAsc": False,
        "startTime": "ALL",
        "lifecycleFilter": "Active",
        "searchFilter": "",
        "datasetsFilter": [],
        "modelVersionFilter": "All Runs",
        "selectedColumns": ["attributes.`Run Name`", *VIEW_COLUMNS],
        "runsExpanded": {r: True for r in expanded},
        "runsPinned": [],
        "runsHidden": [],
        "runsHiddenMode": "FIRST_10_RUNS",
        "viewMaximized": False,
        "runListHidden": False,
        "isAccordionReordered": False,
        "groupBy": None,
        "groupsExpanded": {},
        "useGroupedValuesInCharts": True,
        "hideEmptyCharts": True,
    }
    client.set_experiment_tag(experiment_id, VIEW_TAG_PREFIX + VIEW_KEY, json.dumps(state))
    return VIEW_KEY
