// The PyTorch peer's transport (internal to src/peers/): tools/torch_peer.py run as a server process, spoken to over
// a Unix socket pair that is the child's stdin and stdout, with the request protocol the script's docstring
// states. One request at a time per server; a pool keeps one server per concurrent caller (the sweep's threads),
// started on first need and reused, so a run starts as many Python interpreters as calls overlap at most.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include <sys/types.h>

namespace halfmap::peers::torch {

/// One input buffer of a request: its bytes, sent as they are.
struct Bytes {
  const void* data;
  std::size_t size;
};

class Server {
 public:
  /// Starts `python script --serve`. Throws std::runtime_error when it cannot be started.
  Server(const std::string& python, const std::string& script);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  /// Sends the request line (without its newline) and the buffers, returns the reply's bytes. Throws
  /// std::runtime_error with torch's message ("error ..." replies), or when the server exits or answers
  /// something that is not a reply (the server is then unusable).
  std::string call(const std::string& line, std::span<const Bytes> inputs);

 private:
  void send_all(const void* data, std::size_t size);
  std::string read_line();
  void read_exact(std::string& out, std::size_t size);

  int fd_ = -1;
  pid_t pid_ = -1;
  std::vector<char> buf_;  // received, not yet consumed: [pos_, buf_.size())
  std::size_t pos_ = 0;
};

/// The servers of one interpreter and script: call() takes a free one (or starts one), runs the request on it
/// and gives it back, unless it failed in a way that leaves it unusable. Thread-safe.
class Pool {
 public:
  Pool(std::string python, std::string script) : python_(std::move(python)), script_(std::move(script)) {}
  std::string call(const std::string& line, std::span<const Bytes> inputs);
  /// How many servers were started so far (meta.json's detail says one per concurrent caller).
  std::size_t started() const;

 private:
  std::string python_, script_;
  mutable std::mutex m_;
  std::vector<std::unique_ptr<Server>> free_;
  std::size_t started_ = 0;
};

}  // namespace halfmap::peers::torch
