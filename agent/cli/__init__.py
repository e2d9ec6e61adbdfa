"""The entry points: the `agent` command, one-shots, the daemon, doctor and `prompt show`.
The top floor: may import anything; heavy modules only inside the command that needs them."""
