"""CSV cells a spreadsheet cannot run: one rule for every CSV the app writes and reads.

A cell starting with `=`, `+`, `-`, `@`, tab or carriage return is a formula to Excel, LibreOffice and
Google Sheets (CSV injection, OWASP); written with a leading `'` it is shown as text. A plain number such as
`-0.5` is left as it is, so it stays a number. Cells that already start with `'`s before such a character
get one more, so reading removes exactly the one `'` writing added: export, import, export is byte-identical.
"""

import csv
import io
import re

# Any run of quotes then a formula character: the quotes are escaped too, or reading could not tell
# a cell we neutralised from one that began with a quote.
_FORMULA = re.compile(r"'*[=+\-@\t\r]")
_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _needs_quote(text: str) -> bool:
    return _FORMULA.match(text) is not None and _NUMBER.fullmatch(text) is None


def neutralise(text: str) -> str:
    """The cell as written: `text` with a leading `'` when a spreadsheet would read it as a formula."""
    return "'" + text if _needs_quote(text) else text


def restore(cell: str) -> str:
    """The text of a cell as read: the inverse of `neutralise` (other cells are kept as they are)."""
    return cell[1:] if cell[:1] == "'" and _needs_quote(cell[1:]) else cell


class writer:
    """csv.writer whose text cells are neutralised (numbers and empty cells pass as they are).

    Rows are written with CRLF and then given `lineterminator`: csv.writer quotes a cell holding a
    character of its line terminator only, so with LF lines a cell with a bare CR came out unquoted and
    read back as two rows."""

    def __init__(self, out, lineterminator: str = "\r\n", **fmt):
        self._out, self._end = out, lineterminator
        self._row = io.StringIO()
        self._writer = csv.writer(self._row, lineterminator="\r\n", **fmt)

    def writerow(self, row) -> None:
        self._row.seek(0)
        self._row.truncate()
        self._writer.writerow([neutralise(cell) if isinstance(cell, str) else cell for cell in row])
        self._out.write(self._row.getvalue()[:-2] + self._end)

    def writerows(self, rows) -> None:
        for row in rows:
            self.writerow(row)


class reader:
    """csv.reader whose cells are restored; `line_num` as csv.reader's."""

    def __init__(self, lines, **fmt):
        self._reader = csv.reader(lines, **fmt)

    def __iter__(self):
        return self

    def __next__(self) -> list[str]:
        return [restore(cell) for cell in next(self._reader)]

    @property
    def line_num(self) -> int:
        return self._reader.line_num


def repeated_columns(header: list[str]) -> list[str]:
    """Column names a header gives more than once: reading rows by name would keep only the last such cell.
    Unnamed columns (a spreadsheet's trailing empty ones) are read by no name, so they may repeat."""
    seen, repeated = set(), []
    for name in header:
        if name and name in seen and name not in repeated:
            repeated.append(name)
        seen.add(name)
    return repeated
