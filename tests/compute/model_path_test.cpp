// The model loaders refuse a path that is not a regular file before they read from it. A FIFO matters
// most: opening one waits for a writer and reading one waits for data, so a loader that tried would hang
// (in loom-gateway, beyond the reach of SIGTERM). Here the FIFO even has a writer and holds the GGUF magic,
// so a loader that read it would find "GGUF" rather than fail.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "loom/compute/model/gguf_file.hpp"
#include "loom/compute/model/mapped_file.hpp"
#include "loom/compute/model/model_loader.hpp"
#include "test_files.hpp"

namespace loom::compute {
namespace {

using testing::ScratchDir;

template <class Load>
void expect_refused(const std::string& path, const std::string& kind, Load load) {
  try {
    load();
    FAIL() << "expected a ModelFileError for " << path;
  } catch (const ModelFileError& e) {
    EXPECT_EQ(e.path(), path);
    EXPECT_NE(std::string(e.what()).find("not a regular file: this is " + kind), std::string::npos) << e.what();
  }
}

TEST(ModelPath, AFifoIsRefusedWithoutReadingIt) {
  ScratchDir dir{"loom_model_path"};
  const std::string fifo = dir.path("model.fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const int writer = ::open(fifo.c_str(), O_RDWR | O_NONBLOCK);  // Linux: never waits, for either end
  ASSERT_GE(writer, 0);
  ASSERT_EQ(::write(writer, "GGUF", 4), 4);
  expect_refused(fifo, "a FIFO", [&] { (void)GgufFile::has_magic(fifo); });
  expect_refused(fifo, "a FIFO", [&] { MappedFile file(fifo); });
  expect_refused(fifo, "a FIFO", [&] { (void)LoadedModel::open(fifo); });
  ::close(writer);
}

TEST(ModelPath, ADirectoryIsRefusedNamingWhatItIs) {
  ScratchDir dir{"loom_model_path"};
  const std::string path = dir.path("").string();
  expect_refused(path, "a directory", [&] { (void)GgufFile::has_magic(path); });
  expect_refused(path, "a directory", [&] { (void)LoadedModel::open(path); });
}

}  // namespace
}  // namespace loom::compute
