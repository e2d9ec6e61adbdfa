"""`python -m agent.warm`: the warm start process (agent/warm/server.py)."""

import sys

from agent.warm.server import main

sys.exit(main())
