#include "loom/actors/engine/thermal_provider.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <optional>
#include <string_view>
#include <system_error>
#include <vector>

namespace loom::actors {

namespace {

// The file's content, up to kMaxThermalFileBytes, or why it could not be had.
std::variant<std::string, ThermalReadError> read_small_file(const std::filesystem::path& path) {
  auto failure = [&](const std::string& what) {
    return ThermalReadError{what + " " + path.string() + ": " + std::generic_category().message(errno)};
  };
  // O_NONBLOCK: a FIFO put where a file belongs must not hang the reading thread.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return failure("cannot open");
  std::string content(kMaxThermalFileBytes + 1, '\0');
  std::size_t size = 0;
  while (size < content.size()) {
    const ssize_t n = ::read(fd, content.data() + size, content.size() - size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      auto error = failure("cannot read");
      ::close(fd);
      return error;
    }
    if (n == 0) break;
    size += static_cast<std::size_t>(n);
  }
  ::close(fd);
  if (size > kMaxThermalFileBytes) {
    return ThermalReadError{path.string() + " is longer than " + std::to_string(kMaxThermalFileBytes) + " bytes"};
  }
  content.resize(size);
  return content;
}

std::string_view trim(std::string_view text) {
  constexpr std::string_view kSpace = " \t\r\n\f\v";
  const auto first = text.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(kSpace) - first + 1);
}

// The text as a log and an error message can show it: printable ASCII kept, anything else as \xNN.
std::string quoted(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7f && c != '"' && c != '\\') {
      out += c;
    } else {
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 0xf];
    }
  }
  return out + "\"";
}

template <class Number>
std::optional<Number> parse_whole(std::string_view text) {
  Number value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return value;
}

bool plausible(double celsius) {
  return std::isfinite(celsius) && celsius >= kMinPlausibleCelsius && celsius <= kMaxPlausibleCelsius;
}

// One zone's temperature, from its integer millidegrees.
std::variant<double, ThermalReadError> read_zone(const std::filesystem::path& zone) {
  const auto temp = zone / "temp";
  auto content = read_small_file(temp);
  if (auto* error = std::get_if<ThermalReadError>(&content)) return std::move(*error);
  const auto text = trim(std::get<std::string>(content));
  const auto millidegrees = parse_whole<long long>(text);
  if (!millidegrees) return ThermalReadError{temp.string() + " holds " + quoted(text) + ", not millidegrees"};
  const double celsius = static_cast<double>(*millidegrees) / 1000.0;
  if (!plausible(celsius)) return ThermalReadError{temp.string() + " holds an implausible " + quoted(text)};
  return celsius;
}

}  // namespace

SysfsThermalProvider::SysfsThermalProvider(std::filesystem::path root) : root_(std::move(root)) {}

ThermalReading SysfsThermalProvider::read() const {
  std::error_code ec;
  std::vector<std::filesystem::path> zones;
  for (std::filesystem::directory_iterator it(root_, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().filename().string().starts_with("thermal_zone")) zones.push_back(it->path());
    if (zones.size() == kMaxThermalZones) break;
  }
  if (ec) return ThermalReadError{"cannot list " + root_.string() + ": " + ec.message()};
  if (zones.empty()) return ThermalReadError{"no thermal zones under " + root_.string()};
  // Sorted, so that the error naming the first failing zone is the same from one read to the next.
  std::sort(zones.begin(), zones.end());
  std::optional<double> hottest;
  std::optional<ThermalReadError> first_failure;
  for (const auto& zone : zones) {
    auto zone_reading = read_zone(zone);
    if (auto* celsius = std::get_if<double>(&zone_reading)) {
      hottest = std::max(hottest.value_or(*celsius), *celsius);
    } else if (!first_failure) {
      first_failure = std::get<ThermalReadError>(std::move(zone_reading));
    }
  }
  if (hottest) return Celsius{*hottest};
  return ThermalReadError{"no readable thermal zone under " + root_.string() + " (" + first_failure->message + ")"};
}

FileThermalProvider::FileThermalProvider(std::filesystem::path path) : path_(std::move(path)) {}

ThermalReading FileThermalProvider::read() const {
  auto content = read_small_file(path_);
  if (auto* error = std::get_if<ThermalReadError>(&content)) return std::move(*error);
  const auto text = trim(std::get<std::string>(content));
  if (text.empty()) return ThermalReadError{path_.string() + " is empty"};
  if (const auto state = parse_thermal_state(text)) return *state;
  if (const auto celsius = parse_whole<double>(text)) {
    if (plausible(*celsius)) return Celsius{*celsius};
    return ThermalReadError{path_.string() + " holds an implausible temperature " + quoted(text)};
  }
  return ThermalReadError{path_.string() + " holds " + quoted(text) +
                          ", neither a temperature in degrees C nor a thermal state name"};
}

}  // namespace loom::actors
