/* The compiled half of protocol/record_columns.py: decodes uncompressed v2 records sections straight into
 * Arrow-layout column buffers (int64 values, int32 offsets + data for binary, LSB validity bitmaps), so a scan
 * makes no Python object per record.
 *
 * The parse is protocol.record_codec.decode_records_reference's, rule for rule (varint widths, bits above 32
 * dropped, any negative length is null, header count and record size checks, the section used up exactly).
 * Whenever that reference would raise, or this code cannot give exactly its answer (a header key that is not
 * valid UTF-8, an offset or timestamp outside int64), add_section leaves the builder as it was and returns -1:
 * the Python side then runs the reference on the same bytes, for its records or its error.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define WANT_OFFSET 1
#define WANT_TIMESTAMP 2
#define WANT_KEY 4
#define WANT_VALUE 8
#define WANT_VALUE_SIZE 16
#define WANT_HEADERS 32

typedef struct {
    char *data;
    Py_ssize_t len;
    Py_ssize_t cap;
} Buf;

static int buf_reserve(Buf *b, Py_ssize_t extra) {
    if (extra < 0 || b->len > PY_SSIZE_T_MAX - extra) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t need = b->len + extra;
    if (need <= b->cap)
        return 0;
    Py_ssize_t cap = b->cap ? b->cap : 4096;
    while (cap < need) {
        if (cap > PY_SSIZE_T_MAX / 2) {
            cap = need;
            break;
        }
        cap *= 2;
    }
    char *p = PyMem_Realloc(b->data, (size_t)cap);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->data = p;
    b->cap = cap;
    return 0;
}

static inline int buf_put(Buf *b, const void *src, Py_ssize_t n) {
    if (b->cap - b->len < n && buf_reserve(b, n) < 0)
        return -1;
    if (n)
        memcpy(b->data + b->len, src, (size_t)n);
    b->len += n;
    return 0;
}

static inline int buf_i64(Buf *b, int64_t v) { return buf_put(b, &v, 8); }
static inline int buf_i32(Buf *b, int32_t v) { return buf_put(b, &v, 4); }

/* A validity bitmap: bit i (LSB first) set when row i is not null. */
typedef struct {
    Buf bytes;
    Py_ssize_t bits;
    Py_ssize_t nulls;
} Bitmap;

static inline int bitmap_put(Bitmap *m, int valid) {
    Py_ssize_t byte = m->bits >> 3;
    if (byte >= m->bytes.len) {
        if (buf_reserve(&m->bytes, 1) < 0)
            return -1;
        m->bytes.data[m->bytes.len++] = 0;
    }
    if (valid)
        m->bytes.data[byte] |= (char)(1u << (m->bits & 7));
    else {
        m->bytes.data[byte] &= (char)~(1u << (m->bits & 7));
        m->nulls++;
    }
    m->bits++;
    return 0;
}

/* Lengths to come back to when a section fails half way. */
typedef struct {
    Py_ssize_t len;
} BufMark;

typedef struct {
    Py_ssize_t bytes_len, bits, nulls;
} BitmapMark;

typedef struct {
    PyObject_HEAD
    int want;
    Py_ssize_t rows;
    Py_ssize_t header_count;
    Buf offset;            /* int64 */
    Bitmap offset_valid;
    Buf timestamp;         /* int64, microseconds */
    Bitmap timestamp_valid;
    Buf key_offsets;       /* int32, rows + 1 */
    Buf key_data;
    Bitmap key_valid;
    Buf value_offsets;
    Buf value_data;
    Bitmap value_valid;    /* also value_size's */
    Buf value_size;        /* int32 */
    Buf header_offsets;    /* int32, rows + 1: list offsets into the header entries */
    Buf hkey_offsets;      /* int32, header_count + 1 */
    Buf hkey_data;
    Buf hvalue_offsets;
    Buf hvalue_data;
    Bitmap hvalue_valid;
    Buf batch_index;       /* int32 */
} Builder;

#define N_BUFS 13
#define N_BITMAPS 5

static Buf *builder_bufs(Builder *s, int i) {
    Buf *all[N_BUFS] = {&s->offset, &s->timestamp, &s->key_offsets, &s->key_data, &s->value_offsets,
                        &s->value_data, &s->value_size, &s->header_offsets, &s->hkey_offsets, &s->hkey_data,
                        &s->hvalue_offsets, &s->hvalue_data, &s->batch_index};
    return all[i];
}

static Bitmap *builder_bitmaps(Builder *s, int i) {
    Bitmap *all[N_BITMAPS] = {&s->offset_valid, &s->timestamp_valid, &s->key_valid, &s->value_valid,
                              &s->hvalue_valid};
    return all[i];
}

typedef struct {
    Py_ssize_t rows, header_count;
    Py_ssize_t buf_len[N_BUFS];
    BitmapMark bm[N_BITMAPS];
} Mark;

static void builder_mark(Builder *s, Mark *m) {
    m->rows = s->rows;
    m->header_count = s->header_count;
    for (int i = 0; i < N_BUFS; i++)
        m->buf_len[i] = builder_bufs(s, i)->len;
    for (int i = 0; i < N_BITMAPS; i++) {
        Bitmap *b = builder_bitmaps(s, i);
        m->bm[i].bytes_len = b->bytes.len;
        m->bm[i].bits = b->bits;
        m->bm[i].nulls = b->nulls;
    }
}

static void builder_restore(Builder *s, const Mark *m) {
    s->rows = m->rows;
    s->header_count = m->header_count;
    for (int i = 0; i < N_BUFS; i++)
        builder_bufs(s, i)->len = m->buf_len[i];
    for (int i = 0; i < N_BITMAPS; i++) {
        Bitmap *b = builder_bitmaps(s, i);
        b->bytes.len = m->bm[i].bytes_len;
        b->bits = m->bm[i].bits;
        b->nulls = m->bm[i].nulls;
    }
}

static void builder_free_buffers(Builder *s) {
    for (int i = 0; i < N_BUFS; i++) {
        Buf *b = builder_bufs(s, i);
        PyMem_Free(b->data);
        b->data = NULL;
        b->len = b->cap = 0;
    }
    for (int i = 0; i < N_BITMAPS; i++) {
        Bitmap *b = builder_bitmaps(s, i);
        PyMem_Free(b->bytes.data);
        b->bytes.data = NULL;
        b->bytes.len = b->bytes.cap = 0;
        b->bits = b->nulls = 0;
    }
    s->rows = 0;
    s->header_count = 0;
}

/* Start (or restart) with the leading zero of every offsets buffer. */
static int builder_start(Builder *s) {
    if (buf_i32(&s->key_offsets, 0) < 0 || buf_i32(&s->value_offsets, 0) < 0 ||
        buf_i32(&s->header_offsets, 0) < 0 || buf_i32(&s->hkey_offsets, 0) < 0 ||
        buf_i32(&s->hvalue_offsets, 0) < 0)
        return -1;
    return 0;
}

static void Builder_dealloc(Builder *s) {
    builder_free_buffers(s);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

static int Builder_init(Builder *s, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"want", NULL};
    int want;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "i", kwlist, &want))
        return -1;
    builder_free_buffers(s);
    s->want = want;
    return builder_start(s);
}

/* ---- the reference's reading rules ---- */

/* protocol.varint.read_unsigned: at most max_bytes bytes, all before end. */
static inline int read_uvarint(const uint8_t *d, Py_ssize_t *pos, Py_ssize_t end, int max_bytes, uint64_t *out) {
    uint64_t result = 0;
    int shift = 0;
    Py_ssize_t p = *pos;
    Py_ssize_t limit = p + max_bytes;
    if (limit > end)
        limit = end;
    while (p < limit) {
        uint8_t b = d[p++];
        if (shift < 64)
            result |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80) {
            *pos = p;
            *out = result;
            return 0;
        }
        shift += 7;
    }
    return -1;
}

/* A zigzag varint of at most max_bytes bytes: 5 for an int32 (bits above 32 dropped, as Java's readVarint), 10 for
 * an int64. */
static inline int read_zigzag(const uint8_t *d, Py_ssize_t *pos, Py_ssize_t end, int max_bytes, int64_t *out) {
    uint64_t r;
    if (*pos < end && d[*pos] < 0x80)
        r = d[(*pos)++];
    else if (read_uvarint(d, pos, end, max_bytes, &r) < 0)
        return -1;
    if (max_bytes == 5)
        r &= 0xFFFFFFFFu;
    *out = (int64_t)((r >> 1) ^ (uint64_t)(-(int64_t)(r & 1)));
    return 0;
}

#define read_varint(d, pos, end, out) read_zigzag(d, pos, end, 5, out)
#define read_varlong(d, pos, end, out) read_zigzag(d, pos, end, 10, out)

/* record_codec._read_bytes: a varint length then that many bytes; a negative length is null (*n = -1). */
static inline int read_bytes(const uint8_t *d, Py_ssize_t *pos, Py_ssize_t end, Py_ssize_t *start, int64_t *n) {
    if (*pos >= end)
        return -1;
    int64_t len;
    if (read_varint(d, pos, end, &len) < 0)
        return -1;
    if (len < 0) {
        *n = -1;
        return 0;
    }
    if (len > end - *pos)
        return -1;
    *start = *pos;
    *n = len;
    *pos += (Py_ssize_t)len;
    return 0;
}

/* Strict UTF-8, as Python's decoder (no surrogates, no overlong forms, nothing above U+10FFFF). */
static int valid_utf8(const uint8_t *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF) {
            if (i + 1 >= n || (s[i + 1] & 0xC0) != 0x80)
                return 0;
            i += 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            if (i + 2 >= n || (s[i + 1] & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80)
                return 0;
            if (c == 0xE0 && s[i + 1] < 0xA0)
                return 0;
            if (c == 0xED && s[i + 1] > 0x9F)
                return 0;
            i += 3;
        } else if (c >= 0xF0 && c <= 0xF4) {
            if (i + 3 >= n || (s[i + 1] & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80 ||
                (s[i + 3] & 0xC0) != 0x80)
                return 0;
            if (c == 0xF0 && s[i + 1] < 0x90)
                return 0;
            if (c == 0xF4 && s[i + 1] > 0x8F)
                return 0;
            i += 4;
        } else
            return 0;
    }
    return 1;
}

#define FAIL_REFERENCE (-1) /* the reference decides: its records or its error */
#define FAIL_FULL (-2)      /* an int32 offset would overflow: finish() first */
#define FAIL_PYERR (-3)     /* a Python exception is set (out of memory) */

static inline int append_binary(Buf *offsets, Buf *data, Bitmap *valid, const uint8_t *d, Py_ssize_t start,
                                int64_t n) {
    if (n >= 0) {
        if (n > INT32_MAX - data->len)
            return FAIL_FULL;
        if (buf_put(data, d + start, (Py_ssize_t)n) < 0)
            return FAIL_PYERR;
    }
    if (valid && bitmap_put(valid, n >= 0) < 0)
        return FAIL_PYERR;
    if (buf_i32(offsets, (int32_t)data->len) < 0)
        return FAIL_PYERR;
    return 0;
}

static int parse_section(Builder *s, const uint8_t *d, Py_ssize_t end, int64_t count, int64_t base_offset,
                         int64_t base_timestamp, int has_lat, int64_t lat, int32_t batch_index, int64_t off_lo,
                         int64_t off_hi, int ts_bounded, int64_t ts_lo, int64_t ts_hi, Py_ssize_t *added) {
    const int want = s->want;
    Py_ssize_t pos = 0;
    Py_ssize_t rows = 0;
    for (int64_t i = 0; i < count; i++) {
        if (pos >= end)
            return FAIL_REFERENCE;
        int64_t size;
        if (read_varint(d, &pos, end, &size) < 0)
            return FAIL_REFERENCE;
        if (size <= 0 || size > end - pos)
            return FAIL_REFERENCE;
        Py_ssize_t rec_end = pos + (Py_ssize_t)size;
        pos += 1; /* attributes */
        int64_t ts_delta, offset_delta, n_headers, key_len, value_len;
        Py_ssize_t key_start = 0, value_start = 0;
        if (read_varlong(d, &pos, rec_end, &ts_delta) < 0 || read_varint(d, &pos, rec_end, &offset_delta) < 0 ||
            read_bytes(d, &pos, rec_end, &key_start, &key_len) < 0 ||
            read_bytes(d, &pos, rec_end, &value_start, &value_len) < 0 ||
            read_varint(d, &pos, rec_end, &n_headers) < 0)
            return FAIL_REFERENCE;
        Py_ssize_t headers_pos = pos;
        if (n_headers) {
            if (n_headers < 0 || n_headers * 2 > rec_end - pos)
                return FAIL_REFERENCE;
            for (int64_t h = 0; h < n_headers; h++) {
                Py_ssize_t hs, vs;
                int64_t hn, vn;
                if (read_bytes(d, &pos, rec_end, &hs, &hn) < 0 || hn < 0 ||
                    read_bytes(d, &pos, rec_end, &vs, &vn) < 0)
                    return FAIL_REFERENCE;
                if ((want & WANT_HEADERS) && !valid_utf8(d + hs, (Py_ssize_t)hn))
                    return FAIL_REFERENCE; /* the reference's surrogateescape, then the scan's replacement */
            }
        }
        if (pos != rec_end)
            return FAIL_REFERENCE;
        int64_t offset, timestamp;
        if (__builtin_add_overflow(base_offset, offset_delta, &offset))
            return FAIL_REFERENCE;
        if (has_lat)
            timestamp = lat;
        else if (__builtin_add_overflow(base_timestamp, ts_delta, &timestamp))
            return FAIL_REFERENCE;
        if (offset < off_lo || offset > off_hi)
            continue;
        if (ts_bounded && (timestamp == -1 || timestamp < ts_lo || timestamp > ts_hi))
            continue;
        /* the record is in: its columns */
        int rc;
        if (want & WANT_OFFSET) {
            if (buf_i64(&s->offset, offset) < 0 || bitmap_put(&s->offset_valid, 1) < 0)
                return FAIL_PYERR;
        }
        if (want & WANT_TIMESTAMP) {
            /* milliseconds to microseconds; null when none (-1) or beyond what microseconds in an int64 hold */
            int64_t us;
            int valid = timestamp != -1 && !__builtin_mul_overflow(timestamp, (int64_t)1000, &us);
            if (buf_i64(&s->timestamp, valid ? us : 0) < 0 || bitmap_put(&s->timestamp_valid, valid) < 0)
                return FAIL_PYERR;
        }
        if (want & WANT_KEY) {
            if ((rc = append_binary(&s->key_offsets, &s->key_data, &s->key_valid, d, key_start, key_len)) < 0)
                return rc;
        }
        if (want & WANT_VALUE) {
            if ((rc = append_binary(&s->value_offsets, &s->value_data, &s->value_valid, d, value_start,
                                    value_len)) < 0)
                return rc;
        }
        if (want & WANT_VALUE_SIZE) {
            if (!(want & WANT_VALUE) && bitmap_put(&s->value_valid, value_len >= 0) < 0)
                return FAIL_PYERR;
            if (buf_i32(&s->value_size, value_len >= 0 ? (int32_t)value_len : 0) < 0)
                return FAIL_PYERR;
        }
        if (want & WANT_HEADERS) {
            Py_ssize_t p = headers_pos;
            for (int64_t h = 0; h < n_headers; h++) {
                Py_ssize_t hs, vs;
                int64_t hn, vn;
                read_bytes(d, &p, rec_end, &hs, &hn); /* read once above: cannot fail */
                read_bytes(d, &p, rec_end, &vs, &vn);
                if ((rc = append_binary(&s->hkey_offsets, &s->hkey_data, NULL, d, hs, hn)) < 0 ||
                    (rc = append_binary(&s->hvalue_offsets, &s->hvalue_data, &s->hvalue_valid, d, vs, vn)) < 0)
                    return rc;
            }
            if (s->header_count > INT32_MAX - n_headers)
                return FAIL_FULL;
            s->header_count += (Py_ssize_t)n_headers;
            if (buf_i32(&s->header_offsets, (int32_t)s->header_count) < 0)
                return FAIL_PYERR;
        }
        if (buf_i32(&s->batch_index, batch_index) < 0)
            return FAIL_PYERR;
        rows++;
    }
    if (pos != end)
        return FAIL_REFERENCE;
    *added = rows;
    return 0;
}

static PyObject *Builder_add_section(Builder *s, PyObject *args) {
    Py_buffer view;
    long long count, base_offset, base_timestamp, lat, off_lo, off_hi, ts_lo, ts_hi;
    int has_lat, ts_bounded, batch_index;
    if (!PyArg_ParseTuple(args, "y*LLLpLiLLpLL", &view, &count, &base_offset, &base_timestamp, &has_lat, &lat,
                          &batch_index, &off_lo, &off_hi, &ts_bounded, &ts_lo, &ts_hi))
        return NULL;
    Mark mark;
    builder_mark(s, &mark);
    Py_ssize_t added = 0;
    int rc = parse_section(s, (const uint8_t *)view.buf, view.len, count, base_offset, base_timestamp, has_lat,
                           lat, batch_index, off_lo, off_hi, ts_bounded, ts_lo, ts_hi, &added);
    PyBuffer_Release(&view);
    if (rc < 0) {
        builder_restore(s, &mark);
        if (rc == FAIL_PYERR)
            return NULL;
        return PyLong_FromLong(rc);
    }
    s->rows += added;
    return PyLong_FromSsize_t(added);
}

/* Rows with every record column null: one for a batch without records, or a batch's records when no record
 * column is asked for (then only the batch index is written). */
static PyObject *Builder_add_null_rows(Builder *s, PyObject *args) {
    int batch_index;
    Py_ssize_t count;
    if (!PyArg_ParseTuple(args, "in", &batch_index, &count))
        return NULL;
    const int want = s->want;
    for (Py_ssize_t i = 0; i < count; i++) {
        if ((want & WANT_OFFSET) && (buf_i64(&s->offset, 0) < 0 || bitmap_put(&s->offset_valid, 0) < 0))
            return NULL;
        if ((want & WANT_TIMESTAMP) &&
            (buf_i64(&s->timestamp, 0) < 0 || bitmap_put(&s->timestamp_valid, 0) < 0))
            return NULL;
        if ((want & WANT_KEY) &&
            (bitmap_put(&s->key_valid, 0) < 0 || buf_i32(&s->key_offsets, (int32_t)s->key_data.len) < 0))
            return NULL;
        if ((want & WANT_VALUE) &&
            (bitmap_put(&s->value_valid, 0) < 0 || buf_i32(&s->value_offsets, (int32_t)s->value_data.len) < 0))
            return NULL;
        if (want & WANT_VALUE_SIZE) {
            if (!(want & WANT_VALUE) && bitmap_put(&s->value_valid, 0) < 0)
                return NULL;
            if (buf_i32(&s->value_size, 0) < 0)
                return NULL;
        }
        if ((want & WANT_HEADERS) && buf_i32(&s->header_offsets, (int32_t)s->header_count) < 0)
            return NULL;
        if (buf_i32(&s->batch_index, batch_index) < 0)
            return NULL;
        s->rows++;
    }
    Py_RETURN_NONE;
}

/* A finished buffer handed to Python without a copy: the builder's memory, exported read-only through the buffer
 * protocol (pyarrow.py_buffer wraps it), freed when the last view of it goes. */
typedef struct {
    PyObject_HEAD
    char *data;
    Py_ssize_t len;
} Chunk;

static char empty_data[1];

static void Chunk_dealloc(Chunk *c) {
    if (c->data != empty_data)
        PyMem_Free(c->data);
    Py_TYPE(c)->tp_free((PyObject *)c);
}

static int Chunk_getbuffer(PyObject *o, Py_buffer *view, int flags) {
    Chunk *c = (Chunk *)o;
    return PyBuffer_FillInfo(view, o, c->data, c->len, 1, flags);
}

static Py_ssize_t Chunk_length(PyObject *o) { return ((Chunk *)o)->len; }

static PyBufferProcs Chunk_as_buffer = {Chunk_getbuffer, NULL};
static PySequenceMethods Chunk_as_sequence = {.sq_length = Chunk_length};

static PyTypeObject ChunkType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "protocol._record_columns.Chunk",
    .tp_basicsize = sizeof(Chunk),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A finished column buffer (read-only, buffer protocol).",
    .tp_dealloc = (destructor)Chunk_dealloc,
    .tp_as_buffer = &Chunk_as_buffer,
    .tp_as_sequence = &Chunk_as_sequence,
};

/* The buffer's memory, moved into a Chunk; the Buf is left empty. */
static PyObject *take_buf(Buf *b) {
    Chunk *c = PyObject_New(Chunk, &ChunkType);
    if (c == NULL)
        return NULL;
    if (b->data == NULL || b->len == 0) {
        PyMem_Free(b->data);
        c->data = empty_data;
        c->len = 0;
    } else {
        char *p = PyMem_Realloc(b->data, (size_t)b->len); /* give back the growth slack */
        c->data = p ? p : b->data;
        c->len = b->len;
    }
    b->data = NULL;
    b->len = b->cap = 0;
    return (PyObject *)c;
}

static PyObject *take_bitmap(Bitmap *m, int wanted) {
    if (m->nulls == 0 || !wanted)
        Py_RETURN_NONE;
    if (m->bits & 7) /* a section rolled back may have left bits past the end: clear them */
        m->bytes.data[m->bits >> 3] &= (char)((1u << (m->bits & 7)) - 1);
    return take_buf(&m->bytes);
}

#define N_FINISHED 21

/* The buffers, in the order protocol.record_columns.ColumnBuffers names them, moved out without copying; the
 * builder starts over. */
static PyObject *Builder_finish(Builder *s, PyObject *Py_UNUSED(ignored)) {
    const int want = s->want;
    PyObject *value_valid = take_bitmap(&s->value_valid, want & (WANT_VALUE | WANT_VALUE_SIZE));
    if (value_valid == NULL)
        return NULL;
    PyObject *items[N_FINISHED] = {
        PyLong_FromSsize_t(s->rows), PyLong_FromSsize_t(s->header_count),
        take_buf(&s->offset), take_bitmap(&s->offset_valid, 1),
        take_buf(&s->timestamp), take_bitmap(&s->timestamp_valid, 1),
        take_buf(&s->key_offsets), take_buf(&s->key_data), take_bitmap(&s->key_valid, 1),
        take_buf(&s->value_offsets), take_buf(&s->value_data), NULL,
        take_buf(&s->value_size), NULL,
        take_buf(&s->header_offsets), take_buf(&s->hkey_offsets), take_buf(&s->hkey_data),
        take_buf(&s->hvalue_offsets), take_buf(&s->hvalue_data), take_bitmap(&s->hvalue_valid, 1),
        take_buf(&s->batch_index)};
    items[11] = (want & WANT_VALUE) ? value_valid : Py_None;
    items[13] = (want & WANT_VALUE_SIZE) ? value_valid : Py_None;
    Py_INCREF(items[11]);
    Py_INCREF(items[13]);
    Py_DECREF(value_valid);
    builder_free_buffers(s);
    PyObject *t = NULL;
    int ok = builder_start(s) == 0;
    for (int i = 0; i < N_FINISHED; i++)
        ok = ok && items[i] != NULL;
    if (ok)
        t = PyTuple_New(N_FINISHED);
    if (t == NULL) {
        for (int i = 0; i < N_FINISHED; i++)
            Py_XDECREF(items[i]);
        return NULL;
    }
    for (int i = 0; i < N_FINISHED; i++)
        PyTuple_SET_ITEM(t, i, items[i]);
    return t;
}

static PyObject *Builder_get_rows(Builder *s, void *Py_UNUSED(closure)) { return PyLong_FromSsize_t(s->rows); }

static PyObject *Builder_get_data_bytes(Builder *s, void *Py_UNUSED(closure)) {
    return PyLong_FromSsize_t(s->key_data.len + s->value_data.len + s->hkey_data.len + s->hvalue_data.len);
}

static PyMethodDef Builder_methods[] = {
    {"add_section", (PyCFunction)Builder_add_section, METH_VARARGS,
     "add_section(data, count, base_offset, base_timestamp, has_log_append_time, log_append_time, batch_index, "
     "offset_lo, offset_hi, timestamp_bounded, timestamp_lo_ms, timestamp_hi_ms) (bounds inclusive) -> rows added, or -1 (the "
     "reference decides) or -2 (finish first); on a negative answer nothing was added"},
    {"add_null_rows", (PyCFunction)Builder_add_null_rows, METH_VARARGS, "add_null_rows(batch_index, count)"},
    {"finish", (PyCFunction)Builder_finish, METH_NOARGS, "the column buffers; the builder starts over"},
    {NULL}};

static PyGetSetDef Builder_getset[] = {
    {"rows", (getter)Builder_get_rows, NULL, "rows added since the last finish()", NULL},
    {"data_bytes", (getter)Builder_get_data_bytes, NULL, "bytes of keys, values and headers held", NULL},
    {NULL}};

static PyTypeObject BuilderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "protocol._record_columns.ColumnBuilder",
    .tp_basicsize = sizeof(Builder),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Records sections decoded into Arrow-layout column buffers.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Builder_init,
    .tp_dealloc = (destructor)Builder_dealloc,
    .tp_methods = Builder_methods,
    .tp_getset = Builder_getset,
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_record_columns",
                                    "Records sections into Arrow-layout column buffers (see record_columns.py).",
                                    -1, NULL, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__record_columns(void) {
    if (PyType_Ready(&BuilderType) < 0 || PyType_Ready(&ChunkType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&BuilderType);
    if (PyModule_AddObject(m, "ColumnBuilder", (PyObject *)&BuilderType) < 0) {
        Py_DECREF(&BuilderType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
