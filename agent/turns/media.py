"""Media markers of a reply resolved to sendable files, through the tools' path resolver."""

from __future__ import annotations

from channels.base import OutgoingMedia, Reply
from channels.markers import extract_markers
from tools.paths import PathRules, PolicyError


def resolve_reply(text: str, paths: PathRules, *, reply_to: str = "") -> Reply:
    """Take the markers out of `text`. A local file the resolver refuses (outside the
    workspace, forbidden, a hard link from outside, a bad name) or one that is missing is
    not sent, and the reply says why."""
    cleaned, markers = extract_markers(text)
    media: list[OutgoingMedia] = []
    notices: list[str] = []
    for marker in markers:
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
    return Reply(text=cleaned, media=tuple(media), reply_to=reply_to)
