"""The backup endpoint: DuckDB lets one process open the file, so `orchestrace backup` asks the server that
holds it to write the copy."""

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from app.store import backup
from app.web.access import Admin
from app.web.apidoc import WRITE_REFUSALS, reply
from app.web.deps import DbDep, SettingsDep

router = APIRouter(prefix="/api", tags=["admin"])


class BackupRequest(BaseModel):
    path: str = Field(description="The file to write on the server's machine: a name (or a relative path) in its "
                                  "backup folder (ORCHESTRACE_BACKUP_DIR), or an absolute path inside that folder.")
    force: bool = Field(False, description="Replace the file if it exists (never the database or its log).")


@router.post("/backup", dependencies=[Admin], status_code=201, responses=WRITE_REFUSALS | {
    400: reply("the body is not JSON"),
    409: {"description": "the file exists and force is false"},
    422: {"description": "the path is empty, holds a NUL or another control character, is outside the backup "
                         "folder, names a folder, the database or its write-ahead log, or cannot be written; the "
                         "store is a DuckLake (not one file)"},
    503: {"description": "the database stayed busy; try again"}})
def create_backup(body: BackupRequest, db: DbDep, settings: SettingsDep):
    """Write a consistent copy of the database (one DuckDB file, every table) to `path` in the server's backup
    folder, readable by the server's user only (0600); label saves wait only while the file is copied."""
    try:
        return backup.backup(db, body.path, body.force, backup.folder_of(settings.backup_dir, db.path))
    except backup.BackupError as exc:
        return JSONResponse({"error": str(exc)}, status_code=exc.status)
