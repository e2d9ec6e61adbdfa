"""Added cost per shell call of each OS sandbox: p50 and p99 wall time over N calls of
`true` and of `ls`, spawned the way the shell tool spawns them (launch, run, cleanup).

"plain" is today's shell tool: no preexec_fn, so Python may use vfork. Every sandbox
kind, "none" included, passes a preexec_fn (rlimits), which makes Python fork() the
whole parent: --ballast-mb grows this process to a runtime's size to show that cost.

    .venv/bin/python bench/sandbox.py [--calls 200] [--ballast-mb 0]
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tools.sandbox import (  # noqa: E402
    Sandbox,
    SandboxSpec,
    SandboxUnavailable,
    choose_sandbox,
)
from tools.shell import spawn  # noqa: E402

COMMANDS = {"true": ["true"], "ls": ["ls", "-la"]}


async def plain_call(argv: list[str], spec: SandboxSpec) -> float:
    started = time.perf_counter()
    process = await asyncio.create_subprocess_exec(
        *argv,
        env={"LANG": "C.UTF-8", "PATH": "/usr/bin:/bin", "HOME": str(spec.workspace)},
        cwd=spec.workspace,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )
    await process.communicate()
    return time.perf_counter() - started


async def sandboxed_call(sandbox: Sandbox, argv: list[str], spec: SandboxSpec) -> float:
    started = time.perf_counter()
    launch = sandbox.launch(argv, spec, {"LANG": "C.UTF-8"})
    try:
        process = await spawn(launch)
        await process.communicate()
    finally:
        if launch.cleanup is not None:
            launch.cleanup()
    if process.returncode != 0:
        raise SystemExit(f"{sandbox.kind}: {' '.join(argv)} exited {process.returncode}")
    return time.perf_counter() - started


async def measure(
    sandbox: Sandbox | None, argv: list[str], spec: SandboxSpec, calls: int
) -> list[float]:
    for _ in range(10):  # warm-up: page cache, first-use costs
        await (plain_call(argv, spec) if sandbox is None else sandboxed_call(sandbox, argv, spec))
    times = []
    for _ in range(calls):
        call = plain_call(argv, spec) if sandbox is None else sandboxed_call(sandbox, argv, spec)
        times.append(await call)
    return times


def percentile(times: list[float], q: int) -> float:
    return statistics.quantiles(times, n=100, method="inclusive")[q - 1] * 1000


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--ballast-mb", type=int, default=0, help="grow this process first")
    args = parser.parse_args()
    ballast = b"\x01" * (args.ballast_mb * 1024 * 1024)  # touched pages, as a runtime's
    kinds: list[tuple[str, Sandbox | None]] = [("plain", None)]
    for setting in ("off", "bubblewrap", "landlock"):
        try:
            chosen = choose_sandbox(setting)
        except SandboxUnavailable as exc:
            print(f"{setting}: skipped ({exc})")
            continue
        kinds.append((chosen.kind, chosen))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    print(f"calls: {args.calls} per row; this process: {rss} MiB peak RSS")
    print(f"{'sandbox':<12}{'command':<9}{'p50 ms':>8}{'p99 ms':>8}{'p50 vs none':>13}")
    with tempfile.TemporaryDirectory() as folder:
        workspace = Path(folder)
        for index in range(20):
            (workspace / f"file{index}.txt").write_text("x\n")
        spec = SandboxSpec(workspace)
        for name, argv in COMMANDS.items():
            base = None
            for kind, sandbox in kinds:
                times = await measure(sandbox, argv, spec, args.calls)
                p50, p99 = percentile(times, 50), percentile(times, 99)
                if kind == "none":
                    base = p50
                added = "" if base is None or kind == "none" else f"{p50 - base:+.1f}"
                print(f"{kind:<12}{name:<9}{p50:8.1f}{p99:8.1f}{added:>13}")
    del ballast


if __name__ == "__main__":
    asyncio.run(main())
