"""Skills at run time: a SKILL.md's declared tools, and `read_skill`. May import the tools
core and tools.shell."""
