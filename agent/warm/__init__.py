"""The warm start: a process of this installation that has imported what a one-shot needs
and forks a copy of itself for each `agent run -m`, so a cold one-shot (any home, any
settings) skips Python's imports — LiteLLM's above all.

A cold one-shot answered in its own process starts one in the background when it is done
(`spawn.start_warm`); it stays for `agent.warm_start_s` seconds after its last one-shot
(default 600; 0: none is started). The next one-shot's thin side (`client.hand_over`) sends
it the command line, the environment, the working folder and its own standard input, output
and error; the fork runs the one-shot exactly as the cold path would, and its exit status
comes back. Mercurial's chg works this way. `agent doctor` shows a running one; `kill` stops
it.
"""
