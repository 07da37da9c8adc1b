#include "loom/compute/model/model_file_error.hpp"

#include <utility>

namespace loom::compute {
namespace {

std::string compose(const std::string& path, std::optional<std::uint64_t> offset, const std::string& key,
                    const std::string& detail) {
  std::string text = path;
  if (offset) text += ": offset " + std::to_string(*offset);
  if (!key.empty()) text += ": '" + key + "'";
  text += ": ";
  text += detail;
  return text;
}

}  // namespace

ModelFileError::ModelFileError(std::string path, std::optional<std::uint64_t> offset, std::string key,
                               std::string detail)
    : std::runtime_error(compose(path, offset, key, detail)),
      parts_(std::make_shared<const Parts>(Parts{std::move(path), offset, std::move(key), std::move(detail)})) {}

const std::string& ModelFileError::path() const noexcept { return parts_->path; }
std::optional<std::uint64_t> ModelFileError::offset() const noexcept { return parts_->offset; }
const std::string& ModelFileError::key() const noexcept { return parts_->key; }
const std::string& ModelFileError::detail() const noexcept { return parts_->detail; }

}  // namespace loom::compute
