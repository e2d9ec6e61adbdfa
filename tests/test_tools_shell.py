"""The shell tool: runs in the workspace, bounded, inside the policy, without our secrets."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.base import ToolCallContext, ToolResult
from tools.config import SecuritySettings, ShellSettings
from tools.policy import SecurityPolicy
from tools.sandbox import choose_sandbox
from tools.shell import ShellTool, clip_output


async def run(workspace: Path, command: str, *, autonomy: str = "supervised",
              timeout_s: float = 10, max_output_chars: int = 20_000,
              allowed: list[str] | None = None) -> ToolResult:
    security = SecuritySettings(autonomy=autonomy)  # type: ignore[arg-type]
    if allowed is not None:
        security = SecuritySettings(autonomy=autonomy, allowed_commands=allowed)  # type: ignore[arg-type]
    tool = ShellTool(SecurityPolicy.from_settings(security, workspace),
                     ShellSettings(timeout_s=timeout_s, max_output_chars=max_output_chars),
                     choose_sandbox("auto"))
    return await tool.run({"command": command}, ToolCallContext(workspace))


async def test_runs_in_the_workspace_with_exit_code(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hello\n")
    ok = await run(tmp_path, "cat a.txt | wc -l")
    failed = await run(tmp_path, "ls missing-file")
    assert ok.ok and ok.output == "exit code: 0\n1\n"
    assert not failed.ok and failed.output.startswith("exit code: 2")


async def test_command_outside_allow_list_refused(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("x")
    result = await run(tmp_path, "rm keep.txt")  # nobody to ask here: not approved
    assert not result.ok and "rm is not in the allowed commands" in result.output
    assert (tmp_path / "keep.txt").exists()


@pytest.mark.parametrize("command", ["cat /etc/hostname", "cat ../x", "echo $(id)",
                                     "ls; rm -rf x", "find . -delete"])
async def test_escapes_refused_when_supervised(tmp_path: Path, command: str) -> None:
    result = await run(tmp_path, command)
    assert not result.ok and result.output.startswith(("Refused:", "Not run:"))


async def test_full_autonomy_runs_any_command(tmp_path: Path) -> None:
    result = await run(tmp_path, "printf '%s' $(echo hi) > out.txt", autonomy="full")
    assert result.ok and (tmp_path / "out.txt").read_text() == "hi"


async def test_timeout_kills_the_command(tmp_path: Path) -> None:
    result = await run(tmp_path, "sleep 5; echo late", autonomy="full", timeout_s=0.3)
    assert not result.ok and "Timed out after 0.3 s" in result.output


async def test_long_output_keeps_head_and_tail(tmp_path: Path) -> None:
    result = await run(tmp_path, "seq 1 100000", autonomy="full", max_output_chars=1000)
    assert result.output.startswith("exit code: 0\n1\n2\n3\n")
    assert result.output.rstrip().endswith("99999\n100000")
    assert "characters elided" in result.output
    assert len(result.output) < 1200


async def test_child_does_not_inherit_secrets(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-never-leak-123456")
    result = await run(tmp_path, "env", autonomy="full")
    assert "sk-should-never-leak" not in result.output
    assert f"HOME={tmp_path}" in result.output


def test_clip_output_is_exact_when_short() -> None:
    assert clip_output("abc", 10) == "abc"


def test_policy_summary_lists_only_forbidden_paths_the_tools_could_reach(tmp_path: Path) -> None:
    settings = SecuritySettings(forbidden_paths=["/etc", str(tmp_path / "secrets"),
                                                 str(tmp_path.parent)])
    summary = SecurityPolicy.from_settings(settings, tmp_path).summary()
    assert summary.splitlines() == [
        "- Autonomy level: supervised",
        "- Allowed shell commands: " + ", ".join(f"`{c}`" for c in settings.allowed_commands),
        "- File tools stay inside the workspace, and so do shell path arguments",
        f"- Forbidden inside it: `{tmp_path / 'secrets'}`",
    ]


async def test_forbidden_path_inside_the_workspace_is_refused(tmp_path: Path) -> None:
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "key.txt").write_text("hidden")
    security = SecuritySettings(forbidden_paths=[str(tmp_path / "secrets")])
    tool = ShellTool(SecurityPolicy.from_settings(security, tmp_path), ShellSettings(),
                     choose_sandbox("auto"))
    for command in (f"cat {tmp_path}/secrets/key.txt", "cat secrets/key.txt",
                    "grep -r hidden secrets"):
        result = await tool.run({"command": command}, ToolCallContext(tmp_path))
        assert not result.ok and "forbidden path" in result.output, command
