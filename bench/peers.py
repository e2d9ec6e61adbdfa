"""The peers' one-shots for bench/startup.py, run in pairs with pinclaw's against the same
fake LLM: nanobot (`nanobot agent -m`) and Hermes Agent (`hermes -z`), each in a fresh home
whose model is the fake server's, through their OpenAI-compatible "custom" provider."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

from fakes.llm_server import FakeLLM
from timed_runs import Figures, OneShot, answered

# Hermes installs some optional packages on first use, from PyPI into its own venv (edge-tts
# for its speech tool, at every start): offline that fails after some 10 s on every run, and
# online it changes the install being measured. Off, what is timed is its start-up.
HERMES_CONFIG = """\
model:
  provider: custom
  default: bench
  base_url: {base_url}
  api_key: sk-bench-not-real
security:
  allow_lazy_installs: false
"""


@contextmanager
def nanobot_home(nanobot: str, base_url: str) -> Iterator[tuple[Path, dict[str, str]]]:
    """A fresh nanobot home (its `onboard`) whose model is the fake server's."""
    with tempfile.TemporaryDirectory() as name:
        env = {**os.environ, "HOME": name}
        subprocess.run(
            [nanobot, "onboard"], env=env, check=True, capture_output=True, stdin=subprocess.DEVNULL
        )
        config_file = Path(name) / ".nanobot" / "config.json"
        config = json.loads(config_file.read_text())
        config["agents"]["defaults"].update(model="bench", provider="custom")
        config["providers"]["custom"].update(apiKey="sk-bench-not-real", apiBase=base_url)
        config_file.write_text(json.dumps(config))
        yield Path(name), env


@contextmanager
def hermes_home(base_url: str) -> Iterator[tuple[Path, dict[str, str]]]:
    """A fresh Hermes Agent home (HERMES_HOME) whose model is the fake server's, with its
    lazy installs off."""
    with tempfile.TemporaryDirectory() as name:
        hermes_folder = Path(name) / ".hermes"
        hermes_folder.mkdir()
        (hermes_folder / "config.yaml").write_text(HERMES_CONFIG.format(base_url=base_url))
        yield Path(name), {**os.environ, "HOME": name, "HERMES_HOME": str(hermes_folder)}


def nanobot(command: str, base_url: str) -> OneShot:
    return OneShot(
        "nanobot",
        partial(nanobot_home, command, base_url),
        lambda message: [command, "agent", "-m", message, "--no-markdown"],
    )


def hermes(command: str, base_url: str) -> OneShot:
    return OneShot(
        "hermes", partial(hermes_home, base_url), lambda message: [command, "-z", message]
    )


def installed_version(command: str, distribution: str) -> str:
    """The version of `distribution` in the venv whose bin/ holds `command`."""
    python = Path(command).parent / "python"
    code = f"import importlib.metadata as m; print(m.version({distribution!r}))"
    return subprocess.run([python, "-c", code], capture_output=True, text=True).stdout.strip()


def paired(
    ours: OneShot, theirs: OneShot, llm: FakeLLM, runs: int, road: str = "cold, paired"
) -> None:
    """pinclaw's cold one-shot and a peer's, alternating (A B A B ...: both see the same
    load), each run in a fresh home and checked to have answered; then the ratio of the
    medians. One run of each first, untimed, compiles their .pyc files."""
    answered(ours, llm, Figures())
    answered(theirs, llm, Figures())
    mine, peer = Figures(), Figures()
    for _ in range(runs):
        answered(ours, llm, mine)
        answered(theirs, llm, peer)
    print(mine.row(f"agent run -m ({road})"))
    print(peer.row(f"{theirs.name} one-shot"))
    ratios = f"{mine.wall_ms / peer.wall_ms:6.2f} x, peak RSS {mine.rss_mib / peer.rss_mib:.2f} x"
    print(f"{'pinclaw / ' + theirs.name:27} {ratios}   (medians)")
