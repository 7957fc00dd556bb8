"""Groups of queries that stay on one side of a split (layer 1), so that a held-out part is held out.

Two query ids are in one group when their texts are equal after :func:`rag_eval.data.queryset.normalise` (the
same question asked twice: NFKC, case, whitespace, trailing punctuation) or when the user's group key
(``groups={query_id: key}``: a conversation, a user, a source document) is the same; groups are the connected
components of both (SciPy's ``connected_components``), so a chain of shared keys is one group.
:func:`group_split` splits whole groups (docs/tuning.md, "How the queries are split").
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import InputError, UnevenSplit
from .input_files import read_input, warn

__all__ = ["group_split", "normalised_texts", "query_groups", "read_groups"]

#: how far (a share of the queries) a grouped split may land from the share asked before it is announced
UNEVEN = 0.1


def normalised_texts(texts: Sequence[str]) -> np.ndarray:
    """:func:`~rag_eval.data.queryset.normalise` of every text, as whole-column string work (pandas)."""
    import pandas as pd

    from .queryset import _TRAILING

    series = pd.Series(list(texts), dtype=object)
    out = series.str.normalize("NFKC").str.casefold().str.split().str.join(" ").str.replace(_TRAILING, "", regex=True)
    return out.to_numpy(dtype=object)


def _codes(values: Sequence[Any]) -> np.ndarray:
    """Codes of equal values; a missing value (None) is a code of its own."""
    import pandas as pd

    codes, uniques = pd.factorize(pd.Series(list(values), dtype=object), use_na_sentinel=True)
    missing = codes < 0
    codes[missing] = len(uniques) + np.arange(int(missing.sum()))
    return codes


def query_groups(
    ids: Sequence[str], texts: Mapping[str, str] | None = None, groups: Mapping[str, Any] | None = None
) -> np.ndarray:
    """``labels[i]``: the group of ``ids[i]``, numbered in the order the groups first appear in ``ids``. ``texts``
    (``{query_id: text}``) joins queries whose normalised texts are equal; ``groups`` (``{query_id: key}``) joins
    queries of one key (a query it does not name is a group of its own)."""
    import pandas as pd
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    n = len(ids)
    keys = []
    if texts is not None:
        keys.append(_codes(list(normalised_texts([texts[q] for q in ids]))))
    if groups is not None:
        if not isinstance(groups, Mapping):
            raise InputError(f"groups must map query ids to a group key, not {type(groups).__name__}", source="groups")
        unknown = set(groups).difference(ids)
        if unknown:
            shown = ", ".join(repr(q) for q in sorted(unknown)[:5])
            raise InputError(
                f"{len(unknown)} query ids of the groups are not among the queries: {shown}", source="groups"
            )
        keys.append(_codes([None if (k := groups.get(q)) is None else str(k) for q in ids]))
    if not keys or n == 0:
        return np.arange(n)
    rows, cols, offset = [], [], n
    for codes in keys:
        rows.append(np.arange(n))
        cols.append(codes + offset)
        offset += int(codes.max()) + 1
    r, c = np.concatenate(rows), np.concatenate(cols)
    graph = coo_matrix((np.ones(len(r), dtype=np.int8), (r, c)), shape=(offset, offset))
    _, components = connected_components(graph, directed=False)
    numbered: np.ndarray = pd.factorize(components[:n])[0]
    return numbered


def group_split(
    ids: Sequence[str], labels: np.ndarray, share: float, seed: int, *, what: str = "split"
) -> tuple[list[str], list[str], dict[str, Any]]:
    """``(tuning, held_out, facts)``: whole groups, shuffled (``numpy.random.default_rng([seed, 0]).permutation``
    of the groups in order of their first id in ``ids``, which are sorted), go to the tuning part while it holds
    at most ``round(share * n)`` queries (at least one group); the rest are held out. Where every query is its own
    group this is the plain shuffle of the ids. Fewer than two groups is an InputError (nothing can be held out);
    a tuning part further than :data:`UNEVEN` of the queries from the share asked is announced."""
    n = len(ids)
    n_groups = int(labels.max()) + 1 if n else 0
    sizes = np.bincount(labels, minlength=n_groups)
    if n_groups < 2:
        raise InputError(
            f"{what}: nothing can be held out: the {n} queries are one group (the same question asked under each id, "
            "or one group key); give queries of two groups or more",
            source=what,
        )
    target = min(max(round(share * n), 1), n - 1)
    order = np.random.default_rng([seed, 0]).permutation(n_groups)
    fits = np.cumsum(sizes[order]) <= target
    if not fits[0]:
        fits[0] = True  # the first group alone, larger than the share asked: still a tuning part
    tuning_group = np.zeros(n_groups, dtype=bool)
    tuning_group[order[fits]] = True
    rank = np.empty(n_groups, dtype=np.int64)
    rank[order] = np.arange(n_groups)
    placed = np.argsort(rank[labels], kind="stable")
    ordered = np.asarray(ids, dtype=object)[placed]
    in_tuning = tuning_group[labels[placed]]
    tuning, held = ordered[in_tuning].tolist(), ordered[~in_tuning].tolist()
    shared = int(sizes[sizes > 1].sum())
    facts = {
        "groups": n_groups,
        "grouped_queries": shared,
        "largest_group": int(sizes.max()),
        "tuning": len(tuning),
        "held_out": len(held),
    }
    if abs(len(tuning) - target) > max(1, UNEVEN * n):
        warn(
            f"{what}: the tuning part holds {len(tuning)} of {n} queries ({len(tuning) / n:.2f}, not the {share:.2f} "
            f"asked) and {len(held)} are held out: queries asked twice or sharing a group key stay on one side "
            f"({shared} queries in {plural(int((sizes > 1).sum()), 'group')} of 2 or more; the largest holds "
            f"{int(sizes.max())})",
            UnevenSplit,
        )
    return tuning, held, facts


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def read_groups(path: str | os.PathLike[str]) -> dict[str, str]:
    """``{query_id: group}`` from a file: a JSON object, or lines ``query_id<TAB>group`` (or ``query_id,group``;
    blank lines and ``#`` comments skipped). A line without both, or an id given twice, is an InputError naming
    the file and line."""
    file = read_input(path)
    if file.first_line().lstrip().startswith("{"):
        try:
            data = json.loads(file.text())
        except ValueError as exc:
            raise file.error(f"not JSON ({exc})") from None
        if not isinstance(data, dict) or not all(isinstance(v, (str, int)) for v in data.values()):
            raise file.error("a groups file in JSON is one object {query_id: group}")
        return {str(k): str(v) for k, v in data.items()}
    out: dict[str, str] = {}
    for number, line in file.lines():
        sep = "\t" if "\t" in line else ","
        qid, _, group = (part.strip() for part in line.partition(sep))
        if not qid or not group:
            raise file.error("expected 'query_id<TAB>group' (or 'query_id,group')", number)
        if qid in out:
            raise file.error(f"query {qid!r} is given a group twice", number)
        out[qid] = group
    return out


def straddling(tuning: Sequence[str], held: Sequence[str], labels: Mapping[str, int]) -> tuple[str, str] | None:
    """A (tuning id, held-out id) pair of one group, or None where no group has queries on both sides."""
    import pandas as pd

    left = pd.DataFrame({"id": list(tuning), "group": [labels[q] for q in tuning]})
    right = pd.DataFrame({"id": list(held), "group": [labels[q] for q in held]})
    both = left.merge(right, on="group", suffixes=("_tuning", "_held"))
    if both.empty:
        return None
    first = both.sort_values(["id_held", "id_tuning"]).iloc[0]
    return str(first["id_tuning"]), str(first["id_held"])
