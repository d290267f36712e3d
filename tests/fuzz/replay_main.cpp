// Runs the fuzz harness without libFuzzer: feeds every file named on the command line (or found in a folder
// named there) to LLVMFuzzerTestOneInput, so that the corpus, regressions included, is a test in every preset.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::set<fs::path> files;  // sorted, so that runs are repeatable
  for (int i = 1; i < argc; ++i) {
    if (fs::is_directory(argv[i])) {
      for (const auto& e : fs::directory_iterator(argv[i]))
        if (e.is_regular_file()) files.insert(e.path());
    } else {
      files.insert(argv[i]);
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "fuzz_replay: no input files\n");
    return 2;
  }
  for (const fs::path& f : files) {
    std::ifstream in(f, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "fuzz_replay: cannot read %s\n", f.c_str());
      return 2;
    }
    const std::vector<unsigned char> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
  }
  std::printf("fuzz_replay: %zu inputs, no failure\n", files.size());
  return 0;
}
