"""README's picture of `agent chat`: one exchange drawn by the chat's own terminal view
(agent/cli/chat/terminal_view.py's RichView, the greeting and hint of agent/cli/chat/loop.py,
tool lines from agent/runtime/one_shot.py's describe_event) into rich's recording console,
saved as docs/assets/chat.svg. The exchange is scripted here, so the picture shows how the
chat looks, not a model's words. Remake it from the repository's root with
`.venv/bin/python docs/assets/chat_picture.py`."""

from __future__ import annotations

import io
import json
from pathlib import Path

from rich.console import Console
from rich.text import Text

from agent.cli.chat.terminal_view import HINT, PROMPT, RichView
from agent.runtime.one_shot import describe_event
from agent.turns.loop import ToolEvent

OUT = Path(__file__).resolve().parent / "chat.svg"
SESSION = "chat-20261206-101500-3f2a"
ASKED = "What's in my workspace, and is the greenhouse fan on?"
TOOLS = (
    ToolEvent("file_list", "{}", ok=True, seconds=0.01),
    ToolEvent("gpio_read", json.dumps({"pin": "fan"}), ok=True, seconds=0.03),
)
REPLY = """Your workspace holds the usual files:

- **AGENTS.md**, **SOUL.md**, **USER.md**: how I work, my tone, what I know about you
- **notes/greenhouse.md**: your watering log, last entry yesterday

The greenhouse fan (pin 9) is **off**. Say *"fan on at half speed"* and I'll set it."""


def draw(console: Console) -> None:
    """The greeting, one line typed at the prompt, the turn as RichView draws it."""
    console.print(Text(f"pinclaw chat · session {SESSION} (new) · answered by the daemon"))
    console.print(Text(HINT))
    console.print(Text.assemble((PROMPT, "bold"), ASKED))
    view = RichView(console, editor=None)  # type: ignore[arg-type]  # nothing is asked here
    view.begin()
    for event in TOOLS:
        view.tool(describe_event(event))
    view.reply(REPLY)
    view.end(plain=False)
    console.print(Text(PROMPT, style="bold"))


def main() -> None:
    console = Console(
        file=io.StringIO(), record=True, width=104, force_terminal=True, color_system="truecolor"
    )
    draw(console)
    console.save_svg(str(OUT), title="agent chat")
    print(f"wrote {OUT.name}")


if __name__ == "__main__":
    main()
