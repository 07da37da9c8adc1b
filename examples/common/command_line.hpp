// A small command-line reader shared by the loom binaries: `--name value`, `--name=value` and boolean
// `--flag`, with numbers checked against a range and every error naming the option. Deliberately tiny:
// the binaries' option sets are small and each documents its own --help. A value that itself begins with
// "--" must be written `--name=--value`: `--model --port 80` is --model without a value, not a model named
// "--port". An option missing its value is reported when it is read (a known option: "needs a value") or
// by reject_unknown (an unknown one: "unknown option"), so a typo is never blamed on a missing value.
// A binary may also read its options from the environment (with_environment): an option given on the
// command line wins, then the variable PREFIX + the option's name in upper snake case (--kv-cache-mb:
// LOOM_KV_CACHE_MB), then the caller's fallback. Boolean flags are never read from the environment.
#pragma once

#include <cctype>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <system_error>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace loom::cli {

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "kv-cache-mb" with prefix "LOOM_" -> "LOOM_KV_CACHE_MB".
inline std::string environment_name(std::string_view prefix, std::string_view option) {
  std::string name(prefix);
  for (const char c : option) name += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return name;
}

class CommandLine {
 public:
  // `flags` are the options that take no value; every other `--name` needs one.
  CommandLine(int argc, char** argv, std::vector<std::string> flags) : flags_(std::move(flags)) {
    for (int i = 1; i < argc; ++i) {
      std::string_view arg = argv[i];
      if (!arg.starts_with("--")) {
        positional_.emplace_back(arg);
        continue;
      }
      arg.remove_prefix(2);
      std::string name(arg.substr(0, arg.find('=')));
      if (arg.find('=') != std::string_view::npos) {
        values_[name].emplace_back(arg.substr(arg.find('=') + 1));
      } else if (is_flag(name)) {
        values_[name].emplace_back("true");
      } else if (i + 1 < argc && !std::string_view(argv[i + 1]).starts_with("--")) {
        values_[name].emplace_back(argv[++i]);
      } else {
        values_[name];  // present, with no value: an error once we know whether the option exists
      }
    }
  }

  // Options missing from the command line are then read from the variable environment_name(prefix, option)
  // (an empty variable counts as unset). Errors about such a value name the variable, not the option.
  CommandLine& with_environment(std::string prefix) {
    environment_prefix_ = std::move(prefix);
    return *this;
  }

  bool flag(const std::string& name) {
    auto it = values_.find(name);
    if (it == values_.end()) return false;
    values_.erase(it);
    return true;
  }

  std::string text(const std::string& name, std::string fallback) {
    auto value = take(name);
    return value ? *value : std::move(fallback);
  }

  std::int64_t integer(const std::string& name, std::int64_t fallback, std::int64_t min, std::int64_t max) {
    auto value = take(name);
    if (!value) return fallback;
    std::int64_t parsed = 0;
    const auto [end, ec] = std::from_chars(value->data(), value->data() + value->size(), parsed);
    if (ec != std::errc{} || end != value->data() + value->size()) {
      throw UsageError(source(name) + " expects an integer, got '" + *value + "'");
    }
    if (parsed < min || parsed > max) {
      throw UsageError(source(name) + " must be in [" + std::to_string(min) + ", " + std::to_string(max) +
                       "], got " + *value);
    }
    return parsed;
  }

  double real(const std::string& name, double fallback, double min, double max) {
    auto value = take(name);
    if (!value) return fallback;
    double parsed = 0;
    const auto [end, ec] = std::from_chars(value->data(), value->data() + value->size(), parsed);
    if (ec != std::errc{} || end != value->data() + value->size()) {
      throw UsageError(source(name) + " expects a number, got '" + *value + "'");
    }
    if (!(parsed >= min && parsed <= max)) {
      throw UsageError(source(name) + " must be in [" + std::to_string(min) + ", " + std::to_string(max) +
                       "], got " + *value);
    }
    return parsed;
  }

  // Every value of an option that may be repeated (`--stop A --stop B`), in order.
  std::vector<std::string> all(const std::string& name) {
    auto it = values_.find(name);
    if (it == values_.end()) return {};
    if (it->second.empty()) throw UsageError("option --" + name + " needs a value");
    auto values = std::move(it->second);
    values_.erase(it);
    return values;
  }

  const std::vector<std::string>& positional() const { return positional_; }

  // Call after reading every known option: anything left over is a mistake worth reporting.
  void reject_unknown() const {
    if (!values_.empty()) throw UsageError("unknown option --" + values_.begin()->first);
  }

 private:
  bool is_flag(const std::string& name) const {
    for (const auto& f : flags_) {
      if (f == name) return true;
    }
    return false;
  }
  // The last value wins when a single-valued option is repeated. Without the option, its environment
  // variable (with_environment), remembered so that a bad value is blamed on the variable.
  std::optional<std::string> take(const std::string& name) {
    auto it = values_.find(name);
    if (it == values_.end()) {
      if (environment_prefix_.empty()) return std::nullopt;
      const std::string variable = environment_name(environment_prefix_, name);
      const char* value = std::getenv(variable.c_str());
      if (value == nullptr || *value == '\0') return std::nullopt;
      from_environment_.push_back(name);
      return std::string(value);
    }
    if (it->second.empty()) throw UsageError("option --" + name + " needs a value");
    auto value = std::move(it->second.back());
    values_.erase(it);
    return value;
  }

  // Where the value of `name` just taken came from, for an error message.
  std::string source(const std::string& name) const {
    for (const auto& taken : from_environment_) {
      if (taken == name) return "environment variable " + environment_name(environment_prefix_, name);
    }
    return "option --" + name;
  }

  std::vector<std::string> flags_;
  std::map<std::string, std::vector<std::string>> values_;
  std::vector<std::string> positional_;
  std::string environment_prefix_;            // empty: options come from the command line only
  std::vector<std::string> from_environment_;  // options whose value was read from the environment
};

}  // namespace loom::cli
