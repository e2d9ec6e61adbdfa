"""`agent doctor`: is this installation ready? Config, workspace, model, key — no network
call unless asked. Everything it prints passes the runtime's secret scrubber: a provider's
error (a 401 that echoes the key) is shown like any other text the runtime shows."""

from __future__ import annotations

import contextlib
import io
import os
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from agent.app import make_scrubber
from agent.config import Settings
from agent.security import Scrubber
from agent.turns.quirks import ProviderQuirks
from agent.workspace import BOOTSTRAP_FILES
from tools.board_types import BoardInfo, pin_runs

# The environment variable LiteLLM reads for each provider prefix of a model name.
PROVIDER_KEYS = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "gemini": "GEMINI_API_KEY",
    "groq": "GROQ_API_KEY",
    "mistral": "MISTRAL_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY",
    "xai": "XAI_API_KEY",
    "together_ai": "TOGETHERAI_API_KEY",
    "cohere": "COHERE_API_KEY",
}
KEYLESS = ("ollama", "ollama_chat", "lm_studio", "hosted_vllm")


def key_problem(settings: Settings) -> str | None:
    """None when a key is present (or not needed) for the model's provider."""
    model = settings.llm.model
    provider = model.split("/", 1)[0] if "/" in model else "openai"
    if settings.llm.api_key is not None or provider in KEYLESS:
        return None
    env = PROVIDER_KEYS.get(provider)
    if env is None:
        return None if settings.llm.api_base else f"unknown provider {provider!r}: check its key"
    if os.environ.get(env):
        return None
    return f"no API key: set {env} (or PINCLAW_LLM__API_KEY)"


class ScrubbedLines(io.TextIOBase):
    """Standard output while doctor runs: whole lines, scrubbed, whoever prints them."""

    def __init__(self, out: TextIO, scrub: Scrubber) -> None:
        self._out = out
        self._scrub = scrub
        self._rest = ""  # an unfinished line: a secret in it may not be complete yet

    def write(self, text: str) -> int:
        done, newline, self._rest = (self._rest + text).rpartition("\n")
        if newline:
            self._out.write(self._scrub(done + newline))
            self._out.flush()
        return len(text)

    def finish(self) -> None:
        if self._rest:
            self._out.write(self._scrub(self._rest))
            self._rest = ""
        self._out.flush()


async def run_doctor(settings: Settings, *, check_model: bool = False) -> int:
    out = ScrubbedLines(sys.stdout, make_scrubber(settings))
    try:
        with contextlib.redirect_stdout(out):
            return await _checks(settings, check_model)
    finally:
        out.finish()


async def _checks(settings: Settings, check_model: bool) -> int:
    problems = 0

    def report(ok: bool, label: str, detail: str) -> None:
        nonlocal problems
        problems += 0 if ok else 1
        print(f"{'ok ' if ok else 'FAIL'} {label}: {detail}")

    source = settings.config_file
    report(True, "config", str(source) if source else "no file; defaults and environment")
    workspace = settings.workspace_dir
    missing = [name for name in BOOTSTRAP_FILES if not (workspace / name).exists()]
    report(
        workspace.is_dir(),
        "workspace",
        f"{workspace}" + (f" (missing: {', '.join(missing)})" if missing else "")
        if workspace.is_dir()
        else f"{workspace} does not exist; run `agent init`",
    )
    model = settings.llm.model
    report(bool(model), "model", model or "not set; set PINCLAW_LLM__MODEL")
    if model:
        problem = key_problem(settings)
        report(problem is None, "api key", problem or "present")
    for name in ("telegram", "discord"):
        channel = getattr(settings.channels, name)
        if channel.enabled:
            token = channel.bot_token is not None
            env = f"PINCLAW_CHANNELS__{name.upper()}__BOT_TOKEN"
            report(token, name, "enabled, token present" if token else f"enabled; set {env}")
            if not channel.allowed_users:
                print(f"note {name}: allowed_users is empty, so nobody can talk to the bot")
    _report_sandbox(settings, report)
    print(_daemon_line(settings.home))
    _note_queues(settings.state_db)
    for line in ProviderQuirks(settings.state_db).lines():
        print(f"note provider: {line}")
    if settings.hardware.enabled:
        from tools.hardware import Board

        board = Board(settings.hardware)
        info = await board.describe()
        await board.close()
        if info is None:
            report(False, "board", board.last_error or "not found")
        else:
            report(True, "board", _board_line(info))
            print(f"note board: {_timer_line(info)}")
    if check_model and model:
        from agent.llm import LLMClient, LLMError

        try:
            reply = await LLMClient(settings.llm).complete(
                [{"role": "user", "content": "Reply with the word: ready"}]
            )
            report(True, "model call", repr(reply.content[:40]))
        except LLMError as exc:
            report(False, "model call", str(exc))
    return 1 if problems else 0


def _board_line(info: BoardInfo) -> str:
    """Firmware, port and what the pins can do, from the board's own reports."""
    usable = [pin for pin in info.pins if pin.capabilities]
    pwm = [pin.number for pin in usable if "pwm" in pin.capabilities]
    analog = [f"A{pin.analog_channel}" for pin in usable if pin.analog_channel is not None]
    return (
        f"{info.firmware} {info.firmware_version} on {info.port} (Firmata protocol "
        f"{info.protocol_version}), {info.pin_count} pins: digital "
        f"{pin_runs([pin.number for pin in usable if 'output' in pin.capabilities])}, "
        f"PWM {pin_runs(pwm) or 'none'}, analog {', '.join(analog) or 'none'}"
    )


def _timer_line(info: BoardInfo) -> str:
    if not info.model:
        return "timers: board not recognised, so no timer conflicts are predicted"
    return f"{info.model}, PWM timers {info.timer_groups}"


def _report_sandbox(settings: Settings, report: Callable[[bool, str, str], None]) -> None:
    """Which OS sandbox confines commands and why; and the remembered "Always allow"s."""
    from agent.turns.approvals import AlwaysAllowed
    from tools.sandbox import SandboxUnavailable, choose_sandbox

    security = settings.security
    try:
        sandbox = choose_sandbox(security.sandbox)
    except SandboxUnavailable as exc:
        report(False, "sandbox", str(exc))
        return
    unconfined_full = sandbox.kind == "none" and security.autonomy == "full"
    refused = unconfined_full and security.sandbox != "off"
    detail = f"{sandbox.kind} ({sandbox.reason})"
    if refused:
        detail += '; autonomy "full" refuses every command until a sandbox is available'
    report(not refused, "sandbox", detail)
    rules = AlwaysAllowed(settings.state_db, settings.workspace_dir.resolve()).rules()
    print(f"note approvals: always allowed: {', '.join(rules) if rules else 'none'}")


def _daemon_line(home: Path) -> str:
    """Whether `agent run` serves this home's socket, so one-shots are warm."""
    from agent.cli.local_client import ping
    from agent.home import socket_path

    pid = ping(home)
    if pid is None:
        return "note daemon: not running (one-shots start cold)"
    return f"note daemon: running (pid {pid}) on {socket_path(home)}"


def _note_queues(state_db: Path) -> None:
    """What a stopped daemon left for its next start (read-only; the daemon may be running)."""
    if not state_db.exists():
        return
    try:
        with sqlite3.connect(f"file:{state_db}?mode=ro", uri=True, timeout=2) as db:
            waiting = db.execute("SELECT COUNT(*) FROM inbox WHERE status = 'pending'").fetchone()
            queued = db.execute("SELECT COUNT(*) FROM outbox WHERE status = 'pending'").fetchone()
            expired = db.execute("SELECT COUNT(*) FROM outbox WHERE status = 'expired'").fetchone()
    except sqlite3.Error:
        return  # an older state.db without the queues
    print(
        f"note queues: {waiting[0]} message(s) waiting for an answer, {queued[0]} repl(ies) "
        f"waiting to be sent, {expired[0]} never delivered"
    )
