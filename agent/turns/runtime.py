"""ChannelRuntime: one per channel. It holds the channel's system prompt and runs its turns.

One turn at a time per chat (later messages of a chat wait their turn, in order), many
chats at once up to a shared limit. A failed turn answers one short line; the user's
message is kept in the session either way.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from agent.llm import LLMClient, LLMError, LLMRequestRejected, Message
from agent.prompt.context import Dispatch
from agent.prompt.source import Fingerprint, PromptSource
from agent.security import ScrubbedStream, Scrubber, scrub_message
from agent.turns.approvals import AlwaysAllowed, chat_approver
from agent.turns.commands import CommandContext, run_command
from agent.turns.dispatch import Dispatcher, NativeDispatcher, XmlDispatcher, configured_dispatcher
from agent.turns.loop import LoopOptions, ToolEvent, TurnResult, run_tool_call_loop
from agent.turns.media import resolve_reply
from agent.turns.sessions import SessionStore
from agent.turns.state import Access, ProviderQuirks, TurnRecord
from channels.base import Channel, ChatRef, IncomingMessage, Reply, sender_allowed
from channels.markers import marker_for
from tools.base import ToolCallContext
from tools.paths import PathRules

log = logging.getLogger(__name__)

FAILED_TURN = "Sorry, I could not answer that just now ({}). Your message is kept; try again."


class ChannelRuntime:
    def __init__(
        self,
        channel: Channel,
        *,
        access: Access,
        source: PromptSource,
        llm: LLMClient,
        sessions: SessionStore,
        turn_slots: asyncio.Semaphore,
        quirks: ProviderQuirks | None = None,
        scrub: Scrubber | None = None,
        paths: PathRules | None = None,
        always: AlwaysAllowed | None = None,
    ) -> None:
        self.channel = channel
        self.access = access
        self.source = source
        self.llm = llm
        self.sessions = sessions
        self.quirks = quirks or ProviderQuirks()
        self._slots = turn_slots
        self._scrub = scrub or Scrubber()
        self._paths = paths or PathRules.build(source.workspace, ())
        self.always = always or AlwaysAllowed(source.settings.state_db, source.workspace)
        self._locks: dict[str, asyncio.Lock] = {}
        self._running: dict[str, asyncio.Task[Reply]] = {}
        self.last_turns: dict[str, TurnRecord] = {}
        self._prompts: dict[tuple[Dispatch, bool], str] = {}
        self._fingerprint: Fingerprint = ()
        self._deliveries: set[asyncio.Task[None]] = set()
        self._closing = False
        self._strangers_told: set[str] = set()
        self.system_prompt = self._prompt("native", merged=False)

    # -- the prompt -----------------------------------------------------------------------

    def _prompt(self, dispatcher: Dispatch, *, merged: bool) -> str:
        """The channel's prompt, built once per (dispatcher, delivery placement) and kept
        until the inputs it was built from change."""
        fingerprint = self.source.fingerprint()
        if fingerprint != self._fingerprint:
            self._prompts.clear()
            self._fingerprint = fingerprint
        key = (dispatcher, merged)
        if key not in self._prompts:
            ctx = self.source.context(
                self.channel.name, self.channel.capabilities, dispatcher=dispatcher
            )
            text = self.source.build(ctx).text
            if merged and self.channel.delivery_instructions:
                text = f"{text}\n\n{self.channel.delivery_instructions}"
            self._prompts[key] = text
            if key == ("native", False):
                self.system_prompt = text
        return self._prompts[key]

    def _merge_delivery(self) -> bool:
        return (
            self.source.settings.agent.delivery_instructions == "system_prompt"
            or self.llm.model in self.quirks.merge_delivery
        )

    def _dispatcher(self) -> Dispatch:
        if self.llm.model in self.quirks.xml_tools:
            return "xml"
        return configured_dispatcher(self.source.settings.agent.tool_dispatcher, self.llm.model)

    # -- messages -------------------------------------------------------------------------

    def submit(self, msg: IncomingMessage) -> None:
        """Take a message from the channel and return at once; the turn runs in a task."""
        if self._closing:
            log.warning(
                "%s: shutting down; message from %s not taken", self.channel.name, msg.sender_id
            )
            return
        task = asyncio.create_task(self._deliver(msg))
        self._deliveries.add(task)
        task.add_done_callback(self._deliveries.discard)

    async def _deliver(self, msg: IncomingMessage) -> None:
        """Run the turn, then send the reply (or finish the stream) to the chat."""
        try:
            wanted = self.is_allowed(msg)
            stream = self.channel.open_stream(msg.chat, msg.message_id) if wanted else None
            reply = await self.handle(msg, on_text=stream.push if stream else None)
            if reply is None:
                return
            if stream is not None:
                await stream.finish(reply)
            else:
                await self.channel.send(msg.chat, reply)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception(
                "%s %s: the reply could not be delivered", self.channel.name, msg.chat.key
            )

    async def drain(self, grace_s: float) -> None:
        """Stop taking messages; let running turns finish for `grace_s`, then cancel them."""
        self._closing = True
        pending = set(self._deliveries)
        if not pending:
            return
        _, late = await asyncio.wait(pending, timeout=grace_s)
        for task in late:
            task.cancel()
        await asyncio.gather(*late, return_exceptions=True)

    def is_allowed(self, msg: IncomingMessage) -> bool:
        return self.is_allowed_sender(msg.sender_id, msg.sender_username)

    def is_allowed_sender(self, sender_id: str, username: str = "") -> bool:
        if self.access.open_to_all:
            return True
        return sender_allowed(self.access.allowed_users, sender_id, username)

    async def handle(
        self,
        msg: IncomingMessage,
        on_event: Callable[[ToolEvent], None] | None = None,
        on_text: Callable[[str], None] | None = None,
    ) -> Reply | None:
        """Answer one message; None means: say nothing (a stranger in a group)."""
        if not self.is_allowed(msg):
            log.info(
                "%s: refused message from %s (%s)",
                self.channel.name,
                msg.sender_id,
                msg.sender_name,
            )
            if msg.is_group or msg.sender_id in self._strangers_told:
                return None  # silence in groups, and one polite reply per stranger
            self._strangers_told.add(msg.sender_id)
            return Reply(text=self._stranger_text(msg), reply_to=msg.message_id)
        key = msg.chat.key
        command = await run_command(msg.text, self._command_context(key))
        if command is not None:
            return Reply(text=command, reply_to=msg.message_id)
        lock = self._locks.setdefault(key, asyncio.Lock())
        # "typing" only once the turn runs: a queued message shows nothing yet.
        async with lock, self._slots, self.channel.typing(msg.chat):
            task = asyncio.create_task(self._turn(msg, on_event, on_text))
            self._running[key] = task
            try:
                return await asyncio.shield(task)
            except asyncio.CancelledError:
                if not task.cancelled():
                    task.cancel()  # the caller was cancelled (shutdown): stop the turn too
                    raise
                return Reply(text="Stopped.", reply_to=msg.message_id)
            finally:
                self._running.pop(key, None)

    def _command_context(self, key: str) -> CommandContext:
        return CommandContext(
            key, self.sessions, self.llm.model, self.last_turns.get(key), lambda: self.cancel(key)
        )

    def cancel(self, chat_key: str) -> bool:
        task = self._running.get(chat_key)
        if task is None or task.done():
            return False
        task.cancel()
        return True

    def _stranger_text(self, msg: IncomingMessage) -> str:
        channel = self.channel.name
        env = f"PINCLAW_CHANNELS__{channel.upper()}__ALLOWED_USERS"
        return (
            f"Hello! This is a private assistant and you are not on its list. Your "
            f"{channel} user id is {msg.sender_id}. To allow you, the owner adds "
            f'"{msg.sender_id}" to allowed_users in [channels.{channel}] (or {env}) '
            "and restarts the bot."
        )

    async def _turn(
        self,
        msg: IncomingMessage,
        on_event: Callable[[ToolEvent], None] | None,
        on_text: Callable[[str], None] | None,
    ) -> Reply:
        key = msg.chat.key
        user = {"role": "user", "content": self._envelope(msg)}
        prior = await self.sessions.history(key, self.source.settings.agent.max_history_messages)
        try:
            result = await self._run(msg.chat, prior, user, on_event, on_text)
        except asyncio.CancelledError:
            await self.sessions.append_turn(key, [user])
            raise
        except LLMError as exc:
            log.error("%s %s: turn failed: %s", self.channel.name, key, exc)
            await self.sessions.append_turn(key, [user])
            self.last_turns[key] = TurnRecord("error", error=str(exc))
            reason = "the model could not be reached" if exc.status != 400 else "it was refused"
            return Reply(text=FAILED_TURN.format(reason), reply_to=msg.message_id)
        except Exception as exc:
            log.exception("%s %s: turn failed", self.channel.name, key)
            await self.sessions.append_turn(key, [user])
            self.last_turns[key] = TurnRecord("error", error=f"{type(exc).__name__}: {exc}")
            return Reply(text=FAILED_TURN.format("an internal error"), reply_to=msg.message_id)
        try:
            await self.sessions.append_turn(key, self._stored([user, *result.new_messages]))
        except Exception:  # the answer still goes out; only its record is lost
            log.exception("%s %s: the turn could not be stored", self.channel.name, key)
        self.last_turns[key] = TurnRecord(
            result.stop_reason,
            result.usage.prompt_tokens,
            result.usage.completion_tokens,
            result.usage.cost_usd,
            events=result.events,
        )
        text = self._scrub(result.text)
        return resolve_reply(text, self._paths, reply_to=msg.message_id)

    async def _run(
        self,
        chat: ChatRef,
        prior: list[Message],
        user: Message,
        on_event: Callable[[ToolEvent], None] | None,
        on_text: Callable[[str], None] | None,
    ) -> TurnResult:
        """The loop, re-sent once in a shape the provider accepts when it refuses this one."""
        dispatch = self._dispatcher()
        merged = self._merge_delivery()
        context = ToolCallContext(
            self.source.workspace,
            chat_key=chat.key,
            approve=chat_approver(
                self.channel,
                chat,
                lambda sender, username: self.is_allowed_sender(sender, username),
                always=self.always,
                timeout_s=self.source.settings.security.approval_timeout_s,
            ),
        )
        for _attempt in range(3):
            history = [
                {"role": "system", "content": self._prompt(dispatch, merged=merged)},
                *prior,
                user,
            ]
            if self.channel.delivery_instructions and not merged:
                history.append({"role": "system", "content": self.channel.delivery_instructions})
            dispatcher: Dispatcher = NativeDispatcher() if dispatch == "native" else XmlDispatcher()
            try:
                return await run_tool_call_loop(
                    history,
                    self.source.tools,
                    self.llm,
                    context=context,
                    options=LoopOptions(
                        self.source.settings.agent.max_tool_iterations,
                        self.source.settings.agent.tool_timeout_s,
                    ),
                    dispatcher=dispatcher,
                    scrub=self._scrub,
                    on_event=on_event,
                    on_text=ScrubbedStream(on_text, self._scrub) if on_text else None,
                )
            except LLMRequestRejected as exc:
                text = str(exc).lower()
                if not merged and "system message" in text and self.channel.delivery_instructions:
                    log.warning(
                        "%s rejects a non-leading system message; delivery "
                        "instructions now go in its system prompt",
                        self.llm.model,
                    )
                    self.quirks.merge_delivery.add(self.llm.model)
                    merged = True
                elif (
                    dispatch == "native"
                    and "tool" in text
                    and self.source.settings.agent.tool_dispatcher == "auto"
                ):
                    log.warning("%s rejects tools=; using the xml tool protocol", self.llm.model)
                    self.quirks.xml_tools.add(self.llm.model)
                    dispatch = "xml"
                else:
                    raise
        raise LLMError("the provider kept refusing the request", status=400)

    def _stored(self, messages: list[Message]) -> list[Message]:
        return [scrub_message(message, self._scrub) for message in messages]

    def _envelope(self, msg: IncomingMessage) -> str:
        """The user message as the model sees it: who, where, when, then the text."""
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
        lines = [f"[{now} {zone_name} | {where} | from {who}]"]
        if msg.text:
            lines.append(self._scrub(msg.text))
        for item in msg.attachments:
            path = item.path
            if path.is_absolute() and self.source.workspace in path.parents:
                path = path.relative_to(self.source.workspace)
            lines.append(marker_for(item.kind, str(path)) + (f" {item.note}" if item.note else ""))
        return "\n".join(lines)
