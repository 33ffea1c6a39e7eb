"""The admin command line's commands (`python -m cluster.admin ...`): `commands` parses and prints,
over the operations of `domain/operations/`."""
