"""OpenAI's chat-completions shapes, read and written for agent/http/chat_api.py (pure): a
message's text, the client's history as a stateless turn's, the client's tools checked, and
the answer (text, or the client's tool calls handed back, with the turn's usage)."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Collection
from typing import Any

from agent.http.server import Refusal
from agent.model.responses import Message, ToolCall
from agent.runtime.intake import repair_text
from agent.security import Scrubber, scrub_message
from agent.turns.turn_record import TurnRecord

# The turn's words when the client's last message is its tools' results, not a question.
RESULTS_IN = "(The results of the client's tool calls are above: go on with the task.)"
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def text_of(content: Any) -> str:
    """A message's text: a string, or the text parts of a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        )
    return ""


def checked_messages(asked: dict[str, Any]) -> list[dict[str, Any]]:
    """The request's `messages`, each an object and an assistant's tool calls each a
    function's call, as `earlier` and the turn read them: a client's mistake is a 400
    naming the field, not a 500 from deep inside."""
    messages = asked.get("messages")
    if not messages or not isinstance(messages, list):
        raise Refusal(400, "messages: a list of messages, the last one the user's")
    for n, message in enumerate(messages):
        if not isinstance(message, dict):
            kind = type(message).__name__
            raise Refusal(400, f"messages[{n}]: an object {{role, content}}, not a {kind}")
        calls = message.get("tool_calls")
        if calls is not None and not (isinstance(calls, list) and all(map(_is_call, calls))):
            raise Refusal(
                400,
                f"messages[{n}].tool_calls: a list of "
                "{id, type: function, function: {name, arguments}}",
            )
    if not isinstance(asked.get("stream_options") or {}, dict):
        raise Refusal(400, "stream_options: an object ({include_usage: true})")
    if not isinstance(asked.get("stream") or False, bool):  # null: as left out
        raise Refusal(400, "stream: true or false")
    return messages


def _is_call(call: Any) -> bool:
    function = call.get("function") if isinstance(call, dict) else None
    return (
        isinstance(function, dict)
        and isinstance(function.get("name"), str)
        and isinstance(function.get("arguments", ""), str)
    )


def client_tools(asked: dict[str, Any], own: Collection[str]) -> tuple[dict[str, Any], ...]:
    """The request's `tools`, each a function with a name none of pinclaw's tools has."""
    tools = asked.get("tools") or []
    if not isinstance(tools, list):
        raise Refusal(400, "tools: a list of {type: function, function: {name, parameters}}")
    for tool in tools:
        function = tool.get("function") if isinstance(tool, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise Refusal(400, "tools: each a {type: function, function: {name, parameters}}")
        if name in own:
            raise Refusal(400, f"tools: {name!r} is the name of one of pinclaw's own tools")
    return tuple(tools)


def earlier(messages: list[dict[str, Any]], scrub: Scrubber) -> list[Message]:
    """The client's history before the turn's message (the last user message; all of it
    when the last are its tools' results), as a stateless turn's history: user and assistant
    texts, the assistant's tool calls and their results (its system messages are not:
    pinclaw's prompt is the system prompt). Repaired as a chat message is (a client's half
    emoji cannot be stored) and scrubbed, texts and tool calls' arguments, as everything
    stored is: it is stored, and sent to the model."""
    before = messages[:-1] if messages[-1].get("role") == "user" else messages
    kept: list[Message] = []
    for message in before:
        role, text = message.get("role"), text_of(message.get("content"))
        calls = message.get("tool_calls") if role == "assistant" else None
        if role == "assistant" and isinstance(calls, list) and calls:
            calls = [_repaired_call(call) for call in calls]
            kept.append({"role": "assistant", "content": text or None, "tool_calls": calls})
        elif role == "tool":
            called = _repaired(message.get("tool_call_id"))
            kept.append({"role": "tool", "tool_call_id": called, "content": text})
        elif role in ("user", "assistant") and text:
            kept.append({"role": role, "content": text})
    return [scrub_message(message, lambda text: scrub(repair_text(text))) for message in kept]


def _repaired(value: Any) -> Any:
    """A text a client sent as an id or a name, repaired as a message's text is."""
    return repair_text(value) if isinstance(value, str) else value


def _repaired_call(call: dict[str, Any]) -> dict[str, Any]:
    """An earlier tool call with its id and name repaired (`_is_call` checked its shape)."""
    function = {**call["function"], "name": repair_text(call["function"]["name"])}
    return {**call, "id": _repaired(call.get("id")), "function": function}


def usage_of(record: TurnRecord | None) -> dict[str, int]:
    prompt = record.prompt_tokens if record else 0
    completion_tokens = record.completion_tokens if record else 0
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt + completion_tokens,
    }


def tool_calls_of(calls: list[ToolCall]) -> list[dict[str, Any]]:
    return [
        {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
        for c in calls
    ]


def completion(model: str, reply: str, record: TurnRecord | None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply}
    handed = record.handed_back if record is not None else []
    if handed:
        message = {
            "role": "assistant",
            "content": reply or None,
            "tool_calls": tool_calls_of(handed),
        }
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if handed else "stop"}
        ],
        "usage": usage_of(record),
    }
