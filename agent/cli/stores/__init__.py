"""Commands over what pinclaw keeps in its home: memories, schedules, state.db, the
actuation log."""
