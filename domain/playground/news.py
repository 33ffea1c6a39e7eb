"""What the streams that follow a Run are told on its topic (`run:<run_id>`, domain/feeds), and by whom.

- `TextsSoFar`: a running Run's text of each choice so far, under its attempt. The Runner
  publishes it as each output comes, before the Run is written (domain/playground/growing.py
  writes it at most every 100 ms).
- `CHANGED`: read the Run again. Published once a change has committed: a Run's start and its
  end with its work row (domain/playground/handler.py), a stop, a delete
  (domain/playground/service.py). A stream that hears it reads the ledger, which holds it.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass

from domain.feeds import Feed, Message, topic

CHANGED: Message = {"changed": True}


def run_topic(run_id: uuid.UUID) -> str:
    return topic("run", run_id)


async def tell_changed(feed: Feed, run_ids: list[uuid.UUID]) -> None:
    """After a change has committed: each Run's streams read it again."""
    for run_id in run_ids:
        await feed.publish(run_topic(run_id), CHANGED)


@dataclass(frozen=True)
class TextsSoFar:
    """A running Run's texts so far, one for each choice by its index, under `attempt` (the
    Run's work row's attempt)."""

    run_id: uuid.UUID
    attempt: int
    texts: tuple[str, ...]

    def message(self) -> Message:
        return {"run_id": str(self.run_id), "attempt": self.attempt, "texts": list(self.texts)}


def read_news(message: Message) -> TextsSoFar | None:
    """The Run's growth that `message` tells, or None: read the Run again (CHANGED, or a message
    this stream does not know)."""
    try:
        texts = message["texts"]
        if not isinstance(texts, list) or not all(isinstance(text, str) for text in texts):
            return None
        return TextsSoFar(uuid.UUID(message["run_id"]), int(message["attempt"]), tuple(texts))
    except (KeyError, TypeError, ValueError):
        return None
