"""Log output on stderr, set up once a command has read the settings.

Without -v a person sees short lines: `agent run`'s own (`pinclaw: telegram connected as
@x_bot`, agent/daemon/status.py) and every warning or error as it happens (`pinclaw: warning:
...`). -v adds the INFO logs, timestamped and named; -vv the debug ones; -q leaves only
errors. Every line is scrubbed of secrets — its message, its traceback — at every level and
whichever logger or handler writes it: the records are scrubbed as they are made. Lines go to
`sys.stderr` as it is when they are written, so a one-shot's spinner, which routes stderr
above itself, keeps them off its line.
"""

from __future__ import annotations

import logging
import sys

from agent.daemon.status import STATUS_LOGGER
from agent.security import ScrubbingFilter
from channels.registry import channel_kinds

# Libraries whose INFO lines show only with -vv: these, and each chat channel's.
NOISY = ("httpx", "openai", "LiteLLM", "litellm", "asyncio", *(k.library for k in channel_kinds()))


class PlainLines(logging.Formatter):
    """`pinclaw: <line>`, a warning or error named as such: no time, no module."""

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        if record.levelno >= logging.ERROR:
            return f"pinclaw: error: {text}"
        if record.levelno >= logging.WARNING:
            return f"pinclaw: warning: {text}"
        return f"pinclaw: {text}"


class ToStderr(logging.Handler):
    """Writes each record to the `sys.stderr` of the moment (not the one at setup)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
            sys.stderr.write(line + "\n")
            sys.stderr.flush()
        except Exception:
            self.handleError(record)


# What a one-shot's own `error:` line already says: the model client's retries and the
# turn's failure. Shown with -v.
SAID_BY_A_ONE_SHOT = ("agent.model.client", "agent.turns.turn")


def quiet_for_one_shot(verbose: int) -> None:
    """A one-shot's failed turn ends with one line naming what to do; without -v nothing else
    says the same thing before it."""
    if not verbose:
        for name in SAID_BY_A_ONE_SHOT:
            logging.getLogger(name).setLevel(logging.CRITICAL)


def setup_logging(verbose: int, quiet: bool, scrub_filter: ScrubbingFilter) -> None:
    handler = ToStderr()
    if verbose:
        handler.setFormatter(
            logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s", "%H:%M:%S")
        )
    else:
        handler.setFormatter(PlainLines("%(message)s"))
    handler.addFilter(scrub_filter)  # reload's learn_secrets finds it here
    scrub_filter.cover_every_record()
    root = logging.getLogger()
    root.handlers[:] = [handler]
    level = logging.DEBUG if verbose > 1 else logging.INFO if verbose else logging.WARNING
    root.setLevel(logging.ERROR if quiet else level)
    logging.getLogger(STATUS_LOGGER).setLevel(logging.ERROR if quiet else min(level, logging.INFO))
    for noisy in NOISY:
        quieter = logging.WARNING if verbose < 2 else logging.INFO
        logging.getLogger(noisy).setLevel(logging.ERROR if quiet else quieter)
