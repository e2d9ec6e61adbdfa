"""`agent doctor`'s checks of what a person sets by hand — the bot tokens, the model's name,
its key and server, the home's modes — each failure with its fix in the same line: the
mistakes of a first hour that otherwise show up as a call failing minutes later.
"""

from __future__ import annotations

import asyncio
import os
import pwd
import stat
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from agent.cli.user_errors import cannot_write_line, write_denied
from agent.config import LLMSettings, Settings
from agent.home import ENV_FILE_NAME, PRIVATE_FILES, STATE_DB_NAME
from agent.model.keys import PROVIDER_KEYS, SETTING, check_key, placed, unroutable_line
from agent.model.profiles.routes import Unroutable, missing_keys, route
from channels.kind import ChannelKind
from channels.registry import channel_kinds

Report = Callable[[bool, str, str], None]

PROBE_TIMEOUT_S = 2.0


def token_problem(kind: ChannelKind, token: str) -> str | None:
    """What is wrong with a bot token's shape, and the fix, told without showing the token."""
    shape = kind.token
    if shape is None or shape.pattern.fullmatch(token):
        return None
    pasted = shape.scheme and token.startswith(shape.scheme)
    hint = f" (drop the {shape.scheme.strip()!r} in front)" if pasted else ""
    return f"the token is not {shape.described}{hint}; {shape.fix} into {kind.token_variable}"


def report_channels(settings: Settings, report: Report) -> None:
    for kind in channel_kinds():
        name, channel = kind.name, settings.channels.section(kind.name)
        if channel is None or not channel.enabled:
            continue
        if kind.token is None:
            report(True, name, "enabled")
        elif channel.bot_token is None:
            report(False, name, f"enabled; set {kind.token_variable}")
        elif problem := token_problem(kind, channel.bot_token.get_secret_value()):
            report(False, name, f"enabled, but {problem}")
        else:
            report(True, name, "enabled, token present")
        if not channel.allowed_users:
            print(f"note {name}: allowed_users is empty, so nobody can talk to the bot")
        owners = [person for person in settings.people.values() if person.owner]
        if not any(person.id_on(name) for person in owners):
            print(
                f"note {name}: no owner in [people] (owner = true, {name} = your id), so a "
                "question asked after untrusted content (a web page, someone else's file) is "
                "answered in its chat by any allowed person, not by you alone"
            )


async def report_model(settings: Settings, report: Report) -> None:
    """The name LiteLLM must route, the key its provider needs (or does not), and whether
    the server at llm.api_base answers at all."""
    llm = settings.llm
    if not llm.model:
        report(False, "model", "not set; set PINCLAW_LLM__MODEL (e.g. openai/gpt-4o-mini)")
        return
    try:
        provider, address = route(llm.model, llm.api_base)
    except Unroutable:
        report(False, "model", unroutable_line(llm.model))
        return
    report(True, "model", f"{llm.model} ({provider} at {address})")
    key = check_key(llm, provider)
    env_file = str(settings.home / ENV_FILE_NAME)
    if key.problem is None and key.detail.startswith("not checked"):
        missing = missing_keys(llm.model)
        if missing:
            needs = f"LiteLLM expects {', '.join(missing)} for {provider}: set them"
            report(False, "api key", f"{needs} in your shell or in {env_file}")
        else:
            print(f"note api key: {key.detail}")
    else:
        report(
            key.problem is None,
            "api key",
            placed(key.problem, env_file) if key.problem else key.detail,
        )
    if llm.api_base:
        ok, detail = await asyncio.to_thread(probe_api_base, llm, provider)
        report(ok, "api base", detail)


def probe_api_base(llm: LLMSettings, provider: str) -> tuple[bool, str]:
    """One GET of `<api_base>/models` (any HTTP answer means a server listens there)."""
    url = llm.api_base.rstrip("/") + "/models"
    key = llm.api_key.get_secret_value() if llm.api_key is not None else None
    key = key or os.environ.get(PROVIDER_KEYS.get(provider, ""), "")
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        with urllib.request.urlopen(
            urllib.request.Request(url, headers=headers), timeout=PROBE_TIMEOUT_S
        ) as answer:
            status = int(answer.status)
    except urllib.error.HTTPError as exc:
        status = exc.code
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        return False, (
            f"{llm.api_base} does not answer ({reason}); start its server or correct llm.api_base"
        )
    if status in (401, 403):
        return False, f"{url} refused the key (HTTP {status}); check {SETTING}"
    return True, f"{llm.api_base} answers (HTTP {status} for /models)"


def report_home(home: Path, report: Report) -> str | None:
    """The home must be writable (else nothing can be kept: the problem is returned) and
    the owner's alone: 0700, its private files 0600 and the owner's."""
    denied = write_denied(home / STATE_DB_NAME)
    line = None if denied is None else cannot_write_line(denied, home)
    if line is not None:
        report(False, "home", line.removeprefix("error: "))
        return line
    real = home.resolve()
    found = [_loose(real, real)] + [_loose(real / name, real) for name in PRIVATE_FILES]
    loose = [problem for problem in found if problem]
    if loose:
        you = _user_name()
        fix = f"give them back: sudo chown -R {you} {real} (pinclaw then keeps them 0700 and 0600)"
        report(False, "home", f"{'; '.join(loose)}; {fix}")
    else:
        report(True, "home", f"{home} (0700, its private files 0600, all yours)")
    return None


def _loose(path: Path, home: Path) -> str | None:
    """What makes `path` more than its owner's: its mode or its owner (None: nothing)."""
    try:
        found = path.lstat()
    except OSError:
        return None
    if stat.S_ISLNK(found.st_mode):
        return None  # its target is not the home's (secure_home leaves it alone too)
    name = "the home" if path == home else path.name
    if found.st_uid != os.geteuid():
        return f"{name} belongs to uid {found.st_uid}, not you"
    mode = stat.S_IMODE(found.st_mode)
    return f"{name} is {mode:04o}" if mode & 0o077 else None


def _user_name() -> str:
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:  # a uid with no name (a container's)
        return str(os.geteuid())
