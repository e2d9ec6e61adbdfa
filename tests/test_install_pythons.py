"""README's first command on the newest Python pinclaw supports, with the pip that Python's
venv brings: a `git clone` of HEAD, the command read out of README and run by bash with
`python3` being that interpreter, then the one-shot's answer from the fake LLM. The oldest
case (Debian 12's python3 with pip 23.0.1, as on a Raspberry Pi) is the newcomer
walk-through's own install, and 3.12's wheels are checked by .ci/run;
tests/supported_pythons.py finds the interpreters."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from fakes.llm_server import FakeLLM, text
from readme_commands import first_sh_block, newcomer_env
from supported_pythons import NEWEST, Supported, as_python3, check_pip, interpreter

REPO = Path(__file__).resolve().parent.parent
INSTALL_S = 900  # a fresh venv from requirements.lock with a cold pip cache
REPLY = "Your workspace holds AGENTS.md and SOUL.md."


@pytest.mark.timeout(INSTALL_S + 120)
@pytest.mark.parametrize("supported", [NEWEST], ids=lambda s: f"python{s.minor}")
def test_readmes_first_command_installs_and_answers(
    supported: Supported, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    python = interpreter(supported)
    clone = tmp_path / "pinclaw"
    cloned = subprocess.run(
        ["git", "clone", "-q", REPO.as_uri(), str(clone)], capture_output=True, text=True
    )
    assert cloned.returncode == 0, cloned.stderr
    env = newcomer_env(tmp_path / "home")
    env["PATH"] = f"{as_python3(python, tmp_path / 'bin')}{os.pathsep}{env['PATH']}"
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
        print(f"{python}: {check_pip(clone / '.venv' / 'bin', supported)}")
        [request] = fake_llm.requests
        assert request["model"] == "gpt-4o-mini"
    finally:
        shutil.rmtree(clone, ignore_errors=True)  # its venv is over 400 MB
