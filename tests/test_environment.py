"""The app in the environments its users install it into."""

import subprocess
import sys
import textwrap
from importlib.util import find_spec

import pytest


def test_numpy_without_pandas():
    """A researcher's environment has numpy and often no pandas. The store marks pandas absent (DuckDB would look
    for it at every statement); pyarrow, which looks for pandas once numpy is there, must still work, and `import
    pandas` must fail (and find_spec find nothing) as it would anyway."""
    if find_spec("pandas") is not None:
        pytest.skip("pandas is installed here: the store leaves an installed pandas alone")
    code = textwrap.dedent("""
        import numpy
        import app.store.db
        import duckdb, pyarrow as pa
        assert pa.array([1, 2, 3]).to_pylist() == [1, 2, 3]
        assert pa.table({"n": [1.5]}).column("n").to_pylist() == [1.5]
        assert duckdb.connect().execute("SELECT ? + 1", [41]).fetchone() == (42,)
        import importlib.util
        assert importlib.util.find_spec("pandas") is None  # how libraries ask whether pandas is there
        try:
            import pandas
        except ModuleNotFoundError as exc:
            assert exc.name == "pandas"
        else:
            raise AssertionError("pandas imported")
    """)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
