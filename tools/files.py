"""File tools: read, write, edit and list files inside the workspace."""

from __future__ import annotations

import os

from tools.base import FunctionTool, ToolCallContext, ToolResult
from tools.policy import PolicyError, SecurityPolicy

MAX_READ_CHARS = 50_000
MAX_LIST_ENTRIES = 500


class FileTools:
    """The four file tools, sharing one policy."""

    def __init__(self, policy: SecurityPolicy) -> None:
        self._policy = policy

    def tools(self) -> list[FunctionTool]:
        return [
            FunctionTool(self.file_read, name="file_read"),
            FunctionTool(self.file_write, name="file_write", writes=True),
            FunctionTool(self.file_edit, name="file_edit", writes=True),
            FunctionTool(self.file_list, name="file_list"),
        ]

    def _read(self, raw: str) -> str:
        """The text of a workspace file, opened through the resolver (no late symlink, no
        hard link from outside)."""
        fd, _ = self._policy.paths.open_checked(raw, os.O_RDONLY)
        with os.fdopen(fd, encoding="utf-8", errors="replace") as handle:
            return handle.read()

    def _write(self, raw: str, content: str) -> None:
        if not self._policy.can_write:
            raise PolicyError("writing files is not allowed: autonomy is read_only")
        target = self._policy.paths.resolve_for_write(raw)
        if target.is_dir():
            raise IsADirectoryError(raw)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, _ = self._policy.paths.open_checked(raw, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(content)

    async def file_read(
        self,
        call: ToolCallContext,
        path: str,
        start_line: int | None = None,
        end_line: int | None = None,
    ) -> ToolResult:
        """Read a text file in the workspace, optionally only some lines.

        Args:
            path: File path relative to the workspace.
            start_line: First line to return, counting from 1.
            end_line: Last line to return (inclusive).
        """
        try:
            text = self._read(path)
        except PolicyError as exc:
            return ToolResult.error(f"Refused: {exc}")
        except FileNotFoundError:
            return ToolResult.error(f"No such file: {path}")
        except IsADirectoryError:
            return ToolResult.error(f"{path} is a directory; use file_list")
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
        """Create or overwrite a text file in the workspace (parent folders are created).

        Args:
            path: File path relative to the workspace.
            content: The whole new content of the file.
        """
        try:
            self._write(path, content)
        except PolicyError as exc:
            return ToolResult.error(f"Refused: {exc}")
        except IsADirectoryError:
            return ToolResult.error(f"{path} is a directory")
        return ToolResult.success(f"Wrote {len(content)} characters to {path}")

    async def file_edit(
        self, call: ToolCallContext, path: str, old_text: str, new_text: str
    ) -> ToolResult:
        """Replace one exact, unique piece of text in a workspace file.

        Args:
            path: File path relative to the workspace.
            old_text: The exact text to find; it must occur exactly once.
            new_text: The text to put in its place.
        """
        if not self._policy.can_write:
            return ToolResult.error("Refused: writing files is not allowed: autonomy is read_only")
        try:
            text = self._read(path)
        except PolicyError as exc:
            return ToolResult.error(f"Refused: {exc}")
        except FileNotFoundError:
            return ToolResult.error(f"No such file: {path}")
        count = text.count(old_text) if old_text else 0
        if count == 0:
            return ToolResult.error(f"old_text was not found in {path}; read the file first")
        if count > 1:
            return ToolResult.error(
                f"old_text occurs {count} times in {path}; include more context to make it unique"
            )
        try:
            self._write(path, text.replace(old_text, new_text, 1))
        except PolicyError as exc:
            return ToolResult.error(f"Refused: {exc}")
        return ToolResult.success(f"Edited {path}")

    async def file_list(self, call: ToolCallContext, path: str = ".") -> ToolResult:
        """List a folder of the workspace: one entry per line, folders end with `/`.

        Args:
            path: Folder path relative to the workspace.
        """
        try:
            target = self._policy.resolve_path(path)
        except PolicyError as exc:
            return ToolResult.error(f"Refused: {exc}")
        if not target.is_dir():
            return ToolResult.error(f"No such folder: {path}")
        entries = sorted(target.iterdir(), key=lambda p: p.name)
        lines = [p.name + ("/" if p.is_dir() else "") for p in entries[:MAX_LIST_ENTRIES]]
        if len(entries) > MAX_LIST_ENTRIES:
            lines.append(f"[... {len(entries) - MAX_LIST_ENTRIES} more entries]")
        return ToolResult.success("\n".join(lines) or "(empty folder)")
