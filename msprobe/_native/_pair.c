/*
 * One pass over a pair of dense float buffers: the error metrics of a device output against its bench.
 *
 * online_dispatch judges every ATen op's outputs against a high-precision CPU re-run. In numpy that is a
 * dozen passes and as many temporaries per output; this reads both buffers once, widening each element to
 * double in a register, and gives every number the single-benchmark rule needs:
 *
 *     judge_pair(dut_address, dut_kind, bench_address, bench_kind, count)
 *         -> None when an element of either buffer (or their difference) is not finite, else
 *            (max_abs_all, max_small_abs, small_index, max_rel, rel_index, error_balance, dot_db, dot_dd, dot_bb)
 *
 * kinds: 4 float32, 8 float64, 2 float16, 258 bfloat16 (as _fast_stats). Where |bench| < 1 the error is
 * absolute, elsewhere relative (|dut - bench| / |bench|); error_balance is the mean of the signed errors
 * (absolute or relative likewise); indices are the first position of each maximum, -1 when it is 0.
 * The dot products give the cosine. NaN/Inf are left to the caller (positions must match; rare), which is
 * told by None. The GIL is released for buffers of 64 K elements or more.
 *
 * json_floats_as_repr(orjson_bytes) -> str rewrites orjson's text of a float64 array into Python's repr of each
 * number (number formatting over bytes, for compare's reports; its Python form in float_text is the reference).
 *
 * Built as an optional extension: without a C compiler the callers use numpy and the Python rewrite.
 */
#include "common.h"

static inline double load_bf16(const void *p, Py_ssize_t i) { return bf16_to_float(((const uint16_t *)p)[i]); }
static inline double load_f16(const void *p, Py_ssize_t i) { return f16_to_float(((const uint16_t *)p)[i]); }

/* running sums and maxima of one buffer pair */
typedef struct {
    double all, small_max, rel_max, sum, db, dd, bb, bad;
} acc_t;

typedef struct {
    acc_t acc;
    Py_ssize_t small_index, rel_index;
} pair_t;

/* The error of one element: absolute where |bench| < 1, relative elsewhere. */
#define ELEMENT_ERROR(d, b, s, small, r)              \
    double s = (d) - (b), magnitude = fabs(b);        \
    int small = magnitude < 1.0;                      \
    double r = small ? s : s / magnitude;

/* Portable loops for one (dut, bench) element pair: `_scan` accumulates elements [start, n); `_find` sets the
 * first position of each maximum (maxima are kept without positions in the main loop, so this scan stops at
 * the first element equal to each). `bad` turns NaN when a difference is NaN or infinite, which any NaN/Inf
 * input gives. */
#define PAIR_LOOPS(name, LOAD_D, LOAD_B)                                                                \
    static void name##_scan(const void *dut, const void *bench, Py_ssize_t start, Py_ssize_t n, acc_t *acc) \
    {                                                                                                   \
        /* locals, not acc's fields: the buffers might alias acc as far as the compiler knows */        \
        double all = acc->all, small_max = acc->small_max, rel_max = acc->rel_max, sum = acc->sum;      \
        double db = acc->db, dd = acc->dd, bb = acc->bb, bad = acc->bad;                                \
        for (Py_ssize_t i = start; i < n; i++) {                                                        \
            double d = LOAD_D(dut, i), b = LOAD_B(bench, i);                                            \
            ELEMENT_ERROR(d, b, s, small, r)                                                            \
            double a = fabs(s), e = fabs(r);                                                            \
            bad += s * 0.0;                                                                             \
            all = a > all ? a : all;                                                                    \
            double e_small = small ? e : 0.0, e_rel = small ? 0.0 : e;                                  \
            small_max = e_small > small_max ? e_small : small_max;                                      \
            rel_max = e_rel > rel_max ? e_rel : rel_max;                                                \
            sum += r;                                                                                   \
            db += d * b; dd += d * d; bb += b * b;                                                      \
        }                                                                                               \
        acc->all = all; acc->small_max = small_max; acc->rel_max = rel_max; acc->sum = sum;             \
        acc->db = db; acc->dd = dd; acc->bb = bb; acc->bad = bad;                                       \
    }                                                                                                   \
    static void name##_find(const void *dut, const void *bench, Py_ssize_t start, Py_ssize_t n, pair_t *out) \
    {                                                                                                   \
        double small_max = out->acc.small_max, rel_max = out->acc.rel_max;                              \
        int need_small = small_max > 0.0 && out->small_index < 0, need_rel = rel_max > 0.0 && out->rel_index < 0; \
        for (Py_ssize_t i = start; (need_small || need_rel) && i < n; i++) {                            \
            double d = LOAD_D(dut, i), b = LOAD_B(bench, i);                                            \
            ELEMENT_ERROR(d, b, s, small, r)                                                            \
            (void)s;                                                                                    \
            double e = fabs(r);                                                                         \
            if (small && need_small && e == small_max) {                                                \
                out->small_index = i;                                                                   \
                need_small = 0;                                                                         \
            } else if (!small && need_rel && e == rel_max) {                                            \
                out->rel_index = i;                                                                     \
                need_rel = 0;                                                                           \
            }                                                                                           \
        }                                                                                               \
    }                                                                                                   \
    static void name##_portable(const void *dut, const void *bench, Py_ssize_t n, pair_t *out)          \
    {                                                                                                   \
        memset(&out->acc, 0, sizeof out->acc);                                                          \
        name##_scan(dut, bench, 0, n, &out->acc);                                                       \
        out->small_index = out->rel_index = -1;                                                         \
        if (out->acc.bad == 0.0)                                                                        \
            name##_find(dut, bench, 0, n, out);                                                         \
    }

#define DIRECT_F32(p, i) ((double)((const float *)(p))[i])
#define DIRECT_F64(p, i) (((const double *)(p))[i])
PAIR_LOOPS(f32_f64, DIRECT_F32, DIRECT_F64)
PAIR_LOOPS(f32_f32, DIRECT_F32, DIRECT_F32)
PAIR_LOOPS(f64_f64, DIRECT_F64, DIRECT_F64)
PAIR_LOOPS(bf16_f32, load_bf16, DIRECT_F32)
PAIR_LOOPS(bf16_f64, load_bf16, DIRECT_F64)
PAIR_LOOPS(f16_f32, load_f16, DIRECT_F32)
PAIR_LOOPS(f16_f64, load_f16, DIRECT_F64)

typedef void (*pair_kernel_t)(const void *, const void *, Py_ssize_t, pair_t *);

#ifdef MSPROBE_X86
__attribute__((target("avx2,fma"))) static double hsum4(__m256d v)
{
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

__attribute__((target("avx2,fma"))) static double hmax4(__m256d v)
{
    __m128d m = _mm_max_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_max_sd(m, _mm_unpackhi_pd(m, m)));
}

/* the largest of eight (value, position) lanes, the smallest position among equal values; -1 when all are 0 */
__attribute__((target("avx2,fma"))) static void lane_argmax(__m256d m0, __m256d i0, __m256d m1, __m256d i1,
                                                            double *best, Py_ssize_t *index)
{
    double m[8], ix[8];
    _mm256_storeu_pd(m, m0);
    _mm256_storeu_pd(m + 4, m1);
    _mm256_storeu_pd(ix, i0);
    _mm256_storeu_pd(ix + 4, i1);
    double value = 0.0, position = -1.0;
    for (int j = 0; j < 8; j++) {
        if (m[j] > value || (m[j] == value && m[j] > 0.0 && ix[j] < position)) {
            value = m[j];
            position = ix[j];
        }
    }
    *best = value;
    *index = value > 0.0 ? (Py_ssize_t)position : -1;
}

/* Four elements at a time in double: the numbers of the portable loop (its sums added in another order).
 * Each lane keeps its maximum errors with the position where it first reached them (a compare and two
 * blends), so no second pass is needed; the last n % 8 elements go through the portable loops. */
#define AVX2_PAIR_KERNEL(name, target_list, LOAD4_D, LOAD4_B)                                            \
    __attribute__((target(target_list))) static void name##_avx2(const void *dut, const void *bench,     \
                                                                 Py_ssize_t n, pair_t *out)             \
    {                                                                                                    \
        const __m256d sign = _mm256_set1_pd(-0.0), one = _mm256_set1_pd(1.0), zero = _mm256_setzero_pd(); \
        const __m256d lanes = _mm256_set_pd(3.0, 2.0, 1.0, 0.0), none = _mm256_set1_pd(-1.0);           \
        /* two sets of accumulators (8 elements a round), so the adds of one round do not wait on each other */ \
        __m256d all[2] = {zero, zero}, small_max[2] = {zero, zero}, rel_max[2] = {zero, zero};         \
        __m256d small_at[2] = {none, none}, rel_at[2] = {none, none};                                    \
        __m256d sum[2] = {zero, zero}, db[2] = {zero, zero}, dd[2] = {zero, zero}, bb[2] = {zero, zero}; \
        __m256d bad[2] = {zero, zero};                                                                   \
        Py_ssize_t i = 0;                                                                                \
        for (; i + 8 <= n; i += 8) {                                                                     \
            for (int k = 0; k < 2; k++) {                                                                \
                __m256d d = LOAD4_D(dut, i + 4 * k), b = LOAD4_B(bench, i + 4 * k);                      \
                __m256d s = _mm256_sub_pd(d, b), magnitude = _mm256_andnot_pd(sign, b);                  \
                __m256d small = _mm256_cmp_pd(magnitude, one, _CMP_LT_OQ);                               \
                __m256d r = _mm256_div_pd(s, _mm256_blendv_pd(magnitude, one, small));                   \
                __m256d e = _mm256_andnot_pd(sign, r);                                                   \
                __m256d position = _mm256_add_pd(_mm256_set1_pd((double)(i + 4 * k)), lanes);            \
                __m256d e_small = _mm256_and_pd(small, e), e_rel = _mm256_andnot_pd(small, e);           \
                __m256d up_small = _mm256_cmp_pd(e_small, small_max[k], _CMP_GT_OQ);                     \
                __m256d up_rel = _mm256_cmp_pd(e_rel, rel_max[k], _CMP_GT_OQ);                           \
                small_max[k] = _mm256_blendv_pd(small_max[k], e_small, up_small);                        \
                small_at[k] = _mm256_blendv_pd(small_at[k], position, up_small);                         \
                rel_max[k] = _mm256_blendv_pd(rel_max[k], e_rel, up_rel);                                \
                rel_at[k] = _mm256_blendv_pd(rel_at[k], position, up_rel);                               \
                bad[k] = _mm256_add_pd(bad[k], _mm256_mul_pd(s, zero));                                  \
                all[k] = _mm256_max_pd(all[k], _mm256_andnot_pd(sign, s));                               \
                sum[k] = _mm256_add_pd(sum[k], r);                                                       \
                db[k] = _mm256_fmadd_pd(d, b, db[k]);                                                    \
                dd[k] = _mm256_fmadd_pd(d, d, dd[k]);                                                    \
                bb[k] = _mm256_fmadd_pd(b, b, bb[k]);                                                    \
            }                                                                                            \
        }                                                                                                \
        acc_t *acc = &out->acc;                                                                          \
        double simd_small, simd_rel;                                                                     \
        Py_ssize_t small_index, rel_index;                                                               \
        lane_argmax(small_max[0], small_at[0], small_max[1], small_at[1], &simd_small, &small_index);     \
        lane_argmax(rel_max[0], rel_at[0], rel_max[1], rel_at[1], &simd_rel, &rel_index);                 \
        acc->bad = hsum4(_mm256_add_pd(bad[0], bad[1]));                                                 \
        acc->all = hmax4(_mm256_max_pd(all[0], all[1]));                                                 \
        acc->small_max = simd_small;                                                                     \
        acc->rel_max = simd_rel;                                                                         \
        acc->sum = hsum4(_mm256_add_pd(sum[0], sum[1]));                                                 \
        acc->db = hsum4(_mm256_add_pd(db[0], db[1]));                                                    \
        acc->dd = hsum4(_mm256_add_pd(dd[0], dd[1]));                                                    \
        acc->bb = hsum4(_mm256_add_pd(bb[0], bb[1]));                                                    \
        name##_scan(dut, bench, i, n, acc);                                                              \
        /* a maximum the tail did not beat keeps its (earlier) position; otherwise the tail is searched */ \
        out->small_index = acc->small_max == simd_small ? small_index : -1;                              \
        out->rel_index = acc->rel_max == simd_rel ? rel_index : -1;                                      \
        if (acc->bad == 0.0)                                                                             \
            name##_find(dut, bench, i, n, out);                                                          \
    }

#define LOAD4_F32(p, i) _mm256_cvtps_pd(_mm_loadu_ps((const float *)(p) + (i)))
#define LOAD4_F64(p, i) _mm256_loadu_pd((const double *)(p) + (i))
#define LOAD4_BF16(p, i) _mm256_cvtps_pd(_mm_castsi128_ps(_mm_slli_epi32(                               \
    _mm_cvtepu16_epi32(_mm_loadl_epi64((const __m128i *)((const uint16_t *)(p) + (i)))), 16)))
#define LOAD4_F16(p, i) _mm256_cvtps_pd(_mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)((const uint16_t *)(p) + (i)))))
AVX2_PAIR_KERNEL(f32_f64, "avx2,fma", LOAD4_F32, LOAD4_F64)
AVX2_PAIR_KERNEL(f32_f32, "avx2,fma", LOAD4_F32, LOAD4_F32)
AVX2_PAIR_KERNEL(f64_f64, "avx2,fma", LOAD4_F64, LOAD4_F64)
AVX2_PAIR_KERNEL(bf16_f32, "avx2,fma", LOAD4_BF16, LOAD4_F32)
AVX2_PAIR_KERNEL(bf16_f64, "avx2,fma", LOAD4_BF16, LOAD4_F64)
AVX2_PAIR_KERNEL(f16_f32, "avx2,fma,f16c", LOAD4_F16, LOAD4_F32)
AVX2_PAIR_KERNEL(f16_f64, "avx2,fma,f16c", LOAD4_F16, LOAD4_F64)
#endif

#ifdef MSPROBE_X86
#define PICK(name) (simd_enabled() ? name##_avx2 : name##_portable)
#else
#define PICK(name) (name##_portable)
#endif

/* the loop for a (dut kind, bench kind) pair; NULL when the pair is not supported */
static pair_kernel_t pick_kernel(long dut_kind, long bench_kind)
{
    if (dut_kind == 4 && bench_kind == 8) return PICK(f32_f64);
    if (dut_kind == 4 && bench_kind == 4) return PICK(f32_f32);
    if (dut_kind == 8 && bench_kind == 8) return PICK(f64_f64);
    if (dut_kind == KIND_BFLOAT16 && bench_kind == 4) return PICK(bf16_f32);
    if (dut_kind == KIND_BFLOAT16 && bench_kind == 8) return PICK(bf16_f64);
    if (dut_kind == KIND_FLOAT16 && bench_kind == 4) return PICK(f16_f32);
    if (dut_kind == KIND_FLOAT16 && bench_kind == 8) return PICK(f16_f64);
    return NULL;
}

static PyObject *judge_pair(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "judge_pair(dut_address, dut_kind, bench_address, bench_kind, count)");
        return NULL;
    }
    void *dut, *bench;
    long dut_kind, bench_kind;
    Py_ssize_t count;
    if (arg_address(args[0], &dut) < 0 || arg_long(args[1], &dut_kind) < 0 || arg_address(args[2], &bench) < 0 ||
        arg_long(args[3], &bench_kind) < 0 || arg_size(args[4], &count) < 0)
        return NULL;
    pair_kernel_t kernel = pick_kernel(dut_kind, bench_kind);
    if (dut == NULL || bench == NULL || count < 1 || kernel == NULL) {
        PyErr_SetString(PyExc_ValueError, "need non-null addresses, count >= 1 and a supported pair of kinds "
                                          "(dut float32, float64, FLOAT16 or BFLOAT16; bench float32 or float64)");
        return NULL;
    }
    pair_t out;
    /* short buffers take less time than handing the GIL over and back */
    PyThreadState *saved = count >= (1 << 16) ? PyEval_SaveThread() : NULL;
    kernel(dut, bench, count, &out);
    if (saved != NULL)
        PyEval_RestoreThread(saved);
    if (out.acc.bad != 0.0)
        Py_RETURN_NONE;
    return Py_BuildValue("(ddndndddd)", out.acc.all, out.acc.small_max, out.small_index, out.acc.rel_max,
                         out.rel_index, out.acc.sum / (double)count, out.acc.db, out.acc.dd, out.acc.bb);
}


/*
 * json_floats_as_repr(text) -> str: orjson's JSON text of a float64 array rewritten so that every number reads
 * as Python's repr of it (msprobe/core/io/float_text.py, whose Python path is the reference this is tested
 * against). Two rewrites, in this order: a one-digit negative exponent gets its leading zero ("1e-7" -> "1e-07":
 * a ',' or ']' two bytes after a '-'), and a number orjson writes as "0.0000ddd" without a digit before it
 * becomes "d.dde-05" (repr uses the exponent form below 1e-4, orjson below 1e-7).
 */
static Py_ssize_t pad_exponents(const char *in, Py_ssize_t n, char *out)
{
    Py_ssize_t i = 0, j = 0;
    while (i < n) {  /* copy up to each '-', then look at the two bytes after it */
        const char *minus = memchr(in + i, '-', (size_t)(n - i));
        Py_ssize_t stop = minus == NULL ? n : (Py_ssize_t)(minus - in) + 1;
        memcpy(out + j, in + i, (size_t)(stop - i));
        j += stop - i;
        i = stop;
        if (minus != NULL && i + 1 < n && (in[i + 1] == ',' || in[i + 1] == ']'))
            out[j++] = '0';
    }
    return j;
}

static Py_ssize_t small_as_scientific(const char *in, Py_ssize_t n, char *out)
{
    Py_ssize_t i = 0, j = 0;
    while (i < n) {
        const char *dot = memchr(in + i, '.', (size_t)(n - i));  /* a match starts one byte before a '.' */
        Py_ssize_t at = dot == NULL ? n : (Py_ssize_t)(dot - in) - 1;
        if (at < i)
            at = i;
        memcpy(out + j, in + i, (size_t)(at - i));
        j += at - i;
        i = at;
        if (i >= n)
            break;
        Py_ssize_t end = i + 6;
        if (end < n && memcmp(in + i, "0.0000", 6) == 0 && in[end] >= '0' && in[end] <= '9') {
            while (end < n && in[end] >= '0' && in[end] <= '9')
                end++;
            Py_ssize_t first = i + 2;  /* the fraction's first digit */
            while (first < end && in[first] == '0')
                first++;
            if ((i > 0 && in[i - 1] >= '0' && in[i - 1] <= '9') || first == end) {
                memcpy(out + j, in + i, (size_t)(end - i));
                j += end - i;
            } else {
                int exponent = (int)(first - (i + 2)) + 1;
                out[j++] = in[first];
                if (end - first > 1) {
                    out[j++] = '.';
                    memcpy(out + j, in + first + 1, (size_t)(end - first - 1));
                    j += end - first - 1;
                }
                j += sprintf(out + j, "e-%02d", exponent);
            }
            i = end;
        } else {  /* no match here: this byte and the '.' (a match cannot start at a '.') */
            Py_ssize_t step = (dot != NULL && (Py_ssize_t)(dot - in) >= i) ? (Py_ssize_t)(dot - in) + 1 - i : 1;
            memcpy(out + j, in + i, (size_t)step);
            j += step;
            i += step;
        }
    }
    return j;
}

/* Both rewrites of orjson's text `text` (n bytes): returns the buffer to PyMem_Free (NULL with MemoryError set);
   the rewritten text is at *out, *k bytes. Padding adds at most one byte a number; the scientific form is never
   longer than the fixed one. */
static char *repr_rewrite(const char *text, Py_ssize_t n, char **out, Py_ssize_t *k)
{
    char *padded = PyMem_Malloc((size_t)(4 * n + 32));
    if (padded == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    Py_ssize_t m = pad_exponents(text, n, padded);
    *out = padded + 2 * n + 16;
    *k = small_as_scientific(padded, m, *out);
    return padded;
}

static PyObject *json_floats_as_repr(PyObject *Py_UNUSED(self), PyObject *arg)
{
    char *text, *out;
    Py_ssize_t n, k;
    if (PyBytes_AsStringAndSize(arg, &text, &n) < 0)
        return NULL;
    char *padded = repr_rewrite(text, n, &out, &k);
    if (padded == NULL)
        return NULL;
    PyObject *result = PyUnicode_DecodeASCII(out, k, "strict");
    PyMem_Free(padded);
    return result;
}

static PyObject *simd(PyObject *Py_UNUSED(self), PyObject *Py_UNUSED(args))
{
    return PyBool_FromLong(simd_enabled());
}

static PyMethodDef methods[] = {
    {"simd", (PyCFunction)simd, METH_NOARGS, "simd() -> whether the AVX2 loops are in use"},
    {"judge_pair", (PyCFunction)(void (*)(void))judge_pair, METH_FASTCALL,
     "judge_pair(dut_address, dut_kind, bench_address, bench_kind, count) -> error metrics, or None for NaN/Inf"},
    {"json_floats_as_repr", (PyCFunction)json_floats_as_repr, METH_O,
     "json_floats_as_repr(orjson_bytes) -> str: orjson's text of a float array with every number as its repr"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_pair", "One-pass error metrics of a device output against its bench.", -1,
    methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__pair(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    return with_constants(m);
}
