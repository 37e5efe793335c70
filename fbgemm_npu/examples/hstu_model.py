"""The HSTU example's model and data: a sequential recommender on torchrec's EmbeddingCollection.

Data (:func:`batches`): each user's history is ``n_b`` events ``(item, action, timestamp)``,
random but seeded (items follow a hidden successor table most of the time, so there is something
to learn), each event two tokens as GR's interleaved sequences and Rec SDK's relative bias want
(item, then action): a user is ``2 n_b`` jagged tokens, ``S = 2 * max_items`` the attention's
``max_seq_len``.  The ids travel in one ``KeyedJaggedTensor`` of four jagged features, one bag
per user: ``item`` and ``action`` (the history), ``target`` (the next event's item, ``n_b - 1``
per user) and ``negative`` (``K`` uniform item ids per target, the sampled softmax's
negatives).  ``item``, ``target`` and ``negative`` share the item table.

Model (:class:`HSTU`; GR's ``HSTU`` / ``SequentialTransductionUnitJagged`` with Rec SDK's fused
ops), ``x`` the token embeddings ``[T, D]`` from the ``EmbeddingCollection``::

    rab_l      = relative_attn_bias_time(ts, w_time)[l] + relative_attn_bias_pos(P, I, 2 n)
    u,v,q,k,z  = in_linear_silu(LayerNorm(x), W_uvqk, b_uvqk, [D, D, D, D])   per layer l
    a          = hstu_jagged(q, k, v, attn_bias=rab_l, causal, max_seq_len=S, alpha=1/sqrt(d))
    y          = norm_multiply_dropout(a, u, g, b, 1e-5, p)     (ln_mul(a, u, g, b) where p = 0)
    x          = x + y W_o + b_o

The loss: the output at the action token of event ``i`` (final LayerNorm, L2-normalised) against
the item of event ``i + 1`` and its ``K`` sampled negatives (cosine similarities over a
temperature; a negative equal to the target is masked out: an accidental hit is no negative),
cross entropy with the target as the label, summed over the rank's rows and divided by the
global batch's rows over the world size: the mean over the ranks of the ranks' losses is the
mean over the global batch, whatever the number of ranks.  ``w_time`` ``(layers, buckets + 1)`` is
learned; the position table ``P`` (GR's Toeplitz of a ``2 max_items - 1`` table, each entry a
2x2 block) is a fixed buffer: ``relative_attn_bias_pos`` has no autograd (Rec SDK has none).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

__all__ = ["FEATURES", "Batch", "HSTU", "HSTUConfig", "batches", "build_model"]

MX = torch.ops.mxrec
FEATURES = ("item", "action", "target", "negative")  # the KJT's keys, in this order


@dataclass(frozen=True)
class HSTUConfig:
    """Everything that defines a run: the same config gives the same losses on npu and CPU."""

    batch_size: int = 8  # users per rank per step
    steps: int = 20
    max_items: int = 16  # events per user at most: max_seq_len = 2 * max_items tokens
    num_items: int = 200
    num_actions: int = 4
    dim: int = 32  # model width = embedding dim, a multiple of 4 (TBE) and of heads
    heads: int = 2
    layers: int = 3
    negatives: int = 16  # sampled negatives per target
    num_buckets: int = 128  # time buckets: w_time has num_buckets + 1 columns
    bucket_divisor: float = 0.301  # GR's and Rec SDK's log-bucket width
    temperature: float = 0.1
    dropout: float = 0.0  # norm_multiply_dropout's ratio (0: ln_mul)
    follow: float = 0.8  # probability that the next item is the hidden successor
    lr: float = 3e-3  # AdamW, the dense parameters
    emb_lr: float = 0.03  # row-wise AdaGrad fused into the embedding backward
    seed: int = 0
    sharding_type: str = "row_wise"  # dlrm_train.SHARDING_TYPES or "auto"

    @property
    def max_seq_len(self) -> int:
        return 2 * self.max_items

    @property
    def embedding_dim(self) -> int:  # the name dlrm_train.make_plan reads
        return self.dim

    def table_names(self) -> list[str]:
        return ["t_item", "t_action"]


@dataclass
class Batch:
    """One rank's step: tensors on one device; host numbers for the ops that take host ints."""

    sparse: object  # KeyedJaggedTensor of FEATURES, one bag per user
    seq_offset: torch.Tensor  # [B + 1] int32 token offsets (2 per event)
    timestamps: torch.Tensor  # [B, max_items] int32, padded with each user's last stamp
    query_rows: torch.Tensor  # [P] int64: the action token of every event with a successor
    hits: torch.Tensor  # [P, K] bool: negative k of row p is row p's target (masked out)
    past_valid_lens: list[int] = field(default_factory=list)  # tokens of each user
    loss_scale: float = 1.0  # world / rows of the global batch
    users: int = 0  # users of the global batch (samples/s)

    def to(self, device: torch.device) -> Batch:
        return Batch(
            self.sparse.to(device),  # type: ignore[attr-defined]
            *(t.to(device) for t in (self.seq_offset, self.timestamps, self.query_rows, self.hits)),
            past_valid_lens=list(self.past_valid_lens),
            loss_scale=self.loss_scale,
            users=self.users,
        )


def _user(cfg: HSTUConfig, g: torch.Generator, successor: list[int], n: int) -> dict:
    """One user's ``n`` events, targets and negatives (host lists: this is the data loader)."""
    seq = [int(torch.randint(cfg.num_items, (), generator=g))][:n]
    for _ in range(n - 1):
        follow = float(torch.rand((), generator=g)) < cfg.follow
        seq.append(
            successor[seq[-1]] if follow else int(torch.randint(cfg.num_items, (), generator=g))
        )
    gaps = torch.randint(1, 10**5, (n,), generator=g)
    stamps = (int(torch.randint(10**6, (), generator=g)) + gaps.cumsum(0)).to(torch.int32)
    neg = torch.randint(cfg.num_items, (max(n - 1, 0), cfg.negatives), generator=g)
    return {
        "item": seq,
        "action": torch.randint(cfg.num_actions, (n,), generator=g).tolist(),
        "target": seq[1:],
        "negative": neg,
        "stamps": F.pad(stamps, (0, cfg.max_items - n), value=int(stamps[-1]) if n else 0),
    }


def _rank_batch(cfg: HSTUConfig, users: list[dict], scale: float, total: int) -> Batch:
    from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

    lens = [len(u["item"]) for u in users]
    values = [x for key in FEATURES[:3] for u in users for x in u[key]]
    values += [x for u in users for x in u["negative"].flatten().tolist()]
    lengths = [
        *lens,
        *lens,
        *(max(n - 1, 0) for n in lens),
        *(cfg.negatives * max(n - 1, 0) for n in lens),
    ]
    rows, start = [], 0
    for n in lens:
        rows += [2 * (start + i) + 1 for i in range(n - 1)]  # the action token of event i
        start += n
    targets = torch.tensor([t for u in users for t in u["target"]], dtype=torch.int64)
    negs = torch.cat([u["negative"] for u in users]) if users else torch.zeros(0, cfg.negatives)
    return Batch(
        sparse=KeyedJaggedTensor(
            keys=list(FEATURES),
            values=torch.tensor(values, dtype=torch.int64),
            lengths=torch.tensor(lengths, dtype=torch.int32),
        ),
        seq_offset=torch.tensor(
            [0, *torch.tensor(lens).mul(2).cumsum(0).tolist()], dtype=torch.int32
        ),
        timestamps=torch.stack([u["stamps"] for u in users]),
        query_rows=torch.tensor(rows, dtype=torch.int64),
        hits=negs.long() == targets[:, None],
        past_valid_lens=[2 * n for n in lens],
        loss_scale=scale,
        users=total,
    )


def batches(cfg: HSTUConfig, rank: int = 0, world: int = 1) -> Iterator[Batch]:
    """Rank ``rank``'s slice of every step's global batch of ``world * cfg.batch_size`` users.

    The global batch depends on ``cfg.seed`` alone (one generator, users drawn in order), and rank
    ``r`` gets users ``r * B .. (r + 1) * B - 1``: N ranks of batch B see the users of one process
    of batch N * B.  User 0 of a step has 0 or 1 events, the last user the longest history (the
    edges of the jagged ops, and at least one target per step).
    """
    g = torch.Generator().manual_seed(cfg.seed + 1)
    successor = torch.randperm(cfg.num_items, generator=g).tolist()
    total = world * cfg.batch_size
    for step in range(cfg.steps):
        lens = torch.randint(2, cfg.max_items + 1, (total,), generator=g)
        lens[0], lens[-1] = step % 2, cfg.max_items
        users = [_user(cfg, g, successor, n) for n in lens.tolist()]
        rows = sum(max(n - 1, 0) for n in lens.tolist())  # > 0: the last user has max_items
        mine = users[rank * cfg.batch_size : (rank + 1) * cfg.batch_size]
        yield _rank_batch(cfg, mine, world / rows, total)


def _pos_tables(cfg: HSTUConfig, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """(rel_pos_bias, identity) ``(S, S)``: GR's Toeplitz ``p[j - i + s - 1]`` of a ``2s - 1``
    table (s = max_items), each entry a 2x2 block; identity = the 2x2 blocks of one event."""
    s = cfg.max_items
    table = 0.02 * torch.randn(2 * s - 1, generator=g)
    i = torch.arange(s)
    block = torch.ones(2, 2)
    return torch.kron(table[i[None, :] - i[:, None] + s - 1], block), torch.kron(
        torch.eye(s), block
    )


class HSTULayer(torch.nn.Module):
    """GR's ``SequentialTransductionUnitJagged`` on Rec SDK's fused ops (module docstring)."""

    def __init__(self, cfg: HSTUConfig) -> None:
        super().__init__()
        d = cfg.dim
        self.heads, self.head_dim, self.dropout = cfg.heads, d // cfg.heads, cfg.dropout
        self.max_seq_len = cfg.max_seq_len
        self.norm_in = torch.nn.LayerNorm(d)
        bound = 1.0 / math.sqrt(d)  # nn.Linear's default init
        self.uvqk_weight = torch.nn.Parameter(torch.empty(4 * d, d).uniform_(-bound, bound))
        self.uvqk_bias = torch.nn.Parameter(torch.empty(4 * d).uniform_(-bound, bound))
        self.norm_weight = torch.nn.Parameter(torch.ones(d))
        self.norm_bias = torch.nn.Parameter(torch.zeros(d))
        self.out = torch.nn.Linear(d, d)

    def forward(
        self, x: torch.Tensor, seq_offset: torch.Tensor, bias: torch.Tensor
    ) -> torch.Tensor:
        t, n, d = x.size(0), self.heads, self.head_dim
        width = n * d
        u, v, q, k, _ = MX.in_linear_silu(
            self.norm_in(x), self.uvqk_weight, self.uvqk_bias, [width] * 4
        )
        attn = MX.hstu_jagged.equal(
            q.view(t, n, d),
            k.view(t, n, d),
            v.view(t, n, d),
            attn_bias=bias,
            mask_type=0,  # causal within each user
            max_seq_len=self.max_seq_len,  # given: no read-back of the longest user
            seq_offset=seq_offset,
            alpha=1.0 / math.sqrt(d),
        ).view(t, width)
        if self.training and self.dropout > 0:
            (y,) = MX.norm_multiply_dropout(
                attn, u, self.norm_weight, self.norm_bias, 1e-5, self.dropout
            )
        else:  # the same LayerNorm(a) * u without the mask: Rec SDK's ln_mul (eps 1e-5)
            y = MX.ln_mul(attn, u, self.norm_weight, self.norm_bias)
        return x + self.out(y)


class HSTU(torch.nn.Module):
    """The EmbeddingCollection, the relative bias, ``cfg.layers`` HSTU layers, the loss."""

    def __init__(
        self, cfg: HSTUConfig, dense_device: torch.device, sparse_device: torch.device
    ) -> None:
        from torchrec import EmbeddingCollection, EmbeddingConfig

        super().__init__()
        self.cfg = cfg
        tables = [
            EmbeddingConfig(
                name="t_item", embedding_dim=cfg.dim, num_embeddings=cfg.num_items,
                feature_names=["item", "target", "negative"],
            ),
            EmbeddingConfig(
                name="t_action", embedding_dim=cfg.dim, num_embeddings=cfg.num_actions,
                feature_names=["action"],
            ),
        ]  # fmt: skip
        self.ec = EmbeddingCollection(tables=tables, device=sparse_device)
        g = torch.Generator().manual_seed(cfg.seed)
        # the dense part is built on the CPU (seeded alike on every device), then moved
        w_time = 0.02 * torch.randn(cfg.layers, cfg.num_buckets + 1, generator=g)
        self.time_weights = torch.nn.Parameter(w_time.to(dense_device))
        rel_pos, identity = _pos_tables(cfg, g)
        self.register_buffer("rel_pos_bias", rel_pos.to(dense_device))
        self.register_buffer("identity", identity.to(dense_device))
        self.layers = torch.nn.ModuleList(HSTULayer(cfg) for _ in range(cfg.layers))
        self.norm_out = torch.nn.LayerNorm(cfg.dim)
        self.layers.to(dense_device)
        self.norm_out.to(dense_device)

    def bias(self, batch: Batch) -> torch.Tensor:
        """``[layers, B, N, S, S]``: each layer's time bias plus the shared position bias."""
        cfg = self.cfg
        rab_time = MX.relative_attn_bias_time(
            batch.timestamps, self.time_weights, cfg.bucket_divisor
        )
        rab_pos = MX.relative_attn_bias_pos(self.rel_pos_bias, self.identity, batch.past_valid_lens)
        rab = rab_time + rab_pos  # [layers, B, S, S]: the position bias broadcast over the layers
        b, s = rab_pos.shape[:2]
        return rab.unsqueeze(2).expand(cfg.layers, b, cfg.heads, s, s)

    def forward(self, batch: Batch) -> torch.Tensor:
        """The rank's loss (module docstring): sampled softmax of next-item cosine similarities."""
        emb = self.ec(batch.sparse)
        d = self.cfg.dim
        x = torch.stack((emb["item"].values(), emb["action"].values()), 1).view(-1, d)
        for layer, rab in zip(self.layers, self.bias(batch).unbind(0), strict=True):
            x = layer(x, batch.seq_offset, rab)
        query = F.normalize(self.norm_out(x).index_select(0, batch.query_rows), dim=1)
        target = F.normalize(emb["target"].values(), dim=1)
        negative = F.normalize(emb["negative"].values(), dim=1).view(-1, self.cfg.negatives, d)
        positive = (query * target).sum(1, keepdim=True)
        sampled = torch.bmm(negative, query.unsqueeze(2)).squeeze(2)
        sampled = sampled.masked_fill(batch.hits, float("-inf"))  # an accidental hit
        logits = torch.cat((positive, sampled), 1) / self.cfg.temperature
        labels = torch.zeros(logits.size(0), dtype=torch.int64, device=logits.device)
        return F.cross_entropy(logits, labels, reduction="sum") * batch.loss_scale


def build_model(cfg: HSTUConfig, dense_device: torch.device, sparse_device: torch.device) -> HSTU:
    """The model, its tables on ``sparse_device`` (``meta`` before sharding)."""
    return HSTU(cfg, dense_device, sparse_device)
