"""Bad input to the Ray executor (docs/bad-input/pipelines.md, "Ray executor"): its settings, checked when it is made;
settings that cannot apply to a Ray already running; a factory that builds another stage than the pipeline's; Ray Data's
versions outside the ranges it declares. None of these starts Ray."""

from __future__ import annotations

import pytest

from rag_eval.errors import InputError
from rag_eval.stages import Hit, Retriever
from rag_eval.stages._ray import RayExecutor, _check_built, _digest, check_ray_data


class Fixed(Retriever):
    def __init__(self, name: str = "fixed", *, k: int = 3) -> None:
        super().__init__(name)
        self.k = k

    def config(self):
        return {"k": self.k}

    def search(self, query: str, k: int) -> list[Hit]:
        return [Hit(f"d{i}", 1.0 / (i + 1)) for i in range(min(k, self.k))]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"batch_size": 0}, "RayExecutor: batch_size must be 1 or more, not 0"),
        ({"batch_size": True}, "RayExecutor: batch_size must be an int, not bool True"),
        ({"actors": 1.5}, "RayExecutor: actors must be an int, not float 1.5"),
        ({"num_cpus": -1}, "RayExecutor: num_cpus must be 0 or more, not -1"),
        ({"num_gpus": float("nan")}, "num_gpus must be a finite number"),
        ({"flush_seconds": float("inf")}, "flush_seconds must be a finite number"),
        ({"address": ""}, "address must be a non-empty str"),
        ({"factory": lambda: None}, "factory must be a mapping"),
        ({"factory": {"fixed": "not callable"}}, "must be a callable"),
        ({"stateful": "fixed"}, "stateful must be a collection of stage names"),
        ({"runtime_env": ["pip"]}, "runtime_env must be a mapping"),
        ({"init": {"address": "auto"}}, "give address as its own argument"),
    ],
)
def test_ray_executor_settings_are_checked_when_made(kwargs, message):
    with pytest.raises(InputError, match=message):
        RayExecutor(**kwargs)


def test_settings_for_a_ray_already_running_are_refused(monkeypatch):
    ray = pytest.importorskip("ray")
    monkeypatch.setattr(ray, "is_initialized", lambda: True)  # the user's own ray.init came first
    with pytest.raises(InputError, match="Ray is already initialised in this process, so address, runtime_env"):
        RayExecutor("head:6379").connect()
    with pytest.raises(InputError, match="cannot apply"):
        RayExecutor(runtime_env={"pip": ["x"]}).connect()
    assert RayExecutor().connect() is ray  # without them it attaches


def test_a_factory_that_builds_another_stage_is_refused():
    pipeline_stage = Fixed(k=3)
    digest = _digest(pipeline_stage)
    _check_built(Fixed(k=3), "fixed", digest)  # the same configuration: accepted
    with pytest.raises(InputError, match=r"factory\['fixed'\] built a stage named 'other', not 'fixed'"):
        _check_built(Fixed("other", k=3), "fixed", digest)
    with pytest.raises(InputError, match=r"fingerprint differs from the pipeline's stage 'fixed'"):
        _check_built(Fixed(k=5), "fixed", digest)


def test_ray_data_versions_outside_their_range_are_refused(monkeypatch):
    pytest.importorskip("ray")
    from importlib import metadata

    real = metadata.version
    assert set(check_ray_data()) == {"numpy", "pandas", "pyarrow"}
    monkeypatch.setattr(metadata, "version", lambda name: "1.5.0" if name == "pandas" else real(name))
    with pytest.raises(ImportError, match=r"supports pandas>=2\.2\.3, but pandas 1\.5\.0 is installed"):
        check_ray_data()

    def missing(name):
        if name == "pyarrow":
            raise metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(metadata, "version", missing)
    with pytest.raises(ImportError, match=r"needs pyarrow>=17\.0\.0, which is not installed: pip install"):
        check_ray_data()
