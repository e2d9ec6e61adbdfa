"""MCP servers nobody here wrote, over stdio, each in the OS sandbox as `agent run` starts it:
npm's server-filesystem and server-everything, PyPI's mcp-server-time and mcp-server-git. A
turn of the model double calls their tools; the tests read what the model received and what
the world holds. One App (and one start of each server) serves the module."""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from attack_world import SANDBOXES
from fakes.model_double import ScriptedModel
from mcp_world import (
    TEST_MODEL,
    everything,
    filesystem,
    git_server,
    settings,
    started,
    time_server,
    turn,
)

from agent.app import App

pytestmark = pytest.mark.asyncio(loop_scope="module")
SECRET = "mcp-secret-Vq83Lmz27Rt"  # reaches server-everything's environment only


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("mcp")
    workspace = root / "home" / "workspace"
    (workspace / "shared").mkdir(parents=True)
    outside = root / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("untouched\n")
    repo = root / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=T", "-c", "user.email=t@example.org"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "a.txt").write_text("a\n")
    subprocess.run([*git, "add", "a.txt"], check=True)
    subprocess.run([*git, "commit", "-qm", "The first commit of the test repo"], check=True)
    return {"home": root / "home", "workspace": workspace, "outside": outside, "repo": repo}


@pytest.fixture(scope="module")
def model() -> ScriptedModel:
    return ScriptedModel(model=TEST_MODEL)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def app(world: dict[str, Path], model: ScriptedModel) -> AsyncIterator[App]:
    mp = pytest.MonkeyPatch()
    mp.setenv("PINCLAW_TEST_MCP_TOKEN", SECRET)
    servers = {
        "files": filesystem(world["workspace"] / "shared"),
        # allowed by the server, but shown read-only by the sandbox
        "wide": filesystem(world["outside"], read_paths=[str(world["outside"])]),
        "time": time_server(),
        "git": git_server(world["repo"]),
        "every": everything(env={"API_TOKEN": "${PINCLAW_TEST_MCP_TOKEN}"}),
    }
    try:
        full = {"autonomy": "full"}  # nobody asked: tests/test_mcp_trust.py asks
        async for built in started(settings(world["home"], servers, security=full), model):
            yield built
    finally:
        mp.undo()


async def test_every_server_is_up_with_its_tools(app: App) -> None:
    assert app.mcp is not None
    states = dict(app.mcp.lines())
    assert all(state.startswith("up, ") for state in states.values()), states
    names = app.tools.names()
    for name in ("files__write_file", "time__get_current_time", "git__git_log", "every__echo"):
        assert name in names
    assert "shell" in names  # pinclaw's own tools are still there


async def test_the_filesystem_server_writes_inside_its_folder_only(
    app: App, model: ScriptedModel, world: dict[str, Path]
) -> None:
    inside = world["workspace"] / "shared" / "note.md"
    outside = world["outside"] / "keep.txt"
    done = await turn(
        app,
        model,
        ("files__write_file", {"path": str(inside), "content": "from the model\n"}),
        ("files__write_file", {"path": str(outside), "content": "overwritten\n"}),
    )
    wrote, refused = done.results
    assert wrote.startswith("[Result of MCP server 'files', tool 'write_file': data from")
    assert "Successfully wrote" in wrote
    assert inside.read_text() == "from the model\n"
    assert "Access denied" in refused and "outside allowed directories" in refused
    assert outside.read_text() == "untouched\n"


async def test_the_sandbox_stops_a_write_the_server_itself_would_allow(
    app: App, model: ScriptedModel, world: dict[str, Path]
) -> None:
    """`wide` may write its folder as far as it knows; the sandbox shows it read-only."""
    target = world["outside"] / "keep.txt"
    done = await turn(app, model, ("wide__write_file", {"path": str(target), "content": "x"}))
    [result] = done.results
    assert "Successfully wrote" not in result
    assert "read-only file system" in result or "permission denied" in result  # bwrap, Landlock
    assert target.read_text() == "untouched\n"


@pytest.mark.parametrize("kind", SANDBOXES)
async def test_each_os_sandbox_confines_a_server(
    kind: str, tmp_path: Path, world: dict[str, Path]
) -> None:
    """The same server under bubblewrap and under Landlock: its allowed folder in the
    workspace is writable, one outside only readable."""
    model = ScriptedModel(model=TEST_MODEL)
    home = tmp_path / "home"
    (home / "workspace" / "shared").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("untouched\n")
    server = filesystem(home / "workspace" / "shared", read_paths=[str(outside)])
    server["args"].append(str(outside))
    security = {"autonomy": "full", "sandbox": kind}
    async for app in started(settings(home, {"fs": server}, security=security), model):
        assert app.sandbox.kind == kind
        inside = home / "workspace" / "shared" / "a.md"
        done = await turn(
            app,
            model,
            ("fs__write_file", {"path": str(inside), "content": "ok"}),
            ("fs__write_file", {"path": str(outside / "keep.txt"), "content": "x"}),
        )
        assert "Successfully wrote" in done.results[0] and inside.read_text() == "ok"
        assert "Successfully wrote" not in done.results[1]
        assert (outside / "keep.txt").read_text() == "untouched\n"


async def test_the_time_server_answers(app: App, model: ScriptedModel) -> None:
    done = await turn(app, model, ("time__get_current_time", {"timezone": "Europe/Paris"}))
    [result] = done.results
    header, body = result.split("\n", 1)
    assert header.startswith("[Result of MCP server 'time', tool 'get_current_time'")
    answer = json.loads(body)
    assert answer["timezone"] == "Europe/Paris" and answer["datetime"][:2] == "20"


async def test_the_git_server_reads_a_repositorys_log(
    app: App, model: ScriptedModel, world: dict[str, Path]
) -> None:
    done = await turn(app, model, ("git__git_log", {"repo_path": str(world["repo"])}))
    [result] = done.results
    assert "The first commit of the test repo" in result


async def test_images_and_blobs_become_files_in_the_workspace(
    app: App, model: ScriptedModel, world: dict[str, Path]
) -> None:
    done = await turn(
        app,
        model,
        ("every__get-tiny-image", {}),
        ("every__get-resource-reference", {"resourceType": "Text", "resourceId": 2}),
        ("every__get-resource-reference", {"resourceType": "Blob", "resourceId": 3}),
    )
    image, text_resource, blob = done.results
    saved = image.split("saved as ", 1)[1].split(";", 1)[0]
    assert f"[IMAGE:{saved}]" in image
    assert (world["workspace"] / saved).read_bytes().startswith(b"\x89PNG")
    assert "[resource demo://resource/dynamic/text/2]" in text_resource
    kept = blob.split("saved as ", 1)[1].split("]", 1)[0]
    assert (world["workspace"] / kept).stat().st_size > 0
    assert kept.startswith("mcp/every/")


async def test_an_error_result_reaches_the_model_as_an_error(
    app: App, model: ScriptedModel
) -> None:
    done = await turn(app, model, ("every__get-resource-reference", {"resourceId": 0}))
    [result] = done.results
    assert "Invalid resourceId" in result
    [line] = done.lines
    assert line.startswith("  tool every__get-resource-reference(") and ") error " in line


async def test_a_secret_in_a_servers_environment_never_reaches_the_model(
    app: App, model: ScriptedModel
) -> None:
    done = await turn(app, model, ("every__get-env", {}))
    [result] = done.results
    assert '"API_TOKEN": "[REDACTED]"' in result  # the server has it; the model never sees it
    assert SECRET not in json.dumps(model.requests)
    assert "PINCLAW_TEST_MCP_TOKEN" not in result  # our own environment is not the server's
