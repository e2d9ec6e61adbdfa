"""The checks `agent init` makes before it writes anything down: one tiny model call (the
runtime's own LLMClient, no retries, a short limit), a bot token asked who it belongs to
(Telegram's getMe, Discord's GET /users/@me: one plain HTTP call each, to the base URL the
channel settings name, so tests point them at the fakes), the models a local server
serves, and the serial ports a board may be on. Each answer is one line for the person at
the terminal, with every secret scrubbed out of it."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from agent import __version__

HOSTED_CHECK_S = 30.0  # a hosted model answers a five-word request well within this
LOCAL_CHECK_S = 120.0  # a local server may first load the model from disk
TOKEN_CHECK_S = 10.0
LIST_MODELS_S = 3.0
CHECK_PROMPT = "Reply with the word: ready"
# What the bot needs in a server: view channels, send messages, add reactions, attach files,
# read message history (the invite link asks for these and nothing else).
DISCORD_PERMISSIONS = 1024 | 2048 | 64 | 32768 | 65536
_USER_AGENT = f"DiscordBot (https://github.com/pinclaw/pinclaw, {__version__})"


@dataclass(frozen=True)
class Check:
    ok: bool
    line: str  # what the person is told, secrets scrubbed
    refused: bool = False  # the key or token itself was refused (not an outage)


def check_model(model: str, api_base: str, key: str | None, *, local: bool) -> Check:
    """One request to the model as `agent run` would send it (its LLMSettings), with no
    retries and a short limit; a refused key says so, without the provider's text (which
    may echo part of the key)."""
    import asyncio
    import logging

    from pydantic import SecretStr

    from agent.config import LLMSettings
    from agent.model.client import LLMClient
    from agent.model.responses import LLMError

    limit = LOCAL_CHECK_S if local else HOSTED_CHECK_S
    settings = LLMSettings(
        model=model,
        api_base=api_base,
        api_key=SecretStr(key) if key else None,
        num_retries=0,
        timeout_s=limit,
        first_token_timeout_s=limit,
    )
    started = time.monotonic()
    logging.disable(logging.CRITICAL)  # LiteLLM's and the client's warnings: the line says it
    try:
        reply = asyncio.run(
            LLMClient(settings).complete([{"role": "user", "content": CHECK_PROMPT}])
        )
    except LLMError as exc:
        if exc.status in (401, 403):
            return Check(False, f"the key was refused (HTTP {exc.status})", refused=True)
        if exc.status == 404:
            return Check(False, f"{model} is not known there (HTTP 404): check its name")
        return Check(False, _one_line(str(exc), key))
    except TimeoutError:
        return Check(False, f"no answer within {limit:.0f} s")
    finally:
        logging.disable(logging.NOTSET)
    took = time.monotonic() - started
    said = repr(reply.content.strip()[:40]) if reply.content.strip() else "an empty reply"
    return Check(True, f"{model} answered {said} in {took:.1f} s")


def check_telegram(token: str, api_base: str) -> Check:
    """getMe: whose token this is (a wrong one is refused with 401, a mangled one 404)."""
    status, body, reason = _get_json(f"{api_base}{token}/getMe", {})
    result = body.get("result") if isinstance(body.get("result"), dict) else None
    if status == 200 and body.get("ok") and result is not None:
        name = str(result.get("username") or result.get("first_name") or "?")
        return Check(True, f"the token is @{name}'s; talk to it at https://t.me/{name}")
    if status in (401, 404):
        return Check(False, f"the token was refused (HTTP {status})", refused=True)
    return Check(False, _one_line(f"Telegram did not answer: {reason}", token))


def check_discord(token: str, api_base: str) -> Check:
    """GET /users/@me as the bot: its name and id, and the link that invites it."""
    headers = {"Authorization": f"Bot {token}", "User-Agent": _USER_AGENT}
    status, body, reason = _get_json(f"{api_base.rstrip('/')}/users/@me", headers)
    if status == 200 and body.get("id"):
        bot_id, name = str(body["id"]), str(body.get("username") or "?")
        invite = (
            f"https://discord.com/oauth2/authorize?client_id={bot_id}&scope=bot"
            f"&permissions={DISCORD_PERMISSIONS}"
        )
        return Check(True, f"the token is {name}'s (id {bot_id}); invite it: {invite}")
    if status in (401, 403):
        return Check(False, f"the token was refused (HTTP {status})", refused=True)
    return Check(False, _one_line(f"Discord did not answer: {reason}", token))


def served_models(api_base: str, *, ollama: bool) -> list[str]:
    """The models a local server offers (Ollama's /api/tags, else the OpenAI-style /models),
    for the question's default; [] when it does not answer quickly."""
    base = api_base.rstrip("/")
    if ollama:
        _, body, _ = _get_json(f"{base}/api/tags", {}, LIST_MODELS_S)
        found = body.get("models")
        key = "name"
    else:
        _, body, _ = _get_json(f"{base}/models", {}, LIST_MODELS_S)
        found = body.get("data")
        key = "id"
    if not isinstance(found, list):
        return []
    return [str(item[key]) for item in found if isinstance(item, dict) and item.get(key)]


def serial_ports() -> list[tuple[str, str]]:
    """(device, description) of each serial port, the likely boards (USB, ACM, "Arduino")
    first; [] without pyserial."""
    try:
        from serial.tools import list_ports
    except ImportError:
        return []
    ports = [(str(p.device), str(p.description or "")) for p in list_ports.comports()]

    def unlikely(port: tuple[str, str]) -> tuple[bool, str]:
        device, description = port
        hints = ("ACM", "USB", "usbserial", "usbmodem", "Arduino")
        return (not any(hint in device or hint in description for hint in hints), device)

    return sorted(ports, key=unlikely)


def _get_json(
    url: str, headers: dict[str, str], timeout: float = TOKEN_CHECK_S
) -> tuple[int | None, dict[str, Any], str]:
    """(HTTP status, JSON object body, reason); status None when nothing answered. Never
    raises: a check reports, it does not stop the questions."""
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, _json_object(response.read()), ""
    except urllib.error.HTTPError as exc:
        return exc.code, _json_object(exc.read()), str(exc.reason)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return None, {}, str(getattr(exc, "reason", exc))


def _json_object(data: bytes) -> dict[str, Any]:
    try:
        found = json.loads(data)
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def _one_line(text: str, *secrets: str | None) -> str:
    """An error as one short line, with the secrets this check used (and any other the
    scrubber knows the shape of) taken out."""
    from agent.security import Scrubber

    scrub = Scrubber.from_environment(extra=[secret for secret in secrets if secret])
    line = " ".join(scrub(text).split())
    return line if len(line) <= 240 else line[:239] + "…"
