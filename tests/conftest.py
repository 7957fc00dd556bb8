"""Shared test helpers: where ../shared is, and what to do when it is absent; and the network guard.

No test may reach outside the machine. pytest-socket (configured in pyproject.toml: ``--allow-hosts=127.0.0.1,::1
--allow-unix-socket``) fails any ``socket.connect`` to an address off loopback in the test process; the guard
below adds what the plugin leaves open there (``connect_ex``, datagrams sent with ``sendto``, and name lookups
other than the machine's own, which would ask a DNS server). Every library with telemetry that the tests use has
it switched off through its environment variable, set here before any test module imports it. Subprocesses that
the tests start (the CLI, notebook kernels, Chromium, venvs) inherit this environment, so their telemetry is off
too; the socket guard itself works in the pytest process only: in each pytest-xdist worker under ``make test``
(every worker loads this file and the plugin with the same options; the workers talk to pytest over pipes).
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: environment variable -> value: telemetry and network fetches off for every library the tests use, or may use
TELEMETRY_OFF = {
    "DO_NOT_TRACK": "1",  # the consoledonottrack.com convention, honoured by many libraries
    "SCARF_NO_ANALYTICS": "true",  # Scarf's package analytics
    # Hugging Face hub, transformers, sentence-transformers: no telemetry, and no download (the model is on disk)
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1",
    # LangChain / LangSmith tracing (either prefix, either version of the flag)
    "LANGCHAIN_TRACING_V2": "false",
    "LANGCHAIN_TRACING": "false",
    "LANGSMITH_TRACING": "false",
    "LANGSMITH_TRACING_V2": "false",
    "ANONYMIZED_TELEMETRY": "False",  # Chroma
    "HAYSTACK_TELEMETRY_ENABLED": "False",  # Haystack
    "MLFLOW_DISABLE_TELEMETRY": "true",  # MLflow (rag_eval sets it too, unless the user did)
    "RAY_USAGE_STATS_ENABLED": "0",  # Ray's usage stats
    "RAY_USAGE_STATS_PROMPT_ENABLED": "0",
    "TOKENIZERS_PARALLELISM": "false",  # not telemetry: HF tokenizers' fork warning
}
os.environ.update(TELEMETRY_OFF)

import pytest  # noqa: E402  (after the environment is set: nothing a plugin imports may read it first)
from pytest_socket import SocketBlockedError  # noqa: E402  (likewise)

ALLOWED = '"127.0.0.1,::1" and unix sockets'


class OffLoopbackBlocked(SocketBlockedError):
    """What the guard's additions raise (``connect_ex``, ``sendto``, a name lookup). Like the plugin's own errors it
    warns as it is made, so a test fails even where a library swallows the exception (warnings are errors in the
    tests: there the warning itself is raised)."""

    def __init__(self, call: str, host: object) -> None:
        super().__init__(f'A test tried to use {call} with host "{host}" (allowed: {ALLOWED}).')


def _is_loopback(address: Any) -> bool:
    """Whether a socket address stays on this machine: a unix socket's path, or a loopback IP literal."""
    if not isinstance(address, tuple):
        return True  # AF_UNIX: a path (str or bytes) or an abstract name
    host = address[0]
    if not isinstance(host, str):
        return True  # AF_NETLINK and friends: (pid, groups), the kernel
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False  # a name: sendto would look it up and send off the machine wherever it points


def _guard(method: Any) -> Any:
    def guarded(sock: socket.socket, *args: Any) -> Any:
        address = args[-1]
        if not _is_loopback(address):
            raise OffLoopbackBlocked(f"socket.socket.{method.__name__}()", address[0])
        return method(sock, *args)

    guarded.__name__ = method.__name__
    return guarded


def _guard_lookup(lookup: Any) -> Any:
    own = {None, "", "localhost", "localhost.localdomain", socket.gethostname()}

    def guarded(host: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else host
        if name not in own:
            try:
                ipaddress.ip_address(str(name).split("%")[0])  # a literal needs no DNS server
            except ValueError:
                raise OffLoopbackBlocked("socket.getaddrinfo()", name) from None
        return lookup(host, *args, **kwargs)

    return guarded


socket.socket.connect_ex = _guard(socket.socket.connect_ex)  # type: ignore[method-assign]
socket.socket.sendto = _guard(socket.socket.sendto)  # type: ignore[method-assign]
socket.getaddrinfo = _guard_lookup(socket.getaddrinfo)

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("RAG_EVAL_SHARED", ROOT.parent / "shared"))
CONFORMANCE = SHARED / "conformance" / "trec_eval"
DATASETS = SHARED / "datasets"


def need_shared(path: Path) -> Path:
    """Return ``path`` under ../shared; skip the test when it is absent, or fail under CI=true."""
    if path.exists():
        return path
    message = f"needs the shared data at {path} (../shared beside the checkout)"
    if os.environ.get("CI") == "true":
        pytest.fail(message + "; CI=true, so its absence is a failure")
    pytest.skip(message)


def _skip_or_fail(message: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(message + "; CI=true, so this is a failure")
    pytest.skip(message)


def _build_trec_eval(folder: Path, *, digits: str | None = None) -> Path:
    """trec_eval 10.0 built from ``../shared/conformance/trec_eval/src`` in ``folder`` (a few seconds); with
    ``digits`` (a printf conversion such as ``%.17g``), one that prints its values so instead of ``%6.4f``.

    Skips with the reason where the source, ``make`` or a C compiler is missing; fails instead under CI=true.
    """
    source = CONFORMANCE / "src"
    if not (source / "Makefile").exists():
        _skip_or_fail(f"needs trec_eval's source at {source} (../shared beside the checkout)")
    compiler = shutil.which("cc") or shutil.which("gcc")
    make = shutil.which("make")
    if compiler is None or make is None:
        _skip_or_fail("needs a C compiler (cc) and make to build trec_eval")
    shutil.copytree(source, folder)
    if digits is not None:
        for name in ("meas_print_single.c", "meas_print_final.c"):
            path = folder / name
            text = path.read_text()
            assert text.count("%6.4f") >= 3, f"{name} no longer prints %6.4f"
            path.write_text(text.replace("%6.4f", digits))
    built = subprocess.run(
        [make, "-C", str(folder), "-s", f"CC={compiler}", "trec_eval"], capture_output=True, text=True
    )
    binary = folder / "trec_eval"
    if built.returncode != 0 or not binary.exists():
        pytest.fail(f"building trec_eval failed (exit {built.returncode}):\n{built.stderr[-2000:]}")
    return binary


def _once_per_run(tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], Path]) -> Path:
    """``make(folder)`` once for the whole run, in a new folder; returns what it returned.

    Under pytest-xdist each worker is a process of its own with its own session fixtures: the workers share one
    result, made by the first to take the lock, in the folder that holds every worker's temporary folder (the
    run's own). Two ``pip wheel .`` at once would share the checkout's build/ folder, where one removes what the
    other is packing; the others are built once rather than once per worker. A ``make`` that fails or skips
    leaves nothing behind, so the next worker to need the result tries again (and fails or skips the same way).
    """
    if os.environ.get("PYTEST_XDIST_WORKER") is None:  # one process: the session fixture is once per run already
        return make(tmp_path_factory.mktemp(name))
    import fcntl  # POSIX, as are the SIGKILL and tmpfs tests; here only under xdist

    run = tmp_path_factory.getbasetemp().parent  # the run's folder: each worker's is popen-gwN inside it
    done = run / f"{name}.done"  # the path of the result, written once it is complete
    with (run / f"{name}.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, by a worker that dies too
        if not done.exists():
            folder = run / name
            shutil.rmtree(folder, ignore_errors=True)  # what a worker that failed halfway left
            folder.mkdir()
            done.write_text(str(make(folder)))
        return Path(done.read_text())


@pytest.fixture(scope="session")
def trec_eval_binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real trec_eval 10.0, built from its source (see :func:`_build_trec_eval`), once per run."""
    return _once_per_run(tmp_path_factory, "trec_eval", lambda folder: _build_trec_eval(folder / "src"))


@pytest.fixture(scope="session")
def trec_eval_exact_binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """trec_eval 10.0 printing every value with 17 significant digits (``%.17g``): enough to tell every double
    apart, so rag_eval's values can be compared with its bit for bit."""
    return _once_per_run(
        tmp_path_factory, "trec_eval_exact", lambda folder: _build_trec_eval(folder / "src", digits="%.17g")
    )


def _build_wheel(folder: Path) -> Path:
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", str(folder), "."],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    wheels = list(folder.glob("*.whl"))
    if built.returncode != 0 or len(wheels) != 1:
        pytest.fail(f"pip wheel . failed (exit {built.returncode}):\n{built.stderr[-3000:]}")
    return wheels[0]


@pytest.fixture(scope="session")
def project_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's wheel, built once per run from the repository root (``pip wheel --no-deps
    --no-build-isolation .`` with the venv's setuptools: nothing is downloaded). Under pytest-xdist the workers
    share it (:func:`_once_per_run`): two builds at once in the checkout's build/ folder would spoil each other."""
    return _once_per_run(tmp_path_factory, "wheel", _build_wheel)


@pytest.fixture(params=["c", "python"])
def reader(request, monkeypatch):
    """Run the test with the C paths (``rag_eval._speedups``) and again with the pure-Python ones."""
    from rag_eval import _accel

    if request.param == "c" and _accel.speedups is None:
        pytest.skip("rag_eval._speedups is not in use (not built, or RAG_EVAL_PURE_PYTHON=1)")
    if request.param == "python":
        monkeypatch.setattr(_accel, "speedups", None)
    return request.param


@pytest.fixture
def tmpfs(tmp_path):
    """A real 64 KiB tmpfs mounted for the test (as root), unmounted after it, to fill a disk for real. Where mount
    is not permitted the test skips with the reason; under CI=true (root, on the project's machine, where it
    works) that is a failure."""
    import subprocess

    mount = tmp_path / "small"
    mount.mkdir()
    if os.geteuid() != 0:
        message = "needs root to mount a small tmpfs"
    else:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True, text=True
        )
        message = None if done.returncode == 0 else f"mount -t tmpfs is not permitted here: {done.stderr.strip()}"
    if message is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(message + "; CI=true runs as root on the project's machine, where it works")
        pytest.skip(message)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)
