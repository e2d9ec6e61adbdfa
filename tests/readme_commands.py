"""README's commands as a newcomer runs them: the text of a ```sh block, and the environment of
a newcomer's shell (the tests that run README's first command share both)."""

from __future__ import annotations

import os
import re
from pathlib import Path


def newcomer_env(home: Path) -> dict[str, str]:
    """This environment as a newcomer's shell has it: no pinclaw setting, no provider key, no
    LiteLLM switch, no virtualenv active or on PATH, no PYTHONPATH; the home in tmp."""
    keys = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "OPENROUTER_API_KEY")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PINCLAW_", "LITELLM_"))
        and k not in (*keys, "PYTHONPATH", "VIRTUAL_ENV")
    }
    path = env.get("PATH", "").split(os.pathsep)
    env["PATH"] = os.pathsep.join(p for p in path if not (Path(p).parent / "pyvenv.cfg").exists())
    env["PINCLAW_HOME"] = str(home)
    return env


def first_sh_block(readme: str, heading: str) -> str:
    """The first ```sh block after `heading` in README's text."""
    after = readme[readme.index(heading) :]
    found = re.search(r"^```sh\n(.*?)^```$", after, re.MULTILINE | re.DOTALL)
    assert found is not None, f"no ```sh block after {heading!r}"
    return found[1].strip()
