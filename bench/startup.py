"""Start-up cost, against the fake LLM with zero latency:

- `python -c pass` (the interpreter and its site-packages alone, for scale) and
  `agent --help` wall time;
- a cold `agent run -m --no-daemon`: wall time and peak RSS, with the fake's model served
  directly (OpenAI's protocol over httpx: the fake is a server of one's own), as OpenAI's
  own chat model (directly too, and LiteLLM's table read for its window and price; the fake
  stands at OPENAI_BASE_URL) and through LiteLLM (what every other hosted model's one-shot pays);
- a warm start (agent/warm; off in the rows above): one cold one-shot leaves it, then the
  one-shot in fresh homes runs in its forks — wall time and the client's peak RSS (the fork's
  is the warm start's, printed after), for a server of one's own and through LiteLLM, each
  with a warm start of its own;
- the local daemon (`agent run`, no chat channel): how long until its socket is served, the
  first one-shot sent at once and, in a second daemon, the first one sent once the model
  client's warm-up is done, then `agent run -m` through it — wall time and the client's peak
  RSS — and the daemon's own resident set after them.

Run it with an installed (not editable) pinclaw for the figures a user gets: an editable
install adds an import hook to every start.

Medians over N runs (default 7 cold, 20 through the daemon), each beside the machine's
one-minute load over its runs. Every cold one-shot runs in a fresh home (`agent init`,
untimed) and counts only if it answered: exit 0, the fake received a request carrying that
run's own message, and the fake's reply to it is in the run's stdout (bench/timed_runs.py);
anything else ends the bench. With `--nanobot PATH` (the `nanobot` command of a nanobot-ai
install) or `--hermes PATH` (the `hermes` command of a hermes-agent install), the cold
one-shot is also run in pairs with the peer's (`nanobot agent -m`, `hermes -z`; their fresh
homes and checks in bench/peers.py) against the same fake server, alternating, and the
ratio of the medians printed (wall time and peak RSS): the peer's one-shot does the same job
(one message, one reply, exit). Against nanobot, the one-shot through LiteLLM and both warm
starts' are paired too.

    .venv/bin/python bench/startup.py [--runs 7] [--daemon-runs 20] [--nanobot PATH] [--hermes PATH]
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))

from fakes.llm_server import FakeLLM  # noqa: E402
from peers import hermes, installed_version, nanobot, paired  # noqa: E402
from timed_runs import Figures, OneShot, answered, batch, load, timed  # noqa: E402


@contextmanager
def pinclaw_home(agent: str, env: dict[str, str]) -> Iterator[tuple[Path, dict[str, str]]]:
    """A fresh pinclaw home (`agent init`) and the environment that uses it."""
    with tempfile.TemporaryDirectory() as name:
        fresh = {**env, "PINCLAW_HOME": name}
        subprocess.run([agent, "init"], env=fresh, check=True, capture_output=True)
        yield Path(name), fresh


def cold(agent: str, env: dict[str, str]) -> OneShot:
    """`agent run -m --no-daemon`, each run in a fresh home."""
    return OneShot(
        "pinclaw",
        partial(pinclaw_home, agent, env),
        lambda message: [agent, "run", "-m", message, "--no-daemon"],
    )


@contextmanager
def warm_start(agent: str, env: dict[str, str], runs: int) -> Iterator[OneShot]:
    """A warm start (agent/warm) in a folder of its own, left by one cold one-shot (untimed),
    and waited for until it serves; the one-shot that then runs in its forks, each run in a
    fresh home as `cold`'s. Ended afterwards, its resident set printed."""
    with tempfile.TemporaryDirectory() as runtime:
        env = {**env, "PINCLAW_AGENT__WARM_START_S": "600", "XDG_RUNTIME_DIR": runtime}
        one_shot = cold(agent, env)
        with one_shot.home() as (_, fresh):
            subprocess.run(one_shot.command("hello"), env=fresh, check=True, capture_output=True)
        folder = Path(runtime) / "pinclaw"
        deadline = time.monotonic() + 120
        while not any(served(path) for path in folder.glob("*.sock")):
            if time.monotonic() > deadline:
                raise SystemExit(f"no warm start served in {folder}")
            time.sleep(0.05)
        [lock] = folder.glob("*.lock")
        pid = int(lock.read_text().split()[0])
        try:
            yield one_shot
            print(f"warm start: resident       {resident_mib(pid):7.0f} MiB  (after its one-shots)")
        finally:
            os.kill(pid, signal.SIGTERM)


def served(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True


def start_daemon(
    agent: str, env: dict[str, str], home: Path
) -> tuple[subprocess.Popen[bytes], Path, float]:
    """`agent -v run` with no chat channel; returns once its socket is served (and how long
    that took)."""
    log = home / "daemon.log"
    with log.open("wb") as out:
        started = time.perf_counter()
        daemon = subprocess.Popen([agent, "-v", "run"], env=env, cwd=REPO, stdout=out, stderr=out)
    while not served(home / "agent.sock"):
        if daemon.poll() is not None:
            raise SystemExit(f"agent run ended:\n{log.read_text()}")
        time.sleep(0.005)
    return daemon, log, time.perf_counter() - started


def stop(daemon: subprocess.Popen[bytes]) -> None:
    daemon.terminate()
    daemon.wait(30)


def through_daemon(agent: str, env: dict[str, str], home: Path, runs: int) -> None:
    """Start `agent run`, wait for its socket, time one-shots through it: the first at
    once, the next `runs`; then in a fresh daemon, the first once its warm-up is done."""
    one_shot = [agent, "run", "-m", "hello"]
    first, through = Figures(), Figures()
    daemon, log, ready = start_daemon(agent, env, home)
    try:
        first.add(timed(one_shot, env), load())
        through.add(timed(one_shot, env, runs), load())
        daemon_rss = resident_mib(daemon.pid)
        served_here = log.read_text().count("one-shot from the local socket")
        if served_here != runs + 1:  # a one-shot that fell back in-process measures nothing here
            raise SystemExit(f"the daemon answered {served_here} of {runs + 1} one-shots")
    finally:
        stop(daemon)
    warm_first = Figures()
    daemon, log, _ = start_daemon(agent, env, home)
    try:
        while "warmed up for" not in log.read_text():
            time.sleep(0.01)
        warm_first.add(timed(one_shot, env), load())
    finally:
        stop(daemon)
    print(f"daemon: socket served      {ready * 1000:7.0f} ms after start   (load {load():.1f})")
    print(first.row("daemon: first one-shot", ", sent once the socket is served", rss=False))
    print(warm_first.row("daemon: first, warmed", ", sent after the warm-up", rss=False))
    print(through.row("agent run -m (daemon)"))
    print(f"daemon: resident           {daemon_rss:7.0f} MiB  (after those one-shots)")


def resident_mib(pid: int) -> float:
    """A running process's resident set (VmRSS), MiB."""
    status = Path(f"/proc/{pid}/status").read_text()
    [line] = [line for line in status.splitlines() if line.startswith("VmRSS:")]
    return int(line.split()[1]) / 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--daemon-runs", type=int, default=20)
    parser.add_argument("--nanobot", help="nanobot's command, to run the cold one-shot against")
    parser.add_argument("--hermes", help="Hermes Agent's `hermes` command, the same")
    options = parser.parse_args()
    runs = options.runs
    agent = str(Path(sys.executable).parent / "agent")
    with tempfile.TemporaryDirectory() as folder, FakeLLM() as llm:
        home = Path(folder)
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("PINCLAW_")},
            "PINCLAW_HOME": str(home),
            "PINCLAW_LLM__MODEL": "openai/bench",
            "PINCLAW_LLM__API_BASE": llm.base_url,
            "OPENAI_API_KEY": "sk-bench-not-real",
            "PINCLAW_AGENT__WARM_START_S": "0",  # cold is cold: no warm start (see warm_start)
        }
        subprocess.run([agent, "init"], env=env, check=True, capture_output=True)
        ours = cold(agent, env)
        # A hosted OpenAI chat model (no api_base; the SDK reads OPENAI_BASE_URL) and, through
        # LiteLLM (llm.client = "litellm"), what any other hosted model's one-shot pays.
        at_openai = {k: v for k, v in env.items() if k != "PINCLAW_LLM__API_BASE"}
        at_openai.update(PINCLAW_LLM__MODEL="openai/gpt-4o-mini", OPENAI_BASE_URL=llm.base_url)
        as_openai = cold(agent, at_openai)
        lite_env = {**env, "PINCLAW_LLM__CLIENT": "litellm"}
        via_litellm = cold(agent, lite_env)
        for one_shot in (ours, as_openai, via_litellm):
            answered(one_shot, llm, Figures())  # compiles the .pyc files
        helps = max(runs, 20)
        bare = batch([sys.executable, "-c", "pass"], env, helps)
        help_figures = batch([agent, "--help"], env, helps)
        direct, openai, lite = Figures(), Figures(), Figures()
        for _ in range(runs):
            answered(ours, llm, direct)
            answered(as_openai, llm, openai)
            answered(via_litellm, llm, lite)
        print("medians (runs; the one-minute load average over them); each one-shot's home fresh")
        print(bare.row("python -c pass", "; this interpreter, bare", rss=False))
        print(help_figures.row("agent --help", rss=False))
        print(direct.row("agent run -m (cold)"))
        print(openai.row("  as OpenAI's own model"))
        print(lite.row("  the same, via LiteLLM"))
        if options.nanobot:
            print(f"nanobot-ai {installed_version(options.nanobot, 'nanobot-ai')}")
            paired(ours, nanobot(options.nanobot, llm.base_url), llm, runs)
            paired(via_litellm, nanobot(options.nanobot, llm.base_url), llm, runs, "via LiteLLM")
        for road, road_env in (("warm start", env), ("warm start, via LiteLLM", lite_env)):
            with warm_start(agent, road_env, runs) as warm:
                if options.nanobot:
                    paired(warm, nanobot(options.nanobot, llm.base_url), llm, runs, road)
                else:
                    figures = Figures()
                    for _ in range(runs):
                        answered(warm, llm, figures)
                    print(figures.row(f"agent run -m ({road})"))
        if options.hermes:
            print(f"hermes-agent {installed_version(options.hermes, 'hermes-agent')}")
            paired(ours, hermes(options.hermes, llm.base_url), llm, runs)
        through_daemon(agent, env, home, options.daemon_runs)


if __name__ == "__main__":
    main()
