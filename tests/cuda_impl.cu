/* The CUDA implementation as one object, linked into the CUDA test, fuzz, benchmark and dev
   programs (mk/cuda.mk), so the library's kernels compile once per build instead of once per
   program (the STB way: one translation unit holds the implementation). ssm.h's
   implementation lives in each program; dev harnesses that call private kernels include the
   whole implementation themselves. */
#define SSM_CUDA_IMPLEMENTATION
#include "../ssm_cuda.h"
