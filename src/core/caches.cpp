// The data cache sizes of one core (cpu.hpp's CacheSizes): sysfs first, CPUID leaf 4 on x86-64 where sysfs has
// nothing (some containers hide it), read once.
#include <fstream>
#include <string>

#include "halfmap/cpu.hpp"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace halfmap {
namespace {

std::string read_line(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

/// "32K", "1024K", "32M" or a plain byte count -> bytes; 0 if unreadable.
std::size_t parse_size(const std::string& text) {
  std::size_t value = 0, i = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) value = value * 10 + std::size_t(text[i] - '0');
  if (i == 0) return 0;
  if (i < text.size() && (text[i] == 'K' || text[i] == 'k')) return value << 10;
  if (i < text.size() && (text[i] == 'M' || text[i] == 'm')) return value << 20;
  return value;
}

/// Logical CPUs in a sysfs cpu list ("0-3,8-11"); at least 1.
std::size_t count_cpus(const std::string& list) {
  std::size_t count = 0, i = 0;
  while (i < list.size()) {
    std::size_t a = 0, b = 0, j = i;
    for (; j < list.size() && list[j] >= '0' && list[j] <= '9'; ++j) a = a * 10 + std::size_t(list[j] - '0');
    b = a;
    if (j < list.size() && list[j] == '-') {
      b = 0;
      for (++j; j < list.size() && list[j] >= '0' && list[j] <= '9'; ++j) b = b * 10 + std::size_t(list[j] - '0');
    }
    count += b >= a ? b - a + 1 : 1;
    i = list.find(',', j);
    if (i == std::string::npos) break;
    ++i;
  }
  return count == 0 ? 1 : count;
}

bool from_sysfs(CacheSizes& c) {
  const std::string base = "/sys/devices/system/cpu/cpu0/cache/index";
  bool any = false;
  for (int index = 0; index < 16; ++index) {
    const std::string dir = base + std::to_string(index) + "/";
    const std::string level = read_line(dir + "level"), type = read_line(dir + "type");
    if (level.empty()) continue;
    const std::size_t size = parse_size(read_line(dir + "size"));
    if (size == 0 || type == "Instruction") continue;
    any = true;
    if (level == "1") c.l1d = size;
    if (level == "2") c.l2 = size;
    if (level == "3") {
      c.l3 = size;
      c.l3_share = size / count_cpus(read_line(dir + "shared_cpu_list"));
    }
  }
  return any;
}

#if defined(__x86_64__)
bool from_cpuid(CacheSizes& c) {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_max(0, nullptr) < 4) return false;
  bool any = false;
  for (unsigned sub = 0; sub < 16; ++sub) {
    __cpuid_count(4, sub, eax, ebx, ecx, edx);
    const unsigned type = eax & 0x1F;  // 0: no more caches; 1 data, 2 instruction, 3 unified
    if (type == 0) break;
    if (type == 2) continue;
    const unsigned level = (eax >> 5) & 0x7;
    const std::size_t sharing = ((eax >> 14) & 0xFFF) + 1;
    const std::size_t size =
        std::size_t((ebx >> 22) + 1) * (((ebx >> 12) & 0x3FF) + 1) * ((ebx & 0xFFF) + 1) * (std::size_t(ecx) + 1);
    any = true;
    if (level == 1) c.l1d = size;
    if (level == 2) c.l2 = size;
    if (level == 3) {
      c.l3 = size;
      c.l3_share = size / sharing;
    }
  }
  return any;
}
#endif

CacheSizes detect() {
  CacheSizes c;
  if (from_sysfs(c)) {
    c.source = "sysfs";
    return c;
  }
#if defined(__x86_64__)
  c = CacheSizes{};
  if (from_cpuid(c)) {
    c.source = "cpuid";
    return c;
  }
#endif
  c = CacheSizes{};
  c.source = "none";
  return c;
}

}  // namespace

const CacheSizes& cache_sizes() {
  static const CacheSizes c = detect();
  return c;
}

}  // namespace halfmap
