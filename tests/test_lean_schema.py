"""A tool's parameters as `tools=` sends them (tools/base.lean_schema): the same parameters in
fewer tokens, while the tool's own schema, its validation and the check of a call read out
of text stay as they were."""

from __future__ import annotations

from pathlib import Path

from agent.turns.tool_schema import misfit
from tools.base import FunctionTool, ToolCallContext, ToolRegistry, ToolResult, lean_schema


async def remember(
    call: ToolCallContext,
    content: str,
    limit: int | None = None,
    tags: list[str] | None = None,
    mode: str = "a",
) -> ToolResult:
    """Keep a fact.

    Args:
        content: The fact.
        limit: How many at most.
    """
    return ToolResult.success(f"{content} {limit} {tags} {mode}")


TOOL = FunctionTool(remember)


def test_an_optional_value_is_sent_as_its_type_and_without_additional_properties() -> None:
    [sent] = ToolRegistry([TOOL]).schemas()
    assert sent["function"]["parameters"] == {
        "properties": {
            "content": {"type": "string", "description": "The fact."},
            "limit": {"type": "integer", "description": "How many at most."},
            "tags": {"type": "array", "items": {"type": "string"}},
            "mode": {"type": "string", "default": "a"},
        },
        "required": ["content"],
        "type": "object",
    }


def test_the_tool_keeps_its_own_schema() -> None:
    ToolRegistry([TOOL]).schemas()
    assert TOOL.parameters["additionalProperties"] is False
    limit = TOOL.parameters["properties"]["limit"]
    assert limit["anyOf"] == [{"type": "integer"}, {"type": "null"}] and limit["default"] is None


async def test_a_null_and_an_unknown_argument_are_judged_as_before(tmp_path: Path) -> None:
    call = ToolCallContext(tmp_path)
    assert (await TOOL.run({"content": "x", "limit": None}, call)).ok
    refused = await TOOL.run({"content": "x", "colour": "red"}, call)
    assert not refused.ok and "colour: unexpected argument" in refused.output
    # a call written as text is checked against the tool's own schema
    assert misfit({"content": "x", "limit": None}, TOOL.parameters) == ""
    assert "unknown argument colour" in misfit({"content": "x", "colour": 1}, TOOL.parameters)


def test_other_shapes_are_sent_as_they_are() -> None:
    schema = {
        "type": "object",
        "additionalProperties": True,
        "properties": {
            "either": {
                "anyOf": [{"type": "integer"}, {"type": "string"}, {"type": "null"}],
                "default": None,
            },
            "three_by_default": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": 3},
            "null_required": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        },
    }
    assert lean_schema(schema) == schema and lean_schema(schema) is not schema
