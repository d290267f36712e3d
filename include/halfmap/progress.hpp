// How a long run (a sweep, a diagnosis) reports its progress on stderr. On a terminal one line is redrawn in place
// several times a second; anywhere else (a log file, a pipe, CI) redrawing would fill the log with carriage
// returns, so the run writes a whole line once a minute instead, and nothing at all when it ends within the first
// minute. The programs choose the mode (src/cli: redraw when stderr is a terminal, else lines; --quiet: off).
#pragma once

#include <chrono>

namespace halfmap {

enum class Progress : unsigned char {
  off,     // nothing on stderr
  redraw,  // one line redrawn in place (a terminal)
  lines,   // a line every kProgressLineInterval, the first after one interval (a log)
};

/// The interval of Progress::lines.
inline constexpr std::chrono::seconds kProgressLineInterval{60};
/// The shortest interval between two redraws of Progress::redraw: a progress line must not cost the work it
/// reports on.
inline constexpr std::chrono::milliseconds kProgressRedrawInterval{250};

/// When a run's next progress line is due, the one pacing rule of every long run: Progress::redraw at once and then
/// at most every kProgressRedrawInterval; Progress::lines every `interval` (kProgressLineInterval, shorter in the
/// tests; 0: at every call) after the start, so a run that ends within the first interval writes none;
/// Progress::off never. Not thread-safe: a run that reports from several threads holds its own lock around due().
class ProgressPacer {
 public:
  using Clock = std::chrono::steady_clock;

  ProgressPacer(Progress mode, std::chrono::milliseconds interval, Clock::time_point start)
      : mode_(mode),
        every_(mode == Progress::redraw ? Clock::duration(kProgressRedrawInterval) : Clock::duration(interval)),
        next_(mode == Progress::redraw ? start : start + every_) {}

  /// Whether a line is due at `now` (or `force`d: a redrawn line at the end of a stage); if so, the next one is
  /// scheduled a whole number of intervals later.
  bool due(Clock::time_point now, bool force = false) {
    if (mode_ == Progress::off) return false;
    if (now < next_ && !(force && mode_ == Progress::redraw)) return false;
    if (every_ <= Clock::duration::zero()) return true;  // an interval of 0 (a test): every call
    if (next_ <= now) next_ += every_ * ((now - next_) / every_ + 1);
    return true;
  }
  /// When the next line is due.
  Clock::time_point next() const { return next_; }

 private:
  Progress mode_;
  Clock::duration every_;
  Clock::time_point next_;
};

}  // namespace halfmap
