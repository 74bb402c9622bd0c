/* Columns of numbers as text, and back: the per-job files (SWF, CSV) written a row at a time
 * in C, and SWF's job lines read.
 *
 * format_rows(columns, styles, widths, sep, as_bytes=False, write=None) -> str, or UTF-8 bytes
 *
 * With write (a callable), the rows go to write(bytes) in chunks of about 64 KiB, each
 * ending a row, and the result is None: a file of any length is written through one small
 * buffer. write must take each chunk whole, as a buffered file's does (what it returns is
 * not read); an exception it raises stops the rows and is raised.
 *
 * columns: one entry per column, all of the same length n; a column is a 1-D buffer of
 * float64, strided or not (a numpy array, a column of one, a memoryview's slice), or, for
 * style 's', a list of str. styles: one letter per column:
 *   'i'  an integral value, as an integer (-0 written 0, as int() gives);
 *   'f'  as Python's "%.6g" (savetxt's '%w.6g');
 *   'a'  'i' if every value of the column is integral and below 2^53 in size, else 'f';
 *   'g'  NaN empty, integral values as integers, others as Python's format(v, '.6g');
 *   'r'  NaN empty, integral values as integers, others as Python's repr(v);
 *   's'  the str as it is;
 *   'o'  a list of objects: each as str() writes it (an int's digits written directly).
 * widths: one int per column, the least width (right-justified, as printf's "%5d"); 0 for
 * none. sep: put between fields; rows end in '\n'.
 *
 * Numbers that are not integral go through PyOS_double_to_string, which Python's own float
 * formatting uses, so the text is the text Python would write.
 *
 * parse_rows(lines, fields) -> (bytearray, bad)
 *
 * lines: a list of str or bytes, each `fields` numbers apart by spaces or tabs. The
 * bytearray holds the numbers as float64, row by row; bad is the index of the first line that
 * has another count of fields or a token that is not a plain decimal number
 * ([+-]digits[.digits][e[+-]digits], as "5." and ".5"), else -1. From a bad line on, nothing
 * is read: the caller reads such files its slower way, which names the field. Tokens go
 * through PyOS_string_to_double, Python's float(), so every value is the one float() gives.
 *
 * schedule_times(submit, start, end, least) -> (wait, run, slowdown, bounded, turnaround,
 * stretch): bytearrays of float64 from three float64 buffers of one length (NaN where a job
 * never started): wait = start - submit, run = end - start, slowdown = (wait + run) / run
 * (NaN for a run of no length), bounded = that with run at least `least` seconds and the
 * result at least 1, turnaround = end - submit, stretch = turnaround / run (NaN for a run of
 * no length).
 *
 * whole_numbers(column) -> list: int() of every value of a 1-D float64 buffer, strided or not
 * (ValueError or OverflowError, as int() gives, for NaN or an infinity).
 *
 * parse_swf(raw, fields) -> (header, numbers, lines, bad)
 *
 * raw: the bytes of an SWF file, ASCII. Lines end at \n, \r\n or \r and are numbered from
 * 1; a line of spaces, tabs, \v or \f only is skipped; a line whose first other byte is ';'
 * is a header line: header gets its text after the ';', without the spaces at its end (a
 * str). Every other line is a job line, read as parse_rows reads one: numbers holds them
 * (float64, row by row), lines their line numbers (int64). bad is the index, among the job
 * lines, of the first one parse_rows would refuse, else -1; from it on nothing is read.
 *
 * floor_quotients(column, divisor) -> list: float(math.floor(v / divisor)) of every value of
 * a 1-D float64 buffer of finite values (a trace's submit times, compressed), strided or not.
 *
 * column_bounds(column) -> (least, greatest, nans): of a 1-D float64 buffer, strided or not,
 * the least and greatest value that is not NaN ((inf, -inf) where there is none: min() and
 * max() of nothing as the identities of their folds) and how many are NaN. One pass, no
 * float object per value: Python's min() over a column makes one of each.
 *
 * attribute_column(objects, name) -> bytearray: the float64 column of one attribute of a list
 * of objects (the jobs' start times, say), NaN where it is None.
 *
 * new_objects(cls, n, fields) -> list: n instances of a class with __slots__ (the jobs of a
 * trace), each slot set from a column (a list) or one value shared by all.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    char *data;
    size_t used, size;
} Text;

/* format_rows with write: the text goes out in chunks of about this size, so one buffer
 * (grown to twice this at most) serves the whole file, its pages faulted in once. */
#define CHUNK_BYTES 65536

static int text_reserve(Text *t, size_t more) {
    if (t->used + more <= t->size)
        return 0;
    size_t size = t->size ? t->size : 4096;
    while (size < t->used + more)
        size *= 2;
    char *data = PyMem_Realloc(t->data, size);
    if (!data) {
        PyErr_NoMemory();
        return -1;
    }
    t->data = data;
    t->size = size;
    return 0;
}

static int text_add(Text *t, const char *s, size_t len, long width) {
    size_t pad = width > 0 && (size_t)width > len ? (size_t)width - len : 0;
    if (text_reserve(t, pad + len) < 0)
        return -1;
    memset(t->data + t->used, ' ', pad);
    memcpy(t->data + t->used + pad, s, len);
    t->used += pad + len;
    return 0;
}

/* An integral double as an integer; exact for every magnitude. */
static int add_integer(Text *t, double v, long width) {
    char buf[400];
    int len;
    if (fabs(v) >= 9007199254740992.0) {  /* 2^53: past it, printf's exact digits */
        len = snprintf(buf, sizeof buf, "%.0f", v);
        return text_add(t, buf, (size_t)len, width);
    }
    long long n = (long long)v;
    unsigned long long u = n < 0 ? (unsigned long long)(-n) : (unsigned long long)n;
    char *end = buf + sizeof buf, *p = end;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (n < 0)
        *--p = '-';
    return text_add(t, p, (size_t)(end - p), width);
}

/* v as Python formats it: code 'g' (precision 6) or 'r' (repr). */
static int add_python(Text *t, double v, char code, long width) {
    char *s = PyOS_double_to_string(v, code, code == 'r' ? 0 : 6, 0, NULL);
    if (!s)
        return -1;
    int rc = text_add(t, s, strlen(s), width);
    PyMem_Free(s);
    return rc;
}

static int is_integral(double v) {
    return isfinite(v) && v == floor(v);
}

static int add_number(Text *t, double v, char style, long width) {
    switch (style) {
    case 'i':
        return add_integer(t, v, width);
    case 'f':
        return add_python(t, v, 'g', width);
    default:  /* 'g', 'r' */
        if (isnan(v))
            return text_add(t, "", 0, width);
        if (is_integral(v))
            return add_integer(t, v, width);
        return add_python(t, v, style, width);
    }
}

typedef struct {
    char style;
    long width;
    Py_buffer view;  /* numbers */
    Py_ssize_t stride;  /* bytes from one number to the next */
    PyObject *strings;  /* style 's': a list of str */
} Column;

static double column_value(const Column *c, Py_ssize_t row) {
    return *(const double *)((const char *)c->view.buf + row * c->stride);
}

/* Whether every value of a column of numbers is integral and exact as an int64 (2^53). */
static int whole_column(const Column *c, Py_ssize_t n) {
    for (Py_ssize_t row = 0; row < n; row++) {
        double v = column_value(c, row);
        if (!(is_integral(v) && fabs(v) < 9007199254740992.0))
            return 0;
    }
    return 1;
}

static int column_open(Column *c, PyObject *obj, char style, long width, Py_ssize_t *n) {
    Py_ssize_t len;
    c->style = style;
    c->width = width;
    c->strings = NULL;
    c->view.obj = NULL;
    if (style == 's' || style == 'o') {
        if (!PyList_Check(obj)) {
            PyErr_SetString(PyExc_TypeError, style == 's'
                            ? "a column of style 's' must be a list of str"
                            : "a column of style 'o' must be a list");
            return -1;
        }
        c->strings = obj;
        len = PyList_GET_SIZE(obj);
    } else if (strchr("ifgra", style) && style) {
        if (PyObject_GetBuffer(obj, &c->view, PyBUF_STRIDES | PyBUF_FORMAT) < 0)
            return -1;
        if (c->view.ndim != 1 || c->view.itemsize != 8 || strcmp(c->view.format, "d") != 0) {
            PyErr_SetString(PyExc_TypeError, "a column of numbers must be 1-D float64");
            return -1;
        }
        len = c->view.shape[0];
        c->stride = c->view.strides[0];
        if (style == 'a')
            c->style = whole_column(c, len) ? 'i' : 'f';
    } else {
        PyErr_Format(PyExc_ValueError, "unknown column style %c", style);
        return -1;
    }
    if (*n >= 0 && len != *n) {
        PyErr_SetString(PyExc_ValueError, "columns of different lengths");
        return -1;
    }
    *n = len;
    return 0;
}

/* An object as str() writes it: an exact int's digits directly, else its str(). */
static int add_object(Text *t, PyObject *item, long width) {
    if (PyLong_CheckExact(item)) {
        int overflow;
        long long v = PyLong_AsLongLongAndOverflow(item, &overflow);
        if (!overflow && !(v == -1 && PyErr_Occurred()) && v > -(1LL << 53) && v < (1LL << 53))
            return add_integer(t, (double)v, width);
        PyErr_Clear();
    }
    PyObject *text = PyObject_Str(item);
    if (!text)
        return -1;
    Py_ssize_t len;
    const char *s = PyUnicode_AsUTF8AndSize(text, &len);
    int rc = s ? text_add(t, s, (size_t)len, width) : -1;
    Py_DECREF(text);
    return rc;
}

static int add_field(Text *t, Column *c, Py_ssize_t row) {
    if (c->style == 'o') {
        if (row >= PyList_GET_SIZE(c->strings)) {  /* a __str__ shortened the list */
            PyErr_SetString(PyExc_ValueError, "a column of style 'o' changed length");
            return -1;
        }
        PyObject *item = PyList_GET_ITEM(c->strings, row);
        Py_INCREF(item);  /* a __str__ may drop the list's reference */
        int rc = add_object(t, item, c->width);
        Py_DECREF(item);
        return rc;
    }
    if (c->style != 's')
        return add_number(t, column_value(c, row), c->style, c->width);
    PyObject *item = PyList_GET_ITEM(c->strings, row);
    Py_ssize_t len;
    const char *s = PyUnicode_Check(item) ? PyUnicode_AsUTF8AndSize(item, &len) : NULL;
    if (!s) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "a column of style 's' must hold str");
        return -1;
    }
    return text_add(t, s, (size_t)len, c->width);
}

/* Hand the text so far to write(bytes) and start over in the same buffer. */
static int text_flush(Text *t, PyObject *write) {
    PyObject *chunk = PyBytes_FromStringAndSize(t->data ? t->data : "", (Py_ssize_t)t->used);
    PyObject *done = chunk ? PyObject_CallOneArg(write, chunk) : NULL;
    Py_XDECREF(chunk);
    t->used = 0;
    if (!done)
        return -1;
    Py_DECREF(done);
    return 0;
}

static PyObject *write_rows(Column *cols, Py_ssize_t k, Py_ssize_t n, const char *sep,
                            Py_ssize_t sep_len, int as_bytes, PyObject *write) {
    Text t = {NULL, 0, 0};
    for (Py_ssize_t row = 0; row < n; row++) {
        for (Py_ssize_t c = 0; c < k; c++) {
            if ((c && text_add(&t, sep, (size_t)sep_len, 0) < 0) || add_field(&t, &cols[c], row) < 0)
                goto fail;
        }
        if (text_add(&t, "\n", 1, 0) < 0)
            goto fail;
        if (write && t.used >= CHUNK_BYTES && text_flush(&t, write) < 0)
            goto fail;
    }
    if (write) {
        int rc = t.used ? text_flush(&t, write) : 0;
        PyMem_Free(t.data);
        if (rc < 0)
            return NULL;
        Py_RETURN_NONE;
    }
    const char *text = t.data ? t.data : "";
    PyObject *out = as_bytes ? PyBytes_FromStringAndSize(text, (Py_ssize_t)t.used)
                             : PyUnicode_DecodeUTF8(text, (Py_ssize_t)t.used, "strict");
    PyMem_Free(t.data);
    return out;
fail:
    PyMem_Free(t.data);
    return NULL;
}

static PyObject *format_rows(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *columns, *widths;
    const char *styles, *sep;
    Py_ssize_t styles_len, sep_len;
    int as_bytes = 0;
    PyObject *write = Py_None;
    if (!PyArg_ParseTuple(args, "Os#Os#|pO", &columns, &styles, &styles_len, &widths, &sep,
                          &sep_len, &as_bytes, &write))
        return NULL;
    if (write != Py_None && !PyCallable_Check(write)) {
        PyErr_SetString(PyExc_TypeError, "write must be callable");
        return NULL;
    }
    PyObject *cseq = PySequence_Fast(columns, "columns must be a sequence");
    PyObject *wseq = cseq ? PySequence_Fast(widths, "widths must be a sequence") : NULL;
    if (!wseq) {
        Py_XDECREF(cseq);
        return NULL;
    }
    Py_ssize_t k = PySequence_Fast_GET_SIZE(cseq), n = -1, opened = 0;
    Column *cols = PyMem_Calloc((size_t)(k ? k : 1), sizeof(Column));
    PyObject *out = NULL;
    if (!cols) {
        PyErr_NoMemory();
        goto done;
    }
    if (styles_len != k || PySequence_Fast_GET_SIZE(wseq) != k) {
        PyErr_SetString(PyExc_ValueError, "one style and one width per column");
        goto done;
    }
    for (; opened < k; opened++) {
        long width = PyLong_AsLong(PySequence_Fast_GET_ITEM(wseq, opened));
        if (width == -1 && PyErr_Occurred())
            goto done;
        if (column_open(&cols[opened], PySequence_Fast_GET_ITEM(cseq, opened),
                        styles[opened], width, &n) < 0) {
            opened++;  /* its buffer, if taken, is released below */
            goto done;
        }
    }
    out = write_rows(cols, k, n < 0 ? 0 : n, sep, sep_len, as_bytes,
                     write == Py_None ? NULL : write);
done:
    for (Py_ssize_t c = 0; cols && c < opened; c++)
        if (cols[c].view.obj)
            PyBuffer_Release(&cols[c].view);
    PyMem_Free(cols);
    Py_DECREF(cseq);
    Py_DECREF(wseq);
    return out;
}


/* The length of the plain decimal number at s (0 if there is none). */
static size_t decimal_length(const char *s) {
    const char *p = s;
    size_t digits = 0;
    if (*p == '+' || *p == '-')
        p++;
    for (; *p >= '0' && *p <= '9'; p++)
        digits++;
    if (*p == '.')
        for (p++; *p >= '0' && *p <= '9'; p++)
            digits++;
    if (!digits)
        return 0;
    if (*p == 'e' || *p == 'E') {
        const char *q = p + 1;
        if (*q == '+' || *q == '-')
            q++;
        if (!(*q >= '0' && *q <= '9'))
            return 0;
        while (*q >= '0' && *q <= '9')
            q++;
        p = q;
    }
    return (size_t)(p - s);
}

/* A token of at most 15 digits and a sign, exactly (most SWF fields); -1 for others. */
static int small_integer(const char *s, size_t len, double *v) {
    size_t k = (*s == '-' || *s == '+');
    if (len - k > 15)
        return -1;
    long long n = 0;
    for (size_t i = k; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        n = 10 * n + (s[i] - '0');
    }
    *v = *s == '-' ? -(double)n : (double)n;
    return 0;
}

/* Parse one line into out[0..fields); 0 if it is a line of `fields` plain numbers. */
static int parse_line(const char *s, Py_ssize_t fields, double *out) {
    char token[64];
    Py_ssize_t k = 0;
    for (;;) {
        while (*s == ' ' || *s == '\t')
            s++;
        if (!*s)
            return k == fields ? 0 : -1;
        size_t len = decimal_length(s);
        if (!len || len >= sizeof token || k == fields ||
            (s[len] && s[len] != ' ' && s[len] != '\t'))
            return -1;
        double v;
        if (small_integer(s, len, &v) < 0) {
            memcpy(token, s, len);
            token[len] = 0;
            v = PyOS_string_to_double(token, NULL, NULL);
            if (v == -1.0 && PyErr_Occurred()) {  /* out of range: the slow path says so */
                PyErr_Clear();
                return -1;
            }
            if (!isfinite(v))  /* 1e999 */
                return -1;
        }
        out[k++] = v;
        s += len;
    }
}

static PyObject *parse_rows(PyObject *self, PyObject *args) {
    PyObject *lines;
    Py_ssize_t fields;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!n", &PyList_Type, &lines, &fields))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(lines), bad = -1;
    if (fields < 0 || (fields && n > PY_SSIZE_T_MAX / 8 / fields)) {
        PyErr_SetString(PyExc_ValueError, "impossible number of fields");
        return NULL;
    }
    PyObject *data = PyByteArray_FromStringAndSize(NULL, n * fields * 8);
    if (!data)
        return NULL;
    double *out = (double *)PyByteArray_AS_STRING(data);
    for (Py_ssize_t row = 0; row < n; row++) {
        PyObject *line = PyList_GET_ITEM(lines, row);
        const char *s = PyBytes_Check(line) ? PyBytes_AS_STRING(line)
                        : PyUnicode_Check(line) ? PyUnicode_AsUTF8(line) : NULL;
        if (!s) {
            Py_DECREF(data);
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "lines must be str or bytes");
            return NULL;
        }
        if (parse_line(s, fields, out + row * fields) < 0) {
            bad = row;
            break;
        }
    }
    return Py_BuildValue("(Nn)", data, bad);
}

/* The list of make(v, arg) for every value v of a 1-D float64 buffer (NULL if one fails). */
static PyObject *column_list(PyObject *obj, PyObject *(*make)(double, double), double arg) {
    Column c = {0};
    Py_ssize_t n = -1;
    if (column_open(&c, obj, 'f', 0, &n) < 0) {
        if (c.view.obj)
            PyBuffer_Release(&c.view);
        return NULL;
    }
    PyObject *out = PyList_New(n);
    for (Py_ssize_t row = 0; out && row < n; row++) {
        PyObject *v = make(column_value(&c, row), arg);
        if (!v)
            Py_CLEAR(out);
        else
            PyList_SET_ITEM(out, row, v);
    }
    PyBuffer_Release(&c.view);
    return out;
}

static PyObject *as_int(double v, double unused) {
    (void)unused;
    return PyLong_FromDouble(v);
}

static PyObject *whole_numbers(PyObject *self, PyObject *obj) {
    (void)self;
    return column_list(obj, as_int, 0.0);
}

/* + 0.0: math.floor(-0.0) is the int 0, whose float is 0.0 */
static PyObject *floor_quotient(double v, double divisor) {
    return PyFloat_FromDouble(floor(v / divisor) + 0.0);
}

static PyObject *floor_quotients(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *obj;
    double divisor;
    if (!PyArg_ParseTuple(args, "Od", &obj, &divisor))
        return NULL;
    return column_list(obj, floor_quotient, divisor);
}

static PyObject *column_bounds(PyObject *self, PyObject *obj) {
    (void)self;
    Column c = {0};
    Py_ssize_t n = -1, nans = 0;
    if (column_open(&c, obj, 'f', 0, &n) < 0) {
        if (c.view.obj)
            PyBuffer_Release(&c.view);
        return NULL;
    }
    double least = INFINITY, greatest = -INFINITY;
    for (Py_ssize_t row = 0; row < n; row++) {
        double v = column_value(&c, row);
        if (isnan(v))
            nans++;
        else {
            least = v < least ? v : least;
            greatest = v > greatest ? v : greatest;
        }
    }
    PyBuffer_Release(&c.view);
    return Py_BuildValue("ddn", least, greatest, nans);
}

static PyObject *schedule_times(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *objs[3], *out[6] = {NULL}, *result = NULL;
    Column cols[3] = {{0}};
    Py_ssize_t n = -1, opened = 0;
    double least;
    if (!PyArg_ParseTuple(args, "OOOd", &objs[0], &objs[1], &objs[2], &least))
        return NULL;
    for (; opened < 3; opened++)
        if (column_open(&cols[opened], objs[opened], 'f', 0, &n) < 0) {
            opened++;
            goto done;
        }
    double *o[6];
    for (int k = 0; k < 6; k++) {
        if (!(out[k] = PyByteArray_FromStringAndSize(NULL, n * 8)))
            goto done;
        o[k] = (double *)PyByteArray_AS_STRING(out[k]);
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        double submit = column_value(&cols[0], i), start = column_value(&cols[1], i);
        double end = column_value(&cols[2], i);
        double wait = start - submit, run = end - start, total = wait + run;
        double turnaround = end - submit;
        double bounded = total / (run > least ? run : least);
        o[0][i] = wait;
        o[1][i] = run;
        o[2][i] = run > 0 ? total / run : NAN;
        o[3][i] = isnan(total) ? NAN : bounded > 1.0 ? bounded : 1.0;
        o[4][i] = turnaround;
        o[5][i] = run > 0 ? turnaround / run : NAN;
    }
    result = Py_BuildValue("(OOOOOO)", out[0], out[1], out[2], out[3], out[4], out[5]);
done:
    for (int k = 0; k < 6; k++)
        Py_XDECREF(out[k]);
    for (Py_ssize_t c = 0; c < opened; c++)
        if (cols[c].view.obj)
            PyBuffer_Release(&cols[c].view);
    return result;
}

static int swf_space(char c) {
    return c == ' ' || c == '\t' || c == '\v' || c == '\f';
}

/* One header line, [s, end) from its ';' on: the text after the ';', right-stripped. */
static int add_header(PyObject *header, const char *s, const char *end) {
    while (end > s + 1 && swf_space(end[-1]))
        end--;
    PyObject *text = PyUnicode_DecodeASCII(s + 1, end - s - 1, "strict");
    if (!text)
        return -1;
    int rc = PyList_Append(header, text);
    Py_DECREF(text);
    return rc;
}

static PyObject *parse_swf(PyObject *self, PyObject *args) {
    (void)self;
    const char *raw;
    Py_ssize_t size, fields, rows = 0, bad = -1, longest = 0, count = 1;
    if (!PyArg_ParseTuple(args, "y#n", &raw, &size, &fields))
        return NULL;
    if (fields <= 0 || fields > PY_SSIZE_T_MAX / 8 / (size + 1)) {
        PyErr_SetString(PyExc_ValueError, "impossible number of fields");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < size; i++)  /* lines at most: room for every row */
        count += raw[i] == '\n' || raw[i] == '\r';
    PyObject *header = PyList_New(0);
    PyObject *numbers = PyByteArray_FromStringAndSize(NULL, count * fields * 8);
    PyObject *lines = PyByteArray_FromStringAndSize(NULL, count * 8);
    char *line = NULL;
    if (!header || !numbers || !lines)
        goto fail;
    double *out = (double *)PyByteArray_AS_STRING(numbers);
    long long *at = (long long *)PyByteArray_AS_STRING(lines);
    const char *p = raw, *end = raw + size;
    for (long long number = 1; p < end; number++) {
        const char *q = p;
        while (q < end && *q != '\n' && *q != '\r')
            q++;
        const char *first = p;
        while (first < q && swf_space(*first))
            first++;
        if (first < q && *first == ';') {
            if (add_header(header, first, q) < 0)
                goto fail;
        } else if (first < q && bad < 0) {
            if (q - p + 1 > longest) {  /* a NUL-ended copy, as parse_line reads */
                longest = 2 * (q - p + 1);
                PyMem_Free(line);
                if (!(line = PyMem_Malloc((size_t)longest))) {
                    PyErr_NoMemory();
                    goto fail;
                }
            }
            memcpy(line, p, (size_t)(q - p));
            line[q - p] = 0;
            if (parse_line(line, fields, out + rows * fields) < 0)
                bad = rows;
            else
                at[rows++] = number;
        }
        p = q < end && *q == '\r' && q + 1 < end && q[1] == '\n' ? q + 2 : q + 1;
    }
    PyMem_Free(line);
    if (PyByteArray_Resize(numbers, rows * fields * 8) < 0 ||
        PyByteArray_Resize(lines, rows * 8) < 0)
        goto fail;
    return Py_BuildValue("(NNNn)", header, numbers, lines, bad);
fail:
    PyMem_Free(line);
    Py_XDECREF(header);
    Py_XDECREF(numbers);
    Py_XDECREF(lines);
    return NULL;
}

static Py_ssize_t slot_offset(PyTypeObject *cls, PyObject *name);

/* Where getattr() finds name on an instance of cls: a writable object slot that nothing
 * overrides (cls keeps getattr's own lookup), its offset; else -1, no error set. */
static Py_ssize_t plain_slot(PyTypeObject *cls, PyObject *name) {
    if (cls->tp_getattro != PyObject_GenericGetAttr)
        return -1;
    Py_ssize_t offset = slot_offset(cls, name);
    if (offset < 0)
        PyErr_Clear();
    return offset;
}

/* attribute_column(objects, name) -> bytearray of float64: the attribute of each object,
 * NaN where it is None, else as float() gives it (an int or a float; TypeError otherwise). */
static PyObject *attribute_column(PyObject *self, PyObject *args) {
    PyObject *objects, *name;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!U", &PyList_Type, &objects, &name))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(objects);
    if (n > PY_SSIZE_T_MAX / 8) {
        PyErr_SetString(PyExc_ValueError, "too many objects");
        return NULL;
    }
    PyObject *data = PyByteArray_FromStringAndSize(NULL, n * 8);
    if (!data)
        return NULL;
    double *out = (double *)PyByteArray_AS_STRING(data);
    PyTypeObject *seen = NULL;  /* the last object's class, and where its slot lies */
    Py_ssize_t offset = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *obj = PyList_GET_ITEM(objects, i), *value = NULL;
        if (Py_TYPE(obj) != seen) {
            seen = Py_TYPE(obj);
            offset = plain_slot(seen, name);
        }
        if (offset >= 0 && (value = *(PyObject **)((char *)obj + offset)))
            Py_INCREF(value);  /* the slot, as getattr() reads it, without the lookup */
        else if (!(value = PyObject_GetAttr(obj, name))) {
            Py_DECREF(data);
            return NULL;
        }
        double v = value == Py_None ? NAN : PyFloat_AsDouble(value);
        Py_DECREF(value);
        if (v == -1.0 && PyErr_Occurred()) {
            Py_DECREF(data);
            return NULL;
        }
        out[i] = v;
    }
    return data;
}

/* The slot a member descriptor of cls named name stands for: its offset in an instance,
 * or -1 with TypeError where name is no writable object slot of cls. */
static Py_ssize_t slot_offset(PyTypeObject *cls, PyObject *name) {
    PyObject *descr = PyObject_GetAttr((PyObject *)cls, name);
    if (!descr)
        return -1;
    Py_ssize_t offset = -1;
    if (Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
        PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
        if (member->type == T_OBJECT_EX && !(member->flags & READONLY))
            offset = member->offset;
    }
    Py_DECREF(descr);
    if (offset < 0)
        PyErr_Format(PyExc_TypeError, "%R is not a slot of %s", name, cls->tp_name);
    return offset;
}

/* new_objects(cls, n, fields) -> list of n instances of cls (made as cls.__new__ would make
 * them, no __init__), each slot named in fields set: to the i-th item of a list of n, or to
 * the one value given. cls keeps its attributes in __slots__. */
static PyObject *new_objects(PyObject *self, PyObject *args) {
    PyTypeObject *cls;
    Py_ssize_t n, k = 0, pos = 0;
    PyObject *fields, *name, *value, *out = NULL;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!nO!", &PyType_Type, &cls, &n, &PyDict_Type, &fields))
        return NULL;
    Py_ssize_t count = PyDict_GET_SIZE(fields);
    Py_ssize_t *offsets = PyMem_Calloc((size_t)count + 1, sizeof(Py_ssize_t));
    PyObject **values = PyMem_Calloc((size_t)count + 1, sizeof(PyObject *));
    if (n < 0 || !offsets || !values) {
        if (!PyErr_Occurred())
            PyErr_SetString(n < 0 ? PyExc_ValueError : PyExc_MemoryError, "bad count");
        goto done;
    }
    while (PyDict_Next(fields, &pos, &name, &value)) {
        if ((offsets[k] = slot_offset(cls, name)) < 0)
            goto done;
        if (PyList_Check(value) && PyList_GET_SIZE(value) != n) {
            PyErr_Format(PyExc_ValueError, "%R: %zd values for %zd objects", name,
                         PyList_GET_SIZE(value), n);
            goto done;
        }
        values[k++] = value;
    }
    if (!(out = PyList_New(n)))
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *obj = cls->tp_alloc(cls, 0);
        if (!obj) {
            Py_CLEAR(out);
            goto done;
        }
        for (Py_ssize_t j = 0; j < k; j++) {
            PyObject *v = PyList_Check(values[j]) ? PyList_GET_ITEM(values[j], i) : values[j];
            Py_INCREF(v);
            *(PyObject **)((char *)obj + offsets[j]) = v;  /* a new object's slots are NULL */
        }
        PyList_SET_ITEM(out, i, obj);
    }
done:
    PyMem_Free(offsets);
    PyMem_Free(values);
    return out;
}

static PyMethodDef methods[] = {
    {"new_objects", new_objects, METH_VARARGS,
     "new_objects(cls, n, fields) -> n instances of a class with __slots__, their slots "
     "set from fields (name -> a list of n values, or one value for all)."},
    {"schedule_times", schedule_times, METH_VARARGS,
     "schedule_times(submit, start, end, least) -> (wait, run, slowdown, bounded, turnaround, "
     "stretch) as float64 bytearrays."},
    {"whole_numbers", whole_numbers, METH_O,
     "whole_numbers(column) -> list: int() of each value of a 1-D float64 buffer."},
    {"attribute_column", attribute_column, METH_VARARGS,
     "attribute_column(objects, name) -> bytearray of float64: each object's attribute, "
     "NaN for None."},
    {"format_rows", format_rows, METH_VARARGS,
     "format_rows(columns, styles, widths, sep, as_bytes=False, write=None) -> str (or UTF-8 "
     "bytes; None with write, which is handed the text a chunk at a time): the rows of the "
     "columns as text "
     "(see the module source for the styles)."},
    {"floor_quotients", floor_quotients, METH_VARARGS,
     "floor_quotients(column, divisor) -> [float(math.floor(v / divisor)) for v in column] "
     "of a 1-D float64 buffer of finite values."},
    {"column_bounds", column_bounds, METH_O,
     "column_bounds(column) -> (least, greatest, NaN count) of a 1-D float64 buffer, NaN "
     "left out: (inf, -inf, n) where no value is a number."},
    {"parse_swf", parse_swf, METH_VARARGS,
     "parse_swf(raw, fields) -> (header, float64 rows, int64 line numbers, first bad job line "
     "or -1)."},
    {"parse_rows", parse_rows, METH_VARARGS,
     "parse_rows(lines, fields) -> (bytearray of float64, first bad line or -1)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_columns",
                                    "Columns of numbers as text, a row at a time, and back.", -1,
                                    methods};

PyMODINIT_FUNC PyInit__columns(void) {
    return PyModule_Create(&module);
}
