"""Gather the summaries of benchmark report folders into markdown tables (for benchmarks/RESULTS.md): the
stage-aware metrics of every stage, and the first stages' nDCG@10 beside published figures for the same model
and collection (recomputed from each folder's runs/ and qrels.txt).

    .venv/bin/python benchmarks/results_table.py bench-out/cranfield-5 bench-out/scifact-5 ...
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import rag_eval
from rag_eval._escape import markdown_cell
from rag_eval.renderers.result_folder import SHOWN

# the columns report.md shows for a pipeline, and where the missed relevant items went
COLUMNS = (*SHOWN, "loss.never_retrieved")


def cell(row) -> str:
    return f"{row['mean']:.3f} [{row['ci_low']:.3f}, {row['ci_high']:.3f}]"


def main(folders: list[str]) -> None:
    print("| collection | budget | pipeline | stage | " + " | ".join(COLUMNS) + " |")
    print("|---|---|---|---|" + "---|" * len(COLUMNS))
    for folder in folders:
        report = rag_eval.Report.load(Path(folder) / "report.parquet")
        pipeline = report.card.pipeline or {}
        dataset = Path(folder).name.rsplit("-", 1)[0]
        summary = report.summary
        for run in report.runs:
            rows = summary[summary["run"] == run]
            for stage in dict.fromkeys(rows["stage"]):
                cells = rows[rows["stage"] == stage].set_index("metric")
                values = [cell(cells.loc[m]) if m in cells.index else "" for m in COLUMNS]
                names = " | ".join(markdown_cell(n) for n in (dataset, pipeline.get("budget", ""), run, stage))
                print(f"| {names} | " + " | ".join(values) + " |")


# (collection, first stage) -> published nDCG@10 and where it is from
PUBLISHED = {
    (
        "scifact",
        "bm25",
    ): "0.687 (bm25s, Lucene k1 1.5 b 0.75, xhluca/bm25-benchmarks); 0.665 (BEIR paper, Elasticsearch BM25)",
    ("scifact", "dense"): "0.645 (all-MiniLM-L6-v2 on SciFact, as MTEB reports it)",
}


def ndcg10(folders: list[str]) -> None:
    print("| collection | first stage | nDCG@10 (ours, 95% CI) | published |")
    print("|---|---|---|---|")
    seen = set()
    for folder in folders:
        dataset = Path(folder).name.rsplit("-", 1)[0]
        qrels = rag_eval.Qrels.from_trec(Path(folder) / "qrels.txt")
        for stage in ("bm25", "dense", "hybrid"):
            path = Path(folder) / "runs" / f"{stage}.{stage}.trec"
            if not path.exists() or (dataset, stage) in seen:
                continue
            seen.add((dataset, stage))
            row = rag_eval.evaluate(qrels, rag_eval.Run.from_trec(path), ["ndcg@10"]).summary.iloc[0]
            missing = "none found" if stage != "hybrid" else "not a published configuration"
            print(f"| {markdown_cell(dataset)} | {stage} | {cell(row)} | {PUBLISHED.get((dataset, stage), missing)} |")


if __name__ == "__main__":
    main(sys.argv[1:])
    print()
    ndcg10(sys.argv[1:])
