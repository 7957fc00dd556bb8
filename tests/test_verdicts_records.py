"""Issue 27, classes 3 and 4 (docs/bad-input/records.md, "Records of how a thing was made, checked when read", and
docs/bad-input/verdicts.md, "Held-out splits that are held out").

Class 3: whatever records how it was drawn or made (a human sample's seed, size, population, frame, strata and
inclusion probabilities; a query-set sample's card; a tuning result's split; a result folder's manifest; a pool's
id) is checked against that record when read, and a mismatch is an InputError naming the file and what differs.
Class 4: a split groups queries by normalised text (and by the user's group key), so that no question is on both
sides; where a clean split is impossible it says so."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import rag_eval
from rag_eval import Qrels, Run, evaluate
from rag_eval.adapters import functions
from rag_eval.cli import main
from rag_eval.data.groups import group_split, normalised_texts, query_groups, read_groups
from rag_eval.data.queryset import QueryProvenance, QuerySet, normalise
from rag_eval.drivers.tuning import Space, tune
from rag_eval.errors import InputError, UnevenSplit
from rag_eval.examples import BEIR_FOLDER
from rag_eval.ground_truth import sample_queries
from rag_eval.ground_truth.human_sample import HumanSample, draw_human_sample
from rag_eval.ground_truth.pooling import Pool
from rag_eval.statistics.prediction_powered import judge_assisted

IDS = [f"q{i:02d}" for i in range(12)]
MANY = [f"q{i:02d}" for i in range(40)]  # an estimate needs 10 human-graded queries or more


def _message(call, *args, **kwargs) -> str:
    with pytest.raises(InputError) as caught:
        call(*args, **kwargs)
    return str(caught.value)


def _edit(path, **changes):
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))
    return path


# ===== class 3: human samples =======================================================================================


def _reports(sample: HumanSample):
    """A judge report over the population and a human report over the sample: mrr of one fixed run, where a
    query's human value is 1 for q00..q02 and 0.25 for the rest."""
    ranking = {q: (["a", "x", "y"] if q in ("q00", "q01", "q02") else ["x", "y", "z", "a"]) for q in sample.population}
    run = Run.from_ranking(ranking, name="bm25")
    # the judge also calls x relevant on every third query: its values differ from people's there
    judge = evaluate({q: {"a": 1, "x": int(int(q[1:]) % 3 == 0)} for q in sample.population}, [run], ["mrr"])
    human = evaluate({q: {"a": 1} for q in sample.query_ids}, [run], ["mrr"])
    return judge, human


@pytest.mark.parametrize(("n", "seed"), [(10, 0), (12, 1), (15, 7), (20, 123)])
def test_a_drawn_sample_round_trips_and_is_called_seeded(tmp_path, n, seed):
    sample = draw_human_sample(MANY, n, seed=seed)
    path = tmp_path / "sample.json"
    sample.save(path)
    back = HumanSample.load(path)
    assert back == sample and back.redrawn and json.loads(path.read_text())["size"] == n
    result = judge_assisted(*_reports(back), sample=back)
    assert result.settings["seed"] == seed and f"uniform sample, seed {seed})" in result.render()


@pytest.mark.parametrize("seed", [0, 1, 2, 5])
def test_hand_picked_ids_under_a_recorded_seed_are_refused(tmp_path, seed):
    """The issue's example: the ids replaced by hand-picked ones (the three whose value is 1), the seed kept."""
    sample = draw_human_sample(IDS, 4, seed=seed)
    picked = ["q00", "q01", "q02", next(q for q in IDS[3:] if q not in sample.query_ids)]
    assert set(picked) != set(sample.query_ids)
    path = tmp_path / "sample.json"
    sample.save(path)
    _edit(path, query_ids=picked)
    message = _message(HumanSample.load, path)
    assert message.startswith(f"{path}: sample: the sample is not a uniform draw of 4 of its 12 population queries ")
    assert f"with seed {seed}, as it records" in message and "in the sample but not in that draw" in message
    for q in set(picked) - set(sample.query_ids):
        assert repr(q) in message


def test_the_issue_example_is_refused_by_rag_eval_estimate(tmp_path, capsys):
    sample = draw_human_sample(IDS, 4, seed=0)
    judge, _ = _reports(sample)
    hand = HumanSample(("q00", "q01", "q02", "q03"), tuple(IDS))  # what the hand-picked file stands for
    judge.save(tmp_path / "judge.parquet")
    _, human_hand = _reports(hand)
    _, everyone = _reports(HumanSample(tuple(IDS), tuple(IDS)))
    # the hand-picked queries' people mean (0.8125) is far from the population's (0.4375): a biased "sample"
    assert human_hand.values("bm25", "mrr").mean() == 0.8125 and everyone.values("bm25", "mrr").mean() == 0.4375
    human_hand.save(tmp_path / "human.parquet")
    path = tmp_path / "sample.json"
    sample.save(path)
    _edit(path, query_ids=["q00", "q01", "q02", "q03"])
    args = ["estimate", "--judge-report", str(tmp_path / "judge.parquet"), "--human-report"]
    args += [str(tmp_path / "human.parquet"), "--sample", str(path)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"{path}: sample: the sample is not a uniform draw of 4 of its 12 population queries with seed 0" in err


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"seed": 3}, "not a uniform draw of 4 of its 12 population queries with seed 3"),
        ({"seed": 1}, "not a uniform draw of 4 of its 12 population queries with seed 1"),
        ({"size": 5}, "it records a sample of 5 queries and lists 4"),
        ({"size": "4"}, "it records a sample of '4' queries and lists 4"),
        ({"design": "inclusion probabilities"}, "it records the design 'inclusion probabilities' and no inclusion"),
        ({"population": [*IDS, "q12", "q13"]}, "not a uniform draw of 4 of its 14 population queries with seed 0"),
    ],
)
def test_an_edited_seed_size_design_or_population_is_refused(tmp_path, change, expected):
    path = tmp_path / "sample.json"
    draw_human_sample(IDS, 4, seed=0).save(path)
    _edit(path, **change)
    message = _message(HumanSample.load, path)
    assert message.startswith(f"{path}: ") and expected in message


def test_ids_dropped_with_the_size_are_refused_unless_still_the_draw(tmp_path):
    sample = draw_human_sample(IDS, 5, seed=4)
    for dropped in sample.query_ids:
        kept = [q for q in sample.query_ids if q != dropped]
        path = tmp_path / f"without-{dropped}.json"
        sample.save(path)
        _edit(path, query_ids=kept, size=4)
        if set(kept) == set(draw_human_sample(IDS, 4, seed=4).query_ids):
            assert HumanSample.load(path).redrawn  # the draw of 4 that seed gives: a true seeded sample
        else:
            assert "in that draw but not in the sample" in _message(HumanSample.load, path)


def test_a_record_without_a_seed_is_not_called_seeded(tmp_path):
    path = tmp_path / "sample.json"
    draw_human_sample(MANY, 10, seed=0).save(path)
    data = json.loads(path.read_text())
    del data["seed"], data["size"], data["design"]
    data["query_ids"] = MANY[:10]
    path.write_text(json.dumps(data))
    hand = HumanSample.load(path)
    assert hand.seed is None and not hand.redrawn
    result = judge_assisted(*_reports(hand), sample=hand)
    assert result.settings["seed"] is None and "seed" not in result.render()
    data["population"] = data["population"][:-1] + ["q00"]  # a record missing a query of its population: refused
    path.write_text(json.dumps(data))
    assert "population: queries 'q00' are given more than once" in _message(HumanSample.load, path)
    del data["population"]
    path.write_text(json.dumps(data))
    assert _message(HumanSample.load, path) == f"{path}: 'population' must be a list of query ids"


def _population() -> QuerySet:
    """20 queries: five of heavy traffic, then fifteen of one visit, tenant acme or beta by parity."""
    qids = [f"q{i:02d}" for i in range(20)]
    return QuerySet(
        {q: f"query {q}" for q in qids},
        {
            q: QueryProvenance(
                source="t", frequency=100 if i < 5 else 1, columns={"tenant": "acme" if i % 2 else "beta"}
            )
            for i, q in enumerate(qids)
        },
    )


@pytest.mark.parametrize(("stratify", "seed"), [("frequency", 3), ("tenant", 1), ("frequency,tenant", 5), ((), 2)])
def test_a_stratified_sample_records_its_frame_and_is_redrawn(tmp_path, stratify, seed):
    population = _population()
    drawn = sample_queries(population, 8, stratify=stratify, seed=seed)
    sample = HumanSample.from_query_set(drawn, population)
    assert sample.redrawn and sample.frame is not None
    assert {q for _, members in sample.frame for q in members} == set(population)
    path = tmp_path / "sample.json"
    sample.save(path)
    assert HumanSample.load(path) == sample
    # a sampled query swapped for an unsampled one of the same stratum: inclusion and strata still agree
    stratum = sample.strata[sample.query_ids[0]]
    members = next(m for name, m in sample.frame if name == stratum)
    outside = [q for q in members if q not in sample.query_ids]
    if outside:
        data = json.loads(path.read_text())
        old, new = sample.query_ids[0], outside[0]
        data["query_ids"] = [new if q == old else q for q in data["query_ids"]]
        data["inclusion"][new] = data["inclusion"].pop(old)
        data["strata"][new] = data["strata"].pop(old)
        path.write_text(json.dumps(data))
        message = _message(HumanSample.load, path)
        assert "the sample is not a stratified draw of 8 of its 20 population queries" in message
        assert f"with seed {seed}" in message and repr(new) in message


def test_an_edited_stratum_inclusion_or_frame_is_refused(tmp_path):
    population = _population()
    sample = HumanSample.from_query_set(sample_queries(population, 8, stratify="frequency", seed=3), population)
    path = tmp_path / "sample.json"
    first = sample.query_ids[0]
    sample.save(path)
    data = json.loads(path.read_text())
    other = next(name for name, _ in sample.frame if name != sample.strata[first])
    _edit(path, strata={**data["strata"], first: other})
    assert "not the one the sampling frame gives them" in _message(HumanSample.load, path)
    sample.save(path)
    _edit(path, inclusion={**data["inclusion"], first: 0.5})
    assert "inclusion probability is not n_h / N_h of their stratum" in _message(HumanSample.load, path)
    sample.save(path)
    frame = [[name, [q for q in members if q != first]] for name, members in data["frame"]]
    _edit(path, frame=frame)
    assert "frame: its strata must hold each population query once" in _message(HumanSample.load, path)
    sample.save(path)
    _edit(path, frame=[["all", data["population"]]])
    assert "not the one the sampling frame gives them" in _message(HumanSample.load, path)


def test_a_stratified_sample_without_its_frame_is_not_called_seeded(tmp_path):
    population = _population()
    drawn = sample_queries(population, 8, stratify="frequency", seed=3)
    sample = HumanSample.from_query_set(drawn, list(population))  # ids alone: the frame cannot be recomputed
    assert sample.seed == 3 and sample.frame is None and not sample.redrawn
    path = tmp_path / "sample.json"
    sample.save(path)
    assert not HumanSample.load(path).redrawn
    # the population a stratified sample was not drawn from: refused, not taken on trust
    other = QuerySet(dict(population), {q: QueryProvenance(source="t") for q in population})
    message = _message(HumanSample.from_query_set, drawn, other)
    assert "their stratum is not the one the sampling frame gives them (e.g. 'q03': 'torso', not 'head')" in message


# ===== class 3: query-set samples ===================================================================================


def test_a_saved_sample_round_trips_and_records_its_hash(tmp_path):
    for stratify, seed in (("frequency", 0), ("tenant", 4), ((), 9)):
        drawn = sample_queries(_population(), 6, stratify=stratify, seed=seed)
        path = tmp_path / "sample.jsonl"
        drawn.save(path)
        header = json.loads(path.read_text().splitlines()[0])
        assert len(header["sha256"]) == 64
        assert QuerySet.load(path) == drawn


def _lines(path):
    return path.read_text(encoding="utf-8").splitlines()


def test_an_edited_query_set_sample_is_refused(tmp_path):
    drawn = sample_queries(_population(), 6, stratify="frequency", seed=0)
    path = tmp_path / "sample.jsonl"
    drawn.save(path)
    header, *queries = _lines(path)
    unsampled = next(q for q in _population() if q not in drawn)
    edits = {
        "an id replaced": [header, queries[0].replace(json.loads(queries[0])["id"], unsampled), *queries[1:]],
        "a query dropped": [header, *queries[1:]],
        "a text changed": [header, queries[0].replace('"text": "query', '"text": "QUERY'), *queries[1:]],
        "the seed changed": [header.replace('"seed": 0', '"seed": 1'), *queries],
        "a stratum's size changed": [header.replace('"sampled": ', '"sampled": 1', 1), *queries],
    }
    for what, lines in edits.items():
        edited = tmp_path / "edited.jsonl"
        edited.write_text("\n".join(lines) + "\n", encoding="utf-8")
        assert lines != [header, *queries], what
        message = _message(QuerySet.load, edited)
        assert message.startswith(f"{edited}:1: its card or queries are not those it was saved with"), what
        assert "a sample edited by hand is no longer the draw its card records" in message, what


def test_a_sample_without_its_hash_or_with_a_card_that_disagrees_is_refused(tmp_path):
    drawn = sample_queries(_population(), 6, stratify="frequency", seed=0)
    path = tmp_path / "sample.jsonl"
    drawn.save(path)
    header, *queries = _lines(path)
    record = json.loads(header)
    del record["sha256"]
    path.write_text("\n".join([json.dumps(record), *queries]) + "\n")
    assert "a sample (seed 0) whose header records no SHA-256 of its queries" in _message(QuerySet.load, path)
    # a card that disagrees with its queries (made in Python, then saved: the hash is right, the record is not)
    for card, problem in (
        ({"sample_size": 7}, "its card records a sample of 7 queries and the file holds 6"),
        ({"strata": {**drawn.card.strata, "head": {**drawn.card.strata["head"], "sampled": 9}}}, "drawn from stratum"),
        ({"strata": {k: v for k, v in drawn.card.strata.items() if k != "tail"}}, "which the card's strata do not"),
    ):
        drawn.replaced(**card).save(path)
        assert problem in _message(QuerySet.load, path)


def test_a_query_set_that_is_not_a_sample_is_checked_and_may_drop_its_hash(tmp_path):
    path = tmp_path / "set.jsonl"
    QuerySet.from_dict({"q1": "one", "q2": "two"}).save(path)
    header, first, second = _lines(path)
    path.write_text("\n".join([header, first, second.replace('"two"', '"deux"')]) + "\n")
    message = _message(QuerySet.load, path)
    assert "edited after QuerySet.save; to take the edits as they are, remove 'sha256' from the header" in message
    record = json.loads(header)
    del record["sha256"]
    path.write_text("\n".join([json.dumps(record), first, second.replace('"two"', '"deux"')]) + "\n")
    assert QuerySet.load(path)["q2"] == "deux"


# ===== class 3: pools and result folders ============================================================================


def _pool(tmp_path) -> tuple[Pool, object]:
    runs = [
        Run.from_ranking({"q1": ["a", "b", "c"], "q2": ["d", "e"]}, name="bm25"),
        Run.from_ranking({"q1": ["c", "x"], "q2": ["e", "f"]}, name="dense"),
    ]
    made = rag_eval.ground_truth.pool(runs, depth=2)
    path = tmp_path / "pool.jsonl"
    made.save(path)
    return made, path


def test_an_edited_pool_is_refused_by_its_id(tmp_path):
    made, path = _pool(tmp_path)
    assert Pool.load(path) == made
    lines = _lines(path)
    for what, edited in {
        "an item dropped": lines[:-1],
        "a doc id changed": [lines[0].replace('"doc_id": "a"', '"doc_id": "zz"'), *lines[1:]],
        "the depth changed": [line.replace('"depth": 2', '"depth": 3') for line in lines],
    }.items():
        path.write_text("\n".join(edited) + "\n")
        assert edited != lines, what
        message = _message(Pool.load, path)
        assert message.startswith(f"{path}:1: the pool id {made.id!r} it records is not that of the items"), what


def _log(path, fingerprints):
    from rag_eval.ground_truth import JudgementLog

    log = JudgementLog.open(path)
    grades = [("q1", "a", 2), ("q1", "b", 0), ("q2", "c", 1), ("q2", "d", 3)]
    for q, d, g in grades:
        log.append(q, d, g, assessor="alice")
    for n, (q, d, g) in enumerate(grades):
        fingerprint = fingerprints[n % len(fingerprints)]
        log.append(q, d, max(g - 1, 0), assessor="umbrela", judge={"fingerprint": fingerprint, "confidence": 0.5})
    return log


@pytest.mark.parametrize("fingerprints", [("fa", "fb"), ("fa", "fb", "fc"), ("9c41e07b2d10", "9c41e07b2d11")])
def test_a_judge_name_under_two_fingerprints_is_not_one_judge(tmp_path, capsys, fingerprints):
    from rag_eval.ground_truth.agreement import log_agreement
    from rag_eval.ground_truth.ordering import judge_uncertainty

    path = tmp_path / "log.jsonl"
    log = _log(path, fingerprints)
    shown = ", ".join(repr(f) for f in sorted(fingerprints))
    expected = f"{path}: judge 'umbrela' graded in this log under {len(fingerprints)} fingerprints ({shown})"
    assert _message(log_agreement, log, judge="umbrela").startswith(expected)
    assert _message(judge_uncertainty, log, judge="umbrela").startswith(expected)
    assert main(["agreement", str(path)]) == 2
    assert expected in capsys.readouterr().err
    one = _log(tmp_path / "one.jsonl", fingerprints[:1])
    assert one.one_judge("umbrela") == fingerprints[0] and one.one_judge("alice") == ""
    assert log_agreement(one, judge="umbrela", warn=False).n == 4
    assert judge_uncertainty(one, judge="umbrela") == {
        p: 0.5 for p in [("q1", "a"), ("q1", "b"), ("q2", "c"), ("q2", "d")]
    }


def _folder(tmp_path, **kwargs):
    qrels = Qrels.from_dict({"q1": {"a": 1}, "q2": {"e": 1}})
    runs = {"bm25": Run.from_ranking({"q1": ["a", "b"], "q2": ["d", "e"]}, name="bm25")}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = evaluate(qrels, runs, ["recall@2"])
        report.save_folder(tmp_path / "f", runs=runs, plots=False, **kwargs)
    return tmp_path / "f", qrels


def test_a_file_added_to_a_result_folder_is_not_read_as_its_own(tmp_path):
    from rag_eval.renderers.html_report import side_from_folder
    from rag_eval.reports import Report

    folder, qrels = _folder(tmp_path)  # written without qrels
    side = side_from_folder(Report.load_folder(folder), folder)
    assert side.qrels is None and ("bm25", None) in side.runs
    qrels.to_trec(folder / "qrels.txt")
    message = _message(side_from_folder, Report.load_folder(folder), folder)
    assert message == (
        f"{folder / 'qrels.txt'}: manifest.json does not list it: it was added after the folder was written, so it is "
        "not the folder's"
    )
    (folder / "qrels.txt").unlink()
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["files"].pop("runs/bm25.trec")
    (folder / "manifest.json").write_text(json.dumps(manifest))
    assert "runs/bm25.trec: manifest.json does not list it" in _message(
        side_from_folder, Report.load_folder(folder), folder
    )


# ===== class 4: groups and splits ===================================================================================


HOSTILE = [
    "What is RAG?",
    "what  is rag",
    "  WHAT IS RAG!!",
    "Ｗｈａｔ ｉｓ ＲＡＧ？",  # full-width: NFKC
    "cafe\u0301 hours",  # NFD
    "café hours",  # NFC
    "Straße",
    "STRASSE",
    "tab\tand\nnewline…",
    "tab and newline",
    "ﬁle",  # a ligature: NFKC
    "file",
]


def test_normalised_texts_are_normalise_of_each_text():
    assert list(normalised_texts(HOSTILE)) == [normalise(t) for t in HOSTILE]


def test_queries_asked_twice_are_one_group():
    ids = [f"h{i:02d}" for i in range(len(HOSTILE))]
    labels = query_groups(ids, dict(zip(ids, HOSTILE, strict=True)))
    assert labels.tolist() == [0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    # a user's key joins groups, and chains of shared keys are one group
    keys = {"h00": "conv-1", "h04": "conv-1", "h06": "conv-2", "h08": "conv-2"}
    joined = query_groups(ids, dict(zip(ids, HOSTILE, strict=True)), keys)
    assert joined.tolist() == [0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2]
    assert query_groups(ids, None, {"h01": 7, "h02": "7"}).tolist() == [0, 1, 1, *range(2, 11)]
    assert "1 query ids of the groups are not among the queries: 'zz'" in _message(query_groups, ids, None, {"zz": "g"})


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4, 5])
def test_a_split_never_puts_one_question_on_both_sides(seed):
    texts = {f"q{i:02d}": HOSTILE[i % len(HOSTILE)] + ("" if i < 12 else f" v{i // 12}") for i in range(36)}
    texts |= {f"d{i:02d}": HOSTILE[i].upper() + " " for i in range(12)}  # the same twelve again, shouted
    ids = sorted(texts)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnevenSplit)  # groups of up to 8 of 48 queries: a share off by a few is said
        tuning, held, facts = group_split(ids, query_groups(ids, texts), 0.5, seed)
    assert set(tuning) | set(held) == set(ids) and not set(tuning) & set(held)
    assert not {normalise(texts[q]) for q in tuning} & {normalise(texts[q]) for q in held}
    assert facts["groups"] == len({normalise(t) for t in texts.values()}) < len(ids)
    assert facts["tuning"] == len(tuning) and facts["held_out"] == len(held)


@pytest.mark.parametrize("seed", [0, 3, 11])
def test_a_split_of_distinct_queries_is_the_plain_shuffle(seed):
    ids = [f"q{i:03d}" for i in range(30)]
    tuning, held, facts = group_split(ids, query_groups(ids, {q: q for q in ids}), 0.4, seed)
    shuffled = [ids[i] for i in np.random.default_rng([seed, 0]).permutation(30).tolist()]
    assert (tuning, held) == (shuffled[:12], shuffled[12:]) and facts["grouped_queries"] == 0


def test_a_group_too_large_to_split_is_announced_or_refused():
    ids = [f"q{i:02d}" for i in range(20)]
    texts = {q: f"question {q}" for q in ids}
    big = {q: "tenant-a" for q in ids[:15]}
    with pytest.warns(
        UnevenSplit,
        match=r"holds 4 of 20 queries \(0\.20, not the 0\.50 asked\) and 16 are held out: .*\(15 queries in 1 group ",
    ):
        tuning, held, _ = group_split(ids, query_groups(ids, texts, big), 0.5, 0)
    assert not set(tuning) & set(held) and (set(ids[:15]) <= set(tuning) or set(ids[:15]) <= set(held))
    one = {q: "same" for q in ids}
    assert "nothing can be held out: the 20 queries are one group" in _message(
        group_split, ids, query_groups(ids, one), 0.5, 0
    )
    same = {q: "What is RAG?" if i % 2 else "what is rag" for i, q in enumerate(ids)}
    assert "nothing can be held out" in _message(group_split, ids, query_groups(ids, same), 0.5, 0)


def test_read_groups_reads_tsv_csv_and_json(tmp_path):
    tsv = tmp_path / "groups.tsv"
    tsv.write_text("# query\tgroup\nq1\tconv-1\nq2\tconv-1\n\nq3\tconv, with a comma\n")
    assert read_groups(tsv) == {"q1": "conv-1", "q2": "conv-1", "q3": "conv, with a comma"}
    csv = tmp_path / "groups.csv"
    csv.write_text("q1,a\nq2,b\n")
    assert read_groups(csv) == {"q1": "a", "q2": "b"}
    js = tmp_path / "groups.json"
    js.write_text('{"q1": "a", "q2": 3}')
    assert read_groups(js) == {"q1": "a", "q2": "3"}
    bad = tmp_path / "bad.tsv"
    bad.write_text("q1\ta\nq2\n")
    assert _message(read_groups, bad) == f"{bad}:2: expected 'query_id<TAB>group' (or 'query_id,group')"
    bad.write_text("q1\ta\nq1\tb\n")
    assert _message(read_groups, bad) == f"{bad}:2: query 'q1' is given a group twice"


# ----- tune: the split it makes, the split it is given, the split it reads back ------------------------------------

COLLECTION = rag_eval.Collection.from_beir(BEIR_FOLDER)
TEXTS = {d: f"{c.title} {c.content}".lower() for d, c in COLLECTION.corpus.items()}


def _words(query: str, k: int) -> list[tuple[str, float]]:
    asked = set(query.lower().split())
    scored = [(d, float(len(asked & set(t.split())))) for d, t in TEXTS.items()]
    return sorted(scored, key=lambda x: -x[1])[:k]


def _space() -> Space:
    return Space([functions.retriever(_words, name="words")], depth=5, budget=3)


def _doubled():
    """The tiny collection's queries, each asked again under a second id (shouted, with extra spaces)."""
    queries = dict(COLLECTION.queries)
    judged = {q: dict(g) for q, g in COLLECTION.qrels.judgements.items()}
    for q, text in COLLECTION.queries.items():
        queries[f"again-{q}"] = "  " + text.upper() + "  "
        if q in judged:
            judged[f"again-{q}"] = dict(judged[q])
    return queries, judged


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_tune_holds_out_every_form_of_a_held_out_question(tmp_path, seed):
    queries, judged = _doubled()
    found = tune(_space(), queries, judged, split=0.5, seed=seed, resamples=50, cache=tmp_path)
    tuning, held = found.split
    assert not {normalise(queries[q]) for q in tuning} & {normalise(queries[q]) for q in held}
    grouping = found.settings["grouping"]
    assert grouping["by"] == "normalised text" and grouping["groups"] == len(COLLECTION.queries)
    assert grouping["grouped_queries"] == len(queries) and grouping["tuning"] == len(tuning)
    assert abs(len(tuning) - len(held)) <= 2


def test_tune_with_a_group_key_and_a_given_split(tmp_path):
    queries, judged = _doubled()
    ids = sorted(COLLECTION.queries)
    groups = {q: "first-half" for q in ids[: len(ids) // 2]}
    found = tune(_space(), queries, judged, split=0.5, seed=0, groups=groups, resamples=50, cache=tmp_path)
    tuning, held = map(set, found.split)
    assert set(groups) <= tuning or set(groups) <= held
    assert found.settings["grouping"]["by"] == "normalised text and the groups given"
    # a given split with one question on both sides is refused, naming the two ids
    first = ids[0]
    given = ([first, *ids[1:4]], [f"again-{first}", *ids[4:8]])
    message = _message(tune, _space(), queries, judged, split=given, resamples=50, cache=tmp_path)
    assert message == (
        f"split: tuning query {first!r} and held-out query 'again-{first}' are one group (the same text after "
        "normalisation, or one group key): a held-out query must not be asked in the tuning part"
    )


def _saved(found, path):
    """tuning.json as rag-eval tune -o writes it (its split and settings)."""
    record = {"settings": found.settings, "split": {"tuning": list(found.split[0]), "held_out": list(found.split[1])}}
    path.write_text(json.dumps(record, default=str))
    return path


def test_a_saved_split_is_checked_against_its_record_when_read(tmp_path):
    queries, judged = _doubled()
    found = tune(_space(), queries, judged, split=0.5, seed=4, resamples=50, cache=tmp_path / "c")
    path = _saved(found, tmp_path / "tuning.json")
    again = tune(_space(), queries, judged, split=path, resamples=50, cache=tmp_path / "c")
    assert set(again.split[0]) == set(found.split[0]) and set(again.split[1]) == set(found.split[1])
    record = json.loads(path.read_text())
    swapped = dict(
        record,
        split={
            "tuning": [*record["split"]["tuning"][1:], record["split"]["held_out"][0]],
            "held_out": [*record["split"]["held_out"][1:], record["split"]["tuning"][0]],
        },
    )
    for what, edited in {
        "two ids swapped": swapped,
        "the seed edited": dict(record, settings={**record["settings"], "seed": 5}),
        "the share edited": dict(record, settings={**record["settings"], "split": 0.3}),
    }.items():
        path.write_text(json.dumps(edited))
        message = _message(tune, _space(), queries, judged, split=path, resamples=50, cache=tmp_path / "c")
        assert message.startswith(f"{path}: its split is not the one its record gives"), what
    path.write_text(json.dumps({"split": record["split"]}))
    assert "not a saved tuning result" in _message(tune, _space(), queries, judged, split=path, cache=tmp_path / "c")


def test_the_minilm_judge_keeps_one_question_in_one_fold():
    from rag_eval.builtin.judge import MiniLMJudge

    class Never:  # an encoder that must not be called: folds are made when the judge is built
        def __getattr__(self, name):
            raise AssertionError(name)

    queries = {f"q{i}": f"question {i % 4}" + ("?" if i >= 4 else "") for i in range(8)}
    labels = {(q, "d"): 1 for q in queries}
    judge = MiniLMJudge(labels, queries, {"d": "a text"}, folds=4, seed=0, encoder=Never())
    for q in queries:
        twin = f"q{(int(q[1:]) + 4) % 8}"
        assert judge.folds_of[q] == judge.folds_of[twin]
    assert judge.n_folds == 4
    same = {q: "the same question" for q in queries}
    with pytest.raises(InputError, match="2 distinct questions or more"):
        MiniLMJudge(labels, same, {"d": "a text"}, encoder=Never())


def make_words(collection):
    return functions.retriever(_words, name="words")


def test_rag_eval_tune_groups_and_reuses_a_saved_split(tmp_path, capsys, monkeypatch):
    """``rag-eval tune --groups FILE`` keeps a group on one side; ``--split-from OUT/tuning.json`` reuses the split
    after drawing it again, and refuses it once edited (exit 2, one line naming the file)."""
    import sys

    monkeypatch.setitem(sys.modules, "records_retrievers", sys.modules[__name__])
    ids = sorted(COLLECTION.queries)
    groups = tmp_path / "groups.tsv"
    groups.write_text("".join(f"{q}\tfirst\n" for q in ids[:6]))
    out = tmp_path / "out"
    argv = ["tune", "--beir", str(BEIR_FOLDER), "--retriever", "records_retrievers:make_words", "--depth", "5"]
    argv += ["--budget", "3", "--seed", "2", "--resamples", "50", "--no-plots", "--groups", str(groups)]
    uneven = "rag-eval: warning: split: the tuning part holds 3 of 10 queries (0.30, not the 0.50 asked) and 7 are held"
    warnings.simplefilter("always", UnevenSplit)  # the CLI prints it (one group of 6 of the 10 queries)
    assert main([*argv, "-o", str(out)]) == 0
    assert uneven in capsys.readouterr().err
    record = json.loads((out / "tuning.json").read_text())
    tuning, held = set(record["split"]["tuning"]), set(record["split"]["held_out"])
    assert set(ids[:6]) <= tuning or set(ids[:6]) <= held
    assert record["settings"]["grouping"]["by"] == "normalised text and the groups given"
    assert main([*argv, "--split-from", str(out / "tuning.json")]) == 0
    assert f"{len(tuning)} tuning queries; {len(held)} held out" in capsys.readouterr().out
    first_tuning, first_held = record["split"]["tuning"][0], record["split"]["held_out"][0]
    record["split"]["tuning"][0], record["split"]["held_out"][0] = first_held, first_tuning
    (out / "tuning.json").write_text(json.dumps(record))
    assert main([*argv, "--split-from", str(out / "tuning.json")]) == 2
    err = capsys.readouterr().err
    assert f"{out / 'tuning.json'}: its split is not the one its record gives (share 0.5, seed 2" in err
    assert repr(first_held) in err and repr(first_tuning) in err
