"""LiteLLM, imported once and lazily, offline and blind to stray .env files.

LiteLLM takes seconds to import, so it is imported on the first call that needs it, never
at module import: `agent --help`, `agent init` and config errors stay fast.
"""

from __future__ import annotations

import os
from types import ModuleType

# Read by LiteLLM's import, so set before it wherever it is imported (the warm start's
# preload too): its bundled price map, so the import never goes online; and a mode other than
# its default "DEV", in which the import loads the first .env found above LiteLLM's own
# folder (with README's install, the clone's, or the home folder's) into the environment.
# Such a file, written by a model that can write there, could point a provider's base URL
# at a stranger, and the key would follow it; pinclaw's own variables are agent.env's.
IMPORT_ENV = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_MODE": "PRODUCTION"}


def prepare_litellm_import() -> None:
    """Set IMPORT_ENV's variables the user has not set."""
    for name, value in IMPORT_ENV.items():
        os.environ.setdefault(name, value)


def load_litellm() -> ModuleType:
    """Import LiteLLM as IMPORT_ENV has it."""
    prepare_litellm_import()
    import litellm

    litellm.telemetry = False
    litellm.suppress_debug_info = True
    return litellm
