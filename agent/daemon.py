"""`agent run` without -m: every enabled channel in one asyncio process."""

from __future__ import annotations

import logging

from agent.config import Settings

log = logging.getLogger(__name__)


async def serve(settings: Settings) -> int:
    enabled = [name for name in ("telegram", "discord") if getattr(settings.channels, name).enabled]
    if not enabled:
        log.error(
            "no channel is enabled: set [channels.telegram] enabled = true (or discord), "
            'or use `agent run -m "..."` for one message'
        )
        return 2
    log.error("channels are not available in this build yet: %s", ", ".join(enabled))
    return 2
