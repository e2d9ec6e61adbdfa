"""File tools: read, write, edit and list files inside the workspace.

Each call works under its own policy (SecurityPolicy.for_call): a turn that is not the
owner's own private one cannot reach the owner's private files or other chats' incoming
files. Under `supervised`, replacing an existing file outside tmp/ and scratch/ asks the
owner, as the shell's `>` does, and so does any change to a file that shapes every prompt
(those are asked each time: "Always allow" does not cover them)."""

from __future__ import annotations

import os
from pathlib import Path

from tools.background import despite_a_cut
from tools.base import (
    ASK_EACH_TIME,
    ApprovalRequest,
    FunctionTool,
    ToolCallContext,
    ToolResult,
    not_approved,
)
from tools.boundaries import INBOX, SCRATCH_DIRS, inbox_folder
from tools.policy import PolicyError, SecurityPolicy
from tools.taint import FileProvenance

MAX_READ_CHARS = 50_000
MAX_LIST_ENTRIES = 500
# A file larger than this is not read to compare a write with it (file_write's piece check).
MAX_COMPARED_BYTES = 1_000_000
_EACH_TIME = "Always allow covers nothing here: a file that shapes every prompt is asked each time"


class NotApproved(PolicyError):
    """The owner said no (or nobody could be asked), worded as the other tools word it."""

    def __init__(self, tool: str, reason: str, call: ToolCallContext) -> None:
        super().__init__(not_approved(tool, reason, tainted=call.taint.tainted))


def _refused(exc: PolicyError) -> ToolResult:
    return ToolResult.error(str(exc) if isinstance(exc, NotApproved) else f"Refused: {exc}")


class FileTools:
    """The four file tools, sharing one policy."""

    def __init__(self, policy: SecurityPolicy, provenance: FileProvenance | None = None) -> None:
        self._policy = policy
        self._provenance = provenance  # whose words the files hold (tools/taint.py)

    def tools(self) -> list[FunctionTool]:
        return [
            FunctionTool(self.file_read, name="file_read"),
            # The same content written again leaves the same file; after a crash either
            # is checked against the file rather than written again.
            FunctionTool(
                self.file_write,
                name="file_write",
                writes=True,
                repeat_safe=True,
                recheck=self.recheck_write,
            ),
            FunctionTool(self.file_edit, name="file_edit", writes=True, recheck=self.recheck_edit),
            FunctionTool(self.file_list, name="file_list"),
        ]

    @staticmethod
    def _read(policy: SecurityPolicy, raw: str) -> str:
        """The text of a workspace file, opened through the resolver (no late symlink, no
        hard link from outside)."""
        fd, _ = policy.paths.open_checked(raw, os.O_RDONLY)
        with os.fdopen(fd, encoding="utf-8", errors="replace") as handle:
            return handle.read()

    async def _write(
        self, call: ToolCallContext, policy: SecurityPolicy, raw: str, content: str, tool: str
    ) -> None:
        """Write `content` to `raw`, after the owner's yes when the policy asks for one."""
        if not policy.can_write:
            raise PolicyError("writing files is not allowed: autonomy is read_only")
        data = _encoded(content)  # before O_TRUNC: text that cannot be written keeps the file
        target = policy.paths.resolve_for_write(raw)
        if target.is_dir():
            raise IsADirectoryError(raw)
        if tool == "file_write" and (cut := _kept_piece(policy, raw, content)):
            raise PolicyError(cut)
        request = _approval(policy, target, raw, tool, call)
        if request is not None and not await call.ask(request):
            raise NotApproved(tool, request.reason, call)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, _ = policy.paths.open_checked(raw, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        if self._provenance is not None:  # someone else's words, or the owner's again
            # The file has them now: a cut (/stop, the deadline) must not lose the record.
            await despite_a_cut(self._provenance.record([target], call.writer))

    async def _source_of(self, target: Path, call: ToolCallContext) -> str:
        """Whose words a file holds, when not the owner's: another chat's incoming file, or
        one written by someone else's turn or a tainted one ("": the owner's)."""
        try:
            where = target.relative_to(self._policy.workspace).as_posix()
        except ValueError:
            return ""
        own = inbox_folder(call.chat_key) + "/" if call.owner_private else None
        if where.startswith(f"{INBOX}/") and (own is None or not where.startswith(own)):
            return f"{where}, a file someone else sent"
        if self._provenance is None:
            return ""
        source = await self._provenance.source_of(target)
        return f"{where}, written by a turn {source}" if source else ""

    async def file_read(
        self,
        call: ToolCallContext,
        path: str,
        start_line: int | None = None,
        end_line: int | None = None,
    ) -> ToolResult:
        """Read a workspace text file (or some of its lines).

        Args:
            start_line: First line, from 1.
            end_line: Last line, inclusive.
        """
        policy = self._policy.for_call(call)
        try:
            text = self._read(policy, path)
        except PolicyError as exc:
            return ToolResult.error(f"Refused: {exc}")
        except FileNotFoundError:
            return ToolResult.error(f"No such file: {path}")
        except IsADirectoryError:
            return ToolResult.error(f"{path} is a directory; use file_list")
        source = await self._source_of(policy.resolve_path(path), call)
        if source:
            call.taint.read(source)
        if start_line is not None or end_line is not None:
            lines = text.splitlines(keepends=True)
            first = max(start_line or 1, 1)
            last = min(end_line or len(lines), len(lines))
            if first > len(lines):
                return ToolResult.error(f"{path} has only {len(lines)} lines")
            text = "".join(lines[first - 1 : last])
        if len(text) > MAX_READ_CHARS:
            text = text[:MAX_READ_CHARS] + (
                f"\n[... truncated at {MAX_READ_CHARS} characters; read a line range for more]"
            )
        return ToolResult.success(text)

    async def file_write(self, call: ToolCallContext, path: str, content: str) -> ToolResult:
        """Create or overwrite a workspace text file (and its folders) with the whole
        `content`."""
        try:
            await self._write(call, self._policy.for_call(call), path, content, "file_write")
        except PolicyError as exc:
            return _refused(exc)
        except IsADirectoryError:
            return ToolResult.error(f"{path} is a directory")
        return ToolResult.success(f"Wrote {len(content)} characters to {path}")

    async def file_edit(
        self, call: ToolCallContext, path: str, old_text: str, new_text: str
    ) -> ToolResult:
        """Replace one exact, unique piece of text in a workspace file.

        Args:
            old_text: Exact text to replace; it must occur once. Empty: new_text is added as
                the last line.
        """
        policy = self._policy.for_call(call)
        if not policy.can_write:
            return ToolResult.error("Refused: writing files is not allowed: autonomy is read_only")
        try:
            text = self._read(policy, path)
        except PolicyError as exc:
            return ToolResult.error(f"Refused: {exc}")
        except FileNotFoundError:
            return ToolResult.error(f"No such file: {path}")
        if not old_text:
            return await self._append(call, policy, path, text, new_text)
        count = text.count(old_text)
        if count == 0:
            return ToolResult.error(f"old_text was not found in {path}; read the file first")
        if count > 1:
            return ToolResult.error(
                f"old_text occurs {count} times in {path}; include more context to make it unique"
            )
        try:
            await self._write(call, policy, path, text.replace(old_text, new_text, 1), "file_edit")
        except PolicyError as exc:
            return _refused(exc)
        return ToolResult.success(f"Edited {path}")

    async def _append(
        self, call: ToolCallContext, policy: SecurityPolicy, path: str, text: str, new_text: str
    ) -> ToolResult:
        """file_edit with an empty old_text: what small models write to add a line at the end
        ("add butter to the list"), done rather than refused."""
        if not new_text:
            return ToolResult.error("old_text and new_text are both empty: nothing to change")
        joined = text if not text or text.endswith("\n") else text + "\n"
        try:
            await self._write(call, policy, path, joined + new_text, "file_edit")
        except PolicyError as exc:
            return _refused(exc)
        return ToolResult.success(f"Added new_text at the end of {path}")

    async def recheck_write(self, call: ToolCallContext, path: str, content: str) -> ToolResult:
        """Whether `path` holds what file_write(path, content) writes (nothing written)."""
        try:
            text = self._read(self._policy.for_call(call), path)
        except PolicyError as exc:
            return ToolResult.error(f"{path} cannot be read to check it ({exc})")
        except FileNotFoundError:
            return ToolResult.error(f"{path} does not exist: the write did not happen")
        except IsADirectoryError:
            return ToolResult.error(f"{path} is a directory: the write did not happen")
        if text == content:
            return ToolResult.success(f"{path} holds exactly this content: it was written")
        return ToolResult.error(
            f"{path} holds other content ({len(text)} characters, not the {len(content)} "
            "of this call): read it before writing again"
        )

    async def recheck_edit(
        self, call: ToolCallContext, path: str, old_text: str, new_text: str
    ) -> ToolResult:
        """Whether the edit file_edit(path, old_text, new_text) makes is in `path`."""
        try:
            text = self._read(self._policy.for_call(call), path)
        except (PolicyError, OSError) as exc:
            return ToolResult.error(f"{path} cannot be read to check it ({exc})")
        if not old_text:  # an append
            if new_text and text.endswith(new_text):
                return ToolResult.success(f"{path} ends with new_text: it was added")
            return ToolResult.error(f"{path} does not end with new_text: it was not added")
        if text.count(old_text) == 1 and new_text not in text:
            return ToolResult.error(f"old_text is still in {path} once: the edit was not made")
        if new_text and new_text in text and old_text not in text:
            return ToolResult.success(f"{path} holds new_text, not old_text: the edit was made")
        return ToolResult.error(f"{path} cannot tell whether the edit was made: read it first")

    async def file_list(self, call: ToolCallContext, path: str = ".") -> ToolResult:
        """List a workspace folder; folders end with `/`."""
        try:
            policy = self._policy.for_call(call)
            target = policy.resolve_path(path)
        except PolicyError as exc:
            return ToolResult.error(f"Refused: {exc}")
        if target.is_file() and not _hidden(policy, target):  # Qwen2.5-Coder-1.5B: lines.txt
            return ToolResult.error(f"{path} is a file, not a folder: read it with file_read")
        if not target.is_dir():
            return ToolResult.error(f"No such folder: {path}")
        entries = sorted(
            (p for p in target.iterdir() if not _hidden(policy, p)), key=lambda p: p.name
        )
        lines = [p.name + ("/" if p.is_dir() else "") for p in entries[:MAX_LIST_ENTRIES]]
        if len(entries) > MAX_LIST_ENTRIES:
            lines.append(f"[... {len(entries) - MAX_LIST_ENTRIES} more entries]")
        return ToolResult.success("\n".join(lines) or "(empty folder)")


def _encoded(content: str) -> bytes:
    """`content` as UTF-8, or the refusal the model can act on: a lone surrogate (half of an
    emoji's escape, from a reply cut short) has no UTF-8 form."""
    try:
        return content.encode("utf-8")
    except UnicodeEncodeError as exc:
        half = content[exc.start]
        raise PolicyError(
            f"the text is not valid Unicode (a lone surrogate, {half!r}, at character "
            f"{exc.start} of the file's new content); nothing was written. Write the "
            "character whole or leave it out"
        ) from None


def _kept_piece(policy: SecurityPolicy, raw: str, content: str) -> str:
    """Why a file_write that would cut an existing file down to a piece of itself is refused
    ("": it is not one): it loses the rest and adds nothing. A small model asked about a
    file writes its answer over it (Qwen2.5-Coder-1.5B, "What is the boiler code written in
    fact.txt?": file_read, then file_write(fact.txt, "4417"), in 3 of 7 runs). Emptying a
    file (content "") and a deliberate cut with file_edit stay as they were."""
    piece = content.strip()
    if not piece:
        return ""
    try:
        fd, _ = policy.paths.open_checked(raw, os.O_RDONLY)
    except (PolicyError, OSError):
        return ""  # a new file
    with os.fdopen(fd, encoding="utf-8", errors="replace") as handle:
        old = handle.read() if os.fstat(fd).st_size <= MAX_COMPARED_BYTES else ""
    if len(content) >= len(old) or piece == old.strip() or piece not in old:
        return ""
    return (
        f"this would keep only {len(content)} of the {len(old)} characters in {raw} and "
        "lose the rest. Asked about a file? Answer from file_read. Asked to cut it down? "
        "Remove the rest with file_edit."
    )


def _approval(
    policy: SecurityPolicy, target: Path, raw: str, tool: str, call: ToolCallContext
) -> ApprovalRequest | None:
    """What the owner must approve before `tool` writes `target` (None: nothing):
    - a file that shapes later prompts (`SecurityPolicy.is_identity`), asked each time: at
      every autonomy level in a tainted turn (words the owner did not write would shape
      later turns) or in a turn not the owner's own private one; under supervised in any;
    - under supervised, an existing file replaced outside tmp/ and scratch/."""
    if policy.is_identity(target):
        if call.taint.tainted:
            reason = f"{raw} shapes later prompts, {call.taint.why()}"
        elif not call.owner_private:
            reason = f"{raw} shapes every prompt, in {call.speaker.name or call.chat_key}'s turn"
        elif policy.autonomy == "supervised":
            reason = f"{raw} shapes every chat's prompt; it is changed only when the owner says so"
        else:
            return None
        return ApprovalRequest(
            tool,
            f"{tool} {raw}",
            reason,
            (f"{ASK_EACH_TIME}{raw}",),
            always_covers=_EACH_TIME,
            owner_only=True,
        )
    if policy.autonomy != "supervised":
        return None
    scratch = any(policy.workspace / folder in target.parents for folder in SCRATCH_DIRS)
    if target.is_file() and not scratch:
        reason = f"{tool} replaces the existing file {raw}"
        covers = (
            "Always allow covers, in this workspace: file_write and file_edit replacing "
            "existing files outside tmp/ and scratch/"
        )
        return ApprovalRequest(
            tool, f"{tool} {raw}", reason, ("file:overwrite",), always_covers=covers
        )
    return None


def _hidden(policy: SecurityPolicy, path: Path) -> bool:
    """A forbidden entry (another chat's inbox, the owner's private files) is not listed."""
    return any(path == forbidden for forbidden in policy.forbidden_paths)
