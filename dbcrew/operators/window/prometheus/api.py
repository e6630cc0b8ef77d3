"""Prometheus's HTTP API, read-only: the instant and range queries a diagnosis from Prometheus makes.

A diagnosis of a past interval can read what postgres_exporter and node_exporter scraped into a
team's Prometheus instead of the watcher's store (dbcrew/operators/window/prometheus/source.py). This module
only speaks the API (`/api/v1/query`, `/api/v1/query_range`, documented at
https://prometheus.io/docs/prometheus/latest/querying/api/) and turns its JSON into typed series;
which series mean what is the operators' business. Every failure (the server does not answer,
answers with an error, or with something that is not Prometheus's JSON) is one `PrometheusError`
line, which the CLI turns into exit 2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import httpx
from pydantic import BaseModel, Field, ValidationError

from dbcrew.errors import UsageError

TIMEOUT_SECONDS = (
    30.0  # a range query over an hour at one step a second is well under a second on a small server
)


class PrometheusError(UsageError):
    """Prometheus cannot be read: it does not answer, refuses the query, or is not Prometheus."""


@dataclass(frozen=True)
class PromSeries:
    """One series of a query's answer: its labels (the metric name under `__name__`) and its (unix time, value) points."""

    labels: dict[str, str]
    points: list[tuple[float, float]]

    @property
    def name(self) -> str:
        return self.labels.get("__name__", "")


class _Result(BaseModel):
    metric: dict[str, str] = Field(default_factory=dict)
    values: list[tuple[float, str]] = Field(default_factory=list)
    value: tuple[float, str] | None = None


class _Data(BaseModel):
    resultType: Literal["matrix", "vector", "scalar", "string"]  # noqa: N815 (Prometheus's field name)
    result: list[_Result] | list[Any]


class ApiAnswer(BaseModel):
    """The envelope of every API answer: status, then data or the error."""

    status: Literal["success", "error"]
    data: _Data | None = None
    errorType: str = ""  # noqa: N815
    error: str = ""


def parse_series(payload: object) -> list[PromSeries]:
    """The series of a query's JSON answer (a matrix or a vector); NaN and infinite points left out
    (an exporter writes NaN for "never happened", e.g. a last archive's age). PrometheusError when the
    answer is an error or not Prometheus's shape."""
    try:
        answer = ApiAnswer.model_validate(payload)
    except ValidationError as exc:
        raise PrometheusError(
            f"not a Prometheus API answer ({exc.errors()[0]['msg']} at {'.'.join(map(str, exc.errors()[0]['loc']))})"
        ) from None
    if answer.status == "error" or answer.data is None:
        raise PrometheusError(f"Prometheus refused the query: {answer.errorType}: {answer.error}")
    if answer.data.resultType not in ("matrix", "vector"):
        raise PrometheusError(f"expected series, Prometheus answered a {answer.data.resultType}")
    out = []
    for raw in answer.data.result:
        result = raw if isinstance(raw, _Result) else _Result.model_validate(raw)
        pairs = result.values or ([result.value] if result.value is not None else [])
        points = [(t, float(v)) for t, v in pairs if math.isfinite(float(v))]
        out.append(PromSeries(labels=result.metric, points=points))
    return out


@dataclass(frozen=True)
class Prometheus:
    """One Prometheus server's query API at `url` (e.g. http://prometheus:9090)."""

    url: str
    timeout: float = TIMEOUT_SECONDS

    def raw(self, path: str, params: dict[str, str]) -> object:
        """The JSON answer of one GET (or POST for long queries); PrometheusError in one line when there is none."""
        endpoint = f"{self.url.rstrip('/')}/api/v1/{path}"
        try:
            response = httpx.post(endpoint, data=params, timeout=self.timeout)
        except httpx.HTTPError as exc:
            raise PrometheusError(
                f"Prometheus at {self.url} does not answer: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else 'no reason given'}"
            ) from None
        if response.status_code not in (
            200,
            400,
            422,
            503,
        ):  # the API answers errors as JSON with these codes
            raise PrometheusError(
                f"{endpoint} answered HTTP {response.status_code}: is {self.url} a Prometheus server?"
            )
        try:
            return response.json()
        except ValueError:
            raise PrometheusError(
                f"{endpoint} did not answer JSON: is {self.url} a Prometheus server?"
            ) from None

    def instant(self, query: str, at: datetime) -> list[PromSeries]:
        """An instant query at `at` (a range selector in it answers the raw samples of that range)."""
        return parse_series(self.raw("query", {"query": query, "time": _seconds(at)}))

    def query_range(
        self, query: str, start: datetime, end: datetime, step: float
    ) -> list[PromSeries]:
        """A range query: each series' value at start, start + step, ... up to end (the latest sample at or before each)."""
        params = {
            "query": query,
            "start": _seconds(start),
            "end": _seconds(end),
            "step": f"{step:g}",
        }
        return parse_series(self.raw("query_range", params))


def _seconds(at: datetime) -> str:
    return f"{at.timestamp():.3f}"
