"""The harvest link secret of an install that sets none (ACS_HARVEST_LINK_SECRET unset, in
development): random, made at the install's first start, then read from its file by every process
of the install, so each ingress replica signs what the others verify (harvest/links.py).

    secret = local_secret(REPO_ROOT / "var" / "harvest-link-secret")
"""
from __future__ import annotations

import os
import secrets
import tempfile
from pathlib import Path


def local_secret(path: Path) -> str:
    """The secret in `path`, made first where there is none.

    Made whole or not at all, and by one process only: the secret is written to a file of its own
    (0600 from the start, as mkstemp makes it), which is linked to `path` only where `path` is absent.
    A process that loses that race reads the winner's secret.
    """
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, draft = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        try:
            with os.fdopen(fd, "w") as file:
                file.write(secrets.token_hex(32) + "\n")
            try:
                os.link(draft, path)
            except FileExistsError:
                pass
        finally:
            os.unlink(draft)
    secret = path.read_text().strip()
    if not secret:
        raise ValueError(f"{path} holds no harvest link secret: delete it, and the next start makes a new one.")
    return secret
