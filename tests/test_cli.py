"""The `agent` command as a user runs it: a subprocess, environment pointed at the fakes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from daemon_process import agent
from fakes.llm_server import FakeLLM, text, tool_calls

REPO = Path(__file__).resolve().parent.parent


def test_one_shot_writes_a_file_then_reads_it_with_the_shell(
    llm_env: dict[str, str], fake_llm: FakeLLM, home: Path
) -> None:
    fake_llm.script(
        tool_calls(("file_write", {"path": "greeting.txt", "content": "hello from pinclaw"})),
        tool_calls(("shell", {"command": "cat greeting.txt"})),
        text("The file says: hello from pinclaw"),
    )
    result = agent("run", "-m", "Write a greeting to greeting.txt and show it", env=llm_env)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "The file says: hello from pinclaw\n"
    assert (home / "workspace" / "greeting.txt").read_text() == "hello from pinclaw"
    tool_results = [m["content"] for m in fake_llm.requests[2]["messages"] if m["role"] == "tool"]
    assert tool_results == [
        "Wrote 18 characters to greeting.txt",
        "exit code: 0\nhello from pinclaw",
    ]
    assert "tool file_write(" in result.stderr and "tool shell(" in result.stderr
    assert "[turn ended: done; 2 tool calls;" in result.stderr
    system = fake_llm.requests[0]["messages"][0]
    assert system["role"] == "system" and "## Tools" in system["content"]
    assert "Write a greeting" in fake_llm.requests[0]["messages"][1]["content"]


def test_unreachable_model_exits_1_with_one_line(llm_env: dict[str, str]) -> None:
    env = {
        **llm_env,
        "PINCLAW_LLM__API_BASE": "http://127.0.0.1:9/v1",
        "PINCLAW_LLM__NUM_RETRIES": "0",
    }
    result = agent("run", "-m", "hello?", env=env)
    assert result.returncode == 1
    assert result.stdout == ""
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "no model answered" in errors[0]
    assert "Traceback" not in result.stderr


def test_sessions_continue_only_when_named(llm_env: dict[str, str], fake_llm: FakeLLM) -> None:
    for message in ("first", "second"):
        assert agent("run", "-m", message, "--session", "work", env=llm_env).returncode == 0
    assert agent("run", "-m", "third", env=llm_env).returncode == 0
    contents = [[m["content"] for m in r["messages"][1:]] for r in fake_llm.requests]
    assert any("first" in c for c in contents[1]) and "echo: " in contents[1][1]
    assert len(contents[2]) == 1  # a one-shot without --session starts afresh


def test_a_chat_session_name_not_utf8_is_refused_in_one_line(home: Path) -> None:
    """`agent chat --session` with a Latin-1 terminal's bytes (lone surrogates in argv)."""
    result = agent("chat", "--session", "caf\udce9", env={"PINCLAW_HOME": str(home)})
    assert (result.returncode, result.stderr) == (
        2,
        "error: --session: the name is not UTF-8 text (the terminal's encoding?)\n",
    )


def test_help_and_version_do_not_import_litellm(home: Path) -> None:
    code = (
        "import sys; from agent.cli.main import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('litellm', 'pydantic_settings', 'telegram', 'discord', 'yaml',"
        " 'asyncio', 'logging')"
        " if m in sys.modules]\nprint('heavy:', heavy)\n"
        "print(*[m for m in sys.modules if m.startswith('agent.cli.')])"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert "run" in result.stdout and "heavy: []" in result.stdout
    assert "agent.cli.stores.schedules" not in result.stdout  # groups are listed, not imported
    assert agent("--version").stdout.strip() == "pinclaw, version 0.1.0"


def test_help_lists_each_lazy_group_with_its_own_summary() -> None:
    import importlib

    from agent.cli.main import _Commands

    for name, module in _Commands.ELSEWHERE.items():
        command = getattr(importlib.import_module(module), name)
        assert command.get_short_help_str(1000) == _Commands.SUMMARIES[name]


def test_init_creates_home_and_never_overwrites(home: Path) -> None:
    first = agent("init")
    assert first.returncode == 0
    assert (home / "config.toml").read_text().startswith("# pinclaw configuration")
    soul = home / "workspace" / "SOUL.md"
    soul.write_text("my own soul")
    second = agent("init")
    assert soul.read_text() == "my own soul"
    assert f"kept     {soul} (already there)" in second.stdout


def test_doctor_reports_missing_key_without_network(home: Path) -> None:
    env = {"PINCLAW_LLM__MODEL": "anthropic/claude-x", "ANTHROPIC_API_KEY": ""}
    agent("init")
    result = agent("doctor", env=env)
    assert result.returncode == 1
    assert "FAIL api key: no API key: set ANTHROPIC_API_KEY" in result.stdout


def test_full_autonomy_one_shot_cannot_read_config_state_or_environ(
    llm_env: dict[str, str], fake_llm: FakeLLM, home: Path
) -> None:
    """The sandbox is the boundary under `full`: the runtime's files and environment are
    simply not there for a command, whatever it runs."""
    secret = "tg-secret-value-4Kq8Wm2Zx7"
    # A plain variable name: the scrubber does not know it, only the sandbox keeps it out.
    env = {**llm_env, "PINCLAW_SECURITY__AUTONOMY": "full", "PINCLAW_TEST_VALUE": secret}
    assert agent("init", env=env).returncode == 0
    (home / "config.toml").write_text((home / "config.toml").read_text() + f"\n# {secret}\n")
    attacks = [
        f"cat {home}/config.toml",
        "cat ../config.toml",
        f"head -c 4096 {home}/state.db",
        "cat /proc/$PPID/environ",
        "grep -ra tg-secret /proc/*/environ",
    ]
    fake_llm.script(
        tool_calls(*(("shell", {"command": command}) for command in attacks)),
        text("done"),
    )
    result = agent("run", "-m", "read everything", env=env)
    assert result.returncode == 0, result.stderr
    results = [m["content"] for m in fake_llm.requests[1]["messages"] if m["role"] == "tool"]
    assert len(results) == len(attacks)
    assert all(secret not in output and "sk-test-key" not in output for output in results)
    assert all(not output.startswith("exit code: 0\n[") for output in results), results
