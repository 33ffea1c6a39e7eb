"""The admin's operations: one service layer for the command line and the admin routes.

Each function takes a session and plain arguments (ids, numbers, texts that
`arguments` read) and returns data; `documents` turns that data into the JSON
that `--json` prints and the routes answer, so both say the same thing.
`cluster/admin_cli/commands.py` parses a command line and prints; `domain/admin/` opens the admin
routes' transactions around them, and `api/admin/` reads HTTP.
What they take from the settings and the catalog comes in a `Platform`.
"""
