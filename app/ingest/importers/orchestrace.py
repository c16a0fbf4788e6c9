"""Our own trace format, in the registry of formats: what no importer recognises is read as it, and validated."""

from app.ingest.documents import parse_documents
from app.ingest.importers.common import Batch, ContentPolicy, Format, ImportResult


def _convert(batch: Batch, content_policy: ContentPolicy) -> ImportResult:
    """Each document's traces as sent (parsed already where they were read for detection)."""
    result = ImportResult()
    for upload, records in batch.documents:
        result.traces += records if records is not None else parse_documents(upload.data, upload.source,
                                                                              batch.max_bytes)
    return result


FORMAT = Format("orchestrace", "Orchestrace's own trace format (docs/format.md): stored as sent, once valid",
                lambda records: True, _convert, 99, parsed=False)
