"""nn.Modules over ssmh.ops: BlockSparseLinear (block-ELL weights with an optional dynamic
topology that remaps Adam/AdamW states), ProjectionChain and OutputChain."""
import ctypes
import math

import torch
from torch import nn

from . import _abi
from ._abi import lib
from .ops import _segments, _v, _view, bell_transpose_index, block_sparse_linear, output_chain, projection_chain


class BlockSparseLinear(nn.Module):
    """y = x W^T + bias with W [out, in] stored block-ELL: every block-row of `block_size` output
    rows holds K tiles of block_size x block_size at columns col_idx[r] (K = k, or
    round(density * in/block_size)).

    topology: None (fixed sparsity pattern) or a dict of ssm_bell_topology_config fields
    (period, prune_frac, swap_ratio, epsilon, keep_alpha, grow_alpha, drop_score, cosine_decay,
    stop_step, seed, layer_id): then training forwards record x and dy, and after each
    optimizer step `layer.topology_step(step, optimizer)` folds them into the scores and, every
    `period` steps, prunes and regrows tiles; the optimizer's per-element states of `values`
    (Adam/AdamW exp_avg, exp_avg_sq, max_exp_avg_sq) move with their tiles and restart at zero
    for new ones. The topology code runs on the CPU (a CUDA layer's tensors are copied over).
    process_group: a torch.distributed group (or "default") to average the scores over before
    each update, so data-parallel ranks agree on the topology (ssm.h's all-reduce hook).
    """

    def __init__(self, in_features, out_features, block_size, density=None, k=None, bias=True, topology=None,
                 seed=0, process_group=None, device=None, dtype=None):
        super().__init__()
        B = block_size
        if in_features % B or out_features % B:
            raise ValueError("ssmh: in_features and out_features must be multiples of block_size")
        Cb, R = in_features // B, out_features // B
        if k is None:
            k = max(1, min(Cb, round((1.0 if density is None else density) * Cb)))
        self.in_features, self.out_features, self.block_size, self.k = in_features, out_features, B, k
        g = torch.Generator().manual_seed(seed)
        cols = torch.rand(R, Cb, generator=g).argsort(1)[:, :k].sort(1).values.to(torch.int32)
        self.values = nn.Parameter(torch.empty(R, k, B, B, device=device, dtype=dtype))
        self.bias = nn.Parameter(torch.empty(out_features, device=device, dtype=dtype)) if bias else None
        self.register_buffer("col_idx", cols.to(device))
        t_offsets, t_slots = bell_transpose_index(self.col_idx, Cb)
        self.register_buffer("t_offsets", t_offsets)
        self.register_buffer("t_slots", t_slots)
        bound = 1.0 / math.sqrt(k * B)  # fan-in of an output row: its K tiles
        with torch.no_grad():
            self.values.uniform_(-bound, bound, generator=None)
            if self.bias is not None:
                self.bias.uniform_(-bound, bound)
        self._topo = None
        self._x = self._dy = None
        self.topology = dict(topology) if topology is not None else None
        self.process_group = process_group
        self._make_topology()

    def _make_topology(self):
        if self.topology is None:
            return
        cfg = lib.ssm_bell_topology_config_init()
        for key, val in self.topology.items():
            if not hasattr(cfg, key) or key in ("allreduce", "allreduce_user"):
                raise ValueError(f"ssmh: unknown topology option {key!r}")
            setattr(cfg, key, val)
        self._allreduce = None
        if self.process_group is not None:
            self._allreduce = _abi.ALLREDUCE_FN(_make_allreduce(self.process_group))
            cfg.allreduce = ctypes.cast(self._allreduce, ctypes.c_void_p)
        ptr = ctypes.POINTER(_abi.BellTopology)()
        ctx = _abi.cpu_ctx()
        R, K = self.col_idx.shape
        Cb = self.in_features // self.block_size
        _abi.check(ctx, lib.ssm_bell_topology_create(ctx, ctypes.byref(cfg), R, Cb, K, ctypes.byref(ptr)))
        self._topo = ptr

    # copy.deepcopy / pickle: the C scores travel as extra state, the copy gets its own buffers
    def __getstate__(self):
        state = self.__dict__.copy()
        state["_topo_state"] = self.get_extra_state()
        state["_topo"] = state["_allreduce"] = None
        state["_x"] = state["_dy"] = None
        return state

    def __setstate__(self, state):
        topo_state = state.pop("_topo_state", None)
        super().__setstate__(state)
        self._topo = None
        self._make_topology()
        self.set_extra_state(topo_state)

    def __del__(self):
        if getattr(self, "_topo", None):
            lib.ssm_bell_topology_destroy(self._topo)
            self._topo = None

    def forward(self, x):
        y = block_sparse_linear(x, self.values, self.col_idx, self.bias, (self.t_offsets, self.t_slots))
        if self._topo is not None and self.training and torch.is_grad_enabled() and y.requires_grad:
            self._x = x.detach().reshape(-1, x.shape[-1])
            y.register_hook(self._record_dy)
        return y

    def _record_dy(self, dy):
        self._dy = dy.detach().reshape(-1, dy.shape[-1])

    def to_dense(self):
        """W [out, in] with zeros outside the active tiles (a differentiable torch expression)."""
        R, K, B, _ = self.values.shape
        Cb = self.in_features // B
        W = self.values.new_zeros(R, Cb, B, B)
        W = W.index_put((torch.arange(R, device=W.device)[:, None], self.col_idx.long()), self.values)
        return W.permute(0, 2, 1, 3).reshape(R * B, Cb * B)

    def observe(self):
        """Folds the recorded x, dy and values.grad of this step into the topology scores
        (topology_step calls it when it has not been called for the step)."""
        if self._topo is None or self._x is None or self._dy is None or self.values.grad is None:
            return
        x, dy, dv = (t.detach().cpu() for t in (self._x, self._dy, self.values.grad))
        ctx = _abi.cpu_ctx()
        _abi.check(ctx, lib.ssm_bell_topology_observe(ctx, self._topo, _v(x), _v(dy), _v(dv)))
        self._x = self._dy = None

    @torch.no_grad()
    def topology_step(self, global_step, optimizer=None):
        """Call after optimizer.step(): updates the topology on update steps and remaps the
        optimizer's states of `values`. Returns the report as a dict."""
        if self._topo is None:
            raise RuntimeError("ssmh: this BlockSparseLinear was built without topology=")
        self.observe()
        states = []
        if optimizer is not None and self.values in optimizer.state:
            st = optimizer.state[self.values]
            states = [st[k] for k in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq")
                      if k in st and torch.is_tensor(st[k]) and st[k].shape == self.values.shape]
        tensors = [self.values, self.col_idx, self.t_offsets, self.t_slots] + states
        host = [t if t.device.type == "cpu" and t.is_contiguous() else t.detach().cpu().contiguous() for t in tensors]
        opt = (ctypes.POINTER(_abi.Tensor) * max(1, len(states)))(*[ctypes.pointer(_view(t)) for t in host[4:]])
        rep = _abi.BellTopologyReport()
        ctx = _abi.cpu_ctx()
        _abi.check(ctx, lib.ssm_bell_topology_step(ctx, self._topo, int(global_step), _v(host[0]), _v(host[1]),
                                                   _v(host[2]), _v(host[3]), opt, len(states), ctypes.byref(rep)))
        for t, h in zip(tensors, host):
            if t is not h:
                t.copy_(h)
        return {f: getattr(rep, f) for f, _ in _abi.BellTopologyReport._fields_}

    def get_extra_state(self):
        if self._topo is None:
            return None
        t = self._topo.contents
        keep = torch.tensor([t.keep_score[i] for i in range(t.R * t.K)], dtype=torch.float64)
        grow = torch.tensor([t.grow_score[i] for i in range(t.R * t.C)], dtype=torch.float64)
        return {"keep_score": keep, "grow_score": grow, "observations": t.observations}

    def set_extra_state(self, state):
        if self._topo is None or state is None:
            return
        t = self._topo.contents
        for name in ("keep_score", "grow_score"):
            src = state[name].to(torch.float64).contiguous()
            ctypes.memmove(getattr(t, name), src.data_ptr(), src.numel() * 8)
        t.observations = int(state["observations"])

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, block_size={self.block_size}, "
                f"k={self.k}, bias={self.bias is not None}, topology={self._topo is not None}")


def _make_allreduce(group):
    """The topology's all-reduce hook over a torch.distributed group ("default" = the world):
    averages the score buffers in place (through a device copy for NCCL), so every rank picks
    the same topology."""
    import torch.distributed as dist

    def allreduce(user, data, count):
        try:
            g = None if group == "default" else group
            buf = torch.frombuffer((ctypes.c_double * count).from_address(data), dtype=torch.float64)
            if dist.get_backend(g) == "nccl":
                t = buf.to(torch.device("cuda", torch.cuda.current_device()))
                dist.all_reduce(t, group=g)
                buf.copy_(t.cpu())
            else:
                dist.all_reduce(buf, group=g)
            buf /= dist.get_world_size(g)
            return 0
        except Exception:  # noqa: BLE001 (reported as a backend error by the C side)
            return _abi.C["SSM_ERROR_BACKEND"]
    return allreduce


class ProjectionChain(nn.Module):
    """The input projections of a linear-RNN layer as one weight W [N, d_model] whose output
    columns are split into segments, each with its activation (and optional per-head L2 norm):
    segments = [(width, act, param, bias, l2_head), ...] (trailing fields optional), acts in
    ssmh.ACTS ("none", "silu", "sigmoid", "sigmoid2", "logsigmoid", "softplus", "relu",
    "gelu_tanh", "decay_gate", "softcap"). decay_gate segments use A_log (one per column, GDN's
    `-exp(A_log) softplus(z + dt_bias)`). forward(x [..., d_model]) -> list of segment outputs."""

    def __init__(self, d_model, segments, save_pre=True, fused=True, l2_eps=0.0, device=None, dtype=None):
        super().__init__()
        self.segments = [tuple(s) for s in segments]
        cols = _segments(segments)
        N = sum(cols[0])
        self.save_pre, self.fused, self.l2_eps = save_pre, fused, l2_eps
        self.weight = nn.Parameter(torch.empty(N, d_model, device=device, dtype=dtype))
        bound = 1.0 / math.sqrt(d_model)
        nn.init.uniform_(self.weight, -bound, bound)
        self.bias = nn.Parameter(torch.zeros(N, device=device, dtype=dtype)) if any(cols[3]) else None
        from .ops import ACTS
        G = sum(w for w, a in zip(cols[0], cols[1]) if a == ACTS["decay_gate"])
        self.A_log = (nn.Parameter(torch.empty(G, device=device, dtype=dtype).uniform_(1, 16).log_())
                      if G else None)

    def forward(self, x):
        return projection_chain(x, self.weight, self.segments, self.bias, self.A_log, self.save_pre, self.fused,
                                self.l2_eps)


class OutputChain(nn.Module):
    """y = (RMSNorm per head(o) * weight * gate(g)) W_o^T: fla's FusedRMSNormGated followed by
    o_proj in one op. o, g [..., d_in] -> y [..., d_out]; gate "silu" or "sigmoid"."""

    def __init__(self, d_in, d_out, head_dim=0, gate="silu", eps=1e-6, elementwise_affine=True, device=None,
                 dtype=None):
        super().__init__()
        self.head_dim, self.gate, self.eps = head_dim, gate, eps
        hd = head_dim or d_in
        self.weight = nn.Parameter(torch.ones(hd, device=device, dtype=dtype)) if elementwise_affine else None
        self.o_proj = nn.Parameter(torch.empty(d_out, d_in, device=device, dtype=dtype))
        nn.init.uniform_(self.o_proj, -1.0 / math.sqrt(d_in), 1.0 / math.sqrt(d_in))

    def forward(self, o, g):
        return output_chain(o, g, self.o_proj, self.weight, self.gate, self.head_dim, self.eps)
