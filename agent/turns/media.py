"""Media markers of a reply resolved to sendable files, confined to the workspace."""

from __future__ import annotations

from pathlib import Path

from channels.base import OutgoingMedia, Reply
from channels.markers import extract_markers


def resolve_reply(text: str, workspace: Path, *, reply_to: str = "") -> Reply:
    """Take the markers out of `text`; a local file outside the workspace or missing is not
    sent, and the reply says so."""
    cleaned, markers = extract_markers(text)
    media: list[OutgoingMedia] = []
    notices: list[str] = []
    root = workspace.resolve()
    for marker in markers:
        if marker.is_url:
            media.append(OutgoingMedia(marker.kind, marker.target, is_url=True))
            continue
        raw = Path(marker.target).expanduser()
        path = (raw if raw.is_absolute() else root / raw).resolve()
        if path != root and root not in path.parents:
            notices.append(f"(Could not send {marker.target}: it is outside the workspace.)")
        elif not path.is_file():
            notices.append(f"(Could not send {marker.target}: file not found.)")
        else:
            media.append(OutgoingMedia(marker.kind, str(path)))
    if notices:
        cleaned = "\n\n".join(part for part in (cleaned, *notices) if part)
    return Reply(text=cleaned, media=tuple(media), reply_to=reply_to)
