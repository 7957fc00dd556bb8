"""The network guard of the test configuration: a connection off loopback fails the test, loopback works, and
telemetry is off for every library the tests use, in the test process and in the subprocesses it starts (they
inherit the environment tests/conftest.py sets).

Off-loopback addresses here are from the documentation ranges (192.0.2.0/24, TEST-NET-1; 2001:db8::/32), routed
nowhere: were the guard to let one through, nothing would answer it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import threading

import pytest
from pytest_socket import SocketBlockedError, SocketConnectBlockedError

from .conftest import TELEMETRY_OFF


@contextlib.contextmanager
def refused(error: type[Exception], call: str, host: str):
    """The blocked call warns (a warning is an error in the tests, so even a swallowed refusal fails the test) and
    raises ``error``; both name the call and the host."""
    pattern = rf'tried to use {re.escape(call)} with host "{re.escape(host)}"'
    with pytest.warns(UserWarning, match=pattern) as seen, pytest.raises(error) as raised:
        yield
    assert str(raised.value) == str(seen[0].message) and "127.0.0.1,::1" in str(raised.value)


OFF_LOOPBACK = [("192.0.2.1", 80, socket.AF_INET), ("2001:db8::1", 80, socket.AF_INET6)]


@pytest.mark.parametrize("host,port,family", OFF_LOOPBACK, ids=["ipv4", "ipv6"])
def test_a_connection_off_loopback_fails(host, port, family):
    with (
        socket.socket(family, socket.SOCK_STREAM) as sock,
        refused(SocketConnectBlockedError, "socket.socket.connect()", host),
    ):
        sock.connect((host, port))


@pytest.mark.parametrize("host,port,family", OFF_LOOPBACK, ids=["ipv4", "ipv6"])
def test_connect_ex_and_a_datagram_off_loopback_fail_too(host, port, family):
    with (
        socket.socket(family, socket.SOCK_STREAM) as sock,
        refused(SocketBlockedError, "socket.socket.connect_ex()", host),
    ):
        sock.connect_ex((host, port))
    with socket.socket(family, socket.SOCK_DGRAM) as sock, refused(SocketBlockedError, "socket.socket.sendto()", host):
        sock.sendto(b"x", (host, port))


def test_create_connection_and_a_name_lookup_off_the_machine_fail():
    with refused(SocketConnectBlockedError, "socket.socket.connect()", "192.0.2.1"):
        socket.create_connection(("192.0.2.1", 443), timeout=1)
    with refused(SocketBlockedError, "socket.getaddrinfo()", "pypi.org"):  # a DNS query would leave the machine
        socket.getaddrinfo("pypi.org", 443)
    assert {a[4][0] for a in socket.getaddrinfo("127.0.0.1", 80)} == {"127.0.0.1"}  # literals need no lookup


def _echo_server(family: int, host: str) -> tuple[socket.socket, int]:
    server = socket.socket(family, socket.SOCK_STREAM)
    server.bind((host, 0))
    server.listen(1)

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            conn.sendall(conn.recv(16).upper())

    threading.Thread(target=serve, daemon=True).start()
    return server, server.getsockname()[1]


@pytest.mark.parametrize("host,family", [("127.0.0.1", socket.AF_INET), ("::1", socket.AF_INET6)], ids=["v4", "v6"])
def test_loopback_works(host, family):
    if family == socket.AF_INET6 and not socket.has_ipv6:
        pytest.skip("no IPv6 on this machine")
    try:
        server, port = _echo_server(family, host)
    except OSError as exc:  # e.g. ::1 not configured inside a container
        pytest.skip(f"cannot listen on {host}: {exc}")
    with server, socket.socket(family, socket.SOCK_STREAM) as client:
        client.settimeout(10)
        client.connect((host, port))
        client.sendall(b"ping")
        assert client.recv(16) == b"PING"


def test_unix_sockets_and_asyncio_work(tmp_path):
    left, right = socket.socketpair()
    with left, right:
        left.sendall(b"pair")
        assert right.recv(4) == b"pair"
    path = str(tmp_path / "s.sock")
    with socket.socket(socket.AF_UNIX) as server, socket.socket(socket.AF_UNIX) as client:
        server.bind(path)
        server.listen(1)
        client.connect(path)
        conn, _ = server.accept()
        with conn:
            client.sendall(b"unix")
            assert conn.recv(4) == b"unix"

    async def main() -> int:
        await asyncio.sleep(0)
        return 7

    assert asyncio.run(main()) == 7  # the event loop's self-pipe is a socketpair


PROBE = """
import json, os
import huggingface_hub.constants as hub
from langsmith.utils import tracing_is_enabled
print(json.dumps({"env": {k: os.environ.get(k) for k in json.loads(os.environ["NAMES"])},
                  "hub_offline": hub.HF_HUB_OFFLINE, "hub_telemetry_off": hub.HF_HUB_DISABLE_TELEMETRY,
                  "langsmith_tracing": bool(tracing_is_enabled())}))
"""


def test_telemetry_is_off_here_and_in_subprocesses():
    for name, value in TELEMETRY_OFF.items():
        assert os.environ[name] == value, name
    for name in ("DO_NOT_TRACK", "HF_HUB_DISABLE_TELEMETRY", "LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2"):
        assert name in TELEMETRY_OFF
    assert {"ANONYMIZED_TELEMETRY", "HAYSTACK_TELEMETRY_ENABLED", "RAY_USAGE_STATS_ENABLED"} <= set(TELEMETRY_OFF)
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        check=True,
        env=dict(os.environ, NAMES=json.dumps(sorted(TELEMETRY_OFF))),
    )
    found = json.loads(done.stdout)
    assert found["env"] == TELEMETRY_OFF  # inherited as set
    # and read so by the libraries themselves
    assert found["hub_offline"] is True and found["hub_telemetry_off"] is True
    assert found["langsmith_tracing"] is False
