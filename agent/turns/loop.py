"""The tool-call loop: history in, final reply out. It knows no channel.

The model is called; the tool calls of one reply run concurrently; their results go back;
repeat until a reply has no tool calls. Tool trouble of any kind becomes an error result
the model can read, never an exception out of the loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from agent.llm import LLMClient, Message, ToolCall, Usage
from agent.turns.dispatch import Dispatcher, NativeDispatcher, visible_text
from tools.base import ApprovalRequest, ToolCallContext, ToolRegistry, ToolResult

log = logging.getLogger(__name__)

StopReason = Literal["done", "iteration_limit", "loop_detected", "error"]
MAX_SAME_CALL = 3  # the fourth identical call in a turn is refused
_WRAP_UP = (
    "Stop calling tools now. Answer the user with what you have found so far, and say "
    "plainly what is unfinished."
)


@dataclass(frozen=True)
class LoopOptions:
    max_iterations: int = 10
    tool_timeout_s: float = 60.0


@dataclass(frozen=True)
class ToolEvent:
    """One tool call, for the activity log the CLI prints on stderr."""

    name: str
    arguments: str
    ok: bool
    seconds: float


@dataclass
class TurnResult:
    text: str
    new_messages: list[Message]
    stop_reason: StopReason
    usage: Usage = field(default_factory=Usage)
    events: list[ToolEvent] = field(default_factory=list)


async def run_tool_call_loop(
    history: list[Message],
    tools: ToolRegistry,
    llm: LLMClient,
    *,
    context: ToolCallContext,
    options: LoopOptions = LoopOptions(),
    dispatcher: Dispatcher | None = None,
    scrub: Callable[[str], str] = lambda text: text,
    on_event: Callable[[ToolEvent], None] | None = None,
    on_text: Callable[[str], None] | None = None,
) -> TurnResult:
    """Run one turn. `history` is not modified; the turn's new messages are returned."""
    dispatch = dispatcher or NativeDispatcher()
    messages = list(history)
    result = TurnResult(text="", new_messages=[], stop_reason="done")
    seen: Counter[tuple[str, str]] = Counter()

    def add(message: Message) -> None:
        messages.append(message)
        result.new_messages.append(message)

    for _ in range(options.max_iterations):
        response = await llm.complete(
            messages, tools=dispatch.request_tools(tools), on_text=on_text
        )
        result.usage.add(response)
        parsed = dispatch.parse(response)
        add(dispatch.assistant_message(response))
        if not parsed.calls and not parsed.problems:
            result.text = visible_text(response)
            return result
        repeated = [_is_repeat(seen, call) for call in parsed.calls]
        outcomes = await asyncio.gather(
            *(
                _refuse_repeat(call) if again else _run_timed(call, tools, context, options, scrub)
                for call, again in zip(parsed.calls, repeated, strict=True)
            )
        )
        for event, _ in outcomes:
            result.events.append(event)
            if on_event:
                on_event(event)
        for message in dispatch.result_messages(parsed, [res for _, res in outcomes]):
            add(message)
        if any(repeated):
            result.stop_reason = "loop_detected"
            break
    else:
        result.stop_reason = "iteration_limit"

    # Out of iterations or looping: one last call without tools, so the user gets text.
    final = await llm.complete([*messages, {"role": "user", "content": _WRAP_UP}], tools=None)
    result.usage.add(final)
    add({"role": "assistant", "content": final.content})
    result.text = visible_text(final)
    return result


def _is_repeat(seen: Counter[tuple[str, str]], call: ToolCall) -> bool:
    seen[(call.name, _canonical(call.arguments))] += 1
    return seen[(call.name, _canonical(call.arguments))] > MAX_SAME_CALL


def _canonical(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments), sort_keys=True)
    except (json.JSONDecodeError, TypeError):
        return arguments


async def _refuse_repeat(call: ToolCall) -> tuple[ToolEvent, ToolResult]:
    message = (
        f"Not run: {call.name} was already called {MAX_SAME_CALL} times with these same "
        "arguments in this turn and it would not change the outcome. Answer the user now."
    )
    return ToolEvent(call.name, call.arguments, False, 0.0), ToolResult.error(message)


async def _run_timed(
    call: ToolCall,
    tools: ToolRegistry,
    context: ToolCallContext,
    options: LoopOptions,
    scrub: Callable[[str], str],
) -> tuple[ToolEvent, ToolResult]:
    started = time.perf_counter()
    outcome = await run_tool(call, tools, context, options.tool_timeout_s)
    outcome = ToolResult(ok=outcome.ok, output=scrub(outcome.output))
    event = ToolEvent(call.name, call.arguments, outcome.ok, time.perf_counter() - started)
    return event, outcome


async def run_tool(
    call: ToolCall, tools: ToolRegistry, context: ToolCallContext, timeout_s: float
) -> ToolResult:
    """Run one call; every failure becomes an error result that says what to do instead."""
    tool = tools.get(call.name)
    if tool is None:
        available = ", ".join(tools.names()) or "none"
        return ToolResult.error(f"Unknown tool {call.name!r}. Available tools: {available}")
    try:
        args = json.loads(call.arguments) if call.arguments.strip() else {}
    except json.JSONDecodeError as exc:
        return ToolResult.error(
            f"The arguments for {call.name} are not valid JSON ({exc.msg} at character "
            f"{exc.pos}); send a JSON object matching the tool's parameters"
        )
    if not isinstance(args, dict):
        return ToolResult.error(f"The arguments for {call.name} must be a JSON object")
    try:
        async with asyncio.timeout(timeout_s) as deadline:
            return await tool.run(args, _approval_time_not_counted(context, deadline))
    except TimeoutError:
        return ToolResult.error(f"{call.name} timed out after {timeout_s:g} s and was stopped")
    except Exception as exc:
        log.exception("tool %s raised", call.name)
        return ToolResult.error(f"{call.name} failed: {type(exc).__name__}: {exc}")


def _approval_time_not_counted(
    context: ToolCallContext, deadline: asyncio.Timeout
) -> ToolCallContext:
    """The tool's time limit stops while the owner is asked: they get the whole approval
    timeout, and a denial reaches the model as a denial, not as a tool timeout."""
    approve = context.approve
    if approve is None:
        return context

    async def paused(request: ApprovalRequest) -> bool:
        loop = asyncio.get_running_loop()
        when = deadline.when()
        left = None if when is None else max(0.0, when - loop.time())
        deadline.reschedule(None)
        try:
            return await approve(request)
        finally:
            deadline.reschedule(None if left is None else loop.time() + left)

    return dataclasses.replace(context, approve=paused)
