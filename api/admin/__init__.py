"""The admin routes under /v1/admin: the admin command line's operations, for an admin's key.

Routers only translate HTTP: the use cases are `domain/admin/`, over the operations of
`domain/operations/` that `python -m cluster.admin` shares, and their JSON documents are the ones `--json` prints.
"""
