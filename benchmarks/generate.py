"""How long `generate_swarm` takes for the industrial sizes (1,000 agents; 20,000 and 100,000 events).

`make demo`, `orchestrace generate` and the scale tests all wait for it. Prints the median and range of REPEAT
runs per size and the 100k / 20k ratio of the medians (5.0 is linear). Run with
`.venv/bin/python benchmarks/generate.py`. Prints figures; asserts nothing.
"""

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.domain.generate import generate_swarm  # noqa: E402

REPEAT = 5
SIZES = (20_000, 100_000)


def main() -> None:
    medians = {}
    for events in SIZES:
        timings = []
        for _ in range(REPEAT):
            start = time.perf_counter()
            generate_swarm(1000, events)
            timings.append(time.perf_counter() - start)
        medians[events] = statistics.median(timings)
        print(f"generate_swarm(1000, {events:>7,}): median {medians[events] * 1000:7.0f} ms "
              f"(range {min(timings) * 1000:.0f}-{max(timings) * 1000:.0f} ms, {REPEAT} runs)")
    print(f"100k / 20k ratio of medians: {medians[SIZES[1]] / medians[SIZES[0]]:.2f} (5.0 is linear)")


if __name__ == "__main__":
    main()
