// The report of a run: the same facts as a table for people or as one JSON object (--json). Rates are
// over the run's wall time, from the first request sent to the last one finished; token totals count
// completed requests.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "loadgen_options.hpp"
#include "request_plan.hpp"
#include "run_results.hpp"

namespace loom::loadgen {

struct RunInfo {
  const Options& options;
  double wall_seconds = 0;
  PromptScales prompt_scales;
  std::string endpoint_text;  // the URL the requests went to
};

nlohmann::json json_report(const RunInfo& info, const RunResults& results);
std::string text_report(const RunInfo& info, const RunResults& results);

}  // namespace loom::loadgen
