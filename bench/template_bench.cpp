// Chat template rendering: what the session pays per chat request before tokenizing. A 20-turn conversation
// with tools (10 exchanges: a user turn, an assistant tool call, the tool's result, the assistant's answer;
// two tools with schemas) rendered through the large real templates of ../shared/templates (Llama 3.1's,
// Qwen 2.5's, gpt-oss's, Command R7B's), and each template's parse, which happens once per model. The issue
// asks for well under a millisecond per rendering.
//
//   build/bin/template_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//
// Environment: LOOM_SHARED_DIR (default ../shared) for the templates.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>

#include "loom/compute/text/jinja/template.hpp"

namespace {

using loom::compute::jinja::RenderOptions;
using loom::compute::jinja::Template;
using ordered_json = nlohmann::ordered_json;

std::string read_template(const std::string& name) {
  const char* env = std::getenv("LOOM_SHARED_DIR");
  const std::string path = std::string(env ? env : LOOM_DEFAULT_SHARED_DIR) + "/templates/templates/" + name + ".jinja";
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("missing shared file: " + path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Ten exchanges of user, assistant call, tool result, assistant answer; then a last user turn.
ordered_json conversation() {
  ordered_json messages = ordered_json::array();
  for (int i = 0; i < 10; ++i) {
    const std::string id = "call" + std::to_string(1000 + i).substr(0, 4) + "x";  // 9 characters (Mistral's rule)
    messages.push_back({{"role", "user"}, {"content", "What is the weather in city number " + std::to_string(i) + "?"}});
    messages.push_back({{"role", "assistant"}, {"content", ""},
                        {"tool_calls", ordered_json::array({{{"id", id}, {"type", "function"},
                                                             {"function", {{"name", "get_weather"},
                                                                           {"arguments", {{"city", "Paris"}, {"days", i + 1}}}}}}})}});
    messages.push_back({{"role", "tool"}, {"tool_call_id", id}, {"content", R"({"temperature": 21, "sky": "clear"})"}});
    messages.push_back({{"role", "assistant"}, {"content", "It is clear and 21 degrees there, for the next days too."}});
  }
  messages.push_back({{"role", "user"}, {"content", "Thanks. And tomorrow?"}});
  const auto tool = [](const char* name, const char* description) {
    return ordered_json{{"type", "function"},
                        {"function", {{"name", name}, {"description", description},
                                      {"parameters", ordered_json::parse(R"({"type": "object", "properties": {
                                          "city": {"type": "string", "description": "The city"},
                                          "days": {"type": "integer", "minimum": 1, "maximum": 7}},
                                          "required": ["city"]})")}}}};
  };
  return {{"messages", messages},
          {"tools", ordered_json::array({tool("get_weather", "The forecast for a city"),
                                         tool("get_time", "The local time in a city")})},
          {"documents", nullptr},
          {"add_generation_prompt", true},
          {"bos_token", "<s>"},
          {"eos_token", "</s>"}};
}

void BM_Render(benchmark::State& state, const std::string& name) {
  const auto tmpl = Template::parse(read_template(name));
  const ordered_json variables = conversation();
  RenderOptions options;
  options.now = std::chrono::sys_seconds(std::chrono::seconds(1741507503));  // 2025-03-09 08:05:03
  std::size_t bytes = 0;
  for (auto _ : state) {
    const std::string text = tmpl->render(variables, options);
    bytes = text.size();
    benchmark::DoNotOptimize(text.data());
  }
  state.counters["prompt_bytes"] = static_cast<double>(bytes);
}

void BM_Parse(benchmark::State& state, const std::string& name) {
  const std::string source = read_template(name);
  for (auto _ : state) benchmark::DoNotOptimize(Template::parse(source));
  state.counters["source_bytes"] = static_cast<double>(source.size());
}

const char* const kTemplates[] = {"meta-llama-Llama-3.1-8B-Instruct", "Qwen-Qwen2.5-7B-Instruct", "openai-gpt-oss-120b",
                                  "CohereForAI-c4ai-command-r7b-12-2024-tool_use"};

const bool kRegistered = [] {
  for (const char* name : kTemplates) {
    benchmark::RegisterBenchmark((std::string("Render20TurnsWithTools/") + name).c_str(), BM_Render, std::string(name))
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark((std::string("Parse/") + name).c_str(), BM_Parse, std::string(name))
        ->Unit(benchmark::kMicrosecond);
  }
  return true;
}();

}  // namespace

BENCHMARK_MAIN();
