"""A generative-recommenders-style model (HSTU) trained on npu, checked step by step vs the CPU.

    python -m fbgemm_npu.examples.hstu_gr [--steps 20] [--batch-size 4] [--max-items 32] ...

Each user's history is ``n_b`` events ``(item, action, timestamp)`` (random but seeded; the
lengths vary, one user of a step has 0 or 1 events, one the longest history), each event two
tokens as in GR's interleaved sequences and Rec SDK's relative bias (item, then action), so a
user is ``2 n_b`` jagged tokens and ``S = 2 * max_items`` is the attention's ``max_seq_len``.
Items follow a fixed hidden successor table most of the time, so there is something to learn.

Model (GR's ``HSTU`` / ``SequentialTransductionUnitJagged``, dropout left out), ``x`` the
token embeddings ``[T, D]`` (``torch.nn.Embedding`` of items and of actions, interleaved)::

    rab_l   = relative_attn_bias_time(ts, w_time)[l] + relative_attn_bias_pos(P, I, 2 n)  [B,S,S]
    u, v, q, k = split(silu(LayerNorm(x) W_uvqk + b))                     per layer l = 0, 1
    a       = hstu_jagged(q, k, v, attn_bias=rab_l, causal, max_seq_len=S, alpha=1/sqrt(d_qk))
            = sum_j silu(alpha (q_i . k_j + rab_ij)) / S * v_j           (j <= i, one user)
    x       = x + (u * LayerNorm(a)) W_o + b_o

``w_time`` ``(layers, buckets + 1)`` is learned (the time bias's autograd); the position table
``P`` (GR's Toeplitz of a ``2 max_items - 1`` table, each entry a 2x2 block) is a fixed buffer:
``relative_attn_bias_pos`` has no autograd (Rec SDK registers none).  Next-item loss: the output
at the action token of event ``i`` against item ``i + 1``, an in-batch sampled softmax of cosine
similarities over the step's target items (a duplicate target is not a negative), temperature
0.1; Adam (``foreach=False``: one update code path on both devices).

Both runs build the model on the CPU from the seed and train on the same batches.  On npu, step 0
is traced and every other step counted (:mod:`fbgemm_npu.examples.dlrm_steps`, the main job's
recorder), and each step's loss is read with ``fbgemm_npu.check(loss)``, which raises a deferred
data check that failed in that step.  Prints both runs' losses step by step and exits 1 unless

* every npu loss is within ``ATOL + RTOL * |cpu|`` of the CPU loss (1e-5 + 1e-4 |loss|, as the
  DLRM job).  Not bit-equal: the mxrec ops are (one tensor program on both devices, equal outputs
  and gradients for equal inputs), but torch's own ``layer_norm`` and ``silu`` backward run their
  composite decompositions on the npu device and fused kernels on the CPU (about 1e-7 apart), and
  a 910B's matmuls sum in their own order;
* the loss went down (the mean of the last 5 steps below that of the first 5);
* fbgemm_npu's share of every npu step has no AI-CPU launch, sync or stall, and the trace of
  step 0 shows every mxrec op on our npu kernel and no float tensor leaving the device.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

__all__ = ["Batch", "GRConfig", "HSTUModel", "RunResult", "make_batches", "main", "train"]

MX = torch.ops.mxrec
# |loss_npu - loss_cpu| <= ATOL + RTOL * |loss_cpu| at every step (module docstring: why not 0)
ATOL = 1e-5
RTOL = 1e-4


@dataclass(frozen=True)
class GRConfig:
    """Everything that defines a run: the same config gives the same losses on npu and CPU."""

    batch_size: int = 4
    max_items: int = 32  # events per user at most: max_seq_len = 2 * max_items tokens
    num_items: int = 100
    num_actions: int = 4
    dim: int = 32
    heads: int = 2
    layers: int = 2
    num_buckets: int = 128  # time buckets: w_time has num_buckets + 1 columns
    bucket_divisor: float = 0.301  # GR's and Rec SDK's log-bucket width
    temperature: float = 0.1
    follow: float = 0.8  # probability that the next item is the hidden successor
    steps: int = 20
    lr: float = 1e-2
    seed: int = 0

    @property
    def max_seq_len(self) -> int:
        return 2 * self.max_items


@dataclass
class Batch:
    """One step's data; tensors on one device, ``past_valid_lens`` host ints (the pos op's)."""

    item_ids: torch.Tensor  # [E] int64, E = events of the step, users in order
    action_ids: torch.Tensor  # [E] int64
    seq_offset: torch.Tensor  # [B + 1] int32, token offsets (2 per event)
    timestamps: torch.Tensor  # [B, max_items] int32, padded with each user's last stamp
    query_rows: torch.Tensor  # [P] int64: the action token of every event with a successor
    target_ids: torch.Tensor  # [P] int64: that successor's item
    past_valid_lens: list[int] = field(default_factory=list)  # tokens of each user

    def to(self, device: torch.device) -> Batch:
        moved = {k: v.to(device) for k, v in vars(self).items() if isinstance(v, torch.Tensor)}
        return Batch(**moved, past_valid_lens=list(self.past_valid_lens))


def make_batches(cfg: GRConfig) -> list[Batch]:
    """``cfg.steps`` host batches from ``cfg.seed`` alone (host loops: this is the data loader)."""
    g = torch.Generator().manual_seed(cfg.seed + 1)
    successor = torch.randperm(cfg.num_items, generator=g)
    out = []
    for step in range(cfg.steps):
        lens = torch.randint(2, cfg.max_items, (cfg.batch_size,), generator=g)
        lens[0], lens[-1] = step % 2, cfg.max_items  # a (nearly) empty user and a full one
        items, actions, stamps, rows, targets = [], [], [], [], []
        start = 0
        for n in lens.tolist():
            seq = [int(torch.randint(cfg.num_items, (1,), generator=g))][:n]
            for _ in range(n - 1):
                follow = torch.rand((), generator=g).item() < cfg.follow
                nxt = (
                    successor[seq[-1]]
                    if follow
                    else torch.randint(cfg.num_items, (1,), generator=g)
                )
                seq.append(int(nxt))
            gaps = torch.randint(1, 10**5, (n,), generator=g)
            t = (int(torch.randint(10**6, (1,), generator=g)) + gaps.cumsum(0)).to(torch.int32)
            stamps.append(F.pad(t, (0, cfg.max_items - n), value=int(t[-1]) if n else 0))
            items += seq
            actions += torch.randint(cfg.num_actions, (n,), generator=g).tolist()
            rows += [2 * (start + i) + 1 for i in range(n - 1)]  # action token of event i
            targets += seq[1:]
            start += n
        tokens = [0, *(2 * lens).cumsum(0).tolist()]
        out.append(
            Batch(
                item_ids=torch.tensor(items, dtype=torch.int64),
                action_ids=torch.tensor(actions, dtype=torch.int64),
                seq_offset=torch.tensor(tokens, dtype=torch.int32),
                timestamps=torch.stack(stamps),
                query_rows=torch.tensor(rows, dtype=torch.int64),
                target_ids=torch.tensor(targets, dtype=torch.int64),
                past_valid_lens=(2 * lens).tolist(),
            )
        )
    return out


def _pos_tables(cfg: GRConfig, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """(rel_pos_bias, identity) ``(S, S)``: GR's Toeplitz ``p[j - i + s - 1]`` of a ``2s - 1``
    table (s = max_items), each entry a 2x2 block; identity = the 2x2 blocks of one event."""
    s = cfg.max_items
    table = 0.02 * torch.randn(2 * s - 1, generator=g)
    i = torch.arange(s)
    toeplitz = table[i[None, :] - i[:, None] + s - 1]
    block = torch.ones(2, 2)
    return torch.kron(toeplitz, block), torch.kron(torch.eye(s), block)


class HSTULayer(torch.nn.Module):
    """GR's ``SequentialTransductionUnitJagged``: uvqk projection, HSTU attention, gated output."""

    def __init__(self, cfg: GRConfig) -> None:
        super().__init__()
        self.heads, self.d = cfg.heads, cfg.dim // cfg.heads  # d_qk = d_v = D / N
        self.norm_in = torch.nn.LayerNorm(cfg.dim)
        self.uvqk = torch.nn.Linear(cfg.dim, 4 * cfg.dim)
        self.norm_attn = torch.nn.LayerNorm(cfg.dim)
        self.out = torch.nn.Linear(cfg.dim, cfg.dim)
        self.max_seq_len = cfg.max_seq_len

    def forward(
        self, x: torch.Tensor, seq_offset: torch.Tensor, bias: torch.Tensor
    ) -> torch.Tensor:
        t, n, d = x.size(0), self.heads, self.d
        u, v, q, k = F.silu(self.uvqk(self.norm_in(x))).chunk(4, dim=1)
        attn = MX.hstu_jagged.equal(
            q.reshape(t, n, d),
            k.reshape(t, n, d),
            v.reshape(t, n, d),
            attn_bias=bias,
            mask_type=0,  # causal within each user
            max_seq_len=self.max_seq_len,  # given: no read-back of the longest user
            seq_offset=seq_offset,
            alpha=1.0 / math.sqrt(d),
        )
        return x + self.out(u * self.norm_attn(attn.reshape(t, n * d)))


class HSTUModel(torch.nn.Module):
    """Item and action embeddings, the relative bias, ``cfg.layers`` HSTU layers, a final norm."""

    def __init__(self, cfg: GRConfig) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(cfg.seed)
        self.cfg = cfg
        self.items = torch.nn.Embedding(cfg.num_items, cfg.dim)
        self.actions = torch.nn.Embedding(cfg.num_actions, cfg.dim)
        self.time_weights = torch.nn.Parameter(0.02 * torch.randn(cfg.layers, cfg.num_buckets + 1))
        rel_pos, identity = _pos_tables(cfg, g)
        self.register_buffer("rel_pos_bias", rel_pos)
        self.register_buffer("identity", identity)
        self.layers = torch.nn.ModuleList(HSTULayer(cfg) for _ in range(cfg.layers))
        self.norm_out = torch.nn.LayerNorm(cfg.dim)

    def bias(self, batch: Batch) -> torch.Tensor:
        """``[layers, B, N, S, S]``: each layer's time bias plus the shared position bias."""
        cfg = self.cfg
        rab_time = MX.relative_attn_bias_time(
            batch.timestamps, self.time_weights, cfg.bucket_divisor
        )  # [layers, B, S, S]
        rab_pos = MX.relative_attn_bias_pos(self.rel_pos_bias, self.identity, batch.past_valid_lens)
        rab = rab_time + rab_pos  # broadcast over the layers
        b, s = rab_pos.shape[:2]
        return rab.unsqueeze(2).expand(cfg.layers, b, cfg.heads, s, s)

    def forward(self, batch: Batch) -> torch.Tensor:
        """The step's loss: in-batch sampled softmax of next-item cosine similarities."""
        e = self.items.weight.size(1)
        x = torch.stack((self.items(batch.item_ids), self.actions(batch.action_ids)), 1)
        x = x.view(-1, e)  # [2E, D]: item token, then action token, per event
        bias = self.bias(batch)
        for layer, rab in zip(self.layers, bias.unbind(0), strict=True):
            x = layer(x, batch.seq_offset, rab)
        query = F.normalize(self.norm_out(x).index_select(0, batch.query_rows), dim=1)
        target = F.normalize(self.items(batch.target_ids), dim=1)
        logits = query @ target.t() / self.cfg.temperature
        same = batch.target_ids[:, None] == batch.target_ids[None, :]
        diag = torch.eye(same.size(0), dtype=torch.bool, device=same.device)
        logits = logits.masked_fill(same & ~diag, float("-inf"))  # a duplicate is no negative
        labels = torch.arange(logits.size(0), device=logits.device)
        return F.cross_entropy(logits, labels)


@dataclass
class RunResult:
    """One run: the loss of every step and, on npu, fbgemm_npu's counted share of each step."""

    device: str
    losses: list[float] = field(default_factory=list)
    ours: list[dict[str, int]] = field(default_factory=list)  # a Cost per step (as_dict)
    whole: list[dict[str, int]] = field(default_factory=list)
    trace_ok: bool | None = None  # step 0 traced: every mxrec op on our kernel, nothing to host
    trace_summary: str = ""


def train(cfg: GRConfig, device: torch.device, count: bool | None = None) -> RunResult:
    """Train ``cfg.steps`` steps on ``device``; ``count`` (default: on a non-CPU device) traces
    step 0 and counts every other step (:class:`~fbgemm_npu.examples.dlrm_steps.StepRecorder`)."""
    import fbgemm_npu
    from fbgemm_npu.examples.dlrm_steps import StepRecorder

    torch.manual_seed(cfg.seed)
    model = HSTUModel(cfg).to(device)  # built on the CPU from the seed: the same on any device
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr, foreach=False)
    count = device.type != "cpu" if count is None else count
    result = RunResult(device=str(device))
    hook = StepRecorder(device.type) if count else None
    for i, batch in enumerate(make_batches(cfg)):
        batch = batch.to(device)  # uploaded before the step: the step itself moves no data in

        def step(batch: Batch = batch) -> torch.Tensor:
            optimizer.zero_grad()
            loss = model(batch)
            loss.backward()
            optimizer.step()
            return loss.detach()

        loss = hook(i, step) if hook is not None else step()
        # the step's one read: the loss, and with it the data checks our kernels queued
        (value,) = fbgemm_npu.check(loss)
        result.losses.append(float(value))
    if hook is not None:
        result.ours, result.whole = hook.ours, hook.whole
        result.trace_ok, result.trace_summary = hook.traced[0].ok, hook.traced[0].summary()
    return result


def losses_agree(npu: list[float], cpu: list[float], atol: float, rtol: float) -> bool:
    """Every step's npu loss within ``atol + rtol * |cpu|`` of the CPU loss (and finite)."""
    return len(npu) == len(cpu) > 0 and all(
        math.isfinite(a) and abs(a - b) <= atol + rtol * abs(b)
        for a, b in zip(npu, cpu, strict=True)
    )


def went_down(losses: list[float], window: int = 5) -> bool:
    """The mean of the last ``window`` losses is below the mean of the first ``window``."""
    w = max(1, min(window, len(losses) // 2))
    return len(losses) >= 2 and sum(losses[-w:]) < sum(losses[:w])


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m fbgemm_npu.examples.hstu_gr",
        description="Train a small HSTU (generative recommenders) on npu; check vs CPU.",
    )
    d = GRConfig()
    p.add_argument("--steps", type=int, default=d.steps)
    p.add_argument("--batch-size", type=int, default=d.batch_size, help="users per step")
    p.add_argument("--max-items", type=int, default=d.max_items, help="events per user at most")
    p.add_argument("--num-items", type=int, default=d.num_items)
    p.add_argument("--dim", type=int, default=d.dim, help="model width, a multiple of --heads")
    p.add_argument("--heads", type=int, default=d.heads)
    p.add_argument("--layers", type=int, default=d.layers)
    p.add_argument("--lr", type=float, default=d.lr)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--atol", type=float, default=ATOL, help="loss tolerance, absolute")
    p.add_argument("--rtol", type=float, default=RTOL, help="loss tolerance, relative")
    args = p.parse_args(argv)
    if min(args.steps, args.batch_size, args.heads, args.layers) < 1 or args.max_items < 2:
        p.error("--steps, --batch-size, --heads, --layers must be >= 1, --max-items >= 2")
    if args.dim % args.heads:
        p.error("--dim must be a multiple of --heads")
    return args


def config(args: argparse.Namespace) -> GRConfig:
    return GRConfig(
        batch_size=args.batch_size, max_items=args.max_items, num_items=args.num_items,
        dim=args.dim, heads=args.heads, layers=args.layers, steps=args.steps, lr=args.lr,
        seed=args.seed,
    )  # fmt: skip


def report(args: argparse.Namespace, npu: RunResult, cpu: RunResult) -> bool:
    """Print both runs step by step; True when every check passed."""
    from fbgemm_npu.testing.cost_910b import Cost, cells

    print("\nper npu step, fbgemm_npu's share (the mxrec ops and their autograd) and, after the |,")
    print("the whole step's: launches, AI-CPU launches, syncs + stalls, MB (dlrm_steps.py)")
    print(f"step  {'npu loss':>10}  {'cpu loss':>10}  {'|diff|':>8}  ours  |  whole step")
    for i, (a, b) in enumerate(zip(npu.losses, cpu.losses, strict=True)):
        ours, whole = "  ".join(cells(Cost(**npu.ours[i]))), "  ".join(cells(Cost(**npu.whole[i])))
        print(f"{i:>4}  {a:>10.6f}  {b:>10.6f}  {abs(a - b):>8.1e}  {ours}  |  {whole}")
    agree = losses_agree(npu.losses, cpu.losses, args.atol, args.rtol)
    exact = npu.losses == cpu.losses
    down = went_down(npu.losses)
    waits = [Cost(**c) for c in npu.ours]
    clean = all(c.ai_cpu == c.syncs == c.stalls == 0 for c in waits)
    print(f"losses npu vs cpu: {'bit-equal' if exact else 'differ'}; within "
          f"{args.atol:g} + {args.rtol:g}*|cpu|: {'OK' if agree else 'MISMATCH'}")  # fmt: skip
    print(f"loss went down ({npu.losses[0]:.5f} -> {npu.losses[-1]:.5f}): {'OK' if down else 'NO'}")
    print(f"fbgemm_npu's share of every npu step: 0 AI-CPU, 0 syncs, 0 stalls: "
          f"{'OK' if clean else 'FAILED'}")  # fmt: skip
    print(f"trace of step 0: mxrec ops all on our npu kernels, no float tensor left the device: "
          f"{'OK' if npu.trace_ok else 'FAILED'}")  # fmt: skip
    if not npu.trace_ok:
        print(npu.trace_summary)
    ok = agree and down and clean and bool(npu.trace_ok)
    print("\nPASSED" if ok else "\nFAILED")
    return ok


def run(args: argparse.Namespace) -> tuple[RunResult, RunResult]:
    """Both runs of ``args``, (npu, cpu); npu is the real device, else the simulated one (as the
    DLRM job picks it, and says which)."""
    from fbgemm_npu.examples.dlrm import _activate_device

    _activate_device()
    cfg = config(args)
    print(f"{cfg.steps} steps, {cfg.batch_size} users x <= {cfg.max_items} events (2 tokens "
          f"each), D {cfg.dim}, {cfg.heads} heads, {cfg.layers} HSTU layers")  # fmt: skip
    return train(cfg, torch.device("npu")), train(cfg, torch.device("cpu"))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    npu, cpu = run(args)
    return 0 if report(args, npu, cpu) else 1


if __name__ == "__main__":
    sys.exit(main())
