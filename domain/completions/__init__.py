"""A Completion: strict validation, the plan, admission (the key's line, the model's place, the Hold),
the run on the model, the assembled answer, and the one rule that settles its Hold."""
