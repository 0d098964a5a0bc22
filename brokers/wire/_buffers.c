/* Receive buffers without the zero fill (see brokers/wire/buffers.py, its pure-Python twin). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* uninitialized(size) -> bytearray of `size` bytes whose contents are whatever the allocator
   returned. Only for buffers a reader fills before anything reads them. */
static PyObject *uninitialized(PyObject *self, PyObject *arg)
{
    Py_ssize_t size = PyLong_AsSsize_t(arg);
    if (size == -1 && PyErr_Occurred())
        return NULL;
    if (size < 0) {
        PyErr_SetString(PyExc_ValueError, "size must not be negative");
        return NULL;
    }
    return PyByteArray_FromStringAndSize(NULL, size);
}

static PyMethodDef methods[] = {
    {"uninitialized", uninitialized, METH_O,
     "uninitialized(size) -> bytearray of size bytes, not zero-filled"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "brokers.wire._buffers",
    .m_doc = "Receive buffers without the zero fill (see buffers.py).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__buffers(void)
{
    return PyModule_Create(&module);
}
