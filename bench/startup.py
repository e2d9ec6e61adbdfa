"""Start-up cost, against the fake LLM with zero latency:

- `python -c pass` (the interpreter and its site-packages alone, for scale) and
  `agent --help` wall time;
- a cold `agent run -m --no-daemon`: wall time and peak RSS, with the fake's model served
  directly (the OpenAI SDK: the fake is a server of one's own) and through LiteLLM (what a
  hosted model's cold one-shot pays);
- the local daemon (`agent run`, no chat channel): how long until its socket is served, the
  first one-shot sent at once and, in a second daemon, the first one sent once the model
  client's warm-up is done, then `agent run -m` through it — wall time and the client's peak
  RSS — and the daemon's own resident set after them.

Run it with an installed (not editable) pinclaw for the figures a user gets: an editable
install adds an import hook to every start.

Medians over N runs (default 7 cold, 20 through the daemon). With `--nanobot PATH` (the
`nanobot` command of a nanobot-ai install) or `--hermes PATH` (the `hermes` command of a
hermes-agent install), the cold one-shot is also run in pairs with the peer's
(`nanobot agent -m`, `hermes -z`) against the same fake server, alternating, and the ratio
of the medians printed: the peer's one-shot does the same job (one message, one reply, exit).

    .venv/bin/python bench/startup.py [--runs 7] [--daemon-runs 20] [--nanobot PATH] [--hermes PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from fakes.llm_server import FakeLLM  # noqa: E402

# Runs a command N times and reports each run's wall time and peak RSS. It runs in a small
# process of its own: on Linux a child's peak RSS starts at its parent's size (fork and exec
# carry the high-water mark over), and this script, with the fake LLM loaded, is bigger
# than the client being measured.
MEASURE = """
import json, os, subprocess, sys, time
runs, command = int(sys.argv[1]), sys.argv[2:]
found = []
for _ in range(runs):
    started = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(" ".join(command) + " failed")
    found.append((time.perf_counter() - started, usage.ru_maxrss / 1024))
print(json.dumps(found))
"""


def timed(command: list[str], env: dict[str, str], runs: int = 1) -> list[tuple[float, float]]:
    """Wall seconds and peak RSS (MiB) of each of `runs` runs of `command`."""
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, str(runs), *command],
        env=env, cwd=REPO, capture_output=True, text=True,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    return [(wall, rss) for wall, rss in json.loads(done.stdout)]


def medians(found: list[tuple[float, float]]) -> tuple[float, float]:
    """Median wall (ms) and median peak RSS (MiB)."""
    return statistics.median(t for t, _ in found) * 1000, statistics.median(r for _, r in found)


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
    daemon, log, ready = start_daemon(agent, env, home)
    try:
        [(first, _)] = timed([agent, "run", "-m", "hello"], env)
        wall, rss = medians(timed([agent, "run", "-m", "hello"], env, runs))
        daemon_rss = resident_mib(daemon.pid)
        answered = log.read_text().count("one-shot from the local socket")
        if answered != runs + 1:  # a one-shot that fell back in-process measures nothing here
            raise SystemExit(f"the daemon answered {answered} of {runs + 1} one-shots")
    finally:
        stop(daemon)
    daemon, log, _ = start_daemon(agent, env, home)
    try:
        while "warmed up for" not in log.read_text():
            time.sleep(0.01)
        [(warm_first, _)] = timed([agent, "run", "-m", "hello"], env)
    finally:
        stop(daemon)
    print(f"daemon: socket served      {ready * 1000:7.0f} ms after start")
    print(f"daemon: first one-shot     {first * 1000:7.0f} ms   (sent once the socket is served)")
    print(f"daemon: first, warmed      {warm_first * 1000:7.0f} ms   (sent after the warm-up)")
    print(f"agent run -m (daemon)      {wall:7.0f} ms   client peak RSS {rss:.0f} MiB   ({runs})")
    print(f"daemon: resident           {daemon_rss:7.0f} MiB  (after those one-shots)")


def resident_mib(pid: int) -> float:
    """A running process's resident set (VmRSS), MiB."""
    status = Path(f"/proc/{pid}/status").read_text()
    [line] = [line for line in status.splitlines() if line.startswith("VmRSS:")]
    return int(line.split()[1]) / 1024


def nanobot_home(nanobot: str, base_url: str, folder: Path) -> dict[str, str]:
    """A nanobot home (its `onboard`) whose model is the fake server's, through its
    OpenAI-compatible "custom" provider; the environment that uses it."""
    env = {**os.environ, "HOME": str(folder)}
    subprocess.run(
        [nanobot, "onboard"], env=env, check=True, capture_output=True, stdin=subprocess.DEVNULL
    )
    config_file = folder / ".nanobot" / "config.json"
    config = json.loads(config_file.read_text())
    config["agents"]["defaults"].update(model="bench", provider="custom")
    config["providers"]["custom"].update(apiKey="sk-bench-not-real", apiBase=base_url)
    config_file.write_text(json.dumps(config))
    return env


def hermes_home(base_url: str, folder: Path) -> dict[str, str]:
    """A Hermes Agent home whose model is the fake server's, through its "custom"
    (OpenAI-compatible) provider; the environment that uses it."""
    (folder / ".hermes").mkdir()
    (folder / ".hermes" / "config.yaml").write_text(
        "model:\n  provider: custom\n  default: bench\n"
        f"  base_url: {base_url}\n  api_key: sk-bench-not-real\n"
    )
    return {**os.environ, "HOME": str(folder), "HERMES_HOME": str(folder / ".hermes")}


def against_peer(
    agent: str, env: dict[str, str], name: str, peer: list[str], peer_env: dict[str, str], runs: int
) -> None:
    """The cold one-shot and a peer's, in alternating pairs (so both see the same load)."""
    timed(peer, peer_env)  # compiles its .pyc files
    ours: list[tuple[float, float]] = []
    theirs: list[tuple[float, float]] = []
    for _ in range(runs):
        ours += timed([agent, "run", "-m", "hello", "--no-daemon"], env)
        theirs += timed(peer, peer_env)
    our_ms, our_rss = medians(ours)
    their_ms, their_rss = medians(theirs)
    print(f"agent run -m (cold, paired) {our_ms:6.0f} ms   peak RSS {our_rss:.0f} MiB   ({runs})")
    print(f"{name + ' one-shot':27} {their_ms:6.0f} ms   peak RSS {their_rss:.0f} MiB   ({runs})")
    print(f"{'pinclaw / ' + name:27} {our_ms / their_ms:6.2f} x")


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
        }
        subprocess.run([agent, "init"], env=env, check=True, capture_output=True)
        timed([agent, "run", "-m", "warm-up", "--no-daemon"], env)  # compiles .pyc files
        helps = max(runs, 20)
        bare_ms, _ = medians(timed([sys.executable, "-c", "pass"], env, helps))
        help_ms, _ = medians(timed([agent, "--help"], env, helps))
        cold_ms, cold_rss = medians(timed([agent, "run", "-m", "hello", "--no-daemon"], env, runs))
        # The same model through LiteLLM (llm.client = "litellm"): what a hosted model's
        # cold one-shot pays, the fake being a server of one's own, called directly otherwise.
        via_litellm = {**env, "PINCLAW_LLM__CLIENT": "litellm"}
        timed([agent, "run", "-m", "warm-up", "--no-daemon"], via_litellm)
        lite_ms, lite_rss = medians(
            timed([agent, "run", "-m", "hello", "--no-daemon"], via_litellm, runs)
        )
        print("medians (runs)")
        print(f"python -c pass             {bare_ms:7.0f} ms   ({helps}; this interpreter, bare)")
        print(f"agent --help               {help_ms:7.0f} ms   ({helps})")
        print(
            f"agent run -m (cold)        {cold_ms:7.0f} ms   peak RSS {cold_rss:.0f} MiB   ({runs})"
        )
        print(
            f"  the same, via LiteLLM    {lite_ms:7.0f} ms   peak RSS {lite_rss:.0f} MiB   ({runs})"
        )
        if options.nanobot:
            with tempfile.TemporaryDirectory() as peer_folder:
                peer_env = nanobot_home(options.nanobot, llm.base_url, Path(peer_folder))
                peer = [options.nanobot, "agent", "-m", "hello", "--no-markdown"]
                against_peer(agent, env, "nanobot", peer, peer_env, runs)
        if options.hermes:
            with tempfile.TemporaryDirectory() as peer_folder:
                peer_env = hermes_home(llm.base_url, Path(peer_folder))
                against_peer(agent, env, "hermes", [options.hermes, "-z", "hello"], peer_env, runs)
        through_daemon(agent, env, home, options.daemon_runs)


if __name__ == "__main__":
    main()
