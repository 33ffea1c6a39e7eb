"""The Content-Security-Policy of the App's pages, made from the shell itself.

Only the App's own files run and load ('self'); the one inline script (the
import map) runs because its sha256 is in script-src. The hashes are computed
from the same shell text that the pages serve, once at startup, so a change to
an inline script changes its hash with it and the two never drift.
"""
from __future__ import annotations

import base64
import hashlib
import re

# A <script> without src: its text is what the browser hashes, byte for byte.
INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)[^>]*>(.*?)</script>", re.S)
PLACEHOLDER = "{{"


def inline_scripts(html: str) -> list[str]:
    return INLINE_SCRIPT.findall(html)


def sha256_source(script: str) -> str:
    """The CSP source expression that lets exactly this script run."""
    digest = hashlib.sha256(script.encode("utf-8")).digest()
    return f"'sha256-{base64.b64encode(digest).decode('ascii')}'"


def page_policy(shell: str) -> str:
    """The policy for the shell template; refuses a placeholder inside an inline script,
    whose text (and hash) would then change with each request."""
    scripts = inline_scripts(shell)
    if any(PLACEHOLDER in script for script in scripts):
        raise ValueError("an inline script of the App's shell holds a placeholder: its hash would drift")
    hashes = " ".join(sha256_source(script) for script in scripts)
    return "; ".join([
        "default-src 'self'",
        f"script-src 'self' {hashes}".rstrip(),
        "style-src 'self'",
        "object-src 'none'",
        "base-uri 'self'",  # the shell's <base href> is the App's own root
        "form-action 'self'",
        "frame-ancestors 'none'",
    ])
