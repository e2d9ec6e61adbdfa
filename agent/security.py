"""Secret scrubbing: tool output, replies and logs never carry a key or token.

Two nets: the exact values of the secrets this process knows (configured SecretStr values
and credential-looking environment variables), and patterns of well-known key formats.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Mapping

REDACTED = "[REDACTED]"
_MIN_SECRET_LEN = 8
_SECRET_ENV_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)", re.I)
_PATTERNS = re.compile(
    "|".join(
        (
            r"sk-(?:proj-|ant-)?[A-Za-z0-9_\-]{16,}",  # OpenAI / Anthropic
            r"gh[pousr]_[A-Za-z0-9]{30,}",  # GitHub
            r"xox[abpr]-[A-Za-z0-9\-]{10,}",  # Slack
            r"AKIA[0-9A-Z]{16}",  # AWS access key id
            r"AIza[0-9A-Za-z_\-]{30,}",  # Google
            r"\b\d{6,12}:[A-Za-z0-9_\-]{30,}\b",  # Telegram bot token
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----",
        )
    )
)


class Scrubber:
    def __init__(self, secrets: Iterable[str] = ()) -> None:
        # Longest first, so a secret that contains another is replaced whole.
        values = {s for s in secrets if len(s) >= _MIN_SECRET_LEN}
        self._values = sorted(values, key=len, reverse=True)

    @classmethod
    def from_environment(
        cls, extra: Iterable[str] = (), environ: Mapping[str, str] | None = None
    ) -> Scrubber:
        env = os.environ if environ is None else environ
        found = [value for name, value in env.items() if _SECRET_ENV_NAME.search(name)]
        return cls([*found, *extra])

    def __call__(self, text: str) -> str:
        for value in self._values:
            if value in text:
                text = text.replace(value, REDACTED)
        return _PATTERNS.sub(REDACTED, text)


class ScrubbingFilter(logging.Filter):
    """Applied to log handlers: a secret in a log message or its arguments is redacted."""

    def __init__(self, scrub: Scrubber) -> None:
        super().__init__()
        self._scrub = scrub

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = self._scrub(record.getMessage())
        record.args = None
        return True
