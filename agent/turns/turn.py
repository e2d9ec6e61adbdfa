"""One turn of one channel: the channel's system prompt, the user's envelope, the tool-call
loop, and what of it is stored. No queueing here: runtime.py decides when a turn runs and
what happens to its reply."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from agent.durable.learned_model_facts import LearnedModelFacts, Placement
from agent.durable.triggers import Trigger, trigger_text
from agent.model.profiles.litellm_facts import supports_vision
from agent.model.responses import (
    BudgetSpent,
    LLMError,
    LLMRequestRejected,
    Message,
    ModelClient,
    OnRetry,
)
from agent.prompt.context import SILENT_REPLY, Dispatch
from agent.prompt.source import Fingerprint, PromptSource
from agent.security import ScrubbedStream, Scrubber, scrub_message
from agent.turns.client_tools import with_client_tools
from agent.turns.dispatch import Dispatcher, NativeDispatcher, XmlDispatcher, configured_dispatcher
from agent.turns.loop import LoopOptions, ToolEvent, TurnResult, run_tool_call_loop
from agent.turns.turn_record import TurnRecord
from agent.turns.vision import image_part
from channels.base import Channel, IncomingMessage
from channels.markers import marker_for
from tools.base import ToolCallContext
from tools.paths import PolicyError

log = logging.getLogger(__name__)

MAX_IMAGE_BYTES = 30 * 1024 * 1024  # a photo larger than this is not shown to the model

FAILED_TURN = "Sorry, I could not answer that just now ({})."
UNREACHABLE = "the model could not be reached"


Steer = Callable[[], Awaitable[list[Message]]]


@dataclass(frozen=True)
class Streams:
    """Who hears a turn while it runs: its tool events, its streamed text, and the model
    calls being tried again."""

    on_event: Callable[[ToolEvent], None] | None = None
    on_text: Callable[[str], None] | None = None
    on_retry: OnRetry = None
    steer: Steer | None = None  # the person's messages since, joined after a round of tools


@dataclass
class TurnOutcome:
    """`retry`: no model answered; the message should wait and run again. `interrupted`: a
    newer message stopped it (busy mode "interrupt"); its rows run again with that one."""

    status: Literal["done", "failed", "retry", "interrupted"]
    text: str  # the reply (scrubbed), or the failure line
    messages: list[Message]  # what to store: the user's message, then what answered it
    record: TurnRecord
    # What untrusted content the turn read ("" none; else Taint.why(), "after reading
    # example.org/page"): its reply goes out without link previews.
    tainted_by: str = ""
    unvetted: tuple[int, ...] = ()  # memories it kept unvetted: the owner is asked to vet


class TurnRunner:
    def __init__(
        self,
        channel: Channel,
        *,
        source: PromptSource,
        llm: ModelClient,
        quirks: LearnedModelFacts,
        scrub: Scrubber,
    ) -> None:
        self.channel = channel
        self.source = source
        self.llm = llm
        self.quirks = quirks
        self._scrub = scrub
        self._prompts: dict[tuple[Dispatch, bool, bool], str] = {}
        self._fingerprint: Fingerprint = ()
        self.prompt("native", merged=False)  # built now, at start, not for the first message

    def prompt(self, dispatcher: Dispatch, *, merged: bool, private: bool = True) -> str:
        """The channel's prompt, built once per (dispatcher, delivery placement, audience)
        and kept until the inputs it was built from change."""
        fingerprint = self.source.fingerprint()
        if fingerprint != self._fingerprint:
            self._prompts.clear()
            self._fingerprint = fingerprint
        key = (dispatcher, merged, private)
        if key not in self._prompts:
            ctx = self.source.context(
                self.channel.name,
                self.channel.capabilities,
                dispatcher=dispatcher,
                private=private,
            )
            text = self._scrub(self.source.build(ctx).text)  # a secret pasted in SOUL.md
            if merged and self.channel.delivery_instructions:
                text = f"{text}\n\n{self.channel.delivery_instructions}"
            self._prompts[key] = text
        return self._prompts[key]

    async def run(
        self,
        msg: IncomingMessage,
        prior: list[Message],
        context: ToolCallContext,
        *,
        deadline_s: float,
        private: bool = True,
        remembered: str = "",
        on_event: Callable[[ToolEvent], None] | None = None,
        on_text: Callable[[str], None] | None = None,
        on_retry: OnRetry = None,
        trigger: Trigger | None = None,
        llm: ModelClient | None = None,
        steer: Steer | None = None,
    ) -> TurnOutcome:
        """Run the turn to an outcome; only cancellation escapes. `private`: the owner's own
        conversation (the prompt may hold USER.md and MEMORY.md); `remembered`: memories
        recalled for this message, shown in its envelope (never in the system prompt);
        `trigger`: a schedule or the heartbeat started it, not a person; `llm`: this turn's
        model (the chat's choice, metered: agent/runtime/owner/metering.py), else the runner's."""
        user: Message = {"role": "user", "content": self.envelope(msg, remembered, trigger)}
        llm = llm or self.llm
        try:
            async with asyncio.timeout(deadline_s):
                asked = await self._with_images(user, msg, llm.model)
                streams = Streams(on_event, on_text, on_retry, steer)
                result = await self._loop(prior, asked, context, private, streams, llm)
        except TimeoutError:
            error = f"the turn took longer than {deadline_s:g} s"
            log.error("%s %s: %s", self.channel.name, msg.chat.key, error)
            return TurnOutcome(
                "retry", FAILED_TURN.format(UNREACHABLE), [user], TurnRecord("error", error=error)
            )
        except BudgetSpent as exc:  # a limit reached mid-turn: the turn ends, saying which
            log.warning("%s %s: turn stopped: %s", self.channel.name, msg.chat.key, exc)
            return TurnOutcome("failed", str(exc), [user], TurnRecord("budget", error=str(exc)))
        except LLMError as exc:
            log.error("%s %s: turn failed: %s", self.channel.name, msg.chat.key, exc)
            record = TurnRecord("error", error=str(exc))
            if exc.status == 400:
                return TurnOutcome("failed", FAILED_TURN.format("it was refused"), [user], record)
            return TurnOutcome("retry", FAILED_TURN.format(UNREACHABLE), [user], record)
        except Exception as exc:
            log.exception("%s %s: turn failed", self.channel.name, msg.chat.key)
            record = TurnRecord("error", error=f"{type(exc).__name__}: {exc}")
            return TurnOutcome("failed", FAILED_TURN.format("an internal error"), [user], record)
        record = TurnRecord(
            result.stop_reason,
            result.usage.prompt_tokens,
            result.usage.completion_tokens,
            result.usage.cost_usd,
            events=result.events,
            handed_back=result.handed_back,
        )
        stored = [user, *(scrub_message(m, self._scrub) for m in result.new_messages)]
        taint = context.taint
        return TurnOutcome(
            "done", self._scrub(result.text), stored, record, taint.why(), (*taint.left_unvetted,)
        )

    async def _loop(
        self,
        prior: list[Message],
        user: Message,
        context: ToolCallContext,
        private: bool,
        streams: Streams,
        llm: ModelClient,
    ) -> TurnResult:
        """The loop, sent again in a shape the provider takes when it refuses this one: see
        agent/durable/learned_model_facts.py."""
        model = llm.model
        dispatch = self._dispatcher(model)
        placement = self._placement(model)
        agent = self.source.settings.agent
        instructions = self.channel.delivery_instructions
        for _attempt in range(3):
            merged = placement == "system_prompt"
            system = self.prompt(dispatch, merged=merged, private=private)
            asked = with_operator_note(user, instructions) if placement == "in_user" else user
            history = [{"role": "system", "content": system}, *prior, asked]
            if instructions and placement == "after_user":
                history.append({"role": "system", "content": instructions})
            dispatcher: Dispatcher = NativeDispatcher() if dispatch == "native" else XmlDispatcher()
            # What load_tool loads lives as long as the loop; an API client's tools beside.
            tools, theirs = with_client_tools(self.source.turn_tools())
            try:
                return await run_tool_call_loop(
                    history,
                    tools,
                    llm,
                    context=context,
                    options=LoopOptions(
                        agent.max_tool_iterations,
                        agent.tool_timeout_s,
                        agent.max_tool_calls_per_reply,
                        agent.max_tool_calls_per_turn,
                        hand_back=theirs,
                    ),
                    dispatcher=dispatcher,
                    scrub=self._scrub,
                    on_event=streams.on_event,
                    on_text=ScrubbedStream(streams.on_text, self._scrub)
                    if streams.on_text
                    else None,
                    on_retry=streams.on_retry,
                    steer=streams.steer,
                )
            except LLMRequestRejected as exc:
                text = str(exc).lower()
                names_tools = "tool" in text or "function" in text
                if dispatch == "native" and names_tools and agent.tool_dispatcher == "auto":
                    await self.quirks.learn_xml_tools(model)
                    dispatch = "xml"
                elif instructions and placement == "after_user":
                    await self.quirks.learn_placement(model, "in_user")
                    placement = "in_user"
                else:
                    raise
        raise LLMError("the provider kept refusing the request", status=400)

    async def _with_images(self, user: Message, msg: IncomingMessage, model: str) -> Message:
        """With vision, this turn's photos go along as image parts (the stored turn keeps
        only the text, so history does not carry them)."""
        photos = [item.path for item in msg.attachments if item.kind == "IMAGE"]
        llm = self.source.settings.llm
        if not photos or llm.vision == "off":
            return user
        if llm.vision == "auto" and not supports_vision(llm, model):
            return user
        parts = [await asyncio.to_thread(self._image, path, llm.vision_max_px) for path in photos]
        images = [part for part in parts if part is not None]
        if not images:
            return user
        return {**user, "content": [{"type": "text", "text": user["content"]}, *images]}

    def _image(self, path: Path, max_px: int) -> dict[str, Any] | None:
        """The photo read through the workspace's resolver (no link followed), as a part."""
        try:
            data = self.source.files.read_bytes(str(path), MAX_IMAGE_BYTES)
        except (PolicyError, OSError) as exc:
            log.warning("%s is not shown to the model: %s", path.name, exc)
            return None
        return image_part(data, path.name, max_px)

    def first_request(self) -> tuple[list[Message], list[dict[str, Any]] | None]:
        """How a new private chat's first request begins, as `_loop` sends it: the system
        prompt, an empty user message, the tools (what a read-ahead sends)."""
        model = self.llm.model
        dispatch = self._dispatcher(model)
        system = self.prompt(dispatch, merged=self._placement(model) == "system_prompt")
        dispatcher: Dispatcher = NativeDispatcher() if dispatch == "native" else XmlDispatcher()
        tools, _ = with_client_tools(self.source.turn_tools())
        messages: list[Message] = [
            {"role": "system", "content": system},
            {"role": "user", "content": ""},
        ]
        return messages, dispatcher.request_tools(tools)

    def _placement(self, model: str) -> Placement:
        configured = self.source.settings.agent.delivery_instructions
        if configured != "after_user":
            return configured
        return self.quirks.placement.get(model, "after_user")

    def _dispatcher(self, model: str) -> Dispatch:
        if model in self.quirks.xml_tools:
            return "xml"
        return configured_dispatcher(self.source.settings, model)

    def envelope(
        self, msg: IncomingMessage, remembered: str = "", trigger: Trigger | None = None
    ) -> str:
        """The user message as the model sees it: who, where, when, what is remembered
        that may bear on it, then the text (for a trigger: what it asks, marked as such)."""
        zone_name = self.source.timezone
        try:
            zone = ZoneInfo(zone_name)
        except (ZoneInfoNotFoundError, ValueError):
            zone, zone_name = ZoneInfo("UTC"), "UTC"
        now = datetime.now(zone).strftime("%a %Y-%m-%d %H:%M")
        who = msg.sender_name or msg.sender_id
        if msg.sender_username:
            who += f" (@{msg.sender_username})"
        where = f"{self.channel.name} group" if msg.is_group else self.channel.name
        source = f"from {who}" if trigger is None else trigger.kind
        lines = [f"[{now} {zone_name} | {where} | {source}]"]
        if remembered:
            lines.append(remembered)
        if trigger is not None:  # a task a tool call wrote, not a person's text
            lines.append(trigger_text(trigger, self._scrub(msg.text), zone))
        elif msg.text:
            lines.append(msg.text)  # scrubbed where it entered (ChannelRuntime.entered)
        workspace = self.source.workspace
        for item in msg.attachments:
            path = item.path
            if path.is_absolute() and workspace in path.parents:
                path = path.relative_to(workspace)
            lines.append(marker_for(item.kind, str(path)) + (f" {item.note}" if item.note else ""))
        return "\n".join(lines)


def with_operator_note(user: Message, instructions: str | None) -> Message:
    """The user turn with the channel's delivery instructions inside it, marked as not the
    user's words: for models whose template takes no system message after the user."""
    if not instructions:
        return user
    note = f"\n\n[Operator note, not from the user: {instructions}]"
    content = user["content"]
    if isinstance(content, list):
        return {**user, "content": [*content, {"type": "text", "text": note.strip()}]}
    return {**user, "content": f"{content}{note}"}


def is_silent(text: str) -> bool:
    """The model chose not to answer a group message."""
    return text.strip() == SILENT_REPLY


class HoldSilentPrefix:
    """A stream filter for groups: nothing is shown while the reply could still be the
    silent token, so a "NO_REPLY" never flashes up in the chat."""

    def __init__(self, on_text: Callable[[str], None]) -> None:
        self._on_text = on_text
        self._held = ""
        self._open = False

    def __call__(self, delta: str) -> None:
        if self._open:
            self._on_text(delta)
            return
        self._held += delta
        if not SILENT_REPLY.startswith(self._held.strip()):
            self._open = True
            self._on_text(self._held)
