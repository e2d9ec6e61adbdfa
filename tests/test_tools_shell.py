"""The shell tool: runs in the workspace, bounded, inside the policy, without our secrets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools.base import ToolCallContext, ToolResult
from tools.config import SecuritySettings, ShellSettings
from tools.paths import PolicyError
from tools.policy import SecurityPolicy
from tools.sandbox.sandboxes import choose_sandbox
from tools.shell.plan import check_argv, plan_command
from tools.shell.shell_tool import ShellTool, clip_output


async def run(
    workspace: Path,
    command: str,
    *,
    autonomy: str = "supervised",
    timeout_s: float = 10,
    max_output_chars: int = 20_000,
    allowed: list[str] | None = None,
) -> ToolResult:
    security = SecuritySettings(autonomy=autonomy)  # type: ignore[arg-type]
    if allowed is not None:
        security = SecuritySettings(autonomy=autonomy, allowed_commands=allowed)  # type: ignore[arg-type]
    tool = ShellTool(
        SecurityPolicy.from_settings(security, workspace),
        ShellSettings(timeout_s=timeout_s, max_output_chars=max_output_chars),
        choose_sandbox("auto"),
    )
    # The owner's own turn: in another's, nothing is created at the workspace's top level.
    return await tool.run({"command": command}, ToolCallContext(workspace, owner_private=True))


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


@pytest.mark.parametrize(
    "command", ["cat /etc/hostname", "cat ../x", "echo $(id)", "ls; rm -rf x", "find . -delete"]
)
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


async def test_child_does_not_inherit_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-never-leak-123456")
    result = await run(tmp_path, "env", autonomy="full")
    assert "sk-should-never-leak" not in result.output
    assert f"HOME={tmp_path}" in result.output


def test_clip_output_is_exact_when_short() -> None:
    assert clip_output("abc", 10) == "abc"


def test_policy_summary_lists_only_forbidden_paths_the_tools_could_reach(tmp_path: Path) -> None:
    settings = SecuritySettings(
        forbidden_paths=["/etc", str(tmp_path / "secrets"), str(tmp_path.parent)]
    )
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
    tool = ShellTool(
        SecurityPolicy.from_settings(security, tmp_path), ShellSettings(), choose_sandbox("auto")
    )
    for command in (
        f"cat {tmp_path}/secrets/key.txt",
        "cat secrets/key.txt",
        "grep -r hidden secrets",
    ):
        result = await tool.run({"command": command}, ToolCallContext(tmp_path))
        assert not result.ok and "forbidden path" in result.output, command


def full_policy(workspace: Path, forbidden: list[str] | None = None) -> SecurityPolicy:
    settings = SecuritySettings(autonomy="full")
    if forbidden is not None:
        settings = SecuritySettings(autonomy="full", forbidden_paths=forbidden)
    return SecurityPolicy.from_settings(settings, workspace)


# Under full the parser reads what it can and refuses only forbidden paths; the text runs
# as written. (command, refused)
FULL_WORDS = [
    ("cat /etc/passwd", True),
    ("cat <<EOF\n/etc/passwd\nEOF", False),  # a here-document's lines are data
    ("echo /etc/passwd", False),  # echo names no file
    ("cat /dev/null /dev/urandom", False),
    ("cat $HOME/x /e$X/passwd", False),  # known only when it runs: the sandbox's
    ("ls /usr/share /tmp", False),
    ("for f in /etc/*; do :; done", True),
    ("bash -lc 'cat /etc/hosts'", True),
    ("env FOO=1 cat /etc/hosts", True),
    ("X=1 cat /etc/hosts | wc -l", True),
    ("cat ~nosuchuser-xyz/x", False),
    ("tar -cf - /etc | wc -c", True),
    ("curl file:///etc/passwd", True),
    ("cat 'unclosed", False),  # cannot be read: left to the sandbox
    ("echo x > /proc/sys/kernel/x", True),
]


@pytest.mark.parametrize(("command", "refused"), FULL_WORDS)
def test_full_refuses_forbidden_words_it_can_read(
    tmp_path: Path, command: str, refused: bool
) -> None:
    policy = full_policy(tmp_path)
    if refused:
        with pytest.raises(PolicyError, match="is inside the forbidden path"):
            plan_command(command, policy)
    else:
        assert plan_command(command, policy).script == command


def test_full_keeps_a_workspace_that_lies_in_a_forbidden_folder(tmp_path: Path) -> None:
    """A home under /root (pinclaw run as root): /root stays forbidden, but not the workspace."""
    workspace = tmp_path / "home" / "workspace"
    workspace.mkdir(parents=True)
    policy = full_policy(workspace, [str(tmp_path), str(workspace / "private")])
    assert plan_command("cat notes.txt ~/x", policy).script == "cat notes.txt ~/x"
    for command in ("cat ../x", "cat private/key", f"cat {tmp_path}/other"):
        with pytest.raises(PolicyError, match="forbidden path"):
            plan_command(command, policy)


def test_a_skill_tools_words_get_the_same_checks(tmp_path: Path) -> None:
    supervised = SecurityPolicy.from_settings(SecuritySettings(), tmp_path)
    plan = check_argv(["git", "apply", "p.diff"], supervised)
    assert plan.argv[:3] == ("git", "-c", "core.symlinks=false")
    assert plan.script.startswith("git -c core.symlinks=false apply")
    with pytest.raises(PolicyError, match="forbidden path /etc"):
        check_argv(["cat", "--", "/etc/passwd"], full_policy(tmp_path))


async def test_full_autonomy_refuses_a_command_that_is_not_unicode_as_supervised_does(
    tmp_path: Path,
) -> None:
    """Under supervised the parser says "Refused: the command is not valid Unicode text";
    under full, check_full looked for a NUL but not for a lone surrogate, and the tool raised
    UnicodeEncodeError (the model read "shell failed: UnicodeEncodeError: 'utf-8' codec
    can't encode character '\\ud83d' ...: surrogates not allowed")."""
    command = "echo done " + json.loads('"\\ud83d"')  # half an emoji: JSON allows it
    supervised = await run(tmp_path, command)
    assert supervised.output == "Refused: the command is not valid Unicode text"
    full = await run(tmp_path, command, autonomy="full")
    assert (full.ok, full.output) == (False, supervised.output)
