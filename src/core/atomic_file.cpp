// include/halfmap/atomic_file.hpp: mkstemp beside the target, write, fchmod, close, rename.
#include "halfmap/atomic_file.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

namespace halfmap {

void write_file_atomic(const std::string& path, std::string_view text) {
  const std::size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  std::string tmpl = dir + "/." + base + ".XXXXXX";
  const int fd = ::mkstemp(tmpl.data());
  if (fd < 0)
    throw std::runtime_error(fmt::format("cannot create a temporary file in {}: {}", dir, std::strerror(errno)));
  std::size_t off = 0;
  bool ok = true;
  while (off < text.size()) {
    const ssize_t w = ::write(fd, text.data() + off, text.size() - off);
    if (w <= 0) {
      ok = false;
      break;
    }
    off += std::size_t(w);
  }
  ok = ok && ::fchmod(fd, 0644) == 0;
  ok = (::close(fd) == 0) && ok;
  if (!ok || std::rename(tmpl.c_str(), path.c_str()) != 0) {
    const int e = errno;
    std::remove(tmpl.c_str());
    throw std::runtime_error(fmt::format("cannot write {}: {}", path, std::strerror(e)));
  }
}

}  // namespace halfmap
