"""Headers for files the app hands out."""

from urllib.parse import quote


def attachment(filename: str) -> dict[str, str]:
    """Content-Disposition for a download whose name may hold any character a trace id can (RFC 6266:
    an ASCII fallback, and the exact name percent-encoded in filename*)."""
    fallback = "".join(c if c.isascii() and c.isprintable() and c not in '"\\' else "_" for c in filename)
    return {"Content-Disposition": f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(filename, safe='')}"}
