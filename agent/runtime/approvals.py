"""Approvals: a tool's request asked of the owner in the chat it came from, with a deadline.

An "Always allow" answer is remembered (agent/durable/always_allowed.py) unless the rule
says each time. The question shows addresses defanged (`hxxp://attacker[.]example/?d=…`):
it quotes what the model wants to do, and no client may turn that into a link to fetch.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import re
import uuid
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager

from agent.durable.always_allowed import AlwaysAllowed
from channels.base import ApprovalAnswer, ApprovalQuestion, Channel, ChatRef, MayAnswer
from tools.base import ASK_EACH_TIME, ApprovalRequest, Approver

log = logging.getLogger(__name__)
# Of a question's action, what is shown: with the reason below it, it fits Discord's 2,000.
MAX_ACTION_CHARS = 1_200

# Around the wait for a person's answer: the turn's slot given back meanwhile (Slot.asking).
# True: the person asked is not the chat's own (in a group, or the owner asked privately for
# someone else's chat), so the chat's next messages need not wait (busy.py's Answering).
Parking = Callable[[bool], AbstractAsyncContextManager[None]]


def _not_parked(aside: bool) -> AbstractAsyncContextManager[None]:
    return contextlib.nullcontext()


_SCHEME = re.compile(r"\b([a-z][a-z0-9+.-]*)://([^\s/?#<>\"'`]*)", re.I)
_NAME = r"(?:[a-z0-9_-]+\.)+[a-z][a-z0-9-]*"
# A name without a scheme is defanged where it reads as an address: followed by a path,
# a query or a port, after a user name (`git@host`), with three labels or more (a DNS
# lookup's name), or an IPv4 address. A file name ("notes.md") is left as it is.
_BARE = re.compile(
    rf"(?<![\w.@-]){_NAME}(?=[/?#]|:\d)|(?<=@){_NAME}\b|(?<![\w.-])(?:[a-z0-9_-]+\.){{2,}}"
    rf"[a-z][a-z0-9-]*\b(?![.-]?\w)|\b\d{{1,3}}(?:\.\d{{1,3}}){{3}}\b",
    re.I,
)
_SCHEMES = {"http": "hxxp", "https": "hxxps", "ftp": "fxp", "ftps": "fxps"}


def defanged(text: str) -> str:
    """`text` with every address written so that no client makes it a link (the usual
    defang: `hxxps://attacker[.]example/?d=…`); still readable, and copied back by hand."""

    def url(found: re.Match[str]) -> str:
        scheme, authority = found.group(1), found.group(2)
        shown = _SCHEMES.get(scheme.lower())
        prefix = f"{shown}://" if shown else f"{scheme}[://]"
        return prefix + authority.replace(".", "[.]")

    text = _SCHEME.sub(url, text)
    return _BARE.sub(lambda found: found.group(0).replace(".", "[.]"), text)


def question_text(request: ApprovalRequest) -> str:
    """The question as the owner reads it, with what "Always allow" would cover from now on
    (said before the button is pressed, never after); every address in it defanged. An
    action too long for a chat message is cut here, saying how much is not shown, so the
    reason stays below it: a channel's own cut at its message limit would drop both
    silently, and a page's order could sit after a harmless first screen of a task."""
    action = request.action
    if len(action) > MAX_ACTION_CHARS:
        hidden = len(action) - MAX_ACTION_CHARS
        action = f"{action[:MAX_ACTION_CHARS]}… [and {hidden:,} more characters, not shown]"
    text = f"Approve {request.tool}: {action}\n(Why I ask: {request.reason})"
    if request.always_covers:
        text += f"\n({request.always_covers})"
    return defanged(text)


def chat_approver(
    channel: Channel,
    chat: ChatRef,
    may_answer: MayAnswer,
    *,
    always: AlwaysAllowed,
    timeout_s: float,
    parked: Parking = _not_parked,
    aside: bool = False,
) -> Approver:
    """An Approver that asks in `chat`: a remembered rule passes at once; no answer within
    `timeout_s` is a denial; only people `may_answer` allows can answer. The wait runs
    inside `parked(aside)` (the turn holds no slot meanwhile)."""

    async def approve(request: ApprovalRequest) -> bool:
        remembered = await always.rules()
        each_time = any(rule.startswith(ASK_EACH_TIME) for rule in request.rules)
        if request.rules and not each_time and set(request.rules) <= set(remembered):
            return True
        question = ApprovalQuestion(uuid.uuid4().hex[:16], question_text(request))
        answer: ApprovalAnswer
        try:  # asyncio.timeout, not wait_for: wait_for can lose a /stop
            async with parked(aside), asyncio.timeout(timeout_s):
                answer = await channel.ask_approval(chat, question, may_answer)
        except TimeoutError:
            log.info("%s: no answer to %r within %g s: denied", chat.key, request.action, timeout_s)
            return False
        if answer == "always":
            for rule in (r for r in request.rules if not r.startswith(ASK_EACH_TIME)):
                await always.remember(rule)
        log.info("%s: %s %r", chat.key, answer, request.action)
        return answer in ("approve", "always")

    return approve


OwnerChat = Callable[[], Awaitable[ChatRef | None]]


def owner_approver(
    channel: Channel,
    owner_chat: OwnerChat,
    is_owner: MayAnswer,
    *,
    for_chat: ChatRef,
    always: AlwaysAllowed,
    timeout_s: float,
    parked: Parking = _not_parked,
) -> Approver:
    """An Approver for a question only the owner may answer (ApprovalRequest.owner_only: it
    comes after words the owner did not write) in someone else's turn: asked in the owner's
    private chat on this channel, naming the chat it is for; none known: denied. (With no
    owner in [people] at all, `routed` is not used: the chat's allowed people answer.)"""

    async def approve(request: ApprovalRequest) -> bool:
        chat = await owner_chat()
        if chat is None:
            log.warning(
                "%s: %r needs the owner's yes and no private chat of the owner's is known "
                "on %s: denied",
                for_chat.key,
                request.action,
                channel.name,
            )
            return False
        asked = dataclasses.replace(request, action=f"{request.action} (in {for_chat.key})")
        elsewhere = chat.key != for_chat.key  # the chat waits on someone who is not in it
        ask = chat_approver(
            channel,
            chat,
            is_owner,
            always=always,
            timeout_s=timeout_s,
            parked=parked,
            aside=elsewhere,
        )
        return await ask(asked)

    return approve


def turn_approvers(
    channel: Channel,
    chat: ChatRef,
    may_answer: MayAnswer,
    owner: tuple[OwnerChat, MayAnswer] | None,
    *,
    always: AlwaysAllowed,
    timeout_s: float,
    parked: Parking = _not_parked,
    group: bool = False,
) -> tuple[Approver, Approver | None]:
    """A turn's two ways to ask: in its chat, and the owner privately (`owner`: how to find
    the owner's private chat, and who the owner is; None: no owner is named in [people] on
    this channel, so there is nobody to ask privately and the chat's people answer). In a
    `group` the question asked there sets the turn aside too: others wait on the button."""
    in_chat = chat_approver(
        channel,
        chat,
        may_answer,
        always=always,
        timeout_s=timeout_s,
        parked=parked,
        aside=group,
    )
    if owner is None:
        return in_chat, None
    owner_chat, is_owner = owner
    privately = owner_approver(
        channel,
        owner_chat,
        is_owner,
        for_chat=chat,
        always=always,
        timeout_s=timeout_s,
        parked=parked,
    )
    return in_chat, privately


def routed(in_chat: Approver, owner: Approver) -> Approver:
    """Questions only the owner may answer go to `owner`; the rest are asked in the chat."""

    async def approve(request: ApprovalRequest) -> bool:
        return await (owner if request.owner_only else in_chat)(request)

    return approve
