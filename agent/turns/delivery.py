"""The courier: sends one channel's queued replies from the outbox.

Per chat one reply after another, in the order they were queued (so in the order of the
messages they answer); chats do not wait for each other. A part that fails is retried with
backoff, honouring the platform's retry_after, until the reply's deadline; then the reply is
marked expired. A part the platform refuses for good is skipped and logged. Each part is
marked as it goes, so a restart resumes at the first part not yet sent (a part sent just
before a crash may be sent again: at least once, never lost).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time

from agent.turns.outbox import Outbox, Outgoing
from channels.base import Channel, OutgoingPart, ReplyStream, SendFailed
from tools.paths import PathRules, PolicyError

log = logging.getLogger(__name__)

MAX_BACKOFF_S = 60.0
MAX_MEDIA_BYTES = 50 * 1024 * 1024  # Telegram's upload limit for bots; Discord's is lower


class Courier:
    def __init__(
        self,
        channel: Channel,
        outbox: Outbox,
        *,
        backoff_s: float = 1.0,
        files: PathRules | None = None,
    ) -> None:
        self._channel = channel
        self._outbox = outbox
        self._files = files  # a reply's local files are read through it; None: none sent
        self._backoff_s = backoff_s
        self._senders: dict[str, asyncio.Task[None]] = {}
        self._again: set[str] = set()
        self.streams: dict[int, ReplyStream] = {}  # outbox id -> the preview its reply replaces

    def wake(self, chat_key: str) -> None:
        """There is something new to send in this chat."""
        self._again.add(chat_key)
        if chat_key not in self._senders:
            task = asyncio.create_task(self._send_all(chat_key), name=f"send {chat_key}")
            self._senders[chat_key] = task

    async def resume(self) -> None:
        """Send what an earlier run left in the outbox."""
        for chat_key in await self._outbox.chats_waiting(self._channel.name):
            self.wake(chat_key)

    @property
    def busy(self) -> bool:
        return any(not task.done() for task in self._senders.values())

    async def drain(self, grace_s: float) -> None:
        """Let sending go on for `grace_s`; what is left stays queued for the next start."""
        pending = [task for task in self._senders.values() if not task.done()]
        if pending:
            _, late = await asyncio.wait(pending, timeout=grace_s)
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)

    async def _send_all(self, chat_key: str) -> None:
        try:
            outgoing = await self._next(chat_key)
            while outgoing is not None or chat_key in self._again:  # woken while reading
                if outgoing is None:
                    outgoing = await self._next(chat_key)
                else:
                    outgoing = await self._deliver(outgoing)
        except asyncio.CancelledError:
            raise
        except Exception:  # the store went away: the reply stays queued for the next start
            log.exception("%s: delivery stopped", chat_key)
        finally:
            self._senders.pop(chat_key, None)

    async def _next(self, chat_key: str) -> Outgoing | None:
        """The chat's oldest reply still to send; a wake() from here on is not missed."""
        self._again.discard(chat_key)
        return await self._outbox.oldest(chat_key)

    async def _deliver(self, outgoing: Outgoing) -> Outgoing | None:
        """Send the reply's parts; then the chat's next reply, read in the same trip as the
        last mark (or None when there is none)."""
        sent, backoff = outgoing.sent, self._backoff_s
        stream = self.streams.pop(outgoing.id, None)
        while sent < len(outgoing.parts):
            part = outgoing.parts[sent]
            try:
                if not (sent == 0 and stream is not None and await _replaced(stream, part)):
                    await self._channel.send_part(outgoing.chat, await self._loaded(part))
            except SendFailed as exc:
                if exc.permanent:
                    log.warning("%s: a part was refused for good: %s", outgoing.chat.key, exc)
                else:
                    wait = max(exc.retry_after or 0.0, backoff)
                    if not await self._wait_or_expire(outgoing, str(exc), wait):
                        return await self._next(outgoing.chat.key)
                    backoff = min(backoff * 2, MAX_BACKOFF_S)
                    continue
            except Exception as exc:  # unexpected: retried like a network error
                log.warning(
                    "%s: sending failed: %s: %s", outgoing.chat.key, type(exc).__name__, exc
                )
                if not await self._wait_or_expire(
                    outgoing, f"{type(exc).__name__}: {exc}", backoff
                ):
                    return await self._next(outgoing.chat.key)
                backoff = min(backoff * 2, MAX_BACKOFF_S)
                continue
            sent += 1
            if sent < len(outgoing.parts):
                await self._outbox.mark_sent(outgoing.id, sent, done=False)
        self._again.discard(outgoing.chat.key)  # what is queued from here on, the read sees
        return await self._outbox.mark_sent(outgoing.id, sent, done=True, next_of=outgoing.chat.key)

    async def _loaded(self, part: OutgoingPart) -> OutgoingPart:
        """A local file's bytes read through the workspace's resolver now, just before
        sending (a file swapped for a link since the reply was made is refused); a file
        that cannot be read becomes a line saying so."""
        media = part.media
        if media is None or media.is_url:
            return part
        try:
            if self._files is None:
                raise PolicyError("no workspace to read it from")
            read = self._files.read_bytes
            data = await asyncio.to_thread(read, media.source, MAX_MEDIA_BYTES)
        except (PolicyError, OSError) as exc:
            why = exc.short if isinstance(exc, PolicyError) else (exc.strerror or str(exc))
            return OutgoingPart(text=f"(Could not send {media.name}: {why}.)")
        return dataclasses.replace(part, media=dataclasses.replace(media, data=data))

    async def _wait_or_expire(self, outgoing: Outgoing, error: str, wait_s: float) -> bool:
        """Wait before the next attempt; False (and the reply expired) when the next attempt
        would come after the reply's deadline."""
        expired = time.time() + wait_s > outgoing.deliver_by
        await self._outbox.note_failure(outgoing.id, error, expired=expired)
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
    """Put the first part in place of the streamed preview; False: send it normally."""
    if part.media is not None:
        return False
    try:
        return await stream.finish(part)
    except Exception as exc:
        log.info("the streamed preview could not be replaced (%s); sending anew", exc)
        return False
