"""A sandboxed command never outlives the daemon that started it, even when the daemon is
killed at the moment of the launch (tools/sandbox/parent_death.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tools.sandbox.parent_death import _setpriv, dying_with_daemon

pytestmark = pytest.mark.skipif(_setpriv() is None, reason="no setpriv with --pdeathsig here")


def test_a_command_whose_daemon_is_gone_before_the_arming_does_not_run(tmp_path: Path) -> None:
    """As when the daemon died between its fork and the arming: the process that runs the
    line is not the one named in it (here: this test, not a daemon that is gone)."""
    marker = tmp_path / "ran"
    argv = dying_with_daemon(["/bin/sh", "-c", f"echo ran > {marker}"])
    daemon_pid = argv[argv.index("-c") + 2]
    gone = subprocess.run(
        [
            sys.executable,
            "-c",
            "import subprocess, sys; sys.exit(subprocess.run(sys.argv[1:]).returncode)",
            *argv,
        ]
    )
    assert daemon_pid == str(os.getpid())
    assert gone.returncode == 125
    assert not marker.exists()


# How the stand-in daemon starts the command: behind setpriv (a launch that keeps vfork),
# or with the preexec step (a launch that has a preexec_fn anyway, as Landlock's).
LAUNCHES = {
    "setpriv": "child = subprocess.Popen(dying_with_daemon(command))",
    "preexec": "child = subprocess.Popen(command, preexec_fn=step())",
}


@pytest.mark.parametrize("launch", LAUNCHES)
def test_a_command_dies_with_the_daemon_killed_while_it_runs(tmp_path: Path, launch: str) -> None:
    """A stand-in daemon launches `sleep 3; echo`, is killed with SIGKILL after half a
    second: nothing is written, no process of it is left."""
    marker = tmp_path / "ran"
    script = (
        "import subprocess, sys\n"
        "from tools.sandbox.parent_death import dying_with_daemon, step\n"
        f"command = ['/bin/sh', '-c', 'sleep 3; echo ran > {marker}']\n"
        f"{LAUNCHES[launch]}\n"
        "print(child.pid, flush=True)\n"
        "child.wait()\n"
    )
    daemon = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=Path.cwd()
    )
    assert daemon.stdout is not None
    command_pid = int(daemon.stdout.readline())
    time.sleep(0.5)
    daemon.send_signal(signal.SIGKILL)
    daemon.wait(10)
    time.sleep(3.5)
    assert not marker.exists()
    assert not Path(f"/proc/{command_pid}").exists() or "zombie" in _state(command_pid)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return "zombie"


# A stand-in daemon that guards a command, hands it to a process of its own that waits a
# second before running it (as bwrap's child may, armed against nothing), then leaves or not.
GUARDED = """
import os, subprocess, sys, time
from tools.sandbox.parent_death import while_daemon_lives
argv, fd = while_daemon_lives(["/bin/sh", "-c", "echo ran > " + sys.argv[1]])
late = ["/bin/sh", "-c", 'sleep 1; exec "$@"', "late", *argv]
subprocess.Popen(late, pass_fds=(fd,), start_new_session=True)
if sys.argv[2] == "stays":
    time.sleep(2.5)
os._exit(0)
"""


@pytest.mark.parametrize("daemon", ["stays", "leaves"])
def test_a_guarded_command_runs_only_while_its_daemon_lives(tmp_path: Path, daemon: str) -> None:
    """What bwrap's child runs where no cgroup covers it: left behind by a daemon that is
    gone, it does not act."""
    marker = tmp_path / "ran"
    subprocess.run([sys.executable, "-c", GUARDED, str(marker), daemon], cwd=Path.cwd(), check=True)
    time.sleep(2.0 if daemon == "leaves" else 0.5)
    assert marker.exists() == (daemon == "stays")
