"""What a Loom's streams are told on its topic (`loom:<loom_id>`, domain/feeds), and by whom.

- `TextSoFar`: a running Node's whole text so far, under its attempt. The Runner publishes it
  as each output comes, before the text is written (domain/looms/growing.py writes it at
  most every 100 ms), and when the attempt starts (no text yet).
- `CHANGED`: read the Loom again. Published once a change has committed: a Node's end with
  its work row (domain/looms/handler.py), a Branch, a stop, a delete, an edit
  (domain/looms/service.py). A stream that hears it reads the ledger, which holds it.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass

from domain.feeds import Message, topic

CHANGED: Message = {"changed": True}


def loom_topic(loom_id: uuid.UUID) -> str:
    return topic("loom", loom_id)


@dataclass(frozen=True)
class TextSoFar:
    """A running Node's text so far, under `attempt` (the Node's work row's attempt)."""

    node_id: uuid.UUID
    attempt: int
    text: str

    def message(self) -> Message:
        return {"node_id": str(self.node_id), "attempt": self.attempt, "text": self.text}


def read_news(message: Message) -> TextSoFar | None:
    """The Node's growth that `message` tells, or None: read the Loom again (CHANGED, or a
    message this stream does not know)."""
    try:
        return TextSoFar(uuid.UUID(message["node_id"]), int(message["attempt"]), str(message["text"]))
    except (KeyError, TypeError, ValueError):
        return None
