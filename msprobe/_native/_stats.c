/*
 * One pass over a dense float32/float64 buffer: maximum, minimum, sum and sum of squares.
 *
 * The dump's statistics need Max, Min, Mean and Norm of every tensor. Framework kernels give them in
 * three passes (aminmax, sum, dot); this computes all four in one pass, sums in float32 blocks then in
 * double (more accurate than a float32 dot product or a float32 cascade sum).
 *
 *     minmax_sumsq(address, count, itemsize) -> (max, min, sumsq)
 *     float_stats(address, count, itemsize, total=None) -> (max, min, mean, norm)
 *     bucket_stats(address, count, itemsize, bounds, direction_address=None)
 *         -> (max, min, sumsq, zeros, (count <= bound for each bound)); writes element > 0 as bytes (grad_probe)
 *     fingerprint(address, nbytes) -> (xor, weighted sum) of the buffer's 64-bit words (summary_mode "xor")
 *     float_stats_strided(address, itemsize, sizes, strides), fingerprint_strided(address, itemsize, sizes, strides)
 *         -> the same of a strided view (strides in elements, >= 0) taken in C order, as of its dense copy
 *     threads(count=None, min_elements=None) -> (count, min_elements, buffers pooled) in force before the call
 *
 * address: the first element (an int from data_ptr() / ndarray.ctypes.data); count >= 1 elements,
 * contiguous; itemsize 4 (float32), 8 (float64), FLOAT16 (2) or BFLOAT16 (258), 16-bit floats being widened to
 * float32 exactly. The caller keeps the memory alive and unchanged for the
 * call (the GIL is released while it runs over 64 K elements or more; float32 / 16-bit buffers of 128 K elements
 * or more are reduced on a small thread pool, with the one-thread results bit for bit, see "long ... buffers"
 * below; threads() sets it). Any NaN gives NaN for max and min
 * (and sumsq), as torch.aminmax and numpy do. The same pass sums the elements (float32 blocks of 16 per
 * lane, then double), so float_stats gives Mean without another pass; given `total` (a framework's own
 * sum) it divides that instead, in the buffer's precision. For float32 the mean and the norm sqrt(sumsq)
 * are rounded once to float32 (correctly: double carries more than twice float32's bits); beyond float32's
 * range they are inf, as float32 arithmetic gives.
 *
 * Built as an optional extension (msprobe._native._stats): without a C compiler the package falls back to framework
 * kernels. Buffers in, numbers or bytes out: no Python object is read but the arguments' ints, floats and tuples.
 */
#include "common.h"

typedef struct {
    double max, min, sumsq, sum;
    int has_nan;
} stats_t;

#define LOAD_SAME(p, i) ((p)[i])
#define LOAD_BF16(p, i) bf16_to_float((p)[i])
#define LOAD_F16(p, i) f16_to_float((p)[i])

/* portable versions, one per element type: four independent accumulators so the compiler can keep
 * them in registers; every element is widened to double before it is squared or added */
#define SCALAR_KERNEL(name, in_type, type, LOAD)                                                        \
    static void name(const void *data, Py_ssize_t n, stats_t *out)                                      \
    {                                                                                                   \
        const in_type *p = (const in_type *)data;                                                       \
        type hi = LOAD(p, 0), lo = LOAD(p, 0);                                                          \
        double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0, t0 = 0.0, t1 = 0.0;                             \
        int nan = 0;                                                                                    \
        Py_ssize_t i = 0;                                                                               \
        for (; i + 4 <= n; i += 4) {                                                                    \
            type a = LOAD(p, i), b = LOAD(p, i + 1), c = LOAD(p, i + 2), d = LOAD(p, i + 3);            \
            nan |= (a != a) | (b != b) | (c != c) | (d != d);                                           \
            hi = a > hi ? a : hi; hi = b > hi ? b : hi; hi = c > hi ? c : hi; hi = d > hi ? d : hi;     \
            lo = a < lo ? a : lo; lo = b < lo ? b : lo; lo = c < lo ? c : lo; lo = d < lo ? d : lo;     \
            s0 += (double)a * a; s1 += (double)b * b; s2 += (double)c * c; s3 += (double)d * d;         \
            t0 += (double)a + (double)b; t1 += (double)c + (double)d;                                   \
        }                                                                                               \
        for (; i < n; i++) {                                                                            \
            type a = LOAD(p, i);                                                                        \
            nan |= (a != a);                                                                            \
            hi = a > hi ? a : hi;                                                                       \
            lo = a < lo ? a : lo;                                                                       \
            s0 += (double)a * a;                                                                        \
            t0 += (double)a;                                                                            \
        }                                                                                               \
        out->max = hi; out->min = lo; out->sumsq = (s0 + s1) + (s2 + s3); out->sum = t0 + t1;           \
        out->has_nan = nan;                                                                             \
    }

SCALAR_KERNEL(f32_scalar, float, float, LOAD_SAME)
SCALAR_KERNEL(f64_scalar, double, double, LOAD_SAME)
SCALAR_KERNEL(bf16_scalar, uint16_t, float, LOAD_BF16)
SCALAR_KERNEL(f16_scalar, uint16_t, float, LOAD_F16)

#ifdef MSPROBE_X86
/* the largest / smallest of 8 lanes */
#define HORIZONTAL8(name, packed, single)                                                        \
    __attribute__((target("avx2,fma"))) static float name(__m256 v)                              \
    {                                                                                            \
        __m128 m = packed(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));               \
        m = packed(m, _mm_movehl_ps(m, m));                                                      \
        return _mm_cvtss_f32(single(m, _mm_shuffle_ps(m, m, 1)));                                \
    }
HORIZONTAL8(hmax8, _mm_max_ps, _mm_max_ss)
HORIZONTAL8(hmin8, _mm_min_ps, _mm_min_ss)

__attribute__((target("avx2,fma")))
static double hsum4d(__m256d v)
{
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

/* 16 floats per round: two max and two min chains, elements and squares summed in float32 over blocks of 256
 * elements (each of the 16 lanes then adds 16 squares: relative error ~1e-8, far below a float32 dot
 * product over the whole tensor) before the block sums are added in double; squares beyond float32
 * overflow to inf, as in torch's float32 norm. NaN needs no test of its own: a NaN element
 * makes the sum of squares NaN (squares are never negative, so inf never turns into NaN). */
#define BLOCK 256
/* one thread's max / min lanes over its blocks */
typedef struct {
    __m256 hi0, hi1, lo0, lo1;
} part_t;
#define AVX2_FLOAT_KERNEL(name, in_type, target_list, LOAD8, LOAD)                                    \
    __attribute__((target(target_list))) static void name(const void *data, Py_ssize_t n, stats_t *out) \
    {                                                                                                 \
        const in_type *p = (const in_type *)data;                                                     \
        Py_ssize_t i = 0;                                                                             \
        __m256 first = _mm256_set1_ps(LOAD(p, 0));                                                    \
        __m256 hi0 = first, hi1 = first, lo0 = first, lo1 = first;                                    \
        __m256d total = _mm256_setzero_pd(), plain = _mm256_setzero_pd();                             \
        while (i + 16 <= n) {                                                                         \
            Py_ssize_t stop = i + BLOCK <= n ? i + BLOCK : n - (n - i) % 16;                          \
            __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();                                \
            __m256 t0 = _mm256_setzero_ps(), t1 = _mm256_setzero_ps();                                \
            for (; i < stop; i += 16) {                                                               \
                __m256 a = LOAD8(p + i), b = LOAD8(p + i + 8);                                        \
                hi0 = _mm256_max_ps(hi0, a); hi1 = _mm256_max_ps(hi1, b);                             \
                lo0 = _mm256_min_ps(lo0, a); lo1 = _mm256_min_ps(lo1, b);                             \
                s0 = _mm256_fmadd_ps(a, a, s0); s1 = _mm256_fmadd_ps(b, b, s1);                       \
                t0 = _mm256_add_ps(t0, a); t1 = _mm256_add_ps(t1, b);                                 \
            }                                                                                         \
            __m256 s = _mm256_add_ps(s0, s1), t = _mm256_add_ps(t0, t1);                              \
            total = _mm256_add_pd(total, _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(s)),    \
                                                       _mm256_cvtps_pd(_mm256_extractf128_ps(s, 1)))); \
            plain = _mm256_add_pd(plain, _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(t)),    \
                                                       _mm256_cvtps_pd(_mm256_extractf128_ps(t, 1)))); \
        }                                                                                             \
        float hi = hmax8(_mm256_max_ps(hi0, hi1)), lo = hmin8(_mm256_min_ps(lo0, lo1));               \
        double sumsq = hsum4d(total), sum = hsum4d(plain);                                            \
        for (; i < n; i++) {                                                                          \
            float a = LOAD(p, i);                                                                     \
            hi = a > hi ? a : hi;                                                                     \
            lo = a < lo ? a : lo;                                                                     \
            sumsq += (double)a * a;                                                                   \
            sum += a;                                                                                 \
        }                                                                                             \
        out->max = hi; out->min = lo; out->sumsq = sumsq; out->sum = sum; out->has_nan = sumsq != sumsq; \
    }                                                                                                 \
    /* blocks [first, last) of the loop above (block k: elements [BLOCK k, min(BLOCK (k + 1), n16)), n16 the \
     * elements in whole rounds of 16): each block's two double vectors go to sq[k] / sm[k], max / min lanes \
     * start from -inf / +inf (see combine_parts) */                                                  \
    __attribute__((target(target_list))) static void name##_blocks(const void *data, Py_ssize_t n16,   \
                                                                   Py_ssize_t first, Py_ssize_t last,  \
                                                                   part_t *part, __m256d *sq, __m256d *sm) \
    {                                                                                                 \
        const in_type *p = (const in_type *)data;                                                     \
        __m256 hi0 = _mm256_set1_ps(-INFINITY), hi1 = hi0, lo0 = _mm256_set1_ps(INFINITY), lo1 = lo0;  \
        for (Py_ssize_t k = first; k < last; k++) {                                                   \
            Py_ssize_t i = k * BLOCK, stop = i + BLOCK <= n16 ? i + BLOCK : n16;                      \
            __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();                                \
            __m256 t0 = _mm256_setzero_ps(), t1 = _mm256_setzero_ps();                                \
            for (; i < stop; i += 16) {                                                               \
                __m256 a = LOAD8(p + i), b = LOAD8(p + i + 8);                                        \
                hi0 = _mm256_max_ps(hi0, a); hi1 = _mm256_max_ps(hi1, b);                             \
                lo0 = _mm256_min_ps(lo0, a); lo1 = _mm256_min_ps(lo1, b);                             \
                s0 = _mm256_fmadd_ps(a, a, s0); s1 = _mm256_fmadd_ps(b, b, s1);                       \
                t0 = _mm256_add_ps(t0, a); t1 = _mm256_add_ps(t1, b);                                 \
            }                                                                                         \
            __m256 s = _mm256_add_ps(s0, s1), t = _mm256_add_ps(t0, t1);                              \
            sq[k] = _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(s)),                         \
                                  _mm256_cvtps_pd(_mm256_extractf128_ps(s, 1)));                      \
            sm[k] = _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(t)),                         \
                                  _mm256_cvtps_pd(_mm256_extractf128_ps(t, 1)));                      \
        }                                                                                             \
        part->hi0 = hi0; part->hi1 = hi1; part->lo0 = lo0; part->lo1 = lo1;                           \
    }                                                                                                 \
    /* the whole buffer from the parts: the same operations in the same order as name() */            \
    __attribute__((target(target_list))) static void name##_combine(const void *data, Py_ssize_t n,    \
                                                                    const part_t *parts, int nparts,  \
                                                                    const __m256d *sq, const __m256d *sm, \
                                                                    Py_ssize_t nblocks, stats_t *out)  \
    {                                                                                                 \
        const in_type *p = (const in_type *)data;                                                     \
        __m256 first = _mm256_set1_ps(LOAD(p, 0));                                                    \
        __m256 hi0 = first, hi1 = first, lo0 = first, lo1 = first;                                    \
        __m256d total = _mm256_setzero_pd(), plain = _mm256_setzero_pd();                             \
        for (int c = 0; c < nparts; c++) {                                                            \
            hi0 = _mm256_max_ps(hi0, parts[c].hi0); hi1 = _mm256_max_ps(hi1, parts[c].hi1);           \
            lo0 = _mm256_min_ps(lo0, parts[c].lo0); lo1 = _mm256_min_ps(lo1, parts[c].lo1);           \
        }                                                                                             \
        for (Py_ssize_t k = 0; k < nblocks; k++) {                                                    \
            total = _mm256_add_pd(total, sq[k]);                                                      \
            plain = _mm256_add_pd(plain, sm[k]);                                                      \
        }                                                                                             \
        float hi = hmax8(_mm256_max_ps(hi0, hi1)), lo = hmin8(_mm256_min_ps(lo0, lo1));               \
        double sumsq = hsum4d(total), sum = hsum4d(plain);                                            \
        for (Py_ssize_t i = n - n % 16; i < n; i++) {                                                 \
            float a = LOAD(p, i);                                                                     \
            hi = a > hi ? a : hi;                                                                     \
            lo = a < lo ? a : lo;                                                                     \
            sumsq += (double)a * a;                                                                   \
            sum += a;                                                                                 \
        }                                                                                             \
        out->max = hi; out->min = lo; out->sumsq = sumsq; out->sum = sum; out->has_nan = sumsq != sumsq; \
    }

#define LOAD8_F32(q) _mm256_loadu_ps(q)
#define LOAD8_BF16(q) _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(q))), 16))
#define LOAD8_F16(q) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(q)))
AVX2_FLOAT_KERNEL(f32_avx2, float, "avx2,fma", LOAD8_F32, LOAD_SAME)
AVX2_FLOAT_KERNEL(bf16_avx2, uint16_t, "avx2,fma", LOAD8_BF16, LOAD_BF16)
AVX2_FLOAT_KERNEL(f16_avx2, uint16_t, "avx2,fma,f16c", LOAD8_F16, LOAD_F16)

__attribute__((target("avx2,fma")))
static void f64_avx2(const void *data, Py_ssize_t n, stats_t *out)
{
    const double *p = (const double *)data;
    Py_ssize_t i = 0;
    __m256d first = _mm256_set1_pd(p[0]);
    __m256d hi0 = first, hi1 = first, lo0 = first, lo1 = first;
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd(), t0 = _mm256_setzero_pd(), t1 = _mm256_setzero_pd();
    for (; i + 8 <= n; i += 8) {
        __m256d a = _mm256_loadu_pd(p + i), b = _mm256_loadu_pd(p + i + 4);
        hi0 = _mm256_max_pd(hi0, a); hi1 = _mm256_max_pd(hi1, b);
        lo0 = _mm256_min_pd(lo0, a); lo1 = _mm256_min_pd(lo1, b);
        s0 = _mm256_fmadd_pd(a, a, s0); s1 = _mm256_fmadd_pd(b, b, s1);
        t0 = _mm256_add_pd(t0, a); t1 = _mm256_add_pd(t1, b);
    }
    double lanes_hi[4], lanes_lo[4];
    _mm256_storeu_pd(lanes_hi, _mm256_max_pd(hi0, hi1));
    _mm256_storeu_pd(lanes_lo, _mm256_min_pd(lo0, lo1));
    double hi = lanes_hi[0], lo = lanes_lo[0];
    for (int k = 1; k < 4; k++) {
        hi = lanes_hi[k] > hi ? lanes_hi[k] : hi;
        lo = lanes_lo[k] < lo ? lanes_lo[k] : lo;
    }
    double sumsq = hsum4d(_mm256_add_pd(s0, s1)), sum = hsum4d(_mm256_add_pd(t0, t1));
    for (; i < n; i++) {
        double a = p[i];
        hi = a > hi ? a : hi;
        lo = a < lo ? a : lo;
        sumsq += a * a;
        sum += a;
    }
    out->max = hi; out->min = lo; out->sumsq = sumsq; out->sum = sum; out->has_nan = sumsq != sumsq;
}


/* ---- long float32 / float16 / bfloat16 buffers on several threads --------------------------------------------
 * The hook that calls the kernel runs while the framework's own threads wait for the next op, so a long buffer
 * (THREAD_MIN elements or more) is cut into chunks of whole blocks that the calling thread and the pool's workers
 * take in any order (an atomic counter): a worker that is slow to wake (a loaded machine) only takes fewer chunks,
 * the caller never waits for one to start. Each block's sums are kept and added in block order afterwards, and
 * the max / min lanes are combined in chunk order, so the results are those of the one-thread loop bit for bit,
 * whatever the number of threads (tests/core/test_fast_stats.py). */
#if defined(__unix__) || defined(__APPLE__)
#define MSPROBE_THREADS 1
#include <pthread.h>
#include <unistd.h>

#define CHUNK_BLOCKS 128               /* 32 K elements a chunk */
#define MAX_CHUNKS 4096
#define MAX_THREADS 8

typedef void (*blocks_t)(const void *, Py_ssize_t, Py_ssize_t, Py_ssize_t, part_t *, __m256d *, __m256d *);

static void fingerprint_words(const uint8_t *p, Py_ssize_t words, uint64_t *x, uint64_t *s, uint64_t *plain);

typedef struct {
    blocks_t blocks;
    const void *data;
    Py_ssize_t n16, nblocks;
    int nchunks;
    int next;                          /* the next chunk to take (atomic) */
    part_t *parts;
    __m256d *sq, *sm;
    Py_ssize_t chunk_blocks;           /* blocks a chunk */
    Py_ssize_t itemsize;               /* bytes an element (for the fingerprint) */
    uint64_t *fx, *fs, *fp;            /* each chunk's fingerprint sums, or NULL: statistics only */
} job_t;

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_wake = PTHREAD_COND_INITIALIZER, pool_left = PTHREAD_COND_INITIALIZER;
static job_t *pool_job;                /* the job being run, NULL once its caller has all chunks done */
static unsigned long pool_round;       /* counts jobs: a worker joins each at most once */
static int pool_busy;                  /* workers inside the current job */
static int pool_started;               /* workers running */
static int pool_threads = -1;          /* threads per long buffer, caller included (-1: not decided yet) */
static Py_ssize_t thread_min = 1 << 17;
static Py_ssize_t pooled_runs;         /* buffers reduced on the pool (threads() reports it) */

static void run_chunks(job_t *job)
{
    int c;
    while ((c = __atomic_fetch_add(&job->next, 1, __ATOMIC_RELAXED)) < job->nchunks) {
        Py_ssize_t first = (Py_ssize_t)c * job->chunk_blocks, last = first + job->chunk_blocks;
        if (last > job->nblocks)
            last = job->nblocks;
        job->blocks(job->data, job->n16, first, last, &job->parts[c], job->sq, job->sm);
        if (job->fx != NULL) {  /* the chunk's bytes again while they are in the cache: whole words (see digest) */
            Py_ssize_t start = first * BLOCK, stop = last * BLOCK < job->n16 ? last * BLOCK : job->n16;
            fingerprint_words((const uint8_t *)job->data + start * job->itemsize,
                              (stop - start) * job->itemsize / 8, &job->fx[c], &job->fs[c], &job->fp[c]);
        }
    }
}

static void *pool_worker(void *unused)
{
    (void)unused;
    unsigned long seen = 0;
    pthread_mutex_lock(&pool_lock);
    for (;;) {
        while (pool_job == NULL || pool_round == seen)
            pthread_cond_wait(&pool_wake, &pool_lock);
        seen = pool_round;
        job_t *job = pool_job;
        pool_busy++;
        pthread_mutex_unlock(&pool_lock);
        run_chunks(job);
        pthread_mutex_lock(&pool_lock);
        if (--pool_busy == 0)
            pthread_cond_broadcast(&pool_left);  /* every caller waiting (two threads may run jobs) */
    }
    return NULL;
}

/* a forked child has none of the parent's workers (and its locks may have been held by one) */
static void pool_after_fork(void)
{
    pthread_mutex_init(&pool_lock, NULL);
    pthread_cond_init(&pool_wake, NULL);
    pthread_cond_init(&pool_left, NULL);
    pool_job = NULL;
    pool_busy = pool_started = 0;
}

/* threads for a long buffer: MSPROBE_STATS_THREADS, else the CPUs this process may use, at most 2 (the framework's
 * threads are idle during the hook, other processes may not be) */
static int decide_threads(void)
{
    const char *setting = getenv("MSPROBE_STATS_THREADS");
    long wanted = setting != NULL && *setting ? strtol(setting, NULL, 10) : 2;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
#ifdef __linux__
    cpu_set_t mask;
    if (sched_getaffinity(0, sizeof mask, &mask) == 0)
        cpus = CPU_COUNT(&mask);
#endif
    if (wanted > cpus)
        wanted = cpus;
    if (wanted > MAX_THREADS)
        wanted = MAX_THREADS;
    pthread_atfork(NULL, NULL, pool_after_fork);
    return wanted < 1 ? 1 : (int)wanted;
}

/* start the workers still missing (called without the GIL, under no lock); how many run */
static int pool_start(void)
{
    pthread_mutex_lock(&pool_lock);
    while (pool_started < pool_threads - 1) {
        pthread_t thread;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&attr, 1 << 16);
        int failed = pthread_create(&thread, &attr, pool_worker, NULL);
        pthread_attr_destroy(&attr);
        if (failed) {
            pool_threads = pool_started + 1;  /* keep what runs */
            break;
        }
        pool_started++;
    }
    int started = pool_started;
    pthread_mutex_unlock(&pool_lock);
    return started;
}

/* a job's chunks taken by the caller, and by the pool's workers too when `on_pool` */
static void run_job(job_t *job, int on_pool)
{
    if (!on_pool) {
        run_chunks(job);
        return;
    }
    pthread_mutex_lock(&pool_lock);
    pool_job = job;
    pool_round++;
    pthread_cond_broadcast(&pool_wake);
    pthread_mutex_unlock(&pool_lock);
    run_chunks(job);
    pthread_mutex_lock(&pool_lock);
    pool_job = NULL;                   /* a worker that wakes from now on finds nothing */
    while (pool_busy > 0)
        pthread_cond_wait(&pool_left, &pool_lock);
    pthread_mutex_unlock(&pool_lock);
    __atomic_fetch_add(&pooled_runs, 1, __ATOMIC_RELAXED);
}

static const blocks_t pooled_blocks[] = {f32_avx2_blocks, NULL, f16_avx2_blocks, bf16_avx2_blocks};
static void (*const pooled_combine[])(const void *, Py_ssize_t, const part_t *, int, const __m256d *,
                                      const __m256d *, Py_ssize_t, stats_t *) = {
    f32_avx2_combine, NULL, f16_avx2_combine, bf16_avx2_combine};

/* the blocks kernel of element kind `kind` over chunks of `chunk_blocks` blocks (on the pool when `on_pool`), then the
   one-thread combine: the one-thread kernel's statistics bit for bit; with `itemsize` > 0 each chunk's bytes are
   fingerprinted right after its statistics, the parts combined by their word offset into (x, s) of the words of the
   first n16 elements (fingerprint_view's rule). 0, or -1 when there is no blocks kernel, fewer than two chunks or no
   memory. */
static int blocked_pass(int kind, const void *data, Py_ssize_t n, Py_ssize_t chunk_blocks, Py_ssize_t itemsize,
                        int on_pool, stats_t *out, uint64_t *x_out, uint64_t *s_out)
{
    blocks_t blocks = pooled_blocks[kind];
    Py_ssize_t n16 = n - n % 16, nblocks = (n16 + BLOCK - 1) / BLOCK;
    Py_ssize_t nchunks = (nblocks + chunk_blocks - 1) / chunk_blocks;
    if (blocks == NULL || nchunks < 2 || nchunks > INT_MAX / 2)
        return -1;
    __m256d *sums = aligned_alloc(32, sizeof(__m256d) * 2 * (size_t)nblocks);
    part_t *parts = aligned_alloc(32, sizeof(part_t) * (size_t)nchunks);
    uint64_t *words = itemsize > 0 ? malloc(sizeof(uint64_t) * 3 * (size_t)nchunks) : NULL;
    if (sums == NULL || parts == NULL || (itemsize > 0 && words == NULL)) {
        free(sums);
        free(parts);
        free(words);
        return -1;
    }
    job_t job = {blocks, data, n16, nblocks, (int)nchunks, 0, parts, sums, sums + nblocks, chunk_blocks, itemsize,
                 words, words == NULL ? NULL : words + nchunks, words == NULL ? NULL : words + 2 * nchunks};
    run_job(&job, on_pool);
    pooled_combine[kind](data, n, parts, (int)nchunks, job.sq, job.sm, nblocks, out);
    if (words != NULL) {
        uint64_t x = 0, s = 0, per_chunk = (uint64_t)(chunk_blocks * BLOCK * itemsize / 8);
        for (Py_ssize_t c = 0; c < nchunks; c++) {
            x ^= job.fx[c];
            s += job.fs[c] + 2 * (uint64_t)c * per_chunk * job.fp[c];
        }
        *x_out = x;
        *s_out = s;
    }
    free(sums);
    free(parts);
    free(words);
    return 0;
}

/* a long buffer's statistics on the pool; 0, or -1 when the buffer is not for the pool (or no memory) */
static int pooled(int kind, const void *data, Py_ssize_t n, stats_t *out)
{
    if (pool_threads < 2 || n < thread_min)
        return -1;
    Py_ssize_t nblocks = (n - n % 16 + BLOCK - 1) / BLOCK;
    if ((nblocks + CHUNK_BLOCKS - 1) / CHUNK_BLOCKS > MAX_CHUNKS || pool_start() < 1)
        return -1;
    return blocked_pass(kind, data, n, CHUNK_BLOCKS, 0, 1, out, NULL, NULL);
}

/* statistics and fingerprint in one pass over the memory (summary_mode xor): chunks of FUSED_BLOCKS blocks (16 KB
 * of float32, in the L1 cache), each reduced by the blocks kernel and then fingerprinted before the next is read,
 * instead of the whole buffer read twice (a tensor of a few MB comes from L3 or DRAM each time). The statistics
 * are combined as the pool's (bit for bit the one-thread kernel's), the fingerprint parts by their word offset
 * (fingerprint_view's rule). On the pool for long buffers. 0 with *out for all n elements and (x, s) of the words of
 * the first n16 elements; -1 when the buffer is not for this path (float64, no AVX2, short, no memory). */
#define FUSED_BLOCKS 16
static int fused_pass(int kind, const void *data, Py_ssize_t n, Py_ssize_t itemsize, stats_t *out, uint64_t *x_out,
                      uint64_t *s_out)
{
    if (!simd_enabled())
        return -1;
    return blocked_pass(kind, data, n, FUSED_BLOCKS, itemsize, pool_threads >= 2 && n >= thread_min && pool_start() >= 1,
                        out, x_out, s_out);
}
#endif
#endif

/* the kernels by element kind: float32, float64, float16, bfloat16 */
typedef void (*kernel_t)(const void *, Py_ssize_t, stats_t *);
static const kernel_t portable_kernels[] = {f32_scalar, f64_scalar, f16_scalar, bf16_scalar};
#ifdef MSPROBE_X86
static const kernel_t avx2_kernels[] = {f32_avx2, f64_avx2, f16_avx2, bf16_avx2};
#endif

static int kind_index(long itemsize)
{
    switch (itemsize) {
    case 4: return 0;
    case 8: return 1;
    case KIND_FLOAT16: return 2;
    case KIND_BFLOAT16: return 3;
    default: return -1;
    }
}

/* run the kernel of element kind `kind` (kind_index) over `count` >= 1 dense elements at `address` */
static void compute_buffer(const void *address, Py_ssize_t count, int kind, stats_t *out)
{
    kernel_t kernel = portable_kernels[kind];
#ifdef MSPROBE_X86
    if (simd_enabled())
        kernel = avx2_kernels[kind];
#endif
    /* short buffers take less time than handing the GIL over and back */
    PyThreadState *saved = count >= (1 << 16) ? PyEval_SaveThread() : NULL;
    int done = 0;
#ifdef MSPROBE_THREADS
    if (saved != NULL && simd_enabled() && pooled_blocks[kind] != NULL)
        done = pooled(kind, address, count, out) == 0;
#endif
    if (!done)
        kernel(address, count, out);
    if (saved != NULL)
        PyEval_RestoreThread(saved);
    if (out->has_nan) {
        out->max = NAN;
        out->min = NAN;
        out->sumsq = NAN;
    }
}

/* (address, count, itemsize) of a dense float buffer: 0 with its kernel kind, or -1 with an exception set */
static int parse_buffer(PyObject *const *args, void **address, Py_ssize_t *count, long *itemsize, int *kind)
{
    if (arg_address(args[0], address) < 0 || arg_size(args[1], count) < 0 || arg_long(args[2], itemsize) < 0)
        return -1;
    *kind = kind_index(*itemsize);
    if (*address == NULL || *count < 1 || *kind < 0) {
        PyErr_SetString(PyExc_ValueError,
                        "need a non-null address, count >= 1, itemsize 4, 8, FLOAT16 (2) or BFLOAT16 (258)");
        return -1;
    }
    return 0;
}

/* parse (address, count, itemsize) and run the kernel; 0 on success, -1 with an exception set */
static int compute(PyObject *const *args, stats_t *out, long *itemsize_out)
{
    void *address;
    Py_ssize_t count;
    long itemsize;
    int kind;
    if (parse_buffer(args, &address, &count, &itemsize, &kind) < 0)
        return -1;
    compute_buffer(address, count, kind, out);
    *itemsize_out = itemsize;
    return 0;
}

static PyObject *minmax_sumsq(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "minmax_sumsq(address, count, itemsize) takes 3 arguments");
        return NULL;
    }
    stats_t out;
    long itemsize;
    if (compute(args, &out, &itemsize) < 0)
        return NULL;
    return Py_BuildValue("(ddd)", out.max, out.min, out.sumsq);
}

/* (max, min, mean, norm) from one pass's stats_t; `total` (None or a framework's own sum) as float_stats */
static PyObject *stats_result(const stats_t *out, Py_ssize_t count_elements, long itemsize, PyObject *total_obj,
                              double total)
{
    if (total_obj == Py_None)
        total = out->has_nan ? NAN : out->sum;
    double count = (double)count_elements;
    double mean, norm;
    if (itemsize != 8 && total_obj == Py_None) {  /* float32, float16, bfloat16: float32 results */
        mean = (float)(total / count);  /* the double sum: one rounding, to float32 */
        norm = (float)sqrt(out->sumsq);
    } else if (itemsize != 8) {
        mean = (float)((double)(float)total / (double)(float)count);  /* float32 division, as torch */
        norm = (float)sqrt(out->sumsq);
    } else {
        mean = total / count;
        norm = sqrt(out->sumsq);
    }
    return Py_BuildValue("(dddd)", out->max, out->min, mean, norm);
}

static PyObject *float_stats(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "float_stats(address, count, itemsize, total) takes 4 arguments");
        return NULL;
    }
    double total = 0.0;
    if (args[3] != Py_None) {
        total = PyFloat_AsDouble(args[3]);
        if (total == -1.0 && PyErr_Occurred())
            return NULL;
    }
    stats_t out;
    long itemsize;
    if (compute(args, &out, &itemsize) < 0)
        return NULL;
    return stats_result(&out, PyLong_AsSsize_t(args[1]), itemsize, args[3], total);
}

/* ---- bucket_stats: grad_probe's per-parameter statistics in one pass ----------------------------------------
 * max, min and sum of squares as above, the number of zeros, for each bound the number of elements <= bound,
 * and optionally the direction (element > 0) as one byte per element. NaN is in no count and not > 0, as the
 * framework comparisons give. */
#define MAX_BOUNDS 64

typedef struct {
    stats_t stats;
    Py_ssize_t zeros, at_or_below[MAX_BOUNDS];
} bucket_t;

#define BUCKET_SCALAR(name, in_type, LOAD)                                                                 \
    static void name(const void *data, Py_ssize_t start, Py_ssize_t n, const double *bounds, int nb,     \
                     uint8_t *direction, bucket_t *out)                                                  \
    {                                                                                                    \
        const in_type *p = (const in_type *)data;                                                        \
        double hi = out->stats.max, lo = out->stats.min, sumsq = out->stats.sumsq;                       \
        Py_ssize_t zeros = out->zeros;                                                                   \
        for (Py_ssize_t i = start; i < n; i++) {                                                         \
            double a = LOAD(p, i);                                                                       \
            hi = a > hi ? a : hi;                                                                        \
            lo = a < lo ? a : lo;                                                                        \
            out->stats.has_nan |= a != a;                                                                \
            sumsq += a * a;                                                                              \
            zeros += a == 0.0;                                                                           \
            for (int k = 0; k < nb; k++)                                                                 \
                out->at_or_below[k] += a <= bounds[k];                                                   \
            if (direction != NULL)                                                                       \
                direction[i] = a > 0.0;                                                                  \
        }                                                                                                \
        out->stats.max = hi; out->stats.min = lo; out->stats.sumsq = sumsq; out->zeros = zeros;          \
    }

BUCKET_SCALAR(bucket_f32_scalar, float, LOAD_SAME)
BUCKET_SCALAR(bucket_f64_scalar, double, LOAD_SAME)
BUCKET_SCALAR(bucket_f16_scalar, uint16_t, LOAD_F16)
BUCKET_SCALAR(bucket_bf16_scalar, uint16_t, LOAD_BF16)

typedef void (*bucket_kernel_t)(const void *, Py_ssize_t, Py_ssize_t, const double *, int, uint8_t *, bucket_t *);
static const bucket_kernel_t bucket_kernels[] = {bucket_f32_scalar, bucket_f64_scalar, bucket_f16_scalar,
                                                 bucket_bf16_scalar};

#ifdef MSPROBE_X86
/* eight direction bytes (0 or 1) for each 8-bit mask */
static uint64_t direction_bytes[256];

static void fill_direction_bytes(void)
{
    for (int m = 0; m < 256; m++) {
        uint64_t v = 0;
        for (int j = 0; j < 8; j++)
            v |= (uint64_t)((m >> j) & 1) << (8 * j);
        direction_bytes[m] = v;
    }
}

/* float32: 8 elements a round; a bound is compared exactly when it is a float32 value (the caller checks),
 * squares summed in double */
__attribute__((target("avx2,fma,popcnt")))
static void bucket_f32_avx2(const void *data, Py_ssize_t n, const double *bounds, int nb, uint8_t *direction,
                            bucket_t *out)
{
    const float *p = (const float *)data;
    __m256 limits[MAX_BOUNDS];
    for (int k = 0; k < nb; k++)
        limits[k] = _mm256_set1_ps((float)bounds[k]);
    const __m256 zero = _mm256_setzero_ps();
    __m256 hi = _mm256_set1_ps(p[0]), lo = hi;
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    Py_ssize_t zeros = 0, i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 a = _mm256_loadu_ps(p + i);
        hi = _mm256_max_ps(hi, a);
        lo = _mm256_min_ps(lo, a);
        __m256d low = _mm256_cvtps_pd(_mm256_castps256_ps128(a)), high = _mm256_cvtps_pd(_mm256_extractf128_ps(a, 1));
        s0 = _mm256_fmadd_pd(low, low, s0);
        s1 = _mm256_fmadd_pd(high, high, s1);
        zeros += __builtin_popcount(_mm256_movemask_ps(_mm256_cmp_ps(a, zero, _CMP_EQ_OQ)));
        for (int k = 0; k < nb; k++)
            out->at_or_below[k] += __builtin_popcount(_mm256_movemask_ps(_mm256_cmp_ps(a, limits[k], _CMP_LE_OQ)));
        if (direction != NULL) {
            uint64_t bytes = direction_bytes[_mm256_movemask_ps(_mm256_cmp_ps(a, zero, _CMP_GT_OQ))];
            memcpy(direction + i, &bytes, sizeof bytes);
        }
    }
    /* max/min lanes: a NaN lane is caught by the sum of squares below */
    out->stats.max = hmax8(hi);
    out->stats.min = hmin8(lo);
    out->stats.sumsq = hsum4d(_mm256_add_pd(s0, s1));
    out->zeros = zeros;
    bucket_f32_scalar(data, i, n, bounds, nb, direction, out);
    out->stats.has_nan |= out->stats.sumsq != out->stats.sumsq;
}
#endif

static PyObject *bucket_stats(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "bucket_stats(address, count, itemsize, bounds, direction_address) takes 5 arguments");
        return NULL;
    }
    void *address;
    Py_ssize_t count;
    long itemsize;
    if (arg_address(args[0], &address) < 0 || arg_size(args[1], &count) < 0 || arg_long(args[2], &itemsize) < 0)
        return NULL;
    int kind = kind_index(itemsize);
    PyObject *bound_seq = PySequence_Fast(args[3], "bounds must be a sequence of numbers");
    if (bound_seq == NULL)
        return NULL;
    Py_ssize_t nb = PySequence_Fast_GET_SIZE(bound_seq);
    double bounds[MAX_BOUNDS];
    int exact_f32 = 1;
    for (Py_ssize_t k = 0; k < nb && k < MAX_BOUNDS; k++) {
        bounds[k] = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(bound_seq, k));
        if (bounds[k] == -1.0 && PyErr_Occurred()) {
            Py_DECREF(bound_seq);
            return NULL;
        }
        exact_f32 &= (double)(float)bounds[k] == bounds[k];
    }
    Py_DECREF(bound_seq);
    uint8_t *direction = NULL;
    if (args[4] != Py_None) {
        if (arg_address(args[4], (void **)&direction) < 0)
            return NULL;
    }
    if (address == NULL || count < 1 || kind < 0 || nb > MAX_BOUNDS) {
        PyErr_SetString(PyExc_ValueError, "need a non-null address, count >= 1, itemsize 4, 8, FLOAT16 or BFLOAT16 "
                                          "and at most 64 bounds");
        return NULL;
    }
    bucket_t out;
    memset(&out, 0, sizeof out);
    PyThreadState *saved = count >= (1 << 16) ? PyEval_SaveThread() : NULL;
#ifdef MSPROBE_X86
    if (kind == 0 && exact_f32 && simd_enabled() && __builtin_cpu_supports("popcnt"))
        bucket_f32_avx2(address, count, bounds, (int)nb, direction, &out);
    else
#endif
    {
        out.stats.max = -INFINITY;
        out.stats.min = INFINITY;
        bucket_kernels[kind](address, 0, count, bounds, (int)nb, direction, &out);
    }
    if (saved != NULL)
        PyEval_RestoreThread(saved);
    if (out.stats.has_nan) {
        out.stats.max = NAN;
        out.stats.min = NAN;
        out.stats.sumsq = NAN;
    }
    PyObject *counts = PyTuple_New(nb);
    if (counts == NULL)
        return NULL;
    for (Py_ssize_t k = 0; k < nb; k++) {
        PyObject *value = PyLong_FromSsize_t(out.at_or_below[k]);
        if (value == NULL) {
            Py_DECREF(counts);
            return NULL;
        }
        PyTuple_SET_ITEM(counts, k, value);
    }
    return Py_BuildValue("(dddnN)", out.stats.max, out.stats.min, out.stats.sumsq, out.zeros, counts);
}

/* ---- fingerprint: summary_mode "xor", a bitwise fingerprint of any dense buffer -------------------------------
 * The bytes are read as little-endian 64-bit words w_i (the last one zero-padded). Two sums modulo 2^64:
 *     xor  = w_0 ^ w_1 ^ ... ^ w_{n-1}
 *     wsum = sum of (2i + 1) * w_i
 * Equal bytes give equal pairs. A single flipped bit changes both (it flips one bit of xor, and changes wsum by an
 * odd multiple of a power of two below 2^64), and wsum also sees elements that moved. Framework device paths
 * compute the same two numbers with their own integer ops (stats.fingerprint_words). */
static void fingerprint_scalar(const uint8_t *p, Py_ssize_t words, uint64_t *xor_out, uint64_t *sum_out,
                               uint64_t *plain_out)
{
    uint64_t x0 = 0, x1 = 0, s0 = 0, s1 = 0, p0 = 0, p1 = 0;
    Py_ssize_t i = 0;
    for (; i + 2 <= words; i += 2) {
        uint64_t a, b;
        memcpy(&a, p + 8 * i, 8);
        memcpy(&b, p + 8 * (i + 1), 8);
        x0 ^= a; x1 ^= b;
        s0 += a * (uint64_t)(2 * i + 1);
        s1 += b * (uint64_t)(2 * i + 3);
        p0 += a; p1 += b;
    }
    for (; i < words; i++) {
        uint64_t a;
        memcpy(&a, p + 8 * i, 8);
        x0 ^= a;
        s0 += a * (uint64_t)(2 * i + 1);
        p0 += a;
    }
    *xor_out = x0 ^ x1;
    *sum_out = s0 + s1;
    *plain_out = p0 + p1;
}

#ifdef MSPROBE_X86
/* 8 words a round in two vectors, lane l holding words 8b + l of rounds b = 0 .. B-1. The weighted sum needs
 * no 64-bit multiply per word (AVX2 has none): per lane, P = sum of its words (a running prefix) and Q = sum of
 * the prefixes after each round, so sum over b of b * w(b) = B * P - Q (Abel summation, exact modulo 2^64), and
 * sum over i of (2i + 1) * w_i = sum over lanes of 16 * (B * P - Q) + (2l + 1) * P. Three vector operations
 * per four words instead of a twelve-instruction emulated multiply: the same value, memory-bound. */
__attribute__((target("avx2")))
static void fingerprint_avx2(const uint8_t *p, Py_ssize_t words, uint64_t *xor_out, uint64_t *sum_out,
                             uint64_t *plain_out)
{
    __m256i x0 = _mm256_setzero_si256(), x1 = x0, p0 = x0, p1 = x0, q0 = x0, q1 = x0;
    Py_ssize_t i = 0;
    for (; i + 8 <= words; i += 8) {
        __m256i a = _mm256_loadu_si256((const __m256i *)(p + 8 * i));
        __m256i b = _mm256_loadu_si256((const __m256i *)(p + 8 * i + 32));
        x0 = _mm256_xor_si256(x0, a); x1 = _mm256_xor_si256(x1, b);
        p0 = _mm256_add_epi64(p0, a); p1 = _mm256_add_epi64(p1, b);
        q0 = _mm256_add_epi64(q0, p0); q1 = _mm256_add_epi64(q1, p1);
    }
    uint64_t xs[8], ps[8], qs[8];
    _mm256_storeu_si256((__m256i *)xs, x0); _mm256_storeu_si256((__m256i *)(xs + 4), x1);
    _mm256_storeu_si256((__m256i *)ps, p0); _mm256_storeu_si256((__m256i *)(ps + 4), p1);
    _mm256_storeu_si256((__m256i *)qs, q0); _mm256_storeu_si256((__m256i *)(qs + 4), q1);
    uint64_t rounds = (uint64_t)(i / 8), x = 0, s = 0, plain = 0;
    for (int l = 0; l < 8; l++) {
        x ^= xs[l];
        s += 16 * (rounds * ps[l] - qs[l]) + (uint64_t)(2 * l + 1) * ps[l];
        plain += ps[l];
    }
    for (; i < words; i++) {
        uint64_t a;
        memcpy(&a, p + 8 * i, 8);
        x ^= a;
        s += a * (uint64_t)(2 * i + 1);
        plain += a;
    }
    *xor_out = x;
    *sum_out = s;
    *plain_out = plain;
}
#endif

/* the two sums of `words` whole words, plus their plain sum (what a later part's weights need, see fingerprint_view) */
static void fingerprint_words(const uint8_t *p, Py_ssize_t words, uint64_t *x, uint64_t *s, uint64_t *plain)
{
#ifdef MSPROBE_X86
    if (simd_enabled()) {
        fingerprint_avx2(p, words, x, s, plain);
        return;
    }
#endif
    fingerprint_scalar(p, words, x, s, plain);
}

/* the last `bytes` (< 8) bytes, zero-padded to word number `index`, into the two sums */
static void fingerprint_tail(const uint8_t *p, Py_ssize_t bytes, uint64_t index, uint64_t *x, uint64_t *s)
{
    if (bytes) {
        uint64_t last = 0;
        memcpy(&last, p, (size_t)bytes);
        *x ^= last;
        *s += last * (2 * index + 1);
    }
}

static void fingerprint_buffer(const uint8_t *p, Py_ssize_t nbytes, uint64_t *xor_out, uint64_t *sum_out)
{
    Py_ssize_t words = nbytes / 8;
    uint64_t x = 0, s = 0, plain;
    PyThreadState *saved = nbytes >= (1 << 19) ? PyEval_SaveThread() : NULL;
    fingerprint_words(p, words, &x, &s, &plain);
    if (saved != NULL)
        PyEval_RestoreThread(saved);
    fingerprint_tail(p + 8 * words, nbytes % 8, (uint64_t)words, &x, &s);
    *xor_out = x;
    *sum_out = s;
}

static PyObject *fingerprint(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "fingerprint(address, nbytes) takes 2 arguments");
        return NULL;
    }
    void *address;
    Py_ssize_t nbytes;
    if (arg_address(args[0], &address) < 0 || arg_size(args[1], &nbytes) < 0)
        return NULL;
    if (address == NULL || nbytes < 0) {
        PyErr_SetString(PyExc_ValueError, "need a non-null address and nbytes >= 0");
        return NULL;
    }
    uint64_t x, s;
    fingerprint_buffer((const uint8_t *)address, nbytes, &x, &s);
    return Py_BuildValue("(KK)", (unsigned long long)x, (unsigned long long)s);
}

static const Py_ssize_t kind_bytes[] = {4, 8, 2, 2};

/* statistics and fingerprint sums of `count` >= 1 dense elements of kind `kind` (kind_index); called with the GIL,
   handed over for long buffers */
static void digest_dense(const void *address, Py_ssize_t count, int kind, stats_t *out, uint64_t *x_out,
                         uint64_t *s_out)
{
    Py_ssize_t each = kind_bytes[kind];
    const uint8_t *p = (const uint8_t *)address;
    uint64_t x = 0, s = 0;
    int done = -1;
#ifdef MSPROBE_THREADS
    PyThreadState *saved = count >= (1 << 16) ? PyEval_SaveThread() : NULL;
    done = fused_pass(kind, address, count, each, out, &x, &s);
    if (done == 0) {  /* the elements after the last whole round of 16: their words, then the zero-padded tail */
        Py_ssize_t n16 = count - count % 16, first = n16 * each / 8, rest = (count - n16) * each;
        uint64_t rx, rs, rp;
        fingerprint_words(p + 8 * first, rest / 8, &rx, &rs, &rp);
        x ^= rx;
        s += rs + 2 * (uint64_t)first * rp;
        fingerprint_tail(p + 8 * (first + rest / 8), rest % 8, (uint64_t)(first + rest / 8), &x, &s);
        if (out->has_nan) {
            out->max = NAN;
            out->min = NAN;
            out->sumsq = NAN;
        }
    }
    if (saved != NULL)
        PyEval_RestoreThread(saved);
#endif
    if (done != 0) {  /* two passes (each hands the GIL over for long buffers itself) */
        compute_buffer(address, count, kind, out);
        fingerprint_buffer(p, count * each, &x, &s);
    }
    *x_out = x;
    *s_out = s;
}

/* the fingerprint as stats.format_fingerprint writes it: 32 hex digits */
static PyObject *fingerprint_text(uint64_t x, uint64_t s)
{
    char text[40];
    snprintf(text, sizeof text, "%016llx%016llx", (unsigned long long)x, (unsigned long long)s);
    return PyUnicode_FromStringAndSize(text, 32);
}

/* stats_fingerprint(address, count, itemsize) -> (float_stats(address, count, itemsize, None), fingerprint text): both
   digests of a dense float buffer (summary_mode xor), in one pass over long buffers (fused_pass), the text as
   stats.format_fingerprint writes it */
static PyObject *stats_fingerprint(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "stats_fingerprint(address, count, itemsize) takes 3 arguments");
        return NULL;
    }
    void *address;
    Py_ssize_t count;
    long itemsize;
    int kind;
    if (parse_buffer(args, &address, &count, &itemsize, &kind) < 0)
        return NULL;
    stats_t out;
    uint64_t x, s;
    digest_dense(address, count, kind, &out, &x, &s);
    PyObject *stats = stats_result(&out, count, itemsize, Py_None, 0.0);
    if (stats == NULL)
        return NULL;
    return Py_BuildValue("(NN)", stats, fingerprint_text(x, s));
}

/* ---- strided views: the elements of a view in C (row-major) order, copied into a dense buffer -------------
 * A sliced, broadcast (stride 0) or transposed tensor's statistics and fingerprint are those of its dense copy;
 * gathering it here gives the same bytes as the framework's contiguous() without the framework's per-op cost
 * (a tensor op, an allocation through its allocator), which was most of an L2 dump's time on such views. */
#define MAX_DIMS 25

typedef struct {
    const uint8_t *base;
    Py_ssize_t itemsize, count, ndim, sizes[MAX_DIMS], strides[MAX_DIMS];  /* strides in bytes */
} view_t;

/* parse (address, itemsize in bytes, sizes, strides in elements); 0, or -1 with an exception set */
static int parse_view(PyObject *address_obj, Py_ssize_t itemsize, PyObject *sizes, PyObject *strides, view_t *view)
{
    void *address;
    if (arg_address(address_obj, &address) < 0)
        return -1;
    if (!PyTuple_Check(sizes) || !PyTuple_Check(strides) || PyTuple_GET_SIZE(sizes) != PyTuple_GET_SIZE(strides)
        || PyTuple_GET_SIZE(sizes) > MAX_DIMS || address == NULL || itemsize < 1) {
        PyErr_SetString(PyExc_ValueError, "need a non-null address, itemsize >= 1 and tuples of sizes and strides "
                                          "of one length (at most 25)");
        return -1;
    }
    view->base = (const uint8_t *)address;
    view->itemsize = itemsize;
    view->ndim = PyTuple_GET_SIZE(sizes);
    view->count = 1;
    for (Py_ssize_t d = 0; d < view->ndim; d++) {
        Py_ssize_t size = PyLong_AsSsize_t(PyTuple_GET_ITEM(sizes, d));
        Py_ssize_t stride = PyLong_AsSsize_t(PyTuple_GET_ITEM(strides, d));
        if ((size == -1 || stride == -1) && PyErr_Occurred())
            return -1;
        if (size < 0 || stride < 0) {
            PyErr_SetString(PyExc_ValueError, "sizes and strides must be >= 0");
            return -1;
        }
        view->sizes[d] = size;
        view->strides[d] = stride * itemsize;
        view->count *= size;
    }
    return 0;
}

/* one row of `inner` elements `step` bytes apart (a transposed view's row) to dst, four elements an iteration: the
 * typed loads and stores of a fixed element size (memcpy of a constant size compiles to one move) */
#define GATHER_ROW(name, size)                                                                  \
    static void name(uint8_t *dst, const uint8_t *src, Py_ssize_t inner, Py_ssize_t step)          \
    {                                                                                           \
        Py_ssize_t i = 0;                                                                       \
        for (; i + 4 <= inner; i += 4, dst += 4 * (size), src += 4 * step) {                    \
            memcpy(dst, src, size);                                                             \
            memcpy(dst + (size), src + step, size);                                             \
            memcpy(dst + 2 * (size), src + 2 * step, size);                                     \
            memcpy(dst + 3 * (size), src + 3 * step, size);                                     \
        }                                                                                       \
        for (; i < inner; i++, dst += (size), src += step)                                      \
            memcpy(dst, src, size);                                                             \
    }
GATHER_ROW(gather_row2, 2)
GATHER_ROW(gather_row4, 4)
GATHER_ROW(gather_row8, 8)

/* the next position of an odometer over dimensions 0..last of `view` (index per dimension, *src its address): 1, or 0
 * once every position has been visited (index and *src back at the start) */
static int odometer_next(const view_t *view, Py_ssize_t last, Py_ssize_t *index, const uint8_t **src)
{
    for (Py_ssize_t d = last; d >= 0; d--) {
        *src += view->strides[d];
        if (++index[d] < view->sizes[d])
            return 1;
        *src -= view->strides[d] * view->sizes[d];
        index[d] = 0;
    }
    return 0;
}

/* A transposed view's rows walk its memory a column at a time: one cache line (and soon one page) per element,
 * 0.4 GB/s here for a 1024 x 1024 float32 weight's transpose. Where the second-last dimension is the denser one,
 * the last two are copied in tiles instead: 256 bytes along the dense dimension (four cache lines) by 8 elements
 * along the other, each tile's lines read once. Eight, not more: the lines of a power-of-two row length map to
 * one cache set, which holds eight (measured on a 1024 x 1024 float32 transpose: 8 columns 0.68 ms, 16: 2.0 ms,
 * 32 x 32 tiles 2.8 ms, the row walk 5.9 ms). */
#define TILE_COLS 8
#define TILE_ROWS(size) (256 / (size) > 8 ? 256 / (size) : 8)

/* whether the view's last two dimensions are gathered in tiles: the second-last is the denser one */
static int tiled_view(const view_t *view)
{
    Py_ssize_t ndim = view->ndim;
    return ndim >= 2 && view->strides[ndim - 1] > view->strides[ndim - 2] && view->sizes[ndim - 1] >= 8 &&
           view->sizes[ndim - 2] >= 8;
}
#define GATHER_TILED(name, size)                                                                              \
    static void name(uint8_t *dst, const uint8_t *src, Py_ssize_t rows, Py_ssize_t cols, Py_ssize_t row_step, \
                     Py_ssize_t col_step, Py_ssize_t itemsize)                                                \
    {                                                                                                         \
        (void)itemsize;                                                                                       \
        Py_ssize_t tile_rows = TILE_ROWS(size);                                                               \
        for (Py_ssize_t r0 = 0; r0 < rows; r0 += tile_rows) {                                                 \
            Py_ssize_t r1 = r0 + tile_rows < rows ? r0 + tile_rows : rows;                                    \
            for (Py_ssize_t c0 = 0; c0 < cols; c0 += TILE_COLS) {                                             \
                Py_ssize_t c1 = c0 + TILE_COLS < cols ? c0 + TILE_COLS : cols;                                \
                for (Py_ssize_t r = r0; r < r1; r++) {                                                        \
                    uint8_t *out = dst + (r * cols + c0) * (size);                                            \
                    const uint8_t *in = src + r * row_step + c0 * col_step;                                   \
                    for (Py_ssize_t c = c0; c < c1; c++, out += (size), in += col_step)                       \
                        memcpy(out, in, (size_t)(size));                                                      \
                }                                                                                             \
            }                                                                                                 \
        }                                                                                                     \
    }
GATHER_TILED(gather_tiled1, 1)
GATHER_TILED(gather_tiled2, 2)
GATHER_TILED(gather_tiled4, 4)
GATHER_TILED(gather_tiled8, 8)
GATHER_TILED(gather_tiled_any, itemsize)

/* the view (ndim >= 2) plane by plane: its last two dimensions tiled, an odometer over the others */
static void gather_planes(const view_t *view, uint8_t *dst)
{
    Py_ssize_t ndim = view->ndim, itemsize = view->itemsize;
    Py_ssize_t rows = view->sizes[ndim - 2], cols = view->sizes[ndim - 1];
    Py_ssize_t row_step = view->strides[ndim - 2], col_step = view->strides[ndim - 1], plane = rows * cols * itemsize;
    void (*tiled)(uint8_t *, const uint8_t *, Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t) =
        itemsize == 4 ? gather_tiled4 : itemsize == 2 ? gather_tiled2 : itemsize == 8 ? gather_tiled8
        : itemsize == 1 ? gather_tiled1 : gather_tiled_any;
    Py_ssize_t index[MAX_DIMS] = {0};
    const uint8_t *src = view->base;
    for (;;) {
        tiled(dst, src, rows, cols, row_step, col_step, itemsize);
        dst += plane;
        if (!odometer_next(view, ndim - 3, index, &src))
            return;
    }
}

/* copy the view's elements in C order to dst (count * itemsize bytes) */
static void gather(const view_t *view, uint8_t *dst)
{
    Py_ssize_t ndim = view->ndim, itemsize = view->itemsize;
    if (ndim == 0) {
        memcpy(dst, view->base, (size_t)itemsize);
        return;
    }
    if (tiled_view(view)) {  /* a transpose of the last two dimensions, or like one */
        gather_planes(view, dst);
        return;
    }
    Py_ssize_t index[MAX_DIMS] = {0};
    Py_ssize_t inner = view->sizes[ndim - 1], step = view->strides[ndim - 1], row = inner * itemsize;
    const uint8_t *src = view->base;
    for (;;) {
        if (step == itemsize) {
            memcpy(dst, src, (size_t)row);
        } else if (itemsize == 4) {
            gather_row4(dst, src, inner, step);
        } else if (itemsize == 2) {
            gather_row2(dst, src, inner, step);
        } else if (itemsize == 8) {
            gather_row8(dst, src, inner, step);
        } else {
            for (Py_ssize_t i = 0; i < inner; i++)
                memcpy(dst + i * itemsize, src + i * step, (size_t)itemsize);
        }
        dst += row;
        if (!odometer_next(view, ndim - 2, index, &src))  /* the outer dimensions */
            return;
    }
}

/* the view's elements in a new dense buffer (PyMem_Free it), or NULL with an exception set */
static uint8_t *gathered(const view_t *view)
{
    uint8_t *buffer = PyMem_Malloc((size_t)(view->count * view->itemsize));
    if (buffer == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    gather(view, buffer);
    return buffer;
}

/* float_stats_strided(address, itemsize, sizes, strides) -> float_stats of the view's dense copy */
static PyObject *float_stats_strided(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "float_stats_strided(address, itemsize, sizes, strides) takes 4 arguments");
        return NULL;
    }
    long kind_code;
    if (arg_long(args[1], &kind_code) < 0)
        return NULL;
    int kind = kind_index(kind_code);
    if (kind < 0) {
        PyErr_SetString(PyExc_ValueError, "itemsize must be 4, 8, FLOAT16 (2) or BFLOAT16 (258)");
        return NULL;
    }
    view_t view;
    if (parse_view(args[0], kind_code == 4 || kind_code == 8 ? kind_code : 2, args[2], args[3], &view) < 0)
        return NULL;
    if (view.count < 1) {
        PyErr_SetString(PyExc_ValueError, "need at least one element");
        return NULL;
    }
    uint8_t *buffer = gathered(&view);
    if (buffer == NULL)
        return NULL;
    stats_t out;
    compute_buffer(buffer, view.count, kind, &out);
    PyMem_Free(buffer);
    return stats_result(&out, view.count, kind_code, Py_None, 0.0);
}

/* ---- a view's fingerprint without its dense copy: the view is gathered a part at a time into a small buffer that
 * stays in the cache, and each part's words are summed there. Words from index k on weigh 2(k + j) + 1, so a part's
 * weighted sum is its own (weights 2j + 1) plus 2k times its plain sum; bytes that do not fill a word wait for the
 * next part. One read of the view's memory, where the dense copy wrote and read it all again. */
#define STREAM_BYTES (64 * 1024)

typedef struct {
    uint8_t *buffer;
    Py_ssize_t fill;        /* bytes gathered, not yet summed */
    uint64_t words, x, s;   /* words summed so far, and their two sums */
} fp_stream_t;

static void stream_sum(fp_stream_t *stream)
{
    Py_ssize_t words = stream->fill / 8;
    uint64_t x, s, plain;
    fingerprint_words(stream->buffer, words, &x, &s, &plain);
    stream->x ^= x;
    stream->s += s + 2 * stream->words * plain;
    stream->words += (uint64_t)words;
    memmove(stream->buffer, stream->buffer + 8 * words, (size_t)(stream->fill - 8 * words));
    stream->fill -= 8 * words;
}

/* fingerprint of the view's bytes in C order (count >= 1); 0, or -1 with MemoryError set. The view is gathered in
 * units of its trailing dimensions: as many as fit in STREAM_BYTES (a small view is one unit, one gather), at least
 * the last one; a transposed last pair that does not fit goes in bands of whole tile rows. */
static int fingerprint_view(const view_t *view, uint64_t *x_out, uint64_t *s_out)
{
    Py_ssize_t ndim = view->ndim, itemsize = view->itemsize, outer = ndim, unit = itemsize, band_rows = 0;
    while (outer > 0 && unit * view->sizes[outer - 1] <= STREAM_BYTES)
        unit *= view->sizes[--outer];
    int tiled = tiled_view(view);
    if (ndim > 0 && outer == ndim) {  /* not even the last dimension fits: it is the unit, or bands of the last two */
        outer = ndim - 1;
        unit = view->sizes[ndim - 1] * itemsize;
    }
    if (tiled && outer == ndim - 1) {  /* the last pair does not fit: bands of whole tile rows */
        Py_ssize_t tile_rows = TILE_ROWS(itemsize), band = STREAM_BYTES / unit;
        band_rows = band < tile_rows ? tile_rows : band - band % tile_rows;
        outer = ndim - 2;
        unit *= band_rows < view->sizes[ndim - 2] ? band_rows : view->sizes[ndim - 2];
    }
    Py_ssize_t capacity = unit > STREAM_BYTES ? unit : STREAM_BYTES, total = view->count * itemsize;
    fp_stream_t stream = {PyMem_Malloc((size_t)((capacity < total ? capacity : total) + 8)), 0, 0, 0, 0};
    if (stream.buffer == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    PyThreadState *saved = total >= (1 << 19) ? PyEval_SaveThread() : NULL;
    view_t part = *view;  /* one unit: the trailing dimensions from `outer` on (a band of rows when banded) */
    part.ndim = ndim - outer;
    memmove(part.sizes, view->sizes + outer, (size_t)part.ndim * sizeof(Py_ssize_t));
    memmove(part.strides, view->strides + outer, (size_t)part.ndim * sizeof(Py_ssize_t));
    Py_ssize_t rows = band_rows ? view->sizes[ndim - 2] : 1, step = band_rows ? band_rows : 1;
    Py_ssize_t index[MAX_DIMS] = {0};
    const uint8_t *src = view->base;
    for (;;) {
        for (Py_ssize_t r0 = 0; r0 < rows; r0 += step) {
            Py_ssize_t bytes = unit;
            part.base = src;
            if (band_rows) {
                part.sizes[0] = r0 + band_rows < rows ? band_rows : rows - r0;
                part.base = src + r0 * view->strides[ndim - 2];
                bytes = part.sizes[0] * part.sizes[1] * itemsize;
            }
            if (stream.fill + bytes > STREAM_BYTES && stream.fill >= 8)
                stream_sum(&stream);
            gather(&part, stream.buffer + stream.fill);
            stream.fill += bytes;
        }
        if (!odometer_next(view, outer - 1, index, &src))
            break;
    }
    stream_sum(&stream);
    fingerprint_tail(stream.buffer, stream.fill, stream.words, &stream.x, &stream.s);
    if (saved != NULL)
        PyEval_RestoreThread(saved);
    PyMem_Free(stream.buffer);
    *x_out = stream.x;
    *s_out = stream.s;
    return 0;
}

/* fingerprint_strided(address, itemsize, sizes, strides) -> fingerprint of the view's bytes in C order */
static PyObject *fingerprint_strided(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "fingerprint_strided(address, itemsize, sizes, strides) takes 4 arguments");
        return NULL;
    }
    Py_ssize_t itemsize;
    if (arg_size(args[1], &itemsize) < 0)
        return NULL;
    view_t view;
    if (parse_view(args[0], itemsize, args[2], args[3], &view) < 0)
        return NULL;
    uint64_t x = 0, s = 0;
    if (view.count > 0 && fingerprint_view(&view, &x, &s) < 0)
        return NULL;
    return Py_BuildValue("(KK)", (unsigned long long)x, (unsigned long long)s);
}

static PyObject *simd(PyObject *Py_UNUSED(self), PyObject *Py_UNUSED(args))
{
    return PyBool_FromLong(simd_enabled());
}

/* threads(count=None, min_elements=None) -> (count, min_elements, buffers pooled so far), the settings in force
 * before the call; a count of 1 turns the pool off (tests compare counts; MSPROBE_STATS_THREADS and MSPROBE_STATS_THREAD_MIN set them at import) */
static PyObject *threads(PyObject *Py_UNUSED(self), PyObject *args)
{
    PyObject *count = Py_None, *minimum = Py_None;
    if (!PyArg_ParseTuple(args, "|OO:threads", &count, &minimum))
        return NULL;
#ifdef MSPROBE_THREADS
    PyObject *before = Py_BuildValue("(inn)", pool_threads, thread_min, pooled_runs);
    if (before == NULL)
        return NULL;
    if (count != Py_None) {
        long value = PyLong_AsLong(count);
        if (value == -1 && PyErr_Occurred()) {
            Py_DECREF(before);
            return NULL;
        }
        pool_threads = value < 1 ? 1 : value > MAX_THREADS ? MAX_THREADS : (int)value;
    }
    if (minimum != Py_None) {
        Py_ssize_t value = PyLong_AsSsize_t(minimum);
        if (value == -1 && PyErr_Occurred()) {
            Py_DECREF(before);
            return NULL;
        }
        thread_min = value < 2 * CHUNK_BLOCKS * BLOCK ? 2 * CHUNK_BLOCKS * BLOCK : value;
    }
    return before;
#else
    return Py_BuildValue("(inn)", 1, (Py_ssize_t)0, (Py_ssize_t)0);
#endif
}

static PyMethodDef methods[] = {
    {"simd", (PyCFunction)simd, METH_NOARGS, "simd() -> whether the AVX2 kernels are in use"},
    {"threads", (PyCFunction)threads, METH_VARARGS,
     "threads(count=None, min_elements=None) -> (threads, shortest pooled buffer, buffers pooled) before the call"},
    {"minmax_sumsq", (PyCFunction)(void (*)(void))minmax_sumsq, METH_FASTCALL,
     "minmax_sumsq(address, count, itemsize) -> (max, min, sum of squares) of a dense float buffer"},
    {"float_stats", (PyCFunction)(void (*)(void))float_stats, METH_FASTCALL,
     "float_stats(address, count, itemsize, total) -> (max, min, mean, norm) of a dense float buffer"},
    {"bucket_stats", (PyCFunction)(void (*)(void))bucket_stats, METH_FASTCALL,
     "bucket_stats(address, count, itemsize, bounds, direction_address) -> (max, min, sumsq, zeros, at_or_below)"},
    {"fingerprint", (PyCFunction)(void (*)(void))fingerprint, METH_FASTCALL,
     "fingerprint(address, nbytes) -> (xor, weighted sum) of the buffer's 64-bit words (summary_mode xor)"},
    {"stats_fingerprint", (PyCFunction)(void (*)(void))stats_fingerprint, METH_FASTCALL,
     "stats_fingerprint(address, count, itemsize) -> (float_stats of the buffer, its fingerprint text), in one pass"},
    {"float_stats_strided", (PyCFunction)(void (*)(void))float_stats_strided, METH_FASTCALL,
     "float_stats_strided(address, itemsize, sizes, strides) -> float_stats of a strided view's elements in C order"},
    {"fingerprint_strided", (PyCFunction)(void (*)(void))fingerprint_strided, METH_FASTCALL,
     "fingerprint_strided(address, itemsize, sizes, strides) -> fingerprint of a strided view's bytes in C order"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_stats", "One-pass max/min/sum of squares of dense float buffers.", -1, methods,
    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__stats(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
#ifdef MSPROBE_X86
    fill_direction_bytes();
#endif
#ifdef MSPROBE_THREADS
    pool_threads = decide_threads();
    const char *minimum = getenv("MSPROBE_STATS_THREAD_MIN");
    if (minimum != NULL && *minimum)
        thread_min = strtol(minimum, NULL, 10);
    if (thread_min < 2 * CHUNK_BLOCKS * BLOCK)
        thread_min = 2 * CHUNK_BLOCKS * BLOCK;
#endif
    return with_constants(m);
}
