/* Compiles ssm_cuda.h with its implementation for the minimum architecture the README
   claims (make compile-cuda: nvcc -arch=sm_80 -c; cp.async needs sm_80). */
#define SSM_IMPLEMENTATION
#define SSM_CUDA_IMPLEMENTATION
#include "../ssm_cuda.h"

int ssm_compile_check_cuda(void);
int ssm_compile_check_cuda(void) { return ssm_cuda_backend()->gemm != NULL; }
