/* The shared library of the headers (make lib -> build/libssm.so): ssm.h + ssm_cuda.h with a
   C ABI, plus two helpers so FFI callers need not lay out the config structs. */
#define SSM_IMPLEMENTATION
#define SSM_CUDA_IMPLEMENTATION
#include "../ssm_cuda.h"

/* A CUDA context on `device` running on `stream` (a cudaStream_t, NULL = default). */
extern "C" ssm_ctx *ssm_py_cuda_ctx(int device, void *stream) {
    ssm_ctx *ctx = NULL;
    ssm_ctx_config cfg = ssm_ctx_config_init();
    ssm_cuda_config cc = ssm_cuda_config_init();
    cc.device = device;
    cc.stream = stream;
    cfg.backend = ssm_cuda_backend();
    cfg.backend_config = &cc;
    return ssm_ctx_create(&cfg, &ctx) == SSM_OK ? ctx : NULL;
}
extern "C" ssm_ctx *ssm_py_cpu_ctx(void) {
    ssm_ctx *ctx = NULL;
    return ssm_ctx_create(NULL, &ctx) == SSM_OK ? ctx : NULL;
}
