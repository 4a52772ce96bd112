/* The dev harnesses that call private kernels or helpers of ssm_cuda.h (bell.cu, delta.cu,
   proj_wgmma.cu, onepass.cu: each includes the whole implementation) as one program, so the
   implementation compiles once for them all instead of once each (a compile of it takes
   minutes). Each harness keeps its variants and its own main (built alone when
   SSM_DEV_WHOLE is not defined); here each sits in its namespace and is picked by name:
     make build/dev_whole         this program; make build/dev_bell (dev_delta, dev_proj_wgmma,
                                  dev_onepass) also links build/dev_bell to it
     ./build/dev_bell ARGS...     the harness named by the program's name, ARGS as before
     ./build/dev_whole bell ARGS...   the same, picked by the first argument
   (bell, delta, proj_wgmma or onepass) */
#define SSM_DEV_WHOLE
#include "bell.cu"
#include "delta.cu"
#include "proj_wgmma.cu"
#include "onepass.cu"
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    static const struct {
        const char *name;
        int (*run)(int, char **);
    } harnesses[] = {{"bell", dev_bell::harness}, {"delta", dev_delta::harness}, {"proj_wgmma", dev_proj_wgmma::harness},
                       {"onepass", dev_onepass::harness}};
    const int n = (int)(sizeof harnesses / sizeof harnesses[0]);
    const char *base = strrchr(argv[0], '/');
    base = base ? base + 1 : argv[0];
    for (int i = 0; i < n; ++i) /* called as build/dev_NAME (the link make builds) */
        if (!strncmp(base, "dev_", 4) && !strcmp(base + 4, harnesses[i].name)) return harnesses[i].run(argc, argv);
    for (int i = 0; i < n; ++i) /* build/dev_whole NAME ARGS...: NAME stands in for the program's name */
        if (argc > 1 && !strcmp(argv[1], harnesses[i].name)) return harnesses[i].run(argc - 1, argv + 1);
    fprintf(stderr, "usage: %s bell|delta|proj_wgmma|onepass [ARGS...] (or run it as dev_bell, dev_delta, dev_proj_wgmma, dev_onepass)\n", argv[0]);
    return 2;
}
