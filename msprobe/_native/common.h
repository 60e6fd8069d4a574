/*
 * What msprobe's C kernels share (msprobe/_native/_stats.c, msprobe/_native/_pair.c): the interface version, the
 * element kinds, exact widening of 16-bit floats, the AVX2 switch and the parsing of integer arguments.
 */
#ifndef MSPROBE_NATIVE_COMMON_H
#define MSPROBE_NATIVE_COMMON_H

/* msprobe._native.VERSION: a built module of another version (an old build left in place) is not used */
#define MSPROBE_NATIVE_VERSION 5

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define MSPROBE_X86 1
#include <immintrin.h>
#endif

/* an element kind is named by its size: 4 float32, 8 float64, and these for the 16-bit floats */
#define KIND_FLOAT16 2
#define KIND_BFLOAT16 258

/* a kernel module's constants (its interface version, the 16-bit kinds), or NULL with m released on failure */
static PyObject *with_constants(PyObject *m)
{
    if (PyModule_AddIntConstant(m, "VERSION", MSPROBE_NATIVE_VERSION) < 0 ||
        PyModule_AddIntConstant(m, "FLOAT16", KIND_FLOAT16) < 0 ||
        PyModule_AddIntConstant(m, "BFLOAT16", KIND_BFLOAT16) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

/* 16-bit floats widened to float32, exactly */
static inline float bf16_to_float(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static inline float f16_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu, bits;
    if (exponent == 0) { /* zero or subnormal: mantissa * 2^-24, exact in float32 */
        float f = (float)mantissa * 5.9604644775390625e-08f;
        return sign ? -f : f;
    }
    if (exponent == 31)
        bits = sign | 0x7f800000u | (mantissa << 13);
    else
        bits = sign | ((exponent + 112u) << 23) | (mantissa << 13);
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* whether the AVX2 loops run: the CPU has AVX2, FMA and F16C, and MSPROBE_NATIVE_SIMD is not "0" (tests use
 * it to check the portable loops on x86 too) */
static int simd_enabled(void)
{
#ifdef MSPROBE_X86
    static int use_avx2 = -1;
    if (use_avx2 < 0) {
        const char *setting = getenv("MSPROBE_NATIVE_SIMD");
        use_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                   __builtin_cpu_supports("f16c") && !(setting != NULL && strcmp(setting, "0") == 0);
    }
    return use_avx2;
#else
    return 0;
#endif
}

/* integer arguments; 0 on success, -1 with the exception set */
static inline int arg_address(PyObject *value, void **out)
{
    *out = PyLong_AsVoidPtr(value);
    return *out == NULL && PyErr_Occurred() ? -1 : 0;
}

static inline int arg_size(PyObject *value, Py_ssize_t *out)
{
    *out = PyLong_AsSsize_t(value);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

static inline int arg_long(PyObject *value, long *out)
{
    *out = PyLong_AsLong(value);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

/* a PyMem buffer moved to `capacity` bytes (its contents kept); 0, or -1 with MemoryError set (the buffer as it was) */
static inline int mem_resize(char **data, Py_ssize_t capacity)
{
    char *grown = PyMem_Realloc(*data, (size_t)capacity);
    if (grown == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *data = grown;
    return 0;
}

#endif
