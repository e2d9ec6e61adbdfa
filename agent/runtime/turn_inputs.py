"""What a turn is given besides its message: whose conversation it is, the memories recalled
for it, the history it sends, and the context its tools run with.

Kept apart from the turn answering (turn_answering.py) so the question "what does this turn
see?" has one answer in one place: the audience (agent/conversation/scopes.py), resolved
once per message, decides the memory scope, the scopes it may recall from, and whether it is
the owner's own private turn.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.config import Settings
from agent.conversation.compaction import Summariser, history_for
from agent.conversation.recall import readable_scopes, remembered_block
from agent.conversation.scopes import Audience, speaker_of
from agent.durable.sessions import SessionStore
from agent.durable.tool_journal import ToolJournal
from agent.model.responses import Message
from agent.runtime.approvals import routed
from channels.base import IncomingMessage
from tools.base import Approver, ToolCallContext
from tools.memory.store import MemoryStore
from tools.taint import Taint, addresses_named


@dataclass(frozen=True)
class TurnInputs:
    prior: list[Message]  # the stored turns the model sees, compacted to the budget
    remembered: str  # memories recalled for this message, for its envelope
    context: ToolCallContext  # who is speaking, where, and what the tools may touch
    session: int  # the chat's session it read: its answer is stored there (not after a /new)


async def turn_inputs(
    msg: IncomingMessage,
    audience: Audience,
    settings: Settings,
    sessions: SessionStore,
    memory: MemoryStore | None,
    *,
    history_tokens: int,
    summarise: Summariser,
    journal: ToolJournal,
    approvers: tuple[Approver, Approver | None],
) -> TurnInputs:
    """`audience`: whose turn it is (resolved once per message). `approvers`: asking in
    the chat, and the owner privately (where a question only the owner may answer goes when
    the turn is not the owner's own private one)."""
    key = msg.chat.key
    session = await sessions.current(key)
    recall = await readable_scopes(memory, audience.recall)
    taint = await starting_taint(msg, sessions)
    remembered = ""
    if memory is not None:
        remembered = await remembered_block(
            memory,
            recall,
            msg.text,
            settings.memory,
            unvetted_for=taint if audience.owner_private else None,
        )
    prior = await history_for(
        sessions,
        key,
        max_messages=settings.agent.max_history_messages,
        budget_tokens=history_tokens,
        summarise=summarise,
        session=session,
    )
    context = ToolCallContext(
        settings.workspace_dir,
        chat_key=key,
        memory_scope=audience.scope,
        recall_scopes=recall,
        speaker=speaker_of(msg),
        owner_private=audience.owner_private,
        journal=journal,
        approve=_approver(approvers, owner_private=audience.owner_private),
        taint=taint,
    )
    return TurnInputs(prior, remembered, context, session)


def _approver(approvers: tuple[Approver, Approver | None], *, owner_private: bool) -> Approver:
    in_chat, owner = approvers
    return in_chat if owner_private or owner is None else routed(in_chat, owner)


async def starting_taint(msg: IncomingMessage, sessions: SessionStore) -> Taint:
    """What a turn holds from the start that its speaker did not write: a group's
    conversation (other members' words are in its history), a forwarded message, or an
    earlier turn of this chat
    that read untrusted content (its words are in the history it sends). A person's own
    words in their own chat do not taint their turn: it acts as them, within what they may
    touch anyway; the hosts those words name may be fetched without asking."""
    if msg.is_group:
        taint = Taint()
        taint.read("this group's messages")
    else:
        hosts, urls = addresses_named("" if msg.forwarded_from else msg.text)
        taint = Taint(owner_hosts=hosts, owner_urls=urls)
    if msg.forwarded_from:
        taint.read(f"a message forwarded from {msg.forwarded_from}")
    earlier = await sessions.tainted_by(msg.chat.key)
    if earlier:
        taint.read(f"an earlier turn of this chat ({earlier})")
    return taint
