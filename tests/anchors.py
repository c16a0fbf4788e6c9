"""Where the published anchors (../shared/anchors) live, and a skip when a checkout lacks them.

ORCHESTRACE_ANCHORS names another folder: a folder that does not exist runs the suite as a fresh clone would.
"""

import os
from pathlib import Path

import pytest

ANCHORS = Path(os.environ.get("ORCHESTRACE_ANCHORS") or Path(__file__).resolve().parents[2] / "shared" / "anchors")


def anchor(name: str) -> Path:
    """Path of a published anchor file; skips the calling test when the anchors folder is absent."""
    if not ANCHORS.is_dir():
        pytest.skip(f"the published anchors ({ANCHORS}) are absent")
    return ANCHORS / name
