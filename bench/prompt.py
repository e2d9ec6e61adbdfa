"""System prompt figures: (a) build time, median over N builds (default 1,000), for a
workspace of eight 20,000-character files and 50 skills (goal < 5 ms); (b) tokens of the
full Telegram prompt of a fresh `agent init` workspace with the default tools, by
LiteLLM's counter for openai/gpt-4o-mini (goal <= 3,000); (c) the terminal's first request
in full and compact mode (goals <= 2,000 and <= 1,200 tokens, issue 38), by section and by
tool schema, as `agent prompt show --stats` counts them.

    .venv/bin/python bench/prompt.py [--builds 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from agent.prompt.builder import SystemPromptBuilder  # noqa: E402
from agent.prompt.context import HostInfo, PromptContext, SkillInfo  # noqa: E402
from agent.workspace import BOOTSTRAP_FILES, init_workspace  # noqa: E402
from channels.registry import capabilities_of  # noqa: E402

MODEL = "openai/gpt-4o-mini"
HOST = HostInfo(host="bench", os="Linux", python="3.11")
FILE_CHARS = 20_000
FIRST_REQUEST_GOALS = {"full": 2_000, "compact": 1_200}


def big_workspace(root: Path) -> tuple[SkillInfo, ...]:
    """Eight bootstrap files of 20,000 characters each, and 50 skills on disk."""
    line = "- Keep the greenhouse between 10 and 35 °C; report anything odd at once. 온실 🌱\n"
    body = (line * (FILE_CHARS // len(line) + 1))[:FILE_CHARS]
    for name in BOOTSTRAP_FILES:
        (root / name).write_text(body, encoding="utf-8")
    skills = []
    for index in range(50):
        folder = root / "skills" / f"skill-{index:02d}"
        folder.mkdir(parents=True)
        text = f"Step {index}: do the thing carefully, then report.\n" * 20
        (folder / "SKILL.md").write_text(text, encoding="utf-8")
        skills.append(
            SkillInfo(f"skill-{index:02d}", f"Skill number {index}.", folder / "SKILL.md", text)
        )
    return tuple(skills)


def build_time(builds: int) -> float:
    """Median milliseconds of SystemPromptBuilder.with_defaults().build(ctx)."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        ctx = PromptContext(
            workspace_dir=root,
            model_name=MODEL,
            channel="telegram",
            capabilities=capabilities_of("telegram"),
            host=HOST,
            timezone="Europe/Berlin",
            skills=big_workspace(root),
        )
        times = []
        for _ in range(builds):
            started = time.perf_counter()
            SystemPromptBuilder.with_defaults().build(ctx)
            times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def fresh_prompt_tokens() -> tuple[int, int]:
    """Characters and tokens of the full Telegram prompt of a fresh `agent init` workspace."""
    from agent.app import build_tools, prompt_source
    from agent.config import LLMSettings, Settings, WorkspaceSettings
    from agent.model.profiles.litellm_facts import count_tokens
    from tools.policy import SecurityPolicy

    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp) / "workspace"
        init_workspace(workspace)
        settings = Settings(
            llm=LLMSettings(model=MODEL), workspace=WorkspaceSettings(path=str(workspace))
        )
        policy = SecurityPolicy.from_settings(settings.security, workspace)
        source = prompt_source(settings, build_tools(settings, policy), policy)
        text = source.build(source.context("telegram", capabilities_of("telegram"))).text
    return len(text), count_tokens(MODEL, text)


def first_request_rows() -> list[tuple[str, dict[str, int]]]:
    """(row, tokens by mode) for the terminal's first request in full and compact mode: each
    section, the system prompt, each tool schema, the schemas together and the sum."""
    from agent.cli.prompt_show import inspect_prompt
    from agent.config import LLMSettings, Settings, WorkspaceSettings
    from agent.model.profiles.litellm_facts import count_tokens

    rows: dict[str, dict[str, int]] = {}
    for mode in FIRST_REQUEST_GOALS:
        with tempfile.TemporaryDirectory() as tmp:
            workspace = Path(tmp) / "workspace"
            init_workspace(workspace)
            os.environ["PINCLAW_HOME"] = str(Path(tmp) / "home")
            settings = Settings(
                llm=LLMSettings(model=MODEL), workspace=WorkspaceSettings(path=str(workspace))
            )
            found = inspect_prompt(settings, "cli", mode, MODEL)
        prompt = count_tokens(MODEL, found.text)
        schemas = count_tokens(MODEL, json.dumps(found.schemas))
        counted = [(s.name, count_tokens(MODEL, s.text)) for s in found.sections]
        counted.append(("system prompt", prompt))
        counted += [
            (s["function"]["name"], count_tokens(MODEL, json.dumps(s))) for s in found.schemas
        ]
        counted += [
            (f"{len(found.schemas)} tool schemas", schemas),
            ("first request", prompt + schemas),
        ]
        for name, tokens in counted:
            rows.setdefault(name, {})[mode] = tokens
    return list(rows.items())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--builds", type=int, default=1000)
    builds = parser.parse_args().builds
    median = build_time(builds)
    chars, tokens = fresh_prompt_tokens()
    print(f"build, 8 x 20,000-char files + 50 skills   {median:7.2f} ms  median of {builds:,}")
    print(
        f"fresh workspace, Telegram, default tools  {tokens:7,} tokens ({chars:,} chars, {MODEL})"
    )
    goals = ", ".join(f"{mode} <= {goal:,}" for mode, goal in FIRST_REQUEST_GOALS.items())
    print(f"\nfirst request, terminal, fresh workspace (goals: {goals})")
    print(f"{'':<22}" + "".join(f"{mode:>9}" for mode in FIRST_REQUEST_GOALS))
    for name, by_mode in first_request_rows():
        cells = "".join(
            f"{by_mode[m]:>9,}" if m in by_mode else f"{'-':>9}" for m in FIRST_REQUEST_GOALS
        )
        print(f"{name:<22}{cells}")


if __name__ == "__main__":
    main()
