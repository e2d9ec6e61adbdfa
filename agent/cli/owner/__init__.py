"""The owner's commands for a running pinclaw: usage, budget, pairing, reload, send."""
