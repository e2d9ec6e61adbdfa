"""LiteLLM, imported once and lazily, with its bundled price map.

LiteLLM takes seconds to import, so it is imported on the first call that needs it, never
at module import: `agent --help`, `agent init` and config errors stay fast.
"""

from __future__ import annotations

import os
from types import ModuleType


def load_litellm() -> ModuleType:
    """Import LiteLLM with its bundled price map, so the import never reaches the network."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.telemetry = False
    litellm.suppress_debug_info = True
    return litellm
