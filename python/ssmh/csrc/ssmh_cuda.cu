/* The CUDA half of libssmh.so: ssm_cuda.h's implementation (ssm.h's comes from ssmh.c) and a
   context constructor taking the caller's stream, a borrowed cuBLAS handle and device
   allocator hooks (PyTorch's caching allocator), so no field layout of ssm_cuda_config is
   needed on the Python side. */
#define SSM_CUDA_IMPLEMENTATION
#include "ssm_cuda.h"

extern "C" ssm_ctx *ssmh_cuda_ctx(int device, void *stream, void *cublas,
                                  void *(*alloc)(void *, size_t, void *), void (*free_)(void *, void *, void *),
                                  void *user) {
    ssm_ctx *ctx = NULL;
    ssm_ctx_config cfg = ssm_ctx_config_init();
    ssm_cuda_config cc = ssm_cuda_config_init();
    cc.device = device;
    cc.stream = stream;
    cc.cublas = cublas;
    cc.allocator.user = user;
    cc.allocator.alloc = alloc;
    cc.allocator.free = free_;
    cfg.backend = ssm_cuda_backend();
    cfg.backend_config = &cc;
    return ssm_ctx_create(&cfg, &ctx) == SSM_OK ? ctx : NULL;
}

/* CUDART_VERSION this library was built with: a borrowed cuBLAS handle is only safe when the
   caller's cuBLAS is the same major version (then the loader shares one libcublas). */
extern "C" int ssmh_cuda_runtime_version(void) { return CUDART_VERSION; }
