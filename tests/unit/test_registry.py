"""One tool registry: the MCP server's operator tools, ask's tools and the diagnosis's observations
are each generated from the registry's operators of their surface, with the operators' own names
and parameter schemas; the planner's catalogue holds only the plan's operators."""

from __future__ import annotations

from typing import Any

import anyio
import psycopg

from dbcrew.cli.mcp_server import Limits, build_server
from dbcrew.operators.registry import (
    REGISTRY,
    Operator,
    OperatorContext,
    Surface,
    catalogue,
    exposed,
)
from dbcrew.roles.ask.llm import EXPAND as ASK_EXPAND
from dbcrew.roles.ask.llm import FINAL
from dbcrew.roles.ask.llm import tool_specs as ask_tool_specs
from dbcrew.roles.diagnosis.tools import (
    EXPAND,
    OBSERVE,
    PROPOSE,
    REFLECT,
)
from dbcrew.roles.diagnosis.tools import (
    tool_specs as diagnosis_tool_specs,
)
from dbcrew.vocabulary import Lookup

OWN_MCP_TOOLS = {"ask", "review", "diagnose", "latest_review"}


def names(surface: Surface) -> list[str]:
    return [op.name for op in exposed(surface)]


def without_defs(schema: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in schema.items() if k != "$defs"}


def test_every_surface_offers_registered_operators_and_the_catalogue_only_the_plans():
    assert all(op.surfaces for op in REGISTRY.values())
    assert [e.name for e in catalogue()] == names(Surface.PLAN)
    assert not set(names(Surface.PLAN)) & (set(names(Surface.ASK)) | set(names(Surface.DIAGNOSIS)))
    assert {lookup.value for lookup in Lookup} == set(
        names(Surface.ASK)
    )  # the router's labels are the ask operators


def test_the_mcp_operator_tools_are_the_registrys_with_their_parameter_schemas():
    async def listed() -> list[Any]:
        return await build_server(Limits()).list_tools()

    tools = {t.name: t for t in anyio.run(listed)}
    assert set(tools) - OWN_MCP_TOOLS == set(names(Surface.MCP))
    assert {op.context for op in exposed(Surface.MCP)} == {
        OperatorContext,
        psycopg.Connection,
    }  # what dbcrew/roles/ask/lookup.py runs
    assert {"collect_activity", "table_size", "activity"} <= set(tools)
    for op in exposed(Surface.MCP):
        schema = tools[op.name].input_schema
        assert tools[op.name].description.startswith(op.description)
        assert schema["properties"]["target"]["type"] == "string"
        if not op.params_model.model_fields:
            assert set(schema["properties"]) == {"target"}, op.name
            continue
        own = op.params_schema()
        assert schema["$defs"][op.params_model.__name__] == without_defs(own), op.name
        assert own.get("$defs", {}).items() <= schema["$defs"].items(), op.name
        assert ("params" in schema.get("required", [])) == bool(own.get("required")), op.name


def test_the_ask_tools_are_the_registrys_look_ups_with_their_parameter_schemas():
    specs = [spec["function"] for spec in ask_tool_specs()]
    assert [s["name"] for s in specs] == [*names(Surface.ASK), ASK_EXPAND, FINAL]
    for spec, op in zip(specs, exposed(Surface.ASK)):
        assert (spec["description"], spec["parameters"]) == (op.description, op.params_schema())


def test_the_diagnosis_observations_are_the_registrys_views_with_their_parameter_schemas():
    tools = diagnosis_tool_specs()
    assert list(tools) == [OBSERVE, EXPAND, REFLECT, PROPOSE]
    description, observe = tools[OBSERVE]
    assert observe["properties"]["what"]["enum"] == names(Surface.DIAGNOSIS)
    views: list[Operator] = exposed(Surface.DIAGNOSIS)
    for op in views:
        assert f"{op.name}: {op.description.rstrip('.')}" in description
        for name, schema in op.params_schema().get("properties", {}).items():
            assert observe["properties"][name] == schema, (op.name, name)
    declared = {name for op in views for name in op.params_schema().get("properties", {})}
    assert set(observe["properties"]) == {"what", *declared}
