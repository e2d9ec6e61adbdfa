"""The shell tool: a command line parsed, every word checked against the policy and the
program rules, what it would change asked of the owner, then run in tools/sandbox. May
import the tools core and tools.sandbox."""
