/* The CPU half of libssmh.so (the Python package's shared library): ssm.h's implementation,
   the BLIS backend when built with SSMH_BLAS, and two helpers for FFI callers:
   ssmh_cpu_ctx (a context without laying out ssm_ctx_config) and ssmh_abi (the struct layouts
   and enum values as the compiler sees them, so the Python side checks its ctypes mirrors
   against the headers at import instead of trusting a hand copy). */
#define SSM_IMPLEMENTATION
#include "ssm.h"
#ifdef SSMH_BLAS
#define SSM_BLAS_IMPLEMENTATION
#include "ssm_blas.h" /* built with -D_POSIX_C_SOURCE=200809L -fopenmp (blis.h needs POSIX types) */
#endif

#include <stdio.h>
#include <string.h>

/* A CPU context: BLIS when built with it, else the reference backend. threads 0 = default. */
ssm_ctx *ssmh_cpu_ctx(int threads) {
    ssm_ctx *ctx = NULL;
    ssm_ctx_config cfg = ssm_ctx_config_init();
#ifdef SSMH_BLAS
    cfg.backend = ssm_blas_backend();
#endif
    cfg.threads = threads;
    return ssm_ctx_create(&cfg, &ctx) == SSM_OK ? ctx : NULL;
}

const char *ssmh_build_info(void) {
#ifdef SSMH_BLAS
    return "ssm.h " SSM_VERSION_STRING " cpu=blas";
#else
    return "ssm.h " SSM_VERSION_STRING " cpu=reference";
#endif
}

/* "size S N", "field S.F OFFSET SIZE" and "const NAME VALUE" lines. */
static char ssmh__abi_buf[16384];
static size_t ssmh__abi_len;
static void ssmh__put(const char *kind, const char *name, long long a, long long b, int two) {
    int n;
    if (ssmh__abi_len >= sizeof ssmh__abi_buf) return;
    n = two ? snprintf(ssmh__abi_buf + ssmh__abi_len, sizeof ssmh__abi_buf - ssmh__abi_len, "%s %s %lld %lld\n", kind,
                       name, a, b)
            : snprintf(ssmh__abi_buf + ssmh__abi_len, sizeof ssmh__abi_buf - ssmh__abi_len, "%s %s %lld\n", kind, name, a);
    if (n > 0) ssmh__abi_len += (size_t)n;
}
#define SSMH_SIZE(S) ssmh__put("size", #S, (long long)sizeof(S), 0, 0)
#define SSMH_FIELD(S, F) ssmh__put("field", #S "." #F, (long long)offsetof(S, F), (long long)sizeof(((S *)0)->F), 1)
#define SSMH_CONST(C) ssmh__put("const", #C, (long long)(C), 0, 0)

const char *ssmh_abi(void) {
    if (ssmh__abi_len) return ssmh__abi_buf;
    SSMH_SIZE(ssm_device), SSMH_FIELD(ssm_device, type), SSMH_FIELD(ssm_device, id);
    SSMH_SIZE(ssm_dtype), SSMH_FIELD(ssm_dtype, code), SSMH_FIELD(ssm_dtype, bits), SSMH_FIELD(ssm_dtype, lanes);
    SSMH_SIZE(ssm_tensor), SSMH_FIELD(ssm_tensor, data), SSMH_FIELD(ssm_tensor, device), SSMH_FIELD(ssm_tensor, ndim);
    SSMH_FIELD(ssm_tensor, dtype), SSMH_FIELD(ssm_tensor, shape), SSMH_FIELD(ssm_tensor, strides);
    SSMH_SIZE(ssm_linrec_stats), SSMH_FIELD(ssm_linrec_stats, method), SSMH_FIELD(ssm_linrec_stats, mat_mat);
    SSMH_FIELD(ssm_linrec_stats, mat_state), SSMH_FIELD(ssm_linrec_stats, flops);
    SSMH_FIELD(ssm_linrec_stats, workspace_bytes);
    SSMH_SIZE(ssm_linrec_desc), SSMH_FIELD(ssm_linrec_desc, method), SSMH_FIELD(ssm_linrec_desc, transition);
    SSMH_FIELD(ssm_linrec_desc, chunk), SSMH_FIELD(ssm_linrec_desc, reverse), SSMH_FIELD(ssm_linrec_desc, stats);
    SSMH_SIZE(ssm_decay_desc), SSMH_FIELD(ssm_decay_desc, input);
    SSMH_SIZE(ssm_proj_segment), SSMH_FIELD(ssm_proj_segment, width), SSMH_FIELD(ssm_proj_segment, act);
    SSMH_FIELD(ssm_proj_segment, param), SSMH_FIELD(ssm_proj_segment, bias), SSMH_FIELD(ssm_proj_segment, l2_head);
    SSMH_SIZE(ssm_proj_stats), SSMH_FIELD(ssm_proj_stats, gemm_calls), SSMH_FIELD(ssm_proj_stats, gemm_flops);
    SSMH_FIELD(ssm_proj_stats, workspace_bytes);
    SSMH_SIZE(ssm_proj_desc), SSMH_FIELD(ssm_proj_desc, nseg), SSMH_FIELD(ssm_proj_desc, seg);
    SSMH_FIELD(ssm_proj_desc, path), SSMH_FIELD(ssm_proj_desc, save), SSMH_FIELD(ssm_proj_desc, block_rows);
    SSMH_FIELD(ssm_proj_desc, l2_eps), SSMH_FIELD(ssm_proj_desc, stats);
    SSMH_SIZE(ssm_outchain_desc), SSMH_FIELD(ssm_outchain_desc, gate), SSMH_FIELD(ssm_outchain_desc, head_dim);
    SSMH_FIELD(ssm_outchain_desc, eps), SSMH_FIELD(ssm_outchain_desc, block_rows);
    SSMH_SIZE(ssm_allocator), SSMH_FIELD(ssm_allocator, user), SSMH_FIELD(ssm_allocator, alloc);
    SSMH_FIELD(ssm_allocator, free);
    SSMH_SIZE(ssm_bell_topology_config), SSMH_FIELD(ssm_bell_topology_config, period);
    SSMH_FIELD(ssm_bell_topology_config, prune_frac), SSMH_FIELD(ssm_bell_topology_config, swap_ratio);
    SSMH_FIELD(ssm_bell_topology_config, epsilon), SSMH_FIELD(ssm_bell_topology_config, keep_alpha);
    SSMH_FIELD(ssm_bell_topology_config, grow_alpha), SSMH_FIELD(ssm_bell_topology_config, drop_score);
    SSMH_FIELD(ssm_bell_topology_config, cosine_decay), SSMH_FIELD(ssm_bell_topology_config, stop_step);
    SSMH_FIELD(ssm_bell_topology_config, seed), SSMH_FIELD(ssm_bell_topology_config, layer_id);
    SSMH_FIELD(ssm_bell_topology_config, allreduce), SSMH_FIELD(ssm_bell_topology_config, allreduce_user);
    SSMH_SIZE(ssm_bell_topology), SSMH_FIELD(ssm_bell_topology, config), SSMH_FIELD(ssm_bell_topology, R);
    SSMH_FIELD(ssm_bell_topology, C), SSMH_FIELD(ssm_bell_topology, K), SSMH_FIELD(ssm_bell_topology, keep_score);
    SSMH_FIELD(ssm_bell_topology, grow_score), SSMH_FIELD(ssm_bell_topology, observations);
    SSMH_FIELD(ssm_bell_topology, allocator), SSMH_FIELD(ssm_bell_topology, device_type);
    SSMH_FIELD(ssm_bell_topology, device_state), SSMH_FIELD(ssm_bell_topology, device_release);
    SSMH_SIZE(ssm_bell_topology_report), SSMH_FIELD(ssm_bell_topology_report, updated);
    SSMH_FIELD(ssm_bell_topology_report, pruned), SSMH_FIELD(ssm_bell_topology_report, grown);
    SSMH_FIELD(ssm_bell_topology_report, explored), SSMH_FIELD(ssm_bell_topology_report, rejected);
    SSMH_FIELD(ssm_bell_topology_report, rows_changed), SSMH_FIELD(ssm_bell_topology_report, churn);
    SSMH_FIELD(ssm_bell_topology_report, prune_frac), SSMH_FIELD(ssm_bell_topology_report, checksum);
    SSMH_SIZE(ssm_delta_stats), SSMH_FIELD(ssm_delta_stats, method), SSMH_FIELD(ssm_delta_stats, chunk);
    SSMH_FIELD(ssm_delta_stats, flops), SSMH_FIELD(ssm_delta_stats, workspace_bytes);
    SSMH_SIZE(ssm_delta_desc), SSMH_FIELD(ssm_delta_desc, method), SSMH_FIELD(ssm_delta_desc, chunk);
    SSMH_FIELD(ssm_delta_desc, scale), SSMH_FIELD(ssm_delta_desc, stats), SSMH_FIELD(ssm_delta_desc, saved);
    SSMH_CONST(SSM_DELTA_AUTO), SSMH_CONST(SSM_DELTA_RECURRENT), SSMH_CONST(SSM_DELTA_CHUNKED);
    SSMH_CONST(SSM_DELTA_METHOD_COUNT);
    SSMH_CONST(SSM_MAX_DIMS), SSMH_CONST(SSM_PROJ_MAX_SEGMENTS);
    SSMH_CONST(SSM_DEVICE_CPU), SSMH_CONST(SSM_DEVICE_CUDA);
    SSMH_CONST(SSM_DTYPE_INT), SSMH_CONST(SSM_DTYPE_UINT), SSMH_CONST(SSM_DTYPE_FLOAT), SSMH_CONST(SSM_DTYPE_BFLOAT);
    SSMH_CONST(SSM_ERROR_INVALID_STRIDE), SSMH_CONST(SSM_ERROR_UNSUPPORTED), SSMH_CONST(SSM_ERROR_BACKEND);
    SSMH_CONST(SSM_LINREC_AUTO), SSMH_CONST(SSM_LINREC_SEQUENTIAL), SSMH_CONST(SSM_LINREC_SCAN_HS);
    SSMH_CONST(SSM_LINREC_BLELLOCH), SSMH_CONST(SSM_LINREC_CR), SSMH_CONST(SSM_LINREC_CHUNKED);
    SSMH_CONST(SSM_LINREC_METHOD_COUNT);
    SSMH_CONST(SSM_DECAY_CUMULATIVE), SSMH_CONST(SSM_DECAY_PER_STEP);
    SSMH_CONST(SSM_PROJ_ACT_COUNT), SSMH_CONST(SSM_PROJ_FUSED), SSMH_CONST(SSM_PROJ_UNFUSED);
    SSMH_CONST(SSM_PROJ_SAVE_NONE), SSMH_CONST(SSM_PROJ_SAVE_PRE);
    SSMH_CONST(SSM_OUTCHAIN_SILU), SSMH_CONST(SSM_OUTCHAIN_SIGMOID);
    SSMH_CONST(SSM_BELL_DROP_GRAD_EMA), SSMH_CONST(SSM_BELL_DROP_MAGNITUDE);
    return ssmh__abi_buf;
}
