"""Media markers of a reply resolved to sendable files, through the tools' path resolver,
with the same boundaries as the turn's tools: a turn that is not the owner's own private
one cannot send the owner's private files or another chat's incoming files."""

from __future__ import annotations

from channels.base import IncomingMessage, OutgoingMedia, Reply
from channels.capabilities import MediaKind
from channels.markers import extract_markers
from tools.base import ToolCallContext
from tools.paths import PathRules, PolicyError
from tools.policy import SecurityPolicy

_LINKS: dict[MediaKind, str] = {
    "IMAGE": "an image link",
    "DOCUMENT": "a document link",
    "VIDEO": "a video link",
    "AUDIO": "an audio link",
    "VOICE": "a voice message link",
}


def reply_files(policy: SecurityPolicy, msg: IncomingMessage, *, owner_private: bool) -> PathRules:
    """What the markers of the reply to `msg` may send: what its turn's tools may read
    (`owner_private`: its audience's)."""
    call = ToolCallContext(policy.workspace, chat_key=msg.chat.key, owner_private=owner_private)
    return policy.for_call(call).paths


def resolve_reply(
    text: str, paths: PathRules, *, reply_to: str = "", previews: bool = True
) -> Reply:
    """Take the markers out of `text`. A local file the resolver refuses (outside the
    workspace, forbidden, a hard link from outside, a bad name) or one that is missing is
    not sent, and the reply says why. Without `previews` (a turn that read untrusted
    content) a URL marker is left out with a note: the platform would fetch that URL
    itself (Telegram's sendPhoto does), and data can ride in it."""
    cleaned, markers = extract_markers(text)
    media: list[OutgoingMedia] = []
    notices: list[str] = []
    for marker in markers:
        if marker.is_url and not previews:
            notices.append(
                f"[left out: {_LINKS[marker.kind]} from a turn that read untrusted content]"
            )
            continue
        if marker.is_url:
            media.append(OutgoingMedia(marker.kind, marker.target, is_url=True))
            continue
        shown = marker.target.replace("\x00", "\\0")
        try:
            path = paths.resolve(marker.target)
        except PolicyError as exc:
            notices.append(f"(Could not send {shown}: {exc.short}.)")
            continue
        if not path.is_file():
            notices.append(f"(Could not send {shown}: file not found.)")
        else:
            media.append(OutgoingMedia(marker.kind, str(path)))
    if notices:
        cleaned = "\n\n".join(part for part in (cleaned, *notices) if part)
    return Reply(text=cleaned, media=tuple(media), reply_to=reply_to, previews=previews)
