// Writing a file so that no reader ever sees it half-written (docs/contributing.md: nothing half-written is
// left behind).
#pragma once

#include <string>
#include <string_view>

namespace halfmap {

/// Writes `text` to `path` through a temporary file in the same folder (mode 0644), renamed into place: `path`
/// holds either its old content or all of `text`. Throws std::runtime_error with one sentence (naming the file
/// and the system's reason) when it cannot; the temporary file is then removed.
void write_file_atomic(const std::string& path, std::string_view text);

}  // namespace halfmap
