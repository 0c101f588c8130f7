/* edgewise._scan: three generic primitives in C, each measured on a pack of 20,000 chunks or a large
 * request body, each with a Python twin. No policy lives here: which chunks are valid, dropped or
 * why is decided in Python.
 *
 * - scan_words, words_over: from an order of texts, the first whose word bound is within a number,
 *   and one text's bound against a number (edgewise.tokens.wordbound; its caller is
 *   edgewise.packing.fast.skip).
 * - any_in_ranges: whether a text holds a code point of a table of ranges (the characters on which a
 *   counter disagrees with tiktoken, edgewise.tokens.counters.UNEQUAL).
 * - within: whether a parsed JSON value nests its objects and arrays less deep than a limit and holds
 *   no float outside a bound (the limit and the bound are edgewise.jsonin.strict's, passed in).
 *
 * Optional: setup.py builds it with optional=True; edgewise.compiled loads it, and each caller
 * falls back to the same pass in Python where it is missing.
 * tests/tokens/test_scan.py holds each pair to the same answers.
 *
 * A text's bound is edgewise.tokens.wordbound.words_bound: its whitespace-separated words as str.split()
 * finds them (Py_UNICODE_ISSPACE), less one for each of U+001C..U+001F (str.split() splits on them,
 * the encodings' \s does not) and, for o200k, one for each line break followed by "/". The scan
 * only asks whether that bound passes `stop`, so it counts words until it does.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

static unsigned char space_ucs1[256];  /* Py_UNICODE_ISSPACE of every one-byte character */

/* U+001C..U+001F, and (with bridges) "\n/" and "\r/", in a text: what words_bound takes off. */
static Py_ssize_t
taken_off(int kind, const void *data, Py_ssize_t len, int bridges)
{
    Py_ssize_t fix = 0, i;
    if (kind == PyUnicode_1BYTE_KIND) {
        const unsigned char *s = (const unsigned char *)data, *end = s + len, *p;
        for (i = 0; i < len; i++)  /* one pass the compiler vectorises */
            fix += (unsigned char)(s[i] - 0x1c) < 4;
        if (bridges)
            for (p = s + 1; p < end && (p = memchr(p, '/', (size_t)(end - p))) != NULL; p++)
                if (p[-1] == '\n' || p[-1] == '\r')
                    fix++;
        return fix;
    }
    for (i = 0; i < len; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c >= 0x1c && c <= 0x1f)
            fix++;
        else if (bridges && c == '/' && i > 0) {
            Py_UCS4 b = PyUnicode_READ(kind, data, i - 1);
            if (b == '\n' || b == '\r')
                fix++;
        }
    }
    return fix;
}

/* 1 when words_bound(text, stop, bridges) > stop, else 0; -1 with an error set. */
static int
bound_over(PyObject *text, Py_ssize_t stop, int bridges)
{
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(text) < 0)  /* a legacy string made by a C extension: its canonical form */
        return -1;
#endif
    if (stop < 0)
        return 1;
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t len = PyUnicode_GET_LENGTH(text), i;
    Py_ssize_t need = stop + taken_off(kind, data, len, bridges) + 1;  /* words that pass stop */
    Py_ssize_t words = 0;
    int in_word = 0;
    if (kind == PyUnicode_1BYTE_KIND) {
        /* a word starts at a non-space after a space (or at the start): counted without a branch,
           64 characters at a time, then compared */
        const unsigned char *s = (const unsigned char *)data;
        if (len == 0)
            return 0;
        words = !space_ucs1[s[0]];
        for (i = 1; i < len;) {
            Py_ssize_t end = len - i > 64 ? i + 64 : len;
            for (; i < end; i++)
                words += space_ucs1[s[i - 1]] & (space_ucs1[s[i]] ^ 1);
            if (words >= need)
                return 1;
        }
        return words >= need;
    }
    for (i = 0; i < len; i++) {
        if (Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, i)))
            in_word = 0;
        else if (!in_word) {
            in_word = 1;
            if (++words >= need)
                return 1;
        }
    }
    return 0;
}

PyDoc_STRVAR(scan_words_doc,
"scan_words(bridged, texts, order, start, stop, limit) -> int\n\n"
"From rank start of order (positions in texts; None: texts in order), the first rank whose text\n"
"has at most limit characters or a word bound of at most stop; len(order) if none.\n"
"See edgewise.tokens.wordbound.scan_words_py, the same in Python.");

/* A generic primitive: it reads texts and their word bounds only, and knows nothing of why a
   caller skips them (edgewise.packing.select decides that, in Python). */
static PyObject *
scan_words(PyObject *self, PyObject *args)
{
    PyObject *texts, *order;
    Py_ssize_t start, stop, limit, n, rank;
    int bridged;
    (void)self;
    if (!PyArg_ParseTuple(args, "pO!Onnn:scan_words", &bridged, &PyList_Type, &texts, &order, &start, &stop, &limit))
        return NULL;
    if (order != Py_None && !PyList_Check(order)) {
        PyErr_Format(PyExc_TypeError, "scan_words: order must be a list or None, not %.80s", Py_TYPE(order)->tp_name);
        return NULL;
    }
    n = order == Py_None ? PyList_GET_SIZE(texts) : PyList_GET_SIZE(order);
    for (rank = start < 0 ? 0 : start; rank < n; rank++) {
        Py_ssize_t at = rank;
        if (order != Py_None) {
            at = PyLong_AsSsize_t(PyList_GET_ITEM(order, rank));
            if (at == -1 && PyErr_Occurred())
                return NULL;
            if (at < 0 || at >= PyList_GET_SIZE(texts)) {
                PyErr_Format(PyExc_IndexError, "scan_words: order[%zd] = %zd is not a position in texts", rank, at);
                return NULL;
            }
        }
        PyObject *text = PyList_GET_ITEM(texts, at);
        if (!PyUnicode_Check(text)) {
            PyErr_Format(PyExc_TypeError, "scan_words: texts[%zd] must be a str, not %.80s", at, Py_TYPE(text)->tp_name);
            return NULL;
        }
#if PY_VERSION_HEX < 0x030C0000
        if (PyUnicode_READY(text) < 0)
            return NULL;
#endif
        if (PyUnicode_GET_LENGTH(text) <= limit)
            break;
        int over = bound_over(text, stop, bridged);
        if (over < 0)
            return NULL;
        if (!over)
            break;
    }
    return PyLong_FromSsize_t(rank < n ? rank : n);
}

PyDoc_STRVAR(bound_over_doc,
"words_over(text, stop, bridges) -> bool\n\n"
"Whether edgewise.tokens.wordbound.words_bound(text, stop, bridges) passes stop.");

static PyObject *
words_over(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *text;
    Py_ssize_t stop;
    int bridges;
    if (!PyArg_ParseTuple(args, "Unp:words_over", &text, &stop, &bridges))
        return NULL;
    int over = bound_over(text, stop, bridges);
    return over < 0 ? NULL : PyBool_FromLong(over);
}

PyDoc_STRVAR(any_in_ranges_doc,
"any_in_ranges(text, pages, table) -> bool\n\n"
"Whether text holds a code point of table: sorted, disjoint ranges packed as native uint32 pairs\n"
"(first, last). pages has a byte per 256 code points, nonzero where a range touches them: most\n"
"characters are passed on one look-up. Both are built once in Python. A text whose characters all\n"
"lie below the first range is answered from its width alone.");

static PyObject *
any_in_ranges(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *text, *pages, *table;
    if (!PyArg_ParseTuple(args, "UO!O!", &text, &PyBytes_Type, &pages, &PyBytes_Type, &table))
        return NULL;
    Py_ssize_t pairs = PyBytes_GET_SIZE(table) / (Py_ssize_t)(2 * sizeof(uint32_t)), n = PyUnicode_GET_LENGTH(text), i, j;
    Py_ssize_t n_pages = PyBytes_GET_SIZE(pages);
    if (pairs == 0)
        Py_RETURN_FALSE;
    const uint32_t *r = (const uint32_t *)PyBytes_AS_STRING(table);
    const unsigned char *page = (const unsigned char *)PyBytes_AS_STRING(pages);
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_UCS4 widest = kind == PyUnicode_1BYTE_KIND ? 0xff : kind == PyUnicode_2BYTE_KIND ? 0xffff : 0x10ffff;
    if (r[0] > widest)
        Py_RETURN_FALSE;
    for (i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if ((Py_ssize_t)(c >> 8) >= n_pages || !page[c >> 8])
            continue;
        for (j = 0; j < pairs && r[2 * j] <= c; j++)
            if (c <= r[2 * j + 1])
                Py_RETURN_TRUE;
    }
    Py_RETURN_FALSE;
}

PyDoc_STRVAR(within_doc,
"within(value, limit, bound, /)\n--\n\n"
"Whether no dict or list of value (exact types) sits `limit` levels below it (value is level 0) and\n"
"no float of it has a magnitude of `bound` or more. Twin: edgewise.jsonin.strict.clean_py.");

static int
within_walk(PyObject *v, int depth, int limit, double bound)
{
    Py_ssize_t i, n;
    if (PyFloat_CheckExact(v)) {
        double x = PyFloat_AS_DOUBLE(v);
        return x > -bound && x < bound;
    }
    if (PyDict_CheckExact(v)) {
        PyObject *key, *item;
        if (depth == limit)
            return 0;
        i = 0;
        while (PyDict_Next(v, &i, &key, &item))
            if (!within_walk(item, depth + 1, limit, bound))
                return 0;
        return 1;
    }
    if (PyList_CheckExact(v)) {
        if (depth == limit)
            return 0;
        n = PyList_GET_SIZE(v);
        for (i = 0; i < n; i++)
            if (!within_walk(PyList_GET_ITEM(v, i), depth + 1, limit, bound))
                return 0;
        return 1;
    }
    return 1;
}

static PyObject *
within(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *value;
    int limit;
    double bound;
    if (!PyArg_ParseTuple(args, "Oid", &value, &limit, &bound))
        return NULL;
    if (limit < 0 || limit > 10000) {
        PyErr_Format(PyExc_ValueError, "limit must be from 0 to 10000, but got %d", limit);
        return NULL;
    }
    return PyBool_FromLong(within_walk(value, 0, limit, bound));
}

static PyMethodDef methods[] = {
    {"scan_words", scan_words, METH_VARARGS, scan_words_doc},
    {"words_over", words_over, METH_VARARGS, bound_over_doc},
    {"any_in_ranges", any_in_ranges, METH_VARARGS, any_in_ranges_doc},
    {"within", within, METH_VARARGS, within_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "edgewise._scan",
    "Generic passes in C, each with a Python twin (see edgewise.compiled).", -1, methods,
};

PyMODINIT_FUNC
PyInit__scan(void)
{
    for (int c = 0; c < 256; c++)
        space_ucs1[c] = Py_UNICODE_ISSPACE((Py_UCS4)c) ? 1 : 0;
    return PyModule_Create(&module);
}
