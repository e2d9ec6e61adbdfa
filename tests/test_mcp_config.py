"""`[mcp.servers.NAME]` as the owner writes it: secrets only through the environment, one line
per mistake; what the model is shown of a server's tool (a name the providers take, clean
text, a schema that is an object); and `agent mcp list | tools | call` and `agent doctor` as
the owner runs them, on the toy server (tests/fakes/mcp_toy_server.py)."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest
from daemon_process import agent
from mcp_types import Tool, ToolAnnotations
from mcp_world import TOY

from agent.config import ConfigError, load_settings, make_scrubber
from tools.base import ToolRegistry
from tools.config import SecuritySettings
from tools.mcp.config import McpServerSettings
from tools.mcp.link import ServerLink
from tools.mcp.manager import McpManager
from tools.mcp.schemas import offered, offered_name
from tools.mcp.tool import McpTool
from tools.policy import SecurityPolicy
from tools.sandbox.sandboxes import NoSandbox


def config(home: Path, text: str) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    path = home / "config.toml"
    path.write_text(text)
    return path


def problems(home: Path, text: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_settings(config(home, text))
    return caught.value.problems


def test_a_secret_written_in_the_file_is_refused_with_what_to_write(home: Path) -> None:
    [line] = problems(
        home, '[mcp.servers.github]\ncommand = "gh-mcp"\nenv = { GITHUB_TOKEN = "ghp_abc123" }\n'
    )
    assert line.endswith(
        "mcp.servers.github: Value error, env.GITHUB_TOKEN: secrets are read from the "
        'environment only; write "${GITHUB_TOKEN}" and set that variable in agent.env'
    )
    assert "ghp_abc123" not in line
    [line] = problems(
        home,
        '[mcp.servers.remote]\nurl = "https://example.org/mcp"\n'
        'headers = { Authorization = "Bearer abc123" }\n',
    )
    assert 'headers.Authorization: secrets are read from the environment only; write "${' in line


def test_references_and_plain_settings_are_taken(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PINCLAW_TEST_GH", "ghp-from-env-0123456789")
    settings = load_settings(
        config(
            home,
            '[mcp.servers.github]\ncommand = "gh-mcp"\n'
            'env = { GITHUB_TOKEN = "${PINCLAW_TEST_GH}", GIT_AUTHOR_NAME = "pinclaw" }\n'
            '[mcp.servers.remote]\nurl = "https://example.org/mcp"\n'
            'headers = { Authorization = "Bearer ${PINCLAW_TEST_GH}", X-Team = "garden" }\n',
        )
    )
    assert settings.mcp.servers["github"].env["GIT_AUTHOR_NAME"] == "pinclaw"
    assert settings.mcp.secret_values() == ["ghp-from-env-0123456789"]
    scrub = make_scrubber(settings)
    assert scrub("token ghp-from-env-0123456789 here") == "token [REDACTED] here"


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ('[mcp.servers.both]\ncommand = "x"\nurl = "https://e.org"\n', "set either command"),
        ("[mcp.servers.none]\nenabled = true\n", "set either command"),
        ('[mcp.servers.ftp]\nurl = "ftp://e.org"\n', "url must start with http:// or https://"),
        ('[mcp.servers."my server"]\ncommand = "x"\n', "server name 'my server': use 1-24"),
        ('[mcp.servers.x]\ncommand = "x"\ntimeout_s = 0\n', "mcp.servers.x.timeout_s"),
        ('[mcp.servers.x]\ncommand = "x"\nsandbox = "yes please"\n', "mcp.servers.x.sandbox"),
    ],
)
def test_each_mistake_is_one_line(home: Path, table: str, expected: str) -> None:
    [line] = problems(home, table)
    assert expected in line, line


def sdk_tool(name: str, schema: Any, description: str = "", read_only: bool = False) -> Tool:
    annotations = ToolAnnotations(read_only_hint=True) if read_only else None
    return Tool(name=name, description=description, input_schema=schema, annotations=annotations)


OBJECT = {"type": "object", "properties": {"path": {"type": "string"}}}


def test_what_the_model_is_shown_of_a_tool() -> None:
    shown = offered(
        "srv",
        sdk_tool(
            "read file/v2.0",
            {"$schema": "http://json-schema.org/draft-07/schema#", **OBJECT},
            "Reads\x1b[31m a file.\u202e\u200b\tQuietly.\x07",
            read_only=True,
        ),
    )
    assert not isinstance(shown, str)
    assert shown.name == "srv__read_file_v2_0" and shown.remote == "read file/v2.0"
    assert shown.description == "Reads[31m a file. Quietly."
    assert shown.parameters == OBJECT and shown.read_only_hint
    assert len(offered_name("s" * 24, "t" * 80)) == 64


@pytest.mark.parametrize(
    ("schema", "why"),
    [
        ({"type": "array", "items": {}}, "of type 'array', not an object"),
        ({"type": "object", "properties": []}, "properties are not an object"),
        ({"type": "object", "properties": {"a": {"type": "strin"}}}, "not a valid JSON schema"),
        ({"type": "object", "description": "x" * 9_000}, "characters long (at most 8000)"),
    ],
)
def test_a_bad_schema_leaves_the_tool_out_with_a_log_line(
    schema: Any, why: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    policy = SecurityPolicy.from_settings(SecuritySettings(autonomy="full"), tmp_path)
    registry = ToolRegistry()
    manager = McpManager(
        load_settings(config(tmp_path / "h", '[mcp.servers.srv]\ncommand = "x"\n')).mcp,
        home=tmp_path / "mcp",
        policy=policy,
        sandbox=NoSandbox("test"),
        registry=registry,
    )
    link = manager.links["srv"]
    link.tools = [sdk_tool("bad", schema), sdk_tool("good", OBJECT)]
    with caplog.at_level(logging.WARNING):
        manager._listed(link)
    assert registry.names() == ["srv__good"]
    assert isinstance(registry.get("srv__good"), McpTool)
    [record] = caplog.records
    assert record.getMessage().startswith("MCP server srv: tool 'bad' left out: its input schema")
    assert why in record.getMessage()


def test_a_down_server_is_described_with_why_and_when() -> None:
    link = ServerLink("srv", McpServerSettings(command="x"), lambda on_exit: None, print)  # type: ignore[arg-type,return-value]
    link.state, link.reason = "down", "exited with code 1"
    assert link.describe().startswith("down: exited with code 1; tried again in 0 s")


@pytest.fixture
def toy_home(home: Path) -> Path:
    assert agent("init").returncode == 0
    config(
        home,
        f'[llm]\nmodel = "openai/test-model"\n'
        f"[mcp.servers.toy]\ncommand = {json.dumps(str(Path(__import__('sys').executable)))}\n"
        f"args = [{json.dumps(str(TOY))}]\nread_paths = [{json.dumps(str(TOY.parent))}]\n"
        '[mcp.servers.off]\ncommand = "x"\nenabled = false\n',
    )
    return home


def test_the_cli_lists_servers_tools_and_calls_one(toy_home: Path) -> None:
    listed = agent("mcp", "list")
    assert listed.returncode == 0, listed.stderr
    toy_line, off_line = listed.stdout.splitlines()
    assert toy_line.startswith("toy  up, 8 tools (started in ")
    assert off_line == "off  off (enabled = false)"

    tools = agent("mcp", "tools", "toy")
    assert tools.returncode == 0, tools.stderr
    assert "toy__whoami  (read-only; runs without asking)" in tools.stdout
    assert "toy__write_note  (may change things; asks first)" in tools.stdout

    called = agent("mcp", "call", "toy", "whoami")
    assert called.returncode == 0, called.stderr
    assert called.stdout.startswith("[Result of MCP server 'toy', tool 'whoami'")
    failed = agent("mcp", "call", "toy", "fail", '{"reason": "no"}')
    assert failed.returncode == 1
    bad = agent("mcp", "call", "toy", "whoami", "[1, 2]")
    assert bad.returncode == 2 and "ARGUMENTS must be a JSON object" in bad.stderr
    unknown = agent("mcp", "tools", "nope")
    assert unknown.returncode == 2 and "no MCP server 'nope' (servers: toy, off)" in unknown.stderr


def test_doctor_shows_each_server(toy_home: Path) -> None:
    out = agent("doctor").stdout
    assert "ok  mcp toy: " in out and "sandbox" in out.split("mcp toy: ", 1)[1].splitlines()[0]
    assert "ok  mcp off: off (enabled = false)" in out


def test_a_leading_tilde_in_args_is_the_home_as_a_shell_reads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tools.mcp.stdio import server_launch

    monkeypatch.setenv("HOME", str(tmp_path))
    settings = McpServerSettings(command="true", args=["~/notes", "a~/b", "~"], sandbox=False)
    policy = SecurityPolicy.from_settings(SecuritySettings(), tmp_path)
    launch = server_launch(
        "files", settings, own_folder=tmp_path / "own", policy=policy, sandbox=NoSandbox("test")
    )
    assert launch.argv[-3:] == [f"{tmp_path}/notes", "a~/b", "~"]


def test_a_program_found_on_the_path_inside_the_workspace_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the home as the workspace, ~/.local/bin on the PATH is a folder a model can write:
    a server named by a bare command must not start what it put there (with the server's
    variables); named by its full path, it is the owner's choice."""
    from tools.mcp.stdio import ServerError, server_launch

    workspace = tmp_path / "user"
    planted = workspace / ".local" / "bin" / "npx"
    planted.parent.mkdir(parents=True)
    planted.write_text("#!/bin/sh\nexit 0\n")
    planted.chmod(0o755)
    monkeypatch.setenv("PATH", f"{planted.parent}:{os.environ['PATH']}")
    policy = SecurityPolicy.from_settings(SecuritySettings(), workspace)
    settings = McpServerSettings(command="npx", sandbox=False)
    with pytest.raises(ServerError, match=r"'npx' is found in the workspace .*full path"):
        server_launch("gh", settings, own_folder=tmp_path / "own", policy=policy,
                      sandbox=NoSandbox("test"))  # fmt: skip
    by_path = McpServerSettings(command=str(planted), sandbox=False)
    launch = server_launch(
        "gh", by_path, own_folder=tmp_path / "own", policy=policy, sandbox=NoSandbox("test")
    )
    assert str(planted) in launch.argv
