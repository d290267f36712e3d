// PyTorch's CPU kernels as peers of the sweep (not timed: halfmap_bench's list of libraries has no torch, and
// nothing here has a Timing). Each kernel sends its stored input bytes to tools/torch_peer.py (a server process
// per concurrent caller, torch_server.hpp) and copies the output tensors' bytes back, so torch computes on exactly
// the values halfmap stored, and the sweep's own code counts, classifies and searches the thresholds.
//
//   torch_<dtype>_sum__peer        x.sum()
//   torch_<dtype>_sumsq__peer      torch.square(x).sum(): the squares rounded to the storage type, then summed
//   torch_<dtype>_dot__peer        torch.dot(x, y)
//   torch_<dtype>_dense_fwd__peer  F.linear(X, Wᵀ, b) (the N×K weight nn.Linear holds); dense_bwd__peer: autograd
//   torch_<dtype>_mse__peer        F.mse_loss(p, y); its gradient: (loss · S).backward(), S float32 (GradScaler)
//   torch_<dtype>_softmax__peer    torch.softmax(x, dim=1)
//   torch_<dtype>_xent__peer       F.cross_entropy(logits, labels); gradient as mse's
//   torch_<dtype>_layernorm__peer  F.layer_norm(x, (cols,), γ, β, ε); its backward: y.backward(dy) for dx, dγ, dβ.
//                                  torch's statistics are not reported (NormArgs::mean and var are left alone);
//                                  torch 1.13 has no RMS normalisation (rmsnorm: refused)
//   torch_<dtype>_attention_prescale__peer   one head of torch ops, the scale placed as torch 1.13's
//                                  _scaled_dot_product_attention places it: q / √d, then q @ kᵀ, masked_fill(-inf)
//                                  above the diagonal when causal, softmax (dim -1), @ v; its backward:
//                                  o.backward(dO) for dq, dk, dv (torch 1.13 refuses fp16 matmul on the CPU)
//   torch_<dtype>_attention_postscale__peer  the same with (q @ kᵀ) / √d, as Hugging Face's BERT and GPT-2
// for dtype f16 and bf16. Each (op, dtype) is probed when the list is built: what torch refuses (RuntimeError
// "... not implemented for 'Half'") is not mapped and is named with torch's message; a loss whose gradient is
// refused is mapped forward only (Kernel::forward_only). Every kernel's mode is the f32-accumulating one of its
// storage (f16_f32acc, bf16_f32acc): torch's CPU kernels compute fp16 and bf16 in float (at::opmath_type) and round
// each output tensor to the storage type; peers.md says where the cells show otherwise.
//
// Run only when HALFMAP_TORCH=1: the servers import torch, a few seconds each, which every other `halfmap` command
// (and the tests' many calls) would otherwise pay. Act relu, unused by the sweep, is applied after, on the stored Y.
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "halfmap/storage.hpp"
#include "peers/peers.hpp"
#include "peers/torch_server.hpp"

namespace halfmap::peers {
namespace {

using torch::Bytes;

torch::Pool* pool = nullptr;  // set by torch_library() before any kernel can be called

Bytes of(const void* p, std::size_t count, DType t) { return {p, count * dtype_size(t)}; }

/// Runs one request; the reply must hold exactly `elements` elements of type t.
std::string call(const std::string& line, std::initializer_list<Bytes> in, std::size_t elements, DType t) {
  std::string r = pool->call(line, std::span<const Bytes>(in.begin(), in.size()));
  if (r.size() != elements * dtype_size(t)) {
    throw std::runtime_error(
        fmt::format("torch answered '{}' with {} bytes, not {}", line, r.size(), elements * dtype_size(t)));
  }
  return r;
}

/// Copies `count` elements from the reply at element `at` into `dst` (skipped when dst is null).
void copy_out(const std::string& r, std::size_t at, std::size_t count, DType t, void* dst) {
  if (dst != nullptr) std::memcpy(dst, r.data() + at * dtype_size(t), count * dtype_size(t));
}

/// The reply's element `at` widened exactly.
float element(const std::string& r, std::size_t at, DType t) { return float(load(t, r.data(), at)); }

/// A loss scale as the server reads it: the shortest text that parses back to the same double (exactly the f32).
std::string scale_text(float s) { return fmt::format("{}", double(s)); }

template <DType T, Op O>
float reduce(const void* x, const void* y, std::size_t n) {
  const std::string line = fmt::format("{} {} {}", op_name(O), dtype_name(T), n);
  const std::string r = O == Op::dot ? call(line, {of(x, n, T), of(y, n, T)}, 1, T) : call(line, {of(x, n, T)}, 1, T);
  return element(r, 0, T);
}

template <DType T>
void dense(const DenseArgs& a) {
  const std::string line = fmt::format("dense_fwd {} {} {} {} {}", dtype_name(T), a.m, a.k, a.n, a.b ? 1 : 0);
  const std::string r = a.b ? call(line, {of(a.x, a.m * a.k, T), of(a.w, a.k * a.n, T), of(a.b, a.n, T)}, a.m * a.n, T)
                            : call(line, {of(a.x, a.m * a.k, T), of(a.w, a.k * a.n, T)}, a.m * a.n, T);
  copy_out(r, 0, a.m * a.n, T, a.y);
  if (a.act == Act::relu) {
    for (std::size_t i = 0; i < a.m * a.n; ++i) {
      if (load(T, a.y, i) < 0) store(T, a.y, i, 0.0);
    }
  }
}

template <DType T>
void dense_bwd(const DenseBwdArgs& a) {
  const std::string line = fmt::format("dense_bwd {} {} {} {}", dtype_name(T), a.m, a.k, a.n);
  const std::string r = call(line, {of(a.x, a.m * a.k, T), of(a.w, a.k * a.n, T), of(a.dy, a.m * a.n, T)},
                             a.m * a.k + a.k * a.n + a.n, T);
  copy_out(r, 0, a.m * a.k, T, a.dx);
  copy_out(r, a.m * a.k, a.k * a.n, T, a.dw);
  copy_out(r, a.m * a.k + a.k * a.n, a.n, T, a.db);
}

template <DType T>
float mse(const LossArgs& a) {
  const bool grad = a.dp != nullptr;
  const std::string line = fmt::format("mse {} {} {} {}", dtype_name(T), a.n, grad ? 1 : 0, scale_text(a.loss_scale));
  const std::string r = call(line, {of(a.p, a.n, T), of(a.y, a.n, T)}, 1 + (grad ? a.n : 0), T);
  copy_out(r, 1, a.n, T, grad ? a.dp : nullptr);
  return element(r, 0, T);
}

template <DType T>
void softmax(const SoftmaxArgs& a) {
  const std::size_t n = a.rows * a.cols;
  const std::string r = call(fmt::format("softmax {} {} {}", dtype_name(T), a.rows, a.cols), {of(a.x, n, T)}, n, T);
  copy_out(r, 0, n, T, a.y);
}

template <DType T>
float xent(const XentArgs& a) {
  const std::size_t n = a.rows * a.cols;
  const bool grad = a.dlogits != nullptr, probs = a.probs != nullptr;
  const std::string line = fmt::format("xent {} {} {} {} {} {}", dtype_name(T), a.rows, a.cols, grad ? 1 : 0,
                                       scale_text(a.loss_scale), probs ? 1 : 0);
  const std::string r = call(line, {of(a.logits, n, T), Bytes{a.labels, a.rows * sizeof(std::int32_t)}},
                             1 + (probs ? n : 0) + (grad ? n : 0), T);
  copy_out(r, 1, n, T, a.probs);
  copy_out(r, 1 + (probs ? n : 0), n, T, a.dlogits);
  return element(r, 0, T);
}

template <DType T>
void layernorm(const NormArgs& a) {
  const std::size_t n = a.rows * a.cols;
  const bool grad = a.dy != nullptr;
  TypedBuffer ones(T, a.gamma == nullptr ? a.cols : 0), zeros(T, a.beta == nullptr ? a.cols : 0);
  for (std::size_t j = 0; j < ones.size(); ++j) ones.set(j, 1.0);
  for (std::size_t j = 0; j < zeros.size(); ++j) zeros.set(j, 0.0);
  const void* gamma = a.gamma != nullptr ? a.gamma : ones.data();
  const void* beta = a.beta != nullptr ? a.beta : zeros.data();
  const std::string line =
      fmt::format("layernorm {} {} {} {} {}", dtype_name(T), a.rows, a.cols, grad ? 1 : 0, scale_text(a.eps));
  const std::string r = grad ? call(line, {of(a.x, n, T), of(gamma, a.cols, T), of(beta, a.cols, T), of(a.dy, n, T)},
                                    2 * n + 2 * a.cols, T)
                             : call(line, {of(a.x, n, T), of(gamma, a.cols, T), of(beta, a.cols, T)}, n, T);
  copy_out(r, 0, n, T, a.y);
  if (!grad) return;
  copy_out(r, n, n, T, a.dx);
  copy_out(r, 2 * n, a.cols, T, a.dgamma);
  copy_out(r, 2 * n + a.cols, a.cols, T, a.dbeta);
}

template <DType T, bool kPrescale>
void attention(const AttentionArgs& a) {
  const std::size_t ld = a.len * a.dim, ll = a.len * a.len;
  const bool grad = a.dout != nullptr;
  const std::string line = fmt::format("attention {} {} {} {} {} {}", dtype_name(T), a.len, a.dim, a.causal ? 1 : 0,
                                       kPrescale ? 1 : 0, grad ? 1 : 0);
  const std::string r =
      grad ? call(line, {of(a.q, ld, T), of(a.k, ld, T), of(a.v, ld, T), of(a.dout, ld, T)}, ld + ll + 3 * ld, T)
           : call(line, {of(a.q, ld, T), of(a.k, ld, T), of(a.v, ld, T)}, ld + ll, T);
  copy_out(r, 0, ld, T, a.o);
  copy_out(r, ld, ll, T, a.scores);
  if (!grad) return;
  copy_out(r, ld + ll, ld, T, a.dq);
  copy_out(r, 2 * ld + ll, ld, T, a.dk);
  copy_out(r, 3 * ld + ll, ld, T, a.dv);
}

/// One kernel torch_peer.py is asked about: the probe's key ("<dtype>_<op>") and, for a loss, its gradient's.
struct Candidate {
  Peer peer;
  const char* key;
  const char* grad_key;  // null: no separate gradient
};

/// The kernels of one storage type. `dot_tol` is the dot's own: torch 1.13's bf16 dot rounds every product and
/// every partial sum to bf16 (on the check's 1000 terms it gives 8.25 where float64 gives 8.638, bit for bit what
/// a sequential bf16 multiply-then-add gives; f32 accumulation gives 8.625), an error 10× the other bf16 kernels'
/// that the check admits so that the sweep maps it (halfmap has no bf16-accumulating mode: it is compared with
/// bf16_f32acc, whose forward tolerance 2^-5 then decides where its precision counts as lost).
template <DType T>
std::vector<Candidate> candidates(const char* names[8], const char* keys[10], Mode mode, double tol, double dot_tol) {
  return {{peer<Op::sum>(names[0], mode, T, reduce<T, Op::sum>, tol), keys[0], nullptr},
          {peer<Op::sumsq>(names[1], mode, T, reduce<T, Op::sumsq>, tol), keys[1], nullptr},
          {peer<Op::dot>(names[2], mode, T, reduce<T, Op::dot>, dot_tol), keys[2], nullptr},
          {peer<Op::dense_fwd>(names[3], mode, T, dense<T>, tol), keys[3], nullptr},
          {peer<Op::dense_bwd>(names[4], mode, T, dense_bwd<T>, tol), keys[4], nullptr},
          {peer<Op::mse>(names[5], mode, T, mse<T>, tol), keys[5], keys[6]},
          {peer<Op::softmax>(names[6], mode, T, softmax<T>, tol), keys[7], nullptr},
          {peer<Op::xent>(names[7], mode, T, xent<T>, tol), keys[8], keys[9]}};
}

/// The two attention kernels of one storage type (both probed as "<dtype>_attention" and "<dtype>_attention_grad").
template <DType T>
std::vector<Candidate> attention_candidates(Mode mode, double tol) {
  static const std::string pre = fmt::format("torch_{}_attention_prescale__peer", dtype_name(T)),
                           post = fmt::format("torch_{}_attention_postscale__peer", dtype_name(T)),
                           key = fmt::format("{}_attention", dtype_name(T)), grad_key = key + "_grad";
  return {{peer<Op::attention_prescale>(pre, mode, T, attention<T, true>, tol), key.c_str(), grad_key.c_str()},
          {peer<Op::attention_postscale>(post, mode, T, attention<T, false>, tol), key.c_str(), grad_key.c_str()}};
}

const char* f16_names[8] = {"torch_f16_sum__peer",       "torch_f16_sumsq__peer",     "torch_f16_dot__peer",
                            "torch_f16_dense_fwd__peer", "torch_f16_dense_bwd__peer", "torch_f16_mse__peer",
                            "torch_f16_softmax__peer",   "torch_f16_xent__peer"};
const char* f16_keys[10] = {"f16_sum", "f16_sumsq",    "f16_dot",     "f16_dense_fwd", "f16_dense_bwd",
                            "f16_mse", "f16_mse_grad", "f16_softmax", "f16_xent",      "f16_xent_grad"};
const char* bf16_names[8] = {"torch_bf16_sum__peer",       "torch_bf16_sumsq__peer",     "torch_bf16_dot__peer",
                             "torch_bf16_dense_fwd__peer", "torch_bf16_dense_bwd__peer", "torch_bf16_mse__peer",
                             "torch_bf16_softmax__peer",   "torch_bf16_xent__peer"};
const char* bf16_keys[10] = {"bf16_sum", "bf16_sumsq",    "bf16_dot",     "bf16_dense_fwd", "bf16_dense_bwd",
                             "bf16_mse", "bf16_mse_grad", "bf16_softmax", "bf16_xent",      "bf16_xent_grad"};

}  // namespace

Library torch_library() {
  const char* on = std::getenv("HALFMAP_TORCH");
  if (on == nullptr || std::strcmp(on, "1") != 0) {
    throw Unavailable(
        "built, not run: HALFMAP_TORCH=1 runs PyTorch's CPU kernels (tools/torch_peer.py, one Python server per "
        "sweep thread, each a few seconds to import torch).");
  }
  const std::string python = HALFMAP_PEER_TORCH_PYTHON, script = HALFMAP_PEER_TORCH_SCRIPT;
  if (::access(script.c_str(), R_OK) != 0) throw Unavailable(fmt::format("its server {} is missing.", script));
  static torch::Pool the_pool(python, script);
  pool = &the_pool;
  const nlohmann::json hello = nlohmann::json::parse(pool->call("hello", {}));
  const std::string version = hello.at("torch").get<std::string>();
  const nlohmann::json& ops = hello.at("ops");
  Library l{"torch",
            fmt::format("PyTorch {} (Debian python3-torch {}), ATen CPU capability {}, mkldnn {}; "
                        "torch.set_num_threads(1); tools/torch_peer.py run by {}, one server per concurrent "
                        "caller, the stored inputs sent as bytes",
                        version, HALFMAP_PEER_TORCH_VERSION, hello.at("cpu_capability").get<std::string>(),
                        hello.at("mkldnn").get<bool>() ? "on" : "off", python),
            {},
            {}};
  std::vector<Candidate> all = candidates<DType::f16>(f16_names, f16_keys, Mode::f16_f32acc, 2e-3, 2e-3);
  for (Candidate& c : candidates<DType::bf16>(bf16_names, bf16_keys, Mode::bf16_f32acc, 2e-2, 0.1)) all.push_back(c);
  all.push_back(
      {peer<Op::layernorm>("torch_f16_layernorm__peer", Mode::f16_f32acc, DType::f16, layernorm<DType::f16>, 5e-3),
       "f16_layernorm", "f16_layernorm_grad"});
  all.push_back(
      {peer<Op::layernorm>("torch_bf16_layernorm__peer", Mode::bf16_f32acc, DType::bf16, layernorm<DType::bf16>, 5e-2),
       "bf16_layernorm", "bf16_layernorm_grad"});
  for (Candidate& c : attention_candidates<DType::f16>(Mode::f16_f32acc, 5e-3)) all.push_back(c);
  for (Candidate& c : attention_candidates<DType::bf16>(Mode::bf16_f32acc, 5e-2)) all.push_back(c);
  l.refused.push_back(
      {"torch_rmsnorm__peer", fmt::format("PyTorch {} has no RMS normalisation (no rmsnorm peer).", version)});
  for (Candidate& c : all) {
    const std::string status = ops.value(c.key, "refused: not probed");
    if (status != "ok") {
      l.refused.push_back({std::string(c.peer.kernel.name),
                           fmt::format("refused by PyTorch {}: {}.", version, status.substr(status.find(' ') + 1))});
      continue;
    }
    if (c.grad_key != nullptr) {
      const std::string g = ops.value(c.grad_key, "refused: not probed");
      if (g != "ok") {
        c.peer.kernel.forward_only = true;
        l.refused.push_back({fmt::format("{} (gradient)", c.peer.kernel.name),
                             fmt::format("refused by PyTorch {}: {}; its forward is mapped alone.", version,
                                         g.substr(g.find(' ') + 1))});
      }
    }
    l.peers.push_back(c.peer);
  }
  return l;
}

}  // namespace halfmap::peers
