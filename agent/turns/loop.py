"""The tool-call loop: history in, final reply out. It knows no channel.

The model is called; the tool calls of one reply run concurrently; their results go back;
repeat until a reply has no tool calls. Tool trouble of any kind becomes an error result
the model can read, never an exception out of the loop.

A reply without calls is the answer unless it slips (agent/turns/honesty.py): empty, a
tool result the model wrote, an action claimed while no tool ran, or a call attempt no
offered tool fits. Each kind is re-asked once with a short correction; the slipped reply
and the correction go to the model but not into the stored history. A second slip ends
the turn with the answer marked (or, for an empty one, a line of what the tools did).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal

from agent.durable.tool_journal import CallReplay
from agent.model.profiles.text_call_values import read_json
from agent.model.responses import LLMResponse, Message, ModelClient, OnRetry, ToolCall, Usage
from agent.turns import honesty
from agent.turns.call_preview import HoldCallPrefix
from agent.turns.dispatch import (
    Dispatcher,
    NativeDispatcher,
    ParsedCalls,
    distinct_calls,
    visible_text,
)
from agent.turns.repeats import NotRun, Repeats
from agent.turns.taint_gate import ask_if_tainted
from agent.turns.tool_call_text import find_tool_calls, offered
from tools.base import ApprovalRequest, JournalEntry, ToolCallContext, ToolRegistry, ToolResult

log = logging.getLogger(__name__)

StopReason = Literal[
    "done", "iteration_limit", "call_limit", "loop_detected", "error", "client_tools"
]
_WRAP_UP = (
    "Stop calling tools now. Answer the user with what you have found so far, and say "
    "plainly what is unfinished."
)


@dataclass(frozen=True)
class LoopOptions:
    max_iterations: int = 10
    tool_timeout_s: float = 60.0
    max_calls_per_reply: int = 8
    max_calls_per_turn: int = 30
    hand_back: frozenset[str] = frozenset()  # an API client's tools: it runs their calls


@dataclass(frozen=True)
class ToolEvent:
    """One tool call, for the activity log the CLI prints on stderr."""

    name: str
    arguments: str
    ok: bool
    seconds: float
    ran: bool = True  # False: not run (made again, or over the caps); its result says why


@dataclass
class TurnResult:
    text: str
    new_messages: list[Message]
    stop_reason: StopReason
    usage: Usage = field(default_factory=Usage)
    events: list[ToolEvent] = field(default_factory=list)
    handed_back: list[ToolCall] = field(default_factory=list)  # for the client to run


async def run_tool_call_loop(
    history: list[Message],
    tools: ToolRegistry,
    llm: ModelClient,
    *,
    context: ToolCallContext,
    options: LoopOptions = LoopOptions(),
    dispatcher: Dispatcher | None = None,
    scrub: Callable[[str], str] = lambda text: text,
    on_event: Callable[[ToolEvent], None] | None = None,
    on_text: Callable[[str], None] | None = None,
    on_retry: OnRetry = None,
    steer: Callable[[], Awaitable[list[Message]]] | None = None,
) -> TurnResult:
    """Run one turn. `history` is not modified; the turn's new messages are returned.
    `steer`: the person's messages that came meanwhile, joined after each round of tools."""
    dispatch = dispatcher or NativeDispatcher()
    messages = list(history)
    result = TurnResult(text="", new_messages=[], stop_reason="done")
    repeats = Repeats(tools)
    corrected: set[str] = set()  # the kinds of slip already re-asked in this turn
    json_ok = honesty.asks_for_json(history)  # else a bare JSON answer is a slip
    calls_run = 0  # tool calls let through (parallel ones each count), against the caps
    journal = context.journal
    replay = CallReplay(journal, tools, scrub, options.tool_timeout_s) if journal else None

    def add(message: Message) -> None:
        messages.append(message)
        result.new_messages.append(message)

    for _ in range(options.max_iterations):
        response = await llm.complete(
            messages,
            tools=dispatch.request_tools(tools),
            on_text=HoldCallPrefix(on_text) if on_text else None,
            on_retry=on_retry,
        )
        result.usage.add(response)
        parsed = distinct_calls(dispatch.parse(response, tools), response, dispatch)
        if not parsed.calls and not parsed.problems:
            slips = _slips(response, parsed, result.events, offered=bool(tools), json_ok=json_ok)
            said = visible_text(response)
            cut_at = honesty.cut_call_at(said, offered(tools)) if response.cut else None
            if cut_at is not None:  # half a call, cut at the length limit: never shown
                slips, said = [("cut_call", honesty.CUT_CALL)], said[:cut_at].rstrip()
            fresh = [(kind, correction) for kind, correction in slips if kind not in corrected]
            if fresh:
                corrected.add(fresh[0][0])
                _ask_again(messages, dispatch.assistant_message(response, parsed), fresh[0][1])
                continue
            answer = dispatch.assistant_message(response, parsed)
            kinds = {kind for kind, _ in slips}
            if "near_miss" in kinds:  # a call again that fits no tool: its words, not the call
                said = find_tool_calls(said, offered(tools)).narration
            _finish(result, add, answer, said, kinds, repeats.asked_again)
            return result
        add(dispatch.assistant_message(response, parsed))
        if handed := [call for call in parsed.calls if call.name in options.hand_back]:
            result.text, result.stop_reason, result.handed_back = "", "client_tools", handed
            return result  # the client runs them (agent/turns/client_tools.py)
        calls = [_as_member(call, tools) for call in parsed.calls]  # what runs, and is judged
        room = min(options.max_calls_per_reply, options.max_calls_per_turn - calls_run)
        not_run = [
            _over_caps(options) if index >= room else repeats.check(call)
            for index, call in enumerate(calls)
        ]
        calls_run += min(room, len(calls))
        skipped = [why is not None for why in not_run]
        claims = await replay.claim(calls, skipped) if replay else [None] * len(skipped)
        outcomes = await asyncio.gather(
            *(
                _not_run(call, why)
                if why
                else _run_timed(call, tools, context, options, scrub, replay, claim)
                for call, why, claim in zip(calls, not_run, claims, strict=True)
            )
        )
        for call, why, (_, done) in zip(calls, not_run, outcomes, strict=True):
            if why is None:
                repeats.ran(call, done)
        for event, _ in outcomes:
            result.events.append(event)
            if on_event:
                on_event(event)
        for message in dispatch.result_messages(parsed, [res for _, res in outcomes]):
            add(message)
        before = [why.ran_before for why in not_run if why and why.ran_before is not None]
        if before and len(before) == len(not_run):  # only work that ran, asked for again
            text = honesty.made_again(calls[-1].name, before[-1])
            add({"role": "assistant", "content": text})
            result.text = text
            return result
        for message in await steer() if steer else ():
            add(message)
        if any(why and why.ends_tools for why in not_run):
            result.stop_reason = "loop_detected"
            break
        if calls_run >= options.max_calls_per_turn:
            result.stop_reason = "call_limit"
            break
    else:
        result.stop_reason = "iteration_limit"

    # Out of iterations or looping: one last call without tools, so the user gets text.
    wrap_up = [*messages, {"role": "user", "content": _WRAP_UP}]
    final = await llm.complete(wrap_up, tools=None, on_retry=on_retry)
    result.usage.add(final)
    slips = _slips(final, ParsedCalls(calls=()), result.events, offered=False)
    found = find_tool_calls(final.content, offered(tools))
    half = final.cut and honesty.cut_call_at(final.content, offered(tools)) is not None
    if found.calls or found.near_misses or half:  # a small model writes the call again
        text = honesty.stopped_answer(result.stop_reason, messages)
        add({"role": "assistant", "content": text})
        result.text = text
        return result
    answer = {"role": "assistant", "content": final.content}
    _finish(result, add, answer, visible_text(final), {k for k, _ in slips}, repeats.asked_again)
    return result


def _slips(
    response: LLMResponse,
    parsed: ParsedCalls,
    events: list[ToolEvent],
    *,
    offered: bool,
    json_ok: bool = True,
) -> list[tuple[str, str]]:
    """What is wrong with a reply that would be the answer, each with its correction."""
    found: list[tuple[str, str]] = []
    if parsed.near_misses:
        problems = "; ".join(parsed.near_misses)
        found.append(("near_miss", honesty.NEAR_MISS.format(problems=problems)))
    text = visible_text(response)
    if not text.strip("`\n\t "):  # nothing, or a bare fence (a 1.5B model's "```")
        return [*found, ("empty", honesty.EMPTY)]
    marker = honesty.result_marker(response.content)
    if marker:
        found.append(("slip", honesty.FAKE_RESULT.format(what=marker)))
    elif offered and not events and honesty.claims_action(text):
        found.append(("slip", honesty.NO_TOOL_RAN))
    elif offered and not (json_ok or events or found) and honesty.bare_json(text):
        found.append(("bare_json", honesty.BARE_JSON))
    return found


def _ask_again(messages: list[Message], answer: Message, correction: str) -> None:
    """Send the reply back with its correction, for this turn only. An empty reply is not
    sent (some servers refuse an empty assistant message): the correction joins the last
    user message instead, so the roles still alternate."""
    last = messages[-1] if messages else {}
    if str(answer.get("content") or "").strip() or answer.get("tool_calls"):
        messages += [answer, {"role": "user", "content": correction}]
    elif last.get("role") == "user" and isinstance(last.get("content"), str):
        messages[-1] = {**last, "content": f"{last['content']}\n\n{correction}"}
    else:
        messages.append({"role": "user", "content": correction})


def _finish(
    result: TurnResult,
    add: Callable[[Message], None],
    answer: Message,
    text: str,
    slips: set[str],
    asked_again: list[tuple[str, str]],
) -> None:
    """The answer as the user gets it: never empty, never a made-up result as fact, never
    "I can't help" after a call that ran was asked for again."""
    if "empty" in slips:
        text = honesty.account([(event.name, event.ok) for event in result.events])
    elif "slip" in slips or "bare_json" in slips:  # the second time: shown, with a note
        text = honesty.slipped_answer(text, tools_ran=bool(result.events))
    elif "near_miss" in slips:
        text = honesty.not_run_answer(text)
    elif "cut_call" in slips:
        text = honesty.cut_call_answer(text)
    elif asked_again and honesty.refuses(text):
        text = honesty.done_anyway(*asked_again[-1])
    else:
        add(answer)
        result.text = text
        return
    add({"role": "assistant", "content": text})
    result.text = text


def _as_member(call: ToolCall, tools: ToolRegistry) -> ToolCall:
    """A group's call as its member's (tools/tool_groups.py); any other call as it is."""
    name, arguments = tools.member_call(call.name, call.arguments)
    return call if name == call.name else dataclasses.replace(call, name=name, arguments=arguments)


async def _not_run(call: ToolCall, why: NotRun) -> tuple[ToolEvent, ToolResult]:
    return ToolEvent(call.name, call.arguments, False, 0.0, ran=False), why.result


def _over_caps(options: LoopOptions) -> NotRun:
    message = (
        f"Not run: at most {options.max_calls_per_reply} tool calls of one reply and "
        f"{options.max_calls_per_turn} in a turn are run. Answer with what you have, or "
        "make fewer calls."
    )
    return NotRun(ToolResult.error(message), ends_tools=False)


async def _run_timed(
    call: ToolCall,
    tools: ToolRegistry,
    context: ToolCallContext,
    options: LoopOptions,
    scrub: Callable[[str], str],
    replay: CallReplay | None = None,
    claim: JournalEntry | None = None,
) -> tuple[ToolEvent, ToolResult]:
    """Run one call, scrubbed; through the turn's journal when it has one (a turn that may
    run again after a crash), where `claim` is what an earlier run journalled of it."""
    started = time.perf_counter()

    async def execute() -> ToolResult:
        outcome = await run_tool(call, tools, context, options.tool_timeout_s)
        return ToolResult(ok=outcome.ok, output=scrub(outcome.output))

    outcome = await (replay.run(call, claim, execute, context) if replay else execute())
    event = ToolEvent(call.name, call.arguments, outcome.ok, time.perf_counter() - started)
    return event, outcome


async def run_tool(
    call: ToolCall, tools: ToolRegistry, context: ToolCallContext, timeout_s: float
) -> ToolResult:
    """Run one call; every failure becomes an error result that says what to do instead."""
    tool = tools.get(call.name)
    if tool is None:
        available = ", ".join(item.name for item in tools.offered()) or "none"
        return ToolResult.error(f"Unknown tool {call.name!r}. Available tools: {available}")
    try:
        args = read_json(call.arguments) if call.arguments.strip() else {}
    except json.JSONDecodeError as exc:
        if call.cut:
            return ToolResult.error(
                f"Not run: your reply reached its length limit (llm.max_tokens) while the "
                f"arguments for {call.name} were being written, so they stop short. Send "
                "less in one call (a long file in parts, say)."
            )
        return ToolResult.error(
            f"The arguments for {call.name} are not valid JSON ({exc.msg} at character "
            f"{exc.pos}); send a JSON object matching the tool's parameters"
        )
    if not isinstance(args, dict):
        return ToolResult.error(f"The arguments for {call.name} must be a JSON object")
    try:  # before the time limit starts; a gate that fails runs nothing (a refusal)
        gated = await ask_if_tainted(tool, args, context)
    except Exception as exc:
        log.exception("the taint gate of %s raised", call.name)
        return ToolResult.error(f"{call.name} was not run: {type(exc).__name__}: {exc}")
    if isinstance(gated, ToolResult):
        return gated
    try:
        async with asyncio.timeout(timeout_s) as deadline:
            return await tool.run(args, _approval_time_not_counted(gated, deadline))
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
