"""The backup endpoint: DuckDB lets one process open the file, so `orchestrace backup` asks the server that
holds it to write the copy."""

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from app.store import backup
from app.web.apidoc import WRITE_REFUSALS, reply
from app.web.deps import DbDep

router = APIRouter(prefix="/api", tags=["admin"])


class BackupRequest(BaseModel):
    path: str = Field(description="Absolute path of the file to write, on the server's machine.")
    force: bool = Field(False, description="Replace the file if it exists.")


@router.post("/backup", status_code=201, responses=WRITE_REFUSALS | {
    400: reply("the body is not JSON"),
    409: {"description": "the file exists and force is false"},
    422: {"description": "the path is relative, names the database itself, or cannot be written; the store is a "
                         "DuckLake (not one file)"},
    503: {"description": "the database stayed busy; try again"}})
def create_backup(body: BackupRequest, db: DbDep):
    """Write a consistent copy of the database (one DuckDB file, every table) to `path` on the server's
    machine; label saves wait only while the file is copied. Admin-only once accounts exist, since it writes
    a file wherever the server may."""
    path = Path(body.path)
    if not path.is_absolute():
        return JSONResponse({"error": f"path must be absolute, as it is written on the server's machine: "
                                      f"{body.path}"}, status_code=422)
    try:
        return backup.backup(db, path, body.force)
    except backup.BackupError as exc:
        return JSONResponse({"error": str(exc)}, status_code=exc.status)
