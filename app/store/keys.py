"""Row ids made by the app: no store has sequences, since a DuckLake catalog takes none (issue 16).

An id is a hash of the row's natural key, so the same label version has the same id in every store and a
retried insert makes the same id again. Ids stay below 2**53 so JSON answers hold them exactly in JavaScript.
"""

import hashlib
from collections.abc import Callable

ID_BITS = 53  # JavaScript numbers are exact integers up to 2**53
KEY_SEPARATOR = "\x1f"


def natural_id(*parts) -> int:
    """The id of the row whose natural key is `parts`."""
    digest = hashlib.sha256(KEY_SEPARATOR.join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") >> (64 - ID_BITS)


def new_row_id(taken: Callable[[int], bool], *parts) -> int:
    """natural_id of `parts`; in the rare case another row holds it (`taken`), of `parts` and a counter."""
    candidate, attempt = natural_id(*parts), 0
    while taken(candidate):
        attempt += 1
        candidate = natural_id(*parts, attempt)
    return candidate
