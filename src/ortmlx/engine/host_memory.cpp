#include "ortmlx/engine/host_memory.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstring>

namespace ortmlx {

namespace {

constexpr size_t kUnbounded = SIZE_MAX;

// The whole of a small file (procfs, cgroupfs: their size reads as 0 or 4096, so read to EOF);
// false when it cannot be opened.
bool read_file(const char* path, std::string& out) {
  out.clear();
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[4096];
  ssize_t n = 0;
  while ((n = ::read(fd, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return n == 0;
}

// The leading unsigned decimal of `text` after any blanks; false when there is none.
bool parse_leading(std::string_view text, size_t& value) {
  const size_t start = text.find_first_not_of(" \t");
  if (start == std::string_view::npos) return false;
  const char* first = text.data() + start;
  const auto [end, ec] = std::from_chars(first, text.data() + text.size(), value);
  return ec == std::errc{} && end != first;
}

// MemAvailable of /proc/meminfo in bytes (kUnbounded when unknown). MemFree alone would miss the
// page cache that the kernel gives back on demand.
size_t meminfo_available() {
  std::string text;
  if (!read_file("/proc/meminfo", text)) return kUnbounded;
  const size_t at = text.find("MemAvailable:");
  size_t kib = 0;
  if (at == std::string::npos ||
      !parse_leading(std::string_view(text).substr(at + std::strlen("MemAvailable:")), kib))
    return kUnbounded;
  return kib > kUnbounded / 1024 ? kUnbounded : kib * 1024;
}

// RLIMIT_AS soft limit less the process's address space (VmSize, the first field of
// /proc/self/statm, in pages); kUnbounded when `soft` is infinite or statm unreadable.
size_t address_space_left(rlim_t soft) {
  if (soft == RLIM_INFINITY) return kUnbounded;
  std::string text;
  size_t pages = 0;
  if (!read_file("/proc/self/statm", text) || !parse_leading(text, pages)) return kUnbounded;
  const size_t used = pages * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return soft > used ? static_cast<size_t>(soft) - used : 0;
}

std::string limit_file(const CgroupMemoryDirs& cg, const std::string& dir) {
  return dir + (cg.v2 ? "/memory.max" : "/memory.limit_in_bytes");
}

// The process's cgroup directories that carry a memory limit, found once: a limit set after the
// first run of the process is not seen.
const CgroupMemoryDirs& limited_cgroup_dirs() {
  static const CgroupMemoryDirs dirs = [] {
    std::string cgroup, mountinfo, limit;
    CgroupMemoryDirs found;
    if (!read_file("/proc/self/cgroup", cgroup) || !read_file("/proc/self/mountinfo", mountinfo))
      return found;
    const CgroupMemoryDirs all = cgroup_memory_dirs(cgroup, mountinfo);
    found.v2 = all.v2;
    for (const auto& dir : all.dirs)
      if (read_file(limit_file(all, dir).c_str(), limit) && parse_cgroup_limit(limit) != kUnbounded)
        found.dirs.push_back(dir);
    return found;
  }();
  return dirs;
}

// Splits `text` at `sep`, skipping empty fields.
std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(sep, start);
    if (end == std::string_view::npos) end = text.size();
    if (end > start) out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

bool has_item(std::string_view list, std::string_view item) {
  for (const auto& x : split(list, ','))
    if (x == item) return true;
  return false;
}

}  // namespace

const char* host_bound_note(HostBound bound) {
  switch (bound) {
    case HostBound::kAddressSpace:
      return ", under the process's address-space limit (RLIMIT_AS)";
    case HostBound::kCgroup:
      return ", under its cgroup's memory limit";
    case HostBound::kMemAvailable:
      break;
  }
  return "";
}

CgroupMemoryDirs cgroup_memory_dirs(std::string_view proc_self_cgroup, std::string_view mountinfo) {
  // /proc/self/cgroup: "ID:CONTROLLERS:PATH" per hierarchy; v2's is "0::PATH".
  std::string_view path[2];  // [v1, v2]
  bool member[2] = {false, false};
  for (const auto line : split(proc_self_cgroup, '\n')) {
    const size_t a = line.find(':');
    const size_t b = a == std::string_view::npos ? a : line.find(':', a + 1);
    if (b == std::string_view::npos) continue;
    const auto controllers = line.substr(a + 1, b - a - 1);
    const int v = line.substr(0, a) == "0" && controllers.empty() ? 1 : 0;
    if (v == 1 || has_item(controllers, "memory")) {
      path[v] = line.substr(b + 1);
      member[v] = true;
    }
  }
  // mountinfo: "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS";
  // ROOT is the part of the hierarchy the mount shows.
  std::string_view root[2], mount[2];
  bool mounted[2] = {false, false};
  for (const auto line : split(mountinfo, '\n')) {
    const auto fields = split(line, ' ');
    const auto dash = std::find(fields.begin(), fields.end(), std::string_view("-"));
    if (dash - fields.begin() < 6 || fields.end() - dash < 4) continue;
    int v = -1;
    if (dash[1] == "cgroup" && has_item(dash[3], "memory")) v = 0;
    if (dash[1] == "cgroup2") v = 1;
    if (v < 0 || mounted[v] || !member[v]) continue;
    root[v] = fields[3];
    mount[v] = fields[4];
    mounted[v] = true;
  }
  CgroupMemoryDirs out;
  const int v = mounted[0] ? 0 : (mounted[1] ? 1 : -1);
  if (v < 0) return out;
  out.v2 = v == 1;
  // The process's path relative to the mount's root; a path outside it (another namespace's view)
  // leaves only the mount point.
  std::string_view rel = path[v];
  if (root[v] != "/") {
    const bool inside = rel.substr(0, root[v].size()) == root[v] &&
                        (rel.size() == root[v].size() || rel[root[v].size()] == '/');
    rel = inside ? rel.substr(root[v].size()) : std::string_view();
  }
  while (!rel.empty() && rel.back() == '/') rel.remove_suffix(1);
  const std::string base(mount[v]);
  for (;;) {
    out.dirs.push_back(base + std::string(rel));
    if (rel.empty()) break;
    rel = rel.substr(0, rel.rfind('/'));
  }
  return out;
}

size_t parse_cgroup_limit(std::string_view text) {
  size_t value = 0;
  // v1 writes "no limit" as PAGE_COUNTER_MAX pages (2^63 less a page on 4 KiB pages): no machine
  // has 2^62 bytes.
  if (!parse_leading(text, value) || value >= (size_t{1} << 62)) return kUnbounded;
  return value;
}

size_t parse_stat_value(std::string_view text, std::string_view key) {
  for (const auto line : split(text, '\n')) {
    if (line.size() <= key.size() || line.substr(0, key.size()) != key || line[key.size()] != ' ')
      continue;
    size_t value = 0;
    return parse_leading(line.substr(key.size()), value) ? value : 0;
  }
  return 0;
}

size_t cgroup_memory_left(const CgroupMemoryDirs& cg) {
  size_t left = kUnbounded;
  std::string text;
  for (const auto& dir : cg.dirs) {
    if (!read_file(limit_file(cg, dir).c_str(), text)) continue;
    const size_t limit = parse_cgroup_limit(text);
    if (limit == kUnbounded) continue;
    size_t usage = 0;
    if (!read_file((dir + (cg.v2 ? "/memory.current" : "/memory.usage_in_bytes")).c_str(), text) ||
        !parse_leading(text, usage))
      continue;
    // Inactive file pages are reclaimed before the OOM killer runs (what container tools call
    // the working set excludes them). v1's hierarchical count is total_*; v2's counts are.
    if (read_file((dir + "/memory.stat").c_str(), text))
      usage -=
          std::min(usage, parse_stat_value(text, cg.v2 ? "inactive_file" : "total_inactive_file"));
    left = std::min(left, limit > usage ? limit - usage : 0);
  }
  return left;
}

HostBudget host_memory_budget(size_t need) {
  HostBudget budget{kUnbounded, HostBound::kMemAvailable};
  // MemAvailable is never far below MemFree (by the kernel's watermark reserve), and sysinfo is a
  // cheap call: a need under half of MemFree fits without reading /proc/meminfo.
  struct sysinfo si {};
  const size_t free_bytes =
      ::sysinfo(&si) == 0 ? static_cast<size_t>(si.freeram) * si.mem_unit : size_t{0};
  budget.bytes = need <= free_bytes / 2 ? free_bytes : meminfo_available();

  // The process's own limits: none in most processes (getrlimit is a cheap call, the cgroup
  // directories are found once); with one, a reading from the last 100 ms answers a need under
  // half of what it found.
  struct rlimit as {};
  const rlim_t soft = ::getrlimit(RLIMIT_AS, &as) == 0 ? as.rlim_cur : RLIM_INFINITY;
  const CgroupMemoryDirs& cg = limited_cgroup_dirs();
  if (soft == RLIM_INFINITY && cg.dirs.empty()) return budget;
  static HostBudget known{0, HostBound::kAddressSpace};
  static rlim_t known_soft = RLIM_INFINITY;
  static auto known_at = std::chrono::steady_clock::time_point{};
  const auto now = std::chrono::steady_clock::now();
  if (known.bytes == 0 || need > known.bytes / 2 || known_soft != soft ||
      now - known_at > std::chrono::milliseconds(100)) {
    const size_t as_left = address_space_left(soft);
    const size_t cg_left = cg.dirs.empty() ? kUnbounded : cgroup_memory_left(cg);
    known = as_left <= cg_left ? HostBudget{as_left, HostBound::kAddressSpace}
                               : HostBudget{cg_left, HostBound::kCgroup};
    known_soft = soft;
    known_at = now;
  }
  if (known.bytes < budget.bytes) budget = known;
  return budget;
}

}  // namespace ortmlx
