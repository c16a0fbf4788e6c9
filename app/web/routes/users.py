"""JSON API and admin page of accounts: users, roles and API tokens, managed while the server runs."""

from fastapi import APIRouter

router = APIRouter()
