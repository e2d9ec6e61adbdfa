"""Added cost per shell call of each OS sandbox, of the keeper that ends what a command
leaves running (a cgroup per command, or a supervising subreaper: tools/sandbox/reaper.py) and of
the memory limit: p50 and p99 wall time over N calls of `true` and of `ls`, spawned the way
the shell tool spawns them (launch, run, cleanup).

"plain" is a bare spawn without any sandbox: no preexec_fn, so Python may use vfork.
"keeper off, no memory" rows are each sandbox as it was before keepers and memory limits;
the rows below them add the keeper (what "auto" picks here, then the subreaper forced)
and `memory_mb` 1024. Landlock and the subreaper need a preexec_fn, which makes Python
fork() the whole parent: --ballast-mb grows this process to a runtime's size to show it.

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

from tools.sandbox import reaper  # noqa: E402
from tools.sandbox.sandboxes import (  # noqa: E402
    Limits,
    Sandbox,
    SandboxSpec,
    SandboxUnavailable,
    choose_sandbox,
)
from tools.shell.shell_tool import start  # noqa: E402

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
        process, _ = await start(launch)
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


# (sandbox setting, keeper mode, memory_mb): the first row of each sandbox is its baseline.
ROWS = [
    ("off", "off", 0),
    ("off", "auto", 1024),
    ("off", "subreaper", 1024),
    ("bubblewrap", "off", 0),
    ("bubblewrap", "auto", 1024),
    ("landlock", "off", 0),
    ("landlock", "auto", 1024),
    ("landlock", "subreaper", 1024),
]


def label(kind: str, mode: str, memory_mb: int) -> str:
    if mode == "off":
        return f"{kind} (keeper off, no memory)"
    keeper = "cgroup" if mode == "auto" and reaper.cgroup_base() is not None else "subreaper"
    if kind == "bubblewrap":
        keeper = "cgroup" if reaper.cgroup_base() is not None else "pid namespace"
    return f"{kind} + {keeper}, {memory_mb} MiB"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--ballast-mb", type=int, default=0, help="grow this process first")
    args = parser.parse_args()
    ballast = b"\x01" * (args.ballast_mb * 1024 * 1024)  # touched pages, as a runtime's
    sandboxes: dict[str, Sandbox] = {}
    for setting in ("off", "bubblewrap", "landlock"):
        try:
            sandboxes[setting] = choose_sandbox(setting)
        except SandboxUnavailable as exc:
            print(f"{setting}: skipped ({exc})")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    base = reaper.cgroup_base()
    print(f"calls: {args.calls} per row; this process: {rss} MiB peak RSS; cgroup: {base}")
    print(f"{'sandbox':<40}{'command':<8}{'p50 ms':>8}{'p99 ms':>8}{'vs plain':>10}{'vs base':>9}")
    with tempfile.TemporaryDirectory() as folder:
        workspace = Path(folder)
        for index in range(20):
            (workspace / f"file{index}.txt").write_text("x\n")
        for name, argv in COMMANDS.items():
            plain = await measure(None, argv, SandboxSpec(workspace), args.calls)
            plain_p50 = percentile(plain, 50)
            print(f"{'plain':<40}{name:<8}{plain_p50:8.1f}{percentile(plain, 99):8.1f}")
            baseline = 0.0
            for setting, mode, memory_mb in ROWS:
                if setting not in sandboxes:
                    continue
                reaper.use(mode)  # type: ignore[arg-type]
                spec = SandboxSpec(workspace, limits=Limits(memory_mb=memory_mb))
                times = await measure(sandboxes[setting], argv, spec, args.calls)
                p50, p99 = percentile(times, 50), percentile(times, 99)
                baseline = p50 if mode == "off" else baseline
                added = "" if mode == "off" else f"{p50 - baseline:+.1f}"
                row = label(sandboxes[setting].kind, mode, memory_mb)
                print(f"{row:<40}{name:<8}{p50:8.1f}{p99:8.1f}{p50 - plain_p50:+10.1f}{added:>9}")
            reaper.use("auto")
    del ballast


if __name__ == "__main__":
    asyncio.run(main())
