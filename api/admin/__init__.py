"""The admin routes under /v1/admin: the admin command line's operations, for an admin's key.

Routers only translate HTTP: the operations are `ledger/operations/`, shared with
`python -m cluster.admin`, and their JSON documents are the ones `--json` prints.
"""
