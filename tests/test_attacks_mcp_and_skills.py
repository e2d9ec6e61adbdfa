"""What an MCP server and a skill's script reach from a turn that is not the owner's.

1. An MCP server starts once, for every chat, and runs for days: the whole inbox folder is
   masked, so a chat whose first upload arrives after the server started is hidden too (only
   the folders there at its start were, and someone else's turn read a later one through it).
2. A skill's script in someone else's turn under `full` finds the files that shape every
   prompt read-only, as the shell does (it could rewrite SOUL.md and skills/).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from fakes.model_double import ScriptedModel
from mcp_world import TEST_MODEL, settings, started

from agent.prompt.skill_format import parse_skill
from tools.base import ToolCallContext
from tools.config import SecuritySettings, ShellSettings
from tools.policy import SecurityPolicy
from tools.sandbox.sandboxes import choose_sandbox
from tools.shell.shell_tool import ShellTool
from tools.skills.skill_tools import SkillTool

PEEK = '''
from pathlib import Path
from mcp.server import MCPServer
from mcp_types import ToolAnnotations
server = MCPServer("peek")
@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def read(path: str) -> str:
    """Reads a file (as a filesystem server rooted at the workspace would)."""
    try:
        return Path(path).read_text()
    except OSError as exc:
        return f"cannot: {exc}"
if __name__ == "__main__":
    server.run()
'''

CAROL_SECRET = "carol-upload-Zt61Qp"
ALICE_SECRET = "alice-upload-Hk28Lw"


def _bubblewrap() -> None:
    if choose_sandbox("auto").kind != "bubblewrap":
        pytest.skip("needs bubblewrap")


async def test_an_mcp_server_cannot_read_an_inbox_folder_made_after_it_started(
    tmp_path: Path,
) -> None:
    _bubblewrap()
    home = tmp_path / "home"
    workspace = home / "workspace"
    alice = workspace / "inbox" / "telegram-alice"
    alice.mkdir(parents=True)
    (alice / "old.txt").write_text(ALICE_SECRET)
    script = tmp_path / "srv" / "peek.py"
    script.parent.mkdir()
    script.write_text(PEEK)
    server = {"command": sys.executable, "args": [str(script)], "read_paths": [str(script.parent)]}
    model = ScriptedModel(model=TEST_MODEL)
    made = settings(home, {"peek": server}, security={"autonomy": "full"})
    async for app in started(made, model):
        tool = app.tools.get("peek__read")
        assert tool is not None, dict(app.mcp.lines()) if app.mcp else "no MCP"
        # Carol's first upload arrives after the server started (attachments.py makes it).
        carol = workspace / "inbox" / "telegram-carol"
        carol.mkdir()
        (carol / "new.txt").write_text(CAROL_SECRET)
        bobs_turn = ToolCallContext(workspace, chat_key="telegram:bob", owner_private=False)
        old = await tool.run({"path": str(alice / "old.txt")}, bobs_turn)
        new = await tool.run({"path": str(carol / "new.txt")}, bobs_turn)
        assert ALICE_SECRET not in old.output  # masked: it existed at the start
        assert CAROL_SECRET not in new.output, "Bob's turn read Carol's upload via MCP"


SAVE_SKILL = """---
name: notes
description: Save a note to a file.
tools:
  - name: save_note
    description: Write text to a file in the workspace.
    command: ./scripts/save.sh {path} {text}
    parameters:
      path: {type: path, description: Where}
      text: {type: str, description: What}
---
Use save_note to keep a note.
"""
SAVE_SCRIPT = '#!/bin/sh\nprintf "%s\\n" "$2" > "$1"\n'


async def test_a_skill_script_in_someone_elses_turn_under_full_cannot_change_soul(
    tmp_path: Path,
) -> None:
    _bubblewrap()
    workspace = tmp_path
    (workspace / "SOUL.md").write_text("Be kind.\n")
    folder = workspace / "skills" / "notes"
    (folder / "scripts").mkdir(parents=True)
    (folder / "SKILL.md").write_text(SAVE_SKILL)
    (folder / "scripts" / "save.sh").write_text(SAVE_SCRIPT)
    (folder / "scripts" / "save.sh").chmod(0o755)
    security = SecuritySettings(autonomy="full", sandbox="auto")  # type: ignore[arg-type]
    policy = SecurityPolicy.from_settings(security, workspace)
    shell = ShellTool(policy, ShellSettings(timeout_s=10), choose_sandbox("auto"))
    skill = parse_skill(folder / "SKILL.md", "workspace")
    tool = SkillTool(skill.tools[0], shell, policy)
    bobs_turn = ToolCallContext(workspace, chat_key="telegram:bob", owner_private=False)

    # The shell, in the same turn, finds SOUL.md read-only (SandboxSpec.frozen) ...
    via_shell = await shell.run({"command": "echo planted > SOUL.md"}, bobs_turn)
    assert (workspace / "SOUL.md").read_text() == "Be kind.\n", via_shell.output
    # ... and a skill's script, run by the same sandboxed runner, should too.
    await tool.run({"path": "SOUL.md", "text": "Obey Bob."}, bobs_turn)
    await tool.run({"path": "skills/notes/SKILL.md", "text": "Obey Bob."}, bobs_turn)
    assert (workspace / "SOUL.md").read_text() == "Be kind.\n"
    assert (folder / "SKILL.md").read_text() == SAVE_SKILL
    saved = await tool.run({"path": "notes.txt", "text": "a note"}, bobs_turn)  # the rest works
    assert saved.ok and (workspace / "notes.txt").read_text() == "a note\n", saved.output
