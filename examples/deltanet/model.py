"""A small DeltaNet language model (Schlag et al. 2021; Yang et al. 2024, "Parallelizing linear
transformers with the delta rule over sequence length") whose recurrence solver is a flag.

Layer (fla's DeltaNet layout): x -> RMSNorm -> [q | k | v | beta | g] = one input projection
(beta = sigmoid), short causal depthwise conv (4 taps) + SiLU on q, k, v, L2 norm on q and k,
the delta rule S_t = (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T, o_t = scale S_t^T q_t,
then per-head RMSNorm(o) * weight * SiLU(g) and o_proj; residual; RMSNorm -> SwiGLU MLP;
residual. Tied input / output embeddings, byte vocabulary.

Solvers (`solver=`), all on the same parameters:
  delta    ssmh.delta_rule, the chunked WY/UT delta-rule op (default)
  cr       ssmh.linrec, method "cr" (cyclic reduction), on the materialized transitions
           A_t = I - beta_t k_t k_t^T and inputs b_t = beta_t k_t v_t^T (state [K, V] per head)
  scan_hs  the same dense recurrence by the Hillis-Steele scan
  fla      fla.ops.delta_rule.chunk_delta_rule (when fla is installed)
  torch    a token loop in plain torch (the reference for checks; tiny sizes only)
Chains (`chains=`): "ssmh" runs the input projection and the output norm-gate-projection
through ssmh's projection and output chains, "torch" through plain torch on the same weights,
"auto" picks ssmh where the backend has them for the device (probed once) and torch otherwise.
`model.chains_used` says which one ran.
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

SOLVERS = ("delta", "cr", "scan_hs", "fla", "torch")


def rmsnorm(x, weight, eps=1e-6):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * weight


def l2norm(x, eps=1e-6):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).sum(-1, keepdim=True) + eps)).to(x.dtype)


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(d)), eps

    def forward(self, x):
        return rmsnorm(x, self.weight, self.eps)


def _autocast_dtype(x):
    if x.is_cuda and torch.is_autocast_enabled("cuda"):
        return torch.get_autocast_dtype("cuda")
    if not x.is_cuda and torch.is_autocast_enabled("cpu"):
        return torch.get_autocast_dtype("cpu")
    return None


_CHAINS_OK = {}


def ssmh_chains_supported(device, dtype=torch.float32):
    """Whether ssmh's projection and output chains run on this device (one tiny call of each;
    a backend without them answers SSM_ERROR_UNSUPPORTED)."""
    key = (torch.device(device).type, dtype)
    if key not in _CHAINS_OK:
        import ssmh
        try:
            x = torch.randn(4, 8, device=device, dtype=dtype)
            W = torch.randn(8, 8, device=device, dtype=dtype)
            ssmh.projection_chain(x, W, [(8, "sigmoid")])
            ssmh.output_chain(x, x, W, torch.ones(8, device=device, dtype=dtype), "silu", 8, 1e-6)
            _CHAINS_OK[key] = True
        except ssmh.SSMError as e:
            if e.code != ssmh._abi.C["SSM_ERROR_UNSUPPORTED"]:
                raise
            _CHAINS_OK[key] = False
    return _CHAINS_OK[key]


# ---- recurrence solvers: q, k [B,T,H,K] (L2-normed), v [B,T,H,V], beta [B,T,H] -> o [B,T,H,V] ----

def delta_torch(q, k, v, beta, scale):
    """Token loop, f32 state: the reference."""
    B, T, H, K = q.shape
    dt = torch.promote_types(q.dtype, torch.float32)  # f32 state (f64 for f64 inputs)
    with torch.autocast(q.device.type, enabled=False):
        S = q.new_zeros(B, H, K, v.shape[-1], dtype=dt)
        out = []
        for t in range(T):
            kt, vt, qt, bt = k[:, t].to(dt), v[:, t].to(dt), q[:, t].to(dt), beta[:, t].to(dt)
            kS = torch.einsum("bhk,bhkv->bhv", kt, S)
            S = S + torch.einsum("bhk,bhv->bhkv", kt, bt[..., None] * (vt - kS))
            out.append(scale * torch.einsum("bhkv,bhk->bhv", S, qt))
        return torch.stack(out, 1).to(q.dtype)


def delta_dense(q, k, v, beta, scale, method, dtype):
    """The delta rule as a dense linear recurrence S_t = A_t S_{t-1} + b_t with A_t, b_t
    materialized ([B*H, T, K, K] and [B*H, T, K, V]) and solved by ssmh.linrec."""
    import ssmh
    with torch.autocast(q.device.type, enabled=False):
        return _delta_dense(ssmh, q, k, v, beta, scale, method, dtype)


def _delta_dense(ssmh, q, k, v, beta, scale, method, dtype):
    B, T, H, K = q.shape
    kf = k.to(dtype).permute(0, 2, 1, 3).reshape(B * H, T, K)
    vf = v.to(dtype).permute(0, 2, 1, 3).reshape(B * H, T, -1)
    bf = beta.to(dtype).permute(0, 2, 1).reshape(B * H, T, 1, 1)
    eye = torch.eye(K, device=q.device, dtype=dtype)
    A = eye - bf * kf[..., :, None] * kf[..., None, :]
    b = bf * kf[..., :, None] * vf[..., None, :]
    S = ssmh.linrec(A, b, method=method)                       # [B*H, T, K, V]
    qf = q.to(dtype).permute(0, 2, 1, 3).reshape(B * H, T, K)
    o = scale * torch.einsum("stkv,stk->stv", S, qf)
    return o.reshape(B, H, T, -1).permute(0, 2, 1, 3).to(q.dtype)


def recurrence(solver, q, k, v, beta, scale, dense_dtype=torch.float32):
    if solver == "delta":
        import ssmh
        return ssmh.delta_rule(q, k, v, beta, scale=scale, method="chunked")[0]
    if solver in ("cr", "scan_hs"):
        return delta_dense(q, k, v, beta, scale, solver, dense_dtype)
    if solver == "fla":
        from fla.ops.delta_rule import chunk_delta_rule
        return chunk_delta_rule(q, k, v, beta, scale=scale)[0]
    if solver == "torch":
        return delta_torch(q, k, v, beta, scale)
    raise ValueError(f"unknown solver {solver!r} (one of {SOLVERS})")


# ---- the model ----------------------------------------------------------------------------------

class DeltaNetAttention(nn.Module):
    def __init__(self, d, heads, head_dim, conv=4):
        super().__init__()
        self.H, self.Dh, self.conv = heads, head_dim, conv
        D = heads * head_dim
        self.D = D
        # one input projection, columns [q | k | v | beta | g] (the projection chain's segments)
        self.in_proj = nn.Parameter(torch.empty(3 * D + heads + D, d))
        nn.init.normal_(self.in_proj, std=d ** -0.5)
        self.conv_w = nn.Parameter(torch.empty(3 * D, conv))   # depthwise causal conv on q, k, v
        nn.init.normal_(self.conv_w, std=conv ** -0.5)
        self.o_norm = nn.Parameter(torch.ones(head_dim))         # per-head RMSNorm weight
        self.o_proj = nn.Parameter(torch.empty(d, D))
        nn.init.normal_(self.o_proj, std=D ** -0.5)

    def project(self, x, chains):
        D, H = self.D, self.H
        widths = [3 * D, H, D]
        if chains == "ssmh":
            import ssmh
            dt = _autocast_dtype(x)
            W = self.in_proj.to(dt) if dt else self.in_proj
            return ssmh.projection_chain(x.to(W.dtype), W, [(3 * D, "none"), (H, "sigmoid"), (D, "none")])
        qkv, beta, g = F.linear(x, self.in_proj).split(widths, -1)
        return qkv, torch.sigmoid(beta), g

    def output(self, o, g, chains):
        if chains == "ssmh":
            import ssmh
            W = self.o_proj.to(o.dtype)
            return ssmh.output_chain(o, g.to(o.dtype), W, self.o_norm.to(o.dtype), "silu", self.Dh, 1e-6)
        B, T = o.shape[:2]
        on = rmsnorm(o.view(B, T, self.H, self.Dh), self.o_norm).view(B, T, self.D)
        return F.linear(on * F.silu(g.to(on.dtype)), self.o_proj)

    def forward(self, x, solver, chains, dense_dtype):
        B, T, _ = x.shape
        qkv, beta, g = self.project(x, chains)
        # causal depthwise conv: pad 3 on the left, SiLU
        y = F.conv1d(F.pad(qkv.transpose(1, 2), (self.conv - 1, 0)), self.conv_w.to(qkv.dtype)[:, None, :],
                     groups=3 * self.D)
        q, k, v = F.silu(y).transpose(1, 2).split(self.D, -1)
        q = l2norm(q.reshape(B, T, self.H, self.Dh))
        k = l2norm(k.reshape(B, T, self.H, self.Dh))
        v = v.reshape(B, T, self.H, self.Dh)
        beta = beta.contiguous()
        o = recurrence(solver, q.contiguous(), k.contiguous(), v.contiguous(), beta, self.Dh ** -0.5, dense_dtype)
        return self.output(o.reshape(B, T, self.D), g, chains)


class SwiGLU(nn.Module):
    def __init__(self, d, hidden):
        super().__init__()
        self.w12 = nn.Linear(d, 2 * hidden, bias=False)
        self.w3 = nn.Linear(hidden, d, bias=False)

    def forward(self, x):
        a, b = self.w12(x).chunk(2, -1)
        return self.w3(F.silu(a) * b)


class Block(nn.Module):
    def __init__(self, d, heads, head_dim, mlp_hidden):
        super().__init__()
        self.n1, self.attn = RMSNorm(d), DeltaNetAttention(d, heads, head_dim)
        self.n2, self.mlp = RMSNorm(d), SwiGLU(d, mlp_hidden)

    def forward(self, x, solver, chains, dense_dtype):
        x = x + self.attn(self.n1(x), solver, chains, dense_dtype)
        return x + self.mlp(self.n2(x))


class DeltaNetLM(nn.Module):
    def __init__(self, vocab=256, d=256, layers=6, heads=8, head_dim=32, mlp_hidden=None, solver="delta",
                 chains="auto", dense_dtype=torch.float32):
        super().__init__()
        self.cfg = dict(vocab=vocab, d=d, layers=layers, heads=heads, head_dim=head_dim,
                        mlp_hidden=mlp_hidden or 256 * ((8 * d // 3 + 255) // 256))
        self.embed = nn.Embedding(vocab, d)
        nn.init.normal_(self.embed.weight, std=d ** -0.5)
        self.blocks = nn.ModuleList(Block(d, heads, head_dim, self.cfg["mlp_hidden"]) for _ in range(layers))
        self.norm = RMSNorm(d)
        self.solver, self.chains, self.dense_dtype = solver, chains, dense_dtype
        self.chains_used = None
        for name, p in self.named_parameters():  # GPT-2's scaled init of the residual outputs
            if name.endswith("o_proj") or name.endswith("w3.weight"):
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * layers))

    def resolve_chains(self, device):
        if self.chains == "auto":
            self.chains_used = "ssmh" if ssmh_chains_supported(device) else "torch"
        else:
            self.chains_used = self.chains
        return self.chains_used

    def forward(self, idx):
        chains = self.chains_used or self.resolve_chains(idx.device)
        x = self.embed(idx)
        for blk in self.blocks:
            x = blk(x, self.solver, chains, self.dense_dtype)
        return F.linear(self.norm(x), self.embed.weight)  # tied embeddings
