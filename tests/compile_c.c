/* Compiles every header with its implementation: as C99 (strict), as C++ and via nvcc. */
#define SSM_IMPLEMENTATION
#include "../ssm.h"
#include "../ssm_blas.h" /* declarations only (the implementation needs blis.h) */

int ssm_compile_check(void);
int ssm_compile_check(void) { return (int)ssm_result_string(SSM_OK)[0]; }
