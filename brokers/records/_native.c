/* brokers.records._native: the loops over untrusted batch bytes that are too slow in Python.
 *
 * Owns two functions, each the twin of a pure-Python function that tests compare it with:
 * - walk_records(payload, count, base_timestamp, ts_low, ts_high, flags, release_gil)
 *   walks the (decompressed) records of one v2 batch as Kafka's DefaultRecord.readFrom reads
 *   them, plus LogValidator's per-record checks; twin: record_walk.walk_records_py.
 * - zstd_frames(data) walks zstd frame and block headers (RFC 8878) for an output bound
 *   before anything is decompressed; twin: zstd_frames.walk_frames_py.
 * Both only read their buffer and return plain tuples; the Python side turns status codes into
 * the domain errors. walk_records may release the GIL (the buffer stays exported meanwhile).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* Status codes: keep in step with record_walk.py. */
enum {
    WALK_OK = 0,
    WALK_TRUNCATED = 1,       /* a field or varint runs past the end of the payload */
    WALK_VARINT_TOO_LONG = 2,
    WALK_RECORD_SIZE = 3,     /* the record's length disagrees with its fields or the payload */
    WALK_HEADER_COUNT = 4,    /* negative, or more headers than bytes left */
    WALK_NULL_HEADER_KEY = 5,
    WALK_OFFSET_DELTA = 6,    /* record i's offset delta is not i */
    WALK_TOO_FEW = 7,         /* the payload ends, at a record boundary, before `count` records */
    WALK_TRAILING = 8,        /* bytes left after `count` records */
};

#define FLAG_TIMESTAMPS 1
#define FLAG_KEYS 2

/* Java's ByteUtils.readVarint: at most 5 bytes, the value kept to 32 bits, then zigzag. */
static inline int read_varint(const uint8_t **pp, const uint8_t *end, int32_t *out)
{
    const uint8_t *p = *pp;
    uint32_t raw = 0;
    for (int shift = 0; shift < 35; shift += 7) {
        if (p >= end)
            return WALK_TRUNCATED;
        uint8_t b = *p++;
        raw |= (uint32_t)(b & 0x7F) << shift;
        if (b < 0x80) {
            *pp = p;
            *out = (int32_t)((raw >> 1) ^ (0u - (raw & 1u)));
            return WALK_OK;
        }
    }
    return WALK_VARINT_TOO_LONG;
}

/* ByteUtils.readVarlong: at most 10 bytes, kept to 64 bits. */
static inline int read_varlong(const uint8_t **pp, const uint8_t *end, int64_t *out)
{
    const uint8_t *p = *pp;
    uint64_t raw = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (p >= end)
            return WALK_TRUNCATED;
        uint8_t b = *p++;
        raw |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80) {
            *pp = p;
            *out = (int64_t)((raw >> 1) ^ (0u - (raw & 1u)));
            return WALK_OK;
        }
    }
    return WALK_VARINT_TOO_LONG;
}

/* A length-prefixed field: a negative length is null (no bytes); otherwise skip it. */
static inline int skip_bytes(const uint8_t **pp, const uint8_t *end, int32_t *size)
{
    int status = read_varint(pp, end, size);
    if (status != WALK_OK)
        return status;
    if (*size >= 0) {
        if (*size > end - *pp)
            return WALK_TRUNCATED;
        *pp += *size;
    }
    return WALK_OK;
}

typedef struct {
    int status;
    long long index;               /* records walked, or the record the walk stopped in */
    Py_ssize_t position;           /* byte offset where that record starts */
    long long null_key;            /* first record without a key (FLAG_KEYS), else -1 */
    long long bad_timestamp;       /* first record out of [ts_low, ts_high], else -1 */
    int64_t bad_timestamp_value;
    int64_t max_timestamp;         /* max(-1, every record's timestamp) */
} walk_result;

static int walk_one(const uint8_t **pp, const uint8_t *end, long long index, int64_t base_ts,
                    int64_t ts_low, int64_t ts_high, int flags, walk_result *r)
{
    int32_t size, offset_delta, key_size, value_size, header_count, header_key, header_value;
    int64_t timestamp_delta;
    int status = read_varint(pp, end, &size);
    if (status != WALK_OK)
        return status;
    if (size > end - *pp)
        return WALK_RECORD_SIZE;
    const uint8_t *start = *pp;
    if (*pp >= end)
        return WALK_TRUNCATED;
    *pp += 1; /* attributes: unused in v2 */
    if ((status = read_varlong(pp, end, &timestamp_delta)) != WALK_OK)
        return status;
    if ((status = read_varint(pp, end, &offset_delta)) != WALK_OK)
        return status;
    if ((status = skip_bytes(pp, end, &key_size)) != WALK_OK)
        return status;
    if ((status = skip_bytes(pp, end, &value_size)) != WALK_OK)
        return status;
    if ((status = read_varint(pp, end, &header_count)) != WALK_OK)
        return status;
    if (header_count < 0 || header_count > end - *pp)
        return WALK_HEADER_COUNT;
    for (int32_t h = 0; h < header_count; h++) {
        if ((status = read_varint(pp, end, &header_key)) != WALK_OK)
            return status;
        if (header_key < 0)
            return WALK_NULL_HEADER_KEY;
        if (header_key > end - *pp)
            return WALK_TRUNCATED;
        *pp += header_key;
        if ((status = skip_bytes(pp, end, &header_value)) != WALK_OK)
            return status;
    }
    if (*pp - start != size)
        return WALK_RECORD_SIZE;
    if (offset_delta != index)
        return WALK_OFFSET_DELTA;
    int64_t timestamp = (int64_t)((uint64_t)base_ts + (uint64_t)timestamp_delta);
    if (timestamp > r->max_timestamp)
        r->max_timestamp = timestamp;
    /* LogValidator.validateRecord: a key error stands for the record; else its timestamp. */
    if ((flags & FLAG_KEYS) && key_size < 0) {
        if (r->null_key < 0)
            r->null_key = index;
    } else if ((flags & FLAG_TIMESTAMPS) && timestamp != -1 &&
               (timestamp < ts_low || timestamp > ts_high) && r->bad_timestamp < 0) {
        r->bad_timestamp = index;
        r->bad_timestamp_value = timestamp;
    }
    return WALK_OK;
}

static void walk(const uint8_t *buf, Py_ssize_t length, long long count, int64_t base_ts,
                 int64_t ts_low, int64_t ts_high, int flags, walk_result *r)
{
    const uint8_t *p = buf, *end = buf + length;
    long long i;
    r->status = WALK_OK;
    for (i = 0; i < count; i++) {
        r->position = p - buf;
        if (p >= end) {
            r->status = WALK_TOO_FEW;
            break;
        }
        r->status = walk_one(&p, end, i, base_ts, ts_low, ts_high, flags, r);
        if (r->status != WALK_OK)
            break;
    }
    r->index = i;
    if (r->status == WALK_OK) {
        r->position = p - buf;
        if (p != end)
            r->status = WALK_TRAILING;
    }
}

static PyObject *walk_records(PyObject *self, PyObject *args)
{
    Py_buffer view;
    long long count, base_ts, ts_low, ts_high;
    int flags, release_gil;
    if (!PyArg_ParseTuple(args, "y*LLLLip:walk_records", &view, &count, &base_ts, &ts_low,
                          &ts_high, &flags, &release_gil))
        return NULL;
    walk_result r = {WALK_OK, 0, 0, -1, -1, 0, -1};
    if (release_gil) {
        Py_BEGIN_ALLOW_THREADS
        walk((const uint8_t *)view.buf, view.len, count, base_ts, ts_low, ts_high, flags, &r);
        Py_END_ALLOW_THREADS
    } else {
        walk((const uint8_t *)view.buf, view.len, count, base_ts, ts_low, ts_high, flags, &r);
    }
    PyBuffer_Release(&view);
    return Py_BuildValue("(iLnLLLL)", r.status, r.index, r.position, r.null_key, r.bad_timestamp,
                         (long long)r.bad_timestamp_value, (long long)r.max_timestamp);
}

/* ---- zstd frames ------------------------------------------------------------------------- */

/* Error codes: keep in step with zstd_frames.py. */
enum {
    ZF_OK = 0,
    ZF_HEADER_TRUNCATED = 1,
    ZF_SKIPPABLE_OVERRUN = 2,
    ZF_BAD_MAGIC = 3,         /* value: the magic found */
    ZF_RESERVED_BIT = 4,
    ZF_RESERVED_BLOCK = 5,
    ZF_BLOCK_TRUNCATED = 6,
    ZF_FRAME_TRUNCATED = 7,
    ZF_CONTENT_SIZE = 8,      /* declared content size beyond what the blocks can hold */
    ZF_NO_FRAME = 9,
};

#define ZSTD_MAGIC 0xFD2FB528u
#define SKIPPABLE_MASK 0xFFFFFFF0u
#define SKIPPABLE_MAGIC 0x184D2A50u
#define MAX_BLOCK_SIZE (128u * 1024u)

static int le(const uint8_t *buf, Py_ssize_t length, Py_ssize_t pos, int size, uint64_t *out)
{
    if (pos + size > length)
        return ZF_HEADER_TRUNCATED;
    uint64_t value = 0;
    for (int i = size - 1; i >= 0; i--)
        value = (value << 8) | buf[pos + i];
    *out = value;
    return ZF_OK;
}

typedef struct {
    Py_ssize_t start, end;
    uint64_t max_output;
    int has_content_size;
    uint64_t content_size;
} zstd_frame;

static int walk_blocks(const uint8_t *buf, Py_ssize_t length, Py_ssize_t *pos, uint64_t block_max,
                       uint64_t *bound)
{
    uint64_t header;
    *bound = 0;
    for (;;) {
        int status = le(buf, length, *pos, 3, &header);
        if (status != ZF_OK)
            return status;
        uint64_t type = (header >> 1) & 3, size = header >> 3;
        *pos += 3;
        if (type == 0) {
            *pos += (Py_ssize_t)size;
            *bound += size;
        } else if (type == 1) {
            *pos += 1;
            *bound += size;
        } else if (type == 2) {
            *pos += (Py_ssize_t)size;
            *bound += block_max;
        } else {
            return ZF_RESERVED_BLOCK;
        }
        if (*pos > length)
            return ZF_BLOCK_TRUNCATED;
        if (header & 1)
            return ZF_OK;
    }
}

static int walk_frame(const uint8_t *buf, Py_ssize_t length, Py_ssize_t start, zstd_frame *f)
{
    static const int dict_id_sizes[4] = {0, 1, 2, 4};
    static const int content_size_sizes[4] = {0, 2, 4, 8};
    uint64_t descriptor, window = 0, value;
    int status = le(buf, length, start + 4, 1, &descriptor);
    if (status != ZF_OK)
        return status;
    if (descriptor & 0x08)
        return ZF_RESERVED_BIT;
    int single_segment = (descriptor & 0x20) != 0;
    Py_ssize_t pos = start + 5;
    if (!single_segment) {
        if ((status = le(buf, length, pos, 1, &value)) != ZF_OK)
            return status;
        uint64_t base = (uint64_t)1 << (10 + (value >> 3));
        window = base + (base >> 3) * (value & 7);
        pos += 1;
    }
    pos += dict_id_sizes[descriptor & 3];
    int size_len = content_size_sizes[descriptor >> 6];
    if (size_len == 0 && single_segment)
        size_len = 1;
    f->has_content_size = size_len != 0;
    f->content_size = 0;
    if (size_len) {
        if ((status = le(buf, length, pos, size_len, &f->content_size)) != ZF_OK)
            return status;
        if (size_len == 2)
            f->content_size += 256;
    }
    pos += size_len;
    if (single_segment)
        window = f->content_size;
    uint64_t bound;
    status = walk_blocks(buf, length, &pos, window < MAX_BLOCK_SIZE ? window : MAX_BLOCK_SIZE,
                         &bound);
    if (status != ZF_OK)
        return status;
    if (descriptor & 0x04)
        pos += 4; /* content checksum */
    if (pos > length)
        return ZF_FRAME_TRUNCATED;
    if (f->has_content_size) {
        if (f->content_size > bound)
            return ZF_CONTENT_SIZE;
        bound = f->content_size;
    }
    f->start = start;
    f->end = pos;
    f->max_output = bound;
    return ZF_OK;
}

static PyObject *frame_tuple(const zstd_frame *f)
{
    if (f->has_content_size)
        return Py_BuildValue("(nnKK)", f->start, f->end, (unsigned long long)f->max_output,
                             (unsigned long long)f->content_size);
    return Py_BuildValue("(nnKO)", f->start, f->end, (unsigned long long)f->max_output, Py_None);
}

/* (frames, error, position, value): frames as (start, end, max_output, content_size | None);
 * error 0 when the whole stream is well formed, else the frame position where it stopped and
 * the magic (ZF_BAD_MAGIC) or declared content size (ZF_CONTENT_SIZE) in value. */
static PyObject *zstd_frames(PyObject *self, PyObject *args)
{
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "y*:zstd_frames", &view))
        return NULL;
    const uint8_t *buf = (const uint8_t *)view.buf;
    Py_ssize_t length = view.len, pos = 0;
    uint64_t magic = 0, skip, value = 0;
    int status = ZF_OK;
    PyObject *frames = PyList_New(0);
    if (frames == NULL)
        goto fail;
    while (pos < length) {
        if ((status = le(buf, length, pos, 4, &magic)) != ZF_OK)
            break;
        if ((magic & SKIPPABLE_MASK) == SKIPPABLE_MAGIC) {
            if ((status = le(buf, length, pos + 4, 4, &skip)) != ZF_OK)
                break;
            pos += 8 + (Py_ssize_t)skip;
            if (pos > length) {
                status = ZF_SKIPPABLE_OVERRUN;
                break;
            }
            continue;
        }
        if (magic != ZSTD_MAGIC) {
            status = ZF_BAD_MAGIC;
            value = magic;
            break;
        }
        zstd_frame f;
        if ((status = walk_frame(buf, length, pos, &f)) != ZF_OK) {
            value = status == ZF_CONTENT_SIZE ? f.content_size : 0;
            break;
        }
        PyObject *item = frame_tuple(&f);
        if (item == NULL || PyList_Append(frames, item) < 0) {
            Py_XDECREF(item);
            goto fail;
        }
        Py_DECREF(item);
        pos = f.end;
    }
    if (status == ZF_OK && PyList_GET_SIZE(frames) == 0)
        status = ZF_NO_FRAME;
    PyBuffer_Release(&view);
    return Py_BuildValue("(NinK)", frames, status, pos, (unsigned long long)value);
fail:
    Py_XDECREF(frames);
    PyBuffer_Release(&view);
    return NULL;
}

static PyMethodDef methods[] = {
    {"walk_records", walk_records, METH_VARARGS,
     "walk_records(payload, count, base_timestamp, ts_low, ts_high, flags, release_gil) -> "
     "(status, index, position, null_key, bad_timestamp, bad_timestamp_value, max_timestamp)"},
    {"zstd_frames", zstd_frames, METH_VARARGS,
     "zstd_frames(data) -> (frames, error, position, value)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "brokers.records._native",
    .m_doc = "Native loops over record batch bytes (see record_walk.py and zstd_frames.py).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__native(void)
{
    return PyModule_Create(&module);
}
