"""OS sandboxes for shell commands: the boundary a steered model cannot talk its way past.

A command sees the system read-only, the workspace (read-write unless read-only), a
private temporary folder, and nothing else of the host: not the pinclaw home beside the
workspace (config.toml, state.db), not the owner's home, not the runtime's environment.

- bubblewrap: a mount namespace that lacks everything not bound into it, its own pid
  namespace and /proc (the runtime's processes do not exist inside), `--unshare-net`
  when the network is off, no capabilities even as root.
- landlock: the kernel refuses access outside the granted trees. /proc is the host's:
  Landlock's ptrace scoping denies /proc/<pid>/environ of the runtime, but only to a
  process without CAP_SYS_ADMIN/CAP_PERFMON (those may read any process's environ),
  so root's capabilities are dropped; other processes' cmdline stays readable.
  Signals to the runtime and abstract Unix sockets are scoped from ABI 6. Network off
  blocks TCP bind/connect (ABI >= 4; older ABIs refuse network=False), not UDP, raw
  sockets or pathname Unix sockets (e.g. /run/docker.sock, reachable by its path).
- none: rlimits and a small environment only.

Masked paths: bubblewrap hides them (an empty read-only tmpfs for a folder, /dev/null
for a file). Landlock cannot take a subtree out of a granted tree, so a tree holding a
masked path is granted child by child, skipping masked ones; the folders on the way to
a masked path (the workspace itself, if it holds one) become list-only: their entries
keep their rights, but nothing can be created, deleted or renamed directly in them,
and masked entries' names (not contents) stay listable. As root, ROOT_SECRETS are masked too.

Integration: pass `Launch.preexec_fn` to `asyncio.create_subprocess_exec` (rlimits and,
for Landlock, the confinement itself) and call `Launch.cleanup` once the process has
been waited for, or if spawning failed.
"""

from __future__ import annotations

import errno
import functools
import glob
import os
import resource
import shutil
import subprocess
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # imported lazily at run time: tools.landlock needs Linux's libc
    from tools.landlock import Ruleset

SandboxSetting = Literal["auto", "bubblewrap", "landlock", "off"]
SandboxKind = Literal["bubblewrap", "landlock", "none"]

# The system a command may read and execute (those that exist; merged-/usr symlinks kept).
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc")
# Readable by root alone (globs), and uid 0 reads them without capabilities: masked for root.
ROOT_SECRETS = (
    "/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/security/opasswd",
    "/etc/ssl/private", "/etc/ssh/ssh_host_*_key",
)  # fmt: skip
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
_MIB = 1024 * 1024
_PROBE_TIMEOUT_S = 10


class SandboxUnavailable(RuntimeError):
    """The configured sandbox cannot run here; the message says why."""


@dataclass(frozen=True)
class Limits:
    """Per-process resource limits. `processes` (RLIMIT_NPROC) counts every process of the
    user, not only the command's, and is ignored by the kernel for root: not set then."""

    cpu_s: int = 60
    file_mb: int = 256
    processes: int = 256


@dataclass(frozen=True)
class SandboxSpec:
    workspace: Path  # the only place a command may write (when writable)
    writable: bool = True  # False: the workspace is read-only too
    network: bool = True  # False: no network (bubblewrap), no TCP (Landlock ABI >= 4)
    masked: tuple[Path, ...] = ()  # hidden when inside the workspace or a system dir
    limits: Limits = field(default_factory=Limits)


@dataclass(frozen=True)
class Launch:
    """Everything `asyncio.create_subprocess_exec` needs to start the sandboxed command."""

    argv: list[str]
    env: dict[str, str]
    cwd: Path
    preexec_fn: Callable[[], None] | None
    cleanup: Callable[[], None] | None = None


class Sandbox(ABC):
    kind: SandboxKind

    def __init__(self, reason: str) -> None:
        self.reason = reason  # one line for `agent doctor`: why this kind

    @abstractmethod
    def launch(self, argv: Sequence[str], spec: SandboxSpec, env: Mapping[str, str]) -> Launch:
        """How to run argv confined by spec, with env (the caller's chosen variables) plus
        HOME (the workspace), TMPDIR and a default PATH; never the runtime's environment."""


class NoSandbox(Sandbox):
    kind: SandboxKind = "none"

    def launch(self, argv: Sequence[str], spec: SandboxSpec, env: Mapping[str, str]) -> Launch:
        workspace = _workspace(spec)
        tmpdir = env.get("TMPDIR") or tempfile.gettempdir()
        command, preexec = _limited(list(argv), spec.limits)
        return Launch(command, _child_env(env, workspace, tmpdir), workspace, preexec)


class Bubblewrap(Sandbox):
    kind: SandboxKind = "bubblewrap"

    def __init__(self, bwrap: str, reason: str) -> None:
        super().__init__(reason)
        self.bwrap = bwrap

    def launch(self, argv: Sequence[str], spec: SandboxSpec, env: Mapping[str, str]) -> Launch:
        workspace = _workspace(spec)
        roots = _system_roots()
        hidden = _hidden(spec, workspace, roots)
        args = [self.bwrap, "--new-session", "--die-with-parent"]
        args += ["--unshare-pid", "--unshare-ipc", "--unshare-uts"]
        if not spec.network:
            args.append("--unshare-net")
        if os.geteuid() == 0:
            args += ["--cap-drop", "ALL"]  # as root, bwrap keeps capabilities otherwise
        for name in SYSTEM_DIRS:
            path = Path(name)
            if path.is_symlink():
                args += ["--symlink", os.readlink(path), name]
            elif path.is_dir() and path not in hidden:
                args += ["--ro-bind", name, name]
        # /tmp before the workspace: the workspace may live under /tmp.
        args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
        for extra in _outside_files(spec, roots, hidden):
            args += ["--ro-bind", str(extra), str(extra)]
        args += ["--bind" if spec.writable else "--ro-bind", str(workspace), str(workspace)]
        for path in sorted(hidden):
            if str(path) in SYSTEM_DIRS:
                continue  # not bound at all
            if path.is_dir():
                args += ["--tmpfs", str(path), "--remount-ro", str(path)]
            else:
                args += ["--ro-bind", "/dev/null", str(path)]
        args += ["--chdir", str(workspace), "--", *argv]
        command, preexec = _limited(args, spec.limits)
        return Launch(command, _child_env(env, workspace, "/tmp"), workspace, preexec)


class Landlock(Sandbox):
    kind: SandboxKind = "landlock"

    def __init__(self, abi: int, reason: str) -> None:
        super().__init__(reason)
        self.abi = abi

    def launch(self, argv: Sequence[str], spec: SandboxSpec, env: Mapping[str, str]) -> Launch:
        from tools import landlock as ll

        if not spec.network and self.abi < 4:
            raise SandboxUnavailable(
                f"network is off but Landlock ABI {self.abi} cannot restrict it (needs 4)"
            )
        workspace = _workspace(spec)
        roots = _system_roots()
        hidden = _hidden(spec, workspace, roots)
        read = ll.EXECUTE | ll.READ_FILE | ll.READ_DIR
        write = ll.fs_rights(self.abi) & ~(ll.MAKE_CHAR | ll.MAKE_BLOCK | ll.IOCTL_DEV)
        device = ll.READ_FILE | ll.WRITE_FILE | ll.TRUNCATE
        tmpdir = Path(tempfile.mkdtemp(prefix="pinclaw-sandbox-"))
        ruleset: Ruleset | None = None
        try:
            net = 0 if spec.network else ll.net_rights(self.abi)
            ruleset = ll.Ruleset(ll.fs_rights(self.abi), net, ll.scopes(self.abi))
            for root in roots:
                ruleset.allow_tree(root, read, hidden)
            ruleset.allow("/proc", ll.READ_FILE | ll.READ_DIR)
            for name in ("/dev/null", "/dev/zero", "/dev/full"):
                ruleset.allow(name, device)
            for name in ("/dev/random", "/dev/urandom"):
                ruleset.allow(name, ll.READ_FILE)
            ruleset.allow("/dev/tty", device | ll.IOCTL_DEV)
            for extra in _outside_files(spec, roots, hidden):
                ruleset.allow(extra, ll.READ_FILE)
            ruleset.allow_tree(workspace, write if spec.writable else read, hidden)
            ruleset.allow(tmpdir, write, follow=False)
            confine = ll.Confinement(ruleset, drop_capabilities=os.geteuid() == 0)
        except BaseException:
            _remove(ruleset, tmpdir)
            raise
        return Launch(
            argv=list(argv),
            env=_child_env(env, workspace, str(tmpdir)),
            cwd=workspace,
            preexec_fn=_preexec(_rlimit_plan(spec.limits), confine),
            cleanup=lambda: _remove(ruleset, tmpdir),
        )


def choose_sandbox(setting: SandboxSetting) -> Sandbox:
    """The sandbox for `setting`, probed once per process (and per PATH). "auto" takes
    bubblewrap if a probe run works, else Landlock, else none; an explicit kind that
    cannot run raises SandboxUnavailable. The bubblewrap probe runs a process: call
    this at start-up (or from a thread), not on every command from the event loop."""
    key = (setting, os.environ.get("PATH", os.defpath))
    if key not in _chosen:
        _chosen[key] = _choose(setting)
    return _chosen[key]


_chosen: dict[tuple[str, str], Sandbox] = {}


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
    (e.g. Ubuntu's AppArmor restriction), which a PATH lookup cannot see."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return None, "bwrap is not on PATH (install bubblewrap)"
    with tempfile.TemporaryDirectory(prefix="pinclaw-probe-") as folder:
        launch = Bubblewrap(bwrap, "probe").launch(
            ["true"], SandboxSpec(Path(folder), network=False), {}
        )
        try:
            done = subprocess.run(
                launch.argv,
                env=launch.env,
                cwd=launch.cwd,
                preexec_fn=launch.preexec_fn,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=_PROBE_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            return None, f"{bwrap} could not run ({exc})"
    if done.returncode == 0:
        return bwrap, ""
    lines = done.stderr.decode(errors="replace").strip().splitlines()
    detail = lines[-1] if lines else f"exit code {done.returncode}"
    return None, f"{bwrap} failed a probe run ({detail}; are user namespaces disabled?)"


def _landlock_abi() -> tuple[int | None, str]:
    """The ABI and a description of it, or None and why Landlock cannot be used."""
    try:
        from tools import landlock as ll

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


def _system_roots() -> list[Path]:
    """The system dirs that exist, resolved, without those inside another (merged /usr:
    /bin is /usr/bin), so that a masked path is not granted again through an alias."""
    resolved = {Path(name).resolve() for name in SYSTEM_DIRS if os.path.isdir(name)}
    return sorted(p for p in resolved if not any(other in p.parents for other in resolved))


def _hidden(spec: SandboxSpec, workspace: Path, roots: list[Path]) -> set[Path]:
    """Masked paths to hide (and ROOT_SECRETS as root): existing, resolved, inside a tree
    the sandbox exposes. One holding the workspace or outside every tree is out of reach."""
    trees = [workspace, *roots]
    hidden = set()
    secrets = [Path(p) for g in ROOT_SECRETS for p in glob.glob(g)] if os.geteuid() == 0 else []
    for raw in (*spec.masked, *secrets):
        path = Path(raw).resolve()
        if path == workspace or path in workspace.parents or not path.exists():
            continue
        if any(path == tree or tree in path.parents for tree in trees):
            hidden.add(path)
    return hidden


def _outside_files(spec: SandboxSpec, roots: list[Path], hidden: set[Path]) -> list[Path]:
    """/etc/resolv.conf's target when it lives outside /etc (systemd-resolved puts it in
    /run): without it, name lookups fail even with the network on."""
    link = Path("/etc/resolv.conf")
    if not spec.network or not link.is_symlink() or any(h in (link, *link.parents) for h in hidden):
        return []
    target = link.resolve()
    inside = any(root in target.parents for root in roots)
    return [] if inside or not target.is_file() or target in hidden else [target]


def _remove(ruleset: Ruleset | None, tmpdir: Path) -> None:
    if ruleset is not None:
        ruleset.close()
    shutil.rmtree(tmpdir, ignore_errors=True)


def _child_env(env: Mapping[str, str], workspace: Path, tmpdir: str) -> dict[str, str]:
    result = {"PATH": DEFAULT_PATH, **env}
    return result | {"HOME": str(workspace), "TMPDIR": tmpdir}


_RlimitPlan = tuple[tuple[int, int, int], ...]


def _rlimit_plan(limits: Limits) -> _RlimitPlan:
    """(resource, soft, hard) triples, clamped to our own hard limits (raising one is
    refused to non-root). CPU: SIGXCPU at the soft limit, SIGKILL a second later."""
    wanted = [
        (resource.RLIMIT_CPU, limits.cpu_s, limits.cpu_s + 1),
        (resource.RLIMIT_FSIZE, limits.file_mb * _MIB, limits.file_mb * _MIB),
        (resource.RLIMIT_CORE, 0, 0),
    ]
    if os.geteuid() != 0:
        wanted.append((resource.RLIMIT_NPROC, limits.processes, limits.processes))
    plan = []
    for which, soft, hard in wanted:
        current = resource.getrlimit(which)[1]
        if current != resource.RLIM_INFINITY:
            hard = min(hard, current)
        plan.append((which, min(soft, hard), hard))
    return tuple(plan)


_PRLIMIT_OPTIONS = {
    resource.RLIMIT_CPU: "--cpu", resource.RLIMIT_FSIZE: "--fsize",
    resource.RLIMIT_CORE: "--core", resource.RLIMIT_NPROC: "--nproc",
}  # fmt: skip


@functools.cache
def _prlimit() -> str | None:
    return shutil.which("prlimit", path="/usr/bin:/bin")  # util-linux; trusted places only


def _limited(argv: list[str], limits: Limits) -> tuple[list[str], Callable[[], None] | None]:
    """argv under the limits: through prlimit(1) when there is one, since any preexec_fn
    makes Python fork() the whole runtime (about 10 ms at 200 MiB) instead of vfork()."""
    plan = _rlimit_plan(limits)
    prlimit = _prlimit()
    if prlimit is None:
        return argv, _preexec(plan, None)
    options = [f"{_PRLIMIT_OPTIONS[which]}={soft}:{hard}" for which, soft, hard in plan]
    return [prlimit, *options, "--", *argv], None


def _preexec(plan: _RlimitPlan, confine: Callable[[], None] | None) -> Callable[[], None]:
    """The child's last steps before exec: only syscalls, everything prepared already."""

    def run() -> None:
        for which, soft, hard in plan:
            resource.setrlimit(which, (soft, hard))
        if confine is not None:
            confine()

    return run
