/*
 * The bulk sink's record encoder (spark/batch_encode.py) as a C loop: Arrow
 * columns in, the records blob of one v2 record batch out, with no Python
 * object per row.
 *
 * encode(rows, value, key, headers) -> bytes
 *   rows:    int64 row indices, in the order the records are written;
 *   value:   (offsets int64[n + 1], data, valid uint8[n]) -- a binary column;
 *   key:     the same, or None (every key null);
 *   headers: None, or (list_offsets int64[n + 1], key_offsets int64[m + 1],
 *            key_data, value_offsets int64[m + 1], value_data, value_valid uint8[m])
 *            -- list<struct<key: string, value: binary>>, with every header
 *            key present (the caller checks that; a null header key is refused).
 * Each record: attributes 0, timestampDelta 0 (the batch has one timestamp),
 * offsetDelta = its place in `rows`, then key, value and headers as in
 * protocol/records.py. The caller adds the batch header, compression and CRC.
 *
 * murmur2_partitions(rows, key, num_partitions) -> bytes (int32 per row):
 *   Kafka's default partitioner of a keyed record (the Java client's
 *   Utils.murmur2, toPositive, modulo), -1 for a null key.
 *
 * Both raise ValueError on anything out of bounds: a row index past the
 * columns, offsets that decrease or point past their data, a blob past
 * INT32_MAX. Every offset is checked before it is used as a position.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    Py_buffer offsets, data, valid;
    Py_ssize_t n; /* rows (or headers) the column holds */
    int present;
} Column;

static void column_release(Column *c) {
    if (!c->present) return;
    PyBuffer_Release(&c->offsets);
    PyBuffer_Release(&c->data);
    if (c->valid.obj != NULL || c->valid.buf != NULL) PyBuffer_Release(&c->valid);
    c->present = 0;
}

/* (offsets, data, valid) -> Column; valid may be None when `need_valid` is 0. */
static int column_get(PyObject *tuple, Column *c, const char *what) {
    memset(c, 0, sizeof *c);
    PyObject *o, *d, *v;
    if (!PyArg_ParseTuple(tuple, "OOO", &o, &d, &v)) return -1;
    if (PyObject_GetBuffer(o, &c->offsets, PyBUF_SIMPLE) < 0) return -1;
    if (PyObject_GetBuffer(d, &c->data, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&c->offsets);
        return -1;
    }
    if (PyObject_GetBuffer(v, &c->valid, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&c->offsets);
        PyBuffer_Release(&c->data);
        return -1;
    }
    c->present = 1;
    if (c->offsets.len % 8 != 0 || c->offsets.len < 8) {
        PyErr_Format(PyExc_ValueError, "%s: offsets must be int64, at least one", what);
        column_release(c);
        return -1;
    }
    c->n = c->offsets.len / 8 - 1;
    if (c->valid.len != c->n) {
        PyErr_Format(PyExc_ValueError, "%s: %zd validity bytes for %zd rows", what,
                     c->valid.len, c->n);
        column_release(c);
        return -1;
    }
    return 0;
}

/* The bytes of row i: start and length, checked against the data. */
static int column_field(const Column *c, Py_ssize_t i, const char **start, int64_t *length,
                        const char *what) {
    if (i < 0 || i >= c->n) {
        PyErr_Format(PyExc_ValueError, "%s: row %zd outside %zd rows", what, i, c->n);
        return -1;
    }
    if (!((const unsigned char *)c->valid.buf)[i]) {
        *start = NULL;
        *length = -1;
        return 0;
    }
    int64_t lo, hi;
    memcpy(&lo, (const char *)c->offsets.buf + 8 * i, 8);
    memcpy(&hi, (const char *)c->offsets.buf + 8 * (i + 1), 8);
    if (lo < 0 || hi < lo || hi > (int64_t)c->data.len) {
        PyErr_Format(PyExc_ValueError, "%s: row %zd offsets %lld..%lld outside %zd bytes", what,
                     i, (long long)lo, (long long)hi, c->data.len);
        return -1;
    }
    *start = (const char *)c->data.buf + lo;
    *length = hi - lo;
    return 0;
}

static size_t varint_size(int64_t value) {
    uint64_t v = ((uint64_t)value << 1) ^ (uint64_t)(value >> 63);
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static char *put_varint(char *out, int64_t value) {
    uint64_t v = ((uint64_t)value << 1) ^ (uint64_t)(value >> 63);
    while (v >= 0x80) {
        *out++ = (char)((v & 0x7F) | 0x80);
        v >>= 7;
    }
    *out++ = (char)v;
    return out;
}

static size_t field_size(int64_t length) {
    return varint_size(length) + (length > 0 ? (size_t)length : 0);
}

static char *put_field(char *out, const char *start, int64_t length) {
    out = put_varint(out, length);
    if (length > 0) {
        memcpy(out, start, (size_t)length);
        out += length;
    }
    return out;
}

typedef struct {
    Column keys, values; /* per header */
    Py_buffer list_offsets;
    Py_ssize_t n;
    int present;
} Headers;

static void headers_release(Headers *h) {
    if (!h->present) return;
    PyBuffer_Release(&h->list_offsets);
    column_release(&h->keys);
    column_release(&h->values);
    h->present = 0;
}

static int headers_get(PyObject *tuple, Headers *h) {
    memset(h, 0, sizeof *h);
    PyObject *lo, *ko, *kd, *vo, *vd, *vv;
    if (!PyArg_ParseTuple(tuple, "OOOOOO", &lo, &ko, &kd, &vo, &vd, &vv)) return -1;
    if (PyObject_GetBuffer(lo, &h->list_offsets, PyBUF_SIMPLE) < 0) return -1;
    h->present = 1;
    if (h->list_offsets.len % 8 != 0 || h->list_offsets.len < 8) {
        PyErr_SetString(PyExc_ValueError, "headers: list offsets must be int64, at least one");
        goto fail;
    }
    h->n = h->list_offsets.len / 8 - 1;
    /* header keys are never null: a validity of all ones is built from the value's */
    PyObject *kt = Py_BuildValue("(OOO)", ko, kd, vv);
    if (kt == NULL) goto fail;
    int bad = column_get(kt, &h->keys, "header keys");
    Py_DECREF(kt);
    if (bad < 0) goto fail;
    PyObject *vt = Py_BuildValue("(OOO)", vo, vd, vv);
    if (vt == NULL) goto fail;
    bad = column_get(vt, &h->values, "header values");
    Py_DECREF(vt);
    if (bad < 0) goto fail;
    return 0;
fail:
    headers_release(h);
    return -1;
}

/* Headers [first, last) of row i. */
static int header_range(const Headers *h, Py_ssize_t i, int64_t *first, int64_t *last) {
    if (i < 0 || i >= h->n) {
        PyErr_Format(PyExc_ValueError, "headers: row %zd outside %zd rows", i, h->n);
        return -1;
    }
    memcpy(first, (const char *)h->list_offsets.buf + 8 * i, 8);
    memcpy(last, (const char *)h->list_offsets.buf + 8 * (i + 1), 8);
    if (*first < 0 || *last < *first || *last > (int64_t)h->keys.n) {
        PyErr_Format(PyExc_ValueError, "headers: row %zd list offsets outside %zd headers", i,
                     h->keys.n);
        return -1;
    }
    return 0;
}

/* The header key of header j ignores the validity (keys are never null). */
static int header_key(const Headers *h, int64_t j, const char **start, int64_t *length) {
    int64_t lo, hi;
    memcpy(&lo, (const char *)h->keys.offsets.buf + 8 * j, 8);
    memcpy(&hi, (const char *)h->keys.offsets.buf + 8 * (j + 1), 8);
    if (lo < 0 || hi < lo || hi > (int64_t)h->keys.data.len) {
        PyErr_Format(PyExc_ValueError, "header keys: header %lld outside the data",
                     (long long)j);
        return -1;
    }
    *start = (const char *)h->keys.data.buf + lo;
    *length = hi - lo;
    return 0;
}

/* Size of row i's record body (after its length varint), or -1 on error. */
static int64_t body_size(const Column *key, const Column *value, const Headers *h,
                         Py_ssize_t i, int64_t delta) {
    const char *s;
    int64_t kl = -1, vl;
    if (key->present && column_field(key, i, &s, &kl, "key") < 0) return -1;
    if (column_field(value, i, &s, &vl, "value") < 0) return -1;
    int64_t size = 1 + 1 + (int64_t)varint_size(delta) + (int64_t)field_size(kl) +
                   (int64_t)field_size(vl);
    int64_t first = 0, last = 0;
    if (h->present && header_range(h, i, &first, &last) < 0) return -1;
    size += (int64_t)varint_size(last - first);
    for (int64_t j = first; j < last; j++) {
        int64_t hk, hv;
        if (header_key(h, j, &s, &hk) < 0) return -1;
        if (column_field(&h->values, (Py_ssize_t)j, &s, &hv, "header values") < 0) return -1;
        size += (int64_t)field_size(hk) + (int64_t)field_size(hv);
    }
    return size;
}

static char *put_body(char *out, const Column *key, const Column *value, const Headers *h,
                      Py_ssize_t i, int64_t delta) {
    const char *s;
    int64_t len = -1;
    *out++ = 0;               /* attributes */
    out = put_varint(out, 0); /* timestampDelta */
    out = put_varint(out, delta);
    if (key->present) column_field(key, i, &s, &len, "key");
    out = put_field(out, len == -1 ? NULL : s, len);
    column_field(value, i, &s, &len, "value");
    out = put_field(out, len == -1 ? NULL : s, len);
    int64_t first = 0, last = 0;
    if (h->present) header_range(h, i, &first, &last);
    out = put_varint(out, last - first);
    for (int64_t j = first; j < last; j++) {
        header_key(h, j, &s, &len);
        out = put_field(out, s, len);
        column_field(&h->values, (Py_ssize_t)j, &s, &len, "header values");
        out = put_field(out, len == -1 ? NULL : s, len);
    }
    return out;
}

static PyObject *encode(PyObject *self, PyObject *args) {
    Py_buffer rows;
    PyObject *value_t, *key_t, *headers_t;
    if (!PyArg_ParseTuple(args, "y*OOO", &rows, &value_t, &key_t, &headers_t)) return NULL;
    Column value = {0}, key = {0};
    Headers headers = {0};
    PyObject *result = NULL;
    if (rows.len % 8 != 0) {
        PyErr_SetString(PyExc_ValueError, "rows must be int64");
        goto done;
    }
    if (column_get(value_t, &value, "value") < 0) goto done;
    if (key_t != Py_None && column_get(key_t, &key, "key") < 0) goto done;
    if (headers_t != Py_None && headers_get(headers_t, &headers) < 0) goto done;
    Py_ssize_t count = rows.len / 8;
    /* first pass: sizes (and every bound checked), second pass: bytes */
    int64_t total = 0;
    for (Py_ssize_t r = 0; r < count; r++) {
        int64_t i;
        memcpy(&i, (const char *)rows.buf + 8 * r, 8);
        if (i < 0 || i > PY_SSIZE_T_MAX) {
            PyErr_Format(PyExc_ValueError, "row index %lld", (long long)i);
            goto done;
        }
        int64_t body = body_size(&key, &value, &headers, (Py_ssize_t)i, r);
        if (body < 0) goto done;
        total += (int64_t)varint_size(body) + body;
        if (total > INT32_MAX) {
            PyErr_SetString(PyExc_ValueError, "records blob past INT32_MAX bytes");
            goto done;
        }
    }
    result = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    if (result == NULL) goto done;
    char *out = PyBytes_AS_STRING(result);
    for (Py_ssize_t r = 0; r < count; r++) {
        int64_t i;
        memcpy(&i, (const char *)rows.buf + 8 * r, 8);
        int64_t body = body_size(&key, &value, &headers, (Py_ssize_t)i, r);
        out = put_varint(out, body);
        out = put_body(out, &key, &value, &headers, (Py_ssize_t)i, r);
    }
    assert(out == PyBytes_AS_STRING(result) + total);
done:
    column_release(&value);
    column_release(&key);
    headers_release(&headers);
    PyBuffer_Release(&rows);
    return result;
}

/* Kafka's murmur2 (Utils.murmur2 of the Java client), seed 0x9747b28c. */
static uint32_t murmur2(const unsigned char *data, int64_t length) {
    const uint32_t m = 0x5bd1e995;
    const int r = 24;
    uint32_t h = 0x9747b28cu ^ (uint32_t)length;
    int64_t length4 = length / 4;
    for (int64_t i = 0; i < length4; i++) {
        int64_t i4 = i * 4;
        uint32_t k = (uint32_t)data[i4] | ((uint32_t)data[i4 + 1] << 8) |
                     ((uint32_t)data[i4 + 2] << 16) | ((uint32_t)data[i4 + 3] << 24);
        k *= m;
        k ^= k >> r;
        k *= m;
        h *= m;
        h ^= k;
    }
    int64_t tail = length & ~(int64_t)3;
    switch (length % 4) {
    case 3:
        h ^= (uint32_t)data[tail + 2] << 16;
        /* fall through */
    case 2:
        h ^= (uint32_t)data[tail + 1] << 8;
        /* fall through */
    case 1:
        h ^= (uint32_t)data[tail];
        h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return h;
}

static PyObject *murmur2_partitions(PyObject *self, PyObject *args) {
    Py_buffer rows;
    PyObject *key_t;
    long long num_partitions;
    if (!PyArg_ParseTuple(args, "y*OL", &rows, &key_t, &num_partitions)) return NULL;
    Column key = {0};
    PyObject *result = NULL;
    if (rows.len % 8 != 0 || num_partitions < 1 || num_partitions > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "rows must be int64 and num_partitions positive");
        goto done;
    }
    if (column_get(key_t, &key, "key") < 0) goto done;
    Py_ssize_t count = rows.len / 8;
    result = PyBytes_FromStringAndSize(NULL, count * 4);
    if (result == NULL) goto done;
    int32_t *out = (int32_t *)PyBytes_AS_STRING(result);
    for (Py_ssize_t r = 0; r < count; r++) {
        int64_t i;
        const char *s;
        int64_t len;
        memcpy(&i, (const char *)rows.buf + 8 * r, 8);
        if (i < 0 || i > PY_SSIZE_T_MAX || column_field(&key, (Py_ssize_t)i, &s, &len, "key") < 0) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "row index %lld", (long long)i);
            Py_CLEAR(result);
            goto done;
        }
        out[r] = len < 0 ? -1
                         : (int32_t)((murmur2((const unsigned char *)s, len) & 0x7fffffffu) %
                                     (uint32_t)num_partitions);
    }
done:
    column_release(&key);
    PyBuffer_Release(&rows);
    return result;
}

static PyMethodDef methods[] = {
    {"encode", encode, METH_VARARGS,
     "encode(rows, value, key, headers) -> the records blob of one v2 batch"},
    {"murmur2_partitions", murmur2_partitions, METH_VARARGS,
     "murmur2_partitions(rows, key, num_partitions) -> int32 per row (-1: null key)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_batch_encode",
    "Arrow columns encoded as Kafka v2 records (spark/batch_encode.py).", -1, methods,
};

PyMODINIT_FUNC PyInit__batch_encode(void) { return PyModule_Create(&module); }
