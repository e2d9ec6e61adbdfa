"""File tools: read, write, edit and list files inside the workspace.

Each call works under its own policy (SecurityPolicy.for_call): a turn that is not the
owner's own private one cannot reach the owner's private files or other chats' incoming
files. Under `supervised`, replacing an existing file outside tmp/ and scratch/ asks the
owner, as the shell's `>` does, and so does any change to a file that shapes every prompt
(those are asked each time: "Always allow" does not cover them)."""

from __future__ import annotations

import os
from pathlib import Path

from tools.base import ASK_EACH_TIME, ApprovalRequest, FunctionTool, ToolCallContext, ToolResult
from tools.boundaries import INBOX, SCRATCH_DIRS, inbox_folder
from tools.policy import PolicyError, SecurityPolicy
from tools.taint import FileProvenance

MAX_READ_CHARS = 50_000
MAX_LIST_ENTRIES = 500
# A file larger than this is not read to compare a write with it (file_write's piece check).
MAX_COMPARED_BYTES = 1_000_000
_EACH_TIME = "Always allow covers nothing here: a file that shapes every prompt is asked each time"


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
        target = policy.paths.resolve_for_write(raw)
        if target.is_dir():
            raise IsADirectoryError(raw)
        request = _approval(policy, target, raw, tool)
        if request is not None and not await call.ask(request):
            raise PolicyError(f"the owner did not approve it ({request.reason})")
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, _ = policy.paths.open_checked(raw, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(content)
        if self._provenance is not None:  # someone else's words, or the owner's again
            await self._provenance.record([target], call.writer)

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
        policy = self._policy.for_call(call)
        if (cut := self._kept_piece(policy, path, content)) is not None:
            return cut
        try:
            await self._write(call, policy, path, content, "file_write")
        except PolicyError as exc:
            return ToolResult.error(f"Refused: {exc}")
        except IsADirectoryError:
            return ToolResult.error(f"{path} is a directory")
        return ToolResult.success(f"Wrote {len(content)} characters to {path}")

    def _kept_piece(self, policy: SecurityPolicy, path: str, content: str) -> ToolResult | None:
        """A write that would cut an existing file down to a piece of itself is refused: it
        loses the rest and adds nothing. A small model asked about a file writes its answer
        over it (Qwen2.5-Coder-1.5B, "What is the boiler code written in fact.txt?":
        file_read, then file_write(fact.txt, "4417"), in 3 of 7 runs). Emptying a file
        (content "") and a deliberate cut with file_edit stay as they were."""
        piece = content.strip()
        if not piece:
            return None
        try:
            fd, _ = policy.paths.open_checked(path, os.O_RDONLY)
        except (PolicyError, OSError):
            return None  # a new file, or one the write's own checks answer for
        try:
            handle = os.fdopen(fd, encoding="utf-8", errors="replace")
        except OSError:  # a folder: the write says so
            os.close(fd)
            return None
        with handle:
            old = handle.read() if os.fstat(fd).st_size <= MAX_COMPARED_BYTES else ""
        if len(content) >= len(old) or piece == old.strip() or piece not in old:
            return None
        return ToolResult.error(
            f"Not written: {path} holds {len(old)} characters, and this would keep only "
            f"{len(content)} of them and lose the rest. Asked about a file? Answer from "
            "file_read. Asked to cut it down? Remove the rest with file_edit."
        )

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
            return ToolResult.error(f"Refused: {exc}")
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
            return ToolResult.error(f"Refused: {exc}")
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


def _approval(policy: SecurityPolicy, target: Path, raw: str, tool: str) -> ApprovalRequest | None:
    """What the owner must approve before `tool` writes `target` (None: nothing): under
    supervised, a file that shapes every prompt (asked each time), or an existing file
    replaced outside tmp/ and scratch/."""
    if policy.autonomy != "supervised":
        return None
    if policy.is_identity(target):
        reason = f"{raw} shapes every chat's prompt; it is changed only when the owner says so"
        return ApprovalRequest(
            tool,
            f"{tool} {raw}",
            reason,
            (f"{ASK_EACH_TIME}{raw}",),
            always_covers=_EACH_TIME,
            owner_only=True,
        )
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
