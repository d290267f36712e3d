#!/usr/bin/env python3
"""Findings about the peer libraries' kernels (src/peers/), pinned as measured by `halfmap sweep` on this build.

Usage: peers_test.py HALFMAP_EXE OUT_DIR. Each finding runs a small sweep of a peer kernel next to halfmap
kernels and compares thresholds.json entries (per distribution); one more checks that `halfmap merge` writes the
peers.md of a whole run. A finding whose kernels this binary does not
have (peer library not built, or path not enabled here) is skipped with the reason; if every finding is skipped
the script exits 77 (ctest SKIP_RETURN_CODE).

Measured on x86-64 with AVX512-BF16/FP16 (Debian 12: oneDNN 2.6.3, XNNPACK 0.0~git20220216, Eigen 3.4.0):
  1. oneDNN bf16 matmul reads bf16-subnormal inputs as zero: its forward s_underflow is some 8 binades above
     halfmap's bf16_f32acc ref path (2^-117.6 vs 2^-125.5, normal) and within 0.5 binade of the avx512bf16 path,
     whose vdpbf16ps flushes the same way. Its storage thresholds (the inputs) are the ref path's.
  2. XNNPACK f32 fully connected runs under FTZ+DAZ: its s_underflow is over 15 binades above f32_dense_fwd__ref
     (2^-111.8 vs 2^-131.8, normal); oneDNN f32 matmul has exactly the ref path's thresholds.
  3. XNNPACK's f16 fully connected gives forward cells identical to halfmap's fp16 model f16_dense_fwd__ref (f32
     multiply-add rounded to fp16 after every k step); Eigen's half GEMM does not (its blocking order differs).
     Both accumulate in fp16: XNNPACK has exactly the thresholds of halfmap's per-operation fp16 mode
     (f16_dense_fwd__avx2); Eigen has its overflow and underflow saturation, and its underflow onset except on
     lognormal inputs (2^-14.8037 vs 2^-14.0088); the underflow onsets of both differ from
     f16_f32acc_dense_fwd__ref's (fp16 storage, f32 accumulation).
  4. Eigen's half sum (baseline SSE2 build) adds sequentially: forward cells identical to halfmap's sequential
     model f16_sum__ref, and a different s_overflow from the lane-parallel f16_sum__avx2 (lognormal: 2^8.35 vs
     2^8.10); same storage thresholds.
  5. Eigen's maxCoeff of |x| (float and half) gives cells identical to halfmap's maxabs (it is exact).
  5b. oneDNN's bf16 reductions flush a subnormal result: maxabs is lost 8 binades above bf16_f32acc_maxabs__ref
     (2^-127.85 vs 2^-135.84, normal), the sum 4.4 binades above the ref (2^-131.10 vs 2^-135.46) yet 8 below the
     avx512bf16 path, which flushes subnormal inputs too; its f32 sumsq (reference implementation, powf) gives
     the cells of f32_sumsq__ref.
  5c. oneDNN's attention head (matmul, eltwise_linear and softmax_v2 composed as a framework composes them; oneDNN
     2.6 has no attention primitive) overflows where halfmap's does: f32 at the f32 reference's onsets in both
     placements of 1/√d (2^63.25 prescaled, 2^61.75 postscaled, normal, d 64, len 16), bf16 at the avx512bf16
     path's.

PyTorch 1.13.0a0 (Debian python3-torch 1.13.1, ATen CPU capability AVX2), run with HALFMAP_TORCH=1 (skipped,
with the reason, where torch was not found at build time):
  6. torch refuses, on CPU: fp16 dot, matmul (addmm), softmax, cross-entropy (log_softmax) and mse's gradient;
     bf16 mse. meta.json names exactly these, and the fp16 mse is mapped forward only (no windows).
  7. torch's fp16 sum gives forward cells identical to halfmap's f16_f32acc sum (f32 accumulation, one rounding).
  8. torch's fp16 square + sum rounds each square to fp16, so squares below 2^-25 flush: its s_underflow onset is
     over 3.5 binades above f16_f32acc_sumsq__ref's (2^-10.64 vs 2^-14.57, normal); same overflow.
  9. torch's fp16 mse_loss stores the sum of squares in fp16 before dividing by n (mean = sum().div_(n)): it
     overflows 6 binades (log2 sqrt(4096)) before f16_f32acc_mse__ref (2^1.5127 vs 2^7.5127, normal), where
     the fp16-accumulating f16 paths overflow (f16_mse__avx2: 2^1.5127 too; lognormal 2^0.1514 vs 2^0.1523).
 10. torch's bf16 cross-entropy is log_softmax-based: no forward overflow on the grid, where
     bf16_f32acc_xent__ref's loss is -log 0 = inf once a stored probability flushes (2^4.67, normal).
 11. torch's bf16 dot accumulates in bf16: at s = 1 its relative error is over 10x bf16_f32acc_dot__ref's.
 12. (AVX512-BF16 CPUs) torch's bf16 linear runs through oneDNN: forward cells identical to
     onednn_bf16_dense_fwd__peer, so it flushes subnormals like it (s_underflow onset 8 binades above the ref).
"""
import csv
import json
import os
import subprocess
import sys

EXE, OUT = sys.argv[1], sys.argv[2]
KEYS = ("s_underflow", "s_overflow", "storage_underflow", "storage_overflow")


TORCH_ENV = dict(os.environ, HALFMAP_TORCH="1")


def available(env=None):
    info = json.loads(subprocess.run([EXE, "info", "--json"], check=True, capture_output=True, text=True,
                                     env=env).stdout)
    return {k["name"] for k in info["kernels"] if k["supported"]}


# The findings are about the initialised dense layer: the amplifying one (dense_fwd_amplifying, which every dense_fwd
# kernel also runs) is kept small and left out of the tables below.
AMPLIFYING = "dense_fwd_amplifying"


def sweep(name, kernels, extra=(), env=None):
    out = os.path.join(OUT, name)
    cmd = [EXE, "sweep", "--quiet", "--out", out, "--kernels", ",".join(kernels), "--S-max", "2^0",
           "--dense-amplifying", "2x16x2", *extra]
    subprocess.run(cmd, check=True, env=env)
    with open(os.path.join(out, "thresholds.json")) as f:
        res = json.load(f)["results"]
    th = {(r["kernel"], r["dist"]): r for r in res if r["op"] != AMPLIFYING}
    return th, out


def texts(r):
    """Every boundary's onset and saturation (thresholds.json's halfmap-sweep-thresholds-3 and -4)."""
    return tuple(r[k][end]["text"] for k in KEYS for end in ("onset", "saturation"))


DISTS = ("normal", "uniform", "lognormal")
LOW = ("--s-min", "2^-150", "--s-max", "2^-100")
ATTENTION = ("--head-dims", "64", "--attn-len", "16", "--s-min", "2^58", "--s-max", "2^66")


def finding_onednn_bf16(th, out):
    for d in DISTS:
        peer, ref, bf = (th[(k, d)] for k in ("onednn_bf16_dense_fwd__peer", "bf16_f32acc_dense_fwd__ref",
                                              "bf16_f32acc_dense_fwd__avx512bf16"))
        assert peer["storage_underflow"]["onset"]["text"] == ref["storage_underflow"]["onset"]["text"], d
        assert peer["s_underflow"]["onset"]["text"] != ref["s_underflow"]["onset"]["text"], d
        pl, rl, bl = (parse_log2(x["s_underflow"]["onset"]["text"]) for x in (peer, ref, bf))
        assert pl - rl > 6, (d, pl, rl)
        assert abs(pl - bl) < 0.5, (d, pl, bl)


def parse_log2(text):
    # "2^-117.5791 (4.0287e-36)"
    assert text.startswith("2^"), text
    return float(text[2:].split()[0])


def finding_f32_ftz(th, out):
    for d in DISTS:
        x, o, r = (th[(k, d)] for k in ("xnnpack_f32_dense_fwd__peer", "onednn_f32_dense_fwd__peer",
                                        "f32_dense_fwd__ref"))
        assert texts(o) == texts(r), d
        assert parse_log2(x["s_underflow"]["onset"]["text"]) - parse_log2(r["s_underflow"]["onset"]["text"]) > 15, d
        assert x["storage_underflow"]["onset"]["text"] == r["storage_underflow"]["onset"]["text"], d


def finding_f16_acc(th, out):
    # XNNPACK's f16 GEMM is, on every cell, halfmap's fp16 model: fp16 inputs, f32 multiply-add rounded to fp16
    # after every k step (f16_dense_fwd__ref).
    assert forward(out, "xnnpack_f16_dense_fwd__peer") == forward(out, "f16_dense_fwd__ref")
    assert forward(out, "eigen_f16_dense_fwd__peer") != forward(out, "f16_dense_fwd__ref")
    # peers.md, the sweep's classification, says the same.
    md = {r.split("|")[4].strip(): r for r in open(os.path.join(out, "peers.md"))
          if "__peer |" in r and r.count("|") > 4 and r.split("|")[2].strip() != AMPLIFYING}  # refusals: 2 columns
    assert "identical forward cells:" in md["xnnpack_f16_dense_fwd__peer"]
    assert "f16_dense_fwd__ref" in md["xnnpack_f16_dense_fwd__peer"].split("|")[5]
    # Eigen's half GEMM is not identical: its blocking order makes the lognormal underflow onset differ
    # (2^-14.8037 vs the fp16 model's 2^-14.0088), which peers.md names as the one difference.
    assert "identical forward cells" not in md["eigen_f16_dense_fwd__peer"]
    assert md["eigen_f16_dense_fwd__peer"].split("|")[7].strip().startswith("lognormal s_underflow onset:")
    for d in DISTS:
        model = th[("f16_dense_fwd__avx2", d)]
        wide = th[("f16_f32acc_dense_fwd__ref", d)]
        assert texts(th[("xnnpack_f16_dense_fwd__peer", d)]) == texts(model), d
        e = th[("eigen_f16_dense_fwd__peer", d)]
        # Both accumulate in fp16: the overflow and the underflow's saturation are the fp16 mode's, and the
        # underflow onset is not fp16 storage with f32 accumulation's.
        assert e["s_overflow"] == model["s_overflow"], d
        assert e["s_underflow"]["saturation"] == model["s_underflow"]["saturation"], d
        assert (d == "lognormal") == (e["s_underflow"]["onset"] != model["s_underflow"]["onset"]), d
        for peer in ("xnnpack_f16_dense_fwd__peer", "eigen_f16_dense_fwd__peer"):
            assert th[(peer, d)]["s_underflow"]["onset"]["text"] != wide["s_underflow"]["onset"]["text"], (peer, d)


def finding_eigen_sum(th, out):
    # On baseline SSE2 Eigen adds halves one after the other: the cells of halfmap's sequential model.
    assert forward(out, "eigen_f16_sum__peer") == forward(out, "f16_sum__ref")
    for d in DISTS:
        e, h = th[("eigen_f16_sum__peer", d)], th[("f16_sum__avx2", d)]
        assert e["storage_overflow"]["onset"]["text"] == h["storage_overflow"]["onset"]["text"], d
        assert e["storage_underflow"]["onset"]["text"] == h["storage_underflow"]["onset"]["text"], d
    e, h = th[("eigen_f16_sum__peer", "lognormal")], th[("f16_sum__avx2", "lognormal")]
    assert e["s_overflow"]["onset"]["text"] != h["s_overflow"]["onset"]["text"]


def finding_onednn_reductions(th, out):
    # oneDNN's bf16 reductions read subnormal inputs exactly but flush a subnormal result (f32 -> bf16): maxabs
    # (eltwise_abs, reduction_max) is lost 8 binades above the ref path, once max|x| falls below 2^-126; the sum
    # 4 binades above, and still below the avx512bf16 path, whose vdpbf16ps reads subnormal inputs as zero.
    for d in DISTS:
        mx, mref = th[("onednn_bf16_maxabs__peer", d)], th[("bf16_f32acc_maxabs__ref", d)]
        assert abs(onset(mx, "s_underflow") - onset(mref, "s_underflow") - 8) < 0.05, d
        sm, sref, sbf = (th[(k, d)] for k in ("onednn_bf16_sum__peer", "bf16_f32acc_sum__ref",
                                               "bf16_f32acc_sum__avx512bf16"))
        assert onset(sm, "s_underflow") - onset(sref, "s_underflow") > 3, d
        assert onset(sbf, "s_underflow") - onset(sm, "s_underflow") > 6, d
    # Its f32 sum of squares (norm_lp_power_p_sum, the reference implementation: powf(|x|, 2) in order) gives the
    # cells of halfmap's sequential f32 sumsq.
    assert forward(out, "onednn_f32_sumsq__peer") == forward(out, "f32_sumsq__ref")


def finding_onednn_attention(th, out):
    # oneDNN's f32 attention head, composed of its matmul, eltwise_linear and softmax_v2, overflows where
    # halfmap's f32 reference does, in both placements of 1/√d, which differ by log2(√64)/2 = 1.5 binades of s.
    for d in DISTS:
        for op in ("prescale", "postscale"):
            peer, ref = th[(f"onednn_f32_attention_{op}__peer", d)], th[(f"f32_attention_{op}__ref", d)]
            assert peer["s_overflow"] == ref["s_overflow"], (op, d)
        shift = onset(th[("onednn_f32_attention_prescale__peer", d)], "s_overflow") - \
            onset(th[("onednn_f32_attention_postscale__peer", d)], "s_overflow")
        assert abs(shift - 1.5) < 0.01, (d, shift)
    # One kernel in two experiments (two head dimensions): peers.md has a row for each, each compared with
    # halfmap's kernels of its own experiment.
    _, two = sweep("onednn_attention_two_dims", ["onednn_f32_attention_postscale__peer", "f32_attention_postscale__ref"],
                   ("--head-dims", "8,16", "--attn-len", "4", "--dists", "normal", "--s-min", "2^60", "--s-max", "2^64"))
    with open(os.path.join(two, "peers.md")) as f:
        table = [line for line in f if line.startswith("| onednn |")]
    assert [line.split(" | ")[1] for line in table] == ["attention_postscale_d16", "attention_postscale_d8"], table


def finding_onednn_bf16_attention(th, out):
    # Its bf16 head overflows exactly where halfmap's avx512bf16 path does (both multiply with vdpbf16ps).
    for d in DISTS:
        for op in ("prescale", "postscale"):
            peer = th[(f"onednn_bf16_attention_{op}__peer", d)]
            ours = th[(f"bf16_f32acc_attention_{op}__avx512bf16", d)]
            assert peer["s_overflow"] == ours["s_overflow"], (op, d)


def rows(out, kernel):
    with open(os.path.join(out, "cells.csv")) as f:
        return [r[6:] for r in csv.reader(f) if r[0] == kernel and r[1] != AMPLIFYING]


FWD = ("dist", "log2_s", "fwd_count", "fwd_nonfinite", "fwd_oracle_nonzero", "fwd_zero", "fwd_rel_err", "fwd_value")


def forward(out, kernel):
    """The forward columns of a kernel's cells (the sweeps here run one loss scale, S = 1)."""
    with open(os.path.join(out, "cells.csv")) as f:
        return [tuple(r[c] for c in FWD) for r in csv.DictReader(f) if r["kernel"] == kernel and r["op"] != AMPLIFYING]


FINDINGS = [
    ("onednn_bf16_flushes", finding_onednn_bf16, ["onednn_bf16_dense_fwd__peer", "bf16_f32acc_dense_fwd__ref",
                                                  "bf16_f32acc_dense_fwd__avx512bf16"], LOW),
    ("xnnpack_f32_ftz", finding_f32_ftz, ["xnnpack_f32_dense_fwd__peer", "onednn_f32_dense_fwd__peer",
                                          "f32_dense_fwd__ref"], LOW),
    ("f16_accumulation", finding_f16_acc, ["xnnpack_f16_dense_fwd__peer", "eigen_f16_dense_fwd__peer",
                                           "f16_dense_fwd__avx2", "f16_dense_fwd__ref",
                                           "f16_f32acc_dense_fwd__ref"], ()),
    ("eigen_half_sum", finding_eigen_sum, ["eigen_f16_sum__peer", "f16_sum__avx2", "f16_sum__ref"], ()),
    ("onednn_reductions", finding_onednn_reductions,
     ["onednn_bf16_maxabs__peer", "bf16_f32acc_maxabs__ref", "onednn_bf16_sum__peer", "bf16_f32acc_sum__ref",
      "bf16_f32acc_sum__avx512bf16", "onednn_f32_sumsq__peer", "f32_sumsq__ref"], ()),
    ("onednn_attention", finding_onednn_attention,
     ["onednn_f32_attention_prescale__peer", "f32_attention_prescale__ref", "onednn_f32_attention_postscale__peer",
      "f32_attention_postscale__ref"], ATTENTION),
    ("onednn_bf16_attention", finding_onednn_bf16_attention,
     ["onednn_bf16_attention_prescale__peer", "bf16_f32acc_attention_prescale__avx512bf16",
      "onednn_bf16_attention_postscale__peer", "bf16_f32acc_attention_postscale__avx512bf16"], ATTENTION),
]


TORCH_REFUSED = {"torch_f16_dot__peer", "torch_f16_dense_fwd__peer", "torch_f16_dense_bwd__peer",
                 "torch_f16_softmax__peer", "torch_f16_xent__peer", "torch_f16_mse__peer (gradient)",
                 "torch_bf16_mse__peer", "torch_f16_layernorm__peer", "torch_f16_attention_prescale__peer",
                 "torch_f16_attention_postscale__peer"}
# Not a refusal of an op torch has, but an op it lacks (no RMS normalisation in torch 1.13).
TORCH_LACKS = {"torch_rmsnorm__peer"}


def finding_torch(th, out):
    with open(os.path.join(out, "meta.json")) as f:
        meta = json.load(f)
    missing = {m["name"] for m in meta["peers"]["missing"] if m["name"].startswith("torch_")}
    assert missing == TORCH_REFUSED | TORCH_LACKS, missing
    assert all("refused by PyTorch" in m["reason"] for m in meta["peers"]["missing"] if m["name"] in TORCH_REFUSED)
    assert forward(out, "torch_f16_sum__peer") == forward(out, "f16_f32acc_sum__ref")
    for d in DISTS:
        sq, ref = th[("torch_f16_sumsq__peer", d)], th[("f16_f32acc_sumsq__ref", d)]
        assert onset(sq, "s_underflow") - onset(ref, "s_underflow") > 3.5, d
        assert sq["s_overflow"] == ref["s_overflow"], d
        mse, wide = th[("torch_f16_mse__peer", d)], th[("f16_f32acc_mse__ref", d)]
        assert "loss_scale_windows" not in mse and "loss_scale_windows" in wide, d
        assert abs(onset(wide, "s_overflow") - onset(mse, "s_overflow") - 6) < 0.01, d
        xent, hx = th[("torch_bf16_xent__peer", d)], th[("bf16_f32acc_xent__ref", d)]
        assert xent["s_overflow"]["onset"]["kind"] == "above_grid", d
        assert hx["s_overflow"]["onset"]["kind"] == "found", d
    with open(os.path.join(out, "cells.csv")) as f:
        at_one = {(r["kernel"], r["dist"]): float(r["fwd_rel_err"]) for r in csv.DictReader(f)
                  if r["log2_s"] == "0" and r["kernel"] in ("torch_bf16_dot__peer", "bf16_f32acc_dot__ref")}
    for d in DISTS:
        assert at_one[("torch_bf16_dot__peer", d)] > 10 * at_one[("bf16_f32acc_dot__ref", d)], d


def finding_torch_linear(th, out):
    assert forward(out, "torch_bf16_dense_fwd__peer") == forward(out, "onednn_bf16_dense_fwd__peer")
    for d in DISTS:
        t, ref = th[("torch_bf16_dense_fwd__peer", d)], th[("bf16_f32acc_dense_fwd__ref", d)]
        assert onset(t, "s_underflow") - onset(ref, "s_underflow") > 6, d
        assert "loss_scale_windows" in t, d  # torch's autograd gradient: the windows are mapped


def onset(r, key):
    return parse_log2(r[key]["onset"]["text"])


TORCH_FINDINGS = [
    ("torch_cpu_kernels", finding_torch,
     ["torch_f16_sum__peer", "f16_f32acc_sum__ref", "torch_f16_sumsq__peer", "f16_f32acc_sumsq__ref",
      "torch_f16_mse__peer", "f16_f32acc_mse__ref", "torch_bf16_xent__peer",
      "bf16_f32acc_xent__ref", "torch_bf16_dot__peer", "bf16_f32acc_dot__ref"], ()),
    ("torch_bf16_linear_is_onednn", finding_torch_linear,
     ["torch_bf16_dense_fwd__peer", "onednn_bf16_dense_fwd__peer", "bf16_f32acc_dense_fwd__ref",
      "bf16_f32acc_dense_fwd__avx512bf16"], LOW),
]


def torch_findings():
    """The PyTorch findings (HALFMAP_TORCH=1); returns how many ran."""
    have = available(TORCH_ENV)
    if not any(k.startswith("torch_") for k in have):
        print("SKIP torch findings: this build runs no PyTorch peer (python3-torch not found at build time, "
              "or its server failed: see meta.json's peers)")
        return 0
    ran = 0
    for name, check, kernels, extra in TORCH_FINDINGS:
        missing = [k for k in kernels if k not in have]
        if missing:
            print(f"SKIP {name}: this build cannot run {', '.join(missing)}")
            continue
        th, out = sweep(name, kernels, extra, env=TORCH_ENV)
        check(th, out)
        print(f"ok   {name}")
        ran += 1
    return ran


def run_merge_check(have):
    """`halfmap merge` of two shards writes the peers.md (and cells, thresholds) of the same sweep in one piece."""
    kernels = ["eigen_f16_sum__peer", "f16_sum__ref", "f16_f32acc_sum__ref"]
    if any(k not in have for k in kernels):
        print("SKIP merge_writes_peers_md: this build has no Eigen peer")
        return False
    base = [EXE, "sweep", "--quiet", "--kernels", ",".join(kernels)]
    whole, parts = os.path.join(OUT, "merge_whole"), [os.path.join(OUT, f"merge_{k}") for k in (1, 2)]
    subprocess.run([*base, "--out", whole], check=True)
    for k, d in enumerate(parts, 1):
        subprocess.run([*base, "--shard", f"{k}/2", "--out", d], check=True)
    merged = os.path.join(OUT, "merge_merged")
    subprocess.run([EXE, "merge", *parts, "--out", merged], check=True)
    for f in ("cells.csv", "thresholds.json", "thresholds.md", "peers.md"):
        with open(os.path.join(whole, f), "rb") as a, open(os.path.join(merged, f), "rb") as b:
            assert a.read() == b.read(), f
    print("ok   merge_writes_peers_md")
    return True


def main():
    have = available()
    ran = 0
    for name, check, kernels, extra in FINDINGS:
        missing = [k for k in kernels if k not in have]
        if missing:
            print(f"SKIP {name}: this build cannot run {', '.join(missing)}")
            continue
        th, out = sweep(name, kernels, extra)
        check(th, out)
        print(f"ok   {name}")
        ran += 1
    pairs = [("eigen_f32_maxabs__peer", "f32_maxabs__ref"), ("eigen_f16_maxabs__peer", "f16_maxabs__avx2")]
    if all(k in have for p in pairs for k in p):
        _, out = sweep("maxabs", [k for p in pairs for k in p])
        for peer, ours in pairs:
            assert rows(out, peer) == rows(out, ours), peer
        print("ok   eigen_maxabs_identical")
        ran += 1
    else:
        print("SKIP eigen_maxabs_identical: this build has no Eigen peer or no avx2 path")
    if run_merge_check(have):
        ran += 1
    ran += torch_findings()
    return 0 if ran else 77


if __name__ == "__main__":
    sys.exit(main())
