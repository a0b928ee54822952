#!/usr/bin/env python3
"""Writes training_loop.csv: the allocation log of a transformer-like training loop whose batch
size and sequence length change every iteration, in RMM's CSV log format
(Thread,Time,Action,Pointer,Size,Stream). bench_alloc replays it and reports fragmentation
(peak bytes held / peak bytes live).

Deterministic (seeded). Addresses are those of a simple simulated allocator (first fit over one
address range), so pointers are reused as in a real log.

    python3 bench/data/make_training_trace.py > bench/data/training_loop.csv
"""
import bisect
import random
import sys

rng = random.Random(20240611)
LAYERS, HIDDEN, FFN, ITERATIONS = 6, 512, 2048, 32
MAIN, COPY = 0x55d0c3a1e2f0, 0x55d0c3a1f5c0  # compute stream, input-copy stream
F32 = 4

free_ranges = [(0x7f3a00000000, 1 << 40)]  # (start, size), sorted by start
out = []
clock = 0.0
live = {}


def emit(action, ptr, size, stream):
    global clock
    clock += rng.uniform(2e-6, 40e-6)
    h, rem = divmod(clock + 9 * 3600 + 41 * 60, 3600)
    m, s = divmod(rem, 60)
    out.append("140329%d,%02d:%02d:%09.6f,%s,0x%x,%d,0x%x" % (
        1 if stream == COPY else 0, h, m, s, action, ptr, size, stream))


def alloc(size, stream=MAIN):
    need = (size + 511) // 512 * 512
    for i, (start, length) in enumerate(free_ranges):
        if length >= need:
            free_ranges[i] = (start + need, length - need)
            live[start] = need
            emit("allocate", start, size, stream)
            return start
    raise RuntimeError("address space exhausted")


def free(ptr, size, stream=MAIN):
    need = live.pop(ptr)
    starts = [r[0] for r in free_ranges]
    i = bisect.bisect_left(starts, ptr)
    free_ranges.insert(i, (ptr, need))
    # merge neighbours
    j = max(i - 1, 0)
    while j + 1 < len(free_ranges):
        a, b = free_ranges[j], free_ranges[j + 1]
        if a[0] + a[1] == b[0]:
            free_ranges[j:j + 2] = [(a[0], a[1] + b[1])]
        elif j >= i:
            break
        else:
            j += 1
    emit("free", ptr, size, stream)


# Parameters: per layer four attention matrices, two feed-forward matrices, biases and norms.
param_shapes = []
for _ in range(LAYERS):
    param_shapes += [HIDDEN * HIDDEN] * 4 + [HIDDEN * FFN, FFN * HIDDEN] + [FFN, HIDDEN, HIDDEN, HIDDEN]
param_shapes += [32000 * HIDDEN]  # embedding
params = [(alloc(n * F32), n * F32) for n in param_shapes]
grads = None
adam = None

for it in range(ITERATIONS):
    batch = rng.choice([2, 4, 6, 8, 12, 16])
    seq = rng.choice([128, 192, 256, 320, 384])
    tokens = batch * seq
    # The next input is copied on the copy stream and consumed (freed) on the compute stream.
    inp = (alloc(tokens * 8, COPY), tokens * 8)
    saved = []
    x = (alloc(tokens * HIDDEN * F32), tokens * HIDDEN * F32)
    saved.append(x)
    for layer in range(LAYERS):
        qkv = (alloc(3 * tokens * HIDDEN * F32), 3 * tokens * HIDDEN * F32)
        scores = (alloc(batch * 8 * seq * seq * 2), batch * 8 * seq * seq * 2)  # fp16 scores
        tmp = (alloc(tokens * HIDDEN * F32), tokens * HIDDEN * F32)
        free(*tmp)
        attn = (alloc(tokens * HIDDEN * F32), tokens * HIDDEN * F32)
        h = (alloc(tokens * FFN * F32), tokens * FFN * F32)
        act = (alloc(tokens * FFN * F32), tokens * FFN * F32)
        out_ = (alloc(tokens * HIDDEN * F32), tokens * HIDDEN * F32)
        mean = (alloc(tokens * F32), tokens * F32)
        saved += [qkv, scores, attn, h, act, out_, mean]
    logits = (alloc(tokens * 1000 * 2), tokens * 1000 * 2)
    loss = (alloc(F32 * 2), F32 * 2)
    free(*inp)
    if grads is None:
        grads = [(alloc(n), n) for _, n in params]
    gl = (alloc(tokens * 1000 * 2), tokens * 1000 * 2)
    free(*logits)
    free(*loss)
    g = (alloc(tokens * HIDDEN * F32), tokens * HIDDEN * F32)
    free(*gl)
    while len(saved) > 1:
        mean, out_, act, h, attn, scores, qkv = [saved.pop() for _ in range(7)]
        for t in (mean, out_, act):
            free(*t)
        gh = (alloc(h[1]), h[1])
        free(*h)
        ws = (alloc(HIDDEN * FFN * F32), HIDDEN * FFN * F32)  # workspace
        free(*ws)
        free(*gh)
        gs = (alloc(scores[1]), scores[1])
        free(*scores)
        free(*attn)
        gq = (alloc(qkv[1]), qkv[1])
        free(*gs)
        free(*qkv)
        free(*gq)
        g2 = (alloc(g[1]), g[1])
        free(*g)
        g = g2
    free(*g)
    free(*saved.pop())
    # Optimizer: Adam states appear at the first step; every step uses a temporary per tensor.
    if adam is None:
        adam = [(alloc(n), n) for _, n in params] + [(alloc(n), n) for _, n in params]
    for _, n in params:
        t = (alloc(n), n)
        free(*t)

for p, n in params + grads + adam:
    free(p, n)

sys.stdout.write("Thread,Time,Action,Pointer,Size,Stream\n")
sys.stdout.write("\n".join(out) + "\n")
