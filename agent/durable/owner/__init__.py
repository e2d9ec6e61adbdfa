"""The owner's controls' tables: usage, budget limits, each chat's model, pairing."""
