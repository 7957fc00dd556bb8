"""The argument checks (rag_eval._checks): each returns the value normalised or raises one InputError in one format."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from rag_eval._checks import (
    MAX_CUTOFF,
    check_choice,
    check_int,
    check_number,
    check_path,
    check_seconds,
    check_share,
)
from rag_eval.errors import InputError


def error_of(call, *args, **kwargs) -> str:
    with pytest.raises(InputError) as info:
        call(*args, **kwargs)
    assert isinstance(info.value, ValueError)  # what the checks raised before they were one module
    return str(info.value)


def test_check_int_takes_python_and_numpy_ints_within_bounds():
    assert check_int(3, "n") == 3 and type(check_int(np.int64(3), "n")) is int
    assert check_int(0, "seed", low=0, high=None) == 0
    assert check_int(MAX_CUTOFF, "depth") == MAX_CUTOFF
    assert error_of(check_int, True, "n") == "n must be an int, not bool True"
    assert error_of(check_int, 2.0, "n") == "n must be an int, not float 2.0"
    assert error_of(check_int, "4", "n") == "n must be an int, not str '4'"
    assert error_of(check_int, 0, "n") == "n must be 1 or more, not 0"
    assert error_of(check_int, 1, "folds", low=2) == "folds must be 2 or more, not 1"
    assert error_of(check_int, MAX_CUTOFF + 1, "depth") == f"depth must be at most {MAX_CUTOFF}, not {MAX_CUTOFF + 1}"
    assert error_of(check_int, 10**50, "k", high=10).endswith("not 10000000000000000000...(51 characters)")


@pytest.mark.parametrize(
    "value, kwargs, message",
    [
        (1.5, {}, "alpha must lie in (0, 1), not 1.5"),
        (0, {}, "alpha must lie in (0, 1), not 0"),
        (1, {}, "alpha must lie in (0, 1), not 1"),
        (np.float64(1.5), {}, "alpha must lie in (0, 1), not 1.5"),
        (True, {}, "alpha must be a finite number, not True"),
        ("0.05", {}, "alpha must be a finite number, not '0.05'"),
        (math.nan, {}, "alpha must be a finite number, not nan"),
        (1.5, {"closed": "both", "why": " (a weight)"}, "alpha must lie in [0, 1] (a weight), not 1.5"),
        (0.0, {"closed": "right"}, "alpha must lie in (0, 1], not 0.0"),
    ],
)
def test_check_share_refuses_with_the_interval(value, kwargs, message):
    assert error_of(check_share, value, "alpha", **kwargs) == message


def test_check_share_and_check_number_return_floats_at_closed_ends():
    assert check_share(0.05, "alpha") == 0.05 and type(check_share(np.float32(0.5), "alpha")) is float
    assert check_share(0, "alpha", closed="both") == 0.0 and check_share(1, "share", closed="right") == 1.0
    assert check_number(-1, "correlation", low=-1, high=1, closed="left") == -1.0
    assert error_of(check_number, 1, "correlation", low=-1, high=1, closed="left") == (
        "correlation must lie in [-1, 1), not 1"
    )
    assert check_number(-5, "a weight") == -5.0  # unbounded: finite is enough
    assert error_of(check_number, -1, "num_cpus", low=0) == "num_cpus must be 0 or more, not -1"
    assert error_of(check_number, 0, "margin", low=0, closed="neither") == "margin must be more than 0, not 0"
    assert error_of(check_number, 2, "x", high=1) == "x must be at most 1, not 2"
    assert error_of(check_number, math.inf, "x", high=1) == "x must be a finite number, not inf"


def test_check_choice_names_every_choice():
    assert check_choice("t", "test", ("randomization", "t", "wilcoxon")) == "t"
    assert error_of(check_choice, "sign", "test", ("randomization", "t")) == (
        "unknown test 'sign'; choose one of randomization, t"
    )
    assert error_of(check_choice, None, "method", ["a"]) == "unknown method None; choose one of a"
    assert error_of(check_choice, ["t"], "test", ("t",)) == "unknown test ['t']; choose one of t"  # unhashable


def test_check_seconds():
    assert check_seconds(2, "timeout") == 2.0 and check_seconds(0, "backoff", zero=True) == 0.0
    assert error_of(check_seconds, 0, "timeout") == "timeout must be more than 0 seconds, not 0"
    assert error_of(check_seconds, -1, "backoff", zero=True) == "backoff must be 0 or more seconds, not -1"
    assert error_of(check_seconds, math.nan, "timeout") == "timeout must be a finite number of seconds, not nan"
    assert error_of(check_seconds, True, "timeout") == "timeout must be a finite number of seconds, not True"


def test_check_path(tmp_path):
    assert check_path(str(tmp_path), "folder") == tmp_path and check_path(tmp_path, "folder") == tmp_path
    assert isinstance(check_path("a/b", "out"), Path)
    assert error_of(check_path, 3, "out") == "out must be a path (a str or an os.PathLike), not int"
    assert error_of(check_path, b"a", "out") == "out must be a path (a str or an os.PathLike), not bytes"
    assert error_of(check_path, "  ", "out") == "out must not be empty, not '  '"
