"""OS sandboxes for shell commands: the boundary a steered model cannot talk its way past.

A command sees the system read-only, the files of /etc programs need (and no other: see
tools/sandbox/etc_files.py), the workspace (read-write unless read-only), a private temporary
folder, and nothing else of the host: not the pinclaw home beside the workspace
(config.toml, state.db), not the owner's home, /root, /var or /boot, not the runtime's
environment (tools/sandbox/view.py). Masked paths inside are hidden, and one that does not
exist yet cannot be created (its folder becomes list-only). Nothing the command starts
outlives it (tools/sandbox/reaper.py), and each process has limits on CPU, file size and memory
(tools/sandbox/limits.py).

- bubblewrap: a mount namespace that lacks everything not bound into it, its own pid
  namespace and /proc (the runtime's processes do not exist inside; everything dies with
  the command), `--unshare-net` when the network is off, no capabilities even as root
  (tools/sandbox/bwrap.py).
- landlock: the kernel refuses access outside the granted trees. /proc is the host's:
  Landlock's ptrace scoping denies /proc/<pid>/environ of the runtime, but only to a
  process without CAP_SYS_ADMIN/CAP_PERFMON (those may read any process's environ),
  so root's capabilities are dropped; other processes' cmdline stays readable.
  Signals to the runtime and abstract Unix sockets are scoped from ABI 6. Network off
  blocks TCP bind/connect (ABI >= 4; older ABIs refuse network=False), not UDP, raw
  sockets or pathname Unix sockets (e.g. /run/docker.sock, reachable by its path).
  A cgroup or a supervisor keeps the command's processes together.
- none: limits, a small environment, and the same keeper as Landlock only.

Masked paths: bubblewrap mounts an empty read-only tmpfs over a folder, /dev/null over a
file. Landlock cannot take a subtree out of a granted tree, so a tree holding a masked
path is granted child by child, skipping masked ones; the folders on the way to a masked
path (the workspace itself, if it holds one) become list-only: their entries keep their
rights, but nothing can be created, deleted or renamed directly in them, and masked
entries' names (not contents) stay listable.

Integration: start `Launch.argv` with `Launch.preexec_fn` and `Launch.pass_fds` (see
tools/shell/shell_tool.py's start, which closes those descriptors once the child holds them); when
the first process has exited call `Launch.ended()`, to stop it early `Launch.kill(pid)`,
and call `Launch.cleanup` once it has been waited for, or if spawning failed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import subprocess
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from tools.sandbox import parent_death, reaper
from tools.sandbox.bwrap import bwrap_args
from tools.sandbox.limits import Limits as Limits  # re-exported: SandboxSpec's limits
from tools.sandbox.limits import RlimitPlan, child_steps, prlimit_argv, rlimit_plan
from tools.sandbox.private_tmp import make_private_tmp, sweep_dead_runtimes_tmp
from tools.sandbox.reaper import Keeper
from tools.sandbox.subreaper import Subreaper
from tools.sandbox.system_programs import system_program
from tools.sandbox.view import view

if TYPE_CHECKING:  # imported lazily at run time: tools.sandbox.landlock needs Linux's libc
    from tools.sandbox.landlock import Ruleset

SandboxSetting = Literal["auto", "bubblewrap", "landlock", "off"]
SandboxKind = Literal["bubblewrap", "landlock", "none"]

DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
_PROBE_TIMEOUT_S = 10


class SandboxUnavailable(RuntimeError):
    """The configured sandbox cannot run here; the message says why."""


@dataclass(frozen=True)
class SandboxSpec:
    workspace: Path  # the only place a command may write (when writable)
    writable: bool = True  # False: the workspace is read-only too
    network: bool = True  # False: no network (bubblewrap), no TCP (Landlock ABI >= 4)
    # Hidden when inside the workspace or a system dir; one in the workspace that does not
    # exist (yet) cannot be created: its folder becomes list-only (tools/sandbox/view.py).
    masked: tuple[Path, ...] = ()
    # Seen but not writable inside a writable workspace (the files that shape every prompt,
    # in someone else's turn under full): bound read-only, or granted only reading.
    frozen: tuple[Path, ...] = ()
    limits: Limits = field(default_factory=Limits)
    # A long-running server's: trees exposed besides (its program read-only, its own folder
    # read-write; those that do not exist are left out), and its HOME (default: workspace).
    reads: tuple[Path, ...] = ()
    writes: tuple[Path, ...] = ()
    home: Path | None = None


class Descriptors:
    """File descriptors the child needs (bubblewrap's --bind-fd), closed exactly once."""

    def __init__(self, fds: Sequence[int] = ()) -> None:
        self.fds = list(fds)

    def close(self) -> None:
        while self.fds:
            os.close(self.fds.pop())


@dataclass(frozen=True)
class Launch:
    """Everything needed to start the sandboxed command, and to end it."""

    argv: list[str]
    env: dict[str, str]
    cwd: Path
    preexec_fn: Callable[[], None] | None
    cleanup: Callable[[], None] | None = None
    descriptors: Descriptors = field(default_factory=Descriptors)
    keeper: Keeper | None = None  # what holds the command's processes together

    @property
    def pass_fds(self) -> tuple[int, ...]:
        return tuple(self.descriptors.fds)

    def ended(self) -> None:
        """The first process has exited: end whatever it left running."""
        if self.keeper is not None:
            self.keeper.end()

    def kill(self, pid: int) -> None:
        """End the command and everything it started, now (a timeout, a cancellation)."""
        if self.keeper is not None:
            self.keeper.kill(pid)
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)


class Sandbox(ABC):
    kind: SandboxKind

    def __init__(self, reason: str) -> None:
        self.reason = reason  # one line for `agent doctor`: why this kind

    @property
    def cuts_network(self) -> bool:
        """Whether a launch with `network=False` runs without the network (TCP at least):
        bubblewrap, Landlock from ABI 4; not Landlock before it, nor no sandbox."""
        return self.kind == "bubblewrap" or getattr(self, "abi", 0) >= 4

    @abstractmethod
    def launch(self, argv: Sequence[str], spec: SandboxSpec, env: Mapping[str, str]) -> Launch:
        """How to run argv confined by spec, with env (the caller's chosen variables) plus
        HOME (the workspace), TMPDIR and a default PATH; never the runtime's environment."""


class NoSandbox(Sandbox):
    kind: SandboxKind = "none"

    def launch(self, argv: Sequence[str], spec: SandboxSpec, env: Mapping[str, str]) -> Launch:
        workspace = _workspace(spec)
        tmpdir = env.get("TMPDIR") or tempfile.gettempdir()
        keeper = reaper.keeper(spec.limits.memory_mb)
        command, preexec = _started(list(argv), rlimit_plan(spec.limits), keeper)
        return Launch(
            command,
            _child_env(env, spec.home or workspace, tmpdir),
            workspace,
            preexec,
            cleanup=keeper.close if keeper else None,
            keeper=keeper,
        )


class Bubblewrap(Sandbox):
    kind: SandboxKind = "bubblewrap"

    def __init__(self, bwrap: str, reason: str) -> None:
        super().__init__(reason)
        self.bwrap = bwrap

    def launch(self, argv: Sequence[str], spec: SandboxSpec, env: Mapping[str, str]) -> Launch:
        workspace = _workspace(spec)
        seen = view(workspace, spec.masked, spec.reads, spec.writes, frozen=spec.frozen)
        keeper = reaper.cgroup_if_possible(spec.limits.memory_mb)
        # Without a cgroup's watcher, the command checks the daemon lives once bwrap's child
        # has armed its --die-with-parent (tools/sandbox/parent_death.py).
        guarded = parent_death.while_daemon_lives(list(argv)) if keeper is None else None
        descriptors = Descriptors([guarded[1]] if guarded is not None else [])
        try:
            inner = guarded[0] if guarded is not None else argv
            args, fds = bwrap_args(
                self.bwrap, seen, inner, writable=spec.writable, network=spec.network
            )
        except BaseException:
            descriptors.close()
            if keeper is not None:
                keeper.close()
            raise
        descriptors.fds += fds
        command, preexec = _started(args, rlimit_plan(spec.limits), keeper)

        def cleanup() -> None:
            descriptors.close()
            if keeper is not None:
                keeper.close()

        return Launch(
            command,
            _child_env(env, spec.home or workspace, "/tmp"),
            workspace,
            preexec,
            cleanup=cleanup,
            descriptors=descriptors,
            keeper=keeper,
        )


class Landlock(Sandbox):
    kind: SandboxKind = "landlock"

    def __init__(self, abi: int, reason: str) -> None:
        super().__init__(reason)
        self.abi = abi

    def launch(self, argv: Sequence[str], spec: SandboxSpec, env: Mapping[str, str]) -> Launch:
        from tools.sandbox import landlock as ll

        if not spec.network and self.abi < 4:
            raise SandboxUnavailable(
                f"network is off but Landlock ABI {self.abi} cannot restrict it (needs 4)"
            )
        workspace = _workspace(spec)
        seen = view(workspace, spec.masked, spec.reads, spec.writes, frozen=spec.frozen)
        hidden = seen.hidden | seen.absent
        read = ll.EXECUTE | ll.READ_FILE | ll.READ_DIR
        write = ll.fs_rights(self.abi) & ~(ll.MAKE_CHAR | ll.MAKE_BLOCK | ll.IOCTL_DEV)
        device = ll.READ_FILE | ll.WRITE_FILE | ll.TRUNCATE
        tmpdir = make_private_tmp()
        ruleset: Ruleset | None = None
        keeper: Keeper | None = None
        try:
            net = 0 if spec.network else ll.net_rights(self.abi)
            ruleset = ll.Ruleset(ll.fs_rights(self.abi), net, ll.scopes(self.abi))
            for tree in seen.trees:  # /etc itself is not granted: only its listed entries
                ruleset.allow_tree(tree, read, hidden)
            ruleset.allow("/proc", ll.READ_FILE | ll.READ_DIR)
            for name in ("/dev/null", "/dev/zero", "/dev/full"):
                ruleset.allow(name, device)
            for name in ("/dev/random", "/dev/urandom"):
                ruleset.allow(name, ll.READ_FILE)
            ruleset.allow("/dev/tty", device | ll.IOCTL_DEV)
            for tree in seen.reads:
                ruleset.allow_tree(tree, read, hidden)
            for tree in seen.writes:
                ruleset.allow_tree(tree, write, hidden)
            ruleset.allow_tree(workspace, write if spec.writable else read, hidden, seen.frozen)
            ruleset.allow(tmpdir, write, follow=False)
            confine = ll.Confinement(ruleset, drop_capabilities=os.geteuid() == 0)
            keeper = reaper.keeper(spec.limits.memory_mb)
            command, preexec = _started(list(argv), rlimit_plan(spec.limits), keeper, confine)
        except BaseException:
            _remove(keeper, ruleset, tmpdir)
            raise
        return Launch(
            argv=command,
            env=_child_env(env, spec.home or workspace, str(tmpdir)),
            cwd=workspace,
            preexec_fn=preexec,
            cleanup=lambda: _remove(keeper, ruleset, tmpdir),
            keeper=keeper,
        )


def choose_sandbox(setting: SandboxSetting) -> Sandbox:
    """The sandbox for `setting`, probed on each call: "auto" takes bubblewrap if a probe
    run works, else Landlock, else none; an explicit kind that cannot run raises
    SandboxUnavailable. The probe runs a process, so the caller keeps what it gets
    (agent/app.py's App.sandbox, chosen once at start-up), nothing here does. Also removes
    the temporary folders killed runtimes left (tools/sandbox/private_tmp.py)."""
    chosen = _choose(setting)
    reaper.cgroup_base()  # probed now, not on the first command
    sweep_dead_runtimes_tmp()
    return chosen


def _choose(setting: SandboxSetting) -> Sandbox:
    if setting == "off":
        return NoSandbox("off in config")
    if setting == "bubblewrap":
        bwrap, problem = _find_bwrap()
        if bwrap is None:
            raise SandboxUnavailable(f'sandbox is "bubblewrap" but {problem}')
        return Bubblewrap(bwrap, f"bubblewrap set in config; {bwrap} passed a probe run")
    if setting == "landlock":
        abi, problem = _landlock_abi()
        if abi is None:
            raise SandboxUnavailable(f'sandbox is "landlock" but {problem}')
        return Landlock(abi, f"landlock set in config; {problem}")
    if setting != "auto":
        raise ValueError(f"unknown sandbox setting {setting!r}")
    bwrap, bwrap_problem = _find_bwrap()
    if bwrap is not None:
        return Bubblewrap(bwrap, f"auto: {bwrap} passed a probe run")
    abi, landlock_problem = _landlock_abi()
    if abi is not None:
        return Landlock(abi, f"auto: {bwrap_problem}; using {landlock_problem}")
    return NoSandbox(f"auto: {bwrap_problem}; {landlock_problem}: no OS sandbox for commands")


def _find_bwrap() -> tuple[str | None, str]:
    """bwrap's path, or None and why not. A probe run catches disabled user namespaces
    (e.g. Ubuntu's AppArmor restriction), which a PATH lookup cannot see, and a bwrap
    older than 0.5 (no --bind-fd, which a masked path that does not exist needs)."""
    bwrap = system_program("bwrap")
    if bwrap is None:
        return None, "no bwrap in the system folders (install bubblewrap)"
    with tempfile.TemporaryDirectory(prefix="pinclaw-probe-") as folder:
        (Path(folder) / "present").touch()
        spec = SandboxSpec(Path(folder), network=False, masked=(Path(folder) / "absent",))
        launch = Bubblewrap(bwrap, "probe").launch(["true"], spec, {})
        try:
            done = subprocess.run(
                launch.argv,
                env=launch.env,
                cwd=launch.cwd,
                preexec_fn=launch.preexec_fn,
                pass_fds=launch.pass_fds,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=_PROBE_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            return None, f"{bwrap} could not run ({exc})"
        finally:
            if launch.cleanup is not None:
                launch.cleanup()
    if done.returncode == 0:
        return bwrap, ""
    lines = done.stderr.decode(errors="replace").strip().splitlines()
    detail = lines[-1] if lines else f"exit code {done.returncode}"
    if "nknown option" in detail:
        return None, f"{bwrap} is too old ({detail}; bubblewrap 0.5 or later is needed)"
    return None, f"{bwrap} failed a probe run ({detail}; are user namespaces disabled?)"


def _landlock_abi() -> tuple[int | None, str]:
    """The ABI and a description of it, or None and why Landlock cannot be used."""
    try:
        from tools.sandbox import landlock as ll

        abi = ll.abi_version()
    except (ImportError, AttributeError):
        return None, "Landlock needs Linux"
    except OSError as exc:
        if exc.errno == errno.EOPNOTSUPP:
            return None, "Landlock is built in but disabled (add it to the lsm= boot option)"
        return None, f"the kernel has no Landlock ({exc.strerror})"
    return abi, f"Landlock ABI {abi}" + ("" if abi >= 4 else " (cannot turn the network off)")


def _workspace(spec: SandboxSpec) -> Path:
    workspace = spec.workspace.resolve()
    if not workspace.is_dir():
        raise ValueError(f"workspace {workspace} is not a folder")
    return workspace


def _started(
    argv: list[str],
    plan: RlimitPlan,
    keeper: Keeper | None,
    confine: Callable[[], None] | None = None,
) -> tuple[list[str], Callable[[], None] | None]:
    """argv and preexec_fn that start the command kept, limited, confined and ending with
    the daemon (tools/sandbox/parent_death.py). Without a confinement, a cgroup is joined
    and the limits set by wrappers (a shell, prlimit), so that no preexec_fn makes Python
    fork() the whole runtime; a supervisor needs one (and watches the daemon itself)."""
    if isinstance(keeper, Subreaper):
        return argv, keeper.preexec(child_steps(plan, confine=confine))
    limited = None if confine is not None else prlimit_argv(argv, plan)
    if limited is None:
        join = keeper.join if keeper is not None else None
        preexec = child_steps(plan, first=parent_death.step(), join=join, confine=confine)
        return argv, preexec
    wrapped = keeper.wrap(limited) if keeper is not None else limited
    return parent_death.dying_with_daemon(wrapped), None


def _remove(keeper: Keeper | None, ruleset: Ruleset | None, tmpdir: Path) -> None:
    if keeper is not None:
        keeper.close()  # first: nothing of the command writes in tmpdir any more
    if ruleset is not None:
        ruleset.close()
    shutil.rmtree(tmpdir, ignore_errors=True)


def _child_env(env: Mapping[str, str], workspace: Path, tmpdir: str) -> dict[str, str]:
    result = {"PATH": DEFAULT_PATH, **env}
    return result | {"HOME": str(workspace), "TMPDIR": tmpdir}
