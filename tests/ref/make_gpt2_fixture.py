#!/usr/bin/python3
"""make_gpt2_fixture.py: the PyTorch reference that tests/test_model_ref.c compares against.

Builds a small random GPT-2 in PyTorch (same architecture as ftllm: learned positions, pre-LN,
causal multi-head attention, GELU(tanh) 4x MLP, final LN, LM head tied to wte, vocabulary
padded to Vp in the file), writes it in llm.c's model format, and records on one batch of
tokens: the logits, the loss, every parameter gradient, and the losses of 10 AdamW steps (with
gradient clipping and the warm-up + cosine schedule of src/optim_adamw.c).

Run with Debian's interpreter (python3-torch is a Debian package for /usr/bin/python3):
    /usr/bin/python3 tests/ref/make_gpt2_fixture.py
It rewrites tests/ref/gpt2_tiny.bin (model) and tests/ref/gpt2_tiny_state.bin (state):
  state header: 256 int32: [0] 20241129 (magic), [1] 1 (version), [2] B, [3] T, [4] steps,
                [5] V, [6] Vp, [7] number of parameters
  then x (B*T int32), y (B*T int32), logits (B*T*V fp32), loss (1 fp32),
  grads (nparams fp32, llm.c order, wte padded to Vp rows), step losses (steps fp32).
The hyper-parameters below are repeated in tests/test_model_ref.c; change both together.
"""
import math
import os
import struct

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

L, NH, C, V, VP, MAXT = 2, 4, 32, 61, 64, 16
B, T = 2, 12
STEPS = 10
LR, LR_MIN_FRAC, WARMUP = 1e-2, 0.1, 2
BETA1, BETA2, EPS, WD, CLIP = 0.9, 0.95, 1e-8, 0.1, 1.0
SEED = 1234


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(C, eps=1e-5)
        self.qkv = nn.Linear(C, 3 * C)
        self.attproj = nn.Linear(C, C)
        self.ln2 = nn.LayerNorm(C, eps=1e-5)
        self.fc = nn.Linear(C, 4 * C)
        self.fcproj = nn.Linear(4 * C, C)

    def forward(self, x):
        Bq, Tq, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q = q.view(Bq, Tq, NH, C // NH).transpose(1, 2)
        k = k.view(Bq, Tq, NH, C // NH).transpose(1, 2)
        v = v.view(Bq, Tq, NH, C // NH).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // NH)
        mask = torch.tril(torch.ones(Tq, Tq, dtype=torch.bool))
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(Bq, Tq, C)
        x = x + self.attproj(y)
        return x + self.fcproj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(MAXT, C)
        self.blocks = nn.ModuleList([Block() for _ in range(L)])
        self.lnf = nn.LayerNorm(C, eps=1e-5)

    def forward(self, idx, targets):
        pos = torch.arange(idx.shape[1])
        x = self.wte(idx) + self.wpe(pos)
        for b in self.blocks:
            x = b(x)
        logits = self.lnf(x) @ self.wte.weight.t()  # tied LM head, (B, T, V)
        return logits, F.cross_entropy(logits.view(-1, V), targets.view(-1))


def llmc_order(m):
    """The 16 tensors in llm.c's order, per-layer tensors stacked over layers."""
    bl = m.blocks
    return [m.wte.weight, m.wpe.weight,
            [b.ln1.weight for b in bl], [b.ln1.bias for b in bl],
            [b.qkv.weight for b in bl], [b.qkv.bias for b in bl],
            [b.attproj.weight for b in bl], [b.attproj.bias for b in bl],
            [b.ln2.weight for b in bl], [b.ln2.bias for b in bl],
            [b.fc.weight for b in bl], [b.fc.bias for b in bl],
            [b.fcproj.weight for b in bl], [b.fcproj.bias for b in bl],
            m.lnf.weight, m.lnf.bias]


def flat(m, grads):
    out = []
    for i, t in enumerate(llmc_order(m)):
        ts = t if isinstance(t, list) else [t]
        for p in ts:
            a = (p.grad if grads else p).detach().numpy().astype(np.float32)
            if i == 0:  # wte: pad V -> Vp rows with zeros
                a = np.concatenate([a, np.zeros((VP - V, C), np.float32)])
            out.append(a.ravel())
    return np.concatenate(out)


def lr_at(step):
    if step < WARMUP:
        return LR * (step + 1) / WARMUP
    lo = LR * LR_MIN_FRAC
    p = min(1.0, (step - WARMUP) / (STEPS - WARMUP - 1))
    return lo + 0.5 * (LR - lo) * (1 + math.cos(math.pi * p))


def main():
    torch.manual_seed(SEED)
    model = GPT()
    with torch.no_grad():  # GPT-2 style init, nonzero biases and LN so every path is tested
        for name, p in model.named_parameters():
            p.normal_(0.0, 0.02 if p.dim() == 2 else 0.1)
            if "ln" in name and name.endswith("weight"):
                p.add_(1.0)
    here = os.path.dirname(os.path.abspath(__file__))
    params = flat(model, False)
    with open(os.path.join(here, "gpt2_tiny.bin"), "wb") as f:
        f.write(struct.pack("256i", *([20240326, 3, MAXT, V, L, NH, C, VP] + [0] * 248)))
        f.write(params.tobytes())

    g = torch.Generator().manual_seed(SEED + 1)
    x = torch.randint(0, V, (B, T), generator=g)
    y = torch.randint(0, V, (B, T), generator=g)
    logits, loss = model(x, y)
    loss.backward()
    grads = flat(model, True)
    logits0, loss0 = logits.detach().numpy().astype(np.float32), float(loss)

    decay = [p for p in model.parameters() if p.dim() >= 2]
    nodecay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WD},
                             {"params": nodecay, "weight_decay": 0.0}],
                            lr=LR, betas=(BETA1, BETA2), eps=EPS)
    losses, norms = [], []
    model.zero_grad()
    for step in range(STEPS):
        _, l = model(x, y)
        l.backward()
        norms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)))
        for grp in opt.param_groups:
            grp["lr"] = lr_at(step)
        opt.step()
        opt.zero_grad()
        losses.append(float(l))
    print("loss %.6f; step losses %s; grad norms %s" % (
        loss0, " ".join("%.4f" % v for v in losses), " ".join("%.3f" % v for v in norms)))

    with open(os.path.join(here, "gpt2_tiny_state.bin"), "wb") as f:
        f.write(struct.pack("256i", *([20241129, 1, B, T, STEPS, V, VP, params.size] + [0] * 248)))
        f.write(x.numpy().astype(np.int32).tobytes())
        f.write(y.numpy().astype(np.int32).tobytes())
        f.write(logits0.tobytes())
        f.write(np.float32(loss0).tobytes())
        f.write(grads.tobytes())
        f.write(np.array(losses, np.float32).tobytes())


if __name__ == "__main__":
    main()
