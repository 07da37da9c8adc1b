// Focused tests of the Jinja interpreter's constructs (whitespace control, printing, tojson, scoping,
// macros, the loop object, errors) and of the limits that keep hostile templates bounded in time and memory.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "loom/compute/text/jinja/conversation.hpp"
#include "loom/compute/text/jinja/template.hpp"

namespace loom::compute::jinja {
namespace {

using json = nlohmann::ordered_json;

std::string render(std::string_view source, const json& vars = json::object(), const RenderOptions& options = {}) {
  return Template::parse(source, options.limits)->render(vars, options);
}

// The kind of the error that parsing or rendering `source` ends with; fails the test when it renders.
ErrorKind error_kind(std::string_view source, const json& vars = json::object(), const Limits& limits = {},
                     std::string* message = nullptr) {
  RenderOptions options;
  options.limits = limits;
  try {
    std::string out = render(source, vars, options);
    ADD_FAILURE() << "rendered without an error: " << source.substr(0, 200) << " -> " << out.substr(0, 200);
  } catch (const TemplateError& e) {
    if (message) *message = e.what();
    return e.kind();
  }
  return ErrorKind::other;
}

struct Case {
  const char* source;
  const char* expected;
  const char* vars = "{}";
};

void check(const std::vector<Case>& cases) {
  for (const auto& c : cases) {
    try {
      EXPECT_EQ(render(c.source, json::parse(c.vars)), c.expected) << "template: " << c.source;
    } catch (const TemplateError& e) {
      ADD_FAILURE() << "template: " << c.source << " failed: " << e.what();
    }
  }
}

TEST(JinjaWhitespace, TrimLstripAndModifiers) {
  check({
      {"{% if true %}\nA{% endif %}\n", "A"},
      {"  {% if true %}\n  x\n  {% endif %}\nB", "  x\nB"},
      {"a {% if true %} b{% endif %}", "a  b"},
      {"  {%+ if true %}x{% endif %}", "  x"},
      {"a  {{- 'b' -}}  \n c", "abc"},
      {"{% if true -%}  \n\n x {%- endif %}", "x"},
      {"x {# c #}\ny", "x y"},
      {"  {# c #}\ny", "y"},
      {"{{ 'a' }}\nb", "a\nb"},
      {"line\r\nnext\r\n", "line\nnext"},
      {"keep\n\n", "keep\n"},
      {"{% if true %} \nz{% endif %}", " \nz"},
      {"{% raw %}{{ not evaluated }}{% endraw %}", "{{ not evaluated }}"},
  });
}

TEST(JinjaPrinting, PythonStrAndRepr) {
  check({
      {"{{ none }} {{ true }} {{ false }} {{ 1.0 }} {{ 2.5e-07 }} {{ 1e16 }} {{ 0.1 + 0.2 }}", "None True False 1.0 2.5e-07 1e+16 0.30000000000000004"},
      {"{{ x }}", "12345678901234567890", R"({"x": 12345678901234567890})"},
      {"{{ [1, 'a', \"it's\", none, {'k': [true]}] }}", "[1, 'a', \"it's\", None, {'k': [True]}]"},
      {"{{ ('a',) }} {{ (1, 2) }}", "('a',) (1, 2)"},
      {"{{ ['a\\nb', 'q\"\\'', 'ü'] }}", "['a\\nb', 'q\"\\'', 'ü']"},
      {"{{ 4 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 'ab' * 3 }}", "2.0 3 -4 2 1024 ababab"},
      {"{{ 1 ~ none ~ 'x' }}", "1Nonex"},
      {"{{ 1 < 2 < 3 }} {{ 1 < 3 < 2 }} {{ 1 == 1 in [1] }} {{ 'a' not in 'b' }}", "True False True True"},
      {"{{ 'äöü' | length }} {{ 'héllo'[1] }} {{ 'abc'[::-1] }} {{ [1,2,3][1:] }} {{ [1,2,3][-1] }}", "3 é cba [2, 3] 3"},
      {"{{ x.a }}|{{ x['a'] }}|{{ x.missing }}|{{ x.items() | list }}", "1|1||[('a', 1)]", R"({"x": {"a": 1}})"},
  });
}

TEST(JinjaJson, TojsonIsPythonJsonDumps) {
  check({
      {"{{ x | tojson }}", R"({"b": 1, "a": [1.0, null, true, "é\n\u0001"]})", R"({"x": {"b": 1, "a": [1.0, null, true, "é\n\u0001"]}})"},
      {"{{ x | tojson(indent=2) }}", "{\n  \"b\": [\n    1,\n    2\n  ],\n  \"c\": {}\n}", R"({"x": {"b": [1, 2], "c": {}}})"},
      {"{{ x | tojson(separators=(',', ':'), sort_keys=true) }}", R"({"a":2,"b":1})", R"({"x": {"b": 1, "a": 2}})"},
      {"{{ 'a\"b' | tojson }}", R"("a\"b")"},
  });
}

TEST(JinjaScoping, LoopsIfsNamespacesAndSetBlocks) {
  check({
      {"{% set x = 1 %}{% for i in [1, 2] %}{{ x }}{% set x = 5 %}{{ x }}{% endfor %}{{ x }}", "15151"},
      {"{% if true %}{% set x = 2 %}{% endif %}{{ x }}", "2"},
      {"{% set ns = namespace(n=0) %}{% for i in range(3) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}", "3"},
      {"{% set x %}a{{ 1 + 1 }}{% endset %}[{{ x }}]", "[a2]"},
      {"{% for i in [] %}x{% else %}empty{% endfor %}", "empty"},
      {"{% for k, v in d | items %}{{ k }}={{ v }};{% endfor %}", "a=1;b=2;", R"({"d": {"a": 1, "b": 2}})"},
      {"{% for k in d %}{{ k }}{% endfor %}", "ab", R"({"d": {"a": 1, "b": 2}})"},
      {"{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 4 %}{% break %}{% endif %}{{ i }}{% endfor %}", "013"},
      {"{% for m in [1, 2, 3, 4] if m is even %}{{ loop.index }}/{{ loop.length }}:{{ m }} {% endfor %}", "1/2:2 2/2:4 "},
      {"{% for i in 'abc' %}{{ loop.previtem | default('-') }}{{ i }}{{ loop.nextitem | default('-') }}{{ loop.revindex }}{{ loop.first }}{{ loop.last }} {% endfor %}",
       "-ab3TrueFalse abc2FalseFalse bc-1FalseTrue "},
      {"{% generation %}g{% endgeneration %}", "g"},
      {"{% for i in range(3) %}{{ loop.cycle('a', 'b') }}{% endfor %}", "aba"},
      {"{% filter upper %}ab{{ 'c' }}{% endfilter %}|{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}{{ a }}|{% set t | trim %}  x  {% endset %}[{{ t }}]", "ABC|3|[x]"},
      {"{% set a, b = 1, 2 %}{{ b }}{{ a }} {% for x, y in [[1, 2], [3, 4]] %}{{ y }}{% endfor %}", "21 24"},
  });
}

TEST(JinjaMacros, ArgumentsDefaultsRecursionAndCaller) {
  check({
      {"{% macro f(a, b='B', c=none) %}{{ a }}{{ b }}{{ c }}{% endmacro %}{{ f(1) }} {{ f(1, c=3) }} {{ f(1, 2, 3) }}", "1BNone 1B3 123"},
      {"{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1) | int }}{% endif %}{% endmacro %}{{ fact(5) }}", "120"},
      {"{% macro g() %}{{ late }}{% endmacro %}{% set late = 'L' %}{{ g() }}", "L"},
      {"{% macro w() %}<{{ caller() }}>{% endmacro %}{% call w() %}in{% endcall %}", "<in>"},
      {"{% macro v(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ v(1, 2, k=3) }}", "1(2,){'k': 3}"},
      {"{% for i in [1, 2] %}{% macro m() %}{{ i }}{% endmacro %}{{ m() }}{% endfor %}", "12"},
  });
}

TEST(JinjaBuiltins, FiltersTestsAndMethods) {
  check({
      {"{{ '  a b  ' | trim }}|{{ ' x '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}",
       "a b|x|a|['a', 'b', '', 'c']|['a', 'b']"},
      {"{{ '\u00a0pad\u3000' | trim }}", "pad"},
      {"{{ 'abc'.startswith(('x', 'a')) }} {{ 'abc'.endswith('bc') }} {{ 'a-b'.replace('-', '+') }} {{ 'Hello'.upper() }}", "True True a+b HELLO"},
      {"{{ [3, 1, 2] | sort | join(',') }} {{ [1, 1, 2] | unique | list }} {{ [{'a': 1}, {'a': 2}] | map(attribute='a') | list }}", "1,2,3 [1, 2] [1, 2]"},
      {"{{ [1, 2, 3, 4] | select('odd') | list }} {{ [{'t': 'x'}, {'t': 'y'}] | selectattr('t', 'equalto', 'y') | list }}", "[1, 3] [{'t': 'y'}]"},
      {"{{ undefined_thing | default('d') }} {{ '' | default('e', true) }} {{ none is none }} {{ 0 is false }} {{ false is false }}", "d e True False True"},
      {"{{ x is defined }} {{ y is defined }} {{ x is string }} {{ {} is mapping }} {{ 'a' is iterable }}", "True False True True True", R"({"x": "s"})"},
      {"{{ '{} and {name}'.format(1, name='n') }} {{ 'a' in 'cat' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }}", "1 and n True True True"},
      {"{{ '3' | int + 1 }} {{ '2.5' | float }} {{ 2.567 | round(2) }} {{ -3 | abs }} {{ 'ab cd' | title }} {{ 'aB' | capitalize }}", "4 2.5 2.57 3 Ab Cd Ab"},
      {"{{ '%s=%d|%5.2f|%-3s|%x|%%|%r' % ('a', 3, 2.5, 'b', 255, 'q') }} {{ '%(k)s' % {'k': 1} }} {{ '%s-%s' | format(1, 'z') }}",
       "a=3| 2.50|b  |ff|%|'q' 1 1-z"},
      {"{{ 'hello big world' | truncate(9, leeway=0) }}|{{ 'hello big world' | truncate(9, true, leeway=0) }}|{{ 'a b_c' | wordcount }}|{{ 'ab' | center(6) }}|{{ [1, 2, 3] | batch(2, 0) | list }}",
       "hello...|hello ...|2|  ab  |[[1, 2], [3, 0]]"},
      {"{{ 'a\nb' | indent(2) }}|{{ 'a\nb' | indent(2, true) }}", "a\n  b|  a\n  b"},
      {"{{ d.get('a') }} {{ d.get('z', 0) }} {{ d.keys() | list }} {{ d | dictsort }}", "1 0 ['a'] [('a', 1)]", R"({"d": {"a": 1}})"},
  });
}

TEST(JinjaBuiltins, StrftimeNowUsesTheInjectedClock) {
  RenderOptions options;
  using namespace std::chrono;
  options.now = sys_days{year{2025} / March / 9} + hours{8} + minutes{5} + seconds{3};
  EXPECT_EQ(render("{{ strftime_now('%d %b %Y|%B %d, %Y|%Y-%m-%d|%H:%M:%S|%A %a|%y %j %p %I|%e') }}", json::object(), options),
            "09 Mar 2025|March 09, 2025|2025-03-09|08:05:03|Sunday Sun|25 068 AM 08| 9");
  EXPECT_EQ(render("{{ strftime_now('%Y') | length }}"), "4");  // the current time when none is given
}

TEST(JinjaErrors, PythonErrorsAreErrors) {
  EXPECT_EQ(error_kind("{{ 'a' + none }}"), ErrorKind::type);
  EXPECT_EQ(error_kind("{{ 'a' + [1] }}"), ErrorKind::type);
  EXPECT_EQ(error_kind("{{ 'a' + {} }}"), ErrorKind::type);
  EXPECT_EQ(error_kind("{{ 'a' in none }}"), ErrorKind::type);
  EXPECT_EQ(error_kind("{% for x in none %}{% endfor %}"), ErrorKind::type);
  EXPECT_EQ(error_kind("{{ nothing + 'x' }}"), ErrorKind::undefined);
  EXPECT_EQ(error_kind("{{ nothing.attr }}"), ErrorKind::undefined);
  EXPECT_EQ(error_kind("{{ nothing() }}"), ErrorKind::undefined);
  EXPECT_EQ(error_kind("{{ none.attr() }}"), ErrorKind::undefined);
  EXPECT_EQ(error_kind("{{ nothing | tojson }}"), ErrorKind::undefined);
  EXPECT_EQ(error_kind("{{ [1].append(2) }}"), ErrorKind::other);
  EXPECT_EQ(error_kind("{{ {}.update({}) }}"), ErrorKind::other);
  EXPECT_EQ(error_kind("{{ 1 / 0 }}"), ErrorKind::other);
  EXPECT_EQ(error_kind("{{ 2 ** 1000 }}"), ErrorKind::other);
  std::string message;
  EXPECT_EQ(error_kind("{{ raise_exception('Roles must alternate!') }}", json::object(), {}, &message), ErrorKind::raised);
  EXPECT_EQ(message, "Roles must alternate!");
  // Undefined is lenient where Python's is.
  EXPECT_EQ(render("{{ nothing }}{{ nothing | length }}{% for x in nothing %}x{% endfor %}{{ 's' in nothing }}{{ nothing == 1 }}"), "0FalseFalse");
}

TEST(JinjaErrors, SyntaxErrorsNameTheLine) {
  for (const char* bad : {"a\nb\n{% if x %}", "a\n\n{{ x ", "{% for %}", "\n\n{{ 'unterminated }}", "{% endfor %}",
                          "{{ x | }}", "{% unknown %}", "{% break %}", "{# never closed", "{{ 1 + }}"}) {
    try {
      Template::parse(bad);
      ADD_FAILURE() << "parsed: " << bad;
    } catch (const TemplateError& e) {
      EXPECT_EQ(e.kind(), ErrorKind::syntax) << bad;
      EXPECT_GE(e.line(), 1u) << bad << ": " << e.what();
    }
  }
  try {
    Template::parse("line1\nline2\n{{ x + }}");
  } catch (const TemplateError& e) {
    EXPECT_EQ(e.line(), 3u);
  }
}

// Each of these must fail with the right kind, quickly, and without exhausting the stack or memory.
TEST(JinjaLimits, HostileTemplatesEndInBoundedTime) {
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(error_kind("{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}"), ErrorKind::syntax);
  EXPECT_EQ(error_kind("{{ " + std::string(20000, '[') + std::string(20000, ']') + " }}"), ErrorKind::syntax);
  EXPECT_EQ(error_kind("{{ " + std::string(20000, '{') + " }}"), ErrorKind::syntax);
  EXPECT_EQ(error_kind("{{ x" + std::string(20000, '|').replace(0, 0, "") + " }}"), ErrorKind::syntax);
  std::string nested;
  for (int i = 0; i < 5000; ++i) nested += "{% if true %}";
  EXPECT_EQ(error_kind(nested), ErrorKind::syntax);
  EXPECT_EQ(error_kind("{{ " + std::string(50000, '-') + "1 }}"), ErrorKind::syntax);
  std::string not_chain = "{{ ";
  for (int i = 0; i < 5000; ++i) not_chain += "not ";
  EXPECT_EQ(error_kind(not_chain + "x }}"), ErrorKind::syntax);
  std::string filters = "{{ x";
  for (int i = 0; i < 5000; ++i) filters += " | trim";
  EXPECT_EQ(error_kind(filters + " }}"), ErrorKind::syntax);  // evaluated recursively, so bounded too
  std::string sum = "{{ 1";
  for (int i = 0; i < 5000; ++i) sum += " + 1";
  EXPECT_EQ(error_kind(sum + " }}"), ErrorKind::syntax);
  // A macro recursing through deeply nested blocks: bounded as a whole.
  std::string deep_body;
  for (int i = 0; i < 200; ++i) deep_body += "{% if true %}";
  deep_body += "{{ f() }}";
  for (int i = 0; i < 200; ++i) deep_body += "{% endif %}";
  EXPECT_EQ(error_kind("{% macro f() %}" + deep_body + "{% endmacro %}{{ f() }}"), ErrorKind::recursion);
  EXPECT_EQ(error_kind("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}"), ErrorKind::recursion);
  EXPECT_EQ(error_kind("{% macro f(n) %}{% for i in [1] %}{% if true %}{{ f(n + 1) }}{% endif %}{% endfor %}{% endmacro %}{{ f(0) }}"),
            ErrorKind::recursion);
  EXPECT_EQ(error_kind("{% for i in range(10**9) %}{% endfor %}"), ErrorKind::limit);
  EXPECT_EQ(error_kind("{% for i in range(10**9) if i %}{% endfor %}"), ErrorKind::limit);
  EXPECT_EQ(error_kind("{{ range(10**9) | list | length }}"), ErrorKind::limit);
  EXPECT_EQ(error_kind("{% for i in range(10**6) %}{{ 'x' * 100 }}{% endfor %}"), ErrorKind::limit);
  EXPECT_EQ(error_kind("{{ 'x' * 10**12 }}"), ErrorKind::limit);
  EXPECT_EQ(error_kind("{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s + ns.s %}{% endfor %}"), ErrorKind::limit);
  EXPECT_EQ(error_kind("{% set ns = namespace(x=[]) %}{% for i in range(5000) %}{% set ns.x = [ns.x] %}{% endfor %}"), ErrorKind::limit);
  EXPECT_EQ(error_kind("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}"), ErrorKind::limit);
  EXPECT_EQ(error_kind("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns | tojson }}"), ErrorKind::type);
  // Work that is quadratic in the source: many arguments, many names looked up often.
  std::string call = "{{ range(";
  for (int i = 0; i < 200000; ++i) call += "1, ";
  EXPECT_EQ(error_kind(call + "1) }}"), ErrorKind::type);
  std::string kwargs = "{{ namespace(";
  for (int i = 0; i < 100000; ++i) kwargs += "a" + std::to_string(i) + "=1, ";
  EXPECT_EQ(error_kind(kwargs + "z=1) }}"), ErrorKind::limit);
  std::string params = "{% macro m(";
  for (int i = 0; i < 50000; ++i) params += "p" + std::to_string(i) + ", ";
  EXPECT_EQ(error_kind(params + "z) %}{% endmacro %}{{ m() }}"), ErrorKind::limit);
  // Per-step work on a large value is paid for by its size (under a small budget: the same bound, sooner).
  Limits scan_budget;
  scan_budget.max_steps = 1'000'000;
  EXPECT_EQ(error_kind("{% set l = range(100000) | list %}{% for i in range(10**6) %}{% if i in l %}{% endif %}{% endfor %}",
                       json::object(), scan_budget),
            ErrorKind::limit);
  EXPECT_EQ(error_kind("{% set s = 'é' * 1000000 %}{% for i in range(10**6) %}{{ s.upper()[:1] }}{{ s[5] }}{% endfor %}",
                       json::object(), scan_budget),
            ErrorKind::limit);
  EXPECT_EQ(error_kind("{% set l = range(100000) | list %}{% for i in range(10**6) %}{{ l | length }}{{ l == l }}{% endfor %}",
                       json::object(), scan_budget),
            ErrorKind::limit);
  std::string many_names;
  for (int i = 0; i < 30000; ++i) many_names += "{% set v" + std::to_string(i) + " = 1 %}";
  EXPECT_EQ(error_kind(many_names + "{% for i in range(10**6) %}{{ v0 }}{% endfor %}"), ErrorKind::limit);
  // Retaining many large strings costs steps in proportion to their bytes: with 1M steps at most ~8 MB.
  Limits budget;
  budget.max_steps = 1'000'000;
  EXPECT_EQ(error_kind("{% set ns = namespace(l=[]) %}{% for i in range(1000) %}{% set ns.l = ns.l + ['x' * 1000000] %}{% endfor %}",
                       json::object(), budget),
            ErrorKind::limit);
  EXPECT_EQ(error_kind("{% set ns = namespace(l=[]) %}{% for i in range(1000) %}{% set x %}{{ 'y' * 1000000 }}{% endset %}"
                       "{% set ns.l = ns.l + [x] %}{% endfor %}",
                       json::object(), budget),
            ErrorKind::limit);
  EXPECT_EQ(error_kind("{% for i in range(10**8) %}{% set n = namespace(i=i) %}{% endfor %}", json::object(), budget), ErrorKind::limit);
  Limits small;
  small.max_steps = 1000;
  EXPECT_EQ(error_kind("{% for i in range(100) %}{% for j in range(100) %}{% endfor %}{% endfor %}", json::object(), small), ErrorKind::limit);
  small.max_source_bytes = 10;
  EXPECT_EQ(error_kind("{{ 'more than ten bytes' }}", json::object(), small), ErrorKind::syntax);
  // Under 1 s in a release build (the 20M-step loop takes most of it); a Debug ASan build is ~50x slower.
  const auto elapsed = std::chrono::steady_clock::now() - start;
  std::printf("hostile templates: %.2f s\n", std::chrono::duration<double>(elapsed).count());
  EXPECT_LT(std::chrono::duration_cast<std::chrono::seconds>(elapsed).count(), 120);
}

// Legitimately large work stays well inside the default limits: growing results are charged once, not per
// piece (a 1 MB tojson or join costs about its size / 8 steps).
TEST(JinjaLimits, LargeLegitimateRendersFit) {
  json items = json::array();
  for (int i = 0; i < 20000; ++i) items.push_back({{"name", "tool_" + std::to_string(i)}, {"value", i}});
  const json vars = {{"items", items}};
  const std::string out = render("{{ items | tojson(indent=2) }}{{ items | map(attribute='name') | join(', ') }}"
                                 "{% for i in items %}{{ i.name ~ '\n' }}{% endfor %}{{ (items | tojson).split(',') | length }}",
                                 vars);
  EXPECT_GT(out.size(), 1'000'000u);
}

TEST(JinjaTemplate, RendersConcurrently) {
  auto tmpl = Template::parse("{% for m in messages %}{{ m.role }}:{{ m.content | trim }};{% endfor %}");
  json vars = conversation_variables(json::parse(R"({"messages": [{"role": "user", "content": " hi "}]})"));
  std::vector<std::thread> threads;
  std::vector<std::string> results(8);
  for (std::size_t t = 0; t < results.size(); ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) results[t] = tmpl->render(vars);
    });
  for (auto& th : threads) th.join();
  for (const auto& r : results) EXPECT_EQ(r, "user:hi;");
  EXPECT_EQ(vars["tools"], nullptr);
  EXPECT_EQ(vars["add_generation_prompt"], false);
  EXPECT_FALSE(vars.contains("bos_token"));
}

}  // namespace
}  // namespace loom::compute::jinja
