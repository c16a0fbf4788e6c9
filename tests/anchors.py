"""Where the published anchors (../shared/anchors) live, and a skip when a checkout lacks them."""

from pathlib import Path

import pytest

ANCHORS = Path(__file__).resolve().parents[2] / "shared" / "anchors"


def anchor(name: str) -> Path:
    """Path of a published anchor file; skips the calling test when the anchors folder is absent."""
    if not ANCHORS.is_dir():
        pytest.skip("../shared/anchors is absent")
    return ANCHORS / name
