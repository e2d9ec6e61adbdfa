"""The Arduino: one StandardFirmata link, the pins as pinclaw knows them, the pin tools,
patterns, restores and the board's own reports. May import the tools core only."""
