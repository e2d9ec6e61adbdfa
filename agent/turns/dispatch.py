"""Tool dispatchers: how tool calls travel between the loop and the model.

native: tools go as `tools=`, calls come back as `tool_calls`, results as `tool` messages.
xml: for models without function calling, the prompt teaches a `<tool_call>` text protocol;
calls are parsed out of the reply and results go back as `<tool_result>` user messages.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Protocol

from agent.llm import LLMResponse, Message, ToolCall, supports_native_tools
from agent.prompt.context import Dispatch
from tools.base import ToolRegistry, ToolResult


@dataclass(frozen=True)
class ParsedCalls:
    calls: tuple[ToolCall, ...]
    problems: tuple[str, ...] = ()  # malformed calls, reported back to the model


class Dispatcher(Protocol):
    name: str

    def request_tools(self, registry: ToolRegistry) -> list[dict[str, Any]] | None: ...

    def parse(self, response: LLMResponse) -> ParsedCalls: ...

    def assistant_message(self, response: LLMResponse) -> Message: ...

    def result_messages(self, parsed: ParsedCalls, results: list[ToolResult]) -> list[Message]: ...


def result_text(result: ToolResult) -> str:
    return result.output if result.ok else f"Error: {result.output}"


class NativeDispatcher:
    name = "native"

    def request_tools(self, registry: ToolRegistry) -> list[dict[str, Any]] | None:
        return registry.schemas() or None

    def parse(self, response: LLMResponse) -> ParsedCalls:
        return ParsedCalls(calls=response.tool_calls)

    def assistant_message(self, response: LLMResponse) -> Message:
        message: Message = {"role": "assistant", "content": response.content or None}
        if response.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in response.tool_calls
            ]
        return message

    def result_messages(self, parsed: ParsedCalls, results: list[ToolResult]) -> list[Message]:
        return [
            {
                "role": "tool",
                "tool_call_id": call.id,
                "name": call.name,
                "content": result_text(result),
            }
            for call, result in zip(parsed.calls, results, strict=True)
        ]


_TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.S)


class XmlDispatcher:
    name = "xml"

    def request_tools(self, registry: ToolRegistry) -> list[dict[str, Any]] | None:
        return None

    def parse(self, response: LLMResponse) -> ParsedCalls:
        calls: list[ToolCall] = []
        problems: list[str] = []
        for index, match in enumerate(_TOOL_CALL.finditer(response.content)):
            body = match.group(1).strip()
            try:
                data = json.loads(body)
            except json.JSONDecodeError as exc:
                problems.append(
                    f"tool call {index + 1} is not valid JSON ({exc.msg}): {body[:200]}"
                )
                continue
            if not isinstance(data, dict) or not isinstance(data.get("name"), str):
                problems.append(
                    f'tool call {index + 1} needs {{"name": ..., "arguments": {{...}}}}'
                )
                continue
            arguments = data.get("arguments", {})
            calls.append(
                ToolCall(
                    id=f"xml_{index + 1}",
                    name=data["name"],
                    arguments=json.dumps(arguments, ensure_ascii=False),
                )
            )
        return ParsedCalls(calls=tuple(calls), problems=tuple(problems))

    def assistant_message(self, response: LLMResponse) -> Message:
        return {"role": "assistant", "content": response.content}

    def result_messages(self, parsed: ParsedCalls, results: list[ToolResult]) -> list[Message]:
        parts = [
            f'<tool_result name="{call.name}">\n{result_text(result)}\n</tool_result>'
            for call, result in zip(parsed.calls, results, strict=True)
        ]
        parts += [
            f'<tool_result name="error">\n{problem}\n</tool_result>' for problem in parsed.problems
        ]
        return [{"role": "user", "content": "\n".join(parts)}]


def configured_dispatcher(choice: str, model: str) -> Dispatch:
    """The dispatcher a runtime starts with: as configured, or for "auto" native unless
    LiteLLM positively knows the model lacks function calling."""
    if choice in ("native", "xml"):
        return choice  # type: ignore[return-value]
    return "native" if supports_native_tools(model) else "xml"


def visible_text(response: LLMResponse) -> str:
    """The reply without any `<tool_call>` blocks, for the user to read."""
    return _TOOL_CALL.sub("", response.content).strip()
