"""The prediction-powered estimates' simulation, printed: coverage and mean width of the 95% intervals (PPI++, plain
PPI, human-only, the naive judge-only one, and ppi_py's variance) over the simulated query sets that
tests/test_prediction_powered.py asserts on (N = 1,000 queries, n = 150 human-graded, 2,000 simulations, fixed seeds).

    .venv/bin/python benchmarks/ppi_simulation.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.test_prediction_powered import SIMS, N, simulate, simulate_difference, simulate_stratified


def main() -> None:
    print(f"N = {N:,} queries, n = 150 human-graded, {SIMS:,} simulations")
    for label, options in (
        ("good judge (bias 0.05, noise 0.1)", {"bias": 0.05, "noise": 0.1}),
        ("biased judge (bias 0.15, noise 0.15)", {"bias": 0.15, "noise": 0.15, "seed": 5}),
    ):
        r = simulate(**options)
        print(f"{label}: mean judge error {r['judge_error']:.3f}, correlation {r['correlation']:.3f}")
        for k in ("ppi++", "ppi", "human", "judge", "ppi_py"):
            print(f"   {k:<7} coverage {100 * r[k][0]:.1f}%  mean width {r[k][1]:.4f}")
    r = simulate_difference()
    print(f"difference of two systems, true {r['true_difference']:+.4f}")
    for k in ("ppi++", "human", "judge"):
        print(f"   {k:<7} coverage {100 * r[k][0]:.1f}%  mean width {r[k][1]:.4f}")
    print("stratified draw, weighted by inclusion probabilities")
    for k, v in simulate_stratified().items():
        print(f"   {k:<16} coverage {100 * v[0]:.1f}%  mean width {v[1]:.4f}")


if __name__ == "__main__":
    main()
