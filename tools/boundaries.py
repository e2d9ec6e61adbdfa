"""Who may see what in a workspace several people share.

The owner's private files (MEMORY.md, USER.md and what `[security] owner_private` adds)
belong to the owner's own private turns; every other turn — a group, another person's
DM, a turn scheduled by someone else — can neither read nor write them, by any tool.
Incoming files live per chat in `inbox/<channel>-<chat>/`, and a turn sees only its own
chat's folder unless it is the owner's private turn. The files that shape every prompt
(IDENTITY_FILES) are changed only with the owner's approval under `supervised`.

These are plain names and folders; SecurityPolicy.for_call turns them into forbidden paths
for one call, so the resolver, the shell's parser and the OS sandbox all hold them.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterable
from pathlib import Path

from tools.paths import PathRules, PolicyError

INBOX = "inbox"
SCRATCH_DIRS = ("tmp", "scratch")  # where replacing or deleting a file needs no approval
DEFAULT_OWNER_PRIVATE = ("MEMORY.md", "USER.md")
# Read into every chat's system prompt (the heartbeat's too): written only when the owner says so.
IDENTITY_FILES = (
    "AGENTS.md",
    "SOUL.md",
    "TOOLS.md",
    "IDENTITY.md",
    "HEARTBEAT.md",
    "BOOTSTRAP.md",
    "skills",
)
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_MAX_FOLDER_CHARS = 120


def inbox_folder(chat_key: str) -> str:
    """The chat's own folder under inbox/, relative to the workspace: `inbox/telegram-42`
    for the chat key `telegram:42` (a thread adds `-<thread>`). Names stay short and plain,
    so no chat id can make a path of its own."""
    name = _UNSAFE.sub("_", chat_key.replace(":", "-")).strip("._-") or "chat"
    return f"{INBOX}/{name[:_MAX_FOLDER_CHARS]}"


def hidden_from(
    workspace: Path, *, owner_private: Iterable[str], own_chat_key: str
) -> tuple[Path, ...]:
    """What a turn that is not the owner's own private turn may not touch: the owner-private
    files (whether they exist or not) and every other chat's inbox folder (those that exist
    now; one made later is another chat's own and out of this call's reach by name only)."""
    hidden = [workspace / name for name in owner_private]
    own = inbox_folder(own_chat_key).split("/", 1)[1] if own_chat_key else ""
    try:
        with os.scandir(workspace / INBOX) as entries:
            hidden += [workspace / INBOX / e.name for e in entries if e.name != own]
    except OSError:
        pass  # no inbox yet
    return tuple(hidden)


def make_placeholders(files: PathRules, owner_private: Iterable[str]) -> None:
    """Create each missing owner-private file, empty and 0600, before a command of a turn
    that is not the owner's runs: a sandbox masks a file that exists by mounting over it,
    while a name that does not exist can be kept from being created only by making its
    whole folder read-only (bubblewrap; Landlock cannot do better than that anyway).
    An empty USER.md or MEMORY.md is left out of the prompt. Folders are not made."""
    for name in owner_private:
        if name.endswith("/"):
            continue
        # There already (the usual case), a link, or not ours to make: masked as it is.
        with contextlib.suppress(OSError, PolicyError):
            os.close(files.open_beneath(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL))


def is_identity_path(workspace: Path, path: Path, more: Iterable[str] = ()) -> bool:
    """True when `path` (resolved, inside the workspace) is a file that shapes every prompt,
    lies in the skills folder, or is one of `more` (workspace-relative names)."""
    try:
        where = path.relative_to(workspace)
    except ValueError:
        return False
    first = where.parts[:1]
    return bool(first) and (first[0] in IDENTITY_FILES or where.as_posix() in more)
