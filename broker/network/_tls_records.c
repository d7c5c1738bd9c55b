/* broker.network._tls_records: every application byte a memory-BIO TLS connection can give now, in one call that
 * does not hold the GIL.
 *
 * ssl.SSLObject.read returns one TLS record per call and takes the GIL back after each: librdkafka sends a produce
 * request as one record per buffer segment (~10-byte record headers and 1 KiB values alternately), so a thread
 * that decrypts with it runs in steps of about a microsecond and hands the GIL over at every step; a second thread
 * gains nothing (measured: slower than one thread). read_into loops SSL_read_ex over the records already in the
 * incoming BIO, in C, the GIL released for the whole batch: the decryption of a 256 KiB read runs beside the
 * event loop (broker/network/tls_offload.py).
 *
 * The SSL* is taken from CPython's _ssl._SSLSocket (the object ssl.SSLObject wraps, its ``_sslobj``): the head of
 * its struct (PySSLSocket in Modules/_ssl.c: PyObject_HEAD, the socket weakref, then the SSL*, the same from 3.7
 * to 3.13), checked through the app data CPython sets on every SSL it makes (SSL_set_app_data(ssl, self)): an
 * object whose SSL does not point back to it is refused with TypeError, and the caller keeps the stdlib path.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

typedef struct {
    PyObject_HEAD
    PyObject *socket_weakref;
    SSL *ssl;
} ssl_socket_head;

static SSL *
ssl_of(PyObject *obj)
{
    if (strcmp(Py_TYPE(obj)->tp_name, "_ssl._SSLSocket") != 0) {
        PyErr_Format(PyExc_TypeError, "expected an _ssl._SSLSocket, got %s", Py_TYPE(obj)->tp_name);
        return NULL;
    }
    SSL *ssl = ((ssl_socket_head *)obj)->ssl;
    if (ssl == NULL || SSL_get_app_data(ssl) != (void *)obj) {
        PyErr_SetString(PyExc_TypeError, "this Python's _ssl._SSLSocket layout is not the one expected");
        return NULL;
    }
    return ssl;
}

PyDoc_STRVAR(check_doc,
"check(sslobj) -> None\n\n"
"TypeError unless read_into can use ``sslobj`` (an ssl.SSLObject's ``_sslobj``).");

static PyObject *
check(PyObject *module, PyObject *obj)
{
    return ssl_of(obj) == NULL ? NULL : Py_NewRef(Py_None);
}

PyDoc_STRVAR(read_into_doc,
"read_into(sslobj, ciphertext, buffer) -> (nbytes, status, reason, used)\n\n"
"Decrypt into the writable ``buffer`` until it is full or no whole record is left, feeding the connection's\n"
"incoming BIO from the list of bytes-like ``ciphertext`` one item at a time, when a record needs more bytes (so\n"
"the BIO holds at most an item and a partial record: OpenSSL's memory BIO moves what is unread to its front at\n"
"every write); all without the GIL. ``used``: the items written (the caller keeps the others, in order).\n"
"``status`` is SSL_get_error's of the call that stopped (0: the buffer is full, ssl.SSL_ERROR_WANT_READ: more\n"
"bytes needed, ssl.SSL_ERROR_ZERO_RETURN: the peer's close_notify, others: a failure, ``reason`` saying which);\n"
"the thread's OpenSSL error queue is left empty.");

static PyObject *
read_into(PyObject *module, PyObject *args)
{
    PyObject *obj, *chunks;
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "OO!w*:read_into", &obj, &PyList_Type, &chunks, &view)) {
        return NULL;
    }
    SSL *ssl = ssl_of(obj);
    BIO *incoming = ssl == NULL ? NULL : SSL_get_rbio(ssl);
    if (ssl != NULL && incoming == NULL) {
        PyErr_SetString(PyExc_ValueError, "the connection has no incoming BIO");
    }
    Py_ssize_t count = incoming == NULL ? 0 : PyList_GET_SIZE(chunks);
    Py_buffer *parts = count ? PyMem_Calloc((size_t)count, sizeof(Py_buffer)) : NULL;
    Py_ssize_t got = 0;
    if (count && parts == NULL) {
        PyErr_NoMemory();
    }
    else {
        for (; got < count; got++) {
            if (PyObject_GetBuffer(PyList_GET_ITEM(chunks, got), &parts[got], PyBUF_SIMPLE) < 0) {
                break;
            }
        }
    }
    if (incoming == NULL || got < count) {
        for (Py_ssize_t i = 0; i < got; i++) {
            PyBuffer_Release(&parts[i]);
        }
        PyMem_Free(parts);
        PyBuffer_Release(&view);
        return NULL;
    }
    char *p = (char *)view.buf;
    size_t room = (size_t)view.len;
    size_t total = 0;
    int status = SSL_ERROR_NONE;
    int written = 1;
    Py_ssize_t used = 0;
    char reason[160] = "";
    Py_BEGIN_ALLOW_THREADS
    ERR_clear_error();
    while (written && room > 0) {
        size_t n = 0;
        int r = SSL_read_ex(ssl, p, room, &n);
        if (r > 0) {
            p += n;
            room -= n;
            total += n;
            continue;
        }
        status = SSL_get_error(ssl, r);
        if (status == SSL_ERROR_WANT_READ && used < count) {
            const char *d = (const char *)parts[used].buf;
            Py_ssize_t left = parts[used].len;
            used++;
            while (left > 0) {  /* BIO_write takes an int */
                int step = left > (1 << 30) ? (1 << 30) : (int)left;
                if (BIO_write(incoming, d, step) != step) {
                    written = 0;
                    status = SSL_ERROR_SSL;
                    snprintf(reason, sizeof(reason), "the incoming BIO refused the bytes");
                    break;
                }
                d += step;
                left -= step;
            }
            continue;
        }
        if (status != SSL_ERROR_WANT_READ && status != SSL_ERROR_ZERO_RETURN) {
            unsigned long e = ERR_peek_last_error();
            if (e != 0) {
                ERR_error_string_n(e, reason, sizeof(reason));
            }
        }
        break;
    }
    if (room == 0) {
        status = SSL_ERROR_NONE;
    }
    ERR_clear_error();
    Py_END_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < count; i++) {
        PyBuffer_Release(&parts[i]);
    }
    PyMem_Free(parts);
    PyBuffer_Release(&view);
    return Py_BuildValue("nisn", (Py_ssize_t)total, status, reason, used);
}

static PyMethodDef methods[] = {
    {"check", check, METH_O, check_doc},
    {"read_into", read_into, METH_VARARGS, read_into_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_tls_records", "Bulk TLS record reads without the GIL (broker/network/tls_offload.py).",
    0, methods,
};

PyMODINIT_FUNC
PyInit__tls_records(void)
{
    return PyModule_Create(&module_def);
}
