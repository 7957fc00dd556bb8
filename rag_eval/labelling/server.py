"""The labelling page's server (layer 5): the standard library's ``ThreadingHTTPServer`` on 127.0.0.1.

    rag-eval label POOL --qrels OUT [--assessor NAME] [--port N] [--scale 0..3]

:class:`LabellingSession` holds what is judged: the pool, the judgement log ``OUT.judgements.jsonl`` and the
qrels that ``OUT`` held before this labelling began. Each grade is appended to the log (fsync'd, every write's
length checked: :mod:`rag_eval._files`), then ``OUT`` is rewritten atomically as those qrels merged with the log, so
that a kill at any moment loses nothing and ``OUT`` is always a whole TREC qrels file. A grade is acknowledged
(200) only once it is in the log; one that could not be stored (a full disk) is answered 507 Insufficient Storage
(500 for another cause) with a JSON message that the page shows, and the log stays readable: free space and go on.
``OUT`` is resolved first (a symlink is written through, and its log sits beside the file it points to), so two
names of one file share one log and one lock; temporary files left by a killed server are removed at start.
Starting again resumes at the first pool item this assessor has not judged. Skips are not written: a skipped item
stays unjudged and comes back.

:class:`LabellingServer` serves the page and a small JSON API, all of it on fixed routes (no request names a
file): ``GET /`` (the page, with this server's token), ``GET /api/state[?after=N]``, ``GET /api/item?i=N``,
``POST /api/judge`` (``{"index": N, "grade": G}``, optionally with ``query_id`` and ``doc_id`` to check). A request
whose ``Host`` is not ``127.0.0.1:PORT`` or ``localhost:PORT``, or whose ``Origin`` (when sent) is not
``http://`` one of those, gets 403 (DNS rebinding, other sites); every ``/api/`` request must carry the server's
random token in ``X-Rag-Eval-Token`` (403 otherwise), and a POST must be ``application/json``, so that no other
page can make the browser judge. Errors are JSON: ``{"error": "..."}``: a body that is not JSON, or nested too deep
to parse, is 400; a request (line, headers and body) that does not arrive whole within the server's ``timeout``
(10 s), however slowly it trickles, is 408 and the connection is closed, so no request holds a thread for longer;
any other failure of a request is a 500, never a dead thread.
"""

from __future__ import annotations

import errno
import hmac
import json
import os
import re
import secrets
import socket
import sys
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import IO, Any
from urllib.parse import parse_qs, urlsplit

from .._files import file_lock, remove_temporaries, target_of
from ..data.qrels import Qrels
from ..errors import HarnessError, InputError
from ..ground_truth import JudgementLog, Pool, merge, write_qrels

__all__ = ["LabellingServer", "LabellingSession", "RequestError", "check_scale", "log_path_for", "parse_scale", "serve"]

TOKEN_HEADER = "X-Rag-Eval-Token"
MAX_BODY = 4096
TIMEOUT = 10.0  # seconds a request may take to arrive whole (its line, headers and body)
CONTEXT_LIMIT = 200  # judged chunks shown beside an item, at most
SNIPPET = 600  # characters of a judged chunk's text shown in the context
GRADE_WORDS = {0: "not relevant", 1: "on topic, does not answer", 2: "partly answers", 3: "answers"}


def log_path_for(out: str | os.PathLike[str]) -> Path:
    """Where the judgement log of qrels file ``OUT`` lives: ``OUT.judgements.jsonl`` beside it."""
    out = Path(out)
    return out.with_name(out.name + ".judgements.jsonl")


def parse_scale(text: str) -> tuple[int, int]:
    """``"0..3"`` -> ``(0, 3)``; a scale the page can take by keyboard: 0 <= lowest < highest <= 9."""
    low, sep, high = text.partition("..")
    if not sep or not _DIGIT.fullmatch(low.strip()) or not _DIGIT.fullmatch(high.strip()):
        raise InputError(f"--scale {text!r}: expected LOW..HIGH, e.g. 0..3 (one ASCII digit each)")
    scale = (int(low), int(high))
    if not scale[0] < scale[1]:
        raise InputError(f"--scale {text!r}: expected LOW..HIGH with 0 <= LOW < HIGH <= 9 (one key per grade)")
    return scale


def check_scale(scale: object) -> tuple[int, int]:
    """A labelling scale: two ints ``(low, high)``, ``0 <= low < high <= 9`` (one key per grade, no bool)."""
    if (
        not isinstance(scale, (tuple, list))
        or len(scale) != 2
        or any(isinstance(v, bool) or not isinstance(v, int) for v in scale)
        or not 0 <= scale[0] < scale[1] <= 9
    ):
        raise InputError(
            f"scale {scale!r}: expected two ints (low, high) with 0 <= low < high <= 9 (one key per grade)"
        )
    return (scale[0], scale[1])


_DIGIT = re.compile(r"[0-9]")


class RequestError(Exception):
    """A request the session refuses: an HTTP status and a message for the JSON error."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class LabellingSession:
    """One assessor labelling one pool into one qrels file. Thread-safe; every judgement is on disk when
    :meth:`judge` returns."""

    def __init__(
        self, pool: Pool, out: str | os.PathLike[str], *, assessor: str, scale: tuple[int, int] = (0, 3)
    ) -> None:
        if not isinstance(pool, Pool):  # a Pool holds only ids that a TREC qrels line gives back (pool.py)
            raise TypeError(f"pool must be a Pool (rag_eval.pool or Pool.load), not {type(pool).__name__}")
        self.pool = pool
        self.out = target_of(out)  # a symlink's target: one file, one log, whichever name it is given by
        self.log_path = log_path_for(self.out)
        self.assessor = assessor
        self.scale = check_scale(scale)
        if (
            not isinstance(assessor, str)
            or not assessor
            or assessor != assessor.strip()
            or assessor in ("query_id", "doc_id", "grade", "qrels")
        ):
            raise InputError(f"--assessor {assessor!r} is not a usable name")
        self._lock = threading.Lock()
        remove_temporaries(self.out)  # left by a server killed while replacing OUT
        self.log = JudgementLog.open(self.log_path)
        # OUT as found, less the pairs the log judges (an earlier session wrote those there): the qrels this
        # labelling started from, whose grades it never changes
        logged = {j.pair for j in self.log}
        found = _read_out(self.out)
        self.base: dict[str, dict[str, int]] = {}
        for q, docs in found.items():
            kept = {d: g for d, g in docs.items() if (q, d) not in logged}
            if kept:
                self.base[q] = kept
        self._base_qrels = Qrels.from_dict(self.base) if self.base else None
        self.index = {(item.query_id, item.doc_id): i for i, item in enumerate(pool.items)}
        self.by_query: dict[str, list[int]] = {}
        for i, item in enumerate(pool.items):
            self.by_query.setdefault(item.query_id, []).append(i)
        self.mine: dict[tuple[str, str], int] = {}
        self.others: dict[tuple[str, str], dict[str, int]] = {}
        for (assessor_name, q, d), j in self.log.latest().items():
            if assessor_name == assessor:
                self.mine[(q, d)] = j.grade
            else:
                self.others.setdefault((q, d), {})[assessor_name] = j.grade
        self.judged = {i for i, item in enumerate(pool.items) if self._grade_of(i) is not None}
        if len(self.log):
            self._write_out()  # a kill between the log and OUT left OUT one judgement behind: catch up

    # ----- reading ------------------------------------------------------------------------------------------
    def _grade_of(self, i: int) -> int | None:
        item = self.pool.items[i]
        pair = (item.query_id, item.doc_id)
        mine = self.mine.get(pair)
        return mine if mine is not None else self.base.get(item.query_id, {}).get(item.doc_id)

    def state(self, after: int | None = None) -> dict[str, Any]:
        """Progress, and ``next``: the first unjudged item (after ``after``, wrapping round; None when all are)."""
        n = len(self.pool.items)
        if after is not None and not 0 <= after < n:
            raise RequestError(HTTPStatus.BAD_REQUEST, f"after={after} is not an item index (0..{n - 1})")
        with self._lock:
            order = range(n) if after is None else [*range(after + 1, n), *range(after + 1)]
            following = next((i for i in order if i not in self.judged), None)
            judged = len(self.judged)
        provenance = {k: v for k, v in self.pool.provenance.items() if k in ("id", "depth", "strategy", "systems")}
        low, high = self.scale
        return {
            "pool": provenance,
            "assessor": self.assessor,
            "scale": [low, high],
            "grades": [{"grade": g, "label": self._grade_word(g)} for g in range(low, high + 1)],
            "total": n,
            "judged": judged,
            "remaining": n - judged,
            "next": following,
            "done": judged == n,
            "queries": len(self.by_query),
            "out": str(self.out),
            "log": str(self.log_path),
        }

    def _grade_word(self, grade: int) -> str:
        if self.scale == (0, 3):
            return GRADE_WORDS[grade]
        return "not relevant" if grade == self.scale[0] else "fully relevant" if grade == self.scale[1] else ""

    def item(self, i: int) -> dict[str, Any]:
        """Item ``i`` with this assessor's grade, the qrels' grade, other assessors' grades, and the query's
        judged context (other pooled chunks graded, and the qrels' judgements of the query)."""
        n = len(self.pool.items)
        if not 0 <= i < n:
            raise RequestError(HTTPStatus.NOT_FOUND, f"no item {i}: the pool has items 0..{n - 1}")
        item = self.pool.items[i]
        pair = (item.query_id, item.doc_id)
        with self._lock:
            mine = self.mine.get(pair)
            base = self.base.get(item.query_id, {})
            context = []
            for j in self.by_query[item.query_id]:
                other = self.pool.items[j]
                if j == i:
                    continue
                grade = self.mine.get((other.query_id, other.doc_id))
                source = "you"
                if grade is None and other.doc_id in base:
                    grade, source = base[other.doc_id], "qrels"
                if grade is not None:
                    context.append(
                        {
                            "index": j,
                            "doc_id": other.doc_id,
                            "grade": grade,
                            "by": source,
                            "text": None if other.text is None else other.text[:SNIPPET],
                        }
                    )
            pooled = {self.pool.items[j].doc_id for j in self.by_query[item.query_id]}
            for doc, grade in base.items():
                if doc not in pooled:
                    context.append({"index": None, "doc_id": doc, "grade": grade, "by": "qrels", "text": None})
            others = dict(self.others.get(pair, {}))
        queries = list(self.by_query)
        return {
            "index": i,
            "query_id": item.query_id,
            "doc_id": item.doc_id,
            "query": item.query,
            "text": item.text,
            "ranks": dict(item.ranks),
            "query_number": queries.index(item.query_id) + 1,
            "queries": len(queries),
            "grade": mine,
            "qrels_grade": base.get(item.doc_id),
            "locked": item.doc_id in base,
            "others": others,
            "context": context[:CONTEXT_LIMIT],
            "context_more": max(0, len(context) - CONTEXT_LIMIT),
        }

    # ----- writing ------------------------------------------------------------------------------------------
    def judge(self, body: object) -> dict[str, Any]:
        """Record ``{"index": N, "grade": G}`` (``query_id`` and ``doc_id`` optional, checked against item N;
        or the pair alone): to the log, then to OUT. Returns the judgement and the state after item N."""
        if not isinstance(body, dict):
            raise RequestError(HTTPStatus.BAD_REQUEST, 'expected a JSON object {"index": N, "grade": G}')
        i = self._index_of(body)
        grade = body.get("grade")
        low, high = self.scale
        if isinstance(grade, bool) or not isinstance(grade, int):
            raise RequestError(HTTPStatus.BAD_REQUEST, f"grade must be an integer {low}..{high}, not {grade!r}")
        if not low <= grade <= high:
            raise RequestError(HTTPStatus.BAD_REQUEST, f"grade {grade} is outside the scale {low}..{high}")
        item = self.pool.items[i]
        with self._lock:
            if item.doc_id in self.base.get(item.query_id, {}):
                raise RequestError(
                    HTTPStatus.CONFLICT,
                    f"query {item.query_id!r}, doc {item.doc_id!r} is graded "
                    f"{self.base[item.query_id][item.doc_id]} in {self.out}; the page does not "
                    "change the grades it started from",
                )
            try:
                judgement = self.log.append(
                    item.query_id,
                    item.doc_id,
                    grade,
                    assessor=self.assessor,
                    scale=self.scale,
                    pool=self.pool.provenance,
                )
            except HarnessError as exc:  # not stored: the page says so, the item stays unjudged
                raise RequestError(_storage_status(exc), f"not saved: {exc}") from None
            self.mine[(item.query_id, item.doc_id)] = grade
            self.judged.add(i)
            try:
                self._write_out()
            except InputError as exc:  # the grade is in the log (kept); OUT catches up on the next write or start
                raise RequestError(
                    _storage_status(exc),
                    f"the grade is saved in {self.log_path}, but {self.out} could not be rewritten "
                    f"({exc.problem}); it is brought up to date once space is freed",
                ) from None
        return {"judgement": json.loads(judgement.to_json()), "index": i, "state": self.state(after=i)}

    def _index_of(self, body: dict[str, Any]) -> int:
        n = len(self.pool.items)
        index = body.get("index")
        pair = (body.get("query_id"), body.get("doc_id"))
        if pair != (None, None):
            if not all(isinstance(p, str) for p in pair):
                raise RequestError(HTTPStatus.BAD_REQUEST, "query_id and doc_id must both be strings")
            found = self.index.get(pair)  # type: ignore[arg-type]
            if found is None:
                raise RequestError(
                    HTTPStatus.BAD_REQUEST, f"query {pair[0]!r}, doc {pair[1]!r} is not in pool {self.pool.id}"
                )
            if index is not None and index != found:
                raise RequestError(HTTPStatus.BAD_REQUEST, f"item {index!r} is not query {pair[0]!r}, doc {pair[1]!r}")
            return found
        if isinstance(index, bool) or not isinstance(index, int):
            raise RequestError(HTTPStatus.BAD_REQUEST, f"index must be an integer 0..{n - 1}, not {index!r}")
        if not 0 <= index < n:
            raise RequestError(HTTPStatus.BAD_REQUEST, f"no item {index}: the pool has items 0..{n - 1}")
        return index

    def merged(self):
        """The qrels OUT holds now: those it started from, merged with the log (see ``ground_truth.merge``)."""
        return merge(self._base_qrels, self.log)

    def _write_out(self) -> None:
        write_qrels(self.merged().qrels, self.out)


class LabellingServer(ThreadingHTTPServer):
    """Serves one :class:`LabellingSession` on 127.0.0.1 (``port=0``: a free port, in :attr:`port`)."""

    daemon_threads = True

    def __init__(self, session: LabellingSession, *, port: int = 0, timeout: float = TIMEOUT) -> None:
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise InputError(f"port {port!r}: expected an int from 0 (a free port) to 65535")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < 3600:
            raise InputError(f"timeout {timeout!r}: expected seconds, more than 0 and less than 3600")
        self.session = session
        self.request_timeout = float(timeout)
        self.token = secrets.token_urlsafe(32)
        self.nonce = secrets.token_urlsafe(18)
        super().__init__(("127.0.0.1", port), _Handler)
        self.port: int = self.server_address[1]
        self.hosts = frozenset({f"127.0.0.1:{self.port}", f"localhost:{self.port}"})
        self.origins = frozenset(f"http://{h}" for h in self.hosts)
        page = resources.files(__package__).joinpath("page.html").read_text(encoding="utf-8")
        self.page = (
            page.replace("__RAG_EVAL_TOKEN__", self.token).replace("__RAG_EVAL_NONCE__", self.nonce).encode("utf-8")
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"


class _Handler(BaseHTTPRequestHandler):
    server: LabellingServer
    server_version = "rag-eval-label"
    sys_version = ""

    def setup(self) -> None:
        self.timeout = self.server.request_timeout  # a socket timeout: a silent client cannot hold the thread
        super().setup()

    def handle_one_request(self) -> None:
        # the whole request (its line, headers and body) must arrive within the timeout, however slowly it trickles:
        # at the deadline a watchdog shuts the connection's reading side, so every read ends at once
        self._expired = False
        self._watchdog = threading.Timer(self.server.request_timeout, self._expire)
        self._watchdog.daemon = True
        self._watchdog.start()
        try:
            super().handle_one_request()
        finally:
            self._watchdog.cancel()

    def _expire(self) -> None:
        self._expired = True
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RD)
        except OSError:
            pass

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
                    HTTPStatus.REQUEST_TIMEOUT, f"the request did not arrive within {self.server.request_timeout:g} s"
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
        server = self.server
        if self.headers.get("Host") not in server.hosts:
            raise RequestError(HTTPStatus.FORBIDDEN, "Host must be this server's own (127.0.0.1 or localhost)")
        origin = self.headers.get("Origin")
        if origin is not None and origin not in server.origins:
            raise RequestError(HTTPStatus.FORBIDDEN, f"requests from origin {origin!r} are refused")
        url = urlsplit(self.path)
        if url.path in ("/", "/index.html") and method == "GET":
            return HTTPStatus.OK, server.page
        if url.path == "/favicon.ico":
            return HTTPStatus.NO_CONTENT, {}
        routes = {("GET", "/api/state"), ("GET", "/api/item"), ("POST", "/api/judge")}
        if not url.path.startswith("/api/") or (method, url.path) not in routes:
            if any(p == url.path for _, p in routes):
                raise RequestError(HTTPStatus.METHOD_NOT_ALLOWED, f"{method} {url.path} is not allowed")
            raise RequestError(HTTPStatus.NOT_FOUND, "not found")
        if self.headers.get("Sec-Fetch-Site") not in (None, "same-origin", "none"):
            raise RequestError(HTTPStatus.FORBIDDEN, "cross-site requests are refused")
        if not hmac.compare_digest(self.headers.get(TOKEN_HEADER, "").encode(), server.token.encode()):
            raise RequestError(HTTPStatus.FORBIDDEN, f"missing or wrong {TOKEN_HEADER} (reload the page)")
        session = server.session
        query = parse_qs(url.query, keep_blank_values=True)
        if url.path == "/api/state":
            after = query.get("after", [None])[0]
            return HTTPStatus.OK, session.state(None if after is None else _int(after, "after"))
        if url.path == "/api/item":
            return HTTPStatus.OK, session.item(_int(query.get("i", [""])[0], "i"))
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
        deadline = time.monotonic() + self.server.request_timeout
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
                f"the body did not arrive within {self.server.request_timeout:g} s ({got} of {length} bytes)",
            ) from None
        finally:
            self.connection.settimeout(self.server.request_timeout)
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
            nonce = self.server.nonce
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


def _read_out(out: Path) -> dict[str, dict[str, int]]:
    """The qrels OUT holds (TREC format), or nothing when it does not exist or is empty."""
    if not out.exists():
        return {}
    if out.is_file() and not out.read_bytes().strip():
        return {}
    return Qrels.from_trec(out).to_dict()


def _storage_status(exc: Exception) -> int:
    """507 when the disk is full (or over quota), 500 for any other failure to store."""
    full = getattr(exc, "errno", None) in (errno.ENOSPC, errno.EDQUOT)
    return HTTPStatus.INSUFFICIENT_STORAGE if full else HTTPStatus.INTERNAL_SERVER_ERROR


def serve(
    pool_path: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    assessor: str,
    port: int = 0,
    scale: tuple[int, int] = (0, 3),
    stdout: IO[str] | None = None,
) -> int:
    """Label ``pool_path`` into ``out`` until Ctrl-C (what ``rag-eval label`` runs)."""
    stdout = stdout or sys.stdout
    pool = Pool.load(pool_path)
    given, out = Path(out), target_of(out)  # resolved before locking: a symlink and its target are one output
    if out.is_dir():
        raise InputError("is a directory, not a qrels file", source=str(given))
    if not out.parent.is_dir():
        raise InputError("no such directory to write the qrels file in", source=str(given))
    log = log_path_for(out)
    try:
        with file_lock(log, exclusive=True, blocking=False):  # one server per qrels file, for this process's life
            return _serve(pool, out, assessor=assessor, port=port, scale=scale, stdout=stdout)
    except BlockingIOError:
        raise InputError("another 'rag-eval label' is writing to this log; stop it first", source=str(log)) from None


def _serve(pool: Pool, out: Path, *, assessor: str, port: int, scale: tuple[int, int], stdout: IO[str]) -> int:
    session = LabellingSession(pool, out, assessor=assessor, scale=scale)
    try:
        server = LabellingServer(session, port=port)
    except OSError as exc:
        raise InputError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}") from None
    state = session.state()
    print(
        f"rag-eval: labelling {state['total']} items of pool {pool.id} at {server.url} (Ctrl-C to stop)",
        file=stdout,
        flush=True,
    )
    if state["done"]:
        print(f"rag-eval: every item is judged already; {out} is up to date", file=stdout, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    state = session.state()
    conflicts = len(session.merged().conflicts)
    print(
        f"rag-eval: {state['judged']} of {state['total']} judged; qrels in {out}, judgements in "
        f"{session.log_path}" + (f"; {conflicts} conflicting pair(s) between assessors" if conflicts else ""),
        file=stdout,
        flush=True,
    )
    return 0
