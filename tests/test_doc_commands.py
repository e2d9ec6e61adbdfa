"""Every command the docs mark runnable runs: each ```sh block with the line
`<!-- runnable -->` directly before it, in README.md and docs/**/*.md, is run by bash against
the model double, as a newcomer's shell would (tests/readme_commands.py). A page is a walk
through: its blocks run in order in one fresh home (`agent init` first, then what needs it).
Each must exit 0, and where an output block (```text) follows it, print those lines as they
stand (a line `...` stands for any lines)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fakes.llm_server import FakeLLM
from readme_commands import newcomer_env

REPO = Path(__file__).resolve().parent.parent
MARK = "<!-- runnable -->"
BLOCK = re.compile(
    rf"^{re.escape(MARK)}\n```sh\n(?P<code>.*?)^```\n(?:\n*```text\n(?P<output>.*?)^```$)?",
    re.MULTILINE | re.DOTALL,
)
RUN_S = 60  # one block's limit: a stuck command fails, it does not hang CI


@dataclass(frozen=True)
class Block:
    """One runnable block: where it is, its commands, the output it promises."""

    where: str
    code: str
    output: str | None


def runnable_blocks() -> list[Block]:
    found = []
    for page in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]:
        text = page.read_text(encoding="utf-8")
        marks = len(re.findall(rf"^{re.escape(MARK)}$", text, re.MULTILINE))
        assert marks == len(BLOCK.findall(text)), f"{page}: a {MARK} line not right before ```sh"
        for match in BLOCK.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            where = f"{page.relative_to(REPO)}:{line}"
            found.append(Block(where, match["code"], match["output"]))
    return found


BLOCKS = runnable_blocks()
PAGES = sorted({block.where.partition(":")[0] for block in BLOCKS})


def test_the_docs_mark_commands_to_run() -> None:
    """An empty list would pass every run below: the command reference's own are there."""
    assert "docs/reference/commands.md" in PAGES, PAGES
    assert any(block.output for block in BLOCKS)


@pytest.fixture(scope="module")
def model() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


@pytest.mark.parametrize("page", PAGES)
def test_runnable_blocks(page: str, model: FakeLLM, tmp_path: Path) -> None:
    env = newcomer_env(tmp_path / "home")
    # `agent` is this checkout's, run by this interpreter (its import path kept).
    shims = tmp_path / "bin"
    shims.mkdir()
    for name in ("agent", "pinclaw"):
        shim = shims / name
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m agent "$@"\n')
        shim.chmod(0o755)
    env |= {
        "PATH": f"{shims}:{env['PATH']}",
        "PINCLAW_LLM__MODEL": "openai/test-model",
        "PINCLAW_LLM__API_BASE": model.base_url,
        "OPENAI_API_KEY": "sk-test-key-not-real-0000",
        "COLUMNS": "80",
    }
    if "PYTHONPATH" in os.environ:  # a worktree run first on the path stays first
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    work = tmp_path / "work"
    work.mkdir()
    for block in (block for block in BLOCKS if block.where.startswith(f"{page}:")):
        result = subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-c", block.code],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=RUN_S,
        )
        said = result.stdout + result.stderr
        assert result.returncode == 0, f"{block.where}: exit {result.returncode}\n{said[-3000:]}"
        if block.output is not None:
            _in_order(block.output, result.stdout, block.where)


def _in_order(promised: str, printed: str, where: str) -> None:
    """The promised lines are printed as they stand, one after another; a line `...` stands
    for any lines (none or more) between them."""
    lines = [line.rstrip() for line in printed.splitlines()]
    runs = re.split(r"^\.\.\.$", promised, flags=re.MULTILINE)
    at = 0
    for run in runs:
        wanted = [line.rstrip() for line in run.strip("\n").splitlines()]
        starts = [
            i
            for i in range(at, len(lines) - len(wanted) + 1)
            if lines[i : i + len(wanted)] == wanted
        ]
        if not starts:
            pytest.fail(
                f"{where}: not printed as promised:\n{run}\n--- printed:\n{printed[-3000:]}"
            )
        at = starts[0] + len(wanted)


def test_an_output_block_is_compared_line_for_line() -> None:
    printed = "Usage: agent\n\nOptions:\n  -h  help\n  -q  quiet\n"
    _in_order("Usage: agent\n...\n  -q  quiet\n", printed, "here")
    with pytest.raises(pytest.fail.Exception, match="not printed as promised"):
        _in_order("Options:\n  -q  quiet\n", printed, "here")  # a line left out
