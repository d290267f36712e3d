// The parsers of `halfmap sweep`'s options (sweep_args.hpp).
#include "cli/sweep_args.hpp"

#include <cmath>
#include <cstdio>

#include <fmt/format.h>

#include "cli/command.hpp"
#include "halfmap/detmath.hpp"

namespace halfmap::cli {

int usage_error(std::string_view sentence) {
  std::fputs(fmt::format("halfmap: {}\n", sentence).c_str(), stderr);
  return kExitUsage;
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= s.size()) {
    const std::size_t comma = s.find(',', start);
    const std::string item = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!item.empty()) out.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

bool parse_double(std::string_view s, double& out) {
  if (s.empty()) return false;
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, out);
  return ec == std::errc() && p == end && std::isfinite(out);
}

std::optional<double> parse_scale(std::string_view s) {
  double v = 0;
  if (s.size() > 2 && s.substr(0, 2) == "2^") {
    if (!parse_double(s.substr(2), v)) return std::nullopt;
    return v;
  }
  if (!parse_double(s, v) || !(v > 0)) return std::nullopt;
  return det::log2(v);
}

std::optional<double> parse_step(std::string_view s) {
  double v = 0;
  if (s.size() > 2 && s.substr(0, 2) == "2^") {
    if (!parse_double(s.substr(2), v)) return std::nullopt;
    return v;
  }
  if (!parse_double(s, v)) return std::nullopt;
  if (!(v > 0)) return -1.0;  // a factor <= 0 is no step: reported as a step <= 0
  return det::log2(v);
}

}  // namespace halfmap::cli
