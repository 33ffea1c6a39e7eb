"""Tokens: allowances, Budgets, Grants, Holds and their leases, usage, the spend and its stop, warm
windows, refusals and the Analytics numbers."""
