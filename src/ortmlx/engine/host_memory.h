// Host memory this process can still allocate, for the memory guard (executor.h) on MLX's CPU
// backend. MLX's CPU allocator hands back no memory when an allocation fails and its kernels write
// through it, so the guard must know every bound an allocation can hit, not only the machine's:
//   - the system's MemAvailable (/proc/meminfo; free memory plus the page cache the kernel gives
//     back on demand),
//   - the address-space limit (RLIMIT_AS soft limit less the process's address space, from
//     /proc/self/statm): mmap fails past it,
//   - the memory limit of the process's cgroup and of each cgroup above it (v2: memory.max less
//     memory.current; v1: memory.limit_in_bytes less memory.usage_in_bytes), the reclaimable file
//     cache (memory.stat inactive_file) counted as free: past it the kernel's OOM killer ends the
//     process. Which cgroup directories carry a limit is read once per process.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace ortmlx {

// What bounds a HostBudget.
enum class HostBound { kMemAvailable, kAddressSpace, kCgroup };

struct HostBudget {
  size_t bytes = 0;  // 0 with kMemAvailable: unknown
  HostBound bound = HostBound::kMemAvailable;
};

// ", under the address-space limit (RLIMIT_AS)" and the like for error messages; "" for
// kMemAvailable.
const char* host_bound_note(HostBound bound);

// Bytes the process can allocate on the host. Exact when `need` comes near a bound; when it is
// well below all of them, a cheap lower bound: reading /proc/meminfo, statm or a cgroup's files
// costs as much as a small run, so they are read only when `need` exceeds half of the free memory
// (sysinfo, 0.5 us), or, for the process's own limits, half of what a reading in the last 100 ms
// found. Called from the MLX thread only.
HostBudget host_memory_budget(size_t need);

// The cgroup directories whose memory limit applies to this process (the pure part of the
// discovery, unit-tested): from the text of /proc/self/cgroup and /proc/self/mountinfo, the
// process's memory cgroup directory and each directory above it up to the hierarchy's mount point.
// A v1 memory hierarchy is preferred when mounted (a hybrid system's v2 tree has no memory
// controller); empty when neither is mounted.
struct CgroupMemoryDirs {
  bool v2 = false;
  std::vector<std::string> dirs;  // leaf first
};
CgroupMemoryDirs cgroup_memory_dirs(std::string_view proc_self_cgroup, std::string_view mountinfo);

// A cgroup limit file's value: "max" (v2) and v1's "unlimited" (2^63 rounded to pages) are
// SIZE_MAX; an unreadable value is SIZE_MAX too.
size_t parse_cgroup_limit(std::string_view text);

// The value of `key` in a "key value" per line file (memory.stat), 0 when absent.
size_t parse_stat_value(std::string_view text, std::string_view key);

// The least memory left under the limits of `dirs` (SIZE_MAX when none has a limit): per level,
// limit - (usage - inactive file cache), at least 0.
size_t cgroup_memory_left(const CgroupMemoryDirs& dirs);

}  // namespace ortmlx
