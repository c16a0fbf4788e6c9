"""What every importer shares: its result, its refusal, and private content references."""

import hashlib
from dataclasses import dataclass, field


@dataclass
class ImportResult:
    """Orchestration traces made from one source document, and what could not be mapped."""

    traces: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


class ImportFailed(ValueError):
    """A source document that cannot be imported at all; the message names the line or span."""


def content_ref(content) -> str:
    """A stable hash of message or tool content: deployment traces carry user data, kept out by default."""
    text = content if isinstance(content, str) else repr(content)
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
