"""The one path resolver, the read-only gate and secret scrubbing, asserted on the world:
what a tool hands back, what is on disk, what a chat or the store would hold."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent.runtime.media import resolve_reply
from agent.security import ScrubbedStream, Scrubber, scrub_message
from tools.base import ToolCallContext, read_only
from tools.config import MemorySettings, SecuritySettings
from tools.files import FileTools
from tools.memory.memory_tools import MemoryTools
from tools.paths import PathRules, PolicyError
from tools.policy import SecurityPolicy

SECRET = "sk-live-9f8e7d6c5b4a3210"


@pytest.fixture
def world(tmp_path: Path) -> tuple[Path, Path]:
    """A pinclaw home with a secret config next to the workspace, and an outside file."""
    home = tmp_path / "home"
    workspace = home / "workspace"
    workspace.mkdir(parents=True)
    (home / "config.toml").write_text(f"token = '{SECRET}'\n")
    (tmp_path / "outside.txt").write_text(f"outside {SECRET}\n")
    (workspace / "notes.txt").write_text("milk\n")
    return home, workspace


def policy(home: Path, workspace: Path, autonomy: str = "supervised") -> SecurityPolicy:
    settings = SecuritySettings(autonomy=autonomy, forbidden_paths=[str(workspace / "private")])  # type: ignore[arg-type]
    return SecurityPolicy.from_settings(settings, workspace, home=home)


async def run(p: SecurityPolicy, name: str, **args: object) -> str:
    """One file tool call as the app builds them (writers refuse under read_only)."""
    built = FileTools(p).tools()
    registry = {t.name: t for t in (read_only(built) if p.autonomy == "read_only" else built)}
    result = await registry[name].run(dict(args), ToolCallContext(p.workspace))
    return ("ok: " if result.ok else "error: ") + result.output


async def test_a_hard_link_from_outside_is_neither_read_nor_written(
    world: tuple[Path, Path],
) -> None:
    home, workspace = world
    os.link(home.parent / "outside.txt", workspace / "linked.txt")
    p = policy(home, workspace)
    read = await run(p, "file_read", path="linked.txt")
    assert read.startswith("error: Refused") and SECRET not in read
    write = await run(p, "file_write", path="linked.txt", content="pwned")
    assert write.startswith("error: Refused")
    assert (home.parent / "outside.txt").read_text() == f"outside {SECRET}\n"


async def test_a_hard_link_with_both_names_inside_is_fine(world: tuple[Path, Path]) -> None:
    home, workspace = world
    os.link(workspace / "notes.txt", workspace / "copy.txt")
    assert await run(policy(home, workspace), "file_read", path="copy.txt") == "ok: milk\n"


@pytest.mark.parametrize(
    "raw",
    ["../config.toml", "~/../config.toml", "~+/notes.txt", "~root/x", "private/key", "a\x00b",
     "", str(Path("/etc/passwd"))],
)  # fmt: skip
async def test_the_resolver_refuses(world: tuple[Path, Path], raw: str) -> None:
    home, workspace = world
    (workspace / "private").mkdir()
    (workspace / "private" / "key").write_text(SECRET)
    with pytest.raises(PolicyError):
        policy(home, workspace).resolve_path(raw)
    out = await run(policy(home, workspace), "file_read", path=raw)
    assert out.startswith("error: Refused") and SECRET not in out


def test_tilde_is_the_workspace(world: tuple[Path, Path]) -> None:
    home, workspace = world
    assert policy(home, workspace).resolve_path("~/notes.txt") == workspace.resolve() / "notes.txt"


def test_the_runtime_files_follow_the_home_wherever_it_is(world: tuple[Path, Path]) -> None:
    home, workspace = world
    forbidden = policy(home, workspace).forbidden_paths
    assert home.resolve() / "config.toml" in forbidden and home.resolve() / "state.db" in forbidden


@pytest.mark.parametrize(
    "marker", ["[DOCUMENT:a\x00b]", "[DOCUMENT:~+/x]", "[IMAGE:../config.toml]"]
)
def test_a_bad_marker_is_reported_in_the_reply(world: tuple[Path, Path], marker: str) -> None:
    _home, workspace = world
    reply = resolve_reply(f"Here it is. {marker}", PathRules.build(workspace, ()))
    assert reply.media == () and "Could not send" in reply.text and "Here it is." in reply.text


async def test_read_only_writes_nothing_with_the_file_tools(world: tuple[Path, Path]) -> None:
    home, workspace = world
    p = policy(home, workspace, "read_only")
    assert (await run(p, "file_write", path="new.txt", content="x")).startswith("error: Refused")
    assert (await run(p, "file_edit", path="notes.txt", old_text="milk", new_text="x")).startswith(
        "error"
    )
    assert (
        not (workspace / "new.txt").exists() and (workspace / "notes.txt").read_text() == "milk\n"
    )


async def test_read_only_stores_no_memory(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    [store] = [
        t for t in read_only(MemoryTools(db, MemorySettings()).tools()) if t.name == "memory_store"
    ]
    result = await store.run(
        {"content": "the cat is Miso"}, ToolCallContext(tmp_path, chat_key="c")
    )
    assert not result.ok and "read_only" in result.output
    assert not db.exists()


async def test_a_memory_never_keeps_a_secret(tmp_path: Path) -> None:
    import sqlite3

    db = tmp_path / "state.db"
    memory = MemoryTools(db, MemorySettings(), scrub=Scrubber([SECRET]))
    [store] = [t for t in memory.tools() if t.name == "memory_store"]
    await store.run({"content": f"the key is {SECRET}"}, ToolCallContext(tmp_path, chat_key="c"))
    rows = sqlite3.connect(db).execute("SELECT content FROM memories").fetchall()
    assert rows and all(SECRET not in content for (content,) in rows)


@pytest.mark.parametrize(
    "text",
    [SECRET, " ".join(SECRET), "\n".join(SECRET), f"key={SECRET[:10]}  {SECRET[10:]}"],
    ids=["whole", "spaced", "one-per-line", "split-once"],
)
def test_a_configured_secret_is_found_even_when_split(text: str) -> None:
    scrubbed = Scrubber([SECRET])(f"before {text} after")
    assert "[REDACTED]" in scrubbed and "".join(scrubbed.split()).find(SECRET) == -1


def test_a_streamed_secret_never_shows_in_part() -> None:
    shown: list[str] = []
    stream = ScrubbedStream(shown.append, Scrubber([SECRET]))
    for piece in ["Your key: ", SECRET[:6], SECRET[6:12], SECRET[12:], " — keep it. And ", "more"]:
        stream(piece)
    text = "".join(shown)
    assert "[REDACTED]" in text and SECRET[:6] not in text and text.startswith("Your key: ")


def test_stored_messages_carry_no_secret_in_text_or_tool_arguments() -> None:
    scrub = Scrubber([SECRET])
    call = {"name": "shell", "arguments": f'{{"command": "echo {SECRET}"}}'}
    message = {
        "role": "assistant",
        "content": f"using {SECRET}",
        "tool_calls": [{"id": "1", "type": "function", "function": call}],
    }
    stored = scrub_message(message, scrub)
    assert SECRET not in repr(stored) and stored["tool_calls"][0]["function"]["name"] == "shell"
