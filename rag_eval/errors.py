"""The errors rag_eval raises on purpose, and the warnings it gives.

Every problem with a user's input is an :class:`InputError` that names where it is (file and line, or query
and field) and what is wrong, so that the CLI can print one line and exit 2 instead of a traceback.

Every warning is a subclass of :class:`RagEvalWarning` (itself a ``UserWarning``), one class per kind, so that
tests and users can filter exactly the kind they mean
(``warnings.simplefilter("error", rag_eval.errors.InfiniteScore)``).
"""

from __future__ import annotations

__all__ = [
    "AmbiguousAnswer",
    "CappedResults",
    "DamagedShard",
    "DegenerateInterval",
    "DuplicateJudgement",
    "DuplicateResult",
    "FailedAnswers",
    "FailingGenerator",
    "FailingJudge",
    "FailingStage",
    "FewDistractors",
    "HarnessError",
    "IdsConverted",
    "InfiniteScore",
    "InputError",
    "JudgedDocsNotInCorpus",
    "LowAgreement",
    "LowJoinMatch",
    "LowJudgedShare",
    "LowQueryOverlap",
    "NearMissIds",
    "OldCacheKeys",
    "RagEvalError",
    "RagEvalWarning",
    "StaleGradedBy",
    "StarvedBudget",
    "TornLine",
    "TraceProblems",
    "TrecEvalParameterTruncated",
    "TrecEvalParametersIgnored",
    "UnevenSplit",
    "UnmappedChunks",
]


class RagEvalError(Exception):
    """Base class of the errors rag_eval raises on purpose."""


class InputError(RagEvalError, ValueError):
    """Bad input: a file, line, query or field that cannot be used, and why.

    ``str(error)`` reads ``source:line: problem`` (or ``source: problem`` when no line applies).
    """

    #: the errno of the OSError behind an output file that could not be written (``rag_eval._files.output_error``)
    errno: int | None = None

    def __init__(self, problem: str, *, source: str | None = None, line: int | None = None) -> None:
        self.problem = problem
        self.source = source
        self.line = line
        super().__init__(self._format())

    def _format(self) -> str:
        where = self.source or ""
        if self.line is not None:
            where = f"{where}:{self.line}" if where else f"line {self.line}"
        return f"{where}: {self.problem}" if where else self.problem


class HarnessError(RagEvalError):
    """rag_eval's own machinery failed (the stage cache could not be read or written, a result could not be
    stored): not the fault of a stage or of its query, so it stops the run, after keeping what is stored, instead of
    being recorded as a failed query. The message names the cache and what to do."""


class RagEvalWarning(UserWarning):
    """Base class of every warning rag_eval gives: something it kept going through, and what it did."""


class IdsConverted(RagEvalWarning):
    """Ids given as int were converted to str (pandas and JSON turn numeric ids into ints)."""


class NearMissIds(RagEvalWarning):
    """Ids of two inputs that differ only in whitespace, leading zeros, case or Unicode normalisation (NFC, NFKC):
    kept distinct, so they do not match (:mod:`rag_eval.data.near_miss`)."""


class DegenerateInterval(RagEvalWarning):
    """An interval of zero width from a sample (every paired difference the same, every human value alike): no
    spread among the queries measured, not certainty; the verdict says so (docs/gate.md, "Minimum n")."""


class DuplicateJudgement(RagEvalWarning):
    """A document judged twice for one query: the first judgement is kept."""


class DuplicateResult(RagEvalWarning):
    """A doc id repeated within one ranking: kept once, at its first (highest-ranked) position."""


class InfiniteScore(RagEvalWarning):
    """An infinite score was kept: +inf ranks first, -inf last."""


class OldCacheKeys(RagEvalWarning):
    """A stage cache directory holds only files written under an older key scheme: they are not reused."""


class DamagedShard(RagEvalWarning):
    """A stage cache shard that cannot be trusted (its checksum, its Arrow structure or its values are wrong): not
    read, set aside as ``<name>.damaged``, and its queries recomputed."""


class TornLine(RagEvalWarning):
    """A damaged line of a file rag_eval appends to (a judgement log), cut short by a kill or not a record: dropped,
    its judgement ignored. (A stage cache's damaged shard is a :class:`DamagedShard`.)"""


class StaleGradedBy(RagEvalWarning):
    """A qrels file's graded-by record (``QRELS.graded-by.json``: how many judgements model judges decided) written
    for other bytes than the qrels file holds now: ignored, so the card cannot say who graded the qrels."""


class StarvedBudget(RagEvalWarning):
    """A token budget that delivers no chunk to some queries: their first chunk alone exceeds it."""


class UnevenSplit(RagEvalWarning):
    """A split that keeps each group of queries (one question asked under several ids, or one group key) on one
    side, and so lands far from the share asked: the counts on each side are said."""


class UnmappedChunks(RagEvalWarning):
    """Projected chunks that the chunk map does not place (no document, or no character offsets)."""


class AmbiguousAnswer(RagEvalWarning):
    """An answer string that occurs more than once in its document: the first occurrence is used."""


class JudgedDocsNotInCorpus(RagEvalWarning):
    """Judged doc ids that the collection's corpus does not hold: recall stays below 1 on their queries."""


class FailingStage(RagEvalWarning):
    """A stage that failed on more than half of the queries it ran (a LangChain retriever whose documents have no
    ids fails on all of them): its metrics are 0 or missing for a reason of its own, said once with the count and
    the first error."""


class FailingJudge(RagEvalWarning):
    """A model judge that failed on more than half of the items it was asked to grade (a malformed answer, a
    timeout, an error of its own): said once, with the count and the first error; the failed items are not in the
    log and are asked again on the next run (:func:`rag_eval.ground_truth.judging.judge`)."""


class FailedAnswers(RagEvalWarning):
    """A generator call that failed while answering a context condition or grading a chunk's utility: each kept
    per item (answer None, EM and F1 NaN, the error beside it), said once with the count and the first error."""


class FewDistractors(RagEvalWarning):
    """Queries with fewer chunks judged irrelevant (grade 0, not delivered) than the distractors asked for: each is
    left out of those context conditions and counted, said once (:func:`rag_eval.stages.contexts.build_contexts`)."""


class FailingGenerator(RagEvalWarning):
    """A generator that failed on more than half of the queries it was asked: said once, with the count and the
    first error; those answers are missing (NaN, counted), never graded as wrong, and asked again on the next run."""


class CappedResults(RagEvalWarning):
    """A retriever that returns the same number of hits, fewer than the depth asked, on most queries: a cap of its
    own (LangChain's default ``k=4``, a store's limit), which bounds recall@depth."""


class LowAgreement(RagEvalWarning):
    """A model judge that agrees too little with people to stand in for them: on the items both graded, its
    quadratic-weighted Cohen's kappa is below the threshold (0.4 by default) or cannot be measured; or the systems'
    ranking under its qrels differs from the ranking under human qrels (Kendall's tau below 0.9 with five or more
    systems, or a pair of systems whose order or significance differs with fewer). See
    :mod:`rag_eval.ground_truth.agreement`."""


class LowJoinMatch(RagEvalWarning):
    """A join of two inputs (a run's doc ids and a corpus, a pool and a judgement log, one result folder's
    pipelines and another's) that matched few of its keys: how many matched of how many, said once per join
    (:func:`rag_eval.data.joins.join`). Nothing matched, where the output would be empty, is an InputError."""


class LowJudgedShare(RagEvalWarning):
    """A system's judged share is below the threshold: its scores are lower bounds."""


class LowQueryOverlap(RagEvalWarning):
    """Qrels and a run (or pipeline) that share no query, or under 10% of the judged queries (the wrong split):
    the scores are 0, or over a handful of queries, for a reason that is not the system's."""


class TraceProblems(RagEvalWarning):
    """Recorded spans that could not be read as given (a field missing, an orphan, a duplicate, a clock gone
    backwards, a traced query matching no query of the set): what was done, said once with the counts
    (:func:`rag_eval.stages.traced.from_traces`, docs/traces.md)."""


class TrecEvalParameterTruncated(RagEvalWarning):
    """A trec_eval ``-m`` cutoff written with a fraction (``ndcg_cut.10,20,23.4``): read as trec_eval reads it,
    with ``atol`` (23.4 is the cutoff 23), and said once per argument."""


class TrecEvalParametersIgnored(RagEvalWarning):
    """A trec_eval measure given parameters in two ``-m`` arguments (``-m P.5 -m P.10``): trec_eval uses the first
    list and ignores the others; so does rag_eval, and says so."""
