// Threads for the work halfmap splits inside one call (the dense layers: src/kernels/common/gemm.hpp): how many
// "all cores" is, the HALFMAP_THREADS setting, and a pool of parked worker threads that run one function as a
// team with a barrier. Core layer: it knows nothing of kernels; the kernels call it, and the programs (cli,
// bench) only choose the thread count.
//
// A team is the calling thread (rank 0) and `size - 1` workers checked out of the pool for this call alone, so
// concurrent callers (the sweep's own threads, a user's) never share workers, and a call from inside a team
// checks out workers of its own. Workers are created on first need and then kept, parked, for the life of the
// process: after a team they spin briefly for the next one (back-to-back calls, as a benchmark makes, cost no
// wake-up), then sleep on a futex (std::atomic::wait). Every thread's memory (its thread_local packing buffers)
// is first touched by that thread, so on a NUMA machine it lands on the node the thread runs on.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace halfmap {

/// The CPUs this process may run on (sched_getaffinity on Linux, else std::thread::hardware_concurrency), at
/// least 1: what "all cores" means for halfmap's defaults.
unsigned hardware_threads();

/// The largest thread count a program accepts (HALFMAP_THREADS, --threads, --halfmap_threads).
inline constexpr unsigned kMaxThreads = 1024;

/// HALFMAP_THREADS, read once: nullopt when unset or empty. An invalid value (not an integer in 1..kMaxThreads)
/// is reported by threads_env_error() and reads as unset.
std::optional<unsigned> threads_env();
/// One sentence saying why HALFMAP_THREADS is invalid, or empty when it is unset or valid. Programs check it at
/// start and exit 2 with it.
std::string threads_env_error();
/// The default thread count of halfmap's multi-threaded work: HALFMAP_THREADS when set, else hardware_threads().
unsigned default_threads();

/// Parses a thread count "1".."1024" (decimal digits only); nullopt otherwise.
std::optional<unsigned> parse_threads(std::string_view text);

/// The members of one run_team call. rank() is 0 on the calling thread, 1..size()-1 on the workers.
class Team {
 public:
  virtual ~Team() = default;
  virtual unsigned rank() const = 0;
  virtual unsigned size() const = 0;
  /// Returns once every member has called it (as many times): writes made before it by any member are visible
  /// to every member after it. Spins briefly, then sleeps.
  virtual void barrier() = 0;
};

/// Runs fn on `threads` threads at once, the calling thread and threads - 1 pooled workers, each with its own
/// Team view, and returns when all have returned. threads <= 1: fn runs on the calling thread alone, with no
/// worker and no synchronisation. fn must not throw (a throw from a worker ends the program: the others could be
/// waiting for it at a barrier). Thread-safe.
void run_team(unsigned threads, const std::function<void(Team&)>& fn);

/// How many run_team calls have used more than one thread in this process (tests check that a multi-threaded
/// path really ran on several threads).
std::size_t teams_started();

}  // namespace halfmap
