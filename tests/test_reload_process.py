"""`agent run` as a process, its settings read again on SIGHUP and on `agent reload`: the edits
are made so that the file watch cannot see them (same size, same inode, the old mtime put
back), so only the signal or the command can have applied them. A provider key changed in
agent.env is the one the next call sends; a broken edit is refused with its one line; with no
daemon, `agent reload` says so; after an edit the watch applied, a one-shot is still the
daemon's."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from daemon_process import DaemonProcess, agent, env_of, wait_until
from fakes.llm_server import FakeLLM

OLD_KEY = "sk-old-key-for-the-fake-000000"
NEW_KEY = "sk-new-key-for-the-fake-111111"


@pytest.fixture
def running(
    llm_env: dict[str, str], home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[DaemonProcess]:
    """The daemon, its model in config.toml and its provider key in agent.env only."""
    monkeypatch.delenv("PINCLAW_LLM__MODEL")
    monkeypatch.delenv("OPENAI_API_KEY")
    home.mkdir(parents=True)
    (home / "config.toml").write_text('[llm]\nmodel = "openai/test-model"\n')
    (home / "agent.env").write_text(f"OPENAI_API_KEY={OLD_KEY}\n")
    daemon = DaemonProcess(env_of(), tmp_path / "run.log").start()
    try:
        yield daemon.wait_ready()
    finally:
        daemon.ensure_stopped()


def unseen_edit(path: Path, old: str, new: str) -> None:
    """Replace `old` by `new` (as long) in place and put the mtime back: the watch's view
    (inode, size, mtime) is unchanged."""
    assert len(old) == len(new)
    before = path.stat()
    path.write_text(path.read_text().replace(old, new))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (
        before.st_ino,
        before.st_size,
        before.st_mtime_ns,
    )


def one_shot(daemon: DaemonProcess) -> None:
    answered = daemon.log.count("one-shot from the local socket")
    done = agent("run", "-m", "which model?")
    assert done.returncode == 0, done.stderr
    assert daemon.log.count("one-shot from the local socket") == answered + 1  # not cold


def test_sighup_and_agent_reload_each_apply_an_edit(
    running: DaemonProcess, fake_llm: FakeLLM, home: Path
) -> None:
    one_shot(running)
    unseen_edit(home / "config.toml", "test-model", "best-model")
    assert running.proc is not None
    running.proc.send_signal(signal.SIGHUP)
    line = "settings read again (SIGHUP): applied: llm.model"
    wait_until(lambda: line in running.log, 30, "the reload on SIGHUP", running)
    unseen_edit(home / "agent.env", OLD_KEY, NEW_KEY)
    reloaded = agent("reload")
    assert (reloaded.returncode, reloaded.stderr) == (0, "agent.env: OPENAI_API_KEY\n")
    one_shot(running)
    assert [r["model"] for r in fake_llm.requests] == ["test-model", "best-model"]
    keys = [h["authorization"] for h in fake_llm.request_headers]
    assert keys == [f"Bearer {OLD_KEY}", f"Bearer {NEW_KEY}"]
    again = agent("reload")
    assert (again.returncode, again.stderr) == (0, "nothing changed\n")
    assert running.terminate() == 0


def test_agent_reload_refuses_a_broken_file_and_the_old_settings_stay(
    running: DaemonProcess, fake_llm: FakeLLM, home: Path
) -> None:
    config = home / "config.toml"
    unseen_edit(config, 'model = "openai/test-model"', 'modle = "openai/test-model"')
    refused = agent("reload")
    assert refused.returncode == 2
    assert refused.stderr == (
        f"error: not applied; the last good settings stay:\n{config}: llm.modle: unknown key\n"
    )
    assert f"settings not applied (agent reload): {config}: llm.modle: unknown key" in running.log
    one_shot(running)  # the daemon answers, with the model it had
    config.write_text('[llm]\nmodel = "openai/best-model"\n')  # seen by the watch this time
    line = "settings read again (a file changed): applied: llm.model"
    wait_until(lambda: line in running.log, 30, "the file watch's reload", running)
    one_shot(running)  # the file as the daemon read it: still the daemon's one-shot
    assert [r["model"] for r in fake_llm.requests] == ["test-model", "best-model"]
    assert running.terminate() == 0


def test_agent_reload_without_a_daemon_says_there_is_none(home: Path) -> None:
    done = agent("reload", env={"PINCLAW_HOME": str(home)})
    assert done.returncode == 2
    assert done.stderr.startswith("error: no pinclaw daemon runs for this home")
