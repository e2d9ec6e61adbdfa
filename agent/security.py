"""Secret scrubbing: tool output, replies, streams, stored turns and logs never carry a key.

Two nets: the values of the secrets this process knows (configured SecretStr values and
credential-looking environment variables) — also when a model or a command splits them with
whitespace, one character per line —, and patterns of well-known key formats.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

REDACTED = "[REDACTED]"
_MIN_SECRET_LEN = 8
# Between two characters of a known secret, this much whitespace still counts as the secret.
_SPLIT = r"\s{0,4}"
_LAST_WORD = re.compile(r"\S*\Z")
_SECRET_ENV_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)", re.I)
_PATTERNS = re.compile(
    "|".join(
        (
            r"sk-(?:proj-|ant-)?[A-Za-z0-9_\-]{16,}",  # OpenAI / Anthropic
            r"gh[pousr]_[A-Za-z0-9]{30,}",  # GitHub
            r"xox[abpr]-[A-Za-z0-9\-]{10,}",  # Slack
            r"AKIA[0-9A-Z]{16}",  # AWS access key id
            r"AIza[0-9A-Za-z_\-]{30,}",  # Google
            # Telegram bot token; also in a URL's /bot<token>/, where no \b comes before it
            r"(?<!\d)\d{6,12}:[A-Za-z0-9_\-]{30,}\b",
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----",
        )
    )
)


class Scrubber:
    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._know(secrets)

    def _know(self, secrets: Iterable[str]) -> None:
        # Longest first, so a secret that contains another is replaced whole.
        values = sorted({s for s in secrets if len(s) >= _MIN_SECRET_LEN}, key=len, reverse=True)
        self._values = tuple(values)
        self._split = (
            re.compile("|".join(_SPLIT.join(re.escape(char) for char in value) for value in values))
            if values
            else None
        )
        # A known secret whose beginning ends the text (maybe split by whitespace).
        self._started = (
            re.compile("|".join(f"(?:{_prefix_pattern(value)})\\Z" for value in values))
            if values
            else None
        )
        self._reach = max([64, *(len(value) * 5 for value in values)])

    @classmethod
    def from_environment(
        cls, extra: Iterable[str] = (), environ: Mapping[str, str] | None = None
    ) -> Scrubber:
        env = os.environ if environ is None else environ
        found = [value for name, value in env.items() if _SECRET_ENV_NAME.search(name)]
        return cls([*found, *extra])

    def learn(self, other: Scrubber) -> None:
        """Scrub `other`'s secrets too from now on (a key a reload brought); none is
        forgotten, so what an earlier key left in a running turn's text stays covered."""
        self._know([*self._values, *other._values])

    def __call__(self, text: str) -> str:
        if self._split is not None:
            text = self._split.sub(REDACTED, text)
        return _PATTERNS.sub(REDACTED, text)

    def safe_length(self, text: str) -> int:
        """How much of scrubbed `text` can be shown while more is still coming: not the last
        partial word, not the beginning of a known secret, not an unfinished key block."""
        word = _LAST_WORD.search(text)
        cut = word.start() if word else len(text)
        if self._started is not None:
            started = self._started.search(text, max(0, len(text) - self._reach))
            if started:
                cut = min(cut, started.start())
        block = text.rfind("-----BEGIN")
        if block >= 0 and "-----END" not in text[block:]:
            cut = min(cut, block)
        return cut


def _prefix_pattern(value: str) -> str:
    """Matches any beginning of `value` (at least its first character), whitespace allowed
    between characters: a(?:\\s*b(?:\\s*c)?)?"""
    pattern = ""
    for char in reversed(value[1:]):
        pattern = f"(?:{_SPLIT}{re.escape(char)}{pattern})?"
    return re.escape(value[0]) + pattern


class ScrubbedStream:
    """Deltas of a streamed reply, passed on only once they are scrubbed: the text so far is
    scrubbed whole, and what could still turn out to be a secret is held back until it is
    complete, so a secret that arrives in pieces is never shown in part."""

    def __init__(self, push: Callable[[str], None], scrub: Scrubber) -> None:
        self._push = push
        self._scrub = scrub
        self._raw = ""
        self._shown = ""

    def __call__(self, delta: str) -> None:
        self._raw += delta
        scrubbed = self._scrub(self._raw)
        safe = scrubbed[: self._scrub.safe_length(scrubbed)]
        if len(safe) > len(self._shown) and safe.startswith(self._shown):
            self._push(safe[len(self._shown) :])
            self._shown = safe


class ScrubbingFilter(logging.Filter):
    """Applied to log handlers, and to every record as it is made (`cover_every_record`): a
    secret in a log message, its arguments, its traceback or its stack is redacted."""

    def __init__(self, scrub: Scrubber) -> None:
        super().__init__()
        self._scrub = scrub

    def learn(self, other: Scrubber) -> None:
        self._scrub.learn(other)

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # arguments that do not fit: logging's handler says so, scrubbed
            message = f"{record.msg} {record.args!r}"
        record.msg = self._scrub(message)
        record.args = None
        if record.exc_info and not record.exc_text:
            # Formatters use exc_text once it is set: an exception's words (a URL holding
            # /bot<token>/, a provider's echo of a key) are scrubbed like the message.
            record.exc_text = _TRACEBACKS.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self._scrub(record.exc_text)
        if record.stack_info:
            record.stack_info = self._scrub(record.stack_info)
        return True

    def cover_every_record(self) -> None:
        """Scrub every log record when it is made, whichever logger makes it and whichever
        handler writes it: a library's own handler (LiteLLM adds one to its logger) or one
        added later has no filter of ours. Once per process: a second call replaces the
        filter rather than wrapping the factory again."""
        current = logging.getLogRecordFactory()
        if isinstance(current, _ScrubbedRecords):
            current.scrub_filter = self
        else:
            logging.setLogRecordFactory(_ScrubbedRecords(current, self))


_TRACEBACKS = logging.Formatter()


class _ScrubbedRecords:
    """A log record factory: the records of `made`, scrubbed by `scrub_filter`."""

    def __init__(self, made: Callable[..., logging.LogRecord], scrub_filter: ScrubbingFilter):
        self.made = made
        self.scrub_filter = scrub_filter

    def __call__(self, *args: Any, **kwargs: Any) -> logging.LogRecord:
        record = self.made(*args, **kwargs)
        self.scrub_filter.filter(record)
        return record


def scrub_message(message: dict[str, Any], scrub: Callable[[str], str]) -> dict[str, Any]:
    """A chat message with its text and its tool calls' arguments scrubbed, for storage."""
    clean = dict(message)
    if isinstance(clean.get("content"), str):
        clean["content"] = scrub(clean["content"])
    if clean.get("tool_calls"):
        clean["tool_calls"] = [_scrub_call(call, scrub) for call in clean["tool_calls"]]
    return clean


def _scrub_call(call: dict[str, Any], scrub: Callable[[str], str]) -> dict[str, Any]:
    function = dict(call.get("function") or {})
    if isinstance(function.get("arguments"), str):
        function["arguments"] = scrub(function["arguments"])
    return {**call, "function": function}
