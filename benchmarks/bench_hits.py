"""What a checked Hit costs: building Hits (every field checked) and rebuilding them from cache columns (checked
a column at a time), against the floor of building the same named tuples without any check.

    .venv/bin/python benchmarks/bench_hits.py [--hits 10000]

Prints nanoseconds per hit and the ratio to the floor (best of 7 repeats). Not a test: the machines are noisy.
"""

from __future__ import annotations

import argparse
import timeit

from rag_eval.stages.hits import Hit


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hits", type=int, default=10_000)
    n = parser.parse_args().hits
    args = [(f"d{i}", float(i), "text", i % 9) for i in range(n)]
    columns = Hit.to_columns([Hit(*a) for a in args])
    new = tuple.__new__

    def best(fn) -> float:
        return min(timeit.repeat(fn, number=3, repeat=7)) / 3 / n * 1e9

    floor = best(lambda: [new(Hit, (*a, Hit._field_defaults["metadata"])) for a in args])
    checked = best(lambda: [Hit(*a) for a in args])
    cached = best(lambda: Hit.from_columns(columns))
    print(f"{n} hits, ns per hit (ratio to the unchecked floor)")
    print(f"  unchecked tuple.__new__ (floor) {floor:8.0f}")
    print(f"  Hit(...), every field checked   {checked:8.0f}  ({checked / floor:.2f}x)")
    print(f"  Hit.from_columns (cache path)   {cached:8.0f}  ({cached / floor:.2f}x)")


if __name__ == "__main__":
    main()
