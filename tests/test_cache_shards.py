"""The stage cache's Arrow shards, at the store's own API: what is written when, what is read back, and what a
damaged, foreign or unwritable shard does (warned and recomputed, or a HarnessError naming the cache).

Faults are injected where they happen (``os.write`` raising ENOSPC or taking part of a shard, ``os.open`` refused,
``fsync`` failing, the directory removed); damaged shards are made by hand: cut short, a byte flipped, or written
whole with a correct checksum but values a Hit refuses.
"""

from __future__ import annotations

import errno
import os
import pickle
import shutil
import threading
import warnings
import zlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from rag_eval.errors import DamagedShard, HarnessError, InputError
from rag_eval.stages import _cache
from rag_eval.stages import hit_table as ht
from rag_eval.stages._cache import NoStore, StageCache, StageStore, StoreSpec
from rag_eval.stages.hits import Hit


def rows(*queries: tuple[str, str, list[Hit]], latency: float = 0.5) -> pa.Table:
    builder = ht.TableBuilder()
    for qid, qhash, hits in queries:
        builder.add(qid, qhash, hits, latency=latency, beyond_depth=("x9",) if qid == "q1" else (), issues=())
    return builder.table()


def ranking(q: str, n: int = 3, **fields) -> list[Hit]:
    return [Hit(f"{q}-d{i}", 1.0 / (i + 1), **fields) for i in range(n)]


def shards(directory: Path, store: StageStore | None = None) -> list[Path]:
    """The shards in place (once ``store``'s writer thread is done with the shard it was writing)."""
    if store is not None:
        store._settle()
    return sorted(directory.glob("shard-*.arrow"))


def write_raw(directory: Path, table: pa.Table, name: str | None = None) -> Path:
    """A shard written by hand with a correct checksum (its bytes are what they should be; its values may not)."""
    sink = pa.BufferOutputStream()
    with ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    data = sink.getvalue().to_pybytes()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / (name or f"shard-{9 * 10**18:019d}-1-{'ab' * 16}-{zlib.crc32(data):08x}.arrow")
    path.write_bytes(data)
    return path


def test_rows_put_are_found_in_the_order_asked_cached_and_whole(tmp_path):
    store = StageCache(tmp_path).store("bm25", "k1")
    store.put(rows(("q1", "h1", ranking("q1")), ("q2", "h2", ranking("q2", 2, text="t", tokens=4))))
    store.put(rows(("q3", "h3", [Hit("q3-d0", None, metadata={"page": 3, "src": "a"})])))
    found = store.lookup(["q3", "q9", "q1", "q2", "q1"], ["h3", "h9", "h1", "h2", "other-hash"])
    assert found.column("query_id").to_pylist() == ["q3", "q1", "q2"]  # q9 absent, q1 with another hash absent
    assert found.column("cached").to_pylist() == [True, True, True]
    assert found.column("latency").to_pylist() == [0.5, 0.5, 0.5]
    assert found.column("beyond_depth").to_pylist() == [[], ["x9"], []]
    hits = ht.hit_lists(found)
    assert hits[0] == (Hit("q3-d0", None, metadata={"page": 3, "src": "a"}),)
    assert hits[1] == tuple(ranking("q1"))
    assert hits[2] == tuple(ranking("q2", 2, text="t", tokens=4))
    assert found.schema.remove_metadata().equals(ht.schema(("text", "tokens", "metadata")))
    assert len(store) == 3


def test_a_shard_is_written_every_shard_queries_rows_or_shard_seconds_and_on_flush(tmp_path, monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(_cache.time, "monotonic", lambda: clock[0])
    store = StageCache(tmp_path, shard_queries=3, shard_seconds=10).store("bm25", "k1")
    store.put(rows(("q1", "h", ranking("q1")), ("q2", "h", ranking("q2"))))
    assert shards(store.directory, store) == []  # 2 pending, under both bounds
    store.put(rows(("q3", "h", ranking("q3"))))
    assert len(shards(store.directory, store)) == 1  # 3 rows: written
    clock[0] += 30
    store.put(rows(("q4", "h", ranking("q4"))))  # the oldest pending row from now on
    clock[0] += 5
    store.put(rows(("q5", "h", ranking("q5"))))
    assert len(shards(store.directory, store)) == 1  # 5 s since q4
    clock[0] += 5
    store.put(rows(("q6", "h", ranking("q6"))))  # 10 s since q4 (5 since q5): written
    assert len(shards(store.directory, store)) == 2
    store.put(rows(("q7", "h", ranking("q7"))))
    store.flush()
    store.flush()  # nothing pending: no empty shard
    assert len(shards(store.directory, store)) == 3
    reopened = StageStore(store.directory)
    assert reopened.shards == 3 and len(reopened) == 7
    found = reopened.lookup([f"q{i}" for i in range(1, 8)], ["h"] * 7)
    assert ht.hit_lists(found) == [tuple(ranking(f"q{i}")) for i in range(1, 8)]


def test_the_last_written_entry_wins_and_a_fresh_store_reads_every_shard(tmp_path):
    cache = StageCache(tmp_path, shard_queries=1)
    first = cache.store("rerank", "k")
    first.put(rows(("q1", "h", ranking("q1"))))
    # on disk before the other writer comes: put hands the shard to a writer thread, which a loaded machine (the
    # suite's other pytest-xdist worker) may delay past second's write, so that the count below saw one shard
    first.flush()
    second = cache.store("rerank", "k")  # another writer, opened later
    second.put(rows(("q1", "h", [Hit("new", 2.0)]), ("q2", "h", ranking("q2"))))
    assert len(shards(first.directory, second)) == 2
    again = cache.store("rerank", "k")
    assert ht.hit_lists(again.lookup(["q1", "q2"], ["h", "h"])) == [(Hit("new", 2.0),), tuple(ranking("q2"))]
    assert len(again) == 2
    # within one process, a pair put again is found with the later rows at once
    first.put(rows(("q2", "h", [Hit("newer", 1.0)])))
    assert ht.hit_lists(first.lookup(["q2"], ["h"])) == [(Hit("newer", 1.0),)]


def test_a_shard_name_holds_time_pid_uuid_and_checksum_and_no_temporary_stays(tmp_path):
    store = StageCache(tmp_path, shard_queries=1).store("my stage/1", "abc")
    assert store.directory == tmp_path / "my_stage_1-abc"
    store.put(rows(("q1", "h", ranking("q1"))))
    (path,) = shards(store.directory, store)
    match = _cache.SHARD.fullmatch(path.name)
    assert match is not None and int(match["pid"]) == os.getpid()
    assert f"{zlib.crc32(path.read_bytes()):08x}" == match["crc"]
    assert sorted(p.name for p in store.directory.iterdir()) == [path.name]


def test_the_spec_pickles_and_opens_the_same_store_and_nostore_has_the_same_calls(tmp_path):
    store = StageCache(tmp_path, shard_queries=7, shard_seconds=3).store("bm25", "k")
    store.put(rows(("q1", "h", ranking("q1"))))
    store.flush()
    spec = pickle.loads(pickle.dumps(store.spec()))
    assert spec == StoreSpec(str(store.directory), "bm25", 7, 3.0)
    opened = spec.open()
    assert isinstance(opened, StageStore) and opened.shard_queries == 7
    assert ht.hit_lists(opened.lookup(["q1"], ["h"])) == [tuple(ranking("q1"))]
    none = NoStore()
    assert none.lookup(["q1"], ["h"]).num_rows == 0 and none.damaged == 0
    none.put(rows(("q1", "h", ranking("q1"))))
    none.flush()
    assert isinstance(pickle.loads(pickle.dumps(none.spec())).open(), NoStore)
    assert store.lookup([], []).num_rows == 0


def test_put_refuses_failed_rows_and_tables_of_another_shape(tmp_path):
    store = StageCache(tmp_path).store("bm25", "k")
    builder = ht.TableBuilder()
    builder.add("q1", "h", None, error="boom")
    with pytest.raises(HarnessError, match="computed queries only"):
        store.put(builder.table())
    with pytest.raises(HarnessError, match="stage output schema"):
        store.put(pa.table({"query_id": ["q1"]}))


def test_bounds_are_checked():
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="shard_queries"):
            StageCache("unused-never-made", shard_queries=bad)
    for bad in (0, -2.0, float("nan"), "10"):
        with pytest.raises(ValueError, match="shard_seconds"):
            StageCache("unused-never-made", shard_seconds=bad)
    assert not Path("unused-never-made").exists()


def _good_store(tmp_path: Path) -> StageStore:
    store = StageCache(tmp_path, shard_queries=2).store("bm25", "k")
    store.put(rows(("q1", "h", ranking("q1")), ("q2", "h", ranking("q2"))))
    store.put(rows(("q3", "h", ranking("q3")), ("q4", "h", ranking("q4"))))
    assert len(shards(store.directory, store)) == 2
    return store


def _cut(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-40])


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", [_cut, _flip, lambda p: p.write_bytes(b""), lambda p: p.write_bytes(b"\0" * 999)])
def test_a_damaged_shard_is_warned_once_set_aside_and_its_queries_are_not_found(tmp_path, damage):
    store = _good_store(tmp_path)
    first, second = shards(store.directory, store)
    damage(first)
    with pytest.warns(DamagedShard, match=rf"1 damaged shard\(s\) not read .*recomputed: {first.name}: "):
        reopened = StageStore(store.directory)
    assert reopened.damaged == 1
    found = reopened.lookup(["q1", "q2", "q3", "q4"], ["h"] * 4)
    assert found.column("query_id").to_pylist() == ["q3", "q4"]  # the damaged shard's q1 and q2: to recompute
    assert (store.directory / (first.name + ".damaged")).exists() and not first.exists() and second.exists()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert StageStore(store.directory).damaged == 0  # said once


def _raw(queries: list[tuple[str, list[dict]]], hit_type: pa.DataType | None = None, **columns) -> pa.Table:
    """A table of the stage output's columns holding the values given (a Hit would refuse some of them)."""
    kind = hit_type or ht.hit_type(("tokens", "metadata"))
    n = len(queries)
    data = {
        "query_id": pa.array([q for q, _ in queries], pa.large_string()),
        "query_hash": pa.array(["h"] * n, pa.string()),
        "hits": pa.array([h for _, h in queries], pa.large_list(kind)),
        "error": pa.nulls(n, pa.large_string()),
        "latency": pa.array([0.1] * n, pa.float64()),
        "cached": pa.array([False] * n),
        "skipped": pa.array([False] * n),
        "beyond_depth": pa.array([[]] * n, pa.large_list(pa.large_string())),
        "issues": pa.array([[]] * n, pa.large_list(pa.large_string())),
    }
    data.update(columns)
    return pa.table(data)


def _hit(doc_id="d1", score=1.0, tokens=3, metadata=None):
    return {"doc_id": doc_id, "score": score, "tokens": tokens, "metadata": metadata}


BAD_VALUES = [
    ("a NaN score", _raw([("q1", [_hit(), _hit("d2", float("nan"))])])),
    ("a negative token count", _raw([("q1", [_hit(tokens=-100)])])),
    ("a null or empty doc id", _raw([("q1", [_hit(doc_id="")])])),
    ("a null or empty doc id", _raw([("q1", [_hit(doc_id=None)])])),
    ("hit metadata that is not a JSON object", _raw([("q1", [_hit(metadata="[1, 2]")])])),
    ("a failed row", _raw([("q1", [_hit()])], error=pa.array(["boom"], pa.large_string()))),
    ("a null hits", _raw([("q1", None)])),
    ("a null hit", _raw([("q1", [None])])),
    ("a NaN or negative latency", _raw([("q1", [_hit()])], latency=pa.array([float("nan")]))),
    ("a NaN or negative latency", _raw([("q1", [_hit()])], latency=pa.array([-1.0]))),
    ("a skipped row", _raw([("q1", [_hit()])], skipped=pa.array([True]))),
    (  # a score as text: the wrong type
        "its columns are not",
        _raw(
            [("q1", [{"doc_id": "d1", "score": "0.9"}])],
            hit_type=pa.struct([("doc_id", pa.large_string()), ("score", pa.string())]),
        ),
    ),
    ("its columns are not", pa.table({"query_id": ["q1"], "hits": [[1, 2]]})),
]


@pytest.mark.parametrize(("why", "table"), BAD_VALUES)
def test_a_shard_holding_values_a_hit_refuses_is_damaged_too(tmp_path, why, table):
    store = _good_store(tmp_path)
    bad = write_raw(store.directory, table)  # newest: it would override q1
    with pytest.warns(DamagedShard, match=rf"{bad.name}: {why.replace('(', '.').replace(')', '.')}"):
        reopened = StageStore(store.directory)
    assert reopened.damaged == 1
    assert ht.hit_lists(reopened.lookup(["q1"], ["h"])) == [tuple(ranking("q1"))]  # the good, older entry


def test_a_file_named_like_a_shard_without_a_checksum_is_set_aside(tmp_path):
    store = _good_store(tmp_path)
    (good,) = shards(store.directory, store)[:1]
    foreign = store.directory / "shard-copy.arrow"
    shutil.copy(good, foreign)
    with pytest.warns(DamagedShard, match=r"shard-copy.arrow: a name that is not a shard's"):
        reopened = StageStore(store.directory)
    assert reopened.damaged == 1 and len(reopened) == 4 and not foreign.exists()


def test_a_damaged_shard_that_cannot_be_set_aside_is_reported_each_time(tmp_path, monkeypatch):
    store = _good_store(tmp_path)
    first = shards(store.directory, store)[0]
    _cut(first)
    monkeypatch.setattr(os, "replace", lambda *a: (_ for _ in ()).throw(PermissionError(errno.EACCES, "denied")))
    with pytest.warns(DamagedShard, match="could not set 1 aside: they will be reported again"):
        StageStore(store.directory)
    monkeypatch.undo()
    with pytest.warns(DamagedShard, match=r"set aside as \*\.damaged"):
        StageStore(store.directory)


def _refuse_writes(monkeypatch, error: int, *, after: int = 0, partial: bool = False) -> None:
    """``os.write`` into a shard's temporary file: ``after`` writes go through, then each fails with ``error``
    (with ``partial``, after writing a few bytes of it)."""
    real_write = os.write
    count = [0]

    def write(fd, data):
        try:
            name = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            name = ""
        if ".shard-" in name:
            count[0] += 1
            if count[0] > after:
                if partial:
                    real_write(fd, bytes(data)[:7])
                raise OSError(error, os.strerror(error))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", write)


@pytest.mark.parametrize("partial", [False, True])
def test_a_full_disk_is_a_harness_error_and_keeps_what_was_stored(tmp_path, monkeypatch, partial):
    store = _good_store(tmp_path)
    before = {p.name: p.read_bytes() for p in shards(store.directory, store)}
    _refuse_writes(monkeypatch, errno.ENOSPC, partial=partial)
    store.put(rows(("q5", "h", ranking("q5")), ("q6", "h", ranking("q6"))))  # handed to the writer thread
    with pytest.raises(HarnessError, match=r"cache .*bm25-k: cannot store results: No space left on device; free"):
        store.flush()  # which raises what the writer met
    store.flush()  # said once; the failed rows are not written again (the run stopped)
    monkeypatch.undo()
    assert {p.name: p.read_bytes() for p in shards(store.directory, store)} == before
    assert sorted(p.name for p in store.directory.iterdir()) == sorted(before)  # no temporary file left
    assert len(StageStore(store.directory)) == 4


def test_a_failing_fsync_is_a_harness_error_and_leaves_no_shard(tmp_path, monkeypatch):
    store = _good_store(tmp_path)
    names = {p.name for p in store.directory.iterdir()}
    monkeypatch.setattr(os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(errno.EIO, "Input/output error")))
    store.put(rows(("q5", "h", ranking("q5")), ("q6", "h", ranking("q6"))))
    with pytest.raises(HarnessError, match=r"cannot store results: Input/output error; check the cache directory"):
        store.put(rows(("q7", "h", ranking("q7")), ("q8", "h", ranking("q8"))))  # the next hand-over raises it
    monkeypatch.undo()
    assert {p.name for p in store.directory.iterdir()} == names


def test_a_read_only_cache_is_a_harness_error_and_a_removed_one_says_so(tmp_path, monkeypatch):
    store = StageCache(tmp_path / "cache", shard_queries=1).store("bm25", "k")
    real_open = os.open

    def refusing(path, flags, *args, **kwargs):  # as root, chmod cannot refuse: the open does
        if ".shard-" in str(path) and flags & (os.O_WRONLY | os.O_RDWR):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", refusing)
    store.put(rows(("q1", "h", ranking("q1"))))
    with pytest.raises(HarnessError, match=r"Permission denied; make the directory writable, or pass another cache="):
        store.flush()
    monkeypatch.undo()
    shutil.rmtree(tmp_path / "cache")
    store.put(rows(("q2", "h", ranking("q2"))))
    with pytest.raises(HarnessError, match=r"cache .*cache: the cache directory was removed during the run"):
        store.flush()


def test_an_unreadable_shard_is_a_harness_error_not_damage(tmp_path, monkeypatch):
    store = _good_store(tmp_path)
    real = pa.memory_map

    def refusing(path, *args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied", path)

    monkeypatch.setattr(pa, "memory_map", refusing)
    with pytest.raises(HarnessError, match=r"cannot read a cache shard: Permission denied"):
        StageStore(store.directory)
    monkeypatch.setattr(pa, "memory_map", real)
    assert len(shards(store.directory, store)) == 2  # nothing set aside


def test_threads_and_stores_writing_one_directory_at_once_lose_nothing(tmp_path):
    cache = StageCache(tmp_path, shard_queries=5)
    stores = [cache.store("bm25", "k") for _ in range(3)]

    def work(i: int) -> None:
        for j in range(40):
            q = f"q{i}-{j}"
            stores[i % 3].put(rows((q, "h", ranking(q, 2))))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for store in stores:
        store.flush()
    again = cache.store("bm25", "k")
    wanted = [f"q{i}-{j}" for i in range(6) for j in range(40)]
    found = again.lookup(wanted, ["h"] * len(wanted))
    assert found.column("query_id").to_pylist() == wanted
    assert ht.hit_lists(found) == [tuple(ranking(q, 2)) for q in wanted]
    assert again.damaged == 0


def test_a_temporary_left_by_a_killed_writer_is_removed_when_the_store_opens(tmp_path):
    store = _good_store(tmp_path)
    stale = store.directory / f".shard-1-2-x.arrow.{2**22 + 12345}.1.rag_eval.tmp"  # a process id that is gone
    stale.write_bytes(b"half a shard")
    StageStore(store.directory)
    assert not stale.exists()


def test_lookup_across_many_shards_is_vectorised_and_exact(tmp_path):
    store = StageCache(tmp_path, shard_queries=50).store("bm25", "k")
    rng = np.random.default_rng(3)
    for start in range(0, 1000, 50):
        store.put(rows(*((f"q{i}", f"h{i}", ranking(f"q{i}", 1 + i % 4)) for i in range(start, start + 50))))
    store.flush()
    again = StageStore(store.directory)
    assert again.shards == 20
    asked = [int(i) for i in rng.permutation(1200)[:600]]  # some never stored
    found = again.lookup([f"q{i}" for i in asked], [f"h{i}" for i in asked])
    kept = [i for i in asked if i < 1000]
    assert found.column("query_id").to_pylist() == [f"q{i}" for i in kept]
    assert ht.hit_lists(found) == [tuple(ranking(f"q{i}", 1 + i % 4)) for i in kept]


def test_refresh_reads_the_shards_other_writers_wrote_since_the_store_opened(tmp_path):
    cache = StageCache(tmp_path, shard_queries=1)
    mine, theirs = cache.store("bm25", "k"), cache.store("bm25", "k")
    mine.put(rows(("q1", "h", ranking("q1"))))
    assert theirs.lookup(["q1"], ["h"]).num_rows == 0  # opened before it was written
    assert mine.refresh() == 0  # its own shard is indexed already (refresh waits for it to be written)
    assert theirs.refresh() == 1 and theirs.refresh() == 0
    assert ht.hit_lists(theirs.lookup(["q1"], ["h"])) == [tuple(ranking("q1"))]
    _cut(shards(mine.directory, mine)[0])
    mine.put(rows(("q2", "h", ranking("q2"))))
    mine.flush()
    with pytest.warns(DamagedShard, match="1 damaged shard"):
        fresh = cache.store("bm25", "k")
    assert fresh.damaged == 1 and len(fresh) == 1
    assert NoStore().refresh() == 0


def test_a_run_keeps_each_stage_once_in_one_chunk_first_run_and_rerun(tmp_path):
    # the runner's block tables (and, on a rerun, the cache's memory-mapped rows) are copied into one table per
    # stage and let go: a stage's hits are held once, not as blocks and a combined copy, and not by a store kept
    # alive after the run (its rows are the blocks)
    from rag_eval.stages import Pipeline, Reranker, Retriever

    class Ranked(Retriever):
        def search(self, query, k):
            return [Hit(f"{query}-{i}", 1.0 / (i + 1)) for i in range(k)]

    class Reverse(Reranker):
        def rerank(self, query, hits):
            return list(reversed(hits))

    queries = {f"q{i}": f"q{i}" for i in range(2500)}  # three blocks of the local runner
    pipeline = Pipeline(Ranked("ranked"), Reverse("reverse"), depth=100)
    outputs = []
    for _ in range(2):  # the first run, then the rerun from the cache
        before = pa.total_allocated_bytes()
        result = pipeline.run(queries, cache=tmp_path / "cache", progress=False)
        tables = [result.stages[name].table for name in ("ranked", "reverse")]
        assert all(column.num_chunks == 1 for table in tables for column in table.columns)
        hits = sum(table.column("hits").nbytes for table in tables)
        assert pa.total_allocated_bytes() - before < 0.1 * hits  # no block left in Arrow's pool (row columns only)
        outputs.append([table.select(["query_id", "hits"]).to_pylist() for table in tables])
        del result, tables
    assert outputs[0] == outputs[1]
    assert outputs[0][1][7]["hits"][0]["doc_id"] == "q7-99"


def test_an_empty_cache_directory_is_refused_not_the_current_folder():
    with pytest.raises(InputError, match="the cache directory must not be empty"):
        StageCache("")
