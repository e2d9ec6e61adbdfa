"""The boards: StandardFirmata links (serial, RFC 2217, TCP), the pins as pinclaw knows them,
several boards by name, the pin tools, patterns, safe states, restores and the boards' own
reports; oversight/ holds what watches over their outputs. May import the tools core only."""
