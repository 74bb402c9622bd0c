/* Real CPU work for compute phases under the kernel's scheduler (--cpu kernel): a loop of
 * dependent floating-point multiply-adds on registers, with the GIL released, so that the
 * threads of jobs that share a node compute at once and the kernel decides their shares. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define STEPS_PER_UNIT 1000

/* burn(units) -> a value that depends on every step (so no compiler drops the loop) */
static PyObject *burn(PyObject *mod, PyObject *args)
{
    double units;
    if (!PyArg_ParseTuple(args, "d", &units))
        return NULL;
    if (!(units >= 0)) {
        PyErr_SetString(PyExc_ValueError, "units must be >= 0");
        return NULL;
    }
    long long steps = (long long)(units * STEPS_PER_UNIT);
    volatile double sink;
    double a = 1.0, b = 0.5, c = 0.25, d = 0.125;
    Py_BEGIN_ALLOW_THREADS
    for (long long i = 0; i < steps; i++) {
        /* four independent chains: the core's pipelines stay full, the values bounded */
        a = a * 0.9999999 + 1e-7;
        b = b * 0.9999998 + 2e-7;
        c = c * 0.9999997 + 3e-7;
        d = d * 0.9999996 + 4e-7;
    }
    sink = a + b + c + d;
    Py_END_ALLOW_THREADS
    return PyFloat_FromDouble(sink);
}

static PyMethodDef methods[] = {
    {"burn", burn, METH_VARARGS, "burn(units): units x 1000 steps of floating-point work, "
                                 "the GIL released"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_work",
                                    "Calibrated CPU work for compute phases.", -1, methods};

PyMODINIT_FUNC PyInit__work(void)
{
    return PyModule_Create(&module);
}
