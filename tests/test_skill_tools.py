"""Skill tools: declared in SKILL.md, registered as real tools with schemas, arguments
passed as single argv words, run in the sandbox under the shell's policy."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from attack_world import Owner
from daemon_process import agent
from fakes.llm_server import FakeLLM, text, tool_calls

from agent.app import build_tools
from agent.config import Settings
from agent.prompt.skill_format import SkillError, parse_skill
from agent.prompt.skills import SkillCatalog
from tools.base import ToolCallContext, ToolResult
from tools.config import SecuritySettings, ShellSettings
from tools.policy import SecurityPolicy
from tools.sandbox.sandboxes import choose_sandbox
from tools.shell.shell_tool import ShellTool
from tools.skills.skill_tools import SkillTool
from tools.skills.spec import parse_tool

ARGS_SCRIPT = '#!/bin/sh\nfor a in "$@"; do printf \'[%s]\\n\' "$a"; done\n'
ECHO_SKILL = """---
name: echo
description: Echo arguments back, one per line.
tools:
  - name: echo_args
    description: Print each argument on its own line, in brackets.
    command: ./scripts/args.sh --label={label} {text} {count}
    parameters:
      text: {type: str, description: What to print}
      label: {type: str, enum: [a, b], default: a}
      count: {type: int, default: 1}
---
Use echo_args to show what arrives.
"""


def make_skill(workspace: Path, skill: str = ECHO_SKILL, script: str = ARGS_SCRIPT) -> Path:
    folder = workspace / "skills" / "echo"
    (folder / "scripts").mkdir(parents=True)
    (folder / "SKILL.md").write_text(skill)
    (folder / "scripts" / "args.sh").write_text(script)
    (folder / "scripts" / "args.sh").chmod(0o755)
    return folder


def tool_for(
    workspace: Path,
    autonomy: str = "supervised",
    sandbox: str = "auto",
    allowed: list[str] | None = None,
    index: int = 0,
) -> SkillTool:
    security = SecuritySettings(
        autonomy=autonomy,  # type: ignore[arg-type]
        allowed_commands=allowed or ["cat", "ls"],
        sandbox=sandbox,
    )  # type: ignore[arg-type]
    policy = SecurityPolicy.from_settings(security, workspace)
    shell = ShellTool(
        policy,
        ShellSettings(timeout_s=10),
        choose_sandbox(sandbox),  # type: ignore[arg-type]
        sandbox_off_by_owner=sandbox == "off",
    )
    skill = parse_skill(workspace / "skills" / "echo" / "SKILL.md", "workspace")
    return SkillTool(skill.tools[index], shell, policy)


async def call(
    tool: SkillTool, workspace: Path, args: dict[str, Any], owner: Owner | None = None
) -> ToolResult:
    return await tool.run(args, ToolCallContext(workspace, approve=owner))


# -- the declaration ----------------------------------------------------------------------


def test_schema_comes_from_the_typed_parameters(tmp_path: Path) -> None:
    make_skill(tmp_path)
    tool = tool_for(tmp_path)
    assert tool.name == "echo_args"
    assert tool.description == "Print each argument on its own line, in brackets. (skill echo)"
    assert tool.parameters == {
        "type": "object",
        "properties": {
            "text": {"type": "string", "description": "What to print"},
            "label": {"enum": ["a", "b"], "type": "string", "default": "a"},
            "count": {"type": "integer", "default": 1},
        },
        "required": ["text"],
        "additionalProperties": False,
    }


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        ({"command": "{prog} x", "parameters": {"prog": "str"}}, "program cannot come from"),
        ({"command": "./scripts/args.sh", "parameters": {"x": "str"}}, "'x' is not used"),
        ({"command": "./scripts/args.sh {y}"}, "{y}, which is not a parameter"),
        ({"command": "sh -c 'echo {x}'", "parameters": {"x": "str"}}, "sh runs code"),
        ({"command": "python3 -c 'print(1)' {x}", "parameters": {"x": "str"}}, "runs code"),
        ({"command": "sudo ./scripts/args.sh"}, "sudo cannot run"),
        ({"command": "../outside.sh"}, "must be inside the skill's folder"),
        ({"command": "./scripts/args.sh {x!r}", "parameters": {"x": "str"}}, "{name}"),
        ({"command": "./scripts/args.sh {x}", "parameters": {"x": "list"}}, "type 'list'"),
        (
            {
                "command": "./scripts/args.sh {x}",
                "parameters": {"x": {"type": "int", "default": "3"}},
            },
            "default",
        ),
        ({"command": "./scripts/args.sh 'unclosed"}, "command: No closing quotation"),
        ({"command": "./scripts/args.sh", "timeout": 3}, "unknown key 'timeout'"),
    ],
)
def test_bad_declarations_are_refused_at_load(
    tmp_path: Path, entry: dict[str, Any], reason: str
) -> None:
    folder = make_skill(tmp_path)
    (tmp_path / "skills" / "outside.sh").write_text("#!/bin/sh\n")
    with pytest.raises(ValueError) as raised:
        parse_tool({"name": "t", "description": "d", **entry}, folder, "echo")
    assert reason in str(raised.value)


def test_a_bad_tool_skips_its_skill_naming_the_tool(tmp_path: Path) -> None:
    make_skill(tmp_path, ECHO_SKILL.replace("./scripts/args.sh", "./scripts/gone.sh"))
    with pytest.raises(SkillError, match=r"tools\[0\] \(echo_args\): ./scripts/gone.sh: no such"):
        parse_skill(tmp_path / "skills" / "echo" / "SKILL.md", "workspace")


def test_an_interpreter_running_the_skills_script_is_accepted(tmp_path: Path) -> None:
    folder = make_skill(tmp_path)
    spec = parse_tool(
        {
            "name": "t",
            "description": "d",
            "command": "sh -e scripts/args.sh {x}",
            "parameters": {"x": "str"},
        },
        folder,
        "echo",
    )
    assert spec.script == folder.resolve() / "scripts" / "args.sh" and spec.script_index == 2


# -- arguments as argv words --------------------------------------------------------------


async def test_a_hostile_value_is_one_literal_argument(tmp_path: Path) -> None:
    make_skill(tmp_path)
    (tmp_path / "canary.txt").write_text("still here")
    result = await call(
        tool_for(tmp_path, "full"),
        tmp_path,
        {"text": "x; rm -rf ~ $(id) `id` | cat", "label": "b", "count": 3},
    )
    assert result.ok, result.output
    assert result.output == "exit code: 0\n[--label=b]\n[x; rm -rf ~ $(id) `id` | cat]\n[3]\n"
    assert (tmp_path / "canary.txt").read_text() == "still here"


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ({"text": "hi", "count": "many"}, "count: Input should be a valid integer"),
        ({"text": "hi", "label": "c"}, "label: Input should be 'a' or 'b'"),
        ({"count": 2}, "text: Field required"),
        ({"text": "hi", "extra": 1}, "extra: unexpected argument"),
        ({"text": 5}, "text: Input should be a valid string"),
    ],
)
async def test_arguments_are_validated_against_the_schema(
    tmp_path: Path, args: dict[str, Any], error: str
) -> None:
    make_skill(tmp_path)
    result = await call(tool_for(tmp_path, "full"), tmp_path, args)
    assert not result.ok and result.output.startswith("Invalid arguments for echo_args: ")
    assert error in result.output


async def test_a_value_that_would_be_an_option_is_refused(tmp_path: Path) -> None:
    make_skill(tmp_path)
    result = await call(tool_for(tmp_path, "full"), tmp_path, {"text": "--delete-all"})
    assert not result.ok and "would be read as an option" in result.output
    embedded = await call(tool_for(tmp_path, "full"), tmp_path, {"text": "ok", "count": -1})
    assert not embedded.ok and "{count}" in embedded.output


async def test_after_a_double_dash_a_leading_dash_is_an_argument(tmp_path: Path) -> None:
    make_skill(tmp_path, ECHO_SKILL.replace("{text} {count}", "{count} -- {text}"))
    result = await call(tool_for(tmp_path, "full"), tmp_path, {"text": "-v"})
    assert result.ok and result.output == "exit code: 0\n[--label=a]\n[1]\n[--]\n[-v]\n"


# -- the policy ---------------------------------------------------------------------------


async def test_supervised_asks_before_the_skills_script_and_shows_the_words(
    tmp_path: Path,
) -> None:
    make_skill(tmp_path)
    owner = Owner(answer=True)
    tool = tool_for(tmp_path)
    result = await call(tool, tmp_path, {"text": "a b"}, owner)
    assert result.ok and "[a b]" in result.output
    [request] = owner.asked
    assert request.tool == "echo_args"
    assert request.action == "skills/echo/scripts/args.sh --label=a 'a b' 1"
    assert "runs the skill's script skills/echo/scripts/args.sh" in request.reason
    [rule] = request.rules
    assert rule.startswith("skill:echo_args@")
    # "Always allow" holds for this version of the script only
    await call(tool, tmp_path, {"text": "again"}, owner)
    assert owner.asked[1].rules == (rule,)
    (tmp_path / "skills" / "echo" / "scripts" / "args.sh").write_text(ARGS_SCRIPT + "# changed\n")
    await call(tool, tmp_path, {"text": "again"}, owner)
    assert owner.asked[2].rules != (rule,)


async def test_supervised_denied_or_unanswered_does_not_run(tmp_path: Path) -> None:
    make_skill(tmp_path, script="#!/bin/sh\ntouch ran.txt\n")
    for owner in (Owner(answer=False), None):
        result = await call(tool_for(tmp_path), tmp_path, {"text": "x"}, owner)
        assert not result.ok and result.output.startswith("Not run: the owner did not approve")
    assert not (tmp_path / "ran.txt").exists()


CAT_SKILL = """---
name: echo
description: Show files.
tools:
  - name: show_file
    description: Print a workspace file.
    command: cat -- {file}
    parameters:
      file: path
---
"""


async def test_a_command_on_path_is_checked_like_the_shell(tmp_path: Path) -> None:
    make_skill(tmp_path, CAT_SKILL)
    (tmp_path / "notes.txt").write_text("hello")
    owner = Owner(answer=True)
    ok = await call(tool_for(tmp_path), tmp_path, {"file": "notes.txt"}, owner)
    assert ok.ok and ok.output == "exit code: 0\nhello" and owner.asked == []  # cat is allowed
    outside = await call(tool_for(tmp_path), tmp_path, {"file": "/etc/hostname"}, owner)
    assert not outside.ok and "outside the workspace" in outside.output
    not_allowed = await call(
        tool_for(tmp_path, allowed=["ls"]), tmp_path, {"file": "notes.txt"}, owner
    )
    assert not_allowed.ok and owner.asked[0].rules == ("shell:cat",)


async def test_read_only_refuses_a_tool_declared_as_writing(tmp_path: Path) -> None:
    settings = Settings(security={"autonomy": "read_only"})  # type: ignore[arg-type]
    settings._home = tmp_path
    workspace = settings.workspace_dir
    make_skill(
        workspace, ECHO_SKILL.replace("    parameters:", "    writes: true\n    parameters:")
    )
    (workspace / "skills" / "echo" / "scripts" / "args.sh").write_text("#!/bin/sh\ntouch w\n")
    registry = build_tools(settings, SecurityPolicy.from_settings(settings.security, workspace))
    tool = registry.get("echo_args")
    assert tool is not None and tool.parameters["required"] == ["text"]  # still offered
    result = await tool.run({"text": "x"}, ToolCallContext(workspace))
    assert not result.ok and "autonomy is read_only" in result.output
    assert not (workspace / "w").exists()


async def test_read_only_runs_a_script_only_where_the_sandbox_holds_it(tmp_path: Path) -> None:
    make_skill(tmp_path, script="#!/bin/sh\necho trying\ntouch w.txt\n")
    result = await call(tool_for(tmp_path, "read_only"), tmp_path, {"text": "x"})
    # The effect, not the wording: bubblewrap says "Read-only file system", Landlock
    # "Permission denied"; either way touch fails and nothing is written.
    assert not result.ok and result.output.startswith("exit code: 1\ntrying\n")
    assert not (tmp_path / "w.txt").exists()
    unsandboxed = await call(
        tool_for(tmp_path, "read_only", sandbox="off"), tmp_path, {"text": "x"}
    )
    assert not unsandboxed.ok and "no OS sandbox would keep" in unsandboxed.output
    assert not (tmp_path / "w.txt").exists()


# -- registration -------------------------------------------------------------------------


def test_build_tools_registers_read_skill_and_the_skill_tools(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = Settings()
    settings._home = tmp_path
    workspace = settings.workspace_dir
    make_skill(workspace)
    taken = workspace / "skills" / "taken"
    taken.mkdir()
    (taken / "SKILL.md").write_text(
        "---\nname: taken\ndescription: d\ntools:\n  - name: shell\n    description: d\n"
        "    command: ls\n---\n"
    )
    bundled = tmp_path / "bundled" / "packaged"
    (bundled / "scripts").mkdir(parents=True)
    (bundled / "scripts" / "run.sh").write_text("#!/bin/sh\n")
    (bundled / "SKILL.md").write_text(
        "---\nname: packaged\ndescription: d\ntools:\n  - name: packaged_run\n"
        "    description: d\n    command: ./scripts/run.sh\n---\n"
    )
    policy = SecurityPolicy.from_settings(settings.security, workspace)
    skills = SkillCatalog(workspace / "skills", tmp_path / "bundled")
    with caplog.at_level(logging.WARNING, logger="agent.app"):
        registry = build_tools(settings, policy, skills=skills)
    names = registry.names()
    assert "read_skill" in names and "echo_args" in names and names.count("shell") == 1
    assert "packaged_run" not in names
    lines = sorted(r.getMessage() for r in caplog.records)
    assert lines == [
        f"skill {bundled / 'SKILL.md'}: tool packaged_run left out: its script is outside "
        "the workspace, where commands cannot see it",
        f"skill {taken / 'SKILL.md'}: tool shell left out: the name is taken by another tool",
    ]
    schema = next(s for s in registry.schemas() if s["function"]["name"] == "echo_args")
    assert schema["function"]["parameters"]["required"] == ["text"]


def test_disabled_skills_register_no_tools(tmp_path: Path) -> None:
    settings = Settings(skills={"enabled": False})  # type: ignore[arg-type]
    settings._home = tmp_path
    make_skill(settings.workspace_dir)
    policy = SecurityPolicy.from_settings(settings.security, settings.workspace_dir)
    names = build_tools(settings, policy).names()
    assert "read_skill" not in names and "echo_args" not in names


# -- end to end ---------------------------------------------------------------------------


def test_skill_tool_end_to_end_hostile_text_arrives_as_one_argument(
    llm_env: dict[str, str], fake_llm: FakeLLM, home: Path
) -> None:
    env = {**llm_env, "PINCLAW_SECURITY__AUTONOMY": "full"}
    assert agent("init", env=env).returncode == 0
    workspace = home / "workspace"
    make_skill(workspace)
    (workspace / "canary.txt").write_text("still here")
    fake_llm.script(
        tool_calls(
            ("read_skill", {"name": "echo"}), ("echo_args", {"text": "x; rm -rf ~", "count": 2})
        ),
        text("It printed x; rm -rf ~ as one argument."),
    )
    result = agent("run", "-m", "Echo `x; rm -rf ~` with the echo skill", env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "It printed x; rm -rf ~ as one argument.\n"
    first = fake_llm.requests[0]
    offered = {t["function"]["name"]: t["function"] for t in first["tools"]}
    assert offered["echo_args"]["parameters"]["properties"]["text"]["type"] == "string"
    assert "\n- echo: Echo arguments back, one per line.\n" in first["messages"][0]["content"]
    results = [m["content"] for m in fake_llm.requests[1]["messages"] if m["role"] == "tool"]
    assert results == [
        "Use echo_args to show what arrives.\n\n[Files of this skill: scripts/args.sh. "
        'Read one with read_skill(name="echo", file="...").]',
        "exit code: 0\n[--label=a]\n[x; rm -rf ~]\n[2]\n",
    ]
    assert (workspace / "canary.txt").read_text() == "still here"
