/* Compiles ssm_blas.h with its implementation (needs blis.h): C99 strict, C++, nvcc. */
#define SSM_IMPLEMENTATION
#include "../ssm.h"
#define SSM_BLAS_IMPLEMENTATION
#include "../ssm_blas.h"

int ssm_compile_check_blas(void);
int ssm_compile_check_blas(void) { return ssm_blas_backend()->gemm != NULL; }
