#!/usr/bin/env python3
"""PyTorch's CPU kernels as peer paths of `halfmap sweep`: the torch side of src/peers/torch.cpp.

    python3 tools/torch_peer.py --serve    (started by halfmap, one process per calling thread)
    python3 tools/torch_peer.py --probe    (prints the probe's JSON: which ops torch refuses for which dtype)

The sweep itself runs the experiments: it draws and stores the inputs, and sends the stored bytes of every
evaluation here over a socket (stdin and stdout); this script runs torch's kernel on exactly those bytes (viewed
as torch tensors, no conversion) and sends the output tensors' bytes back. halfmap then counts, classifies and
searches the thresholds with the sweep's own code, so the oracles, status rules and threshold lattices exist once
(docs/peers.md). Each request evaluates one cell's kernel, at whatever s or S
the sweep's lattice search asks for next: an export of inputs for a fixed set of points could not follow that
search.

What each op runs (torch.set_num_threads(1); no_grad unless a gradient is asked for):
  sum        x.sum()                                  (the 0-dim result, in the storage dtype)
  sumsq      torch.square(x).sum()                    (the elementwise square in the storage dtype, then the sum)
  dot        torch.dot(x, y)
  dense_fwd  F.linear(X, Wt, b), Wt = W.T.contiguous(): the N×K weight nn.Linear holds
  dense_bwd  the same forward, then y.backward(dY): dX, dW (transposed back to K×N), db, as autograd computes them
  mse        F.mse_loss(p, y); gradient: (loss * S).backward() with S a float32 0-dim tensor, as
             torch.cuda.amp.GradScaler.scale multiplies the loss
  softmax    torch.softmax(x, dim=1)
  xent       F.cross_entropy(logits, labels); probabilities torch.softmax(logits, dim=1); gradient as mse's
  layernorm  F.layer_norm(x, (cols,), gamma, beta, eps); gradient: y.backward(dy), giving dx, dgamma, dbeta
             (torch 1.13 has no RMS normalisation: halfmap names rmsnorm refused)
  attention  one head of torch ops, the scale where torch 1.13's _scaled_dot_product_attention puts it:
             q / math.sqrt(d) (PRESCALE 1) or
             (q @ k.T) / math.sqrt(d) (PRESCALE 0, Hugging Face's BERT and GPT-2), masked_fill(-inf) above the
             diagonal when CAUSAL, torch.softmax(dim=-1), @ v; the scores are returned as stored (before the mask);
             gradient: o.backward(dout), giving dq, dk, dv
An op torch does not implement for a dtype raises RuntimeError ("... not implemented for 'Half'"); the probe
runs every op on small inputs per dtype and reports each refusal with torch's message, and halfmap drops that
path and names it in meta.json and peers.md.

Protocol (binary, one request at a time): a request is one text line of space-separated fields, then the raw
input buffers; the reply is "ok NBYTES\\n" and the output buffers, or "error MESSAGE\\n".
  hello                                   -> the probe's JSON (UTF-8)
  sum|sumsq DT N + x                      -> 1 element
  dot DT N + x + y                        -> 1 element
  dense_fwd DT M K N HAS_BIAS + X + W [+ b] -> Y (M·N)
  dense_bwd DT M K N + X + W + dY         -> dX (M·K), dW (K·N), db (N)
  mse DT N GRAD S + p + y                 -> loss (1) [+ dp (N)]
  softmax DT ROWS COLS + x                -> y
  xent DT ROWS COLS GRAD S PROBS + logits + labels (int32) -> loss (1) [+ probs] [+ dlogits]
  layernorm DT ROWS COLS GRAD EPS + x + gamma + beta [+ dy] -> y (ROWS·COLS) [+ dx (ROWS·COLS), dgamma, dbeta (COLS)]
  attention DT LEN DIM CAUSAL PRESCALE GRAD + q + k + v [+ dout] -> o (LEN·DIM), scores (LEN·LEN) [+ dq, dk, dv]
DT is f32, f16 or bf16 (IEEE binary32, binary16, bfloat16: the bits of halfmap's storage types); S is a decimal
that Python's float() reads exactly (halfmap prints the shortest round-trip form).

Without torch (python3-torch, tools/setup.sh --peers), --probe and --serve exit 3 with the reason on stderr.
"""

import json
import sys
import warnings

OPS = ("sum", "sumsq", "dot", "dense_fwd", "dense_bwd", "mse", "softmax", "xent", "layernorm", "attention")


def dtypes(torch):
    return {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def element_size(dt):
    return 4 if dt == "f32" else 2


class Kernels:
    def __init__(self, torch):
        import torch.nn.functional as F  # noqa: N812 (torch's own name)

        self.torch, self.F = torch, F
        self.types = dtypes(torch)

    def tensor(self, buf, dt, shape):
        """The bytes as a tensor of dtype dt, without conversion (a view of a writable copy)."""
        t = self.torch.frombuffer(bytearray(buf), dtype=self.types[dt]) if buf else self.torch.empty(0)
        return t.reshape(shape)

    @staticmethod
    def out(*tensors):
        return b"".join(t.detach().contiguous().view(-1).view(dtype_bits(t)).numpy().tobytes() for t in tensors)

    def reduce(self, op, x, y=None):
        torch = self.torch
        with torch.no_grad():
            if op == "sum":
                return x.sum()
            if op == "sumsq":
                return torch.square(x).sum()
            return torch.dot(x, y)

    def dense(self, x, w, b, dy=None):
        torch = self.torch
        wt = w.t().contiguous()
        if dy is None:
            with torch.no_grad():
                return (self.F.linear(x, wt, b),)
        x.requires_grad_(True)
        wt.requires_grad_(True)
        b.requires_grad_(True)
        self.F.linear(x, wt, b).backward(dy)
        return x.grad, wt.grad.t(), b.grad

    def scaled_backward(self, loss, scale):
        # GradScaler.scale: outputs * self._scale, a float32 0-dim tensor; backward from there.
        (loss * self.torch.tensor(scale, dtype=self.torch.float32)).backward()

    def mse(self, p, y, grad, scale):
        if not grad:
            with self.torch.no_grad():
                return (self.F.mse_loss(p, y),)
        p.requires_grad_(True)
        loss = self.F.mse_loss(p, y)
        self.scaled_backward(loss, scale)
        return loss, p.grad

    def softmax(self, x):
        with self.torch.no_grad():
            return self.torch.softmax(x, dim=1)

    def xent(self, logits, labels, grad, scale, probs):
        torch = self.torch
        out = []
        if grad:
            logits.requires_grad_(True)
        with torch.set_grad_enabled(grad):
            loss = self.F.cross_entropy(logits, labels.long())
        out.append(loss)
        if probs:
            with torch.no_grad():
                out.append(torch.softmax(logits, dim=1))
        if grad:
            self.scaled_backward(loss, scale)
            out.append(logits.grad)
        return out


    def layernorm(self, x, gamma, beta, eps, dy=None):
        cols = x.shape[-1]
        if dy is None:
            with self.torch.no_grad():
                return (self.F.layer_norm(x, (cols,), gamma, beta, eps),)
        for t in (x, gamma, beta):
            t.requires_grad_(True)
        y = self.F.layer_norm(x, (cols,), gamma, beta, eps)
        y.backward(dy)
        return y, x.grad, gamma.grad, beta.grad


    def attention(self, q, k, v, causal, prescale, dout=None):
        import math

        torch = self.torch
        d, n = q.shape[-1], q.shape[0]
        grad = dout is not None
        if grad:
            for t in (q, k, v):
                t.requires_grad_(True)
        with torch.set_grad_enabled(grad):
            scores = (q / math.sqrt(d)) @ k.t() if prescale else (q @ k.t()) / math.sqrt(d)
            masked = scores
            if causal:
                above = torch.ones(n, n, dtype=torch.bool).triu(1)
                masked = scores.masked_fill(above, float("-inf"))
            o = torch.softmax(masked, dim=-1) @ v
        if not grad:
            return o, scores
        o.backward(dout)
        return o, scores, q.grad, k.grad, v.grad


def dtype_bits(t):
    import torch

    return torch.int32 if t.element_size() == 4 else torch.int16


def probe(k):
    """Every op on small inputs per dtype: "ok", or torch's refusal (the first line of its message)."""
    torch = k.torch
    result = {}
    gen = torch.Generator().manual_seed(0)
    for dt, ty in k.types.items():
        def rnd(*shape):
            return torch.randn(*shape, generator=gen).to(ty)

        cases = {
            "sum": lambda: k.reduce("sum", rnd(64)),
            "sumsq": lambda: k.reduce("sumsq", rnd(64)),
            "dot": lambda: k.reduce("dot", rnd(64), rnd(64)),
            "dense_fwd": lambda: k.dense(rnd(4, 8), rnd(8, 3), rnd(3)),
            "dense_bwd": lambda: k.dense(rnd(4, 8), rnd(8, 3), rnd(3), rnd(4, 3)),
            "mse": lambda: k.mse(rnd(64), rnd(64), False, 1.0),
            "mse_grad": lambda: k.mse(rnd(64), rnd(64), True, 1.0),
            "softmax": lambda: k.softmax(rnd(4, 8)),
            "xent": lambda: k.xent(rnd(4, 8), torch.zeros(4, dtype=torch.int32), False, 1.0, False),
            "xent_grad": lambda: k.xent(rnd(4, 8), torch.zeros(4, dtype=torch.int32), True, 1.0, False),
            "layernorm": lambda: k.layernorm(rnd(4, 8), rnd(8), rnd(8), 1e-5),
            "layernorm_grad": lambda: k.layernorm(rnd(4, 8), rnd(8), rnd(8), 1e-5, rnd(4, 8)),
            "attention": lambda: k.attention(rnd(4, 8), rnd(4, 8), rnd(4, 8), True, True),
            "attention_grad": lambda: k.attention(rnd(4, 8), rnd(4, 8), rnd(4, 8), True, False, rnd(4, 8)),
        }
        for name, run in cases.items():
            try:
                run()
                result[f"{dt}_{name}"] = "ok"
            except RuntimeError as e:
                result[f"{dt}_{name}"] = "refused: " + str(e).strip().splitlines()[0]
    return result


def hello(torch, k):
    cap = [line.split(":", 1)[1].strip() for line in torch.__config__.show().splitlines() if "CPU capability" in line]
    return {
        "torch": torch.__version__,
        "cpu_capability": cap[0] if cap else "unknown",
        "threads": torch.get_num_threads(),
        "mkldnn": bool(torch.backends.mkldnn.is_available()),
        "ops": probe(k),
    }


def handle(k, fields, read):
    """One request: its fields (after the op) and a reader of exact byte counts; returns the reply's bytes."""
    op, dt = fields[0], fields[1]
    if dt not in k.types:
        raise ValueError(f"unknown dtype {dt}")
    es = element_size(dt)
    n = [int(f) for f in fields[2:]] if op not in ("mse", "xent", "layernorm", "attention") else None

    def get(count, shape=None, bits=None):
        buf = read(count * (4 if bits else es))
        if bits:
            return k.torch.frombuffer(bytearray(buf), dtype=k.torch.int32) if count else k.torch.empty(0)
        return k.tensor(buf, dt, shape if shape is not None else (count,))

    if op in ("sum", "sumsq"):
        return k.out(k.reduce(op, get(n[0])))
    if op == "dot":
        x = get(n[0])
        return k.out(k.reduce(op, x, get(n[0])))
    if op == "dense_fwd":
        m, kk, nn, has_b = n
        x, w = get(m * kk, (m, kk)), get(kk * nn, (kk, nn))
        b = get(nn) if has_b else None
        return k.out(*k.dense(x, w, b))
    if op == "dense_bwd":
        m, kk, nn = n
        x, w, dy = get(m * kk, (m, kk)), get(kk * nn, (kk, nn)), get(m * nn, (m, nn))
        return k.out(*k.dense(x, w, k.torch.zeros(nn, dtype=k.types[dt]), dy))
    if op == "mse":
        count, grad, scale = int(fields[2]), fields[3] == "1", float(fields[4])
        p, y = get(count), get(count)
        return k.out(*k.mse(p, y, grad, scale))
    if op == "softmax":
        rows, cols = n
        return k.out(k.softmax(get(rows * cols, (rows, cols))))
    if op == "xent":
        rows, cols, grad, scale, probs = int(fields[2]), int(fields[3]), fields[4] == "1", float(fields[5]), fields[6]
        logits = get(rows * cols, (rows, cols))
        labels = get(rows, bits=True)
        return k.out(*k.xent(logits, labels, grad, scale, probs == "1"))
    if op == "layernorm":
        rows, cols, grad, eps = int(fields[2]), int(fields[3]), fields[4] == "1", float(fields[5])
        x, gamma, beta = get(rows * cols, (rows, cols)), get(cols), get(cols)
        dy = get(rows * cols, (rows, cols)) if grad else None
        return k.out(*k.layernorm(x, gamma, beta, eps, dy))
    if op == "attention":
        ln, dim, causal, prescale, grad = (int(f) for f in fields[2:7])
        q, kk, v = (get(ln * dim, (ln, dim)) for _ in range(3))
        dout = get(ln * dim, (ln, dim)) if grad else None
        return k.out(*k.attention(q, kk, v, causal == 1, prescale == 1, dout))
    raise ValueError(f"unknown op {op}")


def serve(torch, k):
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer

    def read(count):
        buf = stdin.read(count)
        if len(buf) != count:
            raise EOFError
        return buf

    while True:
        line = stdin.readline()
        if not line:
            return 0
        fields = line.decode().split()
        try:
            if fields == ["hello"]:
                reply = json.dumps(hello(torch, k)).encode()
            else:
                reply = handle(k, fields, read)
            stdout.write(b"ok %d\n" % len(reply))
            stdout.write(reply)
        except EOFError:
            return 1
        except Exception as e:  # noqa: BLE001 (every failure goes back to halfmap as one line)
            stdout.write(("error " + " ".join(str(e).split())[:500] + "\n").encode())
        stdout.flush()


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in ("--serve", "--probe"):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    try:
        import torch
    except ImportError as e:
        print(f"torch_peer.py: PyTorch is not installed ({e}); tools/setup.sh --peers installs python3-torch.",
              file=sys.stderr)
        return 3
    warnings.filterwarnings("ignore")  # e.g. "Applying the CPU mse kernel on half-type tensors"
    torch.set_num_threads(1)
    k = Kernels(torch)
    if sys.argv[1] == "--probe":
        print(json.dumps(hello(torch, k), indent=2))
        return 0
    return serve(torch, k)


if __name__ == "__main__":
    sys.exit(main())
