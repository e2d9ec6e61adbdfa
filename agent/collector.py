"""The cyclic garbage collector, held off while a command starts.

Importing LiteLLM and the OpenAI SDK makes some 2,500 pydantic classes and hundreds of
thousands of objects, none of them garbage, and the collector (run every 700 new objects)
walks them again and again: over a quarter of a cold one-shot's CPU time (2.49 s of CPU
with it, 1.78 s without, here). So `agent` starts with the collector off; a command that
runs on once it has started (the daemon, `agent chat`, a one-shot's turn) releases it:
what start-up made is frozen, never walked again as it lives as long as the process, and
the collector runs as usual on what comes after. A short command simply ends first.
"""

from __future__ import annotations

import gc


def hold() -> None:
    gc.disable()


def release() -> None:
    """Freeze what exists and turn the collector back on (a second call changes nothing
    that matters: the frozen set only grows)."""
    gc.freeze()
    gc.enable()
