"""The composition root builds each shared part once per App and hands that one around."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes.model_double import ScriptedModel

import agent.app as app_module
from agent.config import Settings
from agent.security import Scrubber
from tools.sandbox.sandboxes import Landlock, Sandbox
from tools.shell.shell_tool import ShellTool


async def test_an_app_chooses_its_sandbox_and_its_scrubber_once(
    home: Path, model: ScriptedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sandbox probe runs a process: one choice, kept as App.sandbox, is the shell's.
    One scrubber serves the replies and every tool that stores text."""
    chosen: list[Sandbox] = []
    made: list[Scrubber] = []

    def choose(setting: str) -> Sandbox:
        chosen.append(Landlock(7, f"test: {setting}"))  # not what "auto" finds here
        return chosen[-1]

    def scrubber(settings: Settings) -> Scrubber:
        made.append(Scrubber())
        return made[-1]

    monkeypatch.setattr(app_module, "choose_sandbox", choose)
    monkeypatch.setattr(app_module, "make_scrubber", scrubber)
    settings = Settings(memory={"enabled": True}, schedules={"enabled": True})  # type: ignore[arg-type]
    app = await app_module.build_app(settings, model=model)
    try:
        assert chosen == [app.sandbox] and made == [app.scrub]
        shell = app.tools.get("shell")
        assert isinstance(shell, ShellTool) and shell.sandbox_kind == "landlock"
    finally:
        await app.close()
