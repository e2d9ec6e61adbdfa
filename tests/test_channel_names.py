"""Adding a channel is one folder and one registration line (channels/registry.py): the core
names no channel, the registry and the kinds stay light, and every kind's settings model and
adapter are there to be loaded."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from channels.config import ChannelSection, section_model
from channels.kind import ChannelKind, loaded
from channels.registry import channel_kinds

REPO = Path(__file__).resolve().parent.parent
NAMES = {"telegram", "discord"}
# Where the names may still be written, and why:
EXCEPTIONS = {
    # `agent init`'s guided questions: each platform's own help (where its token and a user's
    # id are found, Telegram's @username), its flags (--telegram-token, --discord-owner) and
    # its token check against the platform's API; tests/test_init_guided.py holds the dialogue.
    "agent/cli/setup/",
}


def named_channels(path: Path) -> list[str]:
    """Every string literal of `path` that is a channel's name: "line N: 'name'"."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        f"line {node.lineno}: {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value in NAMES
    ]


def core_files() -> list[Path]:
    found = sorted(p for package in ("agent", "tools") for p in (REPO / package).rglob("*.py"))
    return [p for p in found if not str(p.relative_to(REPO)).startswith(tuple(EXCEPTIONS))]


def test_the_core_names_no_channel() -> None:
    found = {
        str(path.relative_to(REPO)): named
        for path in core_files()
        if (named := named_channels(path))
    }
    assert not found, f"ask channels/registry.py instead: {found}"


def test_the_finder_finds_a_planted_name(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text('CHANNELS = ("cli", "telegram")\n')
    assert named_channels(planted) == ["line 1: 'telegram'"]


def test_the_registry_imports_no_platform_library_nor_pydantic() -> None:
    """`agent --help` lists the channels: the kinds are data, their adapters loaded later."""
    code = (
        "import sys, channels.registry\n"
        "print([m for m in ('telegram', 'discord', 'pydantic', 'asyncio', 'logging')"
        " if m in sys.modules])"
    )
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert found.stdout.strip() == "[]", found.stderr


@pytest.mark.parametrize("kind", channel_kinds(), ids=lambda kind: kind.name)
def test_each_kind_names_its_settings_and_an_adapter_that_shows_what_it_declares(
    kind: ChannelKind,
) -> None:
    assert issubclass(section_model(kind), ChannelSection)
    adapter = loaded(kind.adapter)
    assert adapter.name == kind.name
    assert adapter.delivery_instructions == kind.delivery_instructions
    shown = adapter.capabilities
    assert (shown.display_name, shown.markup, shown.max_message_chars, shown.media) == (
        kind.capabilities.display_name,
        kind.capabilities.markup,
        kind.capabilities.max_message_chars,
        kind.capabilities.media,
    )
