"""`/pair`: the owner's side of pairing in the chat (agent/runtime/owner/doorkeeper.py): the open
codes and who is let in, approve or deny a code, make an invite, add a group from inside it.
Only the owner ([people] with owner = true) may use it; all but `/pair here` belong in their
private chat, where strangers' names and codes are shown."""

from __future__ import annotations

from agent.durable.owner.pairing_codes import shown
from agent.runtime.owner.doorkeeper import Doorkeeper
from agent.runtime.owner.pairing_texts import decision_text
from channels.base import IncomingMessage

USAGE = (
    "/pair — the open codes and who is let in\n"
    "/pair approve CODE, /pair deny CODE — answer a request\n"
    "/pair invite — a code to hand out: whoever sends it to me privately is in\n"
    "/pair here — in a group: everyone there may talk to me"
)


async def pair_command(door: Doorkeeper, msg: IncomingMessage) -> str:
    words = msg.text.split()[1:]
    action = words[0].lower() if words else "list"
    channel = door.channel.name
    if not door.is_owner(msg.sender_id):
        return "Only the owner ([people] with owner = true) can use /pair."
    if not door.pairing:
        return f"Pairing is off here (channels.{channel}.pairing = false): the allow-list decides."
    if action == "here":
        if not msg.is_group:
            return "Send /pair here in the group you want to add."
        await door.add_group(msg)
        return "Added this group: everyone here may talk to me now."
    if msg.is_group:
        return "Use /pair in your private chat with me (only /pair here belongs in a group)."
    if action in ("approve", "deny"):
        if len(words) != 2:
            return f"Usage: /pair {action} CODE"
        outcome = await door.decide(words[1], action == "approve", by="/pair")
        return decision_text(outcome, words[1])
    if action == "invite":
        code = await door.pairings.invite(channel)
        return (
            f"Invite code {shown(code.code)}, valid for an hour: whoever sends it to me in a "
            "private chat first is in. Give it only to the person you mean."
        )
    if action == "list":
        return await listing(door)
    return USAGE


async def listing(door: Doorkeeper) -> str:
    channel, now = door.channel.name, door.pairings.now()
    codes = await door.pairings.codes(channel)
    members = await door.pairings.members(channel)
    lines = ["Open codes:" if codes else "No open codes."]
    lines += [
        f"  {shown(c.code)} {c.who}, {max(1, round((c.expires_at - now) / 60))} min left"
        for c in codes
    ]
    lines.append("Let in:" if members else "Nobody let in by pairing yet.")
    lines += [f"  {member.line()}" for member in members]
    return "\n".join(lines)
