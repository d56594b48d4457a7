// The host budget of the memory guard (engine/host_memory.h): which cgroup directories apply,
// parsing their files, the memory left under their limits (on a directory tree written here: a
// cgroup's limit cannot be set without privileges), and the address-space limit, set on this
// process for one call.
#include <sys/resource.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <gtest/gtest.h>

#include "ortmlx/engine/host_memory.h"

namespace ortmlx {
namespace {

namespace fs = std::filesystem;

// A hybrid host (systemd's layout): v1 controllers, a v2 tree without the memory controller.
constexpr const char* kHybridCgroup =
    "12:pids:/user.slice\n"
    "4:memory:/process_api/c42d\n"
    "2:cpu,cpuacct:/\n"
    "1:name=systemd:/\n"
    "0::/\n";
constexpr const char* kHybridMounts =
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:7 - cgroup cgroup rw,cpu,cpuacct\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime shared:9 - cgroup cgroup rw,memory\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

TEST(HostMemory, CgroupV1MemoryHierarchyWinsOnAHybridHost) {
  const CgroupMemoryDirs cg = cgroup_memory_dirs(kHybridCgroup, kHybridMounts);
  EXPECT_FALSE(cg.v2);
  EXPECT_EQ(cg.dirs, (std::vector<std::string>{"/sys/fs/cgroup/memory/process_api/c42d",
                                               "/sys/fs/cgroup/memory/process_api",
                                               "/sys/fs/cgroup/memory"}));
}

TEST(HostMemory, CgroupV2DirectoriesUpToTheMount) {
  const CgroupMemoryDirs cg = cgroup_memory_dirs(
      "0::/system.slice/app.service\n",
      "22 1 0:21 / / rw - ext4 /dev/sda1 rw\n"
      "25 22 0:23 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate\n");
  EXPECT_TRUE(cg.v2);
  EXPECT_EQ(cg.dirs, (std::vector<std::string>{"/sys/fs/cgroup/system.slice/app.service",
                                               "/sys/fs/cgroup/system.slice", "/sys/fs/cgroup"}));
}

TEST(HostMemory, CgroupInsideAContainer) {
  // With a cgroup namespace the process sees itself at the root; without one, its host path
  // starts with the mount's root (the container's cgroup, mounted at /sys/fs/cgroup).
  const char* mount = "25 22 0:23 / /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n";
  EXPECT_EQ(cgroup_memory_dirs("0::/\n", mount).dirs, (std::vector<std::string>{"/sys/fs/cgroup"}));
  const char* bound = "25 22 0:23 /docker/abc /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n";
  EXPECT_EQ(cgroup_memory_dirs("0::/docker/abc\n", bound).dirs,
            (std::vector<std::string>{"/sys/fs/cgroup"}));
  EXPECT_EQ(cgroup_memory_dirs("0::/docker/abc/job\n", bound).dirs,
            (std::vector<std::string>{"/sys/fs/cgroup/job", "/sys/fs/cgroup"}));
  // A path outside the mounted part (/docker/abcd is not under /docker/abc): the mount only.
  EXPECT_EQ(cgroup_memory_dirs("0::/docker/abcd\n", bound).dirs,
            (std::vector<std::string>{"/sys/fs/cgroup"}));
}

TEST(HostMemory, NoCgroupMounted) {
  EXPECT_TRUE(
      cgroup_memory_dirs(kHybridCgroup, "22 1 0:21 / / rw - ext4 /dev/sda1 rw\n").dirs.empty());
  EXPECT_TRUE(cgroup_memory_dirs("", "").dirs.empty());
  // A v1 memory hierarchy the process is not listed in is not used.
  EXPECT_TRUE(cgroup_memory_dirs("1:name=systemd:/\n", kHybridMounts).dirs.empty());
}

TEST(HostMemory, ThisProcessCgroupDirectoriesExist) {
  auto slurp = [](const char* path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const CgroupMemoryDirs cg =
      cgroup_memory_dirs(slurp("/proc/self/cgroup"), slurp("/proc/self/mountinfo"));
  for (const auto& d : cg.dirs) EXPECT_TRUE(fs::is_directory(d)) << d;
}

TEST(HostMemory, ParsesLimitsAndStats) {
  EXPECT_EQ(parse_cgroup_limit("max\n"), SIZE_MAX);
  EXPECT_EQ(parse_cgroup_limit("9223372036854771712\n"), SIZE_MAX);  // v1: no limit
  EXPECT_EQ(parse_cgroup_limit("4294967296\n"), size_t{4} << 30);
  EXPECT_EQ(parse_cgroup_limit(""), SIZE_MAX);
  const char* stat = "anon 100\nfile 900\ninactive_file_x 1\ninactive_file 700\n";
  EXPECT_EQ(parse_stat_value(stat, "inactive_file"), 700u);
  EXPECT_EQ(parse_stat_value(stat, "file"), 900u);
  EXPECT_EQ(parse_stat_value(stat, "active_file"), 0u);
}

class CgroupTree : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "ortmlx-cgroup-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { fs::remove_all(root_); }
  std::string dir(const std::string& rel) {
    fs::create_directories(root_ / rel);
    return (root_ / rel).string();
  }
  static void write(const std::string& path, const std::string& text) {
    std::ofstream(path) << text;
  }
  fs::path root_;
};

TEST_F(CgroupTree, V2LeastLeftOverTheLevelsAndFileCacheCountsAsFree) {
  const std::string leaf = dir("a/b"), mid = dir("a"), top = dir("");
  write(leaf + "/memory.max", "max\n");  // no limit of its own
  write(leaf + "/memory.current", "100\n");
  write(mid + "/memory.max", "10000\n");
  write(mid + "/memory.current", "9000\n");
  write(mid + "/memory.stat", "anon 5000\ninactive_file 3000\nactive_file 1000\n");
  // The top has no memory.max (the root cgroup): skipped.
  CgroupMemoryDirs cg{true, {leaf, mid, top}};
  EXPECT_EQ(cgroup_memory_left(cg), 10000u - (9000u - 3000u));
  write(leaf + "/memory.max", "3000\n");
  EXPECT_EQ(cgroup_memory_left(cg), 2900u);
  write(leaf + "/memory.current", "3500\n");  // over its limit
  EXPECT_EQ(cgroup_memory_left(cg), 0u);
  EXPECT_EQ(cgroup_memory_left(CgroupMemoryDirs{true, {top}}), SIZE_MAX);
}

TEST_F(CgroupTree, V1ReadsLimitInBytesAndHierarchicalStats) {
  const std::string leaf = dir("job");
  write(leaf + "/memory.limit_in_bytes", "8589934592\n");
  write(leaf + "/memory.usage_in_bytes", "2147483648\n");
  write(leaf + "/memory.stat", "inactive_file 1\ntotal_inactive_file 1073741824\n");
  EXPECT_EQ(cgroup_memory_left(CgroupMemoryDirs{false, {leaf}}), size_t{7} << 30);
  write(leaf + "/memory.limit_in_bytes", "9223372036854771712\n");
  EXPECT_EQ(cgroup_memory_left(CgroupMemoryDirs{false, {leaf}}), SIZE_MAX);
}

TEST(HostMemory, AddressSpaceLimitBoundsTheBudget) {
  struct rlimit saved {};
  ASSERT_EQ(::getrlimit(RLIMIT_AS, &saved), 0);
  std::ifstream statm("/proc/self/statm");
  size_t pages = 0;
  statm >> pages;
  const size_t used = pages * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t headroom = size_t{256} << 20;
  if (saved.rlim_max != RLIM_INFINITY && saved.rlim_max < used + headroom)
    GTEST_SKIP() << "hard address-space limit too low";
  struct rlimit capped = saved;
  capped.rlim_cur = used + headroom;
  ASSERT_EQ(::setrlimit(RLIMIT_AS, &capped), 0);
  const HostBudget budget = host_memory_budget(size_t{1} << 30);
  ASSERT_EQ(::setrlimit(RLIMIT_AS, &saved), 0);
  EXPECT_EQ(budget.bound, HostBound::kAddressSpace);
  // The address space moves a little between statm here and in the call (gtest's allocations).
  EXPECT_LE(budget.bytes, headroom);
  EXPECT_GE(budget.bytes, headroom / 2);
  EXPECT_NE(std::string(host_bound_note(budget.bound)).find("RLIMIT_AS"), std::string::npos);
  // Without the limit the bound is the machine's (no cgroup on a test machine is this small).
  const HostBudget free = host_memory_budget(size_t{1} << 30);
  EXPECT_GT(free.bytes, headroom);
}

}  // namespace
}  // namespace ortmlx
