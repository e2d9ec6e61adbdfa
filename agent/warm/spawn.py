"""Starting a warm start process (agent/warm/server.py) in the background, from a cold
one-shot that has answered: with what that one-shot imported, to stay `idle_s` seconds."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys

from agent.warm.place import paths, start_env


def running(lock_path: str) -> bool:
    """Whether a warm start holds its lock."""
    try:
        handle = os.open(lock_path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(handle)
    return False


def start_warm(idle_s: float) -> None:
    """Start one unless warm starts are off (`idle_s` 0, or the variable) or one runs
    already (a warm start's fork finds its lock held). Nothing waits for it; a failure only
    means the next one-shot runs cold too."""
    environ = os.environ
    found = paths(environ) if idle_s > 0 else None
    if found is None or running(found[2]):
        return
    modules = f"{found[0]}.{os.getpid()}.modules"
    try:
        with open(modules, "w", encoding="utf-8") as listed:
            listed.write("\n".join(name for name in sys.modules if not name.startswith("_")))
        env = start_env(environ)
        if environ.get("XDG_RUNTIME_DIR"):
            env["XDG_RUNTIME_DIR"] = environ["XDG_RUNTIME_DIR"]
        command = [sys.executable, "-P", "-m", "agent.warm", "--idle", f"{idle_s:g}"]
        subprocess.Popen(
            [*command, "--modules", modules],
            cwd="/",
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError:
        return


def status_line(idle_s: float) -> str:
    """`agent doctor`'s line on the warm start this shell's one-shots use."""
    if idle_s <= 0:
        return "note warm start: off (agent.warm_start_s = 0): every one-shot starts cold"
    found = paths(os.environ)
    if found is None:
        return "note warm start: off (its folder is missing, or not this user's alone)"
    if not running(found[2]):
        return f"note warm start: none running; the next cold one-shot leaves one for {idle_s:g} s"
    with open(found[2], encoding="utf-8") as lock:
        pid, _, idle = lock.read().partition(" ")
    return (
        f"note warm start: running (pid {pid}; it ends after {idle.strip() or '?'} s without a "
        f"one-shot; `kill {pid}` ends it now) on {found[0]}"
    )
