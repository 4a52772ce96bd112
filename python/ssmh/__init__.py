"""ssmh: Python bindings of ssm.h (see the repository README, section PyTorch).

    import ssmh
    h = ssmh.linrec(A, b, h0, method="auto")                  # torch tensors, differentiable
    out, hT = ssmh.decay(log_decay, x, output_final_state=True)
    h = ssmh.scan(gates, tokens)                              # accelerated-scan's signature
    o, S = ssmh.chunk_gated_delta_rule(q, k, v, g, beta, output_final_state=True)  # fla's signature
    layer = ssmh.BlockSparseLinear(1024, 4096, block_size=32, density=0.25)
    q, k, v = ssmh.ProjectionChain(512, [(256, "silu", 0, False, 64), ...])(x)
    y = ssmh.OutputChain(256, 512, head_dim=64)(o, g)
Without torch, ssmh.cpu has numpy forward passes (ssmh.cpu.linrec, ssmh.cpu.decay).
"""
from . import _abi, cpu
from ._abi import METHODS, SSMError, layout_mismatches

__version__ = _abi.lib.ssmh_build_info().decode().split()[1]
HAS_CUDA = _abi.HAS_CUDA


def build_info():
    """What this build of libssmh.so contains (CPU backend, CUDA or not)."""
    return _abi.lib.ssmh_build_info().decode() + (" +cuda" if HAS_CUDA else "")


try:
    import torch  # noqa: F401
except ImportError:
    torch = None

if torch is not None:
    from .ops import (ACTS, GATES, bell_transpose_index, block_sparse_linear, chunk_delta_rule,  # noqa: F401
                      chunk_gated_delta_product, chunk_gated_delta_rule, decay, delta_rule, delta_step,
                      fused_recurrent_delta_rule, fused_recurrent_gated_delta_rule, linrec, output_chain,
                      projection_chain, scan)
    from .nn import BlockSparseLinear, OutputChain, ProjectionChain  # noqa: F401
