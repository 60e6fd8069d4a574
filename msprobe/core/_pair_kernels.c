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
 * Built as an optional extension: without a C compiler the callers use numpy.
 */
#include "../_native/common.h"

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
 * as Python's repr of it (msprobe/core/compare/float_text.py, whose Python path is the reference this is tested
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

/*
 * split_value_numbers(data, separator) -> list: what re.split(re.escape(separator) + rb"(-?[0-9][0-9.eE+-]*)", data)
 * returns (msprobe/core/compare/templates.py, whose regex is the reference this is tested against): the text
 * between the numbers that follow `separator`, and those numbers, alternating.
 */
static inline int is_digit(char c) { return c >= '0' && c <= '9'; }
static inline int is_number_byte(char c) { return is_digit(c) || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'; }

/* the end of the number token (-?[0-9][0-9.eE+-]*, as long as it runs) starting at data[at], or -1 where none does */
static Py_ssize_t number_end(const char *data, Py_ssize_t at, Py_ssize_t n)
{
    if (at < n && data[at] == '-')
        at++;
    if (at >= n || !is_digit(data[at]))
        return -1;
    while (++at < n && is_number_byte(data[at]))
        ;
    return at;
}

static int append_bytes(PyObject *list, const char *start, Py_ssize_t size)
{
    PyObject *piece = PyBytes_FromStringAndSize(start, size);
    if (piece == NULL)
        return -1;
    int failed = PyList_Append(list, piece);
    Py_DECREF(piece);
    return failed;
}

static PyObject *split_value_numbers(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    char *data, *sep;
    Py_ssize_t n, k;
    if (nargs != 2 || PyBytes_AsStringAndSize(args[0], &data, &n) < 0 ||
        PyBytes_AsStringAndSize(args[1], &sep, &k) < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "split_value_numbers(data: bytes, separator: bytes)");
        return NULL;
    }
    if (k < 1) {
        PyErr_SetString(PyExc_ValueError, "the separator must not be empty");
        return NULL;
    }
    PyObject *parts = PyList_New(0);
    if (parts == NULL)
        return NULL;
    Py_ssize_t piece = 0, i = 0;
    while (i + k <= n) {  /* find the separator by its second byte (':' is rarer than '"'), then check it */
        const char *hit = k > 1 ? memchr(data + i + 1, sep[1], (size_t)(n - k + 1 - i)) : memchr(data + i, sep[0], (size_t)(n - i));
        if (hit == NULL)
            break;
        i = (hit - data) - (k > 1);
        if (memcmp(data + i, sep, (size_t)k) != 0) {
            i++;
            continue;
        }
        Py_ssize_t start = i + k, end = number_end(data, start, n);
        if (end < 0) {
            i++;
            continue;
        }
        if (append_bytes(parts, data + piece, i - piece) < 0 || append_bytes(parts, data + start, end - start) < 0) {
            Py_DECREF(parts);
            return NULL;
        }
        piece = i = end;
    }
    if (append_bytes(parts, data + piece, n - piece) < 0) {
        Py_DECREF(parts);
        return NULL;
    }
    return parts;
}

/*
 * fill_numbers(data, segments) -> bytes or None: where `data` is segments[0] + n0 + segments[1] + n1 + ... +
 * segments[-1] with every n a number token (-?[0-9][0-9.eE+-]*, as long as it runs), the JSON array text
 * "[n0,n1,...]" of those tokens; None where it is not. A dump template's segments are its file's text between
 * the statistics (msprobe/core/compare/templates.py; its split-and-compare in Python is the reference).
 */
static PyObject *fill_numbers(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    char *data;
    Py_ssize_t n;
    if (nargs != 2 || PyBytes_AsStringAndSize(args[0], &data, &n) < 0 || !PyTuple_Check(args[1]) ||
        PyTuple_GET_SIZE(args[1]) < 1) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "fill_numbers(data: bytes, segments: non-empty tuple of bytes)");
        return NULL;
    }
    PyObject *segments = args[1];
    Py_ssize_t count = PyTuple_GET_SIZE(segments), literal = 0;
    for (Py_ssize_t j = 0; j < count; j++) {
        if (!PyBytes_Check(PyTuple_GET_ITEM(segments, j))) {
            PyErr_SetString(PyExc_TypeError, "segments must be bytes");
            return NULL;
        }
        literal += PyBytes_GET_SIZE(PyTuple_GET_ITEM(segments, j));
    }
    if (literal > n)
        Py_RETURN_NONE;
    /* the tokens fill what the segments leave, plus a comma each and the brackets */
    PyObject *out = PyBytes_FromStringAndSize(NULL, n - literal + count + 1);
    if (out == NULL)
        return NULL;
    char *w = PyBytes_AS_STRING(out), *limit = w + PyBytes_GET_SIZE(out);
    *w++ = '[';
    Py_ssize_t pos = 0;
    for (Py_ssize_t j = 0; j < count; j++) {
        PyObject *segment = PyTuple_GET_ITEM(segments, j);
        Py_ssize_t size = PyBytes_GET_SIZE(segment);
        if (size > n - pos || memcmp(data + pos, PyBytes_AS_STRING(segment), (size_t)size) != 0)
            goto mismatch;
        pos += size;
        if (j == count - 1)
            break;
        Py_ssize_t start = pos;
        if ((pos = number_end(data, start, n)) < 0)
            goto mismatch;
        if (pos - start + 2 > limit - w)  /* more token bytes than the segments leave: cannot match */
            goto mismatch;
        memcpy(w, data + start, (size_t)(pos - start));
        w += pos - start;
        *w++ = ',';
    }
    if (pos != n)
        goto mismatch;
    if (count > 1)
        w--;  /* the last comma */
    *w++ = ']';
    if (_PyBytes_Resize(&out, w - PyBytes_AS_STRING(out)) < 0)
        return NULL;
    return out;
mismatch:
    Py_DECREF(out);
    Py_RETURN_NONE;
}

/*
 * The rewrites one number at a time: the row writers below read orjson's text number by number, so each number is
 * rewritten where it is copied (no rewritten copy of the whole text first). For a token of orjson's grammar
 * (null, or -?digits[.digits][e[+-]digits], between '[', ',' and ']') this writes what pad_exponents then
 * small_as_scientific write for it inside the whole text: both only look at the bytes of one number, and the
 * "0.0000" + digit that small_as_scientific rewrites, not after a digit, can only start such a token (after its
 * sign). Tokens outside that grammar (orjson writes none) are not promised the whole-text result.
 */
#define TOKEN_STACK 64

/* tok (len bytes) rewritten into out (room for len + 1 bytes) by the whole-text rewrites themselves: the length
   written, -1 with MemoryError set */
static Py_ssize_t rewrite_token(const char *tok, Py_ssize_t len, char *out)
{
    char stack[TOKEN_STACK];
    char *padded = len + 1 <= TOKEN_STACK ? stack : PyMem_Malloc((size_t)len + 1);
    if (padded == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t m = len;
    memcpy(padded, tok, (size_t)len);
    if (len >= 2 && tok[len - 2] == '-') {  /* "e-7" -> "e-07" */
        padded[len - 1] = '0';
        padded[len] = tok[len - 1];
        m = len + 1;
    }
    Py_ssize_t k = small_as_scientific(padded, m, out);
    if (padded != stack)
        PyMem_Free(padded);
    return k;
}

/* The usual number below 1e-4 that orjson writes fixed, "0.0000ddd" or "-0.0000ddd" (digits to its end), as
   small_as_scientific writes it: "d.dde-05". -1 where the number has another form. */
static Py_ssize_t scientific_token(const char *tok, Py_ssize_t len, char *out)
{
    Py_ssize_t sign = tok[0] == '-', dot = sign + 1;
    if (len <= dot + 5 || memcmp(tok + sign, "0.0000", 6) != 0)
        return -1;
    for (Py_ssize_t i = dot + 1; i < len; i++)
        if (!is_digit(tok[i]))
            return -1;
    Py_ssize_t first = dot + 1;
    while (first < len && tok[first] == '0')
        first++;
    Py_ssize_t exponent = first - dot;
    if (first == len || exponent > 99)
        return -1;
    Py_ssize_t j = 0;
    if (sign)
        out[j++] = '-';
    out[j++] = tok[first];
    if (len - first > 1) {
        out[j++] = '.';
        memcpy(out + j, tok + first + 1, (size_t)(len - first - 1));
        j += len - first - 1;
    }
    out[j++] = 'e';
    out[j++] = '-';
    out[j++] = (char)('0' + exponent / 10);
    out[j++] = (char)('0' + exponent % 10);
    return j;
}

/* Whether the rewrites leave a token of the grammar as it is: no one-digit negative exponent (a '-' two bytes
   before its end) and no "0.0000" + digit at its start (after its sign). */
static inline int token_kept(const char *tok, Py_ssize_t len)
{
    if (len >= 2 && tok[len - 2] == '-')
        return 0;
    Py_ssize_t sign = tok[0] == '-';
    return !(len > sign + 6 && memcmp(tok + sign, "0.0000", 6) == 0 && is_digit(tok[sign + 6]));
}

/* The length of the token at tok: up to its ',' or ']', or to end. Sixteen bytes at a time where as many are left. */
#if defined(__SSE2__)
#include <emmintrin.h>
static inline Py_ssize_t token_length(const char *tok, const char *end)
{
    const __m128i commas = _mm_set1_epi8(','), closes = _mm_set1_epi8(']');
    const char *p = tok;
    while (end - p >= 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)p);
        int stop = _mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(x, commas), _mm_cmpeq_epi8(x, closes)));
        if (stop)
            return (p - tok) + __builtin_ctz((unsigned)stop);
        p += 16;
    }
    while (p < end && *p != ',' && *p != ']')
        p++;
    return p - tok;
}
#else
static inline Py_ssize_t token_length(const char *tok, const char *end)
{
    const char *p = tok;
    while (p < end && *p != ',' && *p != ']')
        p++;
    return p - tok;
}
#endif

/* A growing output buffer: PyMem memory, or a bytes object being filled (`bytes`, resized as it grows). */
typedef struct {
    char *data;
    Py_ssize_t size, cap;
    PyObject *bytes;
} outbuf_t;

#define OUT_SLACK 64 /* bytes past what is written that a writer may fill (whole words, then moved on less) */

static int outbuf_grow(outbuf_t *b, Py_ssize_t extra)
{
    Py_ssize_t cap = b->cap ? b->cap : 65536;
    while (cap < b->size + extra + OUT_SLACK)
        cap *= 2;
    if (b->bytes != NULL) {
        if (_PyBytes_Resize(&b->bytes, cap) < 0)
            return -1;
        b->data = PyBytes_AS_STRING(b->bytes);
    } else if (mem_resize(&b->data, cap) < 0) {
        return -1;
    }
    b->cap = cap;
    return 0;
}

/* room for `extra` bytes and OUT_SLACK more */
static inline int outbuf_room(outbuf_t *b, Py_ssize_t extra)
{
    return b->size + extra + OUT_SLACK <= b->cap ? 0 : outbuf_grow(b, extra);
}

/* a cell's fixed text (a number's head or tail): up to 16 bytes kept padded, to be copied as one block */
typedef struct {
    char pad[16];
    const char *text;
    Py_ssize_t n;
} tag_t;

static void tag_init(tag_t *tag, const char *text, Py_ssize_t n)
{
    memset(tag->pad, 0, sizeof tag->pad);
    if (n <= 16)
        memcpy(tag->pad, text, (size_t)n);
    tag->text = text;
    tag->n = n;
}

/* the tag at w (16 bytes of slack past it); returns the place after it */
static inline char *put_tag(char *w, const tag_t *tag)
{
    if (tag->n <= 16)
        memcpy(w, tag->pad, 16);
    else
        memcpy(w, tag->text, (size_t)tag->n);
    return w + tag->n;
}

/* One number of orjson's text at *at (ending at a ',' or ']', or at end) appended to b as repr writes it, between
   head and tail; *at moves to its delimiter. 0, or -1 with an exception set. */
static inline int put_number(outbuf_t *b, const char **at, const char *end, const tag_t *head, const tag_t *tail)
{
    const char *tok = *at;
    Py_ssize_t len = token_length(tok, end);
    /* the padding adds a byte at most; the scientific form is shorter */
    if (outbuf_room(b, head->n + len + 1 + tail->n) < 0)
        return -1;
    char *w = put_tag(b->data + b->size, head);
    if (token_kept(tok, len)) {
        if (len <= 32 && end - tok >= 32) {  /* whole words: the bytes past the token are written over next */
            memcpy(w, tok, 16);
            memcpy(w + 16, tok + 16, 16);
        } else {
            memcpy(w, tok, (size_t)len);
        }
        w += len;
    } else {
        Py_ssize_t k = scientific_token(tok, len, w);
        if (k < 0 && (k = rewrite_token(tok, len, w)) < 0)
            return -1;
        w += k;
    }
    w = put_tag(w, tail);
    b->size = w - b->data;
    *at = tok + len;
    return 0;
}

static inline int put_bytes(outbuf_t *b, const char *data, Py_ssize_t n)
{
    if (outbuf_room(b, n) < 0)
        return -1;
    memcpy(b->data + b->size, data, (size_t)n);
    b->size += n;
    return 0;
}

/* the UTF-8 bytes of a str (an ASCII str's own), NULL with an exception set where it is none */
static inline const char *utf8_of(PyObject *text, Py_ssize_t *n)
{
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "cells must be str");
        return NULL;
    }
    if (PyUnicode_IS_COMPACT_ASCII(text)) {
        *n = PyUnicode_GET_LENGTH(text);
        return (const char *)PyUnicode_DATA(text);
    }
    return PyUnicode_AsUTF8AndSize(text, n);
}

static inline int put_str(outbuf_t *b, PyObject *text)
{
    Py_ssize_t n;
    const char *data = utf8_of(text, &n);
    return data == NULL ? -1 : put_bytes(b, data, n);
}

static int ascii_arg(PyObject *arg, const char **data, Py_ssize_t *n, const char *what)
{
    if (!PyUnicode_Check(arg) || !PyUnicode_IS_ASCII(arg)) {
        PyErr_Format(PyExc_ValueError, "%s must be an ASCII str", what);
        return -1;
    }
    *data = PyUnicode_AsUTF8AndSize(arg, n);
    return *data == NULL ? -1 : 0;
}

static int tag_arg(PyObject *arg, tag_t *tag, const char *what)
{
    const char *text;
    Py_ssize_t n;
    if (ascii_arg(arg, &text, &n, what) < 0)
        return -1;
    tag_init(tag, text, n);
    return 0;
}

/*
 * json_rows_as_repr(text, sep, head, tail) -> list of str: for orjson's text of a 2-d float64 array ("[[a,b],[c,d]]"),
 * per row head + the repr of each number joined by sep + tail, as float_text._python_joined makes it (the reference
 * this is tested against). sep, head and tail are ASCII and hold no ',' and no ']'.
 */
static PyObject *json_rows_as_repr(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    char *text;
    Py_ssize_t n;
    tag_t sep, head, tail, none;
    if (nargs != 4 || PyBytes_AsStringAndSize(args[0], &text, &n) < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "json_rows_as_repr(text: bytes, sep: str, head: str, tail: str)");
        return NULL;
    }
    if (tag_arg(args[1], &sep, "sep") < 0 || tag_arg(args[2], &head, "head") < 0 || tag_arg(args[3], &tail, "tail") < 0)
        return NULL;
    tag_init(&none, "", 0);
    if (n < 4 || text[0] != '[' || text[1] != '[') {
        PyErr_SetString(PyExc_ValueError, "not the text of a 2-d array");
        return NULL;
    }
    PyObject *rows = PyList_New(0);
    outbuf_t row = {NULL, 0, 0, NULL};
    if (rows == NULL)
        return NULL;
    const char *at = text + 1, *end = text + n;
    while (at < end && *at == '[') {  /* a row: '[', numbers separated by ',', ']' */
        at++;
        row.size = 0;
        for (int first = 1;; first = 0) {  /* head + the first number, then sep + each next one */
            if (put_number(&row, &at, end, first ? &head : &sep, &none) < 0)
                goto fail;
            if (at >= end) {
                PyErr_SetString(PyExc_ValueError, "unterminated row");
                goto fail;
            }
            if (*at++ == ']')
                break;
        }
        if (put_bytes(&row, tail.text, tail.n) < 0)
            goto fail;
        PyObject *item = PyUnicode_DecodeASCII(row.data, row.size, "strict");
        if (item == NULL || PyList_Append(rows, item) < 0) {
            Py_XDECREF(item);
            goto fail;
        }
        Py_DECREF(item);
        if (at < end && *at == ',')
            at++;
    }
    PyMem_Free(row.data);
    return rows;
fail:
    PyMem_Free(row.data);
    Py_DECREF(rows);
    return NULL;
}

/*
 * xml_rows(parts, count, piece_rows, styled) -> list of bytes: the <row> elements of `count` sheet rows, UTF-8,
 * piece_rows rows a bytes object; each row "<row>" + each part's cells of the row + "</row>" (xlsx._chunk_xml, whose
 * Python path is the reference this is tested against). A part is
 *   - a list of `count` str: the XML of the part's cells, row by row;
 *   - a block (json, head, tail, places, cells, width): orjson's text of a (count, width) array, each number written
 *     head + its repr + tail, except the cells at `places` (int64 bytes: row * width + column, ascending), which
 *     hold null in `json` and whose XML is the next str of `cells`;
 *   - an int block (ints, head, tail, width): a (count, width) int64 array's bytes, each int written head + its
 *     decimal digits + tail (a row of shared-string indexes; float_text.joined_ints is the reference).
 * `styled`: None or [(row, XML of the row's cells)] ascending, written in place of the parts' cells of that row.
 */
typedef struct {
    PyObject *list;
    const int64_t *ints;  /* an int block's next row */
    const char *at, *end;
    tag_t head, tail;
    Py_ssize_t width, next, n_places, flat;
    const int64_t *places;
    PyObject *cells;
} part_t;

static int part_init(part_t *part, PyObject *spec, Py_ssize_t count)
{
    memset(part, 0, sizeof *part);
    if (PyList_Check(spec)) {
        if (PyList_GET_SIZE(spec) != count) {
            PyErr_SetString(PyExc_ValueError, "a list part must hold a cell text per row");
            return -1;
        }
        part->list = spec;
        return 0;
    }
    char *json, *places;
    Py_ssize_t n, places_n;
    if (PyTuple_Check(spec) && PyTuple_GET_SIZE(spec) == 4) {  /* an int block */
        if (PyBytes_AsStringAndSize(PyTuple_GET_ITEM(spec, 0), &json, &n) < 0 ||
            tag_arg(PyTuple_GET_ITEM(spec, 1), &part->head, "head") < 0 ||
            tag_arg(PyTuple_GET_ITEM(spec, 2), &part->tail, "tail") < 0 ||
            (part->width = PyLong_AsSsize_t(PyTuple_GET_ITEM(spec, 3))) < 1)
            goto bad_spec;
        if (n != count * part->width * (Py_ssize_t)sizeof(int64_t)) {
            PyErr_SetString(PyExc_ValueError, "an int block must hold count rows of width int64");
            return -1;
        }
        part->ints = (const int64_t *)json;
        return 0;
    }
    if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) != 6 ||
        PyBytes_AsStringAndSize(PyTuple_GET_ITEM(spec, 0), &json, &n) < 0 ||
        tag_arg(PyTuple_GET_ITEM(spec, 1), &part->head, "head") < 0 ||
        tag_arg(PyTuple_GET_ITEM(spec, 2), &part->tail, "tail") < 0 ||
        PyBytes_AsStringAndSize(PyTuple_GET_ITEM(spec, 3), &places, &places_n) < 0 ||
        !PyList_Check(PyTuple_GET_ITEM(spec, 4)) || (part->width = PyLong_AsSsize_t(PyTuple_GET_ITEM(spec, 5))) < 1)
        goto bad_spec;
    part->cells = PyTuple_GET_ITEM(spec, 4);
    part->places = (const int64_t *)places;
    part->n_places = places_n / (Py_ssize_t)sizeof(int64_t);
    if (places_n % (Py_ssize_t)sizeof(int64_t) || part->n_places != PyList_GET_SIZE(part->cells)) {
        PyErr_SetString(PyExc_ValueError, "a block needs a cell per place");
        return -1;
    }
    if (n < 2 || json[0] != '[' || json[n - 1] != ']') {
        PyErr_SetString(PyExc_ValueError, "not the text of a 2-d array");
        return -1;
    }
    part->at = json + 1;
    part->end = json + n;
    return 0;
bad_spec:
    if (!PyErr_Occurred())
        PyErr_SetString(PyExc_TypeError, "a part is a list of str, (json, head, tail, places, cells, width) or "
                                         "(ints, head, tail, width)");
    return -1;
}

/* an int block's cells of its next row, appended to b (emit) or passed over */
static int put_int_row(outbuf_t *b, part_t *part, int emit)
{
    const int64_t *ints = part->ints;
    part->ints += part->width;
    if (!emit)
        return 0;
    /* each cell: head, at most 20 digits and a sign, tail */
    if (outbuf_room(b, part->width * (part->head.n + 21 + part->tail.n)) < 0)
        return -1;
    char *w = b->data + b->size;
    for (Py_ssize_t k = 0; k < part->width; k++) {
        w = put_tag(w, &part->head);
        int64_t value = ints[k];
        uint64_t magnitude = value < 0 ? 0 - (uint64_t)value : (uint64_t)value;
        char digits[20];
        int m = 0;
        do {
            digits[m++] = (char)('0' + magnitude % 10);
            magnitude /= 10;
        } while (magnitude);
        if (value < 0)
            *w++ = '-';
        while (m)
            *w++ = digits[--m];
        w = put_tag(w, &part->tail);
    }
    b->size = w - b->data;
    return 0;
}

/* a block's cells of its next row, appended to b (emit) or passed over */
static int put_block_row(outbuf_t *b, part_t *part, int emit)
{
    const char *at = part->at, *end = part->end;
    if (at >= end || *at != '[')
        goto short_text;
    at++;
    for (Py_ssize_t k = 0; k < part->width; k++, part->flat++) {
        if (part->next < part->n_places && part->places[part->next] == part->flat) {
            Py_ssize_t len = token_length(at, end);
            if (len != 4 || memcmp(at, "null", 4) != 0) {
                PyErr_SetString(PyExc_ValueError, "a block's place holds no null");
                return -1;
            }
            if (emit && put_str(b, PyList_GET_ITEM(part->cells, part->next)) < 0)
                return -1;
            at += len;
            part->next++;
        } else if (emit) {
            if (put_number(b, &at, end, &part->head, &part->tail) < 0)
                return -1;
        } else {
            at += token_length(at, end);
        }
        if (at >= end || *at != (k + 1 < part->width ? ',' : ']'))
            goto short_text;
        at++;
    }
    if (at < end && *at == ',')
        at++;
    part->at = at;
    return 0;
short_text:
    PyErr_SetString(PyExc_ValueError, "a block's text does not hold count rows of width numbers");
    return -1;
}

/* the bytes filled so far appended to `pieces` (resized to their length), and a new one begun of the same room */
static int put_piece(PyObject *pieces, outbuf_t *b)
{
    Py_ssize_t cap = b->cap;
    if (_PyBytes_Resize(&b->bytes, b->size) < 0)
        return -1;
    int failed = PyList_Append(pieces, b->bytes);
    Py_CLEAR(b->bytes);
    if (failed)
        return -1;
    if ((b->bytes = PyBytes_FromStringAndSize(NULL, cap)) == NULL)
        return -1;
    b->data = PyBytes_AS_STRING(b->bytes);
    b->size = 0;
    return 0;
}

static PyObject *xml_rows(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    Py_ssize_t count, piece_rows;
    if (nargs != 4 || !PyList_Check(args[0]) || (count = PyLong_AsSsize_t(args[1])) < 0 ||
        (piece_rows = PyLong_AsSsize_t(args[2])) < 1 || (args[3] != Py_None && !PyList_Check(args[3]))) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "xml_rows(parts: list, count: int >= 0, piece_rows: int >= 1, styled)");
        return NULL;
    }
    PyObject *specs = args[0], *styled = args[3] == Py_None ? NULL : args[3];
    Py_ssize_t n_parts = PyList_GET_SIZE(specs), n_styled = styled ? PyList_GET_SIZE(styled) : 0, s = 0;
    part_t *parts = PyMem_Calloc((size_t)n_parts + 1, sizeof(part_t));
    outbuf_t b = {NULL, 0, 65536, PyBytes_FromStringAndSize(NULL, 65536)};
    PyObject *pieces = PyList_New(0);
    if (parts == NULL || pieces == NULL || b.bytes == NULL) {
        if (parts == NULL)
            PyErr_NoMemory();
        goto fail;
    }
    b.data = PyBytes_AS_STRING(b.bytes);
    for (Py_ssize_t j = 0; j < n_parts; j++)
        if (part_init(&parts[j], PyList_GET_ITEM(specs, j), count) < 0)
            goto fail;
    Py_ssize_t next_styled = -1;
    PyObject *styled_text = NULL;
    for (Py_ssize_t row = 0; row < count; row++) {
        if (next_styled < row && s < n_styled) {  /* the next styled row */
            PyObject *item = PyList_GET_ITEM(styled, s++);
            if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2 ||
                (next_styled = PyLong_AsSsize_t(PyTuple_GET_ITEM(item, 0))) < row) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_ValueError, "styled: (row, text) in ascending rows below count");
                goto fail;
            }
            styled_text = PyTuple_GET_ITEM(item, 1);
        }
        int plain = next_styled != row;
        if (put_bytes(&b, "<row>", 5) < 0 || (!plain && put_str(&b, styled_text) < 0))
            goto fail;
        for (Py_ssize_t j = 0; j < n_parts; j++) {
            part_t *part = &parts[j];
            if (part->list != NULL) {
                if (plain && put_str(&b, PyList_GET_ITEM(part->list, row)) < 0)
                    goto fail;
            } else if (part->ints != NULL) {
                if (put_int_row(&b, part, plain) < 0)
                    goto fail;
            } else if (put_block_row(&b, part, plain) < 0) {
                goto fail;
            }
        }
        if (put_bytes(&b, "</row>", 6) < 0)
            goto fail;
        if (((row + 1) % piece_rows == 0 || row + 1 == count) && put_piece(pieces, &b) < 0)
            goto fail;
    }
    if (s < n_styled || next_styled >= count) {
        PyErr_SetString(PyExc_ValueError, "styled: (row, text) in ascending rows below count");
        goto fail;
    }
    for (Py_ssize_t j = 0; j < n_parts; j++) {
        part_t *part = &parts[j];
        if (part->list == NULL && part->ints == NULL &&
            (part->next != part->n_places || part->at + 1 != part->end || *part->at != ']')) {
            PyErr_SetString(PyExc_ValueError, "a block holds more than count rows or places past them");
            goto fail;
        }
    }
    PyMem_Free(parts);
    Py_XDECREF(b.bytes);
    return pieces;
fail:
    PyMem_Free(parts);
    Py_XDECREF(b.bytes);
    Py_XDECREF(pieces);
    return NULL;
}

/*
 * cell_kinds(values) -> int: the kinds of the items of a list or tuple, one bit each: 1 str, 2 None, 4 float, 8 int,
 * 16 bool, 32 anything else (exact types: a subclass of str or float is "anything else"), 0 for none. What
 * {type(v) for v in values} tells the xlsx writer (xlsx._kinds, whose Python form is the reference), without a
 * Python call per item.
 */
static PyObject *cell_kinds(PyObject *Py_UNUSED(self), PyObject *arg)
{
    if (!PyList_Check(arg) && !PyTuple_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "cell_kinds(values: list or tuple)");
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(arg);
    PyObject **items = PySequence_Fast_ITEMS(arg);
    long kinds = 0;
    PyTypeObject *last = NULL;  /* runs of one type are the usual case */
    for (Py_ssize_t i = 0; i < n; i++) {
        PyTypeObject *type = Py_TYPE(items[i]);
        if (type == last)
            continue;
        last = type;
        if (type == &PyUnicode_Type)
            kinds |= 1;
        else if (items[i] == Py_None)
            kinds |= 2;
        else if (type == &PyFloat_Type)
            kinds |= 4;
        else if (type == &PyLong_Type)
            kinds |= 8;
        else if (type == &PyBool_Type)
            kinds |= 16;
        else
            kinds |= 32;
    }
    return PyLong_FromLong(kinds);
}

/*
 * first_places(keys) -> (firsts, inverse): for a buffer of int64 keys, the place of the first occurrence of each
 * distinct key, in the order they first occur, and per key the index of its own in firsts (both int64 bytes).
 * What numpy.unique(keys, return_index=True, return_inverse=True) tells (its uniques in value order instead), by
 * hashing: the xlsx writer formats each distinct value once (xlsx._shared_text_block, whose numpy form is the
 * reference).
 */
static PyObject *first_places(PyObject *Py_UNUSED(self), PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *result = NULL, *firsts = NULL, *inverse = NULL;
    int64_t *table = NULL;
    if (view.len % (Py_ssize_t)sizeof(int64_t)) {
        PyErr_SetString(PyExc_ValueError, "first_places(keys): a buffer of int64");
        goto done;
    }
    Py_ssize_t n = view.len / (Py_ssize_t)sizeof(int64_t), size = 16, distinct = 0;
    while (size < 2 * n)
        size *= 2;
    const int64_t *keys = (const int64_t *)view.buf;
    table = PyMem_Malloc((size_t)size * sizeof(int64_t));  /* slot -> index into firsts, -1 empty */
    firsts = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(int64_t));
    inverse = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(int64_t));
    if (table == NULL || firsts == NULL || inverse == NULL) {
        if (table == NULL)
            PyErr_NoMemory();
        goto done;
    }
    memset(table, 0xff, (size_t)size * sizeof(int64_t));
    int64_t *first = (int64_t *)PyBytes_AS_STRING(firsts), *of = (int64_t *)PyBytes_AS_STRING(inverse);
    int shift = 64;
    for (Py_ssize_t s = size; s > 1; s >>= 1)
        shift--;
    for (Py_ssize_t i = 0; i < n; i++) {
        uint64_t slot = ((uint64_t)keys[i] * 0x9E3779B97F4A7C15ULL) >> shift;
        for (;; slot = (slot + 1) & (uint64_t)(size - 1)) {
            int64_t at = table[slot];
            if (at < 0) {  /* a new key */
                table[slot] = distinct;
                first[distinct] = i;
                of[i] = distinct++;
                break;
            }
            if (keys[first[at]] == keys[i]) {
                of[i] = at;
                break;
            }
        }
    }
    if (_PyBytes_Resize(&firsts, distinct * (Py_ssize_t)sizeof(int64_t)) < 0)
        goto done;
    result = PyTuple_Pack(2, firsts, inverse);
done:
    PyBuffer_Release(&view);
    PyMem_Free(table);
    Py_XDECREF(firsts);
    Py_XDECREF(inverse);
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
    {"split_value_numbers", (PyCFunction)(void (*)(void))split_value_numbers, METH_FASTCALL,
     "split_value_numbers(data, separator) -> re.split(separator + number, data): text and numbers alternating"},
    {"fill_numbers", (PyCFunction)(void (*)(void))fill_numbers, METH_FASTCALL,
     "fill_numbers(data, segments) -> '[n0,n1,...]' of the number tokens between the segments, or None"},
    {"json_rows_as_repr", (PyCFunction)(void (*)(void))json_rows_as_repr, METH_FASTCALL,
     "json_rows_as_repr(orjson_bytes_2d, sep, head, tail) -> per row head + the reprs joined by sep + tail"},
    {"first_places", (PyCFunction)first_places, METH_O,
     "first_places(int64 keys) -> (first place of each distinct key, index of each key's in them), int64 bytes"},
    {"cell_kinds", (PyCFunction)cell_kinds, METH_O, "cell_kinds(values) -> bits of the exact types of the items"},
    {"xml_rows", (PyCFunction)(void (*)(void))xml_rows, METH_FASTCALL,
     "xml_rows(parts, count, piece_rows, styled) -> the sheet's <row> elements, UTF-8, piece_rows rows a bytes"},
    {"json_floats_as_repr", (PyCFunction)json_floats_as_repr, METH_O,
     "json_floats_as_repr(orjson_bytes) -> str: orjson's text of a float array with every number as its repr"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_pair_kernels", "One-pass error metrics of a device output against its bench.", -1,
    methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__pair_kernels(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddIntConstant(m, "FLOAT16", KIND_FLOAT16) < 0 ||
        PyModule_AddIntConstant(m, "BFLOAT16", KIND_BFLOAT16) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
