"""Prometheus as the source of a past interval's diagnosis: where it is, and which of its series are the target's.

`dbcrew diagnose TARGET --from T1 --to T2 --prometheus URL` reads the interval from a team's
Prometheus (postgres_exporter and node_exporter series) instead of the watcher's store. The source
is one field of the review request, so a deployment's run form offers it as well: its URL (no
credentials: a flow parameter is shown in the UI) and, optionally, label matchers that pick the
target's series when the defaults do not (docs/watch.md, "Prometheus as a source").
"""

from __future__ import annotations

import re

from pydantic import BaseModel, Field, HttpUrl, field_validator

# One label matcher as PromQL writes it: name, operator, a double-quoted value with \" escapes.
MATCHER = r'\s*[A-Za-z_][A-Za-z0-9_]*\s*(=~|!~|!=|=)\s*"(?:[^"\\]|\\.)*"\s*'
SELECTOR = re.compile(rf"\{{?(?:{MATCHER}(?:,{MATCHER})*,?\s*)?\}}?")

SELECTOR_HELP = (
    'PromQL label matchers of the target\'s postgres_exporter series, e.g. {job="postgres",instance="db1:9187"};'
    " default: its server label (host:port of the target) and datname"
)
NODE_SELECTOR_HELP = (
    'PromQL label matchers of the target host\'s node_exporter series, e.g. {instance="db1:9100"};'
    " default: the node_exporter whose instance is on the target's host"
)


def matchers(selector: str) -> str:
    """The matchers of a selector without its braces ('{a="b"}' -> 'a="b"'), to join with others in one selector."""
    return selector.strip().removeprefix("{").removesuffix("}").strip().rstrip(",")


class PrometheusSource(BaseModel):
    """A Prometheus server to read a past interval from, and how to find the target's series in it."""

    url: HttpUrl = Field(description="the Prometheus server, e.g. http://prometheus:9090")
    selector: str = Field("", description=SELECTOR_HELP)
    node_selector: str = Field("", description=NODE_SELECTOR_HELP)

    @field_validator("url")
    @classmethod
    def _no_credentials(cls, url: HttpUrl) -> HttpUrl:
        if url.username or url.password:
            raise ValueError(
                "the Prometheus URL may not carry credentials: it is shown wherever the request is"
            )
        return url

    @field_validator("selector", "node_selector")
    @classmethod
    def _label_matchers(cls, selector: str) -> str:
        if selector.strip() and not SELECTOR.fullmatch(selector.strip()):
            raise ValueError(
                f'{selector!r} is not a list of label matchers like {{job="postgres",instance="db1:9187"}}'
            )
        return selector.strip()

    @property
    def address(self) -> str:
        return str(self.url).rstrip("/")
