"""`agent doctor`: is this installation ready? Config, workspace, model, key, home, sandbox,
board — no model call unless asked (only a GET of llm.api_base's /models, when one is set;
the checks of what a person sets by hand are in doctor_setup.py). Everything it prints passes
the runtime's secret scrubber: a provider's error (a 401 that echoes the key) is shown like
any other text the runtime shows."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from agent.cli.doctor.setup_checks import report_channels, report_home, report_model
from agent.cli.owner.pairing import doctor_lines
from agent.cli.user_errors import missing_package_line
from agent.config import Settings, make_scrubber, masked_urls
from agent.durable.learned_model_facts import LearnedModelFacts, learned_rows
from agent.durable.store import read_state
from agent.model.profiles.lookup import FACT_FIRST_TOKEN, FACT_SERVER, FACT_TOOLS, FACT_WINDOW
from agent.security import Scrubber
from agent.workspace import BOOTSTRAP_FILES
from tools.board.link.firmata_types import BoardInfo, pin_runs
from tools.config import DEFAULT_BOARD, BoardSettings, configured_boards, network_port


class ScrubbedLines(io.TextIOBase):
    """Standard output while doctor runs: whole lines, scrubbed, whoever prints them, every
    URL's password masked (one in llm.api_base is no configured secret the scrubber knows)."""

    def __init__(self, out: TextIO, scrub: Scrubber) -> None:
        self._out = out
        self._scrub = scrub
        self._rest = ""  # an unfinished line: a secret in it may not be complete yet

    def write(self, text: str) -> int:
        done, newline, self._rest = (self._rest + text).rpartition("\n")
        if newline:
            self._out.write(masked_urls(self._scrub(done + newline)))
            self._out.flush()
        return len(text)

    def finish(self) -> None:
        if self._rest:
            self._out.write(masked_urls(self._scrub(self._rest)))
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
    report(workspace.is_dir(), "workspace", _workspace_detail(workspace))
    model = settings.llm.model
    await report_model(settings, report)
    report_channels(settings, report)
    state_problem = _report_state(settings, report) or report_home(settings.home, report)
    _report_sandbox(settings, report, approvals=state_problem is None)
    print(_daemon_line(settings.home))
    from agent.warm.spawn import status_line

    print(status_line(settings.agent.warm_start_s))
    if state_problem is None and settings.state_url is not None:
        _report_processes(settings.state_url, report)
    if state_problem is None:
        _note_queues(settings)
        for line in LearnedModelFacts(read_state(settings, learned_rows) or []).lines():
            print(f"note provider: {line}")
        for line in doctor_lines(settings):  # who was let in by pairing, the open codes
            print(f"note pairing: {line}")
    for name, board in configured_boards(settings.hardware, settings.boards).items():
        what = "board" if name == DEFAULT_BOARD else f"board {name}"
        await _report_board(board, what, settings.home, report)
    if check_model and model and state_problem is None:
        await _check_model(settings, report)
    return 2 if state_problem is not None else 1 if problems else 0


def _workspace_detail(workspace: Path) -> str:
    """The workspace line: its missing files, or why it is no folder (a file named in
    [workspace] path is told apart from nothing there: `agent init` cannot fix that)."""
    if workspace.is_dir():
        missing = [name for name in BOOTSTRAP_FILES if not (workspace / name).exists()]
        return f"{workspace}" + (f" (missing: {', '.join(missing)})" if missing else "")
    if workspace.exists():
        return f"{workspace} is a file, not a folder; set [workspace] path to a folder"
    return f"{workspace} does not exist; run `agent init`"


async def _check_model(settings: Settings, report: Callable[[bool, str, str], None]) -> None:
    """What is learned is kept in state.db, through its one connection."""
    from agent.durable.store import open_store

    store = await open_store(settings.state_db, url=settings.state_url)
    try:
        await _ask_model(settings, report, await LearnedModelFacts.load(store.db))
    finally:
        await store.close()


async def _ask_model(
    settings: Settings, report: Callable[[bool, str, str], None], quirks: LearnedModelFacts
) -> None:
    """Ask the model's server what it serves (kept for the next start's prompt), then send
    the first request a one-shot sends — its system prompt and tool schemas — streamed, and
    time the first token: on a small machine that first call is the slow one."""
    from agent.cli.prompt_show import inspect_prompt
    from agent.model.client import LLMClient
    from agent.model.profiles.litellm_facts import token_counter
    from agent.model.responses import LLMError
    from agent.model.server_probe import probe_server

    llm = settings.llm
    facts = await asyncio.to_thread(probe_server, llm.model, llm.api_base)
    if facts.server:
        await quirks.learn_fact(llm.model, FACT_SERVER, facts.server)
        if facts.window:
            await quirks.learn_fact(llm.model, FACT_WINDOW, str(facts.window))
        if facts.native_tools is False:
            await quirks.learn_fact(llm.model, FACT_TOOLS, "xml")
        window = f"a window of {facts.window:,} tokens" if facts.window else "no window said"
        tools = {True: "tool calls in its template", False: "no tool calls in its template"}
        said = f", {tools[facts.native_tools]}" if facts.native_tools is not None else ""
        print(f"note model server: {facts.server}, {window}{said}")
    found = await asyncio.to_thread(inspect_prompt, settings, "cli", None)
    ask = [
        {"role": "system", "content": found.text},
        {"role": "user", "content": "Reply with the word: ready"},
    ]
    schemas = found.schemas or None
    weight = token_counter(llm)(found.text + (json.dumps(schemas) if schemas else ""))
    started = time.monotonic()
    try:
        reply = await LLMClient(llm).complete(ask, tools=schemas, on_text=lambda _: None)
    except LLMError as exc:
        report(False, "model call", str(exc))
        return
    took, first = time.monotonic() - started, reply.first_token_s
    if first is not None:
        await quirks.learn_fact(llm.model, FACT_FIRST_TOKEN, f"{first:.1f}")
    said = repr(reply.content[:40]) if reply.content else f"{len(reply.tool_calls)} tool call(s)"
    timing = f"first token after {first:.1f} s" if first is not None else "no token streamed"
    tokens = reply.prompt_tokens or weight
    report(True, "model call", f"{said}; {timing}, whole reply {took:.1f} s")
    print(
        f"note model: first request {tokens:,} tokens ({found.choice.mode} prompt: "
        f"{found.choice.why}); llm.first_token_timeout_s allows {llm.first_token_limit_s():.0f} s"
    )


async def _report_board(
    settings: BoardSettings, what: str, home: Path, report: Callable[[bool, str, str], None]
) -> None:
    """What the board's own reports say, or why there are none (not found, its port in use,
    pyserial missing). Only looked at: its named pins (and their safe states) are left out.
    A network board the daemon holds is not asked: its one connection would be taken."""
    from agent.cli.local_client import ping
    from tools.board.board import Board

    if network_port(settings.port) and ping(home) is not None:
        print(f"note {what}: {settings.port}, held by the running daemon (not asked)")
        return
    board = Board(settings.model_copy(update={"pins": {}, "interlocks": []}))
    try:
        info = await board.describe()
    except ModuleNotFoundError as exc:
        line = missing_package_line(exc)
        if line is None:
            raise
        report(False, what, line.removeprefix("error: "))
        return
    finally:
        await board.close()
    if info is None:
        report(False, what, board.last_error or "not found")
    else:
        report(True, what, _board_line(info))
        print(f"note {what}: {_timer_line(info)}")


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


def _report_state(settings: Settings, report: Callable[[bool, str, str], None]) -> str | None:
    """state.db: usable by this pinclaw (its schema version, its backups) or the one line
    that says why not — then nothing else reads it, and doctor exits 2; and whether the
    disk has the room the daemon needs to take messages. Or the PostgreSQL store's line."""
    from agent.durable.file.migrations import describe, diagnose
    from agent.durable.file.state_check import schema_version
    from agent.durable.file.storage_health import space_line

    if settings.state_url is not None:
        return _report_postgres(settings, report)
    state_db = settings.state_db
    unusable = diagnose(state_db)
    if unusable is not None:
        report(False, "state.db", str(unusable).removeprefix("state.db error: "))
        return unusable.problem
    full = space_line(state_db.parent)
    if full is not None:
        report(False, "disk", full)
    if not state_db.exists() or state_db.stat().st_size == 0:
        print(f"note state.db: {state_db} not created yet")
        return None
    version = schema_version(state_db)
    backups = sorted((state_db.parent / "backups").glob("state-*.db"))
    kept = f"{len(backups)} backup(s), newest {backups[-1].name}" if backups else "no backups"
    report(True, "state.db", f"{state_db}, schema version {describe(version)}; {kept}")
    return None


def _report_processes(url: str, report: Callable[[bool, str, str], None]) -> None:
    """The pinclaw processes sharing the PostgreSQL store, and what each holds."""
    from agent.durable.postgres.pg_claims import sharing_processes

    try:
        found = sharing_processes(url)
    except Exception as exc:  # the store's own line says why it cannot be reached
        report(False, "processes", f"cannot be listed ({type(exc).__name__})")
        return
    lines = [f"{who} ({roles or 'no role'})" for who, roles in found]
    report(
        True,
        "processes",
        f"{len(found)} share the store: " + ", ".join(lines)
        if found
        else "none runs on the store now",
    )


def _report_postgres(settings: Settings, report: Callable[[bool, str, str], None]) -> str | None:
    """[state] url: the server (its password left out), the schema version, the messages
    waiting; or the one line that says why it cannot be used (doctor exits 2)."""
    from agent.durable.file.migrations import LATEST, describe
    from agent.durable.file.state_errors import StateError
    from agent.durable.postgres.pg_check import check
    from agent.durable.postgres.pg_state import PostgresState

    store = PostgresState(str(settings.state_url), settings.home)
    try:
        found = check(store.url)
    except StateError as exc:
        unusable = store.unusable(exc)
        report(False, "state", str(unusable).removeprefix("PostgreSQL state error: "))
        return unusable.problem
    if found.version == 0:
        print(f"note state: {store.where} has no tables yet (the first `agent run` makes them)")
        return None
    waiting = f"{found.waiting} message(s) waiting for an answer"
    report(
        found.version <= LATEST,
        "state",
        f"{store.where}, schema version {describe(found.version)}; {waiting}",
    )
    return None if found.version <= LATEST else "newer schema"


def _report_sandbox(
    settings: Settings, report: Callable[[bool, str, str], None], *, approvals: bool = True
) -> None:
    """Which OS sandbox confines commands and why; and the remembered "Always allow"s
    (`approvals`: state.db can be read)."""
    from agent.durable.always_allowed import read_rules
    from tools.sandbox.sandboxes import SandboxUnavailable, choose_sandbox

    security = settings.security
    try:
        sandbox = choose_sandbox(security.sandbox)
    except SandboxUnavailable as exc:
        report(False, "sandbox", f'{exc}, or set sandbox = "auto" under [security]')
        return
    unconfined_full = sandbox.kind == "none" and security.autonomy == "full"
    refused = unconfined_full and security.sandbox != "off"
    detail = f"{sandbox.kind} ({sandbox.reason})"
    if refused:
        detail += '; autonomy "full" refuses every command until a sandbox is available'
    report(not refused, "sandbox", detail)
    from tools.mcp.manager import preflight  # each MCP server, not started: `agent mcp list`

    for name, server in settings.mcp.servers.items():
        line = preflight(name, server, sandbox)
        report(not line.startswith("cannot"), f"mcp {name}", line)
    if not approvals:
        return
    workspace = settings.workspace_dir.resolve()
    rules = read_state(settings, lambda conn: read_rules(conn, workspace)) or []
    print(f"note approvals: always allowed: {', '.join(rules) if rules else 'none'}")


def _daemon_line(home: Path) -> str:
    """Whether `agent run` serves this home's socket, so one-shots are warm, and how many of
    its turns wait for a person's approval (they hold no turn slot meanwhile)."""
    from agent.cli.local_client import pong
    from agent.home import socket_path

    said = pong(home)
    pid, asking = said.get("pid"), said.get("asking")
    if not isinstance(pid, int):
        return "note daemon: not running (one-shots start cold)"
    waiting = f"; {asking} approval question(s) waiting for an answer" if asking else ""
    return f"note daemon: running (pid {pid}) on {socket_path(home)}{waiting}"


def _note_queues(settings: Settings) -> None:
    """What a stopped daemon left for its next start (read-only; the daemon may be running)."""
    from agent.durable.file.state_check import queued

    found = read_state(settings, queued)
    if found is None:
        return  # none yet, or an older state.db without the queues
    print(
        f"note queues: {found.waiting} message(s) waiting for an answer, {found.replies} "
        f"repl(ies) waiting to be sent, {found.expired} never delivered"
    )
    fates = found.fates
    print(
        f"note delivery: {fates.get('refused', 0)} part(s) refused by the platform (blocked, "
        f"chat gone), {fates.get('unknown', 0)} possibly lost (sent, no answer, no way to ask)"
    )
