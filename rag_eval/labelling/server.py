"""The labelling page's server (layer 5): the standard library's ``ThreadingHTTPServer`` on 127.0.0.1, and
:func:`serve`, what ``rag-eval label`` runs::

    rag-eval label POOL --qrels OUT [--assessor NAME] [--port N] [--scale 0..3] [--order pool|impact]

:class:`LabellingServer` serves one :class:`~rag_eval.labelling.session.LabellingSession` (what is judged, and how
each grade reaches the disk) through the request handler of :mod:`._handler` (the routes and the checks every
request passes: host, origin, token, content type, body size, timeout). :func:`serve` holds an exclusive lock on
the judgement log for as long as it runs, so that one qrels file has one server.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO

from .._checks import check_choice
from .._files import file_lock, target_of
from ..errors import InputError
from ..ground_truth import Pool
from ._handler import RequestHandler, Site
from .session import ORDERS, LabellingSession, log_path_for

__all__ = ["TIMEOUT", "LabellingServer", "serve"]

TIMEOUT = 10.0  # seconds a request may take to arrive whole (its line, headers and body)


class LabellingServer(ThreadingHTTPServer):
    """Serves one :class:`LabellingSession` on 127.0.0.1 (``port=0``: a free port, in :attr:`port`)."""

    daemon_threads = True

    def __init__(self, session: LabellingSession, *, port: int = 0, timeout: float = TIMEOUT) -> None:
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise InputError(f"port {port!r}: expected an int from 0 (a free port) to 65535")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < 3600:
            raise InputError(f"timeout {timeout!r}: expected seconds, more than 0 and less than 3600")
        # bound first: the site's hosts name the port, and the handler is given its site before anyone can connect
        super().__init__(("127.0.0.1", port), BaseHTTPRequestHandler, bind_and_activate=False)
        try:
            self.server_bind()
            self.port: int = self.server_address[1]
            self.site = Site.create(session, port=self.port, timeout=float(timeout))
            self.RequestHandlerClass = functools.partial(RequestHandler, site=self.site)
            self.server_activate()
        except BaseException:
            self.server_close()
            raise

    @property
    def session(self) -> LabellingSession:
        return self.site.session

    @property
    def token(self) -> str:
        """What every ``/api/`` request must carry in ``X-Rag-Eval-Token`` (the page has it)."""
        return self.site.token

    @property
    def nonce(self) -> str:
        """The page's Content-Security-Policy nonce."""
        return self.site.nonce

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"


def serve(
    pool_path: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    assessor: str,
    port: int = 0,
    scale: tuple[int, int] = (0, 3),
    order: str = "pool",
    judge_log: str | os.PathLike[str] | None = None,
    stdout: IO[str] | None = None,
) -> int:
    """Label ``pool_path`` into ``out`` until Ctrl-C (what ``rag-eval label`` runs); ``order="impact"`` serves
    the pool in impact order (:class:`LabellingSession`), its items weighted by the doubt (1 - confidence) of the
    model judges' grades in ``judge_log`` where given."""
    stdout = stdout or sys.stdout
    pool = Pool.load(pool_path)
    check_choice(order, "--order", ORDERS)  # before the lock and the port: a typo costs nothing
    uncertainty = None
    if judge_log is not None:
        if order != "impact":
            raise InputError("--judge-log orders the pool by the judge's doubt: it needs --order impact")
        from ..ground_truth import JudgementLog
        from ..ground_truth.ordering import judge_uncertainty

        uncertainty = judge_uncertainty(JudgementLog.load(judge_log))
    given, out = Path(out), target_of(out)  # resolved before locking: a symlink and its target are one output
    if out.is_dir():
        raise InputError("is a directory, not a qrels file", source=str(given))
    if not out.parent.is_dir():
        raise InputError("no such directory to write the qrels file in", source=str(given))
    log = log_path_for(out)
    existed = log.exists()
    try:
        with file_lock(log, exclusive=True, blocking=False):  # one server per qrels file, for this process's life
            try:
                return _serve(
                    pool,
                    out,
                    assessor=assessor,
                    port=port,
                    scale=scale,
                    order=order,
                    uncertainty=uncertainty,
                    stdout=stdout,
                )
            finally:
                with contextlib.suppress(OSError):  # made as the lock, and nothing stored: not left empty
                    if not existed and log.stat().st_size == 0:
                        log.unlink()
    except BlockingIOError:
        raise InputError("another 'rag-eval label' is writing to this log; stop it first", source=str(log)) from None


def _serve(
    pool: Pool,
    out: Path,
    *,
    assessor: str,
    port: int,
    scale: tuple[int, int],
    order: str,
    uncertainty: Mapping[tuple[str, str], float] | None,
    stdout: IO[str],
) -> int:
    session = LabellingSession(pool, out, assessor=assessor, scale=scale, order=order, uncertainty=uncertainty)
    pool = session.pool  # in the order served
    try:
        server = LabellingServer(session, port=port)
    except OSError as exc:
        raise InputError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}") from None
    state = session.state()
    ordered = " in impact order" if order == "impact" else ""
    ordered += ", weighted by the judge's doubt" if uncertainty is not None else ""
    print(
        f"rag-eval: labelling {state['total']} items of pool {pool.id}{ordered} at {server.url} (Ctrl-C to stop)",
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
    problem = session.storage_problem()  # grades the page answered 507 and not stored since: the outcome is not 0
    if problem is not None:
        print(f"rag-eval: error: {problem}", file=sys.stderr, flush=True)
        return 2
    return 0
