"""`orchestrace ingest` of a folder of rollout files (issue 30): a training run writes each rollout to a file of its
own. N generated rollouts (6 agents, 37 events, as benchmarks/corpus.py makes them) are written one file each, then
ingested by the command into a fresh DuckDB file, and through a real server (`orchestrace serve`) holding another
fresh file, each REPEAT times.

The command stores many files' traces in one write (into a store), and posts many files in one request (through a
server). For reference in the same run, the command posting each file in a request of its own, as it did before
(`--one-by-one`, off by default: at N=2,000 it takes about two minutes a run).

Run with `.venv/bin/python benchmarks/cli_ingest.py [--n 2000] [--repeat 3] [--one-by-one]`. Prints medians with
their range; asserts nothing.
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.corpus import rollouts  # noqa: E402
from benchmarks.ingest import start_server  # noqa: E402

# The command with every file posted alone (what it did before it grouped them): the grouping's byte bound at 0.
ALONE = "import sys; from app import cli; cli.POSTED_TOGETHER_BYTES = 0; sys.exit(cli.main(sys.argv[1:]))"


def ingest(folder: Path, *where: str, alone: bool = False) -> float:
    """Seconds the command takes to ingest the folder (its start included)."""
    command = [sys.executable, "-c", ALONE] if alone else [sys.executable, "-m", "app.cli"]
    start = time.perf_counter()
    done = subprocess.run([*command, "ingest", *where, str(folder)], cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"orchestrace ingest failed: {done.stdout}{done.stderr}")
    return time.perf_counter() - start


def served(folder: Path, db: Path, alone: bool = False) -> float:
    """Seconds to ingest the folder through a server over a fresh file (each file in a request of its own when
    `alone`)."""
    proc, url = start_server(db)
    try:
        return ingest(folder, "--server", url, alone=alone)
    finally:
        proc.terminate()
        proc.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=2000, help="rollout files")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--one-by-one", action="store_true", help="also post each file in a request of its own")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "rollouts"
        folder.mkdir()
        for i, trace in enumerate(rollouts(0, args.n)):
            (folder / f"rollout-{i:06d}.json").write_text(json.dumps(trace))
        runs: dict[str, list[float]] = {"into a file": [], "through a server": []}
        if args.one_by_one:
            runs["through a server, a request a file"] = []
        for k in range(args.repeat):
            runs["into a file"].append(ingest(folder, "--db", str(Path(tmp) / f"file-{k}.duckdb")))
            runs["through a server"].append(served(folder, Path(tmp) / f"served-{k}.duckdb"))
            if args.one_by_one:
                runs["through a server, a request a file"].append(
                    served(folder, Path(tmp) / f"alone-{k}.duckdb", alone=True))
    print(f"orchestrace ingest of {args.n:,} rollout files, {args.repeat} runs each:")
    for name, times in runs.items():
        print(f"  {name:36} median {statistics.median(times):6.1f} s (range {min(times):.1f}-{max(times):.1f} s), "
              f"{statistics.median(times) / args.n * 1000:.1f} ms a file")


if __name__ == "__main__":
    main()
