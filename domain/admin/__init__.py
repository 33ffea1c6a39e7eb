"""What an admin does over the admin routes (/v1/admin): each use case opens its transaction, calls the
operations that the command line shares (`domain/operations/`) and returns the JSON document that
`--json` prints. Reads take `services.sessions()`; changes take `services.ledger.write_sessions()`,
which on SQLite take the write lock at BEGIN, as the money changes need.
"""
