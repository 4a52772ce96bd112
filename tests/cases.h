/* The op case table (ggml's test-backend-ops pattern). Every op direction's cases live in
   one table (cases_table() in tests/test_cases.c); one runner per op builds the tensors a
   row describes, runs the op on test_backend (reference, BLIS, or CUDA under
   tests/test_cuda.cu) and checks it against an independent f64 oracle written in plain
   loops: outputs poisoned with guard elements around every view (nothing outside an
   output may change), gradients against the oracle's adjoint and, on rows flagged
   CASE_FD, against central finite differences of the oracle in f64 on the CPU.

   A row runs once for each dtype in row.dtypes that the backend computes in (CPU: f64,
   f32; CUDA: f32, f16, bf16); a backend that declines the op (SSM_ERROR_UNSUPPORTED)
   counts the case as skipped.

   Adding an op (e.g. the delta rule): one case_op entry, one runner (oracle + call +
   checks) in case_ops[], its tolerances in case_tol(), and its rows in cases_table(). */
#ifndef SSM_TEST_CASES_H
#define SSM_TEST_CASES_H

#include "test.h"

typedef enum case_op { CASE_LINREC = 0, CASE_DECAY, CASE_BELL, CASE_PROJ, CASE_OUTCHAIN, CASE_DELTA, CASE_OP_COUNT } case_op;

enum { CASE_FWD = 0, CASE_BWD = 1 };

/* dtypes a row runs in (a bit set) */
enum { CASE_F64 = 1, CASE_F32 = 2, CASE_F16 = 4, CASE_BF16 = 8 };
#define CASE_HOST_DTYPES (CASE_F64 | CASE_F32)
#define CASE_CUDA_DTYPES (CASE_F32 | CASE_F16 | CASE_BF16)

/* options (a bit set; each op reads those that apply to it) */
enum {
    CASE_H0 = 1 << 0,       /* linrec, decay, delta: pass an initial state                 */
    CASE_HT = 1 << 1,       /* linrec, decay, delta: ask for the final state (bwd: pass dhT) */
    CASE_REVERSE = 1 << 2,  /* linrec: time runs backwards                                  */
    CASE_PER_STEP = 1 << 3, /* decay: per-step log decays (else cumulative)                 */
    CASE_BIAS = 1 << 4,     /* bell: pass a bias                                            */
    CASE_SAVE = 1 << 5,     /* proj: SAVE_PRE (else SAVE_NONE)                              */
    CASE_WEIGHT = 1 << 6,   /* outchain: pass the norm weight                               */
    CASE_RSTD = 1 << 7,     /* outchain: fwd writes rstd / bwd reads it                     */
    CASE_FD = 1 << 8,       /* bwd: also check every gradient by finite differences (f64)  */
    CASE_RANK3 = 1 << 9,    /* linrec m = 1: states as [S,T,n] / [S,n]                      */
    CASE_GPU_ONLY = 1 << 10, /* probes a GPU limit (grid sizes): host backends skip the row  */
    CASE_VARLEN = 1 << 11,  /* delta: dim[0] sequences cut from one row by cu_seqlens (i32)  */
    CASE_CU64 = 1 << 12,    /* delta: cu_seqlens in i64                                     */
    CASE_SLICED = 1 << 13   /* linrec: A a view of [S,T,n,n+1] without its first column     */
};

typedef struct op_case {
    case_op op;
    int dir;          /* CASE_FWD or CASE_BWD                                             */
    unsigned dtypes;  /* CASE_F64 | ...                                                   */
    int layout;       /* LAYOUT_* of every tensor of the case                             */
    int64_t dim[5];   /* sizes, in the order case_ops[op].dims names them                 */
    int variant;      /* linrec method, proj path, outchain gate, delta method            */
    int64_t chunk;    /* linrec and delta chunk; proj and outchain block_rows             */
    int chain;        /* proj: which segment chain (0 every activation, 1 a GDN-like one);
                         delta: n_h of rank-5 k/v (0: rank-4 k/v, n_h = 1)                */
    unsigned flags;   /* CASE_H0 | ...                                                    */
    double param;     /* linrec spectral radius of A_t; decay strength of the log decays;
                         delta gate strength: g in [-param, 0] (0: no g, DeltaNet)        */
} op_case;

typedef struct case_op_info {
    const char *name;
    const char *dims[5];
    void (*run)(const op_case *c, ssm_dtype dt);
} case_op_info;

extern const case_op_info case_ops[CASE_OP_COUNT];
extern int cases_gpu;             /* 1 under tests/test_cuda.cu: the f32 tolerance of GPU kernels */
extern const char *cases_label;   /* optional prefix of case names (e.g. a forced kernel variant) */
extern int cases_variant;         /* >= 0: only the rows of this variant (linrec method, ...)      */
extern int cases_shard, cases_shards; /* shards > 1: only every shards-th (row, dtype), from shard */
extern const char *cases_exclude;  /* non-NULL: rows whose name holds a piece of it (a,b) not run */
extern const char *cases_match;    /* non-NULL: only rows whose name holds a piece of it (a,b)    */

const op_case *cases_table(int *count);
/* Runs every row (op < 0) or the rows of one op, in each of `dtypes` the row lists. */
void cases_run(unsigned dtypes, int op);
/* Relative (normwise) error bound of a case's outputs in dtype dt. */
double case_tol(const op_case *c, ssm_dtype dt);

#endif
