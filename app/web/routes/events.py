"""JSON API of one event: its properties, its content and its edges."""

from fastapi import APIRouter

router = APIRouter(prefix="/api", tags=["events"])
