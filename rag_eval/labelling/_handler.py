"""HTTP for the labelling page, and its security checks: what a request must show before it reaches the session.

The page and a small JSON API, all of it on fixed routes (no request names a file): ``GET /`` (the page, with this
server's token), ``GET /api/state[?after=N]``, ``GET /api/item?i=N``, ``POST /api/judge``
(``{"index": N, "grade": G}``, optionally with ``query_id`` and ``doc_id`` to check), ``GET /api/agreement`` (this
assessor's agreement with each model judge of the log, which the page shows when every item is judged:
:func:`rag_eval.ground_truth.agreement.assessor_summary`). A request whose ``Host`` is not ``127.0.0.1:PORT`` or
``localhost:PORT``, or whose ``Origin`` (when sent) is not ``http://`` one of those, gets 403 (DNS rebinding, other
sites); every ``/api/`` request must carry the server's random token in ``X-Rag-Eval-Token`` (403 otherwise), and a
POST must be ``application/json``, so that no other page can make the browser judge. The page is served with a
Content-Security-Policy that allows only its own inline script and style (by a per-server nonce). Errors are JSON:
``{"error": "..."}``: a body that is not JSON, or nested too deep to parse, is 400; a body over :data:`MAX_BODY`
bytes is 413; a request (line, headers and body) that does not arrive whole within the server's timeout, however
slowly it trickles, is 408 and the connection is closed, so no request holds a thread for longer; any other failure
of a request is a 500, never a dead thread.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import secrets
import socket
import threading
import time
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from importlib import resources
from socketserver import BaseServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from ..errors import InputError
from .session import LabellingSession, RequestError

__all__ = ["MAX_BODY", "TOKEN_HEADER", "RequestHandler", "Site"]

TOKEN_HEADER = "X-Rag-Eval-Token"
MAX_BODY = 4096


@dataclass(frozen=True)
class Site:
    """What one server serves (the session, the page) and what a request must show to reach it: one of its own
    ``hosts``, no foreign origin, its ``token``; ``timeout`` is the seconds a request may take to arrive whole."""

    session: LabellingSession
    token: str
    nonce: str
    page: bytes
    hosts: frozenset[str]
    origins: frozenset[str]
    timeout: float

    @classmethod
    def create(cls, session: LabellingSession, *, port: int, timeout: float) -> Site:
        """A site on ``127.0.0.1:port`` with a fresh random token and page nonce."""
        token = secrets.token_urlsafe(32)
        nonce = secrets.token_urlsafe(18)
        hosts = frozenset({f"127.0.0.1:{port}", f"localhost:{port}"})
        page = resources.files(__package__).joinpath("page.html").read_text(encoding="utf-8")
        return cls(
            session,
            token,
            nonce,
            page.replace("__RAG_EVAL_TOKEN__", token).replace("__RAG_EVAL_NONCE__", nonce).encode("utf-8"),
            hosts,
            frozenset(f"http://{h}" for h in hosts),
            timeout,
        )


class RequestHandler(BaseHTTPRequestHandler):
    """One connection to a :class:`Site`: its checks, its routes, its JSON answers (see the module's doc)."""

    server_version = "rag-eval-label"
    sys_version = ""

    def __init__(self, request: Any, client_address: Any, server: BaseServer, *, site: Site) -> None:
        self.site = site  # before the base class handles the request, in its __init__
        super().__init__(request, client_address, server)

    def setup(self) -> None:
        self.request.settimeout(self.site.timeout)  # a socket timeout: a silent client cannot hold the thread
        super().setup()

    def handle_one_request(self) -> None:
        # the whole request (its line, headers and body) must arrive within the timeout, however slowly it trickles:
        # at the deadline a watchdog shuts the connection's reading side, so every read ends at once
        self._expired = False
        self._watchdog = threading.Timer(self.site.timeout, self._expire)
        self._watchdog.daemon = True
        self._watchdog.start()
        try:
            super().handle_one_request()
        finally:
            self._watchdog.cancel()

    def _expire(self) -> None:
        self._expired = True
        self.close_connection = True
        with contextlib.suppress(OSError):  # the connection is gone already
            self.connection.shutdown(socket.SHUT_RD)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._respond("GET")

    def do_POST(self) -> None:
        self._respond("POST")

    def _respond(self, method: str) -> None:
        self._body_read = method != "POST"
        if self._body_read:
            self._watchdog.cancel()  # all of the request is here: what it asks for may take its time
        try:
            if self._expired:
                raise RequestError(
                    HTTPStatus.REQUEST_TIMEOUT, f"the request did not arrive within {self.site.timeout:g} s"
                )
            status, payload = self._route(method)
        except RequestError as exc:
            status, payload = exc.status, {"error": exc.message}
        except InputError as exc:
            status, payload = HTTPStatus.INTERNAL_SERVER_ERROR, {"error": str(exc)}
        except Exception as exc:  # noqa: BLE001 - a request never kills its thread silently: the page is told
            status, payload = (
                HTTPStatus.INTERNAL_SERVER_ERROR,
                {"error": f"the server failed on this request ({type(exc).__name__}: {exc}); nothing was saved"},
            )
        if not self._body_read:  # the body is not (all) read: the connection cannot carry another request
            self.close_connection = True
        if isinstance(payload, bytes):
            self._send(status, payload, "text/html; charset=utf-8", page=True)
        else:
            self._send(status, json.dumps(payload, ensure_ascii=False).encode(), "application/json")

    def _route(self, method: str) -> tuple[int, Any]:
        site = self.site
        if self.headers.get("Host") not in site.hosts:
            raise RequestError(HTTPStatus.FORBIDDEN, "Host must be this server's own (127.0.0.1 or localhost)")
        origin = self.headers.get("Origin")
        if origin is not None and origin not in site.origins:
            raise RequestError(HTTPStatus.FORBIDDEN, f"requests from origin {origin!r} are refused")
        url = urlsplit(self.path)
        if url.path in ("/", "/index.html") and method == "GET":
            return HTTPStatus.OK, site.page
        if url.path == "/favicon.ico":
            return HTTPStatus.NO_CONTENT, {}
        routes = {("GET", "/api/state"), ("GET", "/api/item"), ("POST", "/api/judge"), ("GET", "/api/agreement")}
        if not url.path.startswith("/api/") or (method, url.path) not in routes:
            if any(p == url.path for _, p in routes):
                raise RequestError(HTTPStatus.METHOD_NOT_ALLOWED, f"{method} {url.path} is not allowed")
            raise RequestError(HTTPStatus.NOT_FOUND, "not found")
        if self.headers.get("Sec-Fetch-Site") not in (None, "same-origin", "none"):
            raise RequestError(HTTPStatus.FORBIDDEN, "cross-site requests are refused")
        if not hmac.compare_digest(self.headers.get(TOKEN_HEADER, "").encode(), site.token.encode()):
            raise RequestError(HTTPStatus.FORBIDDEN, f"missing or wrong {TOKEN_HEADER} (reload the page)")
        session = site.session
        query = parse_qs(url.query, keep_blank_values=True)
        if url.path == "/api/state":
            after = query.get("after", [None])[0]
            return HTTPStatus.OK, session.state(None if after is None else _int(after, "after"))
        if url.path == "/api/item":
            return HTTPStatus.OK, session.item(_int(query.get("i", [""])[0], "i"))
        if url.path == "/api/agreement":
            from ..ground_truth.agreement import assessor_summary
            from ..ground_truth.judgement_log import JudgementLog

            log = JudgementLog(session.log_path, session.log.judgements)  # a snapshot: judging goes on meanwhile
            return HTTPStatus.OK, assessor_summary(log, session.assessor, scale=session.scale)
        return HTTPStatus.OK, session.judge(self._json_body())

    def _json_body(self) -> object:
        if self.headers.get_content_type() != "application/json":
            raise RequestError(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, "the body must be application/json")
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            raise RequestError(HTTPStatus.LENGTH_REQUIRED, "Content-Length is required") from None
        if not 0 <= length <= MAX_BODY:
            raise RequestError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"the body must be at most {MAX_BODY} bytes")
        body = self._read_body(length)
        try:
            return json.loads(body)
        except (ValueError, UnicodeDecodeError):
            raise RequestError(HTTPStatus.BAD_REQUEST, "the body is not valid JSON") from None
        except RecursionError:
            raise RequestError(HTTPStatus.BAD_REQUEST, "the body is nested too deeply to be a judgement") from None

    def _read_body(self, length: int) -> bytes:
        """The body's ``length`` bytes, all within the server's timeout (a slow trickle counts as a silence)."""
        deadline = time.monotonic() + self.site.timeout
        pieces, got = [], 0
        try:
            while got < length:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError
                self.connection.settimeout(remaining)
                piece = self.rfile.read1(length - got)
                if not piece:
                    if self._expired:  # the watchdog ended the read
                        raise TimeoutError
                    raise RequestError(HTTPStatus.BAD_REQUEST, f"the body ended after {got} of {length} bytes")
                pieces.append(piece)
                got += len(piece)
        except TimeoutError:
            raise RequestError(
                HTTPStatus.REQUEST_TIMEOUT,
                f"the body did not arrive within {self.site.timeout:g} s ({got} of {length} bytes)",
            ) from None
        finally:
            self.connection.settimeout(self.site.timeout)
        self._watchdog.cancel()
        self._body_read = True
        return b"".join(pieces)

    def _send(self, status: int, body: bytes, content_type: str, *, page: bool = False) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("X-Frame-Options", "DENY")
        if self.close_connection:
            self.send_header("Connection", "close")
        if page:
            nonce = self.site.nonce
            self.send_header(
                "Content-Security-Policy",
                f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; "
                "connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; "
                "frame-ancestors 'none'",
            )
        self.end_headers()
        if status != HTTPStatus.NO_CONTENT:
            self.wfile.write(body)


def _int(text: str, name: str) -> int:
    try:
        return int(text, 10)
    except ValueError:
        raise RequestError(HTTPStatus.BAD_REQUEST, f"{name} must be an integer, not {text!r}") from None
