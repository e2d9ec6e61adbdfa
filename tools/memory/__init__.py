"""Long-term memory: the memories table, its full-text and vector search, and the memory
tools. May import the tools core only."""
