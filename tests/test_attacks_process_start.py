"""What a model can plant where pinclaw's own processes start: each test plants through the
real tools (the fake LLM asks for the calls, the real `agent run -m` makes them), then starts
pinclaw again as its user would and asserts the world: the planted code never ran outside
the sandbox.

Both cases have a workspace that holds the user's home (`workspace.path = "~"`; pinclaw
refuses ~/.ssh, ~/.aws and ~/.config inside a workspace by default, a case it means to
hold), with pinclaw installed as docs/getting-started.md says for uv and pipx: an
`agent` on the PATH from ~/.local/bin, its venv under ~/.local/share.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import daemon_process
import pytest
from attack_world import SANDBOXES
from fakes.llm_requests import tool_results
from fakes.llm_server import FakeLLM, text, tool_calls


def _user_home(tmp_path: Path) -> tuple[Path, Path]:
    """The user's home (also the workspace) and a folder outside it, where only something
    running unconfined can write."""
    user = tmp_path / "user"
    user.mkdir(mode=0o700)
    outside = tmp_path / "outside"
    outside.mkdir()
    return user, outside


# A program the sandbox's own output holds: it notes that it ran, with the environment it
# got, then hands over to the real one (from the system's folders) so nothing looks amiss.
_PLANTED_HELPER = """#!/bin/sh
echo "$(basename "$0") ran unconfined, key=$OPENAI_API_KEY" >> {marker}
PATH=/usr/sbin:/usr/bin:/sbin:/bin
exec "$(basename "$0")" "$@"
"""


@pytest.mark.skipif(not SANDBOXES, reason="no OS sandbox here: full autonomy runs nothing")
def test_a_helper_planted_on_the_path_inside_the_workspace_never_runs_unconfined(
    llm_env: dict[str, str], fake_llm: FakeLLM, tmp_path: Path
) -> None:
    """pinclaw wraps every command in setpriv and bwrap, which it runs itself, outside the
    sandbox. ~/.local/bin is on the daemon's PATH for every uv or pipx install; with the home
    as the workspace a command writes there, so those programs are taken from the system's
    folders only (tools/sandbox/system_programs.py): what it wrote never runs unconfined."""
    user, outside = _user_home(tmp_path)
    marker = outside / "ran"
    env = {
        "HOME": str(user),
        "PATH": f"{user}/.local/bin:{os.environ['PATH']}",
        "PINCLAW_WORKSPACE__PATH": str(user),
        "PINCLAW_SECURITY__AUTONOMY": "full",
    }
    helper = _PLANTED_HELPER.format(marker=marker)
    fake_llm.script(
        tool_calls(
            ("file_write", {"path": ".local/bin/setpriv", "content": helper}),
            ("file_write", {"path": ".local/bin/bwrap", "content": helper}),
        ),
        tool_calls(("shell", {"command": "chmod +x .local/bin/setpriv .local/bin/bwrap"})),
        text("Your tools are installed."),
    )
    planted = daemon_process.agent("run", "-m", "Install my tools in ~/.local/bin", env=env)
    assert planted.returncode == 0, planted.stderr
    assert tool_results(fake_llm.requests[-1])[-1] == "exit code: 0 (no output)"
    for name in ("setpriv", "bwrap"):
        assert os.access(user / ".local" / "bin" / name, os.X_OK)  # the command wrote them
    assert not marker.exists()  # what the process that wrote them runs was found at its start

    fake_llm.script(tool_calls(("shell", {"command": "ls"})), text("Listed."))
    later = daemon_process.agent("run", "-m", "What is in my home?", env=env)
    assert later.returncode == 0, later.stderr

    ran = marker.read_text() if marker.exists() else ""
    assert ran == "", f"a program the sandbox wrote ran outside it:\n{ran}"


def test_a_pth_file_planted_in_pinclaws_own_venv_never_runs(
    llm_env: dict[str, str], fake_llm: FakeLLM, tmp_path: Path
) -> None:
    """With the home as the workspace, pinclaw's venv (uv's or pipx's, under ~/.local/share)
    lies inside it. A `.pth` file in its site-packages would run at every start of every
    `agent` command, with the user's rights and environment, outside the sandbox: pinclaw's
    installation is a forbidden path (tools/policy.py `installation`)."""
    user, outside = _user_home(tmp_path)
    marker = outside / "ran"
    venv = user / ".local" / "share" / "pipx" / "venvs" / "pinclaw"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    site_packages = Path(purelib)
    # The install: pinclaw and its packages, as this test run has them.
    ours = subprocess.run(
        [sys.executable, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (site_packages / "pinclaw_install.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
    relative = site_packages.relative_to(user) / "zz_planted.pth"
    planted_line = (
        f"import os; open({str(marker)!r}, 'a').write('ran, key=' + "
        "os.environ.get('OPENAI_API_KEY', '') + '\\n')\n"
    )
    env = {"HOME": str(user), "PINCLAW_WORKSPACE__PATH": str(user)}

    def agent(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [python, "-m", "agent", *args],
            capture_output=True,
            text=True,
            env={**os.environ, **env},
            cwd=daemon_process.REPO,
            timeout=120,
        )

    fake_llm.script(
        tool_calls(("file_write", {"path": str(relative), "content": planted_line})),
        text("Saved."),
    )
    first = agent("run", "-m", "Save this note")
    assert first.returncode == 0, first.stderr
    assert not marker.exists()  # the planted line had not run yet

    fake_llm.script(text("Hello."))
    later = agent("run", "-m", "Hello")
    assert later.returncode == 0, later.stderr

    ran = marker.read_text() if marker.exists() else ""
    assert ran == "", f"a line the model wrote ran at pinclaw's start, unconfined:\n{ran}"
