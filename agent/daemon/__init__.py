"""`agent run`: the daemon serving every channel, its local socket and the ops on it (one-shot,
send, reload), its settings read again while it runs, and the model warm-up. May import
agent.app and below."""
