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

}  // namespace halfmap
