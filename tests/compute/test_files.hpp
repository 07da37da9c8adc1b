// Files for the compute tests: paths into ../shared (a missing one fails the test, never skips it: CI always
// has them) and a scratch folder per test for files the test writes.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <vector>

namespace loom::compute::testing {

inline std::string shared_path(const std::string& relative) { return std::string(LOOM_SHARED_DIR) + "/" + relative; }

#define REQUIRE_SHARED_FILE(path)                                                       \
  ASSERT_TRUE(std::filesystem::exists(path)) << "missing shared test file: " << (path) \
                                             << " (../shared must sit beside the checkout)"

// A scratch folder, removed with everything in it when the object goes.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& prefix) {
    static std::atomic<int> counter{0};
    dir_ = std::filesystem::path(::testing::TempDir()) /
           (prefix + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::create_directories(dir_);
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  std::string write(const std::string& name, const std::vector<std::byte>& bytes) const {
    const auto file = dir_ / name;
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    return file.string();
  }
  std::filesystem::path path(const std::string& name) const { return dir_ / name; }

 private:
  std::filesystem::path dir_;
};

}  // namespace loom::compute::testing
