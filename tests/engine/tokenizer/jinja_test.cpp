// render_jinja against Jinja2 itself: each expected text is what Jinja2 3.1.6 rendered from the
// same template and variables with transformers' settings (ImmutableSandboxedEnvironment,
// trim_blocks, lstrip_blocks, loopcontrols, its tojson and raise_exception), pasted here.
#include "engine/tokenizer/jinja.h"

#include <gtest/gtest.h>

#include <string>

#include "engine/common/error.h"

namespace kvb {
namespace {

using ojson = nlohmann::ordered_json;

ojson variables(const ojson& messages) {
  return {{"messages", messages},          {"tools", nullptr},   {"documents", nullptr},
          {"add_generation_prompt", true}, {"bos_token", "<s>"}, {"eos_token", "</s>"}};
}

// A user message with spaces around it (U+00A0 after it, which trim strips).
ojson one_message() { return ojson::array({{{"role", "user"}, {"content", " Hi\xc2\xa0"}}}); }

ojson four_messages() {
  return ojson::array({{{"role", "system"}, {"content", "Sys "}},
                       {{"role", "user"}, {"content", " Hello"}},
                       {{"role", "assistant"}, {"content", "Hi there"}},
                       {{"role", "user"}, {"content", "Again"}}});
}

std::string render(const std::string& source, const ojson& messages) {
  return render_jinja(source, variables(messages), "test.jinja");
}

// The InputError's message, or "" where it renders.
std::string error_of(const std::string& source) {
  try {
    render(source, one_message());
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// Operators with Python's semantics, literals, str() and repr() of values, methods, filters,
// tests, loops (filtered, else, loop.*, break, continue), namespace, set forms, raw, tojson.
constexpr const char* kExpressionsTemplate = R"J({% set ns = namespace(n=0) %}
{% for m in messages if m.role != 'system' %}
{% set ns.n = ns.n + 1 %}
{{ loop.index }}/{{ loop.length }}{{ ' first' if loop.first }}{{ ' last' if loop.last }} {{ m.role }}: {{ m.content[:3] }}|{{ m.content[-2:] }}|{{ m['content'][::-1] }}
{% else %}
none
{% endfor %}
n={{ ns.n }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 1.5 * 2 }} {{ 1e20 }} {{ 0.0001 }} {{ 1e-5 }} {{ 0.1 + 0.2 }}
{{ [1, 'a', none, true, 2.5] }} {{ {'k': "it's"} }} {{ none }} {{ not_defined }}|{{ "\u00e9\x41\101\t" }}{{ 'multi' "part" }}
{{ 'x' ~ 3 ~ none }} {{ 'bc' in 'abcd' }} {{ 3 not in [1, 2] }} {{ 1 < 2 < 3 }} {{ 'b' > 'a' }} {{ not 0 }} {{ 0 or 'or' }} {{ 1 and 'and' }}
{{ "  pad\t " | trim }}|{{ " a b ".strip() }}|{{ "xxhixx".strip("x") }}|{{ "  l".lstrip() }}|{{ "r  ".rstrip() }}|{{ "a,b,,c".split(",") }} {{ " a  b ".split() }}
{{ "Hello".startswith("He") }} {{ "Hello".endswith("x") }} {{ "aXa".replace("a", "bb") }} {{ "mIxEd".upper() }} {{ "mIxEd" | lower }} {{ "two words" | title }} {{ "two words".capitalize() }}
{{ messages | length }} {{ "héllo" | length }} {{ messages[0].get('missing', 'default') }} {{ messages[0].keys() | list }} {{ [3, 1, 2] | join('-') }} {{ not_defined | default('D') }} {{ '' | default('E', true) }}
{{ none is none }} {{ 3 is odd }} {{ 4 is divisibleby 2 }} {{ 'a' is string }} {{ messages is sequence }} {{ not_defined is not defined }} {{ 2 is equalto 2 }} {{ messages[0] is mapping }}
{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | list }} {{ [1, 2, 3, 4] | select('odd') | list }} {{ ['a', 'b'] | reject('equalto', 'a') | list }} {{ messages | rejectattr('role', 'in', ['user']) | list | length }}
{% for k, v in {'b': 1, 'a': 2}.items() %}{{ k }}={{ v }};{% endfor %} {% for k, v in {'z': 0} | items %}{{ k }}{{ v }}{% endfor %}
{% for i in range(6) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 4 %}{% break %}{% endif %}{{ i }}{% endfor %} {{ range(2, 8, 3) | list }} {{ messages | first | length }} {{ (messages | last).role }}
{% set a, b = [1, 2] %}{{ a + b }} {% set block %}captured {{ 1 + 1 }}{% endset %}{{ block }} {% raw %}{{ not rendered }}{% endraw %}
{{ {'a': [1, 2.0, 'é'], 'b': none} | tojson }} {{ {'a': [1, {'c': true}]} | tojson(indent=2) }}
{{ messages[0] }} {{ messages[5] is defined }} {{ "ab" * 3 }} {{ '42' | int + 1 }} {{ [1] + [2] }}
)J";

// A chat template's shape: a system message taken off the list or a default one, a
// reassigned `messages`, roles checked with raise_exception, the content trimmed.
constexpr const char* kSystemMessageTemplate = R"J({%- if messages[0]['role'] == 'system' %}
    {%- set system = messages[0]['content'] %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system = 'You are a test model.' %}
{%- endif %}
{{- bos_token + '<sys>' + system + '</sys>' }}
{%- for message in messages %}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
        {{- raise_exception('roles must alternate') }}
    {%- endif %}
    {{- '<' + message['role'] + '>' + message['content'] | trim + '</' + message['role'] + '>' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<assistant>' }}
{%- endif %}
)J";

// trim_blocks, lstrip_blocks, "-" and "+" at tags, a comment, the source's last newline.
TEST(Jinja, WhitespaceAsTransformersJinja) {
  const std::string source = R"J({% if true %}
  {% for m in messages %}
    {{ m.role }}:{{ m.content|trim }}|
  {% endfor %}
{% endif %}
{#- a comment -#}
  {{- " end" }}
{%+ if true %}kept{% endif +%}
  {# an indented comment #}
tail {{- "  " -}}   x
)J";
  EXPECT_EQ(render(source, one_message()),
            "    user:Hi|\n"
            " end\n"
            "kept\n"
            "tail  x");
}

TEST(Jinja, ExpressionsStatementsAndFiltersAsJinja) {
  EXPECT_EQ(render(kExpressionsTemplate, four_messages()),
            "1/3 first user:  He|lo|olleH \n"
            "2/3 assistant: Hi |re|ereht iH\n"
            "3/3 last user: Aga|in|niagA\n"
            "n=3 3 -4 2 3.5 1024 3.0 1e+20 0.0001 1e-05 0.30000000000000004\n"
            "[1, 'a', None, True, 2.5] {'k': \"it's\"} None |\xc3\xa9"
            "AA\tmultipart\n"
            "x3None True True True True True or and\n"
            "pad|a b|hi|l|r|['a', 'b', '', 'c'] ['a', 'b']\n"
            "True False bbXbb MIXED mixed Two Words Two words\n"
            "4 5 default ['role', 'content'] 3-1-2 D E\n"
            "True True True True True True True True\n"
            "[' Hello', 'Again'] [1, 3] ['b'] 2\n"
            "b=1;a=2; z0023 [2, 5] 2 user\n"
            "3 captured 2 {{ not rendered }}{\"a\": [1, 2.0, \"\xc3\xa9"
            "\"], \"b\": null} {\n"
            "  \"a\": [\n"
            "    1,\n"
            "    {\n"
            "      \"c\": true\n"
            "    }\n"
            "  ]\n"
            "}\n"
            "{'role': 'system', 'content': 'Sys '} False ababab 43 [1, 2]");
}

TEST(Jinja, AChatTemplateWithADefaultSystemMessage) {
  const std::string source = kSystemMessageTemplate;  // rendered three times
  EXPECT_EQ(render(source, one_message()),
            "<s><sys>You are a test model.</sys><user>Hi</user><assistant>");
  EXPECT_EQ(render(source, four_messages()),
            "<s><sys>Sys </sys><user>Hello</user><assistant>Hi "
            "there</assistant><user>Again</user><assistant>");
  ojson two_users =
      ojson::array({{{"role", "user"}, {"content", "a"}}, {{"role", "user"}, {"content", "b"}}});
  try {
    render(source, two_users);
    ADD_FAILURE() << "raise_exception did not raise";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "test.jinja: line 10: the template raised: roles must alternate");
  }
}

// Jinja2's scopes (each loop iteration, a loop's else, a set block), loop.previtem/nextitem,
// raw blocks under trim_blocks and lstrip_blocks, "+#}", Python's bool as a number, Jinja2's
// title and int filters, Unicode spaces at "-": each expected text is Jinja2's.
TEST(Jinja, ScopesRawBlocksAndPythonValuesAsJinja) {
  EXPECT_EQ(render("{% for m in messages if m.role == 'system' %}{% set sys = m.content %}"
                   "{% else %}{% set sys = 'default' %}{% endfor %}<<{{ sys }}>>",
                   one_message()),
            "<<>>");
  EXPECT_EQ(render("{% for i in range(2) %}{% if i == 0 %}{% set first = 'F' %}{% endif %}"
                   "{{ first | default('-') }}{% endfor %}",
                   one_message()),
            "F-");
  EXPECT_EQ(render("{% set y %}{% set x = 2 %}{% endset %}[{{ x }}]", one_message()), "[]");
  EXPECT_EQ(render("{% for i in range(3) %}{{ loop.previtem | default('-') }}"
                   "{{ loop.nextitem | default('-') }};{% endfor %}",
                   one_message()),
            "-1;02;1-;");
  EXPECT_EQ(render("{% raw %}\n<tools>{% endraw %}|{% raw %}abc\n    {% endraw %}\nY|{# c +#}\nx",
                   one_message()),
            "\n<tools>|abc\nY|\nx");
  EXPECT_EQ(render("{{ true == 1 }} {{ 1 in [true] }} {{ true is number }} "
                   "{{ undefined_name is iterable }} {{ 1.0 == 1 }}",
                   one_message()),
            "True True True True True");
  EXPECT_EQ(render("{{ \"hello's a1b-c(d\" | title }} {{ '12abc' | int }} {{ '1e3' | int }} "
                   "{{ true | int }} {{ ' 1_000 ' | int }} {{ 2.9 | int }} {{ -7 % 3 }} "
                   "{{ 7 % -3 }}",
                   one_message()),
            "Hello's A1b-C(D 0 1000 1 1000 2 2 -2");
  EXPECT_EQ(render("a\xe3\x80\x80{{- 'b' }}\xe3\x80\x80{%- if true %}c{% endif %}", one_message()),
            "abc");
}

// What the subset leaves out, and the template's own errors, are refused naming the line.
TEST(Jinja, UnsupportedSyntaxAndTemplateErrorsAreRefused) {
  EXPECT_EQ(error_of("a\n{% macro m() %}x{% endmacro %}"),
            "test.jinja: line 2: {% macro %} is not supported (kvbench renders chat templates with "
            "if, for, set, break, continue, raw and generation)");
  EXPECT_EQ(error_of("{{ messages | batch(2) }}"),
            "test.jinja: line 1: the filter 'batch' is not supported");
  EXPECT_EQ(error_of("{{ 1 is prime }}"), "test.jinja: line 1: the test 'prime' is not supported");
  // strftime_now is left undefined: a prompt must not change with the day.
  EXPECT_EQ(error_of("{{ strftime_now('%d %b %Y') }}"),
            "test.jinja: line 1: 'strftime_now' is undefined");
  EXPECT_EQ(render("{{ strftime_now('%Y') if strftime_now is defined else '26 Jul 2024' }}",
                   one_message()),
            "26 Jul 2024");
  EXPECT_EQ(error_of("{% for m in messages %}{{ m.missing.deeper }}{% endfor %}"),
            "test.jinja: line 1: 'missing' is undefined (reading .deeper)");
  EXPECT_EQ(error_of("{{ 'a' + 1 }}"), "test.jinja: line 1: unsupported operands for +: 'a' and 1");
  EXPECT_EQ(error_of("{% if true %}open"),
            "test.jinja: line 1: expected {% endif %} before the template's end");
  EXPECT_EQ(error_of("{{ 'unclosed }}"), "test.jinja: line 1: a string is not closed");
  EXPECT_EQ(error_of("{{ 99999999999999999999 }}"),
            "test.jinja: line 1: 99999999999999999999: kvbench's integers are 64-bit");
  EXPECT_EQ(error_of("{{ 2 ** 63 }}"), "test.jinja: line 1: an integer beyond 64 bits");
  EXPECT_EQ(error_of("{{ " + std::string(1000, '(') + "1" + std::string(1000, ')') + " }}"),
            "test.jinja: line 1: nested too deeply");
  std::string chain = "{{ 1";
  for (int i = 0; i < 5000; ++i) chain += " + 1";
  EXPECT_EQ(error_of(chain + " }}"), "test.jinja: line 1: an expression nested too deeply");
  EXPECT_EQ(error_of("{% break %}"), "test.jinja: line 1: break or continue outside a loop");
  // Arguments kvbench does not read are refused, not ignored.
  EXPECT_EQ(error_of("{{ 'a b c'.split(' ', 1) }}"),
            "test.jinja: line 1: .split takes 0 to 1 positional argument(s) here");
  EXPECT_EQ(error_of("{{ 'x' | trim('x') }}"),
            "test.jinja: line 1: trim takes 0 positional argument(s) here");
  EXPECT_EQ(error_of("{{ messages | tojson(sort_keys=true) }}"),
            "test.jinja: line 1: tojson takes indent= alone here");
  // Jinja2's sandbox range limit, and what would run out of memory or time.
  EXPECT_EQ(error_of("{% for i in range(100001) %}{% endfor %}"),
            "test.jinja: line 1: a range longer than 100000 (Jinja2's sandbox limit)");
  EXPECT_EQ(error_of("{% set ns = namespace(s='ab') %}{% for i in range(64) %}"
                     "{% set ns.s = ns.s ~ ns.s %}{% endfor %}"),
            "test.jinja: line 1: too long a text");
  EXPECT_EQ(
      error_of("{% for i in range(100000) %}{% for j in range(10) %}{% endfor %}{% endfor %}"),
      "test.jinja: line 1: the template runs too long");
  // What Python would print otherwise: a function, a character it escapes (U+200B).
  EXPECT_EQ(error_of("{{ 'abc'.upper }}"),
            "test.jinja: line 1: printing a function is not supported");
  EXPECT_EQ(error_of("{{ ['\xe2\x80\x8b'] }}"),
            "test.jinja: line 1: repr of a text holding U+200B is not supported");
}

// Every cut of a template either renders or is an InputError: no other exception, no crash.
TEST(Jinja, EveryPrefixOfATemplateRendersOrIsRefused) {
  const std::string source = std::string(kSystemMessageTemplate) + kExpressionsTemplate;
  for (size_t n = 0; n <= source.size(); ++n) {
    try {
      render(source.substr(0, n), four_messages());
    } catch (const InputError&) {
    }
  }
}

}  // namespace
}  // namespace kvb
