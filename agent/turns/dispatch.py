"""Tool dispatchers: how tool calls travel between the loop and the model.

native: tools go as `tools=`, calls come back as `tool_calls`, results as `tool` messages.
xml: for models without function calling, the prompt teaches a `<tool_call>` text protocol;
calls are parsed out of the reply and results go back as `<tool_result>` user messages.

Both also run calls a model wrote as text in some other way (agent/turns/tool_call_text.py)
when its reply carries none in their own shape. The history then reads as if the model had
used that shape: native gets an assistant message with `tool_calls` (the narration as its
content) and `tool` results, so OpenAI-compatible servers take it; xml gets the narration
and canonical `<tool_call>` blocks.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, replace
from typing import Any, Protocol

from agent.config import Settings
from agent.durable.tool_journal import canonical
from agent.model.profiles.litellm_facts import supports_native_tools
from agent.model.profiles.text_call_values import read_json
from agent.model.responses import LLMResponse, Message, ToolCall
from agent.prompt.context import Dispatch
from agent.turns.honesty import without_results
from agent.turns.tool_call_text import TextCalls, find_tool_calls, offered
from tools.base import ToolRegistry, ToolResult


@dataclass(frozen=True)
class ParsedCalls:
    calls: tuple[ToolCall, ...]
    problems: tuple[str, ...] = ()  # malformed calls, reported back to the model
    # The assistant's text as it goes into the history when calls were read from prose
    # (the narration); None: as the model wrote it.
    content: str | None = None
    # No call, but a clear attempt at one that no offered tool fits: the loop may say so.
    near_misses: tuple[str, ...] = ()


class Dispatcher(Protocol):
    name: str

    def request_tools(self, registry: ToolRegistry) -> list[dict[str, Any]] | None: ...

    def parse(self, response: LLMResponse, registry: ToolRegistry) -> ParsedCalls: ...

    def assistant_message(self, response: LLMResponse, parsed: ParsedCalls) -> Message: ...

    def result_messages(self, parsed: ParsedCalls, results: list[ToolResult]) -> list[Message]: ...


def result_text(result: ToolResult) -> str:
    return result.output if result.ok else f"Error: {result.output}"


def _from_text(found: TextCalls, ids: list[str]) -> ParsedCalls:
    """Calls read out of prose; with none, only the near misses (if any)."""
    calls = tuple(
        ToolCall(id=id, name=call.name, arguments=json.dumps(call.arguments, ensure_ascii=False))
        for id, call in zip(ids, found.calls, strict=True)
    )
    if not calls:
        return ParsedCalls(calls=(), near_misses=found.near_misses)
    return ParsedCalls(calls=calls, problems=found.near_misses, content=found.narration)


class NativeDispatcher:
    name = "native"

    def request_tools(self, registry: ToolRegistry) -> list[dict[str, Any]] | None:
        return registry.schemas() or None

    def parse(self, response: LLMResponse, registry: ToolRegistry) -> ParsedCalls:
        if response.tool_calls:
            return ParsedCalls(calls=response.tool_calls)
        found = find_tool_calls(response.content, offered(registry))
        # Nine letters and digits: the strictest id rule among the providers (Mistral's).
        ids = [f"call{uuid.uuid4().hex[:5]}" for _ in found.calls]
        return _from_text(found, ids)

    def assistant_message(self, response: LLMResponse, parsed: ParsedCalls) -> Message:
        content = response.content if parsed.content is None else parsed.content
        message: Message = {"role": "assistant", "content": content or None}
        if parsed.calls:
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in parsed.calls
            ]
        return message

    def result_messages(self, parsed: ParsedCalls, results: list[ToolResult]) -> list[Message]:
        messages: list[Message] = [
            {
                "role": "tool",
                "tool_call_id": call.id,
                "name": call.name,
                "content": result_text(result),
            }
            for call, result in zip(parsed.calls, results, strict=True)
        ]
        if parsed.problems:
            problems = "; ".join(parsed.problems)
            messages.append({"role": "user", "content": f"Not run: {problems}"})
        return messages


_TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.S)


class XmlDispatcher:
    name = "xml"

    def request_tools(self, registry: ToolRegistry) -> list[dict[str, Any]] | None:
        return None

    def parse(self, response: LLMResponse, registry: ToolRegistry) -> ParsedCalls:
        if not _TOOL_CALL.search(response.content):
            found = find_tool_calls(response.content, offered(registry))
            parsed = _from_text(found, [f"xml_{i + 1}" for i in range(len(found.calls))])
            if not parsed.calls:
                return parsed
            blocks = [_block(call) for call in parsed.calls]
            return ParsedCalls(
                parsed.calls, parsed.problems, "\n".join([found.narration, *blocks]).strip()
            )
        calls: list[ToolCall] = []
        problems: list[str] = []
        for index, match in enumerate(_TOOL_CALL.finditer(response.content)):
            body = match.group(1).strip()
            try:
                data = read_json(body)
            except json.JSONDecodeError as exc:
                other = find_tool_calls(match.group(0), offered(registry)).calls  # GLM, Qwen3-Coder
                if len(other) == 1:
                    data = {"name": other[0].name, "arguments": other[0].arguments}
                else:
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

    def assistant_message(self, response: LLMResponse, parsed: ParsedCalls) -> Message:
        if parsed.content is not None:
            return {"role": "assistant", "content": parsed.content}
        # A result the model wrote next to its calls would sit beside the real one.
        content = without_results(response.content) if parsed.calls else response.content
        return {"role": "assistant", "content": content}

    def result_messages(self, parsed: ParsedCalls, results: list[ToolResult]) -> list[Message]:
        parts = [
            f'<tool_result name="{call.name}">\n{result_text(result)}\n</tool_result>'
            for call, result in zip(parsed.calls, results, strict=True)
        ]
        parts += [
            f'<tool_result name="error">\n{problem}\n</tool_result>' for problem in parsed.problems
        ]
        return [{"role": "user", "content": "\n".join(parts)}]


def _block(call: ToolCall) -> str:
    arguments = json.loads(call.arguments)
    body = json.dumps({"name": call.name, "arguments": arguments}, ensure_ascii=False)
    return f"<tool_call>{body}</tool_call>"


def configured_dispatcher(settings: Settings, model: str) -> Dispatch:
    """The dispatcher a runtime starts with: agent.tool_dispatcher, or for "auto" native
    unless LiteLLM positively knows the model lacks function calling."""
    choice = settings.agent.tool_dispatcher
    if choice in ("native", "xml"):
        return choice
    return "native" if supports_native_tools(settings.llm, model) else "xml"


def visible_text(response: LLMResponse) -> str:
    """The reply without any `<tool_call>` blocks, for the user to read."""
    return _TOOL_CALL.sub("", response.content).strip()


def distinct_calls(parsed: ParsedCalls, response: LLMResponse, dispatch: Dispatcher) -> ParsedCalls:
    """One reply's calls, each once: a small model may write the same call three times in a
    row (Qwen2.5-Coder-1.5B did, for file_list, `date` and file_write). It runs once, and the
    history shows it once, so the model is not answered three times for one question."""
    kept: dict[tuple[str, str], ToolCall] = {}
    for call in parsed.calls:
        kept.setdefault((call.name, canonical(call.arguments)), call)
    if len(kept) == len(parsed.calls):
        return parsed
    calls = tuple(kept.values())
    content = parsed.content
    if content is None and dispatch.name == "xml":  # its <tool_call> blocks, each once
        narration = without_results(_TOOL_CALL.sub("", response.content)).strip()
        content = "\n".join([narration, *map(_block, calls)]).strip()
    return replace(parsed, calls=calls, content=content)
