"""Paper pool SQL: the pool and the exclusion log as imported, and reviewers' tag versions."""

from app.domain.taxonomy import EXCLUSION_COLUMNS, PAPER_COLUMNS
from app.store.db import Database
from app.store.models import PaperTag
from app.store.sql import current, execute

TAG_COLUMNS = ", ".join(PaperTag.model_fields)


def key_positions(cur, table: str, key: str) -> dict[str, int]:
    """{key: position} of the paper pool or the exclusion log (`table`), on the cursor of a write."""
    return dict(execute(cur, f"SELECT {key}, position FROM {table}").fetchall())


def paper_exists(cur, key: str) -> bool:
    return execute(cur, "SELECT count(*) FROM papers WHERE key = ?", [key]).fetchone()[0] > 0


def current_tag(cur, key: str, reviewer: str) -> dict | None:
    """A reviewer's current tag version on a paper, on the cursor of a write."""
    row = execute(cur, f"SELECT {TAG_COLUMNS} FROM paper_tags WHERE key = ? AND reviewer = ?{CURRENT_TAG}",
                  [key, reviewer]).fetchone()
    return dict(zip(PaperTag.model_fields, row)) if row else None


def tag_id_taken(cur, tag_id: int) -> bool:
    """Whether a paper tag version holds this id (app/store/keys.py), on the cursor of a write."""
    return execute(cur, "SELECT count(*) FROM paper_tags WHERE tag_id = ?", [tag_id]).fetchone()[0] > 0


PAPER_SORTS = {"key": "key", "title": "title", "first_author": "first_author", "year": "TRY_CAST(year AS INTEGER)",
               "position": "position", "category": "category", "is_rl": "is_rl", "reward_type": "reward_type",
               "credit_granularity": "credit_granularity", "orchestration_form": "orchestration_form",
               "scenario": "scenario", "is_core": "is_core", "verified": "verified"}


PAPER_FILTER = """
    WHERE (len(?::VARCHAR[]) = 0 OR list_contains(?::VARCHAR[], category))
      AND (len(?::VARCHAR[]) = 0 OR list_contains(?::VARCHAR[], is_rl))
      AND (len(?::VARCHAR[]) = 0 OR list_contains(?::VARCHAR[], reward_type))
      AND (len(?::VARCHAR[]) = 0 OR list_contains(?::VARCHAR[], credit_granularity))
      AND (len(?::VARCHAR[]) = 0 OR list_contains(?::VARCHAR[], orchestration_form))
      AND (len(?::VARCHAR[]) = 0 OR list_contains(?::VARCHAR[], scenario))
      AND (len(?::VARCHAR[]) = 0 OR list_contains(?::VARCHAR[], is_core))
      AND (len(?::VARCHAR[]) = 0 OR list_contains(?::VARCHAR[], verified))
      AND (?::VARCHAR IS NULL OR contains(lower(title || ' ' || first_author || ' ' || one_liner || ' ' || notes),
                                          lower(?)))
"""


PAPER_FILTER_FIELDS = ("category", "is_rl", "reward_type", "credit_granularity", "orchestration_form", "scenario",
                       "is_core", "verified")


def list_papers(db: Database, filters: dict[str, list[str]], q: str | None, sort: str = "position",
                limit: int = 25, offset: int = 0) -> tuple[list[dict], int]:
    """One page of the pool matching multi-value filters per controlled field and free text."""
    params = [v for field in PAPER_FILTER_FIELDS for v in (filters.get(field, []),) * 2] + [q or None, q or None]
    descending = sort.startswith("-")
    order = PAPER_SORTS.get(sort.lstrip("-"), "position")
    page = f"SELECT * FROM papers{PAPER_FILTER}ORDER BY {order} {'DESC' if descending else 'ASC'} NULLS LAST, " \
        "position LIMIT ? OFFSET ?"
    total, rows = db.together(lambda: db.scalar("SELECT count(*) FROM papers" + PAPER_FILTER, params),
                              lambda: db.fetchall(page, params + [limit, offset]))  # side by side on a lake
    return rows, total


def read_paper(db: Database, key: str) -> dict | None:
    return db.fetchone("SELECT * FROM papers WHERE key = ?", [key])


def list_excluded(db: Database, stage=None, source=None, query_family=None) -> list[dict]:
    return db.fetchall(
        "SELECT * FROM excluded WHERE (?::VARCHAR IS NULL OR stage = ?) AND (?::VARCHAR IS NULL OR source = ?) "
        "AND (?::VARCHAR IS NULL OR query_family = ?) ORDER BY position",
        [stage or None, stage or None, source or None, source or None, query_family or None, query_family or None])


def excluded_facets(db: Database) -> dict[str, list[str]]:
    return {column: [r["v"] for r in db.fetchall(f"SELECT DISTINCT {column} AS v FROM excluded ORDER BY v")]
            for column in ("stage", "source", "query_family")}


# A reviewer's current tags on a paper: their highest version (the rule labels follow too, app/store/sql.py).
CURRENT_TAG = current("key", "reviewer")


def tag_versions(db: Database, key: str | None = None, reviewer: str | None = None,
                 history: bool = True) -> list[dict]:
    """Tag versions (or each reviewer's current one) of a paper and/or a reviewer, by paper, reviewer, version."""
    return db.fetchall(
        f"SELECT {TAG_COLUMNS} FROM paper_tags WHERE ($key::VARCHAR IS NULL OR key = $key) "
        f"AND ($reviewer::VARCHAR IS NULL OR reviewer = $reviewer){'' if history else CURRENT_TAG} "
        "ORDER BY key, reviewer, version", {"key": key, "reviewer": reviewer})


def taggers(db: Database) -> list[str]:
    """Reviewers who tagged any paper."""
    return [row[0] for row in db.execute("SELECT DISTINCT reviewer FROM paper_tags ORDER BY reviewer").fetchall()]


def pool_rows(db: Database) -> list[dict]:
    """Every paper in import order, cells as imported."""
    return db.fetchall("SELECT " + ", ".join(PAPER_COLUMNS) + " FROM papers ORDER BY position")


def excluded_rows(db: Database) -> list[dict]:
    """The exclusion log in import order."""
    return db.fetchall("SELECT " + ", ".join(EXCLUSION_COLUMNS) + " FROM excluded ORDER BY position")


def pool_size(db: Database) -> int:
    return db.scalar("SELECT count(*) FROM papers")
