"""The owner's controls at run time: the budget, the metered model, /usage /budget /model,
pairing."""
