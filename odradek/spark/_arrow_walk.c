/*
 * The record walk of spark/arrow_records.py (ArrowRecordBuilder.add) as a C
 * loop, for batches whose records carry no headers: it returns, as packed
 * machine arrays, what the Python loop appends per record, so that a Fetch or
 * segment read makes no Python object per record.
 *
 * scan(blob, count, lo, hi, base_offset, base_timestamp, pos_base) -> None or
 *   (rows, bounds, offsets, timestamps, key_valid, value_valid)
 *
 * - bounds: int32 per kept record: key start, key end, value start, value end
 *   (positions in `blob` plus `pos_base`, the blob's place in the builder's
 *   concatenated buffer; a null field is empty);
 * - offsets, timestamps: int64 per kept record (base + delta);
 * - key_valid, value_valid: one byte per kept record, 0 for a null field.
 * Records whose offset is outside [lo, hi) are skipped (only their length,
 * timestamp and offset deltas are read, as the Python loop does).
 *
 * This is an accelerator, not the authority: it answers None for anything it
 * does not accept (a malformed record, a record with headers, a position past
 * int32) and the Python loop then decodes the batch or raises the exact error.
 * So it must never accept what the Python loop refuses; refusing more only
 * costs speed. Every byte is read after checking it lies before the end of the
 * blob and every length is compared with the bytes left before it is added to
 * a position.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* A zigzag varint of at most 10 bytes at *pos, decoded to a signed value.
 * Returns -1 past `stop`, for more than 10 bytes, or when the value does not
 * fit in 62 bits (no length or delta of a valid record comes near that). */
static int read_varint(const unsigned char *buf, size_t stop, size_t *pos, int64_t *out) {
    uint64_t result = 0;
    unsigned shift = 0;
    size_t p = *pos;
    for (;;) {
        if (p >= stop) return -1;
        unsigned char b = buf[p++];
        uint64_t bits = (uint64_t)(b & 0x7F);
        if (shift >= 63 || (shift > 0 && (bits >> (63 - shift)) != 0)) return -1;
        result |= bits << shift;
        if (b < 0x80) break;
        shift += 7;
    }
    *pos = p;
    *out = (int64_t)(result >> 1) ^ -(int64_t)(result & 1);
    return 0;
}

typedef struct {
    char *data;
    size_t len, cap;
} Buf;

static int buf_put(Buf *b, const void *src, size_t n) {
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 4096;
        while (cap < b->len + n) cap *= 2;
        char *grown = PyMem_Realloc(b->data, cap);
        if (grown == NULL) return -1;
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, src, n);
    b->len += n;
    return 0;
}

/* A key or value field: length varint (-1 null), then the bytes, inside `end`. */
static int field(const unsigned char *buf, size_t stop, size_t end, size_t *pos,
                 size_t *start, size_t *field_end, char *valid) {
    int64_t length;
    if (read_varint(buf, stop, pos, &length) < 0) return -1;
    if (length < -1) return -1;
    *valid = length >= 0;
    if (length < 0) length = 0;
    if (*pos > end || (uint64_t)length > (uint64_t)(end - *pos)) return -1;
    *start = *pos;
    *pos += (size_t)length;
    *field_end = *pos;
    return 0;
}

static PyObject *scan(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t count;
    long long lo, hi, base_offset, base_ts, pos_base;
    if (!PyArg_ParseTuple(args, "y*nLLLLL", &view, &count, &lo, &hi, &base_offset, &base_ts,
                          &pos_base))
        return NULL;
    Buf bounds = {0}, offsets = {0}, stamps = {0}, key_valid = {0}, value_valid = {0};
    PyObject *result = NULL;
    const unsigned char *buf = (const unsigned char *)view.buf;
    size_t stop = (size_t)view.len;
    size_t pos = 0;
    Py_ssize_t rows = 0;
    if (count < 0 || pos_base < 0 || pos_base + (long long)stop > INT32_MAX) goto refuse;
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t length, ts_delta, off_delta;
        if (read_varint(buf, stop, &pos, &length) < 0) goto refuse;
        if (length < 1 || (uint64_t)length > (uint64_t)(stop - pos)) goto refuse;
        size_t end = pos + (size_t)length;
        pos += 1; /* attributes */
        if (read_varint(buf, stop, &pos, &ts_delta) < 0) goto refuse;
        if (read_varint(buf, stop, &pos, &off_delta) < 0) goto refuse;
        long long offset;
        if (__builtin_add_overflow(base_offset, off_delta, &offset)) goto refuse;
        if (offset < lo || offset >= hi) {
            pos = end;
            continue;
        }
        size_t ks, ke, vs, ve;
        char kv, vv;
        if (field(buf, stop, end, &pos, &ks, &ke, &kv) < 0) goto refuse;
        if (field(buf, stop, end, &pos, &vs, &ve, &vv) < 0) goto refuse;
        /* headers: only a zero count here; anything else is the Python loop's */
        if (pos >= end || buf[pos] != 0) goto refuse;
        pos += 1;
        if (pos != end) goto refuse;
        int32_t b4[4] = {(int32_t)(pos_base + ks), (int32_t)(pos_base + ke),
                         (int32_t)(pos_base + vs), (int32_t)(pos_base + ve)};
        int64_t ts;
        if (__builtin_add_overflow(base_ts, ts_delta, &ts)) goto refuse;
        int64_t off = offset;
        if (buf_put(&bounds, b4, sizeof b4) < 0 || buf_put(&offsets, &off, 8) < 0 ||
            buf_put(&stamps, &ts, 8) < 0 || buf_put(&key_valid, &kv, 1) < 0 ||
            buf_put(&value_valid, &vv, 1) < 0) {
            PyErr_NoMemory();
            goto fail;
        }
        rows++;
    }
    if (pos != stop) goto refuse;
    result = Py_BuildValue("(ny#y#y#y#y#)", rows, bounds.data ? bounds.data : "",
                           (Py_ssize_t)bounds.len, offsets.data ? offsets.data : "",
                           (Py_ssize_t)offsets.len, stamps.data ? stamps.data : "",
                           (Py_ssize_t)stamps.len, key_valid.data ? key_valid.data : "",
                           (Py_ssize_t)key_valid.len, value_valid.data ? value_valid.data : "",
                           (Py_ssize_t)value_valid.len);
    goto fail; /* frees the buffers; result is returned */
refuse:
    result = Py_None;
    Py_INCREF(result);
fail:
    PyMem_Free(bounds.data);
    PyMem_Free(offsets.data);
    PyMem_Free(stamps.data);
    PyMem_Free(key_valid.data);
    PyMem_Free(value_valid.data);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS,
     "scan(blob, count, lo, hi, base_offset, base_timestamp, pos_base) -> None or "
     "(rows, bounds, offsets, timestamps, key_valid, value_valid)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_arrow_walk",
    "Record batches without headers walked into Arrow buffers (spark/arrow_records.py).",
    -1, methods,
};

PyMODINIT_FUNC PyInit__arrow_walk(void) { return PyModule_Create(&module); }
