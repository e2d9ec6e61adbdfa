"""What pairing says to people: the stranger's polite answer or code, the owner's question
about a request, and the owner's line about a decision. Kept apart from the Doorkeeper
(doorkeeper.py), which decides, so `agent pairing` and /pair say the same words."""

from __future__ import annotations

from agent.durable.owner.pairing_codes import shown
from agent.durable.owner.pairings import Code, Outcome

SAID_CHARS = 200  # of a stranger's first message, shown to the owner


def stranger_text(channel: str, sender_id: str) -> str:
    """The one polite answer to someone not on the channel's allow-list."""
    env = f"PINCLAW_CHANNELS__{channel.upper()}__ALLOWED_USERS"
    return (
        f"Hello! This is a private assistant and you are not on its list. Your "
        f"{channel} user id is {sender_id}. To allow you, the owner adds "
        f'"{sender_id}" to allowed_users in [channels.{channel}] (or {env}) '
        "and restarts the bot."
    )


def code_text(code: Code, *, owner_asked: bool) -> str:
    """The one reply a stranger gets with their code."""
    ask = (
        "I have asked the owner to let you in"
        if owner_asked
        else "give it to the owner, who can let you in"
    )
    return (
        f"Hello! This is a private assistant and you are not on its list yet. Your pairing "
        f"code is {shown(code.code)}, valid for an hour: {ask}. (Your {code.channel} user id "
        f"is {code.sender_id}; the owner can also add it to allowed_users.)"
    )


def owner_text(code: Code, said: str) -> str:
    """The owner's line about a request, above its Approve / Deny buttons."""
    said = said.strip()
    quoted = (
        f" They wrote: “{said[:SAID_CHARS]}{'…' if len(said) > SAID_CHARS else ''}”" if said else ""
    )
    return (
        f"🔑 {code.who} wants to talk to me.{quoted}\nPairing code {shown(code.code)}, valid "
        "for an hour. Approve lets them chat with me privately: their own conversation and "
        "memories, never yours. (Or: /pair approve CODE, /pair deny CODE.)"
    )


def decision_text(outcome: Outcome, typed: str) -> str:
    """What the owner is told of an answer to code `typed`."""
    code, verdict = outcome.code, outcome.verdict
    label = shown(code.code) if code is not None else typed.strip()
    if code is None:
        return f"No pairing code {label} here."
    texts = {
        "approved": f"Approved {label}: {code.who} may talk to me now (they are told).",
        "denied": (
            f"Denied {label}: {code.who} is told, and gets no new code for a day."
            if code.kind == "request"
            else f"Withdrew invite {label}."
        ),
        "expired": f"Code {label} had expired: {code.who} can write again for a new one.",
        "decided": f"Code {label} was already answered ({code.status}).",
        "invite": f"{label} is an invite: the person you give it to sends it to me.",
    }
    return texts.get(verdict, f"No pairing code {label} here.")
