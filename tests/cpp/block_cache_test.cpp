#include "ortmlx/engine/device/block_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace ortmlx::device {
namespace {

// Distinct fake addresses: the cache never dereferences the blocks it keeps.
void* block(std::uintptr_t i) {
  return reinterpret_cast<void*>(0x1000 * (i + 1));
}

TEST(BlockCache, ForgottenBlockIsNeitherKeptNorReleasable) {
  // A block whose memory went elsewhere (MLX moved the buffer to unified memory and freed the
  // device block itself): the cache must never hand it out again.
  BlockCache cache(1 << 20);
  cache.track(block(1), 1024);
  cache.forget(block(1));
  EXPECT_FALSE(cache.release(block(1)));
  EXPECT_EQ(cache.reuse(1024), nullptr);
  EXPECT_EQ(cache.kept_bytes(), 0u);
}

TEST(BlockCache, RoundsUpToTheGranule) {
  EXPECT_EQ(BlockCache::rounded(0), BlockCache::kGranule);
  EXPECT_EQ(BlockCache::rounded(1), BlockCache::kGranule);
  EXPECT_EQ(BlockCache::rounded(BlockCache::kGranule), BlockCache::kGranule);
  EXPECT_EQ(BlockCache::rounded(BlockCache::kGranule + 1), 2 * BlockCache::kGranule);
}

TEST(BlockCache, ReusesAReleasedBlockOfTheSameSizeOnly) {
  BlockCache cache(1 << 20);
  EXPECT_EQ(cache.reuse(1024), nullptr);
  cache.track(block(0), 1024);
  EXPECT_TRUE(cache.release(block(0)));
  EXPECT_EQ(cache.kept_bytes(), 1024u);
  EXPECT_EQ(cache.reuse(2048), nullptr);  // another size: a miss
  EXPECT_EQ(cache.reuse(1024), block(0));
  EXPECT_EQ(cache.kept_bytes(), 0u);
  EXPECT_EQ(cache.reuse(1024), nullptr);  // handed out once
  EXPECT_TRUE(cache.release(block(0)));   // live again after reuse
}

TEST(BlockCache, UnknownPointersGoBackToTheCaller) {
  BlockCache cache(1 << 20);
  EXPECT_FALSE(cache.release(block(7)));
  cache.track(block(0), 512);
  EXPECT_TRUE(cache.release(block(0)));
  EXPECT_FALSE(cache.release(block(0)));  // a second release of the same block
  EXPECT_EQ(cache.kept_bytes(), 512u);
}

TEST(BlockCache, KeepsNoMoreThanItsCapacity) {
  BlockCache cache(3 * 512);
  for (std::uintptr_t i = 0; i < 5; ++i) cache.track(block(i), 512);
  int kept = 0;
  for (std::uintptr_t i = 0; i < 5; ++i) kept += cache.release(block(i)) ? 1 : 0;
  EXPECT_EQ(kept, 3);
  EXPECT_EQ(cache.kept_bytes(), 3u * 512);
  cache.track(block(9), 4096);
  EXPECT_FALSE(cache.release(block(9)));  // larger than the room left
}

TEST(BlockCache, DrainHandsBackEveryKeptBlock) {
  BlockCache cache(1 << 20);
  for (std::uintptr_t i = 0; i < 4; ++i) cache.track(block(i), 512 * (i % 2 + 1));
  for (std::uintptr_t i = 0; i < 4; ++i) ASSERT_TRUE(cache.release(block(i)));
  std::vector<void*> out = cache.drain();
  std::sort(out.begin(), out.end());
  EXPECT_EQ(out, (std::vector<void*>{block(0), block(1), block(2), block(3)}));
  EXPECT_EQ(cache.kept_bytes(), 0u);
  EXPECT_EQ(cache.reuse(512), nullptr);
}

TEST(BlockCache, ConcurrentUsersNeverShareABlock) {
  constexpr int kThreads = 4, kBlocks = 16, kRounds = 2000;
  BlockCache cache(1 << 20);
  for (std::uintptr_t i = 0; i < kBlocks; ++i) {
    cache.track(block(i), 512);
    ASSERT_TRUE(cache.release(block(i)));
  }
  // in_use[i]: how many threads hold block i (more than one would be a shared block).
  std::vector<std::atomic<int>> in_use(kBlocks);
  std::atomic<int> shared{0};
  auto index = [](void* p) { return reinterpret_cast<std::uintptr_t>(p) / 0x1000 - 1; };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&] {
      for (int r = 0; r < kRounds; ++r) {
        std::vector<void*> mine;
        for (int b = 0; b < 3; ++b)
          if (void* p = cache.reuse(512)) {
            if (in_use[index(p)].fetch_add(1) != 0) ++shared;
            mine.push_back(p);
          }
        for (void* p : mine) {
          in_use[index(p)].fetch_sub(1);
          EXPECT_TRUE(cache.release(p));
        }
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(shared.load(), 0);
  EXPECT_EQ(cache.kept_bytes(), size_t{kBlocks * 512});
}

}  // namespace
}  // namespace ortmlx::device
