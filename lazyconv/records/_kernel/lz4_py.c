/* lazyconv.records._ckernel: Kafka's lz4 frame walked (lz4frame.c) and its xxHash32. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "lz4frame.h"
#include "module.h"

#define LZ4_MAX_BLOCKS 256 /* more blocks in one frame: the reference walks it */

PyDoc_STRVAR(lz4_frame_blocks_doc,
             "lz4_frame_blocks(data, magic) -> tuple | None\n\n"
             "The data blocks of the Kafka lz4 frame data as one flat tuple (block_max, start,\n"
             "size, stored, start, size, stored, ...): every block's bytes are data[start:start+size],\n"
             "stored meaning uncompressed. The frame is walked with the reference parser's checks\n"
             "(header checksum checked for magic >= 1 only); None when the reference must parse it\n"
             "(it raises the error), for block checksums, or for more than 256 blocks.");
static PyObject *py_lz4_frame_blocks(PyObject *self, PyObject *args)
{
    Py_buffer data;
    int magic;
    if (!PyArg_ParseTuple(args, "y*i", &data, &magic))
        return NULL;
    lc_lz4_block blocks[LZ4_MAX_BLOCKS];
    size_t block_max = 0;
    int64_t count;
    if (data.len >= GIL_RELEASE_THRESHOLD) { /* the walk reads O(blocks) words, not the data */
        Py_BEGIN_ALLOW_THREADS
        count = lc_lz4_frame_blocks(data.buf, (size_t)data.len, magic, blocks, LZ4_MAX_BLOCKS, &block_max);
        Py_END_ALLOW_THREADS
    } else {
        count = lc_lz4_frame_blocks(data.buf, (size_t)data.len, magic, blocks, LZ4_MAX_BLOCKS, &block_max);
    }
    PyBuffer_Release(&data);
    if (count < 0)
        Py_RETURN_NONE;
    PyObject *result = PyTuple_New(1 + 3 * (Py_ssize_t)count);
    if (result == NULL)
        return NULL;
    PyObject *item = PyLong_FromSize_t(block_max);
    if (item == NULL)
        goto fail;
    PyTuple_SET_ITEM(result, 0, item);
    for (int64_t i = 0; i < count; i++) {
        PyObject *start = PyLong_FromSize_t(blocks[i].start), *size = PyLong_FromSize_t(blocks[i].size);
        PyTuple_SET_ITEM(result, 1 + 3 * i, start);
        PyTuple_SET_ITEM(result, 2 + 3 * i, size);
        PyTuple_SET_ITEM(result, 3 + 3 * i, PyBool_FromLong(blocks[i].stored));
        if (start == NULL || size == NULL)
            goto fail;
    }
    return result;
fail:
    Py_DECREF(result);
    return NULL;
}

PyDoc_STRVAR(xxh32_doc, "xxh32(data, seed=0) -> int\n\nxxHash32 of data (the kernel's own, for tests).");
static PyObject *py_xxh32(PyObject *self, PyObject *args)
{
    Py_buffer data;
    unsigned int seed = 0;
    if (!PyArg_ParseTuple(args, "y*|I", &data, &seed))
        return NULL;
    uint32_t h = lc_xxh32(data.buf, (size_t)data.len, seed);
    PyBuffer_Release(&data);
    return PyLong_FromUnsignedLong(h);
}

static PyMethodDef lz4_methods[] = {
    {"lz4_frame_blocks", py_lz4_frame_blocks, METH_VARARGS, lz4_frame_blocks_doc},
    {"xxh32", py_xxh32, METH_VARARGS, xxh32_doc},
    {NULL, NULL, 0, NULL},
};

int lc_py_lz4_init(PyObject *module) { return PyModule_AddFunctions(module, lz4_methods); }
