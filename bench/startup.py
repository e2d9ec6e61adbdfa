"""Start-up cost: `agent --help` wall time, and `agent run -m` wall time and peak RSS
against the fake LLM with zero latency. Median over N runs (default 7).

    .venv/bin/python bench/startup.py [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from fakes.llm_server import FakeLLM  # noqa: E402


def timed(command: list[str], env: dict[str, str]) -> tuple[float, int]:
    """Wall seconds and peak RSS (MiB) of one run of `command`."""
    started = time.perf_counter()
    process = subprocess.Popen(
        command, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(command)} failed")
    return elapsed, usage.ru_maxrss // 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    runs = parser.parse_args().runs
    agent = str(Path(sys.executable).parent / "agent")
    with tempfile.TemporaryDirectory() as home, FakeLLM() as llm:
        env = {
            **os.environ,
            "PINCLAW_HOME": home,
            "PINCLAW_LLM__MODEL": "openai/bench",
            "PINCLAW_LLM__API_BASE": llm.base_url,
            "OPENAI_API_KEY": "sk-bench-not-real",
        }
        subprocess.run([agent, "init"], env=env, check=True, capture_output=True)
        timed([agent, "run", "-m", "warm-up"], env)  # first run compiles .pyc files
        helps = [timed([agent, "--help"], env)[0] for _ in range(runs)]
        oneshots = [timed([agent, "run", "-m", "hello"], env) for _ in range(runs)]
    print(f"runs: {runs} (median)")
    print(f"agent --help          {statistics.median(helps) * 1000:7.0f} ms")
    print(
        f"agent run -m (fake)   {statistics.median(t for t, _ in oneshots) * 1000:7.0f} ms"
        f"   peak RSS {statistics.median(r for _, r in oneshots):.0f} MiB"
    )


if __name__ == "__main__":
    main()
