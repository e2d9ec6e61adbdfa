"""The courier: sends one channel's queued replies from the outbox.

Per chat one reply after another, in the order they were queued (so in the order of the
messages they answer); chats do not wait for each other (one `KeyedWorker` task per chat,
which outlives any error: a failed write is tried again with backoff).

Each part at most once, and never a silent duplicate: before a part is sent its attempt is
committed; after, its outcome (the platform's message id, or why it was refused). An outcome
that cannot be written stays in memory and is written before anything else of the chat
happens: retry the mark, never the send. A part whose fate is unknown — an attempt with no
outcome after a crash, or a send the platform did not answer in time — is sent again only
where the platform drops a duplicate (Discord's nonce, within its window); elsewhere it is
logged as possibly lost, or, with `channels.delivery = "at_least_once"`, sent again with a
visible marker. A part that fails plainly (a 429, a refused connection) is retried with
backoff, honouring the platform's retry_after, until the reply's deadline; then the reply is
marked expired. A part the platform refuses for good is stored as refused, with the reason.
A part refused because the bot's token was (revoked or replaced: a definite "not sent") stays
pending, and the courier sends nothing more: the channel restarts when its token changes in
agent.env, and the next runtime's courier sends it, once, with the new token.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import hashlib
import logging
import time
from typing import Literal

from agent.durable.outbox import Outbox, Outgoing, PartOutcome
from agent.durable.store import Claims, OneProcess
from agent.runtime.queues.keyed_worker import KeyedWorker
from channels.base import Channel, OutgoingPart, Reply, ReplyStream, SendFailed
from tools.paths import PathRules, PolicyError

log = logging.getLogger(__name__)

MAX_BACKOFF_S = 60.0
MAX_MEDIA_BYTES = 50 * 1024 * 1024  # Telegram's upload limit for bots; Discord's is lower
AFTER_RESTART = "(sent again after a restart: it may have arrived before)"
AFTER_NO_ANSWER = "(sent again: the first try got no answer and may have arrived)"
Unsure = Literal["resend", "mark", "give up"]
SENDS = "sends"  # the claim on a chat's sending, when processes share the store


class Courier:
    def __init__(
        self,
        channel: Channel,
        outbox: Outbox,
        *,
        backoff_s: float = 1.0,
        files: PathRules | None = None,
        delivery: str = "at_most_once",
        claims: Claims | None = None,
    ) -> None:
        self._channel = channel
        self._claims = claims or OneProcess()  # the store's, when processes share it
        self._outbox = outbox
        self._files = files  # a reply's local files are read through it; None: none sent
        self._backoff_s = backoff_s
        self._at_least_once = delivery == "at_least_once"
        self._worker = KeyedWorker(self._send_all, what="delivery", health=outbox.health)
        self._unsaved: dict[str, list[PartOutcome]] = {}  # chat -> outcomes not written yet
        self._token_refused = ""  # why the platform refused the bot's token; "": it did not
        self.streams: dict[int, ReplyStream] = {}  # outbox id -> the preview its reply replaces

    def wake(self, chat_key: str) -> None:
        """There is something new to send in this chat (kept for the channel's next start
        while the platform refuses the bot's token)."""
        if not self._token_refused:
            self._worker.wake(chat_key)

    async def resume(self) -> None:
        """Send what an earlier run left in the outbox (also the sweep's call)."""
        for chat_key in await self._outbox.chats_waiting(self._channel.name):
            self.wake(chat_key)

    @property
    def busy(self) -> bool:
        return self._worker.busy

    async def drain(self, grace_s: float) -> None:
        """Let sending go on for `grace_s`; what is left stays queued for the next start."""
        await self._worker.drain(grace_s)

    async def _send_all(self, chat_key: str) -> None:
        """The chat's replies in order, by one process at a time (the sweep looks again)."""
        claims = self._claims
        if not await claims.take(SENDS, chat_key):
            return
        try:
            outgoing = await self._save(chat_key, then_next=True)
            while outgoing is not None:
                outgoing = await self._deliver(outgoing)
        finally:
            if claims.shared:
                await claims.give_back(SENDS, chat_key)

    async def _save(
        self, chat_key: str, outcome: PartOutcome | None = None, *, then_next: bool = False
    ) -> Outgoing | None:
        """Write the chat's outcomes not written yet (they stay in memory until they are);
        with `then_next`, read its oldest pending reply in the same trip."""
        unsaved = self._unsaved.setdefault(chat_key, [])
        if outcome is not None:
            unsaved.append(outcome)
        if then_next:
            self._worker.settle(chat_key)  # what is queued from here on, the read sees
        if not unsaved:
            self._unsaved.pop(chat_key, None)
            return await self._outbox.oldest(chat_key) if then_next else None
        nxt = await self._outbox.record(unsaved, next_of=chat_key if then_next else None)
        self._unsaved.pop(chat_key, None)
        return nxt

    async def _deliver(self, outgoing: Outgoing) -> Outgoing | None:
        """Send the reply's parts from the first not sent; then the chat's next reply, read
        in the same trip as the last outcome (or None when there is none)."""
        key, parts = outgoing.chat.key, outgoing.parts
        stream = self.streams.pop(outgoing.id, None)
        index, backoff = outgoing.sent, self._backoff_s
        unsure_since, marker = outgoing.attempted_at, AFTER_RESTART
        nxt: Outgoing | None = None
        while index < len(parts):
            last = index == len(parts) - 1
            resend = ""
            if unsure_since is not None:
                how = self._unsure(outgoing, unsure_since)
                unsure_since = None
                if how == "give up":
                    lost = self._lost(outgoing, index, marker)
                    nxt = await self._save(key, lost, then_next=last)
                    index += 1
                    continue
                resend = marker if how == "mark" else ""
            await self._outbox.attempt(outgoing.id, index)
            attempted_at = time.time()
            try:
                message_id = await self._send(outgoing, index, resend, stream)
            except SendFailed as exc:
                if exc.token_refused:
                    await self._wait_for_token(outgoing, index, str(exc))
                    return None  # this chat's worker ends: nothing to send with this token
                if exc.permanent:
                    log.warning("%s: the platform refused part %d: %s", key, index + 1, exc)
                    refused = PartOutcome(outgoing.id, index, "refused", last, reason=str(exc))
                    nxt = await self._save(key, refused, then_next=last)
                    index += 1
                    continue
                if exc.maybe_sent:
                    log.warning("%s: part %d got no answer (%s)", key, index + 1, exc)
                    unsure_since, marker = attempted_at, AFTER_NO_ANSWER
                    await asyncio.sleep(backoff)
                else:
                    wait = max(exc.retry_after or 0.0, backoff)
                    if not await self._wait_or_expire(outgoing, index, str(exc), wait):
                        return await self._save(key, then_next=True)
                backoff = min(backoff * 2, MAX_BACKOFF_S)
                continue
            except Exception:  # unknown: whether it went out is unknown too
                log.exception("%s: sending part %d failed unexpectedly", key, index + 1)
                unsure_since, marker = attempted_at, AFTER_NO_ANSWER
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_S)
                continue
            sent = PartOutcome(outgoing.id, index, "sent", last, message_id=message_id or "")
            nxt = await self._save(key, sent, then_next=last)
            index += 1
        if outgoing.sent >= len(parts):  # nothing to send (an empty reply): done
            done = PartOutcome(outgoing.id, -1, "sent", last=True)
            return await self._save(key, done, then_next=True)
        return nxt

    async def _send(
        self, outgoing: Outgoing, index: int, resend: str, stream: ReplyStream | None
    ) -> str | None:
        """One attempt at the part (in place of the streamed preview when it is the first);
        the platform's message id."""
        part = self._prepared(outgoing, index)
        if resend:
            await self._announce(outgoing, part, resend)
            part = self._marked(part, resend)
        elif index == 0 and stream is not None and await _replaced(stream, part):
            return None
        return await self._channel.send_part(outgoing.chat, await self._loaded(part))

    def _unsure(self, outgoing: Outgoing, attempted_at: float) -> Unsure:
        """A part that may have gone out: sent again only where the platform drops a
        duplicate; otherwise given up on (at most once), or sent again with a marker."""
        now = time.time()
        window = self._channel.capabilities.nonce_window_s
        if now > outgoing.deliver_by:
            return "give up"
        if window and now - attempted_at < window:
            return "resend"
        return "mark" if self._at_least_once else "give up"

    def _lost(self, outgoing: Outgoing, index: int, marker: str) -> PartOutcome:
        when = "pinclaw stopped" if marker == AFTER_RESTART else "no answer came"
        why = f"possibly lost: it was being sent when {when}, and the platform cannot tell"
        log.warning("%s: reply %d part %d %s", outgoing.chat.key, outgoing.id, index + 1, why)
        last = index == len(outgoing.parts) - 1
        return PartOutcome(outgoing.id, index, "unknown", last, reason=why)

    def _prepared(self, outgoing: Outgoing, index: int) -> OutgoingPart:
        """The part with its nonce: the same on every attempt, in every run."""
        seed = f"{outgoing.id}:{index}:{outgoing.created_at!r}".encode()
        nonce = hashlib.blake2b(seed, digest_size=8).hexdigest()
        return dataclasses.replace(outgoing.parts[index], nonce=nonce)

    def _marked(self, part: OutgoingPart, marker: str) -> OutgoingPart:
        """The text with the marker in front, when it still fits one message."""
        if part.media is not None or not self._fits(part, marker):
            return part
        return dataclasses.replace(part, text=f"{marker}\n{part.text}")

    def _fits(self, part: OutgoingPart, marker: str) -> bool:
        return len(self._channel.parts(Reply(f"{marker}\n{part.text}"))) == 1

    async def _announce(self, outgoing: Outgoing, part: OutgoingPart, marker: str) -> None:
        """A file, or a text too long for the marker: the marker as a line of its own."""
        if part.media is None and self._fits(part, marker):
            return
        try:
            await self._channel.send_part(outgoing.chat, OutgoingPart(text=marker))
        except SendFailed as exc:
            log.info("%s: the resend marker did not go out (%s)", outgoing.chat.key, exc)

    async def _loaded(self, part: OutgoingPart) -> OutgoingPart:
        """A local file's bytes read through the workspace's resolver now, just before
        sending (a file swapped for a link since the reply was made is refused); a file
        that cannot be read becomes a line saying so. A document pinclaw made (a long
        reply) is its stored text, a voice note it made its stored audio."""
        media = part.media
        if media is not None and (media.inline or media.spoken):
            data = base64.b64decode(media.spoken) if media.spoken else media.inline.encode()
            return dataclasses.replace(part, media=dataclasses.replace(media, data=data))
        if media is None or media.is_url:
            return part
        try:
            if self._files is None:
                raise PolicyError("no workspace to read it from")
            read = self._files.read_bytes
            data = await asyncio.to_thread(read, media.source, MAX_MEDIA_BYTES)
        except (PolicyError, OSError) as exc:
            why = exc.short if isinstance(exc, PolicyError) else (exc.strerror or str(exc))
            return dataclasses.replace(
                part, text=f"(Could not send {media.name}: {why}.)", media=None
            )
        return dataclasses.replace(part, media=dataclasses.replace(media, data=data))

    async def _wait_for_token(self, outgoing: Outgoing, index: int, error: str) -> None:
        """The platform refused the bot's token: the part was not sent (its attempt is
        removed) and stays pending, past its deadline too, for the channel's next token;
        nothing more is sent with this one."""
        self._token_refused = error
        unsent = PartOutcome(outgoing.id, index, "unsent", reason=f"token refused: {error}")
        await self._save(outgoing.chat.key, unsent)
        log.warning(
            "%s: the platform refused the bot's token (%s); reply %d part %d was not sent and "
            "waits for the channel's next token (agent.env)",
            outgoing.chat.key,
            error,
            outgoing.id,
            index + 1,
        )

    async def _wait_or_expire(
        self, outgoing: Outgoing, index: int, error: str, wait_s: float
    ) -> bool:
        """The part was not taken: wait before the next attempt; False (and the reply
        expired) when the next attempt would come after the reply's deadline."""
        expired = time.time() + wait_s > outgoing.deliver_by
        unsent = PartOutcome(outgoing.id, index, "unsent", reason=error, expired=expired)
        await self._save(outgoing.chat.key, unsent)
        if expired:
            log.error(
                "%s: reply %d not delivered by its deadline; last error: %s",
                outgoing.chat.key,
                outgoing.id,
                error,
            )
            return False
        log.info("%s: sending again in %.1f s (%s)", outgoing.chat.key, wait_s, error)
        await asyncio.sleep(wait_s)
        return True


async def _replaced(stream: ReplyStream, part: OutgoingPart) -> bool:
    """The first part in place of the streamed preview; False: send it (a file: preview gone)."""
    try:
        if part.media is None:
            return await stream.finish(part)
        await stream.discard()
    except Exception as exc:
        log.info("the streamed preview could not be replaced (%s); sending anew", exc)
    return False
