// The server processes of the PyTorch peer (torch_server.hpp). A socket pair rather than two pipes: the parent
// sends with MSG_NOSIGNAL, so a server that died is an error of the call, never a SIGPIPE for halfmap.
#include "peers/torch_server.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

extern char** environ;

namespace halfmap::peers::torch {

namespace {

/// A failure of the transport: the server is unusable afterwards (a refusal by torch is a plain runtime_error).
struct Broken : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] void fail(const std::string& what) {
  throw Broken(fmt::format("the PyTorch server (tools/torch_peer.py) {}", what));
}

}  // namespace

Server::Server(const std::string& python, const std::string& script) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    fail(fmt::format("socketpair: {}", strerror(errno)));
  }
  // The child's end above 2, so that dup2 onto 0 and 1 always clears its close-on-exec flag (fd 0 or 1 could be
  // free when halfmap runs with stdin or stdout closed).
  const int child = ::fcntl(sv[1], F_DUPFD_CLOEXEC, 3);
  ::close(sv[1]);
  if (child < 0) {
    ::close(sv[0]);
    fail(fmt::format("fcntl: {}", strerror(errno)));
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, child, 0);
  posix_spawn_file_actions_adddup2(&fa, child, 1);
  std::string a0 = python, a1 = script, a2 = "--serve";
  char* argv[] = {a0.data(), a1.data(), a2.data(), nullptr};
  const int rc = ::posix_spawn(&pid_, python.c_str(), &fa, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(child);
  if (rc != 0) {
    ::close(sv[0]);
    fail(fmt::format("could not be started with {}: {}", python, strerror(rc)));
  }
  fd_ = sv[0];
}

Server::~Server() {
  if (fd_ >= 0) ::close(fd_);  // the server reads EOF and exits
  if (pid_ > 0) {
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
}

void Server::send_all(const void* data, std::size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::send(fd_, p, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail(fmt::format("stopped reading its requests: {}", strerror(errno)));
    p += n;
    size -= std::size_t(n);
  }
}

std::string Server::read_line() {
  for (;;) {
    for (std::size_t i = pos_; i < buf_.size(); ++i) {
      if (buf_[i] == '\n') {
        std::string line(buf_.data() + pos_, i - pos_);
        pos_ = i + 1;
        return line;
      }
    }
    if (buf_.size() - pos_ > 4096) fail("sent a reply line longer than 4096 bytes");
    buf_.erase(buf_.begin(), buf_.begin() + std::ptrdiff_t(pos_));
    pos_ = 0;
    const std::size_t old = buf_.size();
    buf_.resize(old + 65536);
    const ssize_t n = ::recv(fd_, buf_.data() + old, 65536, 0);
    buf_.resize(old + std::size_t(n > 0 ? n : 0));
    if (n == 0) fail("exited (its error, if any, is on stderr above)");
    if (n < 0 && errno != EINTR) fail(fmt::format("could not be read: {}", strerror(errno)));
  }
}

void Server::read_exact(std::string& out, std::size_t size) {
  out.clear();
  out.reserve(size);
  const std::size_t have = std::min(size, buf_.size() - pos_);
  out.append(buf_.data() + pos_, have);
  pos_ += have;
  while (out.size() < size) {
    char chunk[65536];
    const ssize_t n = ::recv(fd_, chunk, std::min(sizeof chunk, size - out.size()), 0);
    if (n == 0) fail("exited in the middle of a reply");
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(fmt::format("could not be read: {}", strerror(errno)));
    }
    out.append(chunk, std::size_t(n));
  }
}

std::string Server::call(const std::string& line, std::span<const Bytes> inputs) {
  const std::string head = line + '\n';
  send_all(head.data(), head.size());
  for (const Bytes& b : inputs) send_all(b.data, b.size);
  const std::string reply = read_line();
  if (reply.rfind("ok ", 0) == 0) {
    std::string out;
    read_exact(out, std::stoull(reply.substr(3)));
    return out;
  }
  if (reply.rfind("error ", 0) == 0) throw std::runtime_error(reply.substr(6));
  fail(fmt::format("answered '{}', not a reply", reply.substr(0, 80)));
}

std::string Pool::call(const std::string& line, std::span<const Bytes> inputs) {
  std::unique_ptr<Server> s;
  {
    std::lock_guard<std::mutex> lock(m_);
    if (!free_.empty()) {
      s = std::move(free_.back());
      free_.pop_back();
    } else {
      ++started_;
    }
  }
  if (!s) s = std::make_unique<Server>(python_, script_);
  std::string out;
  try {
    out = s->call(line, inputs);
  } catch (const Broken&) {
    throw;  // the server is dropped (its destructor waits for it)
  } catch (const std::runtime_error&) {
    std::lock_guard<std::mutex> lock(m_);  // torch refused the request: the server is still usable
    free_.push_back(std::move(s));
    throw;
  }
  std::lock_guard<std::mutex> lock(m_);
  free_.push_back(std::move(s));
  return out;
}

std::size_t Pool::started() const {
  std::lock_guard<std::mutex> lock(m_);
  return started_;
}

}  // namespace halfmap::peers::torch
