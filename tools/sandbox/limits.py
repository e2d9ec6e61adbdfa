"""Per-process resource limits of a sandboxed command, and the child's last steps before
exec that set them.

Limits go through prlimit(1) when there is one, since any preexec_fn makes Python fork()
the whole runtime (about 10 ms at 200 MiB) instead of vfork(); a preexec_fn sets them
where one is needed anyway (Landlock, the supervisor of tools/sandbox/reaper.py).

`memory_mb` is RLIMIT_AS: address space, not memory in use, the one memory bound every
kernel honours for every process (a cgroup's memory.max adds a bound for the whole tree
where the daemon's cgroup allows it). A JVM reserves about 4 GiB of address space at start
and needs `shell.memory_mb = 4096` or 0; Python, git, node and the coreutils run in 1 GiB.
"""

from __future__ import annotations

import functools
import os
import resource
from collections.abc import Callable
from dataclasses import dataclass

from tools.sandbox.system_programs import system_program

_MIB = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    """Per-process resource limits. `processes` (RLIMIT_NPROC) counts every process of the
    user, not only the command's, and is ignored by the kernel for root: not set then.
    `memory_mb` 0: no memory limit."""

    cpu_s: int = 60
    file_mb: int = 256
    processes: int = 256
    memory_mb: int = 1024


RlimitPlan = tuple[tuple[int, int, int], ...]
_PRLIMIT_OPTIONS = {
    resource.RLIMIT_CPU: "--cpu",
    resource.RLIMIT_FSIZE: "--fsize",
    resource.RLIMIT_CORE: "--core",
    resource.RLIMIT_NPROC: "--nproc",
    resource.RLIMIT_AS: "--as",
}


def rlimit_plan(limits: Limits) -> RlimitPlan:
    """(resource, soft, hard) triples, clamped to our own hard limits (raising one is
    refused to non-root). CPU: SIGXCPU at the soft limit, SIGKILL a second later.
    RLIMIT_AS comes last: once it is set, the child must not allocate any more."""
    wanted = [
        (resource.RLIMIT_CPU, limits.cpu_s, limits.cpu_s + 1),
        (resource.RLIMIT_FSIZE, limits.file_mb * _MIB, limits.file_mb * _MIB),
        (resource.RLIMIT_CORE, 0, 0),
    ]
    if os.geteuid() != 0:
        wanted.append((resource.RLIMIT_NPROC, limits.processes, limits.processes))
    if limits.memory_mb > 0:
        wanted.append((resource.RLIMIT_AS, limits.memory_mb * _MIB, limits.memory_mb * _MIB))
    plan = []
    for which, soft, hard in wanted:
        current = resource.getrlimit(which)[1]
        if current != resource.RLIM_INFINITY:
            hard = min(hard, current)
        plan.append((which, min(soft, hard), hard))
    return tuple(plan)


@functools.cache
def prlimit() -> str | None:
    return system_program("prlimit")  # util-linux


def prlimit_argv(argv: list[str], plan: RlimitPlan) -> list[str] | None:
    """argv under the limits through prlimit(1), or None when there is none."""
    program = prlimit()
    if program is None:
        return None
    options = [f"{_PRLIMIT_OPTIONS[which]}={soft}:{hard}" for which, soft, hard in plan]
    return [program, *options, "--", *argv]


def child_steps(
    plan: RlimitPlan,
    *,
    first: Callable[[], None] | None = None,
    join: Callable[[], None] | None = None,
    confine: Callable[[], None] | None = None,
) -> Callable[[], None]:
    """The child's last steps before exec, only syscalls on what is prepared already:
    `first` (tie it to the daemon), join the command's cgroup, confine (Landlock), then the
    limits, RLIMIT_AS last."""

    def run() -> None:
        if first is not None:
            first()
        if join is not None:
            join()
        if confine is not None:
            confine()
        for which, soft, hard in plan:
            resource.setrlimit(which, (soft, hard))

    return run
