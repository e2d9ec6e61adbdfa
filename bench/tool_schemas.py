"""The first request's tokens with 0, 10 and 50 deferrable MCP-like tools (goal <= 2,500 with
50): the system prompt, `tools=` and the user's message exactly as a turn sends them to the
model (a recording double answers), counted by LiteLLM's counter for openai/gpt-4o-mini; a
fresh `agent init` workspace with the default tools, in full and compact mode, native and
with the <tool_call> text protocol, and the 50 tools sent whole for comparison.

    .venv/bin/python bench/tool_schemas.py [--model openai/gpt-4o-mini]

`first_request()` and `rows()` are for other benchmarks (bench/mcp.py) to import.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from fakes.many_tools import many_tools  # noqa: E402
from fakes.model_double import FunctionModel, text  # noqa: E402

from agent.app import build_tools, prompt_source  # noqa: E402
from agent.config import AgentSettings, LLMSettings, Settings, WorkspaceSettings  # noqa: E402
from agent.durable.learned_model_facts import LearnedModelFacts  # noqa: E402
from agent.model.profiles.litellm_facts import count_tokens  # noqa: E402
from agent.security import Scrubber  # noqa: E402
from agent.turns.turn import TurnRunner  # noqa: E402
from agent.workspace import init_workspace  # noqa: E402
from channels.base import ChatRef, IncomingMessage  # noqa: E402
from channels.terminal import TerminalChannel  # noqa: E402
from tools.base import Tool, ToolCallContext, ToolRegistry  # noqa: E402
from tools.policy import SecurityPolicy  # noqa: E402

MODEL = "openai/gpt-4o-mini"
COUNTS = (0, 10, 50)
GOAL = 2_500


@dataclass(frozen=True)
class FirstRequest:
    """Tokens of a turn's first request, by part."""

    system: int
    tools: int  # the `tools=` list (0 with the text protocol: the tools are in the prompt)
    message: int
    schemas: int  # how many schemas `tools=` held

    @property
    def total(self) -> int:
        return self.system + self.tools + self.message


def first_request(
    extra: Sequence[Tool],
    *,
    mode: str = "full",
    dispatcher: str = "native",
    budget: int = 1_500,
    model: str = MODEL,
) -> FirstRequest:
    """The first request of a one-line terminal turn with the default tools and `extra`,
    in a throw-away home (its own state.db and `agent init` workspace)."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        workspace = root / "workspace"
        init_workspace(workspace)
        os.environ["PINCLAW_HOME"] = str(root / "home")
        settings = Settings(
            llm=LLMSettings(model=model),
            workspace=WorkspaceSettings(path=str(workspace)),
            agent=AgentSettings(
                prompt_mode=mode,
                tool_dispatcher=dispatcher,
                tool_schema_budget_tokens=budget,
            ),
        )
        policy = SecurityPolicy.from_settings(settings.security, workspace)
        tools = ToolRegistry([*build_tools(settings, policy), *extra])
        recorder = FunctionModel(lambda _request: text("ok"), model=model)
        runner = TurnRunner(
            TerminalChannel(),
            source=prompt_source(settings, tools, policy),
            llm=recorder,
            quirks=LearnedModelFacts(),
            scrub=Scrubber(),
        )
        chat = ChatRef("cli", "bench")
        message = IncomingMessage(chat, "owner", "owner", "what is on my calendar today?")
        asyncio.run(runner.run(message, [], ToolCallContext(workspace), deadline_s=30))
    return _counted(recorder.requests[0], model)


def _counted(request: dict[str, Any], model: str) -> FirstRequest:
    messages = request["messages"]
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
    user = "\n\n".join(str(m["content"]) for m in messages if m["role"] == "user")
    schemas = request.get("tools") or []
    return FirstRequest(
        count_tokens(model, system),
        count_tokens(model, json.dumps(schemas)) if schemas else 0,
        count_tokens(model, user),
        len(schemas),
    )


def rows(model: str = MODEL) -> list[tuple[str, int, FirstRequest]]:
    """(how, MCP-like tools, first request) for 0, 10 and 50 tools in each way a turn sends
    them, and 50 sent whole (budget 0) for comparison."""
    found = []
    for mode, dispatcher in (("full", "native"), ("compact", "native"), ("full", "xml")):
        for count in COUNTS:
            tools = many_tools(count)
            found.append(
                (f"{mode}, {dispatcher}", count, first_request(tools, mode=mode,
                 dispatcher=dispatcher, model=model))
            )  # fmt: skip
        whole = first_request(many_tools(50), mode=mode, dispatcher=dispatcher, budget=0)
        found.append((f"{mode}, {dispatcher}, all sent whole", 50, whole))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=MODEL, help="whose token counter to use")
    args = parser.parse_args()
    print(f"first request by LiteLLM's counter for {args.model} (goal <= {GOAL:,} with 50)")
    header = f"{'how':<34} {'tools':>5} {'system':>7} {'tools=':>7} {'message':>7} {'total':>7}"
    print(header)
    for how, count, found in rows(args.model):
        print(
            f"{how:<34} {count:>5} {found.system:>7,} {found.tools:>7,} {found.message:>7,} "
            f"{found.total:>7,}  ({found.schemas} schemas)"
        )


if __name__ == "__main__":
    main()
