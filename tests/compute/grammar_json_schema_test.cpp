// JSON Schema to GBNF (json_schema.hpp): a table of schemas, each with texts the grammar must accept and
// texts it must refuse (every accepted text was checked valid under the schema with Python's jsonschema,
// Draft 2020-12 and its format checker, when the table was written); every refused keyword and limit named
// in its SchemaError; recursive references; a realistic schema's grammar compiled under the default limits.
#include <gtest/gtest.h>

#include <cctype>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "grammar_test_grammars.hpp"
#include "loom/compute/grammar/grammar.hpp"
#include "loom/compute/grammar/grammar_state.hpp"
#include "loom/compute/grammar/json_schema.hpp"
#include "loom/compute/grammar/output_constraint.hpp"

namespace loom::compute::grammar {
namespace {

using testing::matches;

using json = nlohmann::json;

struct SchemaCase {
  const char* name;
  const char* schema;
  std::vector<std::string> good;
  std::vector<std::string> bad;
};

// Accepted texts are compact JSON with at most one space after ':' and ','; objects list their properties
// in key order (nlohmann::json sorts keys), so a valid value in another order or spacing is refused here.
const std::vector<SchemaCase>& cases() {
  static const std::vector<SchemaCase> table = {
    {"string",
     R"({"type": "string"})",
     {R"("abc")", R"("")", R"("a\"b\\c\n")", R"("\u00e9\/")", R"("é€😀")"},
     {R"(abc)", R"("a)", R"("a\x")", "\"line\nbreak\"", R"(1)", R"("\ud800")", R"( "a")"}},
    {"integer",
     R"({"type": "integer"})",
     {R"(0)", R"(-5)", R"(123)"},
     {R"(01)", R"(1.5)", R"(1e3)", R"()", R"(+1)"}},
    {"number",
     R"({"type": "number"})",
     {R"(0)", R"(-1.5)", R"(2.5e-3)", R"(1E+10)", R"(7)"},
     {R"(.5)", R"(1.)", R"(+1)", R"(01.5)", R"(1e)", R"(--1)"}},
    {"boolean",
     R"({"type": "boolean"})",
     {R"(true)", R"(false)"},
     {R"(True)", R"(1)", R"("true")"}},
    {"null",
     R"({"type": "null"})",
     {R"(null)"},
     {R"(nul)", R"("null")", R"(None)"}},
    {"type list",
     R"({"type": ["string", "null"]})",
     {R"("x")", R"(null)"},
     {R"(1)", R"(true)"}},
    {"closed object",
     R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}, "required": ["a"], "additionalProperties": false})",
     {R"({"a":1})", R"({"a":1,"b":"x"})", R"({"a": 1, "b": "x"})"},
     {R"({})", R"({"b":"x"})", R"({"a":1,"c":2})", R"({"a":"1"})", R"({"a":1 ,"b":"x"})", R"({"a":1,  "b":"x"})", R"({"b":"x","a":1})", R"({ "a":1})"}},
    {"open object",
     R"({"properties": {"a": {"type": "integer"}}})",
     {R"({})", R"({"a":1})", R"({"a":1,"z":[1,{}]})", R"({"zz":null})", R"({"ab":true})", R"({"":1})", R"({"b":1, "c":"x"})", R"({"b\u0061":1})", R"({"\u0062":1})", R"({"\u00e9":1})"},
     {R"({"a":"x"})", R"({"a":1,"a":"x"})", R"({"\u0061":"x"})", R"({"z":1,"a":1})", R"([])"}},
    {"additionalProperties schema",
     R"({"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"], "additionalProperties": {"type": "string"}})",
     {R"({"id":1})", R"({"id":1,"x":"y"})", R"({"id":1,"x":"y","zz":"w"})", R"({"id":1,"i":"y"})", R"({"id":1,"idx":"y"})"},
     {R"({"id":1,"x":2})", R"({"x":"y"})", R"({"id":1,"id":"y"})", R"({"id":1,"\u0069d":"y"})", R"({"id":1,"i\u0064":"y"})"}},
    {"any object",
     R"({"type": "object"})",
     {R"({})", R"({"a":{"b":[1,2]}})", R"({"a":1, "b":null})"},
     {R"([])", R"({"a"})", R"({"a":1,})"}},
    {"required without properties",
     R"({"type": "object", "required": ["name"]})",
     {R"({"name":1})", R"({"name":"x","other":2})"},
     {R"({})", R"({"other":2})", R"({"other":2,"name":1})"}},
    {"enum",
     R"({"enum": ["red", "green", 1, null, {"a": [1, 2]}]})",
     {R"("red")", R"("green")", R"(1)", R"(null)", R"({"a":[1,2]})"},
     {R"("blue")", R"("Red")", R"({"a": [1, 2]})", R"(2)"}},
    {"const",
     R"({"const": {"x": "é\n", "n": 2}})",
     {R"({"n":2,"x":"é\n"})"},
     {R"({"x":"é\n","n":2})", R"({"n":2,"x":"e"})"}},
    {"enum filtered by type",
     R"({"type": "string", "enum": ["a", 1]})",
     {R"("a")"},
     {R"(1)"}},
    {"enum filtered by keywords",
     R"({"enum": ["ab", "abcd", 3, 12, [1], [1, 2, 3], {"k": 1}, {}], "maxLength": 3, "maximum": 10, "minItems": 2, "required": ["k"]})",
     {R"("ab")", R"(3)", R"([1,2,3])", R"({"k":1})"},
     {R"("abcd")", R"(12)", R"([1])", R"({})"}},
    {"array of integers",
     R"({"type": "array", "items": {"type": "integer"}})",
     {R"([])", R"([1])", R"([1,2,3])", R"([1, 2])"},
     {R"([1,])", R"(["a"])", R"([ 1])", R"([1 ,2])"}},
    {"minItems maxItems",
     R"({"type": "array", "items": {"type": "boolean"}, "minItems": 1, "maxItems": 3})",
     {R"([true])", R"([true,false,true])"},
     {R"([])", R"([true,true,true,true])"}},
    {"prefixItems closed",
     R"({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": false})",
     {R"([])", R"(["a"])", R"(["a",1])"},
     {R"([1])", R"(["a",1,2])", R"(["a","b"])"}},
    {"prefixItems and items",
     R"({"prefixItems": [{"const": "x"}], "items": {"type": "number"}, "minItems": 2})",
     {R"(["x",1])", R"(["x",1,2.5])", R"(["x", 1, 2])"},
     {R"(["x"])", R"([1,2])", R"(["x","y"])"}},
    {"tuple items draft 4",
     R"({"$schema": "http://json-schema.org/draft-07/schema#", "items": [{"type": "integer"}], "additionalItems": false})",
     {R"([])", R"([1])"},
     {R"([1,2])", R"(["a"])"}},
    {"anyOf",
     R"({"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 2}]})",
     {R"(5)", R"("ab")"},
     {R"("abc")", R"(true)"}},
    {"anyOf unsatisfiable branch dropped",
     R"({"anyOf": [{"allOf": [{"type": "string"}, {"type": "integer"}]}, {"type": "boolean"}, {"const": 1, "type": "string"}]})",
     {R"(true)"},
     {R"("x")", R"(1)"}},
    {"oneOf",
     R"({"oneOf": [{"type": "boolean"}, {"type": "null"}]})",
     {R"(true)", R"(null)"},
     {R"(0)"}},
    {"anyOf beside properties",
     R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "anyOf": [{"required": ["a"]}, {"required": ["b"]}], "additionalProperties": false})",
     {R"({"a":1})", R"({"b":2})", R"({"a":1,"b":2})"},
     {R"({})", R"({"c":1})"}},
    {"allOf objects",
     R"({"allOf": [{"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}, {"properties": {"b": {"type": "integer"}}, "required": ["b"]}]})",
     {R"({"a":"x","b":1})", R"({"a":"x","b":1,"c":null})"},
     {R"({"a":"x"})", R"({"b":1})", R"({"a":1,"b":1})"}},
    {"allOf with $ref base",
     R"({"$defs": {"base": {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}}, "allOf": [{"$ref": "#/$defs/base"}, {"properties": {"name": {"type": "string"}}, "required": ["name"]}]})",
     {R"({"id":1,"name":"x"})", R"({"id":1,"name":"x","more":true})"},
     {R"({"id":1})", R"({"name":"x"})", R"({"id":"1","name":"x"})"}},
    {"allOf of array keywords",
     R"({"allOf": [{"type": "array", "prefixItems": [{"type": "integer"}]}, {"items": {"type": "number", "maximum": 5}, "maxItems": 2}]})",
     {R"([])", R"([1])", R"([1,4.5])"},
     {R"([1.5])", R"([6])", R"([1,2,3])", R"(["a"])"}},
    {"allOf draft 4 exclusive bounds",
     R"({"allOf": [{"type": "integer", "minimum": 5, "exclusiveMinimum": true, "$schema": "http://json-schema.org/draft-04/schema#"}, {"minimum": 7}]})",
     {R"(7)", R"(8)"},
     {R"(6)", R"(5)"}},
    {"unsatisfiable optional parts dropped",
     R"({"type": "object", "properties": {"a": {"allOf": [{"type": "string"}, {"type": "null"}]}, "b": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "integer", "minimum": 3, "maximum": 2}], "items": {"type": "string"}}}, "additionalProperties": false})",
     {R"({})", R"({"b":[]})", R"({"b":[1]})"},
     {R"({"a":null})", R"({"a":"x"})", R"({"b":[1,2]})", R"({"b":[1,"x"]})"}},
    {"unsatisfiable additionalProperties closes the object",
     R"({"properties": {"a": {"type": "null"}}, "additionalProperties": {"allOf": [{"type": "string"}, {"type": "integer"}]}})",
     {R"({})", R"({"a":null})"},
     {R"({"b":1})", R"({"a":null,"b":"x"})"}},
    {"allOf type intersection",
     R"({"allOf": [{"type": ["number", "string"]}, {"type": "integer"}, {"minimum": 3}]})",
     {R"(3)", R"(40)"},
     {R"(2)", R"(3.5)", R"("x")"}},
    {"$ref to $defs",
     R"({"$defs": {"pos": {"type": "integer", "minimum": 1}}, "type": "array", "items": {"$ref": "#/$defs/pos"}})",
     {R"([1,20])", R"([])"},
     {R"([0])", R"([-1])"}},
    {"$ref to definitions",
     R"({"definitions": {"s": {"type": "string"}}, "properties": {"v": {"$ref": "#/definitions/s"}}, "required": ["v"], "additionalProperties": false})",
     {R"({"v":"x"})"},
     {R"({"v":1})", R"({})"}},
    {"$ref with escaped pointer",
     R"({"$defs": {"a/b": {"type": "integer"}, "x y": {"type": "string"}}, "prefixItems": [{"$ref": "#/$defs/a~1b"}, {"$ref": "#/$defs/x%20y"}], "items": false})",
     {R"([1,"s"])", R"([2])"},
     {R"(["s"])", R"([1,2])"}},
    {"$ref to a local pointer",
     R"({"properties": {"a": {"type": "boolean"}, "b": {"$ref": "#/properties/a"}}, "additionalProperties": false})",
     {R"({"a":true,"b":false})"},
     {R"({"b":1})"}},
    {"$ref with siblings",
     R"({"$defs": {"s": {"type": "string"}}, "$ref": "#/$defs/s", "maxLength": 2, "description": "short"})",
     {R"("ab")", R"("")"},
     {R"("abc")", R"(1)"}},
    {"recursive tree",
     R"({"type": "object", "properties": {"value": {"type": "integer"}, "children": {"type": "array", "items": {"$ref": "#"}}}, "required": ["value"], "additionalProperties": false})",
     {R"({"value":1})", R"({"children":[{"value":2}],"value":1})", R"({"children":[{"children":[],"value":3},{"value":4}],"value":1})"},
     {R"({"children":[{}],"value":1})", R"({"children":[{"value":"x"}],"value":1})", R"({"children":[]})"}},
    {"recursive list",
     R"({"$defs": {"list": {"anyOf": [{"type": "null"}, {"type": "object", "properties": {"head": {"type": "integer"}, "tail": {"$ref": "#/$defs/list"}}, "required": ["head", "tail"], "additionalProperties": false}]}}, "$ref": "#/$defs/list"})",
     {R"(null)", R"({"head":1,"tail":null})", R"({"head":1,"tail":{"head":2,"tail":null}})"},
     {R"({"head":1})", R"({"head":1,"tail":{"head":2}})"}},
    {"minLength maxLength",
     R"({"type": "string", "minLength": 2, "maxLength": 3})",
     {R"("ab")", R"("abc")", R"("é😀")", R"("\n\t")", R"("\u00e9x")"},
     {R"("a")", R"("abcd")", R"("")", R"("\ud83d\ude00")"}},
    {"minLength only",
     R"({"type": "string", "minLength": 1})",
     {R"("a")", R"("abcdefgh")"},
     {R"("")"}},
    {"pattern anchored",
     R"({"type": "string", "pattern": "^[a-z]+-\\d{2,3}$"})",
     {R"("abc-12")", R"("x-123")"},
     {R"("abc-1")", R"("ABC-12")", R"("abc-1234")", R"(" abc-12")"}},
    {"pattern unanchored",
     R"({"type": "string", "pattern": "ab+c"})",
     {R"("abc")", R"("xxabbbcyy")", R"("abc\n")", R"("_abc")"},
     {R"("ac")", R"("")", R"("ab")"}},
    {"pattern start anchor only",
     R"({"type": "string", "pattern": "^id-"})",
     {R"("id-")", R"("id-42x")"},
     {R"("xid-")", R"("id")"}},
    {"pattern end anchor only",
     R"({"type": "string", "pattern": "[0-9]$"})",
     {R"("7")", R"("abc7")"},
     {R"("7a")", R"("")"}},
    {"pattern groups",
     R"({"pattern": "^(?:cat|dog)s?$"})",
     {R"("cat")", R"("dogs")"},
     {R"("cats!")", R"("bird")", R"("catdog")"}},
    {"pattern escapes",
     R"({"pattern": "^\\$\\d+(\\.\\d\\d)?$"})",
     {R"("$5")", R"("$12.50")"},
     {R"("5")", R"("$5.5")", R"("$")"}},
    {"pattern negated class",
     R"({"pattern": "^[^\"\\\\]*$"})",
     {R"("abc")", R"("a b")", R"("")"},
     {R"("a\"b")", R"("a\\b")"}},
    {"pattern quote and space classes",
     R"({"pattern": "^say \"\\w+\"\\s\\S$"})",
     {R"("say \"hi\" x")", R"("say \"h_1\"\t!")"},
     {R"("say hi x")", R"("say \"\" x")", R"("say \"hi\"  ")"}},
    {"pattern nullable repetition",
     R"({"pattern": "^(a?b?)*c$"})",
     {R"("c")", R"("abc")", R"("bac")", R"("bbc")"},
     {R"("cc")", R"("ab")"}},
    {"pattern dot and counts",
     R"({"pattern": "^.{2}x{2,}$"})",
     {R"("abxx")", R"("é!xxx")", R"("\"\\xx")"},
     {R"("abx")", R"("\nbxx")"}},
    {"pattern control escape",
     R"({"pattern": "^a\\nb\\x41$"})",
     {R"("a\nbA")"},
     {R"("anbA")", "\"a\nbA\""}},
    {"pattern optional bounded",
     R"({"pattern": "^[A-Z]{1,3}(-[0-9]{0,2})?$"})",
     {R"("A")", R"("ABC-")", R"("AB-12")"},
     {R"("ABCD")", R"("A-123")", R"("")"}},
    {"format date",
     R"({"type": "string", "format": "date"})",
     {R"("2024-02-29")", R"("2000-02-29")", R"("2023-12-31")", R"("0001-01-01")", R"("2023-04-30")"},
     {R"("2023-02-29")", R"("1900-02-29")", R"("2023-13-01")", R"("2023-04-31")", R"("2023-1-01")", R"("0000-01-01")", R"("2023-00-10")"}},
    {"format time",
     R"({"type": "string", "format": "time"})",
     {R"("23:59:59Z")", R"("00:00:00.123+05:30")", R"("12:30:00-08:00")"},
     {R"("24:00:00Z")", R"("12:00:00")", R"("12:60:00Z")", R"("1:00:00Z")"}},
    {"format date-time",
     R"({"type": "string", "format": "date-time"})",
     {R"("2024-01-15T10:20:30Z")", R"("2024-01-15T10:20:30.5+01:00")"},
     {R"("2024-01-15 10:20:30Z")", R"("2024-01-15T10:20Z")"}},
    {"format uuid",
     R"({"type": "string", "format": "uuid"})",
     {R"("123e4567-e89b-12d3-a456-426614174000")", R"("123E4567-E89B-12D3-A456-426614174000")"},
     {R"("123e4567e89b12d3a456426614174000")", R"("g23e4567-e89b-12d3-a456-426614174000")", R"("123e4567-e89b-12d3-a456-42661417400")"}},
    {"format email",
     R"({"type": "string", "format": "email"})",
     {R"("a.b+c@example.com")", R"("x@y.io")"},
     {R"("ab@")", R"("a@b")", R"("@x.com")", R"("a..b@x.com")"}},
    {"format ipv4",
     R"({"type": "string", "format": "ipv4"})",
     {R"("192.168.0.1")", R"("255.255.255.255")", R"("0.0.0.0")"},
     {R"("256.1.1.1")", R"("01.1.1.1")", R"("1.1.1")"}},
    {"integer range",
     R"({"type": "integer", "minimum": -15, "maximum": 120})",
     {R"(-15)", R"(-9)", R"(0)", R"(7)", R"(99)", R"(100)", R"(120)"},
     {R"(-16)", R"(121)", R"(1000)", R"(-100)", R"(-0)"}},
    {"integer exclusive",
     R"({"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 1000})",
     {R"(1)", R"(999)", R"(500)"},
     {R"(0)", R"(1000)", R"(-1)"}},
    {"integer minimum",
     R"({"type": "integer", "minimum": 250})",
     {R"(250)", R"(299)", R"(1000)", R"(123456789)"},
     {R"(249)", R"(99)", R"(-300)"}},
    {"integer maximum",
     R"({"type": "integer", "maximum": -20})",
     {R"(-20)", R"(-21)", R"(-1000)"},
     {R"(-19)", R"(0)", R"(5)"}},
    {"integer fractional bounds",
     R"({"type": "integer", "minimum": 1.5, "maximum": 3.5})",
     {R"(2)", R"(3)"},
     {R"(1)", R"(4)"}},
    {"number bounds inclusive",
     R"({"type": "number", "minimum": 0, "maximum": 1})",
     {R"(0)", R"(0.5)", R"(1)", R"(1.0)", R"(1.00)", R"(0.999)", R"(0.0)"},
     {R"(1.01)", R"(-0.1)", R"(2)", R"(10)", R"(-1)", R"(1.5)"}},
    {"number bounds exclusive",
     R"({"type": "number", "exclusiveMinimum": -2, "exclusiveMaximum": 3})",
     {R"(-1.99)", R"(-1)", R"(0)", R"(2.999)", R"(-1.9999)", R"(2)"},
     {R"(-2)", R"(-2.0)", R"(3)", R"(3.0)", R"(-2.5)", R"(3.01)"}},
    {"number minimum only",
     R"({"type": "number", "minimum": 10})",
     {R"(10)", R"(10.5)", R"(99999.1)", R"(11)"},
     {R"(9.99)", R"(-10)", R"(0)"}},
    {"number negative maximum",
     R"({"type": "number", "maximum": -1.0, "exclusiveMinimum": -100})",
     {R"(-1)", R"(-1.5)", R"(-99.99)", R"(-50)"},
     {R"(-0.5)", R"(0)", R"(-100)", R"(-100.5)", R"(1)"}},
    {"true schema",
     R"(true)",
     {R"(1)", R"({"a":[null]})", R"("x")", R"([true, {"b": -1.5e3}])"},
     {R"()", R"({)"}},
    {"empty schema",
     R"({"description": "anything"})",
     {R"(null)", R"([])", R"({"k":"v"})"},
     {R"(nan)", R"(undefined)"}},
    {"untyped string keywords",
     R"({"maxLength": 2})",
     {R"("ab")"},
     {R"("abc")"}},
    {"nested realistic",
     R"({"type": "object", "properties": {"name": {"type": "string", "minLength": 1}, "age": {"type": "integer", "minimum": 0, "maximum": 150}, "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 2}, "address": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "string", "pattern": "^[0-9]{5}$"}}, "required": ["city"], "additionalProperties": false}, "role": {"enum": ["admin", "user"]}}, "required": ["name", "role"], "additionalProperties": false})",
     {R"({"name":"Al","role":"user"})", R"({"address":{"city":"Paris","zip":"75001"},"age":30,"name":"Al","role":"admin","tags":["a","b"]})", R"({"age": 0, "name": "B", "role": "user", "tags": []})"},
     {R"({"name":"","role":"user"})", R"({"age":151,"name":"Al","role":"user"})", R"({"address":{"zip":"75001"},"name":"Al","role":"user"})", R"({"name":"Al","role":"root"})", R"({"name":"Al","role":"user","tags":["a","b","a"]})", R"({"address":{"city":"P","zip":"7500"},"name":"A","role":"user"})"}},
    {"optional members only",
     R"({"properties": {"x": {"type": "integer"}, "y": {"type": "integer"}, "z": {"type": "integer"}}, "additionalProperties": false})",
     {R"({})", R"({"y":1})", R"({"x":1,"z":3})", R"({"x":1,"y":2,"z":3})"},
     {R"({"x":1,})", R"({,"y":1})", R"({"z":1,"x":2})"}},
    {"names needing escapes",
     R"({"properties": {"a\"b": {"const": 1}, "é/x": {"const": 2}}, "required": ["a\"b"], "additionalProperties": false})",
     {R"({"a\"b":1})", R"({"a\"b":1,"é/x":2})"},
     {R"({"ab":1})", R"({"é/x":2,"a\"b":1})"}},
    {"extra keys never spell a listed name",
     R"({"properties": {"é": {"type": "null"}, "a/b": {"type": "null"}, "ĉ\n": {"type": "null"}}})",
     {R"({"é":null,"a\/c":1})", R"({"\u00e8":1})", R"({"a\/bc":1})", R"({"\u0109\t":1})", R"({"ĉ\nx":1})"},
     {R"({"\u00e9":1})", R"({"\u00E9":1})", R"({"a\/b":1})", R"({"a\u002fb":1})", R"({"\u0109\n":1})", R"({"ĉ\u000a":1})", R"({"\ud83d\ude00":1})"}},
  };
  return table;
}

std::shared_ptr<const Grammar> compile(const json& schema) { return parse_gbnf(json_schema_to_gbnf(schema)); }

TEST(JsonSchema, Table) {
  std::size_t strings = 0;
  for (const SchemaCase& c : cases()) {
    SCOPED_TRACE(c.name);
    std::string gbnf;
    ASSERT_NO_THROW(gbnf = json_schema_to_gbnf(json::parse(c.schema)));
    std::shared_ptr<const Grammar> g;
    ASSERT_NO_THROW(g = parse_gbnf(gbnf)) << gbnf;
    for (const std::string& s : c.good) EXPECT_TRUE(matches(g, s)) << "should accept " << s << "\n" << gbnf;
    for (const std::string& s : c.bad) EXPECT_FALSE(matches(g, s)) << "should refuse " << s << "\n" << gbnf;
    strings += c.good.size() + c.bad.size();
  }
  EXPECT_GE(cases().size(), 40u);
  EXPECT_GE(strings, 150u);
}

struct Refusal {
  const char* schema;
  const char* keyword;
  const char* path;
};

TEST(JsonSchema, RefusedKeywordsNameKeywordAndPath) {
  const std::vector<Refusal> refusals = {
      {R"({"uniqueItems": true})", "uniqueItems", ""},
      {R"({"type": "integer", "multipleOf": 2})", "multipleOf", ""},
      {R"({"not": {"type": "string"}})", "not", ""},
      {R"({"if": {}, "then": {}})", "if", ""},
      {R"({"type": "object", "patternProperties": {"^x": {}}})", "patternProperties", ""},
      {R"({"type": "object", "minProperties": 1})", "minProperties", ""},
      {R"({"type": "object", "maxProperties": 1})", "maxProperties", ""},
      {R"({"dependentRequired": {"a": ["b"]}})", "dependentRequired", ""},
      {R"({"propertyNames": {"maxLength": 3}})", "propertyNames", ""},
      {R"({"type": "array", "contains": {"type": "integer"}})", "contains", ""},
      {R"({"properties": {"a": {"items": {"unevaluatedItems": false}}}})", "unevaluatedItems", "/properties/a/items"},
      {R"({"type": "string", "format": "hostname"})", "format", ""},
      {R"({"properties": {"a": {"type": "string", "pattern": "(?=x)y"}}})", "pattern", "/properties/a"},
      {R"({"type": "string", "pattern": "(?<!x)y"})", "pattern", ""},
      {R"({"type": "string", "pattern": "(a)\\1"})", "pattern", ""},
      {R"({"type": "string", "pattern": "a*?"})", "pattern", ""},
      {R"({"type": "string", "pattern": "a++"})", "pattern", ""},
      {R"({"type": "string", "pattern": "\\bword"})", "pattern", ""},
      {R"({"type": "string", "pattern": "a^b"})", "pattern", ""},
      {R"({"type": "string", "pattern": "a$b"})", "pattern", ""},
      {R"({"type": "string", "pattern": "(?i)abc"})", "pattern", ""},
      {R"({"type": "string", "pattern": "[[:alpha:]]"})", "pattern", ""},
      {R"({"type": "string", "pattern": "(ab"})", "pattern", ""},
      {R"({"type": "string", "pattern": "*a"})", "pattern", ""},
      {R"({"type": "string", "pattern": "[z-a]"})", "pattern", ""},
      {R"({"type": "string", "pattern": "x", "maxLength": 3})", "maxLength", ""},
      {R"({"type": "string", "format": "date", "minLength": 3})", "minLength", ""},
      {R"({"type": "number", "minimum": 0.5})", "minimum", ""},
      {R"({"items": {"type": "number", "exclusiveMaximum": 1.5}})", "exclusiveMaximum", "/items"},
      {R"({"type": "integer", "minimum": 5, "maximum": 1})", "minimum", ""},
      {R"({"type": "integer", "minimum": 1e300})", "minimum", ""},
      {R"({"type": "strin"})", "type", ""},
      {R"({"type": 3})", "type", ""},
      {R"({"$ref": "http://example.com/s.json"})", "$ref", ""},
      {R"({"properties": {"x": {"$ref": "#/$defs/missing"}}})", "$ref", "/properties/x"},
      {R"({"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"})", "$ref", "/$defs/a"},
      {R"({"anyOf": [{"type": "null"}, {"$ref": "#"}]})", "$ref", ""},
      {R"({"allOf": [{"pattern": "a"}, {"pattern": "b"}]})", "allOf", ""},
      {R"({"allOf": [{"type": "string"}, {"type": "integer"}]})", "allOf", ""},
      {R"({"enum": ["a"], "pattern": "a"})", "pattern", ""},
      {R"({"const": {"a": 1}, "properties": {"a": {"type": "string"}}})", "properties", ""},
      {R"({"enum": []})", "enum", ""},
      {R"({"type": "string", "enum": [1, 2]})", "enum", ""},
      {R"({"properties": {"a": false}, "required": ["a"]})", "required", ""},
      {R"({"type": "object", "required": ["a"], "additionalProperties": false})", "required", ""},
      {R"({"type": "object", "required": ["a"], "additionalProperties": {"enum": []}})", "required", ""},
      {R"({"type": "array", "minItems": 3, "maxItems": 2})", "minItems", ""},
      {R"({"prefixItems": [{}], "items": false, "minItems": 2})", "minItems", ""},
      {R"({"type": "string", "minLength": -1})", "minLength", ""},
      {R"({"anyOf": []})", "anyOf", ""},
  };
  for (const Refusal& r : refusals) {
    SCOPED_TRACE(r.schema);
    try {
      json_schema_to_gbnf(json::parse(r.schema));
      ADD_FAILURE() << "converted, should be refused";
    } catch (const SchemaError& e) {
      EXPECT_EQ(e.keyword(), r.keyword) << e.what();
      EXPECT_EQ(e.path(), r.path) << e.what();
      EXPECT_NE(std::string(e.what()).find(e.message()), std::string::npos);
    }
  }
}

TEST(JsonSchema, WholeSchemaRefusals) {
  for (const char* schema : {"false", "3", R"("string")", "[]", R"({"anyOf": [false]})"}) {
    SCOPED_TRACE(schema);
    EXPECT_THROW(json_schema_to_gbnf(json::parse(schema)), SchemaError);
  }
  try {
    json_schema_to_gbnf(json::parse(R"({"properties": {"a": {"items": false, "minItems": 1}}, "required": ["a"]})"));
    ADD_FAILURE();
  } catch (const SchemaError& e) {
    EXPECT_EQ(e.path(), "/properties/a");
    EXPECT_EQ(std::string(e.what()).rfind("at /properties/a: keyword minItems: ", 0), 0u) << e.what();
  }
}

// Which limit a SchemaError names: its text says "(max_...)".
std::string limit_named(const json& schema, const SchemaLimits& limits) {
  try {
    json_schema_to_gbnf(schema, limits);
  } catch (const SchemaError& e) {
    const std::string what = e.what();
    const auto at = what.rfind("max_");
    if (at == std::string::npos) return what;
    auto end = at;
    while (end < what.size() && (std::islower(static_cast<unsigned char>(what[end])) || what[end] == '_')) ++end;
    return what.substr(at, end - at);
  }
  return "no error";
}

TEST(JsonSchema, Limits) {
  const SchemaLimits defaults;
  json deep = {{"type", "integer"}};
  for (int i = 0; i < 70; ++i) deep = {{"type", "object"}, {"properties", {{"a", deep}}}};
  EXPECT_EQ(limit_named(deep, defaults), "max_depth");
  json deep_value = 1;
  for (int i = 0; i < 2000; ++i) deep_value = json::array({std::move(deep_value)});
  EXPECT_EQ(limit_named({{"const", deep_value}}, defaults), "max_depth");
  EXPECT_EQ(limit_named({{"type", "string"}, {"maxLength", 5000}}, defaults), "max_repetition");
  EXPECT_EQ(limit_named({{"type", "array"}, {"minItems", 1001}}, defaults), "max_repetition");
  EXPECT_EQ(limit_named({{"type", "string"}, {"pattern", "^a{2000}$"}}, defaults), "max_repetition");
  EXPECT_EQ(limit_named({{"type", "string"}, {"pattern", std::string(5000, 'a')}}, defaults), "max_pattern_bytes");
  EXPECT_EQ(limit_named({{"type", "string"}, {"pattern", std::string(70, '(') + "a" + std::string(70, ')')}}, defaults), "max_depth");
  json big_enum = json::array();
  for (int i = 0; i < 3000; ++i) big_enum.push_back(std::string(100, 'a') + std::to_string(i));
  EXPECT_EQ(limit_named({{"enum", big_enum}}, defaults), "max_grammar_bytes");
  json many = json::object();
  for (int i = 0; i < 40; ++i) many["p" + std::to_string(i)] = {{"type", "string"}, {"maxLength", 100 + i}};
  EXPECT_EQ(limit_named({{"type", "object"}, {"properties", many}}, defaults), "max_rules");
  SchemaLimits tight;
  tight.max_rules = 10;
  json few = json::object();
  for (int i = 0; i < 12; ++i) few["p" + std::to_string(i)] = {{"type", "integer"}};
  EXPECT_EQ(limit_named({{"type", "object"}, {"properties", few}}, tight), "max_rules");
  EXPECT_EQ(limit_named({{"type", "object"}, {"properties", few}}, defaults), "no error");
  // Within the limits, the grammar compiles under parse_gbnf's default limits.
  json fits = json::object();
  for (int i = 0; i < 5; ++i) fits["p" + std::to_string(i)] = {{"type", "string"}, {"maxLength", 300}};
  EXPECT_NO_THROW(compile({{"type", "object"}, {"properties", fits}}));
}

TEST(JsonSchema, RecursiveTreeNestsDeeply) {
  const auto g = compile(json::parse(R"({
    "$defs": {"node": {"type": "object",
                       "properties": {"label": {"type": "string"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
                       "required": ["label", "kids"], "additionalProperties": false}},
    "$ref": "#/$defs/node"})"));
  std::string text = R"({"kids":[],"label":"leaf"})";
  for (int i = 0; i < 20; ++i) text = R"({"kids":[)" + text + R"(, {"kids":[],"label":"x"}],"label":"n"})";
  EXPECT_TRUE(matches(g, text));
  EXPECT_FALSE(matches(g, text.substr(0, text.size() - 1)));
  EXPECT_FALSE(matches(g, R"({"kids":[{"label":"no kids"}],"label":"n"})"));
}

TEST(JsonSchema, RealisticSchemaCompilesAndIsCompact) {
  const json schema = json::parse(R"({
    "title": "Order", "type": "object",
    "properties": {
      "id": {"type": "string", "format": "uuid"},
      "created": {"type": "string", "format": "date-time"},
      "status": {"enum": ["pending", "paid", "shipped", "cancelled"]},
      "customer": {"type": "object", "properties": {
          "name": {"type": "string", "minLength": 1, "maxLength": 80},
          "email": {"type": "string", "format": "email"},
          "phone": {"type": ["string", "null"], "pattern": "^\\+?[0-9 ]{7,15}$"}},
        "required": ["name", "email"], "additionalProperties": false},
      "lines": {"type": "array", "minItems": 1, "maxItems": 50, "items": {"type": "object", "properties": {
          "sku": {"type": "string", "pattern": "^[A-Z]{3}-\\d{4}$"},
          "quantity": {"type": "integer", "minimum": 1, "maximum": 999},
          "price": {"type": "number"}},
        "required": ["sku", "quantity", "price"], "additionalProperties": false}},
      "notes": {"type": "string"},
      "metadata": {"type": "object", "additionalProperties": {"type": "string"}}},
    "required": ["id", "status", "customer", "lines"], "additionalProperties": false})");
  const std::string gbnf = json_schema_to_gbnf(schema);
  std::shared_ptr<const Grammar> g;
  ASSERT_NO_THROW(g = parse_gbnf(gbnf)) << gbnf;
  EXPECT_LT(gbnf.size(), 8000u) << gbnf;
  // The shared rules appear once.
  EXPECT_EQ(gbnf.find("\nchar ::="), gbnf.rfind("\nchar ::="));
  EXPECT_TRUE(matches(g, R"({"created":"2025-03-01T12:00:00Z","customer":{"email":"a@b.co","name":"Ann","phone":null},)"
                         R"("id":"123e4567-e89b-12d3-a456-426614174000","lines":[{"price":9.5,"quantity":2,"sku":"ABC-1234"}],)"
                         R"("metadata":{"k":"v"},"status":"paid"})"));
  EXPECT_TRUE(matches(g, R"({"customer": {"email": "x@y.org", "name": "B", "phone": "+33 1234567"}, )"
                         R"("id": "123e4567-e89b-12d3-a456-426614174000", "lines": [{"price": 1, "quantity": 999, "sku": "XYZ-0000"}], "status": "pending"})"));
  EXPECT_FALSE(matches(g, R"({"customer":{"email":"a@b.co","name":"Ann"},"id":"123e4567-e89b-12d3-a456-426614174000","lines":[],"status":"paid"})"));
  EXPECT_FALSE(matches(g, R"({"customer":{"email":"a@b.co","name":"Ann"},"id":"x","lines":[{"price":1,"quantity":1,"sku":"ABC-1234"}],"status":"paid"})"));
}

// From an ordered_json (what a request's schema is parsed into), properties come in the schema's order, as
// OpenAI writes them: a model asked for {"reasoning", "answer"} writes its reasoning first.
TEST(JsonSchema, PropertiesFollowTheSchemasOrder) {
  const auto schema = nlohmann::ordered_json::parse(
      R"({"type":"object","properties":{"reasoning":{"type":"string"},"answer":{"type":"integer"}},)"
      R"("required":["reasoning","answer"],"additionalProperties":false})");
  const auto g = parse_gbnf(json_schema_to_gbnf(schema));
  EXPECT_TRUE(matches(g, R"({"reasoning":"why","answer":4})"));
  EXPECT_FALSE(matches(g, R"({"answer":4,"reasoning":"why"})"));
  // A plain nlohmann::json has sorted the keys already: key order is all it can give.
  const auto sorted = parse_gbnf(json_schema_to_gbnf(nlohmann::json::parse(schema.dump())));
  EXPECT_TRUE(matches(sorted, R"({"answer":4,"reasoning":"why"})"));
  // The constraint a request carries keeps the order of its text.
  const auto compiled = compile_constraint(proto::OutputConstraint{proto::OutputConstraint::Kind::json_schema, schema.dump()});
  EXPECT_TRUE(matches(compiled, R"({"reasoning":"why","answer":4})"));
  EXPECT_FALSE(matches(compiled, R"({"answer":4,"reasoning":"why"})"));
}

TEST(JsonSchema, AnyObjectGrammar) {
  const auto g = parse_gbnf(json_object_gbnf());
  for (const char* good : {"{}", R"({"a":1})", R"({"a": {"b": [1, "x", null, true, {"c": -2.5e3}]}, "d": []})"}) {
    EXPECT_TRUE(matches(g, good)) << good;
  }
  for (const char* bad : {"[]", "1", R"({"a":1,})", R"({"a" : 1})", "{'a':1}", "{\"a\":\"\x01\"}"}) {
    EXPECT_FALSE(matches(g, bad)) << bad;
  }
}

// Whitespace is bounded: at most one space after ':' and ',', none elsewhere, so a model cannot loop on it.
TEST(JsonSchema, WhitespaceIsBounded) {
  const auto g = compile(json::parse(R"({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}})"));
  EXPECT_TRUE(matches(g, R"({"a": [1, 2]})"));
  EXPECT_FALSE(GrammarState(g).accept(R"({"a":  )"));
  EXPECT_FALSE(GrammarState(g).accept(R"({"a": [1,  )"));
  EXPECT_FALSE(GrammarState(g).accept("{\"a\":\n"));
}

}  // namespace
}  // namespace loom::compute::grammar
