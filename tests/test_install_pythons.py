"""README's first command on each Python pinclaw supports, with the pip that Python's venv
brings: a `git clone` of HEAD, the command read out of README and run by bash with `python3`
being that interpreter, then the one-shot's answer from the fake LLM. The oldest case is the
one a Raspberry Pi has: Debian 12's python3 (3.11.2), whose venv brings pip 23.0.1; before pip
24 a hashed install refused a dependency's extra unless the lock names it, so this is the case
that failed. The newcomer walk-through covers the interpreter on PATH; these cover the others.
A missing interpreter skips its case, unless PINCLAW_PYTHONS=require (as .ci/run sets)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from fakes.llm_server import FakeLLM, text
from readme_commands import first_sh_block, newcomer_env

REPO = Path(__file__).resolve().parent.parent
INSTALL_S = 900  # a fresh venv from requirements.lock with a cold pip cache
REPLY = "Your workspace holds AGENTS.md and SOUL.md."


@dataclass(frozen=True)
class Supported:
    minor: str
    oldest_pip: bool  # the case must run with a pip older than 24 (Debian's 23.0.1)


SUPPORTED = [Supported("3.11", oldest_pip=True), Supported("3.12", False), Supported("3.13", False)]


def interpreter(minor: str) -> Path | None:
    """A CPython `minor` on this machine: the system's first (Debian's, as on a Pi), else the
    newest of pyenv's."""
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates = [Path(f"/usr/bin/python{minor}")]
    candidates += sorted(pyenv.glob(f"{minor}.*/bin/python{minor}"), key=_patch, reverse=True)
    for candidate in candidates:
        if candidate.exists() and _version_of(candidate) == minor:
            return candidate
    return None


def _patch(path: Path) -> int:
    found = re.search(r"\d+\.\d+\.(\d+)", str(path))
    return int(found[1]) if found else -1


def _version_of(python: Path) -> str:
    done = subprocess.run(
        [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        capture_output=True,
        text=True,
    )
    return done.stdout.strip()


@pytest.mark.timeout(INSTALL_S + 120)
@pytest.mark.parametrize("supported", SUPPORTED, ids=lambda s: f"python{s.minor}")
def test_readmes_first_command_installs_and_answers(
    supported: Supported, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    python = interpreter(supported.minor)
    if python is None:
        message = f"no CPython {supported.minor} on this machine"
        if os.environ.get("PINCLAW_PYTHONS") == "require":
            pytest.fail(message + " (PINCLAW_PYTHONS=require)")
        pytest.skip(message)
    clone = tmp_path / "pinclaw"
    cloned = subprocess.run(
        ["git", "clone", "-q", REPO.as_uri(), str(clone)], capture_output=True, text=True
    )
    assert cloned.returncode == 0, cloned.stderr
    # `python3` in README's command is the interpreter under test.
    shims = tmp_path / "bin"
    shims.mkdir()
    (shims / "python3").symlink_to(python)
    env = newcomer_env(tmp_path / "home")
    env["PATH"] = f"{shims}{os.pathsep}{env['PATH']}"
    command = first_sh_block((clone / "README.md").read_text(), "Install and ask it")
    assert command.startswith("python3 -m venv .venv && ")
    fake_llm.script(text(REPLY))
    try:
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=clone,
            env={**env, "PINCLAW_LLM__API_BASE": fake_llm.base_url},
            capture_output=True,
            text=True,
            timeout=INSTALL_S,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert done.stdout.endswith(f"\n{REPLY}\n"), done.stdout[-2000:]
        venv = clone / ".venv" / "bin"
        assert _version_of(venv / "python") == supported.minor
        pip = subprocess.run([venv / "pip", "--version"], capture_output=True, text=True).stdout
        if supported.oldest_pip:
            assert re.match(r"pip 2[0-3]\.", pip), f"not the oldest pip: {pip}"
        print(f"{python}: {pip.split(' from ')[0]}")
        [request] = fake_llm.requests
        assert request["model"] == "gpt-4o-mini"
    finally:
        shutil.rmtree(clone, ignore_errors=True)  # its venv is over 400 MB
