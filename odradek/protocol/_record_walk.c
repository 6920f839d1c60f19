/*
 * The produce path's per-record check (protocol/record_scan.py, check_records)
 * as a C loop: walk every v2 record of a records blob, lengths only, and list
 * the records that have no key.
 *
 * This is an accelerator, not the authority. It answers either "every record
 * is well formed, these have no key" or "something is wrong" (None); on None
 * the caller runs the Python walker, which finds the exact error and message.
 * So the C walk must never accept what the Python walk refuses; refusing too
 * much only costs speed. Every byte is read only after checking it lies before
 * `stop`, and every length is compared against the bytes left before it is
 * added to a position, so no attacker-chosen value can move a read outside
 * the buffer or overflow a position.
 *
 * Record layout (Kafka's DefaultRecord): length varint, attributes int8,
 * timestamp delta varlong, offset delta varint, key length varint + key,
 * value length varint + value, header count varint, headers (key length
 * varint + key, value length varint + value). All varints are zigzag; the
 * Python walker accepts up to 10 bytes per varint and so does this one.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* An unsigned varint at *pos (raw, still zigzag-encoded). Returns 0 on success,
 * -1 past `stop` or longer than 10 bytes. *huge is set when the value does not
 * fit in 62 bits (its meaning as a length is then always "out of bounds"). */
static int read_uvarint(const unsigned char *buf, size_t stop, size_t *pos,
                        uint64_t *out, int *huge) {
    uint64_t result = 0;
    unsigned shift = 0;
    size_t p = *pos;
    *huge = 0;
    for (;;) {
        if (p >= stop) return -1;
        unsigned char b = buf[p++];
        uint64_t bits = (uint64_t)(b & 0x7F);
        if (shift < 62) {
            if (shift > 0 && (bits >> (62 - shift)) != 0) *huge = 1;
            result |= bits << shift;
        } else if (bits != 0) {
            *huge = 1;
        }
        if (b < 0x80) break;
        shift += 7;
        if (shift > 63) return -1;
    }
    *pos = p;
    *out = result;
    return 0;
}

/* Past a key or value field whose raw (zigzag) length is at *pos. is_null is
 * set for length -1; any other negative length is an error. The field must end
 * at or before `end`. */
static int skip_field(const unsigned char *buf, size_t stop, size_t end, size_t *pos,
                      int *is_null) {
    uint64_t raw;
    int huge;
    if (read_uvarint(buf, stop, pos, &raw, &huge) < 0) return -1;
    *is_null = 0;
    if (raw & 1) {
        if (raw != 1 || huge) return -1;
        *is_null = 1;
        return 0;
    }
    if (huge) return -1;
    uint64_t length = raw >> 1;
    if (*pos > end || length > (uint64_t)(end - *pos)) return -1;
    *pos += (size_t)length;
    return 0;
}

static int check_headers(const unsigned char *buf, size_t stop, size_t end, size_t *pos) {
    uint64_t raw;
    int huge, is_null;
    if (*pos > end) return -1;
    size_t left = end - *pos;
    if (read_uvarint(buf, stop, pos, &raw, &huge) < 0) return -1;
    if ((raw & 1) || huge) return -1;
    uint64_t count = raw >> 1;
    if (count > left) return -1;
    for (uint64_t h = 0; h < count; h++) {
        size_t key_start;
        uint64_t key_raw;
        if (read_uvarint(buf, stop, pos, &key_raw, &huge) < 0) return -1;
        if ((key_raw & 1) || huge) return -1; /* null or negative header key */
        uint64_t key_length = key_raw >> 1;
        key_start = *pos;
        if (key_start > end || key_length > (uint64_t)(end - key_start)) return -1;
        *pos += (size_t)key_length;
        /* Header keys are strings: Python's own UTF-8 decoder decides. */
        PyObject *text = PyUnicode_DecodeUTF8((const char *)buf + key_start,
                                              (Py_ssize_t)key_length, "strict");
        if (text == NULL) {
            PyErr_Clear();
            return -1;
        }
        Py_DECREF(text);
        if (skip_field(buf, stop, end, pos, &is_null) < 0) return -1;
    }
    return 0;
}

/* walk(blob, start, stop, count) -> list of keyless record indexes, or None. */
static PyObject *walk(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t start_arg, stop_arg, count_arg;
    if (!PyArg_ParseTuple(args, "y*nnn", &view, &start_arg, &stop_arg, &count_arg)) return NULL;
    PyObject *keyless = NULL;
    if (start_arg < 0 || stop_arg < start_arg || stop_arg > view.len || count_arg < 0) goto bad;
    keyless = PyList_New(0);
    if (keyless == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    const unsigned char *buf = (const unsigned char *)view.buf;
    size_t stop = (size_t)stop_arg;
    size_t pos = (size_t)start_arg;
    uint64_t raw;
    int huge, is_null;
    for (Py_ssize_t i = 0; i < count_arg; i++) {
        if (read_uvarint(buf, stop, &pos, &raw, &huge) < 0) goto bad;
        if ((raw & 1) || raw == 0 || huge) goto bad;
        uint64_t length = raw >> 1;
        if (length > (uint64_t)(stop - pos)) goto bad;
        size_t end = pos + (size_t)length;
        pos += 1; /* attributes */
        if (read_uvarint(buf, stop, &pos, &raw, &huge) < 0) goto bad; /* timestamp delta */
        if (read_uvarint(buf, stop, &pos, &raw, &huge) < 0) goto bad; /* offset delta */
        if (skip_field(buf, stop, end, &pos, &is_null) < 0) goto bad; /* key */
        if (is_null) {
            PyObject *index = PyLong_FromSsize_t(i);
            if (index == NULL || PyList_Append(keyless, index) < 0) {
                Py_XDECREF(index);
                Py_DECREF(keyless);
                PyBuffer_Release(&view);
                return NULL;
            }
            Py_DECREF(index);
        }
        if (skip_field(buf, stop, end, &pos, &is_null) < 0) goto bad; /* value */
        if (pos < stop && buf[pos] == 0) {
            pos += 1;
        } else if (check_headers(buf, stop, end, &pos) < 0) {
            goto bad;
        }
        if (pos != end) goto bad;
    }
    if (pos != stop) goto bad;
    PyBuffer_Release(&view);
    return keyless;
bad:
    Py_XDECREF(keyless);
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"walk", walk, METH_VARARGS,
     "walk(blob, start, stop, count) -> keyless record indexes, or None if any record "
     "of blob[start:stop] is malformed (then ask record_scan's Python walker why)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_record_walk",
    "C walk over v2 records for the produce path's check (see record_scan.py).", -1, methods,
};

PyMODINIT_FUNC PyInit__record_walk(void) { return PyModule_Create(&module); }
