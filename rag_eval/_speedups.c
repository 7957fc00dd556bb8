/*
 * rag_eval._speedups: the TREC reader's per-line loop in C, and the grade lookup of the ids it packs.
 *
 * Two functions; wherever rag_eval calls them it has a pure-Python path that gives the same result (used when this
 * module is not built, or under RAG_EVAL_PURE_PYTHON=1; tests/test_speedups.py compares the two):
 *
 * - parse_columns: a whitespace-separated TREC run or qrels file into columns (rag_eval.data._columns); it returns
 *   None instead of guessing on anything unusual (a malformed line, a number not spelled as a plain ASCII decimal),
 *   so that the Python line reader handles the file and names the line and the problem;
 * - lookup_packed: the grade of every result for doc ids packed as UTF-8 bytes (what parse_columns and a stage's
 *   Arrow table give), in per-query judgement dicts (rag_eval.metrics._grades); it raises TypeError or ValueError
 *   on arrays that do not fit (a bug of the caller, never the user's data). Its Python path unpacks the ids into
 *   str objects and looks them up with dict.get.
 *
 * Each is kept because it makes the metric benchmark's headline read from TREC files at least 1.5x faster end to
 * end than its best alternative (benchmarks/bench_speedups.py; RESULTS.md, "The C extension"). Four other loops
 * (score_columns, judgement_dicts, lookup, search_segments) were measured no faster end to end than their Python
 * and NumPy twins and were removed in 0.3.0. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#define GRADE_LIMIT (1LL << 29) /* as rag_eval.data._columns.GRADE_LIMIT */
#include <string.h>

/* ---- lookup_packed(blob, starts, offsets, judgements, missing) -> int32 grades ----------------------------
   The same as lookup, for doc ids packed as UTF-8 bytes: each query's judgements go into a small C table
   keyed by the bytes of their doc ids, and the run's ids are looked up there without making Python objects. */

typedef struct {
    const char *ptr;
    Py_ssize_t len;
    npy_uint64 hash;
    npy_int32 grade;
} Judged;

static npy_uint64 span_hash(const char *p, Py_ssize_t len);

static PyObject *
lookup_packed(PyObject *self, PyObject *args)
{
    Py_buffer blob;
    PyArrayObject *starts, *offsets;
    PyObject *judgements;
    int missing;
    if (!PyArg_ParseTuple(args, "y*O!O!O!i", &blob, &PyArray_Type, &starts, &PyArray_Type, &offsets, &PyList_Type,
                          &judgements, &missing))
        return NULL;
    PyObject *result = NULL;
    Judged *table = NULL;
    Py_ssize_t capacity = 0;
    if (PyArray_TYPE(starts) != NPY_INT64 || PyArray_NDIM(starts) != 1 || !PyArray_IS_C_CONTIGUOUS(starts) ||
        PyArray_TYPE(offsets) != NPY_INT64 || PyArray_NDIM(offsets) != 1 || !PyArray_IS_C_CONTIGUOUS(offsets)) {
        PyErr_SetString(PyExc_TypeError, "lookup_packed: expected contiguous int64 arrays");
        goto done;
    }
    Py_ssize_t nq = PyList_GET_SIZE(judgements);
    npy_intp n = PyArray_DIM(starts, 0) - 1;
    const npy_int64 *o = (const npy_int64 *)PyArray_DATA(offsets), *st = (const npy_int64 *)PyArray_DATA(starts);
    if (n < 0 || PyArray_DIM(offsets, 0) != nq + 1 || o[0] != 0 || o[nq] != n || st[0] != 0 || st[n] > blob.len) {
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
        PyObject *judged = PyList_GET_ITEM(judgements, i);
        npy_int64 a = o[i], b = o[i + 1];
        if (a > b || b > n || (judged != Py_None && !PyDict_CheckExact(judged))) {
            PyErr_SetString(PyExc_ValueError, "lookup_packed: bad offsets or judgements");
            goto fail;
        }
        Py_ssize_t size = judged == Py_None ? 0 : PyDict_GET_SIZE(judged);
        if (size == 0) {
            for (npy_int64 j = a; j < b; j++)
                g[j] = missing;
            continue;
        }
        Py_ssize_t need = 8;
        while (need < 2 * size)
            need *= 2;
        if (need > capacity) {
            PyMem_Free(table);
            capacity = need;
            if (!(table = PyMem_Malloc(capacity * sizeof(Judged)))) {
                PyErr_NoMemory();
                goto fail;
            }
        }
        Py_ssize_t mask = need - 1, pos = 0;
        memset(table, 0, need * sizeof(Judged));
        PyObject *doc, *grade;
        while (PyDict_Next(judged, &pos, &doc, &grade)) {
            Py_ssize_t len;
            const char *utf8 = PyUnicode_Check(doc) ? PyUnicode_AsUTF8AndSize(doc, &len) : NULL;
            long value = PyLong_AsLong(grade);
            if (!utf8 || (value == -1 && PyErr_Occurred()) || value < INT32_MIN || value > INT32_MAX) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_ValueError, "lookup_packed: judgements must map str to a 32-bit int");
                goto fail;
            }
            npy_uint64 h = span_hash(utf8, len);
            Py_ssize_t k = h & mask;
            while (table[k].ptr)
                k = (k + 1) & mask;
            table[k] = (Judged){utf8, len, h, (npy_int32)value};
        }
        for (npy_int64 j = a; j < b; j++) {
            const char *p = bytes + st[j];
            Py_ssize_t len = st[j + 1] - st[j];
            npy_uint64 h = span_hash(p, len);
            Py_ssize_t k = h & mask;
            g[j] = missing;
            for (; table[k].ptr; k = (k + 1) & mask) {
                if (table[k].hash == h && table[k].len == len && memcmp(table[k].ptr, p, len) == 0) {
                    g[j] = table[k].grade;
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

static PyMethodDef methods[] = {
    {"lookup_packed", lookup_packed, METH_VARARGS,
     "lookup_packed(blob, starts, offsets, judgements, missing) -> int32 grade per packed doc id."},
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
