"""Result folders: a report with everything needed to read, check and recompute it, in one documented layout.

What :meth:`Report.save_folder` writes and :meth:`Report.load_folder` reads and checks against the manifest, and
:func:`comparable`, how two folders (or reports, cards) differ in their content hashes: ``docs/result-folders.md``.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError

from .._escape import csv_text, markdown_code
from .._files import all_or_none, current, write_output
from .._markdown import markdown_cell
from .._version import __version__
from ..data.collection import Collection
from ..data.qrels import Qrels
from ..data.run import Run
from ..errors import InputError
from ..metrics.conventions import Conventions
from ..reports.answer_runs import answers_markdown
from ..reports.card import CARD_KEY, ContentHashes, MetricCard
from ..reports.hashes import FIELDS, content_hashes, corpus_sha256, qrels_sha256
from ..reports.report import Report
from ..stages.result import PipelineResult

if TYPE_CHECKING:
    import pandas as pd

    from ..stages.result import StageOutput

__all__ = [
    "ANSWERS_FILE",
    "FORMAT",
    "FORMAT_VERSION",
    "MANIFEST",
    "FolderReport",
    "Manifest",
    "add_answers",
    "answers_csv",
    "comparable",
    "differences",
    "folder_card",
    "load_folder",
    "load_manifest",
    "load_results",
    "save_folder",
    "write_folder",
]

FORMAT = "rag_eval result folder"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
# the stage-aware metrics report.md shows for pipelines, in this order
SHOWN = (
    "recall@depth",
    "recall@budget",
    "precision@budget",
    "ndcg@budget",
    "mrr@budget",
    "rerank_gain@budget",
    "cand_ndcg@budget",
    "loss.delivered",
)
#: the answers of a folder whose report carries them (Report.with_answers), one row per query
ANSWERS_FILE = "answers.csv"
#: the files add_answers writes again (judge_agreement.json: rag-eval answers --judge's, when a judge is given)
_ANSWERED = {"report.parquet", "card.json", "report.md", ANSWERS_FILE, "judge_agreement.json"}
#: what report.md says beside a metric whose name does not say what it is a gain of
SHOWN_AS = {"rerank_gain@budget": "recall@budget after − before"}


def _fate_words(metric: str, result: PipelineResult | None) -> str:
    """A loss share's fate in words, naming what cut the items: the reranker(s) or the budget."""
    from ..reports.fates import fate_label

    fate = metric.removeprefix("loss.")
    rerankers = [name for name, out in result.stages.items() if out.role == "reranker"] if result else []
    return fate_label(fate, " or ".join(rerankers) if fate == "reranked_out" else None).replace("'", "")


class Manifest(BaseModel):
    """``manifest.json``: what the folder is, what it was computed on, and the SHA-256 of each of its files."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format: str = FORMAT
    format_version: int = FORMAT_VERSION
    rag_eval_version: str = __version__
    hashes: ContentHashes | None = None
    files: dict[str, str]  # path relative to the folder (POSIX) -> SHA-256 (hex)


class FolderReport(Protocol):
    """What a result folder is written from: a :class:`~rag_eval.reports.report.Report` (named by what it offers:
    any object with the members it reads)."""

    @property
    def card(self) -> MetricCard: ...
    @property
    def runs(self) -> list[str]: ...
    @property
    def metrics(self) -> list[str]: ...
    @property
    def text_metrics(self) -> list[str]: ...
    @property
    def per_query(self) -> pd.DataFrame: ...
    @property
    def per_query_text(self) -> pd.DataFrame: ...
    @property
    def summary(self) -> pd.DataFrame: ...
    @property
    def loss_items(self) -> pd.DataFrame: ...
    @property
    def failures(self) -> pd.DataFrame: ...
    @property
    def recall_curves(self) -> pd.DataFrame: ...
    @property
    def answers(self) -> pd.DataFrame: ...
    def save(self, path: str | os.PathLike[str]) -> None: ...


def safe_name(text: str) -> str:
    """A run's or stage's name as a file name: characters other than letters, digits, ``.``, ``_`` and ``-``
    replaced by ``_``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "x"


class _Writer:
    """Writes the folder's files, each whole (atomically), keeping the SHA-256 of each for the manifest."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.files: dict[str, str] = {}

    def write(self, name: str, data: bytes) -> Path:
        path = self.folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        write_output(path, data)
        self.files[name] = hashlib.sha256(data).hexdigest()
        return path

    def text(self, name: str, text: str) -> Path:
        return self.write(name, text.encode("utf-8"))

    def csv(self, name: str, frame: pd.DataFrame) -> Path:
        return self.text(name, csv_text(frame))

    def parquet(self, name: str, frame: pd.DataFrame) -> Path:
        buffer = io.BytesIO()
        frame.to_parquet(buffer, index=False)
        return self.write(name, buffer.getvalue())


def _split_runs(
    runs: Mapping[str, Run | PipelineResult] | Run | PipelineResult | None,
) -> tuple[dict[str, Run], dict[str, PipelineResult]]:
    """``runs`` as plain runs or as pipeline results (one kind, not both)."""
    if runs is None:
        return {}, {}
    if isinstance(runs, Run):
        return {runs.name: runs}, {}
    if isinstance(runs, PipelineResult):
        return {}, {repr(runs.pipeline): runs}
    if not isinstance(runs, Mapping):
        raise TypeError(f"runs must be a {{name: Run}} or {{name: PipelineResult}} mapping, not {type(runs).__name__}")
    plain = {k: v for k, v in runs.items() if isinstance(v, Run)}
    results = {k: v for k, v in runs.items() if isinstance(v, PipelineResult)}
    if len(plain) + len(results) != len(runs) or (plain and results):
        raise TypeError("runs must map names to Runs, or names to PipelineResults (what Pipeline.run returns)")
    return plain, results


def _run_files(
    plain: Mapping[str, Run], results: Mapping[str, PipelineResult], where: str
) -> dict[str, tuple[Run, str | None]]:
    """``{runs/<name>.trec: (run, tag)}`` (a stage's run is tagged with the stage, a plain run keeps its own tag);
    two runs whose names give one file name are an InputError naming both."""
    named: dict[str, tuple[str, Run, str | None]] = {}
    every: list[tuple[str, str, Run, str | None]] = [
        (name, f"runs/{safe_name(name)}.trec", run, None) for name, run in plain.items()
    ]
    every += [
        (f"{p} / {stage}", f"runs/{safe_name(p)}.{safe_name(stage)}.trec", run, safe_name(stage))
        for p, result in results.items()
        for stage, run in result.runs.items()
    ]
    for who, file, run, tag in every:
        if file in named:
            raise InputError(
                f"{named[file][0]!r} and {who!r} would both be written to {file}: give them names that differ in "
                "letters, digits, '.', '_' or '-'",
                source=where,
            )
        named[file] = (who, run, tag)
    return {file: (run, tag) for file, (_, run, tag) in named.items()}


def folder_card(
    report: FolderReport,
    folder: str | os.PathLike[str],
    *,
    qrels: Qrels | Mapping[str, Mapping[str, int]] | None = None,
    runs: Mapping[str, Run | PipelineResult] | Run | PipelineResult | None = None,
    collection: Collection | None = None,
) -> tuple[MetricCard, Qrels | None, dict[str, Run], dict[str, PipelineResult]]:
    """The card a folder of ``report`` carries, and the qrels, plain runs and pipeline results it holds, checked:
    the qrels (or ``collection``'s) must be those the report was computed on (the same content hash), every run one
    the report measured, no two runs written to one file; ``collection`` fingerprints the whole corpus in the card's
    hashes. Each refusal is an InputError naming the folder, raised before anything is written."""
    out = Path(folder)
    where = str(out)
    if out.exists() and not out.is_dir():
        raise InputError("not a folder: a result folder is written into a folder", source=where)
    plain, results = _split_runs(runs)
    if qrels is None and collection is not None:
        qrels = collection.qrels
    card = report.card
    hashes = card.hashes
    if qrels is not None:
        if not isinstance(qrels, Qrels):
            qrels = Qrels.from_dict(qrels)
        if hashes is None:  # a report saved before content hashes: computed now from what is given
            hashes = content_hashes(qrels, conventions=card.conventions, results=results or None)
        elif hashes.qrels != qrels_sha256(qrels):
            raise InputError(
                f"the qrels given (sha256:{qrels_sha256(qrels)[:12]}) are not those the report was computed on "
                f"(sha256:{(hashes.qrels or 'unknown')[:12]}): a folder holds one report and its own qrels",
                source=where,
            )
    if collection is not None and hashes is not None:
        corpus, basis = corpus_sha256(collection)
        hashes = hashes.model_copy(update={"corpus": corpus, "corpus_basis": basis})
    unknown = [name for name in (*plain, *results) if name not in report.runs]
    if unknown:
        raise InputError(
            f"run {unknown[0]!r} is not one the report measured ({report.runs}): a folder holds the runs its report "
            "was computed on, under the report's names",
            source=where,
        )
    _run_files(plain, results, where)
    return (card if hashes is card.hashes else card.model_copy(update={"hashes": hashes})), qrels, plain, results


def write_folder(
    report: FolderReport,
    folder: str | os.PathLike[str],
    *,
    qrels: Qrels | None = None,
    plain: Mapping[str, Run] | None = None,
    results: Mapping[str, PipelineResult] | None = None,
    title: str | None = None,
    facts: Mapping[str, Any] | None = None,
    plots: bool = True,
) -> Path:
    """Write ``report`` as a result folder (the module's layout) with ``qrels``, the ``plain`` runs or pipeline
    ``results`` it was computed on (checked first by :func:`folder_card`, which :meth:`Report.save_folder` calls);
    returns the path of ``report.md``. ``title`` and ``facts`` (``{label: Markdown}``) head report.md. A file
    listed by the folder's previous manifest and not written again is removed."""
    out = Path(folder)
    plain, results = dict(plain or {}), dict(results or {})
    files = _run_files(plain, results, str(out))
    previous = _previous_files(out)
    writer = _Writer(out)
    with all_or_none(out):  # every file whole to its temporary, then all renamed: a failure changes none
        path = _write_files(writer, report, qrels, files, results, title, facts, plots)
    for stale in previous.difference(writer.files):
        with contextlib.suppress(OSError):  # a stale file that cannot be removed is not listed: ignored
            (out / stale).unlink()
    return path


def _write_files(
    writer: _Writer,
    report: FolderReport,
    qrels: Qrels | None,
    files: dict[str, tuple[Run, str | None]],
    results: Mapping[str, PipelineResult],
    title: str | None,
    facts: Mapping[str, Any] | None,
    plots: bool,
) -> Path:
    """The folder's files, the manifest last (inside :func:`rag_eval._files.all_or_none`); the path of report.md."""
    out = writer.folder
    report.save(out / "report.parquet")
    writer.files["report.parquet"] = _sha256_of(current(out / "report.parquet"))
    card = report.card
    writer.text("card.json", card.model_dump_json(indent=2) + "\n")
    per_query, summary = report.per_query, report.summary
    writer.csv("summary.csv", summary)
    writer.parquet("summary.parquet", summary)
    writer.csv("per_query.csv", per_query)
    writer.parquet("per_query.parquet", per_query)
    if report.text_metrics:
        writer.csv("per_query_text.csv", report.per_query_text)
    if qrels is not None:
        qrels.to_trec(out / "qrels.txt")  # its checks: an id that would not read back is an InputError
        writer.files["qrels.txt"] = _sha256_of(current(out / "qrels.txt"))
    for file, (run, tag) in files.items():
        path = out / file
        path.parent.mkdir(parents=True, exist_ok=True)
        run.to_trec(path, tag=tag)
        writer.files[file] = _sha256_of(current(path))
    if results:
        writer.csv("loss_items.csv", report.loss_items)
    if card.answers is not None:
        writer.csv(ANSWERS_FILE, answers_csv(report.answers))
    pictures: list[Path] = []
    if plots and results and qrels is not None:
        pictures = _plots(writer, report, results, qrels)
    path = writer.text("report.md", _markdown(title or out.resolve().name, report, results, facts or {}, pictures))
    manifest = Manifest(hashes=card.hashes, files=dict(sorted(writer.files.items())))
    write_output(out / MANIFEST, (manifest.model_dump_json(indent=2) + "\n").encode())
    return path


def _sha256_of(path: Path) -> str:
    sha = hashlib.sha256()
    with open(path, "rb") as file:
        for chunk in iter(lambda: file.read(1 << 20), b""):
            sha.update(chunk)
    return sha.hexdigest()


def _previous_files(folder: Path) -> set[str]:
    """The files the folder's current manifest lists (safely inside the folder), or none."""
    try:
        manifest = _parse_manifest(folder)
    except (InputError, FileNotFoundError):
        return set()
    return set(manifest.files)


def _parse_manifest(folder: Path) -> Manifest:
    where = str(folder / MANIFEST)
    if not folder.is_dir():
        raise InputError("not a folder (a result folder is written by Report.save_folder)", source=str(folder))
    if not (folder / MANIFEST).is_file():
        raise FileNotFoundError(where)
    try:
        manifest = Manifest.model_validate_json((folder / MANIFEST).read_bytes())
    except ValidationError as exc:
        first = exc.errors()[0]
        at = ".".join(map(str, first["loc"]))
        raise InputError(
            f"not a result folder's manifest ({at + ': ' if at else ''}{first['msg']})", source=where
        ) from None
    if manifest.format != FORMAT:
        raise InputError(f"format {manifest.format!r}, not {FORMAT!r}", source=where)
    if manifest.format_version > FORMAT_VERSION:
        raise InputError(
            f"format version {manifest.format_version}: written by a newer rag_eval ({manifest.rag_eval_version}) "
            f"than this one ({__version__}, which reads version {FORMAT_VERSION})",
            source=where,
        )
    for name, digest in manifest.files.items():
        pure = PurePosixPath(name)
        if pure.is_absolute() or ".." in pure.parts or "\\" in name or not name or name == MANIFEST:
            raise InputError(f"it lists {name!r}, which is not a file inside the folder", source=where)
        if not re.fullmatch(r"[0-9a-f]{64}", digest):
            raise InputError(f"the SHA-256 of {name!r} is not 64 hex digits: {digest!r}", source=where)
    return manifest


def save_folder(
    report: Report,
    folder: str | os.PathLike[str],
    *,
    qrels: Qrels | Mapping[str, Mapping[str, int]] | None = None,
    runs: Mapping[str, Run | PipelineResult] | Run | PipelineResult | None = None,
    collection: Collection | None = None,
    title: str | None = None,
    facts: Mapping[str, Any] | None = None,
    plots: bool | None = None,
) -> Path:
    """:meth:`Report.save_folder`: ``report`` as a result folder; ``plots`` None draws them when matplotlib is
    installed. Returns the path of ``report.md``."""
    if plots is None:
        import importlib.util

        plots = importlib.util.find_spec("matplotlib") is not None
    card, checked, plain, results = folder_card(report, folder, qrels=qrels, runs=runs, collection=collection)
    shown = report if card is report.card else report.with_card(card)
    return write_folder(
        shown, folder, qrels=checked, plain=plain, results=results, title=title, facts=facts, plots=plots
    )


def load_folder(folder: str | os.PathLike[str]) -> Report:
    """:meth:`Report.load_folder`: the report of a result folder, each file checked against the manifest's SHA-256
    (a file changed or missing is an InputError naming it); the card's content hashes must be the manifest's."""
    manifest = load_manifest(folder)
    report = Report.load(Path(folder) / "report.parquet")
    if report.card.hashes != manifest.hashes:
        raise InputError(
            f"the content hashes of report.parquet's card are not those of {MANIFEST}", source=str(Path(folder))
        )
    return report


def load_manifest(folder: str | os.PathLike[str]) -> Manifest:
    """The folder's manifest, after checking every file it lists against its SHA-256: a file missing, or whose
    content differs from what was written, is an InputError naming it."""
    root = Path(folder)
    try:
        manifest = _parse_manifest(root)
    except FileNotFoundError:
        raise InputError(
            f"no {MANIFEST}: not a result folder written by Report.save_folder (rag_eval 0.2.0 or later); "
            "Report.load(<folder>/report.parquet) reads its report without checking the folder",
            source=str(root),
        ) from None
    if "report.parquet" not in manifest.files:
        raise InputError("it does not list report.parquet", source=str(root / MANIFEST))
    for name, digest in manifest.files.items():
        path = root / name
        if not path.is_file():
            raise InputError(f"missing: {MANIFEST} lists it", source=str(path))
        found = _sha256_of(path)
        if found != digest:
            raise InputError(
                f"its SHA-256 is {found[:12]}..., not {digest[:12]}... as {MANIFEST} says: the file was changed "
                "after the folder was written",
                source=str(path),
            )
    return manifest


def listed_file(folder: Path, name: str) -> bool:
    """Whether the result folder's manifest lists ``name`` (a file :func:`load_manifest` checks); a file there that
    it does not list was added after the folder was written: an InputError naming it, never read as the folder's."""
    try:
        files = _parse_manifest(folder).files
    except FileNotFoundError:
        files = {}
    if name in files:
        return True
    if (folder / name).is_file():
        raise InputError(
            f"{MANIFEST} does not list it: it was added after the folder was written, so it is not the folder's",
            source=str(folder / name),
        )
    return False


def load_results(folder: str | os.PathLike[str]) -> dict[str, PipelineResult]:
    """The pipeline results a result folder holds, ``{run: PipelineResult}``, rebuilt from its checked files (the
    card's structure, depth, budget, stage roles and fingerprints, one TREC run per stage): rankings and scores
    only (a TREC run keeps no text). A query absent from a stage's run is a failure of that stage. A folder of
    plain runs, a token budget (the runs hold no text to count) or a stage run the manifest does not list is an
    InputError naming the folder."""
    from ..stages.budget import Budget
    from ..stages.result import PipelineSpec, StageSpec

    root = Path(folder)
    report = load_folder(root)
    card = report.card
    if not card.pipeline:
        raise InputError("it holds plain runs, not pipeline results: no stages to compare", source=str(root))
    out: dict[str, PipelineResult] = {}
    for entry in card.pipeline.get("all", [card.pipeline]):
        run_name, structure = str(entry["run"]), str(entry["structure"])
        shown = str(entry["budget"]).removeprefix("budget(").removesuffix(")")
        budget = Budget.parse(int(shown) if shown.isascii() and shown.isdigit() else shown)
        if budget.tokens is not None:
            raise InputError(
                f"{run_name!r} has a token budget ({budget}): its TREC runs hold no text to count it by",
                source=str(root),
            )
        roles: dict[str, str] = dict(entry["stages"])
        prints: dict[str, str] = dict(entry.get("fingerprints") or {})
        names = list(roles)
        query_ids = report.query_ids(run_name if len(report.runs) > 1 else report.runs[0], names[-1])
        stages: dict[str, StageOutput] = {}
        for stage in names:
            file = f"runs/{safe_name(run_name)}.{safe_name(stage)}.trec"
            if not listed_file(root, file):
                raise InputError(f"{MANIFEST} lists no {file}: the folder lacks stage {stage!r}", source=str(root))
            stages[stage] = _stage_output(
                stage, roles[stage], prints.get(stage, ""), Run.from_trec(root / file), query_ids
            )
        specs = tuple(
            StageSpec(s, roles[s], "reranker" if roles[s] == "reranker" else "retriever", "", prints.get(s, ""), "")
            for s in names
        )
        spec = PipelineSpec(structure, int(entry["depth"]), budget, specs)
        out[run_name] = PipelineResult(spec, {q: q for q in query_ids}, stages)
    return out


def _stage_output(name: str, role: str, fingerprint: str, run: Run, query_ids: list[str]) -> StageOutput:
    """One stage's output from its TREC run, a row per query of ``query_ids`` (absent from the run: failed)."""
    from ..stages.hit_table import TableBuilder
    from ..stages.hits import Hit
    from ..stages.result import StageOutput

    frame = run.to_frame()
    docs = frame["doc_id"].to_numpy(dtype=object)
    scores = frame["score"].to_numpy(np.float64)
    starts = dict(zip(run.query_ids, run.offsets[:-1].tolist(), strict=True))
    ends = dict(zip(run.query_ids, run.offsets[1:].tolist(), strict=True))
    builder = TableBuilder()
    for q in query_ids:
        if q not in starts:
            builder.add(q, "", None, error="not in the folder's run of this stage")
            continue
        a, b = starts[q], ends[q]
        builder.add(q, "", [Hit(d, s) for d, s in zip(docs[a:b].tolist(), scores[a:b].tolist(), strict=True)])
    return StageOutput(name, role, fingerprint, builder.table())


Comparable = FolderReport | MetricCard | ContentHashes | str | os.PathLike[str]


def comparable(a: Comparable, b: Comparable) -> list[str]:
    """How ``a`` and ``b`` differ in what their numbers were computed on (qrels, query set, corpus, conventions,
    budget; :mod:`rag_eval.reports.hashes`): one line per difference, empty when they are comparable. Each is a
    Report, a MetricCard, a ContentHashes, a result folder (its files checked against its manifest first) or a
    report saved by ``Report.save``. A side without content hashes (saved before rag_eval 0.2.0) is a difference:
    nothing says they agree. The CI gate refuses to compare folders for which this is not empty."""
    return [line for _, line in differences(a, b)]


def differences(a: Comparable, b: Comparable, *, names: tuple[str, str] = ("a", "b")) -> list[tuple[str, str]]:
    """:func:`comparable`'s differences as ``(what, line)`` pairs: ``what`` is the hash that differs (one of
    :data:`~rag_eval.reports.hashes.FIELDS`), or ``"hashes"`` when a side has none; each line names the two
    sides by ``names`` (the gate says ``baseline`` and ``candidate``)."""
    na, nb = names
    ha, hb = _hashes_of(a), _hashes_of(b)
    if ha is None or hb is None:
        which = " and ".join(n for n, h in ((na, ha), (nb, hb)) if h is None)
        return [
            (
                "hashes",
                f"{which}: no content hashes (saved before rag_eval 0.2.0): nothing says they were computed alike",
            )
        ]
    out = []
    for name in FIELDS:
        va, vb = getattr(ha, name), getattr(hb, name)
        ba, bb = getattr(ha, f"{name}_basis", None), getattr(hb, f"{name}_basis", None)
        if ba != bb and (va is not None or vb is not None):
            out.append((name, f"{name}: hashed from {ba or 'nothing'} in {na}, from {bb or 'nothing'} in {nb}"))
        elif va != vb:
            shown = (va or "unknown", vb or "unknown") if name == "budget" else (_short(va), _short(vb))
            out.append((name, f"{name}: {shown[0]} in {na}, {shown[1]} in {nb}"))
    ca, cb = _conventions_of(a), _conventions_of(b)
    if ca is not None and cb is not None and ha.conventions != hb.conventions:
        fields = [k for k in ca if ca[k] != cb.get(k)]
        out.append(
            ("conventions", "conventions differ in " + ", ".join(f"{k} ({ca[k]!r} vs {cb.get(k)!r})" for k in fields))
        )
    return out


def _short(value: str | None) -> str:
    return "unknown" if value is None else f"sha256:{value[:12]}"


def _card_of(thing: object) -> MetricCard | None:
    """The card of a MetricCard, of a report, or of a saved report's file (read from its metadata alone)."""
    if isinstance(thing, MetricCard):
        return thing
    card = getattr(thing, "card", None)
    if isinstance(card, MetricCard):
        return card
    if isinstance(thing, (str, os.PathLike)) and not os.path.isdir(thing):
        import pyarrow as pa
        import pyarrow.parquet as pq

        where = os.fspath(thing)
        try:
            meta = pq.read_schema(where).metadata or {}
        except (pa.ArrowException, OSError) as exc:
            if isinstance(exc, FileNotFoundError):
                raise
            raise InputError(f"not a Parquet file ({' '.join(str(exc).split())})", source=where) from None
        if CARD_KEY not in meta:
            raise InputError("not a rag_eval report (no metric card in its metadata)", source=where)
        try:
            return MetricCard.model_validate_json(meta[CARD_KEY])
        except ValidationError as exc:
            raise InputError(f"its metric card does not parse ({exc.errors()[0]['msg']})", source=where) from None
    return None


def _hashes_of(thing: object) -> ContentHashes | None:
    if isinstance(thing, ContentHashes):
        return thing
    if isinstance(thing, (str, os.PathLike)) and os.path.isdir(thing):
        return load_manifest(thing).hashes
    card = _card_of(thing)
    if card is None:
        raise TypeError(
            "comparable() takes reports, metric cards, content hashes, result folders or saved reports, not "
            f"{type(thing).__name__}"
        )
    return card.hashes


def _conventions_of(thing: object) -> dict[str, Any] | None:
    """The conventions as a dict, when ``thing`` carries a card."""
    if isinstance(thing, (str, os.PathLike, ContentHashes)):
        return None
    card = _card_of(thing)
    conventions: Conventions | None = card.conventions if card is not None else None
    return conventions.model_dump(mode="json") if conventions is not None else None


# ----- report.md -----------------------------------------------------------------------------------------------


def _ci(row: Mapping[Any, Any]) -> str:
    if np.isnan(row["mean"]):
        return "n/a"
    return f"{row['mean']:.3f} [{row['ci_low']:.3f}, {row['ci_high']:.3f}]"


def _seconds(value: Any) -> str:
    """A latency cell: n/a where nothing was timed (a stage served from the cache), as the HTML page says."""
    return "n/a" if value is None or not np.isfinite(value) else f"{value:.4f}"


def _markdown(
    title: str,
    report: FolderReport,
    results: Mapping[str, PipelineResult],
    facts: Mapping[str, Any],
    pictures: list[Path],
) -> str:
    from ..reports.funnel_text import funnel_markdown, funnel_of

    summary = report.summary
    lines = [f"# {markdown_cell(title)}", ""]
    found = funnel_of(report) if results else None  # type: ignore[arg-type]  # a FolderReport is what it reads
    if found:  # the answer first: where each pipeline's relevant items went, its headline numbers; then the detail
        lines += [funnel_markdown(found), "## Detail", ""]
    lines += [f"- {markdown_cell(k)}: {v}" for k, v in facts.items()]  # facts are Markdown (e.g. `code`) by design
    lines += [
        "",
        "Values are means over the queries with a 95% bootstrap interval (1,000 resamples, seed 0), as in "
        "`summary.csv`. n counts the queries a mean is over; n_nan the counted queries whose value is 0/0 (NaN), "
        "left out of that mean; n + n_nan is the number of queries the metric card says were counted.",
        "",
    ]
    if results:
        lines[-2] += (
            " `@depth` is the first stage's candidate depth, `@budget` what the generator receives. n_failed counts "
            "queries a stage failed on (scored as an empty ranking, or left out: see the card's conventions)."
        )
        lines += _pipeline_markdown(report, results, summary)
    else:
        lines += ["| run | metric | mean [95% CI] | n | n_nan |", "|---|---|---:|---:|---:|"]
        for row in summary.to_dict("records"):
            run, metric = markdown_cell(row["run"]), markdown_cell(row["metric"])
            lines.append(f"| {run} | {metric} | {_ci(row)} | {int(row['n'])} | {int(row['n_nan'])} |")
        lines.append("")
    if report.card.answers is not None:
        lines += answers_markdown(report.card, file=ANSWERS_FILE)
    if pictures:
        lines += ["## Plots", ""] + [f"![{p.stem}](plots/{p.name})" for p in pictures] + [""]
    lines += ["## Metric card", "", markdown_code(report.card.render())]
    return "\n".join(lines)


def _pipeline_markdown(report: FolderReport, results: Mapping[str, PipelineResult], summary: pd.DataFrame) -> list[str]:
    lines: list[str] = []
    for pipeline, result in results.items():
        rows = summary[summary["run"] == pipeline]
        shown = [m for m in SHOWN if m in set(rows["metric"])]
        lines += [
            f"## {markdown_cell(pipeline)}",
            "",
            "| stage | metric | mean [95% CI] | n | n_nan | n_failed |",
            "|---|---|---:|---:|---:|---:|",
        ]
        for stage in result.stages:
            cells = {r["metric"]: r for r in rows[rows["stage"] == stage].to_dict("records")}
            for m in shown:
                if m in cells:
                    c = cells[m]
                    counts = f"{int(c['n'])} | {int(c['n_nan'])} | {int(c['n_failed'])}"
                    label = f"{m} ({SHOWN_AS[m]})" if m in SHOWN_AS else m
                    lines.append(f"| {markdown_cell(stage)} | {label} | {_ci(c)} | {counts} |")
        loss = [r for r in rows.to_dict("records") if str(r["metric"]).startswith("loss.")]
        if loss:
            base = loss[0]
            lines += [
                "",
                f"Where the relevant items went (mean share per query, over the {int(base['n'])} queries with "
                f"a relevant item; {int(base['n_nan'])} without one left out): "
                + ", ".join(f"{markdown_cell(_fate_words(str(r['metric']), result))} {r['mean']:.1%}" for r in loss),
            ]
        lines += [
            "",
            "| stage | p50 s/query | p95 s/query | computed | from cache | failed |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        lines += [
            f"| {markdown_cell(r['stage'])} | {_seconds(r['p50'])} | {_seconds(r['p95'])} | {r['n']} | "
            f"{r['cache_hits']} | {r['failed']} |"
            for r in result.latency.to_dict("records")
        ]
        lines.append("")
    failures = report.failures
    if len(failures):
        lines += ["## Failures", "", "| stage | query | error |", "|---|---|---|"]
        lines += [
            f"| {markdown_cell(r['stage'])} | {markdown_cell(r['query_id'])} | {markdown_cell(r['error'])} |"
            for r in failures.head(50).to_dict("records")
        ]
        lines.append("")
    return lines


# ----- answers ------------------------------------------------------------------------------------------------


def answers_csv(table: pd.DataFrame) -> pd.DataFrame:
    """The answer table as ``answers.csv`` writes it: the context ids joined by a space, the references by `` | ``."""
    frame = table.copy()
    frame["context_ids"] = [" ".join(ids) for ids in frame["context_ids"]]
    frame["references"] = [" | ".join(refs) for refs in frame["references"]]
    return frame


def add_answers(
    folder: str | os.PathLike[str],
    report: Report,
    *,
    out: str | os.PathLike[str] | None = None,
    columns: Mapping[str, list[Any]] | None = None,
    files: Mapping[str, bytes] | None = None,
) -> Path:
    """Write ``report`` (the folder's own, with answers attached: :meth:`Report.with_answers`) back into its result
    ``folder``, or into ``out`` as a copy of the folder: report.parquet, card.json, ``answers.csv``, report.md's
    Answers section and metric card, and the manifest; every other file as it was. ``columns`` (``{name: one value a
    query}``, e.g. a judge's verdicts) are added to ``answers.csv``; ``files`` (``{name: bytes}``, e.g.
    ``judge_agreement.json``) are written and listed, and an earlier run's file of those names not given again is
    removed. All or nothing. Returns the folder written."""
    source = Path(folder)
    target = Path(out) if out is not None else source
    manifest = load_manifest(source)  # every file checked first
    if report.card.hashes != manifest.hashes:
        raise InputError("the report's content hashes are not the folder's: answers go into their own folder",
                         source=str(source))  # fmt: skip
    markdown = (source / "report.md").read_text("utf-8") if "report.md" in manifest.files else None
    writer = _Writer(target)
    with all_or_none(target):
        if target.resolve() != source.resolve():
            for name in manifest.files:
                if name not in _ANSWERED and name not in (files or {}):
                    writer.write(name, (source / name).read_bytes())
        else:  # in place: the files kept are listed again as they are
            writer.files.update({k: v for k, v in manifest.files.items() if k not in _ANSWERED})
        report.save(target / "report.parquet")
        writer.files["report.parquet"] = _sha256_of(current(target / "report.parquet"))
        writer.text("card.json", report.card.model_dump_json(indent=2) + "\n")
        writer.csv(ANSWERS_FILE, answers_csv(report.answers).assign(**dict(columns or {})))
        for name, data in (files or {}).items():
            writer.write(name, data)
        if markdown is not None:
            writer.text("report.md", _with_answers_section(markdown, report))
        new = Manifest(hashes=report.card.hashes, files=dict(sorted(writer.files.items())))
        write_output(target / MANIFEST, (new.model_dump_json(indent=2) + "\n").encode())
    for stale in {"judge_agreement.json"} - set(writer.files):  # an earlier run's is not of these answers
        with contextlib.suppress(OSError):
            (target / stale).unlink()
    return target


def _with_answers_section(markdown: str, report: Report) -> str:
    """report.md with its Answers section (re)placed before the plots or the card, and its metric card rendered
    again."""
    assert report.card.answers is not None
    text = re.sub(r"\n## Answers\n.*?(?=\n## )", "", markdown, flags=re.DOTALL)
    head = text.split("\n## Metric card\n", 1)[0]
    section = "\n".join(answers_markdown(report.card, file=ANSWERS_FILE))
    at = head.find("\n## Plots\n")
    head = head + "\n" + section if at < 0 else head[: at + 1] + section + "\n" + head[at + 1 :]
    return head.rstrip("\n") + "\n\n" + "\n".join(["## Metric card", "", markdown_code(report.card.render())])


# ----- plots ---------------------------------------------------------------------------------------------------

#: the folder's plot files, by the figure each holds (rag_eval.renderers.plots)
PLOT_FILES = {"recall": "recall_at_k.png", "loss": "loss_attribution.png", "scatter": "recall_vs_final.png"}


def _plots(writer: _Writer, report: FolderReport, results: Mapping[str, PipelineResult], qrels: Qrels) -> list[Path]:
    """recall@k of every stage, the loss attribution and per query recall against the final metric (PNG)."""
    from .plots import figures, folder_panels

    made = figures(folder_panels(report, results), extra="bench", feature="the plots of a result folder")
    import matplotlib.pyplot as plt

    written: list[Path] = []
    for name, fig in made.items():
        buffer = io.BytesIO()
        fig.savefig(buffer, dpi=110, format="png", metadata={"Software": None}, bbox_inches="tight")
        plt.close(fig)
        written.append(writer.write(f"plots/{PLOT_FILES[name]}", buffer.getvalue()))
    return written
