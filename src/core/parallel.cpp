// The worker pool behind run_team (include/halfmap/parallel.hpp) and the thread-count settings.
#include "halfmap/parallel.hpp"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

#include <fmt/format.h>

#if defined(__linux__)
#include <sched.h>
#endif

namespace halfmap {
namespace {

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

/// Returns once `a` no longer holds `old`: spins first (a team's members arrive within microseconds of each
/// other, and back-to-back calls find their workers still spinning), then sleeps on the address.
void wait_while_equal(const std::atomic<std::uint32_t>& a, std::uint32_t old) {
  // 5 to 50 µs of pause instructions, depending on the core's pause latency: long enough for a balanced team's
  // members to meet, short enough not to keep a core from a descheduled member on a loaded machine.
  constexpr int kSpins = 1000;
  for (int i = 0; i < kSpins; ++i) {
    if (a.load(std::memory_order_acquire) != old) return;
    cpu_relax();
  }
  while (a.load(std::memory_order_acquire) == old) a.wait(old, std::memory_order_acquire);
}

/// What the members of one team share. Each counter on a cache line of its own: members spin on them.
struct TeamState {
  explicit TeamState(unsigned n) : size(n) {}
  const unsigned size;
  alignas(64) std::atomic<std::uint32_t> arrived{0};
  alignas(64) std::atomic<std::uint32_t> generation{0};
};

class Member final : public Team {
 public:
  Member(TeamState& s, unsigned rank) : s_(s), rank_(rank) {}
  unsigned rank() const override { return rank_; }
  unsigned size() const override { return s_.size; }
  void barrier() override {
    // Sense by generation: the last to arrive resets the count, then opens the barrier by bumping the generation
    // (release: everything written before anyone's arrival is visible to everyone who sees the new generation).
    const std::uint32_t gen = s_.generation.load(std::memory_order_acquire);
    if (s_.arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == s_.size) {
      s_.arrived.store(0, std::memory_order_relaxed);
      s_.generation.store(gen + 1, std::memory_order_release);
      s_.generation.notify_all();
      return;
    }
    wait_while_equal(s_.generation, gen);
  }

 private:
  TeamState& s_;
  unsigned rank_;
};

/// One pooled thread. The caller posts a job by setting fn/team/rank and bumping `posted`; the worker runs it
/// and sets `done` to the same count. Both on cache lines of their own; the Worker outlives every team (the
/// pool is never destroyed), so the worker may touch `done` after the caller has stopped waiting.
struct Worker {
  alignas(64) std::atomic<std::uint32_t> posted{0};
  alignas(64) std::atomic<std::uint32_t> done{0};
  const std::function<void(Team&)>* fn = nullptr;
  TeamState* team = nullptr;
  unsigned rank = 0;

  void loop() {
    std::uint32_t seen = 0;
    for (;;) {
      wait_while_equal(posted, seen);
      seen = posted.load(std::memory_order_acquire);
      Member m(*team, rank);
      (*fn)(m);
      done.store(seen, std::memory_order_release);
      done.notify_one();
    }
  }
};

class Pool {
 public:
  /// `count` idle workers, created if the pool has fewer.
  std::vector<Worker*> check_out(unsigned count) {
    std::vector<Worker*> out;
    std::lock_guard<std::mutex> lock(mutex_);
    while (out.size() < count && !idle_.empty()) {
      out.push_back(idle_.back());
      idle_.pop_back();
    }
    while (out.size() < count) {
      all_.push_back(std::make_unique<Worker>());
      Worker* w = all_.back().get();
      std::thread([w] { w->loop(); }).detach();  // parked for the life of the process
      out.push_back(w);
    }
    return out;
  }
  void give_back(const std::vector<Worker*>& workers) {
    std::lock_guard<std::mutex> lock(mutex_);
    idle_.insert(idle_.end(), workers.begin(), workers.end());
  }

 private:
  std::mutex mutex_;
  std::vector<std::unique_ptr<Worker>> all_;
  std::vector<Worker*> idle_;
};

Pool& pool() {
  static Pool* p = new Pool;  // never destroyed: workers may still be parked when static destructors run
  return *p;
}

std::atomic<std::size_t> g_teams{0};

struct EnvState {
  std::optional<unsigned> threads;
  std::string error;
};

const EnvState& env_state() {
  static const EnvState state = [] {
    EnvState s;
    const char* env = std::getenv("HALFMAP_THREADS");
    if (env == nullptr || *env == '\0') return s;
    s.threads = parse_threads(env);
    if (!s.threads) {
      s.error = fmt::format("HALFMAP_THREADS={} is not a thread count; use an integer from 1 to {}.", env, kMaxThreads);
    }
    return s;
  }();
  return state;
}

}  // namespace

unsigned hardware_threads() {
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return unsigned(CPU_COUNT(&set));
#endif
  const unsigned hw = std::thread::hardware_concurrency();
  return hw > 0 ? hw : 1;
}

std::optional<unsigned> parse_threads(std::string_view text) {
  if (text.empty() || text.size() > 4) return std::nullopt;
  unsigned v = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + unsigned(c - '0');
  }
  if (v < 1 || v > kMaxThreads) return std::nullopt;
  return v;
}

std::optional<unsigned> threads_env() { return env_state().threads; }
std::string threads_env_error() { return env_state().error; }
unsigned default_threads() { return threads_env().value_or(hardware_threads()); }

void run_team(unsigned threads, const std::function<void(Team&)>& fn) {
  if (threads <= 1) {
    TeamState solo(1);
    Member m(solo, 0);
    fn(m);
    return;
  }
  g_teams.fetch_add(1, std::memory_order_relaxed);
  TeamState state(threads);
  const std::vector<Worker*> workers = pool().check_out(threads - 1);
  std::vector<std::uint32_t> job(workers.size());
  for (std::size_t i = 0; i < workers.size(); ++i) {
    Worker& w = *workers[i];
    w.fn = &fn;
    w.team = &state;
    w.rank = unsigned(i + 1);
    job[i] = w.posted.load(std::memory_order_relaxed) + 1;
    w.posted.store(job[i], std::memory_order_release);
    w.posted.notify_one();
  }
  Member me(state, 0);
  fn(me);
  for (std::size_t i = 0; i < workers.size(); ++i) {
    Worker& w = *workers[i];
    std::uint32_t d = w.done.load(std::memory_order_acquire);
    while (d != job[i]) {
      wait_while_equal(w.done, d);
      d = w.done.load(std::memory_order_acquire);
    }
  }
  pool().give_back(workers);
}

std::size_t teams_started() { return g_teams.load(std::memory_order_relaxed); }

}  // namespace halfmap
