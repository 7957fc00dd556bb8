/*
 * rag_eval._speedups: the per-result loops of rag_eval in C: the readers of the user's dicts and TREC files, the grade
 * lookup and the placing of judged results in their query's ranking.
 *
 * Wherever rag_eval calls them it has a pure-Python (NumPy) path that gives the same result (used when this module is
 * not built, or under RAG_EVAL_PURE_PYTHON=1; tests/test_speedups.py compares the two):
 *
 * - four readers, which return None instead of guessing on anything unusual (a non-str id, a score that is not a
 *   float or an int, a boolean, a grade out of range, a malformed line, a number not spelled as a plain ASCII
 *   decimal), so that the Python path handles it and names the problem:
 *   - score_columns: a {query: {doc: score}} mapping into columns (rag_eval.data.run);
 *   - ranking_columns: the rankings of {query: [doc, ...]} (or of (doc, score) pairs) into columns, with the
 *     rankings that repeat a doc id (rag_eval.data.run);
 *   - judgement_columns: a {query: {doc: grade}} mapping into columns, with the doc ids' str hashes (no dict is
 *     copied: the qrels keep columns, and make dicts only where asked; rag_eval.data.qrels);
 *   - parse_columns: a whitespace-separated TREC run or qrels file into columns (rag_eval.data._columns);
 * - nine loops over arrays rag_eval has built itself, which raise TypeError or ValueError on arrays that do not fit
 *   (a bug of the caller, never the user's data):
 *   - dedupe_judgements: a qrels file's rows, in query order, with a doc judged twice kept once (rag_eval.data.qrels);
 *   - group_judgements: the qrels' columns grouped into one {doc: grade} dict per query, where the dicts are asked;
 *   - lookup: the grade of every result among its query's judged columns, by a small table of str hashes per query
 *     (rag_eval.metrics._grades, as the next two);
 *   - lookup_packed: the same for doc ids packed as UTF-8 bytes (what parse_columns and a stage's Arrow table give);
 *   - rank_cells: each judged result's rank in its query's ranking by score, ties broken by the evaluation's rule;
 *   - sort_within: each segment of an array of strs sorted by code point (the qrels' canonical order for their
 *     content hash; rag_eval.reports.hashes);
 *   - json_lines: rows of str and int columns as compact JSON lines, the bytes that content hash reads (the same
 *     module; None where a str needs escaping, which json.dumps then writes);
 *   - entry_keys: the stage cache's key of each query's entry, sha256 of its text and (a reranker) its given ids,
 *     one hash call per query (rag_eval.stages._batch).
 *
 * Issue 28 measured them side by side with their twins in one run (benchmarks/RESULTS.md): from dicts, the pure-Python
 * twins cost a pass over every id and value that these loops do once. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#define GRADE_LIMIT (1LL << 29) /* as rag_eval.data._columns.GRADE_LIMIT */
#include <string.h>

/* ---- score_columns(mapping) -> (query_ids, lengths, doc_ids, scores) | None ------------------------------ */

static PyObject *
score_columns(PyObject *self, PyObject *mapping)
{
    if (!PyDict_Check(mapping))
        Py_RETURN_NONE;
    Py_ssize_t pos = 0, total = 0, nq = PyDict_GET_SIZE(mapping);
    PyObject *qid, *inner;
    while (PyDict_Next(mapping, &pos, &qid, &inner)) {
        if (!PyUnicode_CheckExact(qid) || !PyDict_Check(inner))
            Py_RETURN_NONE;
        total += PyDict_GET_SIZE(inner);
    }
    npy_intp n = total, q = nq;
    PyObject *qids = PyList_New(nq);
    PyArrayObject *lengths = (PyArrayObject *)PyArray_SimpleNew(1, &q, NPY_INT64);
    PyArrayObject *docs = (PyArrayObject *)PyArray_SimpleNew(1, &n, NPY_OBJECT); /* zero-filled: NULLs */
    PyArrayObject *scores = (PyArrayObject *)PyArray_SimpleNew(1, &n, NPY_FLOAT64);
    PyArrayObject *hashes = (PyArrayObject *)PyArray_SimpleNew(1, &n, NPY_INT64);
    if (!qids || !lengths || !docs || !scores || !hashes)
        goto fail;
    PyObject **d = (PyObject **)PyArray_DATA(docs);
    double *s = (double *)PyArray_DATA(scores);
    npy_int64 *h = (npy_int64 *)PyArray_DATA(hashes);
    npy_int64 *len = (npy_int64 *)PyArray_DATA(lengths);
    Py_ssize_t i = 0, k = 0;
    pos = 0;
    while (PyDict_Next(mapping, &pos, &qid, &inner)) {
        Py_INCREF(qid);
        PyList_SET_ITEM(qids, i, qid);
        Py_ssize_t ipos = 0;
        PyObject *doc, *value;
        Py_hash_t hash;
        len[i] = PyDict_GET_SIZE(inner);
        while (_PyDict_Next(inner, &ipos, &doc, &value, &hash)) {
            if (!PyUnicode_CheckExact(doc))
                goto unusual;
            h[k] = hash; /* the dict holds it: the grade lookup then reads no doc id object */
            if (PyFloat_Check(value))
                s[k] = PyFloat_AS_DOUBLE(value);
            else if (PyLong_Check(value) && !PyBool_Check(value)) { /* a boolean is not a score */
                s[k] = PyLong_AsDouble(value);
                if (s[k] == -1.0 && PyErr_Occurred()) {
                    PyErr_Clear();
                    goto unusual;
                }
            }
            else
                goto unusual;
            Py_INCREF(doc);
            d[k++] = doc;
        }
        i++;
    }
    return Py_BuildValue("(NNNNN)", qids, lengths, docs, scores, hashes);
unusual:
    Py_DECREF(qids); Py_DECREF(lengths); Py_DECREF(docs); Py_DECREF(scores); Py_DECREF(hashes);
    Py_RETURN_NONE;
fail:
    Py_XDECREF(qids); Py_XDECREF(lengths); Py_XDECREF(docs); Py_XDECREF(scores); Py_XDECREF(hashes);
    return NULL;
}

/* ---- ranking_columns(rankings) -> (lengths, doc_ids, scores | None, repeats) | None ---------------------
   The values of {query: [doc_id, ...]} (or of [(doc_id, score), ...]) in order, as columns: every ranking a list or a
   tuple, every item a str (no scores), or every item a (str, float or int) pair; None for anything else (the Python
   path names what is wrong). repeats: the indices of the rankings that hold a doc id twice (found with a small hash
   table of the ids' str hashes, reset per ranking). */

typedef struct {
    PyObject *id;
    Py_hash_t hash;
    npy_uint64 generation;
} Seen;

static PyObject *
ranking_columns(PyObject *self, PyObject *rankings)
{
    if (!PyList_CheckExact(rankings))
        Py_RETURN_NONE;
    Py_ssize_t nq = PyList_GET_SIZE(rankings), total = 0, longest = 0;
    int pairs = -1; /* unknown until the first item */
    for (Py_ssize_t i = 0; i < nq; i++) {
        PyObject *items = PyList_GET_ITEM(rankings, i);
        if (!PyList_CheckExact(items) && !PyTuple_CheckExact(items))
            Py_RETURN_NONE;
        Py_ssize_t size = PySequence_Fast_GET_SIZE(items);
        PyObject **item = PySequence_Fast_ITEMS(items);
        for (Py_ssize_t j = 0; j < size; j++) {
            int pair = PyTuple_CheckExact(item[j]) || PyList_CheckExact(item[j]);
            if (pairs < 0)
                pairs = pair;
            if (pair != pairs)
                Py_RETURN_NONE;
            if (pair) {
                if (PySequence_Fast_GET_SIZE(item[j]) != 2)
                    Py_RETURN_NONE;
                PyObject **two = PySequence_Fast_ITEMS(item[j]);
                if (!PyUnicode_CheckExact(two[0]) || PyBool_Check(two[1]) ||
                    !(PyFloat_CheckExact(two[1]) || PyLong_CheckExact(two[1])))
                    Py_RETURN_NONE;
            }
            else if (!PyUnicode_CheckExact(item[j]))
                Py_RETURN_NONE;
        }
        total += size;
        if (size > longest)
            longest = size;
    }
    npy_intp n = total, q = nq;
    PyArrayObject *lengths = (PyArrayObject *)PyArray_SimpleNew(1, &q, NPY_INT64);
    PyArrayObject *docs = (PyArrayObject *)PyArray_SimpleNew(1, &n, NPY_OBJECT); /* zero-filled: NULLs */
    PyArrayObject *scores = pairs == 1 ? (PyArrayObject *)PyArray_SimpleNew(1, &n, NPY_FLOAT64) : NULL;
    PyObject *repeats = PyList_New(0);
    Py_ssize_t capacity = 16;
    while (capacity < 2 * longest)
        capacity *= 2;
    Seen *seen = PyMem_Calloc(capacity, sizeof(Seen));
    if (!lengths || !docs || (pairs == 1 && !scores) || !repeats || !seen) {
        if (!seen)
            PyErr_NoMemory();
        goto fail;
    }
    npy_int64 *len = (npy_int64 *)PyArray_DATA(lengths);
    PyObject **d = (PyObject **)PyArray_DATA(docs);
    double *s = scores ? (double *)PyArray_DATA(scores) : NULL;
    Py_ssize_t k = 0, mask = capacity - 1;
    for (Py_ssize_t i = 0; i < nq; i++) {
        PyObject *items = PyList_GET_ITEM(rankings, i);
        Py_ssize_t size = PySequence_Fast_GET_SIZE(items);
        PyObject **item = PySequence_Fast_ITEMS(items);
        npy_uint64 generation = (npy_uint64)i + 1;
        int repeated = 0;
        len[i] = size;
        for (Py_ssize_t j = 0; j < size; j++, k++) {
            PyObject *id = item[j];
            if (pairs == 1) {
                PyObject **two = PySequence_Fast_ITEMS(item[j]);
                id = two[0];
                if (PyFloat_CheckExact(two[1]))
                    s[k] = PyFloat_AS_DOUBLE(two[1]);
                else {
                    s[k] = PyLong_AsDouble(two[1]);
                    if (s[k] == -1.0 && PyErr_Occurred()) {
                        PyErr_Clear();
                        goto unusual; /* too large for a float: the Python path names it */
                    }
                }
            }
            Py_INCREF(id);
            d[k] = id;
            if (repeated)
                continue;
            Py_hash_t h = PyObject_Hash(id); /* a str's hash, cached in the object */
            if (h == -1)
                goto fail;
            Py_ssize_t slot = (Py_ssize_t)((npy_uint64)h & mask);
            for (;;) {
                Seen *at = &seen[slot];
                if (at->generation != generation) {
                    *at = (Seen){id, h, generation};
                    break;
                }
                if (at->hash == h) {
                    int same = at->id == id ? 1 : PyUnicode_Compare(at->id, id) == 0;
                    if (PyErr_Occurred())
                        goto fail;
                    if (same) {
                        repeated = 1;
                        break;
                    }
                }
                slot = (slot + 1) & mask;
            }
        }
        if (repeated) {
            PyObject *index = PyLong_FromSsize_t(i);
            if (!index || PyList_Append(repeats, index) < 0) {
                Py_XDECREF(index);
                goto fail;
            }
            Py_DECREF(index);
        }
    }
    PyMem_Free(seen);
    if (!scores) {
        scores = (PyArrayObject *)Py_None;
        Py_INCREF(Py_None);
    }
    return Py_BuildValue("(NNNN)", lengths, docs, scores, repeats);
unusual:
    PyMem_Free(seen);
    Py_XDECREF(lengths); Py_XDECREF(docs); Py_XDECREF(scores); Py_XDECREF(repeats);
    Py_RETURN_NONE;
fail:
    PyMem_Free(seen);
    Py_XDECREF(lengths); Py_XDECREF(docs); Py_XDECREF(scores); Py_XDECREF(repeats);
    return NULL;
}

/* ---- judgement_columns(mapping) -> (lengths, doc_ids, grades, hashes) | None --------------------------------
   The columns of {query: {doc: grade}} when every id is a str and every grade an int (not a bool) within
   +-GRADE_LIMIT: each query's judgement count, every doc id, grade and doc id's str hash in order (the hash as the
   dict holds it: the grade lookup then reads no doc id object). Nothing is copied but the references. */

static PyObject *
judgement_columns(PyObject *self, PyObject *mapping)
{
    if (!PyDict_Check(mapping))
        Py_RETURN_NONE;
    Py_ssize_t pos = 0, total = 0;
    PyObject *qid, *inner;
    while (PyDict_Next(mapping, &pos, &qid, &inner)) {
        if (!PyUnicode_CheckExact(qid) || !PyDict_Check(inner))
            Py_RETURN_NONE;
        total += PyDict_GET_SIZE(inner);
    }
    npy_intp n = total, q = PyDict_GET_SIZE(mapping);
    PyArrayObject *lengths = (PyArrayObject *)PyArray_SimpleNew(1, &q, NPY_INT64);
    PyArrayObject *grades = (PyArrayObject *)PyArray_SimpleNew(1, &n, NPY_INT64);
    PyArrayObject *docs = (PyArrayObject *)PyArray_SimpleNew(1, &n, NPY_OBJECT); /* zero-filled: NULLs */
    PyArrayObject *hashes = (PyArrayObject *)PyArray_SimpleNew(1, &n, NPY_INT64);
    if (!lengths || !grades || !docs || !hashes)
        goto fail;
    npy_int64 *len = (npy_int64 *)PyArray_DATA(lengths), *g = (npy_int64 *)PyArray_DATA(grades);
    npy_int64 *h = (npy_int64 *)PyArray_DATA(hashes);
    PyObject **d = (PyObject **)PyArray_DATA(docs);
    Py_ssize_t i = 0, k = 0;
    pos = 0;
    while (PyDict_Next(mapping, &pos, &qid, &inner)) {
        Py_ssize_t ipos = 0;
        PyObject *doc, *grade;
        Py_hash_t hash;
        while (_PyDict_Next(inner, &ipos, &doc, &grade, &hash)) {
            if (!PyUnicode_CheckExact(doc) || !PyLong_CheckExact(grade))
                goto unusual;
            int overflow;
            long long value = PyLong_AsLongLongAndOverflow(grade, &overflow);
            if (overflow || (value == -1 && PyErr_Occurred())) {
                PyErr_Clear();
                goto unusual;
            }
            if (value >= GRADE_LIMIT || value <= -GRADE_LIMIT)
                goto unusual; /* out of range: the Python path names it */
            Py_INCREF(doc);
            d[k] = doc;
            h[k] = hash;
            g[k++] = value;
        }
        len[i++] = PyDict_GET_SIZE(inner);
    }
    return Py_BuildValue("(NNNN)", lengths, docs, grades, hashes);
unusual:
    Py_DECREF(lengths); Py_DECREF(docs); Py_DECREF(grades); Py_DECREF(hashes);
    Py_RETURN_NONE;
fail:
    Py_XDECREF(lengths); Py_XDECREF(docs); Py_XDECREF(grades); Py_XDECREF(hashes);
    return NULL;
}

/* ---- group_judgements(nq, codes, doc_ids, grades) -> (dicts, kept, duplicates, conflicts, first) ---------
   A qrels file's rows grouped into one {doc: grade} dict per query code, in row order: a doc judged twice for a
   query keeps its first grade. Also which rows were kept, how many were dropped, how many of those with another
   grade, and the first such row in query order, then row order (-1 if none). */

static PyObject *
group_judgements(PyObject *self, PyObject *args)
{
    Py_ssize_t nq;
    PyArrayObject *codes, *docs, *grades;
    if (!PyArg_ParseTuple(args, "nO!O!O!", &nq, &PyArray_Type, &codes, &PyArray_Type, &docs, &PyArray_Type,
                          &grades))
        return NULL;
    if (PyArray_TYPE(codes) != NPY_INT64 || PyArray_NDIM(codes) != 1 || !PyArray_IS_C_CONTIGUOUS(codes) ||
        PyArray_TYPE(docs) != NPY_OBJECT || PyArray_NDIM(docs) != 1 || !PyArray_IS_C_CONTIGUOUS(docs) ||
        PyArray_TYPE(grades) != NPY_INT64 || PyArray_NDIM(grades) != 1 || !PyArray_IS_C_CONTIGUOUS(grades)) {
        PyErr_SetString(PyExc_TypeError, "group_judgements: expected int64 codes, object doc ids, int64 grades");
        return NULL;
    }
    npy_intp n = PyArray_DIM(codes, 0);
    if (nq < 0 || PyArray_DIM(docs, 0) != n || PyArray_DIM(grades, 0) != n) {
        PyErr_SetString(PyExc_ValueError, "group_judgements: columns of different lengths");
        return NULL;
    }
    const npy_int64 *c = (const npy_int64 *)PyArray_DATA(codes), *g = (const npy_int64 *)PyArray_DATA(grades);
    PyObject **d = (PyObject **)PyArray_DATA(docs);
    PyObject *dicts = PyList_New(nq);
    PyArrayObject *kept = (PyArrayObject *)PyArray_SimpleNew(1, &n, NPY_BOOL);
    if (!dicts || !kept)
        goto fail;
    for (Py_ssize_t q = 0; q < nq; q++) {
        PyObject *empty = PyDict_New();
        if (!empty)
            goto fail;
        PyList_SET_ITEM(dicts, q, empty);
    }
    npy_bool *k = (npy_bool *)PyArray_DATA(kept);
    Py_ssize_t duplicates = 0, conflicts = 0, first = -1;
    npy_int64 first_code = 0;
    for (npy_intp i = 0; i < n; i++) {
        if (c[i] < 0 || c[i] >= nq || d[i] == NULL) {
            PyErr_SetString(PyExc_ValueError, "group_judgements: a query code out of range or a missing doc id");
            goto fail;
        }
        PyObject *judged = PyList_GET_ITEM(dicts, c[i]);
        Py_ssize_t before = PyDict_GET_SIZE(judged);
        PyObject *grade = PyLong_FromLongLong(g[i]);
        if (!grade)
            goto fail;
        PyObject *held = PyDict_SetDefault(judged, d[i], grade); /* borrowed: the first grade, or this one */
        Py_DECREF(grade);
        if (!held)
            goto fail;
        k[i] = PyDict_GET_SIZE(judged) > before;
        if (!k[i]) {
            duplicates++;
            long long was = PyLong_AsLongLong(held);
            if (was == -1 && PyErr_Occurred())
                goto fail;
            if (was != g[i]) {
                conflicts++;
                if (first < 0 || c[i] < first_code) {
                    first = i;
                    first_code = c[i];
                }
            }
        }
    }
    return Py_BuildValue("(NNnnn)", dicts, kept, duplicates, conflicts, first);
fail:
    Py_XDECREF(dicts); Py_XDECREF(kept);
    return NULL;
}

#define PREFETCH_AHEAD 16 /* doc id objects fetched this many results ahead of their lookup */

/* ---- lookup(doc_ids, hashes, offsets, rows, judged_ids, judged_hashes, judged_offsets, values, missing) -> int32
   For every result, the value (a grade, or a judgement's position) of its query's judgement that names its doc id,
   else missing. Query i's results doc_ids[offsets[i]:offsets[i+1]] are looked up among judgement row rows[i] (none
   where -1): judged_ids[judged_offsets[r]:judged_offsets[r+1]], with values[...] alike. Per query, a small
   open-addressed table of the judged ids' str hashes; hashes and judged_hashes are the ids' str hashes where the
   caller kept them (else None: read from the objects). A doc id object is read only where its hash matches. */

typedef struct {
    Py_hash_t hash;
    npy_int64 index; /* -1: an empty slot */
} Slot;

static int
same_str(PyObject *a, PyObject *b)
{
    if (a == b)
        return 1;
    if (!PyUnicode_Check(a) || !PyUnicode_Check(b) || PyUnicode_READY(a) < 0 || PyUnicode_READY(b) < 0)
        return -1;
    Py_ssize_t n = PyUnicode_GET_LENGTH(a);
    int kind = PyUnicode_KIND(a); /* a str is stored in the narrowest kind its code points fit: equal strs, one kind */
    if (n != PyUnicode_GET_LENGTH(b) || kind != (int)PyUnicode_KIND(b))
        return 0;
    return memcmp(PyUnicode_DATA(a), PyUnicode_DATA(b), (size_t)n * kind) == 0;
}

static int
int64_column(PyObject *array, npy_intp length, const npy_int64 **out)
{
    /* 1 with *out set for a contiguous 1-D int64 array of the length (any length where length < 0), 0 for None */
    if (array == Py_None) {
        *out = NULL;
        return 0;
    }
    PyArrayObject *a = (PyArrayObject *)array;
    if (!PyArray_Check(array) || PyArray_TYPE(a) != NPY_INT64 || PyArray_NDIM(a) != 1 || !PyArray_IS_C_CONTIGUOUS(a) ||
        (length >= 0 && PyArray_DIM(a, 0) != length))
        return -1;
    *out = (const npy_int64 *)PyArray_DATA(a);
    return 1;
}

static int
object_column(PyObject *array, PyObject ***out, npy_intp *length)
{
    PyArrayObject *a = (PyArrayObject *)array;
    if (!PyArray_Check(array) || PyArray_TYPE(a) != NPY_OBJECT || PyArray_NDIM(a) != 1 || !PyArray_IS_C_CONTIGUOUS(a))
        return -1;
    *out = (PyObject **)PyArray_DATA(a);
    *length = PyArray_DIM(a, 0);
    return 0;
}

typedef struct {
    Slot *slots;        /* every slot empty (index -1) between two queries */
    npy_int64 *used;    /* the slots the current query filled, emptied again by the next table_ready */
    Py_ssize_t capacity, mask, filled;
} Table;

static int
table_ready(Table *t, Py_ssize_t size)
{
    /* room for size ids at a load of 1/4 or less (a probe then rarely meets another id), every slot empty */
    Py_ssize_t need = 16;
    while (need < 4 * size)
        need *= 2;
    for (Py_ssize_t i = 0; i < t->filled; i++)
        t->slots[t->used[i]].index = -1;
    t->filled = 0;
    if (need > t->capacity) {
        PyMem_Free(t->slots);
        PyMem_Free(t->used);
        t->slots = PyMem_Malloc(need * sizeof(Slot));
        t->used = PyMem_Malloc((need / 4) * sizeof(npy_int64));
        if (!t->slots || !t->used) {
            t->capacity = 0;
            PyErr_NoMemory();
            return -1;
        }
        memset(t->slots, 0xff, need * sizeof(Slot)); /* every index -1 */
        t->capacity = need;
    }
    t->mask = need - 1;
    return 0;
}

static void
table_put(Table *t, Py_ssize_t slot, Py_hash_t hash, npy_int64 index)
{
    t->slots[slot] = (Slot){hash, index};
    t->used[t->filled++] = slot;
}

static void
table_free(Table *t)
{
    PyMem_Free(t->slots);
    PyMem_Free(t->used);
}

static PyObject *
lookup(PyObject *self, PyObject *args)
{
    PyObject *docs_in, *hashes_in, *offsets_in, *rows_in, *jdocs_in, *jhashes_in, *joffsets_in, *values_in;
    int missing;
    if (!PyArg_ParseTuple(args, "OOOOOOOOi", &docs_in, &hashes_in, &offsets_in, &rows_in, &jdocs_in, &jhashes_in,
                          &joffsets_in, &values_in, &missing))
        return NULL;
    PyObject **d, **jd;
    npy_intp n, m;
    const npy_int64 *h, *o, *r, *jh, *jo, *v;
    if (object_column(docs_in, &d, &n) < 0 || object_column(jdocs_in, &jd, &m) < 0 ||
        int64_column(hashes_in, n, &h) < 0 || int64_column(jhashes_in, m, &jh) < 0 ||
        int64_column(offsets_in, -1, &o) != 1 || int64_column(joffsets_in, -1, &jo) != 1 ||
        int64_column(values_in, m, &v) != 1) {
        PyErr_SetString(PyExc_TypeError, "lookup: expected object arrays of ids, int64 offsets, rows and values, "
                                         "and int64 hashes (or None) as long as their ids");
        return NULL;
    }
    npy_intp nq = PyArray_DIM((PyArrayObject *)offsets_in, 0) - 1;
    npy_intp nt = PyArray_DIM((PyArrayObject *)joffsets_in, 0) - 1;
    if (nq < 0 || nt < 0 || int64_column(rows_in, nq, &r) != 1 || o[0] != 0 || o[nq] != n || jo[0] != 0 ||
        jo[nt] != m) {
        PyErr_SetString(PyExc_ValueError, "lookup: offsets do not cover the ids, or rows do not fit the offsets");
        return NULL;
    }
    PyArrayObject *out = (PyArrayObject *)PyArray_SimpleNew(1, &n, NPY_INT32);
    if (!out)
        return NULL;
    npy_int32 *g = (npy_int32 *)PyArray_DATA(out);
    Table table = {0};
    for (npy_intp i = 0; i < nq; i++) {
        npy_int64 a = o[i], b = o[i + 1], row = r[i];
        if (a > b || b > n || row < -1 || row >= nt || (row >= 0 && (jo[row] > jo[row + 1] || jo[row + 1] > m))) {
            PyErr_SetString(PyExc_ValueError, "lookup: offsets must not decrease, rows must lie within the judgements");
            goto fail;
        }
        if (row < 0 || jo[row] == jo[row + 1]) {
            for (npy_int64 j = a; j < b; j++)
                g[j] = missing;
            continue;
        }
        if (a == b)
            continue;
        if (table_ready(&table, (Py_ssize_t)(jo[row + 1] - jo[row])) < 0)
            goto fail;
        Slot *slots = table.slots;
        Py_ssize_t mask = table.mask;
        for (npy_int64 t = jo[row]; t < jo[row + 1]; t++) {
            Py_hash_t hash = jh ? (Py_hash_t)jh[t] : (jd[t] ? PyObject_Hash(jd[t]) : -1);
            if (hash == -1) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_TypeError, "lookup: a judged id is missing");
                goto fail;
            }
            Py_ssize_t k = (Py_ssize_t)((npy_uint64)hash & mask);
            while (slots[k].index >= 0)
                k = (k + 1) & mask;
            table_put(&table, k, hash, t);
        }
        for (npy_int64 j = a; j < b; j++) {
            PyObject *doc = d[j];
            g[j] = missing;
            if (!doc)
                continue;
            Py_hash_t hash;
            if (h)
                hash = (Py_hash_t)h[j]; /* the object is not read unless a judged id has this hash */
            else {
                if (j + PREFETCH_AHEAD < n && d[j + PREFETCH_AHEAD])
                    __builtin_prefetch(d[j + PREFETCH_AHEAD]); /* its hash, read next: a cache miss */
                if ((hash = PyObject_Hash(doc)) == -1)
                    goto fail;
            }
            for (Py_ssize_t k = (Py_ssize_t)((npy_uint64)hash & mask); slots[k].index >= 0; k = (k + 1) & mask) {
                if (slots[k].hash != hash)
                    continue;
                int same = same_str(doc, jd[slots[k].index]);
                if (same < 0) {
                    if (!PyErr_Occurred())
                        PyErr_SetString(PyExc_TypeError, "lookup: ids must be strs");
                    goto fail;
                }
                if (same) {
                    npy_int64 value = v[slots[k].index];
                    if (value < INT32_MIN || value > INT32_MAX) {
                        PyErr_SetString(PyExc_OverflowError, "lookup: a value does not fit in 32 bits");
                        goto fail;
                    }
                    g[j] = (npy_int32)value;
                    break;
                }
            }
        }
    }
    table_free(&table);
    return (PyObject *)out;
fail:
    table_free(&table);
    Py_DECREF(out);
    return NULL;
}

/* ---- dedupe_judgements(codes, doc_ids, grades) -> (kept, duplicates, conflicts, first, first_kept, hashes) -----
   A qrels file's rows in query order (codes ascending; within a query, row order), no dict made: which rows are
   kept (a doc judged twice for a query keeps its first grade), how many were dropped, how many of those with
   another grade, the first such row and the row it repeats (-1, -1 if none), and each row's doc id str hash. */

static PyObject *
dedupe_judgements(PyObject *self, PyObject *args)
{
    PyObject *codes_in, *docs_in, *grades_in;
    if (!PyArg_ParseTuple(args, "OOO", &codes_in, &docs_in, &grades_in))
        return NULL;
    PyObject **d;
    npy_intp n;
    const npy_int64 *c, *g;
    if (object_column(docs_in, &d, &n) < 0 || int64_column(codes_in, n, &c) != 1 ||
        int64_column(grades_in, n, &g) != 1) {
        PyErr_SetString(PyExc_TypeError, "dedupe_judgements: expected int64 codes, object doc ids, int64 grades");
        return NULL;
    }
    PyArrayObject *kept = (PyArrayObject *)PyArray_SimpleNew(1, &n, NPY_BOOL);
    PyArrayObject *hashes = (PyArrayObject *)PyArray_SimpleNew(1, &n, NPY_INT64);
    Table table = {0};
    Py_ssize_t duplicates = 0, conflicts = 0, first = -1, first_kept = -1;
    if (!kept || !hashes)
        goto fail;
    npy_bool *k = (npy_bool *)PyArray_DATA(kept);
    npy_int64 *h = (npy_int64 *)PyArray_DATA(hashes);
    for (npy_intp i = 0, j; i < n; i = j) {
        for (j = i + 1; j < n && c[j] == c[i]; j++)
            ;
        if (j < n && c[j] < c[i]) {
            PyErr_SetString(PyExc_ValueError, "dedupe_judgements: codes must ascend");
            goto fail;
        }
        if (table_ready(&table, (Py_ssize_t)(j - i)) < 0)
            goto fail;
        Slot *slots = table.slots;
        Py_ssize_t mask = table.mask;
        for (npy_intp r = i; r < j; r++) {
            if (!d[r]) {
                PyErr_SetString(PyExc_ValueError, "dedupe_judgements: a missing doc id");
                goto fail;
            }
            Py_hash_t hash = PyObject_Hash(d[r]);
            if (hash == -1)
                goto fail;
            h[r] = hash;
            Py_ssize_t slot = (Py_ssize_t)((npy_uint64)hash & mask);
            npy_int64 seen = -1;
            for (; slots[slot].index >= 0; slot = (slot + 1) & mask) {
                if (slots[slot].hash != hash)
                    continue;
                int same = same_str(d[r], d[slots[slot].index]);
                if (same < 0) {
                    if (!PyErr_Occurred())
                        PyErr_SetString(PyExc_TypeError, "dedupe_judgements: doc ids must be strs");
                    goto fail;
                }
                if (same) {
                    seen = slots[slot].index;
                    break;
                }
            }
            k[r] = seen < 0;
            if (seen < 0) {
                table_put(&table, slot, hash, r);
                continue;
            }
            duplicates++;
            if (g[seen] != g[r] && conflicts++ == 0) {
                first = r;
                first_kept = seen;
            }
        }
    }
    table_free(&table);
    return Py_BuildValue("(NnnnnN)", kept, duplicates, conflicts, first, first_kept, hashes);
fail:
    table_free(&table);
    Py_XDECREF(kept); Py_XDECREF(hashes);
    return NULL;
}

/* ---- rank_cells(offsets, scores, cells, rows, rule, ids) -> int64 ranks ----------------------------------
   The 0-based rank of each entry cells[k] (of query rows[k]) in its query's ranking by score descending: the
   entries of the query with a higher score, plus the tied ones the rule puts first (rule 0: input order, the
   lower index first; 1: trec_eval's, the doc id greater as a string first; 2: the doc id smaller first). ids: the
   doc ids as an object array of str, or packed as (UTF-8 bytes, int64 starts), or None for rule 0. The cells come
   grouped by query (rows ascending, or at least each query's cells together). */

static int
id_compare(PyObject *objects, const char *blob, const npy_int64 *starts, npy_int64 a, npy_int64 b)
{
    /* <0, 0, >0 as id a sorts before, with or after id b (code points; UTF-8 bytes order the same) */
    if (objects) {
        PyObject **d = (PyObject **)PyArray_DATA((PyArrayObject *)objects);
        return PyUnicode_Compare(d[a], d[b]);
    }
    Py_ssize_t la = starts[a + 1] - starts[a], lb = starts[b + 1] - starts[b];
    int c = memcmp(blob + starts[a], blob + starts[b], la < lb ? la : lb);
    return c ? c : (la > lb) - (la < lb);
}

typedef struct {
    double score;
    npy_intp cell;
} Ranked;

static int
compare_ranked(const void *a, const void *b)
{
    double x = ((const Ranked *)a)->score, y = ((const Ranked *)b)->score;
    return (x > y) - (x < y);
}

static PyObject *
rank_cells(PyObject *self, PyObject *args)
{
    PyArrayObject *offsets, *scores, *cells, *rows;
    int rule;
    PyObject *ids;
    if (!PyArg_ParseTuple(args, "O!O!O!O!iO", &PyArray_Type, &offsets, &PyArray_Type, &scores, &PyArray_Type, &cells,
                          &PyArray_Type, &rows, &rule, &ids))
        return NULL;
    if (PyArray_TYPE(offsets) != NPY_INT64 || PyArray_TYPE(cells) != NPY_INT64 || PyArray_TYPE(rows) != NPY_INT64 ||
        PyArray_TYPE(scores) != NPY_FLOAT64 || !PyArray_IS_C_CONTIGUOUS(offsets) || !PyArray_IS_C_CONTIGUOUS(cells) ||
        !PyArray_IS_C_CONTIGUOUS(rows) || !PyArray_IS_C_CONTIGUOUS(scores) || PyArray_NDIM(offsets) != 1 ||
        PyArray_NDIM(scores) != 1 || PyArray_NDIM(cells) != 1 || PyArray_NDIM(rows) != 1 ||
        PyArray_DIM(cells, 0) != PyArray_DIM(rows, 0) || rule < 0 || rule > 2) {
        PyErr_SetString(PyExc_TypeError, "rank_cells: expected contiguous int64 offsets, cells, rows, float64 scores");
        return NULL;
    }
    npy_intp n = PyArray_DIM(scores, 0), nq = PyArray_DIM(offsets, 0) - 1, m = PyArray_DIM(cells, 0);
    const npy_int64 *o = (const npy_int64 *)PyArray_DATA(offsets), *c = (const npy_int64 *)PyArray_DATA(cells);
    const npy_int64 *r = (const npy_int64 *)PyArray_DATA(rows);
    const double *s = (const double *)PyArray_DATA(scores);
    PyObject *objects = NULL;
    Py_buffer blob = {0};
    int have_blob = 0;
    const npy_int64 *starts = NULL;
    if (rule != 0) {
        if (PyArray_Check(ids) && PyArray_TYPE((PyArrayObject *)ids) == NPY_OBJECT &&
            PyArray_NDIM((PyArrayObject *)ids) == 1 && PyArray_IS_C_CONTIGUOUS((PyArrayObject *)ids) &&
            PyArray_DIM((PyArrayObject *)ids, 0) == n)
            objects = ids;
        else {
            PyArrayObject *st;
            if (!PyTuple_Check(ids) || !PyArg_ParseTuple(ids, "y*O!", &blob, &PyArray_Type, &st)) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_TypeError, "rank_cells: ids must be an object array or (bytes, starts)");
                return NULL;
            }
            if (PyArray_TYPE(st) != NPY_INT64 || !PyArray_IS_C_CONTIGUOUS(st) || PyArray_DIM(st, 0) != n + 1 ||
                ((const npy_int64 *)PyArray_DATA(st))[n] > blob.len) {
                PyBuffer_Release(&blob);
                PyErr_SetString(PyExc_TypeError, "rank_cells: packed ids do not fit the scores");
                return NULL;
            }
            starts = (const npy_int64 *)PyArray_DATA(st);
            have_blob = 1;
        }
    }
    PyArrayObject *out = (PyArrayObject *)PyArray_SimpleNew(1, &m, NPY_INT64);
    if (!out)
        goto done;
    npy_int64 *rank = (npy_int64 *)PyArray_DATA(out);
    /* query by query: its cells' scores sorted (a few), then one pass over its entries, each placed among them by
       binary search: a difference array counts the entries above each cell; an entry equal to a cell's score is
       compared by the tie rule */
    Ranked *sorted = NULL;
    npy_int64 *above = NULL;
    npy_intp capacity = 0;
    for (npy_intp k0 = 0; k0 < m;) {
        npy_int64 q = r[k0];
        npy_intp k1 = k0;
        while (k1 < m && r[k1] == q)
            k1++;
        npy_intp count = k1 - k0;
        if (q < 0 || q >= nq || o[q] < 0 || o[q + 1] > n || o[q] > o[q + 1]) {
            PyErr_SetString(PyExc_ValueError, "rank_cells: a cell outside its query");
            goto fail;
        }
        if (count + 1 > capacity) {
            capacity = 2 * (count + 1);
            PyMem_Free(sorted);
            PyMem_Free(above);
            sorted = PyMem_Malloc(capacity * sizeof(Ranked));
            above = PyMem_Malloc(capacity * sizeof(npy_int64));
            if (!sorted || !above) {
                PyErr_NoMemory();
                goto fail;
            }
        }
        for (npy_intp k = k0; k < k1; k++) {
            if (c[k] < o[q] || c[k] >= o[q + 1]) {
                PyErr_SetString(PyExc_ValueError, "rank_cells: a cell outside its query");
                goto fail;
            }
            sorted[k - k0] = (Ranked){s[c[k]], k};
            rank[k] = 0;
        }
        qsort(sorted, count, sizeof(Ranked), compare_ranked);
        memset(above, 0, (count + 1) * sizeof(npy_int64));
        for (npy_int64 j = o[q]; j < o[q + 1]; j++) {
            double x = s[j];
            npy_intp lo = 0, hi = count; /* the first sorted cell with a score >= x */
            while (lo < hi) {
                npy_intp mid = (lo + hi) >> 1;
                if (sorted[mid].score < x)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            above[0]++; /* x ranks above the cells sorted[0:lo] */
            above[lo]--;
            for (npy_intp p = lo; p < count && sorted[p].score == x; p++) {
                npy_intp k = sorted[p].cell;
                npy_int64 me = c[k];
                if (j == me)
                    continue;
                int first;
                if (rule == 0)
                    first = j < me;
                else {
                    int cmp = id_compare(objects, (const char *)blob.buf, starts, j, me);
                    if (cmp == -1 && PyErr_Occurred())
                        goto fail;
                    first = rule == 1 ? cmp > 0 : cmp < 0;
                }
                rank[k] += first;
            }
        }
        npy_int64 running = 0;
        for (npy_intp p = 0; p < count; p++) {
            running += above[p];
            rank[sorted[p].cell] += running;
        }
        k0 = k1;
    }
    PyMem_Free(sorted);
    PyMem_Free(above);
    goto done;
fail:
    PyMem_Free(sorted);
    PyMem_Free(above);
    Py_CLEAR(out);
done:
    if (have_blob)
        PyBuffer_Release(&blob);
    return (PyObject *)out;
}

/* ---- sort_within(ids, offsets) -> int64 permutation -----------------------------------------------------
   Each segment ids[offsets[i]:offsets[i+1]] (an object array of str) sorted by code point, equal ids in index order:
   the permutation, segment after segment. What sorted() gives each segment, without a Python call per segment. */

static PyObject **sort_base; /* the ids the comparator reads (the GIL is held throughout) */
static int sort_failed;

static int
compare_ids(const void *a, const void *b)
{
    npy_int64 i = *(const npy_int64 *)a, j = *(const npy_int64 *)b;
    if (sort_failed)
        return 0;
    int c = PyUnicode_Compare(sort_base[i], sort_base[j]);
    if (c == -1 && PyErr_Occurred()) {
        sort_failed = 1;
        return 0;
    }
    return c ? c : (i > j) - (i < j);
}

static PyObject *
sort_within(PyObject *self, PyObject *args)
{
    PyArrayObject *ids, *offsets;
    if (!PyArg_ParseTuple(args, "O!O!", &PyArray_Type, &ids, &PyArray_Type, &offsets))
        return NULL;
    if (PyArray_TYPE(ids) != NPY_OBJECT || PyArray_NDIM(ids) != 1 || !PyArray_IS_C_CONTIGUOUS(ids) ||
        PyArray_TYPE(offsets) != NPY_INT64 || PyArray_NDIM(offsets) != 1 || !PyArray_IS_C_CONTIGUOUS(offsets)) {
        PyErr_SetString(PyExc_TypeError, "sort_within: expected a contiguous object array and int64 offsets");
        return NULL;
    }
    npy_intp n = PyArray_DIM(ids, 0), nq = PyArray_DIM(offsets, 0) - 1;
    const npy_int64 *o = (const npy_int64 *)PyArray_DATA(offsets);
    if (nq < 0 || o[0] != 0 || o[nq] != n) {
        PyErr_SetString(PyExc_ValueError, "sort_within: offsets do not cover the ids");
        return NULL;
    }
    PyObject **d = (PyObject **)PyArray_DATA(ids);
    for (npy_intp k = 0; k < n; k++)
        if (!d[k] || !PyUnicode_Check(d[k])) {
            PyErr_SetString(PyExc_TypeError, "sort_within: ids must be strs");
            return NULL;
        }
    PyArrayObject *out = (PyArrayObject *)PyArray_SimpleNew(1, &n, NPY_INT64);
    if (!out)
        return NULL;
    npy_int64 *perm = (npy_int64 *)PyArray_DATA(out);
    for (npy_intp k = 0; k < n; k++)
        perm[k] = k;
    sort_base = d;
    sort_failed = 0;
    for (npy_intp i = 0; i < nq && !sort_failed; i++) {
        if (o[i] > o[i + 1] || o[i + 1] > n) {
            PyErr_SetString(PyExc_ValueError, "sort_within: offsets must not decrease");
            Py_DECREF(out);
            return NULL;
        }
        if (o[i + 1] - o[i] > 1)
            qsort(perm + o[i], o[i + 1] - o[i], sizeof(npy_int64), compare_ids);
    }
    sort_base = NULL;
    if (sort_failed) {
        Py_DECREF(out);
        return NULL;
    }
    return (PyObject *)out;
}

/* ---- json_lines(columns, rows) -> bytes | None ------------------------------------------------------------
   The lines ["a","b",1]\n (compact JSON arrays, UTF-8) of the rows `rows` of `columns` (a tuple of 1-d arrays: object
   arrays of str, or int64 arrays), in that order: what json.dumps(row, ensure_ascii=False, separators=(",", ":"))
   gives each row, for a content hash (rag_eval.reports.hashes). None when a str needs escaping in JSON (a quote, a
   backslash, a control character) or is not a str: the Python path writes those lines with json.dumps. */

static PyObject *
json_lines(PyObject *self, PyObject *args)
{
    PyObject *columns;
    PyArrayObject *rows;
    if (!PyArg_ParseTuple(args, "O!O!", &PyTuple_Type, &columns, &PyArray_Type, &rows))
        return NULL;
    Py_ssize_t nc = PyTuple_GET_SIZE(columns);
    if (nc < 1 || PyArray_TYPE(rows) != NPY_INT64 || PyArray_NDIM(rows) != 1 || !PyArray_IS_C_CONTIGUOUS(rows)) {
        PyErr_SetString(PyExc_TypeError, "json_lines: expected a tuple of columns and int64 rows");
        return NULL;
    }
    npy_intp n = -1, m = PyArray_DIM(rows, 0);
    for (Py_ssize_t c = 0; c < nc; c++) {
        PyObject *col = PyTuple_GET_ITEM(columns, c);
        if (!PyArray_Check(col) || PyArray_NDIM((PyArrayObject *)col) != 1 ||
            !PyArray_IS_C_CONTIGUOUS((PyArrayObject *)col) ||
            (PyArray_TYPE((PyArrayObject *)col) != NPY_OBJECT && PyArray_TYPE((PyArrayObject *)col) != NPY_INT64) ||
            (n >= 0 && PyArray_DIM((PyArrayObject *)col, 0) != n)) {
            PyErr_SetString(PyExc_TypeError, "json_lines: columns must be contiguous object or int64 arrays");
            return NULL;
        }
        n = PyArray_DIM((PyArrayObject *)col, 0);
    }
    const npy_int64 *r = (const npy_int64 *)PyArray_DATA(rows);
    for (npy_intp k = 0; k < m; k++)
        if (r[k] < 0 || r[k] >= n) {
            PyErr_SetString(PyExc_ValueError, "json_lines: a row outside the columns");
            return NULL;
        }
    Py_ssize_t capacity = 64 + m * (4 + 24 * nc), used = 0;
    char *out = PyMem_Malloc(capacity);
    if (!out)
        return PyErr_NoMemory();
    PyObject *result = NULL;
    for (npy_intp k = 0; k < m; k++) {
        for (Py_ssize_t c = 0; c < nc; c++) {
            PyArrayObject *col = (PyArrayObject *)PyTuple_GET_ITEM(columns, c);
            const char *text = NULL;
            Py_ssize_t len = 0;
            char number[32];
            int quoted = PyArray_TYPE(col) == NPY_OBJECT;
            if (quoted) {
                PyObject *value = ((PyObject **)PyArray_DATA(col))[r[k]];
                if (!value || !PyUnicode_Check(value))
                    goto unusual;
                text = PyUnicode_AsUTF8AndSize(value, &len);
                if (!text)
                    goto fail;
                for (Py_ssize_t i = 0; i < len; i++) {
                    unsigned char ch = (unsigned char)text[i];
                    if (ch < 0x20 || ch == '"' || ch == '\\')
                        goto unusual;
                }
            }
            else {
                len = snprintf(number, sizeof number, "%lld", (long long)((npy_int64 *)PyArray_DATA(col))[r[k]]);
                text = number;
            }
            if (used + len + 8 > capacity) {
                Py_ssize_t grown = 2 * capacity + len + 8;
                char *bigger = PyMem_Realloc(out, grown);
                if (!bigger) {
                    PyErr_NoMemory();
                    goto fail;
                }
                out = bigger;
                capacity = grown;
            }
            out[used++] = c == 0 ? '[' : ',';
            if (quoted)
                out[used++] = '"';
            memcpy(out + used, text, len);
            used += len;
            if (quoted)
                out[used++] = '"';
        }
        if (used + 2 > capacity) {
            char *bigger = PyMem_Realloc(out, capacity + 64);
            if (!bigger) {
                PyErr_NoMemory();
                goto fail;
            }
            out = bigger;
            capacity += 64;
        }
        out[used++] = ']';
        out[used++] = '\n';
    }
    result = PyBytes_FromStringAndSize(out, used);
    goto fail; /* frees the buffer */
unusual:
    result = Py_None;
    Py_INCREF(result);
fail:
    PyMem_Free(out);
    return result;
}

/* ---- lookup_packed(blob, starts, offsets, rows, judged_ids, judged_offsets, values, missing) -> int32 -------
   The same as lookup, for doc ids packed as UTF-8 bytes: each query's judgements go into a small C table keyed by
   the bytes of their doc ids, and the run's ids are looked up there without making Python objects. */

typedef struct {
    const char *ptr;
    Py_ssize_t len;
    npy_uint64 hash;
    npy_int32 value;
} Judged;

static npy_uint64 span_hash(const char *p, Py_ssize_t len);

static PyObject *
lookup_packed(PyObject *self, PyObject *args)
{
    Py_buffer blob;
    PyObject *starts_in, *offsets_in, *rows_in, *jdocs_in, *joffsets_in, *values_in;
    int missing;
    if (!PyArg_ParseTuple(args, "y*OOOOOOi", &blob, &starts_in, &offsets_in, &rows_in, &jdocs_in, &joffsets_in,
                          &values_in, &missing))
        return NULL;
    PyObject *result = NULL;
    Judged *table = NULL;
    Py_ssize_t *used = NULL, capacity = 0, filled = 0;
    PyObject **jd;
    npy_intp m;
    const npy_int64 *st, *o, *r, *jo, *v;
    if (object_column(jdocs_in, &jd, &m) < 0 || int64_column(starts_in, -1, &st) != 1 ||
        int64_column(offsets_in, -1, &o) != 1 || int64_column(joffsets_in, -1, &jo) != 1 ||
        int64_column(values_in, m, &v) != 1) {
        PyErr_SetString(PyExc_TypeError, "lookup_packed: expected contiguous int64 arrays and an object array of ids");
        goto done;
    }
    npy_intp n = PyArray_DIM((PyArrayObject *)starts_in, 0) - 1;
    npy_intp nq = PyArray_DIM((PyArrayObject *)offsets_in, 0) - 1;
    npy_intp nt = PyArray_DIM((PyArrayObject *)joffsets_in, 0) - 1;
    if (n < 0 || nq < 0 || nt < 0 || int64_column(rows_in, nq, &r) != 1 || o[0] != 0 || o[nq] != n || st[0] != 0 ||
        st[n] > blob.len || jo[0] != 0 || jo[nt] != m) {
        PyErr_SetString(PyExc_ValueError, "lookup_packed: offsets do not fit the doc ids");
        goto done;
    }
    PyArrayObject *out = (PyArrayObject *)PyArray_SimpleNew(1, &n, NPY_INT32);
    if (!out)
        goto done;
    result = (PyObject *)out;
    npy_int32 *g = (npy_int32 *)PyArray_DATA(out);
    const char *bytes = (const char *)blob.buf;
    for (Py_ssize_t i = 0; i < nq; i++) {
        npy_int64 a = o[i], b = o[i + 1], row = r[i];
        if (a > b || b > n || row < -1 || row >= nt || (row >= 0 && (jo[row] > jo[row + 1] || jo[row + 1] > m))) {
            PyErr_SetString(PyExc_ValueError, "lookup_packed: bad offsets or rows");
            goto fail;
        }
        Py_ssize_t size = row < 0 ? 0 : (Py_ssize_t)(jo[row + 1] - jo[row]);
        if (size == 0) {
            for (npy_int64 j = a; j < b; j++)
                g[j] = missing;
            continue;
        }
        Py_ssize_t need = 16; /* a load of 1/4 or less, as lookup's; emptied slot by slot */
        while (need < 4 * size)
            need *= 2;
        for (Py_ssize_t u = 0; u < filled; u++)
            table[used[u]].ptr = NULL;
        filled = 0;
        if (need > capacity) {
            PyMem_Free(table);
            PyMem_Free(used);
            capacity = need;
            table = PyMem_Calloc(capacity, sizeof(Judged));
            used = PyMem_Malloc((capacity / 4) * sizeof(Py_ssize_t));
            if (!table || !used) {
                PyErr_NoMemory();
                goto fail;
            }
        }
        Py_ssize_t mask = need - 1;
        for (npy_int64 t = jo[row]; t < jo[row + 1]; t++) {
            Py_ssize_t len;
            PyObject *doc = jd[t];
            const char *utf8 = doc && PyUnicode_Check(doc) ? PyUnicode_AsUTF8AndSize(doc, &len) : NULL;
            if (!utf8 || v[t] < INT32_MIN || v[t] > INT32_MAX) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_ValueError, "lookup_packed: judged ids must be strs, values 32-bit ints");
                goto fail;
            }
            npy_uint64 h = span_hash(utf8, len);
            Py_ssize_t k = h & mask;
            while (table[k].ptr)
                k = (k + 1) & mask;
            table[k] = (Judged){utf8, len, h, (npy_int32)v[t]};
            used[filled++] = k;
        }
        for (npy_int64 j = a; j < b; j++) {
            const char *p = bytes + st[j];
            Py_ssize_t len = st[j + 1] - st[j];
            npy_uint64 h = span_hash(p, len);
            Py_ssize_t k = h & mask;
            g[j] = missing;
            for (; table[k].ptr; k = (k + 1) & mask) {
                if (table[k].hash == h && table[k].len == len && memcmp(table[k].ptr, p, len) == 0) {
                    g[j] = table[k].value;
                    break;
                }
            }
        }
    }
    goto done;
fail:
    Py_CLEAR(result);
done:
    PyMem_Free(table);
    PyMem_Free(used);
    PyBuffer_Release(&blob);
    return result;
}

/* ---- parse_columns(data, kind, ascii, packed) -> (query_ids, codes, doc_ids, values, n, tag, repeats,
   interleaved) | None; with packed, doc_ids is (utf8 bytes, int64 starts) ------------------------------------ */

#define KIND_RUN 0   /* qid Q0 docid rank score tag [ignored...]: fields 0, 2, 4 (float), 5 (first line) */
#define KIND_QRELS 1 /* qid iter docid grade: exactly 4 fields, 0, 2, 3 (integer) */
#define MAX_FIELDS 7
#define NUMBER_BUFFER 128

/* ASCII whitespace within a line, as trec_eval splits: space, tab, VT, FF; a line (and a token) ends at '\n', at
   "\r\n" or at a lone '\r' */
static const unsigned char SPACE[256] = {[' '] = 1, ['\t'] = 1, ['\v'] = 1, ['\f'] = 1};
static const unsigned char TOKEN_END[256] = {[' '] = 1, ['\t'] = 1, ['\r'] = 1, ['\v'] = 1, ['\f'] = 1, ['\n'] = 1};

static const double exact_powers_of_ten[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
                                              1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* The one number rule of rag_eval.data._numbers: a score is [+-]?(digits[.[digits]]|.digits)([eE][+-]?digits)?
   in ASCII digits, or [+-]?(inf|infinity) in any case; a grade is [+-]?digits(.0*)?. Anything else (1_0, 0x10,
   nan, non-ASCII digits) is unusual, and the Python reader names it. */

static int
same_letters(const char *p, Py_ssize_t len, const char *word)
{
    Py_ssize_t i = 0;
    for (; i < len && word[i]; i++)
        if ((p[i] | 0x20) != word[i])
            return 0;
    return i == len && !word[i];
}

static int
plain_score(const char *p, Py_ssize_t len)
{
    Py_ssize_t i = 0;
    if (i < len && (p[i] == '+' || p[i] == '-'))
        i++;
    if (same_letters(p + i, len - i, "inf") || same_letters(p + i, len - i, "infinity"))
        return 1;
    Py_ssize_t digits = 0;
    for (; i < len && p[i] >= '0' && p[i] <= '9'; i++)
        digits++;
    if (i < len && p[i] == '.')
        for (i++; i < len && p[i] >= '0' && p[i] <= '9'; i++)
            digits++;
    if (digits == 0)
        return 0;
    if (i < len && (p[i] == 'e' || p[i] == 'E')) {
        i++;
        if (i < len && (p[i] == '+' || p[i] == '-'))
            i++;
        Py_ssize_t exponent = 0;
        for (; i < len && p[i] >= '0' && p[i] <= '9'; i++)
            exponent++;
        if (exponent == 0)
            return 0;
    }
    return i == len;
}

static int
parse_double(const char *p, Py_ssize_t len, double *out)
{
    if (!plain_score(p, len))
        return 0;
    /* Fast path for plain decimals ([-+]digits[.digits], at most 15 digits): the digits as an integer are exact
       in a double, and so is 10^k for k <= 22, so one IEEE division gives the correctly rounded value, the
       same double as float() (Clinger's fast path). Anything else goes to PyOS_string_to_double. */
    Py_ssize_t i = 0;
    int negative = 0;
    if (len > 0 && (p[0] == '-' || p[0] == '+')) {
        negative = p[0] == '-';
        i = 1;
    }
    npy_int64 mantissa = 0;
    int digits = 0, decimals = -1;
    for (; i < len; i++) {
        char ch = p[i];
        if (ch >= '0' && ch <= '9') {
            mantissa = mantissa * 10 + (ch - '0');
            digits++;
            if (decimals >= 0)
                decimals++;
        }
        else if (ch == '.' && decimals < 0)
            decimals = 0;
        else
            break;
    }
    if (i == len && digits > 0 && digits <= 15) {
        double value = (double)mantissa;
        if (decimals > 0)
            value /= exact_powers_of_ten[decimals];
        *out = negative ? -value : value;
        return 1;
    }
    char buffer[NUMBER_BUFFER];
    if (len <= 0 || len >= NUMBER_BUFFER)
        return 0;
    memcpy(buffer, p, len);
    buffer[len] = '\0';
    char *end = NULL;
    double value = PyOS_string_to_double(buffer, &end, NULL); /* what float() uses; no locale */
    if (value == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    if (end != buffer + len)
        return 0;
    *out = value;
    return 1;
}

static int
parse_integer(const char *p, Py_ssize_t len, npy_int64 *out)
{
    /* [+-]?digits, or an integral decimal such as "1.0" or "2." (read as trec_eval's atol reads it); at most 18
       digits (more is out of range, which the Python reader names) */
    Py_ssize_t i = 0;
    int negative = 0;
    if (len > 0 && (p[0] == '-' || p[0] == '+')) {
        negative = p[0] == '-';
        i = 1;
    }
    npy_int64 value = 0;
    Py_ssize_t j = i;
    for (; j < len && j - i < 19 && p[j] >= '0' && p[j] <= '9'; j++)
        value = value * 10 + (p[j] - '0');
    if (j == i || j - i > 18)
        return 0;
    if (j < len && p[j] == '.')
        for (j++; j < len && p[j] == '0'; j++)
            ;
    if (j != len)
        return 0;
    *out = negative ? -value : value;
    return 1;
}

/* A set of byte spans (the doc ids of the current query), to notice a doc id repeated within a query without
   building Python objects: open addressing, reset per query by bumping a generation number. */
typedef struct {
    const char *ptr;
    Py_ssize_t len;
    npy_uint64 hash;
    npy_uint64 generation;
} Span;

typedef struct {
    Span *slots;
    Py_ssize_t capacity, used;
    npy_uint64 generation;
} SpanSet;

static npy_uint64
span_hash(const char *p, Py_ssize_t len)
{
    npy_uint64 h = 1469598103934665603ULL; /* FNV-1a */
    for (Py_ssize_t i = 0; i < len; i++) {
        h ^= (unsigned char)p[i];
        h *= 1099511628211ULL;
    }
    return h;
}

static int
span_set_grow(SpanSet *set)
{
    Py_ssize_t capacity = set->capacity ? set->capacity * 2 : 1024;
    Span *slots = PyMem_Calloc(capacity, sizeof(Span));
    if (!slots)
        return -1;
    for (Py_ssize_t i = 0; i < set->capacity; i++) {
        Span *old = &set->slots[i];
        if (old->generation != set->generation || !old->ptr)
            continue;
        Py_ssize_t j = old->hash & (capacity - 1);
        while (slots[j].ptr)
            j = (j + 1) & (capacity - 1);
        slots[j] = *old;
    }
    PyMem_Free(set->slots);
    set->slots = slots;
    set->capacity = capacity;
    return 0;
}

/* 1 if the span was already in the set, 0 if added, -1 on memory error */
static int
span_set_add(SpanSet *set, const char *p, Py_ssize_t len)
{
    if (2 * (set->used + 1) > set->capacity && span_set_grow(set) < 0)
        return -1;
    npy_uint64 h = span_hash(p, len);
    Py_ssize_t j = h & (set->capacity - 1);
    for (;;) {
        Span *slot = &set->slots[j];
        if (!slot->ptr || slot->generation != set->generation) {
            slot->ptr = p;
            slot->len = len;
            slot->hash = h;
            slot->generation = set->generation;
            set->used++;
            return 0;
        }
        if (slot->hash == h && slot->len == len && memcmp(slot->ptr, p, len) == 0)
            return 1;
        j = (j + 1) & (set->capacity - 1);
    }
}

static void
span_set_reset(SpanSet *set)
{
    set->generation++;
    set->used = 0;
}

static PyObject *
text_of(const char *p, Py_ssize_t len, int ascii)
{
    if (!ascii)
        return PyUnicode_DecodeUTF8(p, len, "strict");
    PyObject *text = PyUnicode_New(len, 127);
    if (text)
        memcpy(PyUnicode_1BYTE_DATA(text), p, len);
    return text;
}

static int
append_code(PyObject *list, npy_int64 value)
{
    PyObject *code = PyLong_FromLongLong(value);
    int failed = !code || PyList_Append(list, code) < 0;
    Py_XDECREF(code);
    return failed ? -1 : 0;
}

static PyObject *
parse_columns(PyObject *self, PyObject *args)
{
    Py_buffer view;
    int kind, ascii, packed;
    if (!PyArg_ParseTuple(args, "y*ipp", &view, &kind, &ascii, &packed))
        return NULL;
    SpanSet seen = {NULL, 0, 0, 1};
    char *tail = NULL;
    const char *data = (const char *)view.buf;
    Py_ssize_t size = view.len;
    npy_intp capacity = 1;
    for (const char *p = data; (p = memchr(p, '\n', data + size - p)) != NULL; p++)
        capacity++;
    for (const char *p = data; (p = memchr(p, '\r', data + size - p)) != NULL; p++)
        capacity++; /* an upper bound on the lines: a lone CR ends one too */

    PyObject *qids = PyList_New(0), *index = PyDict_New(), *repeats = PyList_New(0);
    PyObject *tag = NULL;
    const char *tag_ptr = NULL; /* the last line's tag: what trec_eval prints as runid */
    Py_ssize_t tag_len = 0;
    PyArrayObject *codes = (PyArrayObject *)PyArray_SimpleNew(1, &capacity, NPY_INT64);
    /* doc ids: str objects, or packed: their UTF-8 bytes end to end and where each starts (no Python objects) */
    npy_intp capacity_1 = capacity + 1;
    PyArrayObject *docs = (PyArrayObject *)(packed ? PyArray_SimpleNew(1, &capacity_1, NPY_INT64)
                                                   : PyArray_SimpleNew(1, &capacity, NPY_OBJECT));
    PyObject *blob = packed ? PyBytes_FromStringAndSize(NULL, size) : NULL;
    Py_ssize_t blob_used = 0;
    PyArrayObject *values = (PyArrayObject *)PyArray_SimpleNew(1, &capacity, kind == KIND_RUN ? NPY_FLOAT64 : NPY_INT64);
    PyObject *result = NULL;
    int unusual = 0, interleaved = 0, current_repeats = 0;
    npy_int64 current_code = -1;
    const char *current_ptr = NULL;
    Py_ssize_t current_len = -1;
    if (!qids || !index || !repeats || !codes || !docs || !values || (packed && !blob))
        goto done;
    npy_int64 *c = (npy_int64 *)PyArray_DATA(codes);
    PyObject **d = packed ? NULL : (PyObject **)PyArray_DATA(docs);
    npy_int64 *starts_of = packed ? (npy_int64 *)PyArray_DATA(docs) : NULL;
    char *blob_data = packed ? PyBytes_AS_STRING(blob) : NULL;
    if (packed)
        starts_of[0] = 0;
    npy_intp n = 0;
    /* Lines are read up to a line-end sentinel: the file up to its last '\n' or '\r', then any unterminated last
       line from a copy that ends with '\n' (tokens may point into that copy, so it lives until the end). */
    const char *last_newline = NULL;
    for (const char *back = data + size; back > data; back--)
        if (back[-1] == '\n' || back[-1] == '\r') {
            last_newline = back - 1;
            break;
        }
    const char *region_begin[2] = {data, NULL}, *region_end[2] = {last_newline ? last_newline + 1 : data, NULL};
    Py_ssize_t tail_len = data + size - region_end[0];
    if (tail_len > 0) {
        if (!(tail = PyMem_Malloc(tail_len + 1))) {
            PyErr_NoMemory();
            goto done;
        }
        memcpy(tail, region_end[0], tail_len);
        tail[tail_len] = '\n';
        region_begin[1] = tail;
        region_end[1] = tail + tail_len + 1;
    }
    for (int region = 0; region < 2 && !unusual; region++) {
    const char *p = region_begin[region], *end = region_end[region];
    while (p && p < end && !unusual) {
        const char *start[MAX_FIELDS];
        Py_ssize_t length[MAX_FIELDS];
        int fields = 0;
        const char *q = p;
        for (;;) {
            while (SPACE[(unsigned char)*q])
                q++;
            if (*q == '\n' || *q == '\r')
                break;
            const char *t = q;
            while (!TOKEN_END[(unsigned char)*q])
                q++;
            if (fields < MAX_FIELDS) {
                start[fields] = t;
                length[fields] = q - t;
            }
            fields++;
            if (kind == KIND_RUN && fields == 6) {
                while (*q != '\n' && *q != '\r')
                    q++; /* fields after the 6th are ignored, as trec_eval does */
                break;
            }
        }
        p = q + 1;
        if (*q == '\r' && p < end && *p == '\n')
            p++; /* CRLF: one line ending */
        if (fields == 0 || start[0][0] == '#')
            continue; /* a blank line, or a comment */
        if ((kind == KIND_RUN && fields < 6) || (kind == KIND_QRELS && fields != 4)) {
            unusual = 1;
            break;
        }
        /* the query: most lines repeat the previous line's */
        if (length[0] != current_len || memcmp(start[0], current_ptr, length[0]) != 0) {
            if (current_repeats && append_code(repeats, current_code) < 0)
                goto done;
            current_repeats = 0;
            PyObject *text = text_of(start[0], length[0], ascii);
            if (!text)
                goto done;
            PyObject *known = PyDict_GetItemWithError(index, text);
            if (known) {
                current_code = PyLong_AsLongLong(known);
                interleaved = 1; /* a query seen before, after another one */
            }
            else if (PyErr_Occurred()) {
                Py_DECREF(text);
                goto done;
            }
            else {
                current_code = PyList_GET_SIZE(qids);
                PyObject *code = PyLong_FromLongLong(current_code);
                if (!code || PyDict_SetItem(index, text, code) < 0 || PyList_Append(qids, text) < 0) {
                    Py_XDECREF(code);
                    Py_DECREF(text);
                    goto done;
                }
                Py_DECREF(code);
            }
            Py_DECREF(text);
            span_set_reset(&seen);
            current_ptr = start[0];
            current_len = length[0];
        }
        int value_field = kind == KIND_RUN ? 4 : 3;
        if (kind == KIND_RUN) {
            if (!parse_double(start[4], length[4], &((double *)PyArray_DATA(values))[n])) {
                unusual = 1;
                break;
            }
            tag_ptr = start[5];
            tag_len = length[5];
        }
        else if (!parse_integer(start[value_field], length[value_field], &((npy_int64 *)PyArray_DATA(values))[n])) {
            unusual = 1;
            break;
        }
        int repeated = span_set_add(&seen, start[2], length[2]);
        if (repeated < 0) {
            PyErr_NoMemory();
            goto done;
        }
        current_repeats |= repeated;
        if (packed) {
            memcpy(blob_data + blob_used, start[2], length[2]);
            blob_used += length[2];
            starts_of[n + 1] = blob_used;
        }
        else {
            PyObject *doc = text_of(start[2], length[2], ascii);
            if (!doc)
                goto done;
            d[n] = doc; /* the array owns the reference */
        }
        c[n] = current_code;
        n++;
    }
    }
    if (unusual) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    if (current_repeats && append_code(repeats, current_code) < 0)
        goto done;
    if (tag_ptr && !(tag = text_of(tag_ptr, tag_len, ascii)))
        goto done;
    if (!tag) {
        tag = Py_None;
        Py_INCREF(tag);
    }
    if (packed) {
        if (_PyBytes_Resize(&blob, blob_used) < 0)
            goto done; /* blob is freed and NULL */
        result = Py_BuildValue("(OO(OO)OnOOO)", qids, codes, blob, docs, values, (Py_ssize_t)n, tag, repeats,
                               interleaved ? Py_True : Py_False);
    }
    else
        result = Py_BuildValue("(OOOOnOOO)", qids, codes, docs, values, (Py_ssize_t)n, tag, repeats,
                               interleaved ? Py_True : Py_False);
done:
    PyBuffer_Release(&view);
    PyMem_Free(seen.slots);
    PyMem_Free(tail);
    Py_XDECREF(qids); Py_XDECREF(index); Py_XDECREF(repeats); Py_XDECREF(tag);
    Py_XDECREF(codes); Py_XDECREF(docs); Py_XDECREF(values); Py_XDECREF(blob);
    return result;
}

/* ---- entry_keys(sha256, texts, valid, rows, starts, data) -> list of str ------------------------------------ */

static void
put_le64(unsigned char *at, npy_int64 value)
{
    unsigned long long v = (unsigned long long)value;
    for (int b = 0; b < 8; b++)
        at[b] = (unsigned char)(v >> (8 * b));
}

static PyObject *
entry_keys(PyObject *self, PyObject *args)
{
    /* The cache key of each query's entry (rag_eval.stages._batch.entry_hash, whose pure-Python path gives the same
     * strs): the first 16 hex digits of sha256 (``sha256``: hashlib's constructor) of the text's UTF-8 alone (rows is
     * None: a first stage), or of b"rerank\0", the text's byte length (int64 little-endian) and bytes, the number of
     * ids, each id's byte length and the ids' bytes (a reranker: query i's ids are ids rows[i]..rows[i+1], id j the
     * bytes data[starts[j]:starts[j + 1]]); "" where valid[i] is 0. One bytes object and one hash call per query. */
    PyObject *sha256, *texts, *rows_in, *starts_in;
    Py_buffer valid, data;
    if (!PyArg_ParseTuple(args, "OO!y*Oy*O", &sha256, &PyList_Type, &texts, &valid, &rows_in, &data, &starts_in))
        return NULL;
    PyObject *result = NULL, *digest_name = NULL;
    Py_ssize_t n = PyList_GET_SIZE(texts);
    const npy_int64 *r = NULL, *st = NULL;
    int reranker = rows_in != Py_None;
    if (reranker) {
        if (int64_column(rows_in, n + 1, &r) != 1 || int64_column(starts_in, -1, &st) != 1 || valid.len != n) {
            PyErr_SetString(PyExc_TypeError, "entry_keys: expected int64 rows (n + 1), int64 starts, n valid bytes");
            goto done;
        }
        npy_intp m = PyArray_DIM((PyArrayObject *)starts_in, 0) - 1;
        if (n && (r[0] < 0 || r[n] > m || m < 0 || st[0] < 0 || st[m] > data.len)) {
            PyErr_SetString(PyExc_ValueError, "entry_keys: rows or starts do not fit the ids");
            goto done;
        }
    }
    digest_name = PyUnicode_InternFromString("digest");
    result = PyList_New(n);
    if (!digest_name || !result)
        goto fail;
    static const char hex[] = "0123456789abcdef";
    static const char tag[] = "rerank";
    const unsigned char *ok = (const unsigned char *)valid.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *text = PyList_GET_ITEM(texts, i);
        if (reranker && !ok[i]) {
            PyObject *empty = PyUnicode_FromStringAndSize("", 0);
            if (!empty)
                goto fail;
            PyList_SET_ITEM(result, i, empty);
            continue;
        }
        if (!PyUnicode_Check(text)) {
            PyErr_Format(PyExc_TypeError, "entry_keys: text %zd is not a str", i);
            goto fail;
        }
        Py_ssize_t size;
        const char *utf8 = PyUnicode_AsUTF8AndSize(text, &size);
        if (!utf8)
            goto fail;
        PyObject *payload;
        if (!reranker) {
            payload = PyBytes_FromStringAndSize(utf8, size);
        } else {
            npy_int64 lo = r[i], hi = r[i + 1];
            if (lo < 0 || lo > hi || hi > r[n]) {
                PyErr_SetString(PyExc_ValueError, "entry_keys: rows do not ascend");
                goto fail;
            }
            npy_int64 count = hi - lo, span = st[hi] - st[lo];
            if (span < 0 || st[lo] < 0 || st[hi] > data.len) {
                PyErr_SetString(PyExc_ValueError, "entry_keys: starts do not ascend within the ids' bytes");
                goto fail;
            }
            payload = PyBytes_FromStringAndSize(NULL, 7 + 8 + size + 8 + 8 * count + span);
            if (payload) {
                unsigned char *at = (unsigned char *)PyBytes_AS_STRING(payload);
                memcpy(at, tag, 7); /* with its NUL */
                at += 7;
                put_le64(at, size);
                at += 8;
                memcpy(at, utf8, size);
                at += size;
                put_le64(at, count);
                at += 8;
                for (npy_int64 j = lo; j < hi; j++, at += 8)
                    put_le64(at, st[j + 1] - st[j]);
                memcpy(at, (const char *)data.buf + st[lo], span);
            }
        }
        if (!payload)
            goto fail;
        PyObject *hash = PyObject_CallOneArg(sha256, payload);
        Py_DECREF(payload);
        if (!hash)
            goto fail;
        PyObject *digest = PyObject_CallMethodNoArgs(hash, digest_name);
        Py_DECREF(hash);
        if (!digest)
            goto fail;
        if (!PyBytes_Check(digest) || PyBytes_GET_SIZE(digest) < 8) {
            Py_DECREF(digest);
            PyErr_SetString(PyExc_TypeError, "entry_keys: the hash's digest() is not 8 bytes or more");
            goto fail;
        }
        char key[16];
        const unsigned char *d = (const unsigned char *)PyBytes_AS_STRING(digest);
        for (int b = 0; b < 8; b++) {
            key[2 * b] = hex[d[b] >> 4];
            key[2 * b + 1] = hex[d[b] & 15];
        }
        Py_DECREF(digest);
        PyObject *str = PyUnicode_FromStringAndSize(key, 16);
        if (!str)
            goto fail;
        PyList_SET_ITEM(result, i, str);
    }
    goto done;
fail:
    Py_CLEAR(result);
done:
    Py_XDECREF(digest_name);
    PyBuffer_Release(&valid);
    PyBuffer_Release(&data);
    return result;
}

static PyMethodDef methods[] = {
    {"score_columns", score_columns, METH_O,
     "score_columns(mapping) -> (query_ids, lengths, doc_ids, scores, hashes), or None when the mapping is unusual."},
    {"ranking_columns", ranking_columns, METH_O,
     "ranking_columns(rankings) -> (lengths, doc_ids, scores or None, repeats), or None when they are unusual."},
    {"judgement_columns", judgement_columns, METH_O,
     "judgement_columns(mapping) -> (lengths, doc_ids, grades, hashes), or None when the mapping is unusual."},
    {"group_judgements", group_judgements, METH_VARARGS,
     "group_judgements(nq, codes, doc_ids, grades) -> (dicts, kept, duplicates, conflicts, first row in conflict)."},
    {"dedupe_judgements", dedupe_judgements, METH_VARARGS,
     "dedupe_judgements(codes, doc_ids, grades) -> (kept, duplicates, conflicts, first, first_kept, hashes)."},
    {"json_lines", json_lines, METH_VARARGS,
     "json_lines(columns, rows) -> bytes of one compact JSON array per row, or None where a str needs escaping."},
    {"sort_within", sort_within, METH_VARARGS,
     "sort_within(ids, offsets) -> int64 permutation sorting each segment of strs by code point."},
    {"lookup", lookup, METH_VARARGS,
     "lookup(doc_ids, hashes, offsets, rows, judged_ids, judged_hashes, judged_offsets, values, missing) -> int32 "
     "value per doc id."},
    {"rank_cells", rank_cells, METH_VARARGS,
     "rank_cells(offsets, scores, cells, rows, rule, ids) -> int64 rank of each cell in its query by score."},
    {"lookup_packed", lookup_packed, METH_VARARGS,
     "lookup_packed(blob, starts, offsets, rows, judged_ids, judged_offsets, values, missing) -> int32 value per "
     "packed doc id."},
    {"entry_keys", entry_keys, METH_VARARGS,
     "entry_keys(sha256, texts, valid, rows, data, starts) -> the cache key (16 hex digits) of each query's entry."},
    {"parse_columns", parse_columns, METH_VARARGS,
     "parse_columns(data, kind, ascii, packed) -> (query_ids, codes, doc_ids, values, n, tag, repeats, "
     "interleaved) or None; with packed, doc_ids is (utf8 bytes, int64 starts)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_speedups", "rag_eval's TREC reader and packed-id grade lookup in C.", -1, methods};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    import_array();
    return PyModule_Create(&module);
}
