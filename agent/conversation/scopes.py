"""Whose conversation a message is: the memory scope it writes to and reads from, and
whether it is the owner's private conversation (which alone sees MEMORY.md and USER.md).

- The terminal is the owner.
- A private chat (a DM) belongs to the person who writes. `[people.NAME]`
  maps one person's ids across channels, so what Alice says on Telegram is recalled on
  Discord; an unmapped sender is their own person ("telegram:123").
- A group, server channel or thread is a scope of its own. A person's private memories never
  surface there, and the group's surface in private chats only with
  `memory.share_group_memories`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from agent.config import PersonSettings
from channels.base import ChatRef, IncomingMessage
from channels.registry import kind_named
from tools.base import Speaker

OWNER = "person:owner"
# The OpenAI-compatible API's chats (agent/http/): their sender is the [people] name of the
# key that asked, so the turn is that person's, as in their private chat.
API_CHANNEL = "api"
GROUPS = "group:*"  # every group scope, for share_group_memories


@dataclass(frozen=True)
class Audience:
    scope: str  # where memory_store writes
    recall: tuple[str, ...]  # what memory_recall and auto-recall may read
    owner_private: bool  # the owner alone, privately: MEMORY.md and USER.md may be shown
    person: str  # who wrote: their person scope (the owner's at the terminal), in a group too


def person_of(people: Mapping[str, PersonSettings], channel: str, sender_id: str) -> str:
    """The person's scope: their [people] name, or the channel and id when unmapped."""
    for name, person in people.items():
        if sender_id and person.id_on(channel) == sender_id:
            return OWNER if person.owner else f"person:{name}"
    return f"person:{channel}:{sender_id}"


def audience_of(
    msg: IncomingMessage,
    people: Mapping[str, PersonSettings],
    *,
    share_group_memories: bool = False,
) -> Audience:
    legacy = f"chat:{msg.chat.key}"  # memories made before scopes, in this very chat
    if msg.chat.channel == "cli":
        return Audience(OWNER, (OWNER, legacy), owner_private=True, person=OWNER)
    person = person_of(people, msg.chat.channel, msg.sender_id)
    if msg.chat.channel == API_CHANNEL and msg.sender_id in people:
        person = OWNER if people[msg.sender_id].owner else f"person:{msg.sender_id}"
    if msg.is_group:
        scope = f"group:{msg.chat.key}"
        return Audience(scope, (scope, legacy), owner_private=False, person=person)
    recall = (person, legacy, GROUPS) if share_group_memories else (person, legacy)
    return Audience(person, recall, owner_private=person == OWNER, person=person)


def speaker_of(msg: IncomingMessage) -> Speaker:
    """Who wrote the message, as the tools see them (a schedule runs later as theirs)."""
    return Speaker(msg.sender_id, msg.sender_name, msg.sender_username, msg.is_group)


@dataclass(frozen=True)
class LegacyScope:
    """Where a memory made before scopes goes, from the chat key it was stored under: the
    terminal's to the owner, a private chat's whose id is the user's id (on a channel whose
    kind says so: Telegram) to that person, anything else stays readable only in its own chat."""

    people: Mapping[str, PersonSettings]

    def __call__(self, chat_key: str) -> str:
        chat = ChatRef.parse(chat_key)
        if chat.channel == "cli":
            return OWNER
        kind = kind_named(chat.channel)
        if kind is None or kind.private_chat != "user_id" or chat.thread_id:
            return f"chat:{chat.key}"
        if kind.user_id.fullmatch(chat.chat_id):  # a person's private chat, not a group
            return person_of(self.people, chat.channel, chat.chat_id)
        return f"chat:{chat.key}"
