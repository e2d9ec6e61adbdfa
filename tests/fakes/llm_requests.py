"""Reading a chat request as the model doubles log it (this HTTP one and the in-process
tests/fakes/model_double.py alike): what the user said last, what the tools answered."""

from __future__ import annotations

from typing import Any


def last_user_content(request: dict[str, Any]) -> Any:
    """The content of the last user message of a request (as logged by this double and the
    in-process one): a text, or a list of parts when it carries an image."""
    return next(m["content"] for m in reversed(request["messages"]) if m["role"] == "user")


def tool_results(request: dict[str, Any]) -> list[str]:
    """The tool results a request gave the model, in order."""
    return [str(m["content"]) for m in request["messages"] if m["role"] == "tool"]


def reads_ahead(request: dict[str, Any]) -> bool:
    """A daemon's read-ahead (agent/daemon/warmup.py): one token after an empty user message."""
    messages = request.get("messages") or [{}]
    last = messages[-1] if isinstance(messages[-1], dict) else {}
    return request.get("max_tokens") == 1 and last.get("role") == "user" and not last.get("content")
