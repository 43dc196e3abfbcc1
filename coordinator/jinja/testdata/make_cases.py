#!/usr/bin/env python3
"""Writes cases.json: small (template, input) cases rendered by Python's jinja2 exactly as
transformers sets it up (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks,
loopcontrols, {% generation %}, its tojson/raise_exception/strftime_now), for
coordinator/jinja/template_test.cc to demand byte-exact equality with.

    python3 coordinator/jinja/testdata/make_cases.py   # from the repository root (jinja2 3.1)

Each case is {"name", "template", "input", "expected"} or, where jinja2 raises,
{"name", "template", "input", "error_contains", "error_line"}: error_contains is the
exception's message (or the case's own `error_contains`, which must then be part of it) and
error_line the template line jinja2 reports. Object addresses in reprs (" at 0x7f...") are
removed from the expectations: they change from run to run, and the interpreter leaves them out.
"""
import datetime
import json
import os
import re
import sys
import traceback

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment

# strftime_now's clock in the tests (C++: absl::FromCivil(2026-01-02 03:04:05, UTC)).
NOW = datetime.datetime(2026, 1, 2, 3, 4, 5)


class AssistantTracker(Extension):
    """transformers' {% generation %}: renders its body (the mask bookkeeping is not needed)."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_generation_support"), [], [], body).set_lineno(
            lineno)

    @jinja2.pass_eval_context
    def _generation_support(self, context, caller):
        return caller()


def make_environment():
    """transformers.utils.chat_template_utils._compile_jinja_template's environment."""

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(format):
        return NOW.strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[AssistantTracker, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


CASES = []


def case(name, template, input=None, error_contains=None):
    CASES.append({"name": name, "template": template, "input": input or {},
                  "error_contains": error_contains})


# ---------------------------------------------------------------------------------------------
# Output of values
MSGS = [{"role": "system", "content": "You are helpful."},
        {"role": "user", "content": "Hi <|im_end|> there"},
        {"role": "assistant", "content": "Hello!"},
        {"role": "user", "content": "  2+2?\n"}]

case("text_only", "hello world")
case("trailing_newline_dropped", "hello\n")
case("two_trailing_newlines", "hello\n\n")
case("crlf", "a\r\nb\r\n{{ 'x' }}\r\n")
case("lone_cr", "a\rb{{ 1 }}\r")
case("print_int", "{{ 42 }}|{{ -7 }}|{{ 0 }}")
case("print_float", "{{ 1.0 }}|{{ 0.1 }}|{{ 1e-5 }}|{{ 1e16 }}|{{ 1e15 }}|{{ 2.5e-7 }}|{{ 123456789.125 }}")
case("print_float_arith", "{{ 0.1 + 0.2 }}|{{ 10 / 4 }}|{{ 10 / 5 }}|{{ 1 / 3 }}|{{ 2 ** 0.5 }}")
case("print_bool_none", "{{ true }}|{{ False }}|{{ none }}|{{ None }}")
case("print_list", "{{ [1, 'a', true, none, 1.5, [2], {'k': 'v'}] }}")
case("print_tuple", "{{ (1,) }}|{{ () }}|{{ (1, 'b') }}|{{ 1, 2 }}")
case("print_dict", "{{ {'a': 1, 'b': [true, none, 'x']} }}")
case("print_str_quotes", "{{ [\"it's\", 'say \"hi\"', 'both \\' \"', 'tab\\there', 'nl\\n', '\\x01', '\\\\'] }}")
case("print_unicode_repr", "{{ ['한국어', 'é', '\\u00a0', '\\u200b', '😀', '\\x7f', '\\u2028'] }}")
case("print_input_values", "{{ x }}|{{ y }}|{{ z }}|{{ n }}|{{ l }}|{{ d }}",
     {"x": "str", "y": 3, "z": 2.0, "n": None, "l": [1, "a"], "d": {"q": [1.5, False]}})
case("print_undefined", "[{{ nothing }}]")
case("print_undefined_in_list", "{{ [nothing] }}")
case("print_range", "{{ range(3) }}|{{ range(1, 10, 2) }}|{{ range(5)[1:3] }}")
case("print_namespace", "{% set ns = namespace(a=1, b='x') %}{{ ns }}")
case("print_loop", "{% for x in [1, 2] %}{{ loop }} {% endfor %}")
case("print_items_view", "{{ {'a': 1}.items() }}|{{ {'a': 1}.keys() }}|{{ {'a': 1}.values() }}")
case("print_macro", "{% macro m() %}{% endmacro %}{{ m }}")
case("string_literal_escapes", "{{ 'a\\tb\\nc\\\\d\\'e\\\"f\\x41\\u00e9\\101\\q' }}")
case("string_literal_concat", "{{ 'a' 'b' \"c\" }}")
case("string_literal_non_ascii", "{{ 'héllo' }}|{{ '\\é' }}")
case("integer_literals", "{{ 0x1F }}|{{ 0o17 }}|{{ 0b101 }}|{{ 1_000 }}|{{ 00 }}|{{ 0_0 }}")
case("syn_integer_leading_zero", "{{ 007 }}", error_contains="expected token 'end of print statement', got 'integer'")
case("float_literals", "{{ 1.5e3 }}|{{ 1_0.5 }}|{{ 2E-2 }}|{{ 3.0 }}")

# ---------------------------------------------------------------------------------------------
# Whitespace control
case("ws_trim_blocks", "{% if true %}\nyes\n{% endif %}\nafter")
case("ws_lstrip_blocks", "  {% if true %}\n  yes\n  {% endif %}\nafter")
case("ws_lstrip_not_variable", "  {{ 'v' }}\n  {% if true %}x{% endif %}")
case("ws_minus_both", "a  \n  {%- if true -%}  \n  b  \n  {%- endif -%}  \n  c")
case("ws_minus_variable", "a \n {{- 'b' -}} \n c")
case("ws_plus_disables_lstrip", "  {%+ if true %}x{% endif %}")
case("ws_plus_end_disables_trim", "{% if true +%}\nx{% endif %}")
case("ws_comment", "a\n  {# comment #}\nb\n{#- trimmed -#}\n  c")
case("ws_comment_plus", "  {#+ c #}\nx")
case("ws_lstrip_middle_of_line", "x  {% if true %}y{% endif %}")
case("ws_lstrip_tab", "\t{% if true %}y{% endif %}")
case("ws_trim_only_one_newline", "{% if true %}\n\nx{% endif %}")
case("ws_for_lines", "{% for m in ms %}\n  {{ m }}\n{% endfor %}\n", {"ms": ["a", "b"]})
case("ws_raw", "{% raw %}{{ not evaluated }}{% endraw %}")
case("ws_raw_strip", "a  {%- raw -%}  {{ x }}  {%- endraw -%}  b")
case("ws_raw_newline", "{% raw %}\nx\n{% endraw %}\ny")
case("ws_raw_lstrip", "  {% raw %}x{% endraw %}")
case("ws_set_block", "{% set x %}\n  inner\n{% endset %}[{{ x }}]")
case("ws_unicode_space_strip", "a\u00a0{%- if true %}b{% endif %}")
case("ws_line_start_after_block", "{% if true %}\n  {% if true %}x{% endif %}\n{% endif %}")
case("ws_comment_at_end", "abc{#")
case("ws_variable_end_no_trim", "{{ 'a' }}\nb")
case("ws_nested_trim", "<{%- for i in range(2) -%}\n  [{{ i }}]\n{%- endfor -%}>")
case("ws_mixed_lines", "Hello\n  {%- if true %}\n    World\n  {% endif -%}\n!")

# ---------------------------------------------------------------------------------------------
# Expressions and operators
case("arith_int", "{{ 7 + 3 }}|{{ 7 - 10 }}|{{ 7 * 3 }}|{{ 7 // 2 }}|{{ -7 // 2 }}|{{ 7 % 3 }}|{{ -7 % 3 }}|{{ 7 % -3 }}|{{ 2 ** 10 }}|{{ 2 ** -1 }}")
case("arith_float", "{{ 7.5 // 2 }}|{{ -7.5 % 2 }}|{{ 7.0 * 2 }}|{{ 1 + 1.5 }}|{{ 5 / 2 }}|{{ -0.0 }}")
case("arith_bool", "{{ true + 1 }}|{{ true * 3 }}|{{ -true }}|{{ false - true }}")
case("pow_left_assoc", "{{ 2 ** 3 ** 2 }}|{{ -2 ** 2 }}")
case("unary_minus_filter", "{{ -3|abs }}|{{ -(3|abs) }}")
case("precedence", "{{ 1 + 2 * 3 }}|{{ (1 + 2) * 3 }}|{{ 'a' ~ (1 + 2) }}|{{ 2 * 3 ~ 4 }}|{{ 'a' ~ 'b' + 'c' }}")
case("err_concat_binds_tighter", "{{ 'a' ~ 1 + 2 }}", error_contains='can only concatenate str (not "int") to str')
case("err_precedence_concat", "{{ 1 + 2 ~ 3 }}", error_contains="unsupported operand type(s) for +: 'int' and 'str'")
case("string_ops", "{{ 'ab' + 'cd' }}|{{ 'ab' * 3 }}|{{ 3 * 'x' }}|{{ 'ab' * 0 }}|{{ 'a' * -1 }}")
case("list_ops", "{{ [1] + [2, 3] }}|{{ [0] * 3 }}|{{ (1,) + (2,) }}")
case("concat_tilde", "{{ 'a' ~ 1 ~ none ~ true ~ [1] ~ nothing ~ 1.5 }}")
case("compare", "{{ 1 < 2 }}|{{ 2 <= 2 }}|{{ 'a' < 'b' }}|{{ [1, 2] < [1, 3] }}|{{ 1 == 1.0 }}|{{ 1 != 2 }}|{{ 'a' == 'a' }}|{{ none == none }}|{{ 1 == '1' }}")
case("compare_chain", "{{ 1 < 2 < 3 }}|{{ 1 < 3 < 2 }}|{{ 3 > 2 == 2 }}")
case("in_ops", "{{ 'a' in 'cat' }}|{{ 2 in [1, 2] }}|{{ 'k' in {'k': 1} }}|{{ 3 not in [1] }}|{{ 'z' not in 'abc' }}|{{ 1 in (1, 2) }}|{{ 'x' in nothing }}")
case("and_or_values", "{{ 0 or 'x' }}|{{ 'a' and 'b' }}|{{ '' and 'b' }}|{{ none or none }}|{{ [] or [1] }}|{{ 1 and 0 }}")
case("not_ops", "{{ not true }}|{{ not 0 }}|{{ not [] }}|{{ not nothing }}|{{ not 'x' }}")
case("condexpr", "{{ 'y' if true else 'n' }}|{{ 'y' if false else 'n' }}|[{{ 'y' if false }}]|{{ 1 if 0 else 2 if 1 else 3 }}")
case("condexpr_undefined_use", "{{ ('y' if false).x }}", error_contains="the inline if-expression on line 1 evaluated to false and no else section was defined.")
case("is_tests_basic", "{{ x is defined }}|{{ y is defined }}|{{ y is undefined }}|{{ none is none }}|{{ 1 is number }}|{{ true is number }}|{{ true is boolean }}|{{ 1 is integer }}|{{ true is integer }}|{{ 1.0 is float }}|{{ 'a' is string }}|{{ {} is mapping }}",
     {"x": 1})
case("is_tests_seq", "{{ [] is sequence }}|{{ 'a' is sequence }}|{{ {} is sequence }}|{{ 1 is sequence }}|{{ nothing is sequence }}|{{ [] is iterable }}|{{ 1 is iterable }}|{{ nothing is iterable }}|{{ {}.items() is sequence }}")
case("is_tests_numbers", "{{ 3 is odd }}|{{ 4 is even }}|{{ 9 is divisibleby 3 }}|{{ 9 is divisibleby(2) }}|{{ 3.0 is odd }}|{{ -3 is odd }}")
case("is_tests_compare", "{{ 1 is eq 1 }}|{{ 1 is equalto 2 }}|{{ 1 is ne 2 }}|{{ 1 is lt 2 }}|{{ 1 is le 1 }}|{{ 2 is gt 1 }}|{{ 2 is ge 3 }}|{{ 2 is greaterthan 1 }}|{{ 2 is lessthan 1 }}")
case("is_tests_sameas", "{{ false is sameas false }}|{{ 0 is sameas false }}|{{ none is sameas none }}|{{ x is sameas x }}|{{ true is true }}|{{ 1 is true }}|{{ false is false }}",
     {"x": [1]})
case("is_tests_case", "{{ 'abc' is lower }}|{{ 'aBc' is lower }}|{{ 'ABC' is upper }}|{{ '1' is upper }}|{{ 'É' is upper }}")
case("is_tests_misc", "{{ 2 is in [1, 2] }}|{{ 'upper' is filter }}|{{ 'nope' is filter }}|{{ 'odd' is test }}|{{ range is callable }}|{{ 1 is callable }}|{{ nothing is callable }}|{{ 'x' is escaped }}")
case("is_not", "{{ x is not none }}|{{ x is not defined }}|{{ 1 is not divisibleby 2 }}", {"x": None})
case("test_chain_and", "{{ x is defined and x is string }}|{{ y is defined and y.z }}", {"x": "s"})
case("attr_vs_item", "{{ d.a }}|{{ d['a'] }}|{{ d.items is callable }}|{{ d['items'] }}|{{ l.0 }}|{{ l[1] }}|{{ l[-1] }}",
     {"d": {"a": 1, "items": "x"}, "l": [5, 6, 7]})
case("missing_attr_prints_empty", "[{{ d.nope }}][{{ l[10] }}][{{ n.x }}][{{ d['nope'] }}][{{ s.nope }}]",
     {"d": {}, "l": [1], "n": None, "s": "str"})
case("missing_attr_chain_error", "{{ d.nope.deeper }}", {"d": {}},
     error_contains="'dict object' has no attribute 'nope'")
case("missing_index_chain_error", "{{ l[10].x }}", {"l": [1]}, error_contains="list object has no element 10")
case("undefined_attr_error", "{{ nothing.attr }}", error_contains="'nothing' is undefined")
case("undefined_item_error", "{{ nothing[0] }}", error_contains="'nothing' is undefined")
case("none_attr_then_attr", "{{ n.a.b }}", {"n": None}, error_contains="'None' has no attribute 'a'")
case("slicing", "{{ s[1:3] }}|{{ s[::-1] }}|{{ s[-2:] }}|{{ s[:-1] }}|{{ s[::2] }}|{{ l[1:] }}|{{ l[::-1] }}|{{ l[5:] }}|{{ t[1:] }}|{{ s[10:] }}",
     {"s": "hello", "l": [1, 2, 3], "t": [1, 2]})
case("slicing_unicode", "{{ s[0] }}|{{ s[1:] }}|{{ s[-1] }}|{{ s|length }}|{{ s[::-1] }}", {"s": "한국어😀"})
case("index_str", "{{ s[0] }}{{ s[-1] }}{{ s[1] }}", {"s": "abc"})
case("dict_literal_order", "{{ {'b': 1, 'a': 2, 'b': 3} }}")
case("dict_numeric_keys", "{{ {1: 'a', 1.0: 'b', true: 'c'} }}|{{ {1: 'x'}[true] }}")
case("list_trailing_comma", "{{ [1, 2,] }}|{{ {'a': 1,} }}|{{ (1, 2,) }}")
case("nested_data", "{{ d.a.b[0].c }}", {"d": {"a": {"b": [{"c": "deep"}]}}})
case("getattr_integer_dot", "{{ l.0.1 }}", {"l": [[1, 2]]})
case("dict_get_methods", "{{ d.get('a') }}|{{ d.get('z') }}|{{ d.get('z', 5) }}|{{ d.keys()|list }}|{{ d.values()|list }}|{{ d.items()|list }}",
     {"d": {"a": 1, "b": 2}})
case("dict_iteration_order", "{% for k in d %}{{ k }}{% endfor %}|{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}",
     {"d": {"z": 1, "a": 2, "m": 3}})

# ---------------------------------------------------------------------------------------------
# Statements
case("if_elif_else", "{% for x in [1, 2, 3] %}{% if x == 1 %}one{% elif x == 2 %}two{% else %}other{% endif %},{% endfor %}")
case("for_loop_vars", "{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}")
case("for_prev_next", "{% for x in [1, 2, 3] %}{{ loop.previtem }}<{{ x }}>{{ loop.nextitem }}|{% endfor %}")
case("for_cycle", "{% for x in range(5) %}{{ loop.cycle('a', 'b') }}{% endfor %}")
case("for_changed", "{% for x in [1, 1, 2, 2, 1] %}{{ loop.changed(x) }},{% endfor %}")
case("for_depth", "{% for x in [1] %}{{ loop.depth }}{{ loop.depth0 }}{% endfor %}")
case("for_else", "{% for x in [] %}x{% else %}empty{% endfor %}|{% for x in [1] %}x{% else %}empty{% endfor %}")
case("for_filter", "{% for x in range(10) if x is odd %}{{ x }}{{ loop.index }}{{ loop.length }},{% endfor %}")
case("for_filter_else", "{% for x in [1, 2] if x > 5 %}{{ x }}{% else %}none{% endfor %}")
case("for_unpack", "{% for a, b in [(1, 2), (3, 4)] %}{{ a }}-{{ b }};{% endfor %}")
case("for_unpack_parens", "{% for (a, b) in [[1, 2]] %}{{ a }}{{ b }}{% endfor %}")
case("for_unpack_error", "{% for a, b in [(1, 2, 3)] %}{% endfor %}", error_contains="too many values to unpack (expected 2)")
case("for_unpack_error_few", "{% for a, b, c in [(1, 2)] %}{% endfor %}", error_contains="not enough values to unpack (expected 3, got 2)")
case("for_over_string", "{% for c in 'hé' %}[{{ c }}]{% endfor %}")
case("for_over_dict", "{% for k in {'a': 1, 'b': 2} %}{{ k }}{% endfor %}")
case("for_over_undefined", "{% for x in nothing %}x{% else %}empty{% endfor %}")
case("for_over_none", "{% for x in n %}{% endfor %}", {"n": None}, error_contains="'NoneType' object is not iterable")
case("for_over_int", "{% for x in 5 %}{% endfor %}", error_contains="'int' object is not iterable")
case("for_break_continue", "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}")
case("for_break_nested", "{% for x in range(3) %}{% for y in range(3) %}{% if y == 1 %}{% break %}{% endif %}{{ x }}{{ y }} {% endfor %}{% endfor %}")
case("for_nested_loop_var", "{% for x in [1, 2] %}{% for y in [3] %}{{ loop.index }}{% endfor %}{{ loop.index }}{% endfor %}")
case("for_scope_set", "{% set count = 0 %}{% for i in range(3) %}{% set count = count + 1 %}{{ count }}{% endfor %}|{{ count }}")
case("for_scope_per_iteration", "{% for i in range(3) %}[{{ seen }}]{% set seen = i %}{% endfor %}")
case("for_scope_var_leak", "{% for i in range(2) %}{% set inner = i %}{% endfor %}[{{ inner }}][{{ i }}]")
case("for_loop_var_shadow", "{% set x = 'outer' %}{% for x in [1] %}{{ x }}{% endfor %}{{ x }}")
case("for_recursive", "{% for item in tree recursive %}[{{ item.name }}{% if item.children %}:{{ loop(item.children) }}{% endif %}]{% endfor %}",
     {"tree": [{"name": "a", "children": [{"name": "b", "children": [{"name": "c"}]}, {"name": "d"}]}, {"name": "e"}]})
case("for_recursive_depth", "{% for item in tree recursive %}{{ loop.depth }}{% if item.c %}{{ loop(item.c) }}{% endif %}{% endfor %}",
     {"tree": [{"c": [{"c": [{}]}]}, {}]})
case("for_generator_length", "{% for x in [1, 2, 3]|select('odd') %}{{ loop.length }}{% endfor %}")
case("for_tuple_iter", "{% for x in 1, 2 %}{{ x }}{% endfor %}")
case("if_scope_leaks", "{% if true %}{% set x = 5 %}{% endif %}{{ x }}")
case("set_tuple", "{% set a, b = 1, 2 %}{{ a }}{{ b }}|{% set c, d = 'xy' %}{{ c }}{{ d }}")
case("set_block", "{% set x %}Hello {{ name }}{% endset %}[{{ x }}]", {"name": "Bob"})
case("set_block_filter", "{% set x | upper %}hello{% endset %}{{ x }}")
case("set_block_filter_chain", "{% set x | trim | upper %}  hi  {% endset %}[{{ x }}]")
case("namespace_basic", "{% set ns = namespace(found=false, n=0) %}{% for x in [1, 2, 3] %}{% set ns.n = ns.n + x %}{% if x == 2 %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.found }} {{ ns.n }}")
case("namespace_dict_arg", "{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }}{{ ns['a'] }}[{{ ns.c }}]")
case("namespace_set_new_attr", "{% set ns = namespace() %}{% set ns.x = 'v' %}{{ ns.x }}")
case("namespace_non_namespace", "{% set d = {} %}{% set d.x = 1 %}", error_contains="cannot assign attribute on non-namespace object")
case("with_block", "{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}]")
case("with_outer_values", "{% set a = 5 %}{% with a = a + 1 %}{{ a }}{% endwith %}{{ a }}")
case("macro_basic", "{% macro greet(name, greeting='Hello') %}{{ greeting }}, {{ name }}!{% endmacro %}{{ greet('Ann') }} {{ greet('Bo', 'Hi') }} {{ greet(greeting='Yo', name='Cy') }}")
case("macro_missing_arg", "{% macro m(a, b) %}[{{ a }}][{{ b }}]{% endmacro %}{{ m(1) }}")
case("macro_default_refers_arg", "{% macro m(a, b=a * 2) %}{{ a }}{{ b }}{% endmacro %}{{ m(3) }}")
case("macro_varargs_kwargs", "{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, x=4) }}")
case("macro_too_many_args", "{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", error_contains="macro 'm' takes not more than 1 argument(s)")
case("macro_unknown_kwarg", "{% macro m(a) %}{% endmacro %}{{ m(b=1) }}", error_contains="macro 'm' takes no keyword argument 'b'")
case("macro_caller", "{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}bold {{ 1 + 1 }}{% endcall %}")
case("macro_caller_args", "{% macro each(items) %}{% for i in items %}{{ caller(i) }}{% endfor %}{% endmacro %}{% call(x) each([1, 2]) %}<{{ x }}>{% endcall %}")
case("macro_sees_globals", "{% macro m() %}{{ g }}{% endmacro %}{{ m() }}", {"g": "global"})
case("macro_sees_later_set", "{% set v = 1 %}{% macro m() %}{{ v }}{% endmacro %}{% set v = 2 %}{{ m() }}")
case("macro_scope_isolated", "{% macro m() %}{% set z = 1 %}{{ z }}{% endmacro %}{{ m() }}[{{ z }}]")
case("macro_recursion", "{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(5) }}")
case("macro_returns_string", "{% macro m() %}ab{% endmacro %}{{ m() | upper }}{{ m() ~ 'c' }}{{ m()|length }}")
case("macro_in_loop", "{% macro item(x) %}<{{ x }}>{% endmacro %}{% for x in [1, 2] %}{{ item(x) }}{% endfor %}")
case("macro_call_kw_caller_unused", "{% macro m() %}x{% endmacro %}{% call m() %}y{% endcall %}",
     error_contains="macro 'm' was invoked with two values for the special caller argument")
case("filter_block", "{% filter upper %}hello {{ 'world' }}{% endfilter %}")
case("filter_block_args", "{% filter replace('a', 'o') %}banana{% endfilter %}")
case("generation_block", "{% for m in ms %}{% if m.role == 'assistant' %}{% generation %}{{ m.content }}{% endgeneration %}{% else %}{{ m.content }}{% endif %}|{% endfor %}",
     {"ms": MSGS})
case("block_statement", "a{% block body %}B{{ 1 }}{% endblock %}c")
case("print_statement", "{% print 'x', 1 %}")
case("comment_multiline", "a{# line1\nline2 #}b")
case("raise_exception", "{% if true %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}",
     error_contains="Only user and assistant roles are supported!")
case("raise_exception_line", "ok\n\n{{ raise_exception('boom: ' ~ 3) }}", error_contains="boom: 3")
case("strftime_now", "{{ strftime_now('%Y-%m-%d %H:%M:%S') }}|{{ strftime_now('%d %b %Y') }}|{{ strftime_now('%B %A %a %j %I %p %y') }}|{{ strftime_now('%-d %-m') }}|[{{ strftime_now('%Z%z') }}]")

# ---------------------------------------------------------------------------------------------
# Filters
S = {"s": "  Hello World  ", "w": "hello wORLD-foo bar(baz) [qux] <x>", "u": "ß straße İstanbul ǆ ΣΑΣ"}
case("f_trim", "[{{ s|trim }}][{{ s|trim('Hd ') }}][{{ 'xxaxx'|trim('x') }}]", S)
case("f_upper_lower", "{{ s|upper }}|{{ s|lower }}|{{ u|upper }}|{{ u|lower }}", S)
case("f_capitalize", "{{ w|capitalize }}|{{ u|capitalize }}|{{ ''|capitalize }}", S)
case("f_title", "{{ w|title }}|{{ \"it's o'neil\"|title }}|{{ u|title }}", S)
case("f_str_title_method", "{{ w.title() }}|{{ \"it's o'neil\".title() }}|{{ '3rd place'.title() }}", S)
case("f_replace", "{{ 'aaa'|replace('a', 'b') }}|{{ 'aaa'|replace('a', 'b', 2) }}|{{ 'abc'|replace('', '-') }}|{{ 'abc'|replace('', '-', 2) }}|{{ 123|replace(2, 'x') }}")
case("f_length_count", "{{ 'héllo'|length }}|{{ [1, 2]|count }}|{{ {'a': 1}|length }}|{{ nothing|length }}")
case("f_length_generator", "{{ [1, 2]|select|length }}", error_contains="object of type 'generator' has no len()")
case("f_default", "{{ nothing|default('d') }}|{{ ''|default('d') }}|{{ ''|default('d', true) }}|{{ none|d('x') }}|{{ none|default('x', boolean=true) }}|{{ 0|default(5, true) }}|[{{ nothing|default }}]")
case("f_first_last", "{{ [1, 2, 3]|first }}|{{ [1, 2, 3]|last }}|{{ 'abc'|first }}|{{ 'abc'|last }}|[{{ []|first }}]|[{{ []|last }}]|{{ {'a': 1, 'b': 2}|first }}|{{ {'a': 1, 'b': 2}|last }}")
case("f_join", "{{ [1, 2, 3]|join }}|{{ [1, 2, 3]|join(', ') }}|{{ ['a', none, true]|join('-') }}|{{ users|join(', ', attribute='name') }}|{{ 'abc'|join('.') }}",
     {"users": [{"name": "a"}, {"name": "b"}]})
case("f_list", "{{ 'ab'|list }}|{{ {'x': 1}|list }}|{{ range(3)|list }}|{{ nothing|list }}|{{ (1, 2)|list }}")
case("f_reverse", "{{ 'abc'|reverse }}|{{ [1, 2, 3]|reverse|list }}|{% for x in [1, 2]|reverse %}{{ x }}{% endfor %}|{{ range(3)|reverse|join }}|{{ {'a': 1, 'b': 2}|reverse|list }}")
case("f_sort", "{{ [3, 1, 2]|sort }}|{{ [3, 1, 2]|sort(reverse=true) }}|{{ ['b', 'A', 'a', 'C']|sort }}|{{ ['b', 'A', 'a', 'C']|sort(case_sensitive=true) }}|{{ users|sort(attribute='age')|map(attribute='name')|join }}|{{ users|sort(attribute='age,name')|map(attribute='name')|join }}",
     {"users": [{"name": "c", "age": 3}, {"name": "a", "age": 5}, {"name": "b", "age": 3}]})
case("f_sort_mixed_error", "{{ [1, 'a']|sort }}", error_contains="not supported between instances of")
case("f_dictsort", "{{ d|dictsort }}|{{ d|dictsort(reverse=true) }}|{{ d|dictsort(by='value') }}|{{ d|dictsort(true) }}",
     {"d": {"b": 1, "A": 3, "a": 2}})
case("f_unique", "{{ [1, 2, 1, 3]|unique|list }}|{{ ['a', 'A', 'b']|unique|list }}|{{ ['a', 'A']|unique(case_sensitive=true)|list }}|{{ users|unique(attribute='g')|map(attribute='n')|join }}",
     {"users": [{"g": 1, "n": "x"}, {"g": 1, "n": "y"}, {"g": 2, "n": "z"}]})
case("f_min_max", "{{ [3, 1, 2]|min }}|{{ [3, 1, 2]|max }}|{{ ['b', 'A', 'c']|max }}|{{ ['b', 'A', 'c']|min(case_sensitive=true) }}|[{{ []|max }}]|{{ users|max(attribute='age') }}",
     {"users": [{"age": 1}, {"age": 7}]})
case("f_sum", "{{ [1, 2, 3]|sum }}|{{ [1.5, 2]|sum }}|{{ users|sum(attribute='n') }}|{{ [1]|sum(start=10) }}|{{ [[1], [2]]|sum(start=[]) }}",
     {"users": [{"n": 1}, {"n": 2}]})
case("f_map", "{{ ['a', 'b']|map('upper')|join }}|{{ users|map(attribute='name')|list }}|{{ users|map(attribute='missing', default='?')|list }}|{{ [1, 2]|map('string')|join('+') }}|{{ ['x,y']|map('replace', ',', ';')|list }}|{{ none|map('upper')|list }}",
     {"users": [{"name": "a"}, {"name": "b"}]})
case("f_select_reject", "{{ [1, 2, 3, 4]|select('odd')|list }}|{{ [1, 2, 3, 4]|reject('odd')|list }}|{{ [0, 1, '', 'a']|select|list }}|{{ [1, 5, 9]|select('gt', 4)|list }}|{{ [1, 5]|select('in', [5])|list }}")
case("f_selectattr", "{{ ms|selectattr('role', 'equalto', 'user')|map(attribute='content')|join('|') }}|{{ ms|rejectattr('role', 'eq', 'user')|list|length }}|{{ items|selectattr('flag')|list }}|{{ items|rejectattr('flag')|list }}|{{ ms|selectattr('role', '==', 'system')|list|length }}",
     {"ms": MSGS, "items": [{"flag": True}, {"flag": False}, {}]})
case("f_selectattr_truthy_generator", "{% if ms|selectattr('role', 'eq', 'nobody') %}generator is truthy{% endif %}", {"ms": MSGS})
case("f_tojson", "{{ d|tojson }}|{{ d|tojson(indent=2) }}|{{ d|tojson(sort_keys=true) }}|{{ 'é\"\\n<'|tojson }}|{{ 'é'|tojson(ensure_ascii=true) }}|{{ [1.0, 1e20, none, true]|tojson }}|{{ d|tojson(separators=(',', ':')) }}|{{ {}|tojson(indent=2) }}|{{ []|tojson(indent=2) }}|{{ d|tojson(indent='\\t') }}",
     {"d": {"b": [1, {"c": "x"}], "a": None}})
case("f_tojson_undefined", "{{ nothing|tojson }}", error_contains="Object of type Undefined is not JSON serializable")
case("f_tojson_tuple_keys", "{{ {1: 'a', none: 'b', 1.5: 'c', true: 'd'}|tojson }}")
case("f_tojson_control_chars", "{{ '\\x00\\x1f\\x7f\\u2028\\t'|tojson }}")
case("f_indent", "{{ 'a\\nb\\n\\nc'|indent }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb'|indent(2, blank=true) }}|{{ 'a\\nb'|indent('> ') }}|{{ 'x'|indent(first=true) }}|{{ ''|indent(first=true) }}")
case("f_int_float", "{{ '42'|int }}|{{ '42.7'|int }}|{{ 'x'|int }}|{{ 'x'|int(7) }}|{{ 3.9|int }}|{{ ' 12 '|int }}|{{ '0x1A'|int(0, 16) }}|{{ 'ff'|int(base=16) }}|{{ '1_000'|int }}|{{ '3.5'|float }}|{{ 'x'|float }}|{{ 2|float }}|{{ '1e3'|float }}|{{ 'inf'|float }}|{{ none|int }}|{{ true|int }}")
case("f_int_undefined", "{{ nothing|int }}", error_contains="'nothing' is undefined")
case("f_round", "{{ 2.5|round }}|{{ 3.5|round }}|{{ 2.675|round(2) }}|{{ 2.1|round(0, 'ceil') }}|{{ 2.9|round(method='floor') }}|{{ 5|round }}|{{ 1234|round(-2) }}|{{ 1250|round(-2) }}|{{ -2.5|round }}|{{ 0.125|round(2) }}")
case("f_abs", "{{ -3|abs }}|{{ (-2.5)|abs }}|{{ -0.0|abs }}")
case("f_string", "{{ 1|string }}|{{ [1, 'a']|string }}|{{ none|string }}|{{ nothing|string }}")
case("f_format", "{{ '%s-%d'|format('a', 3) }}|{{ '%(x)s'|format(x='y') }}|{{ '%5.2f|%-4d|%04d|%x|%X|%o|%e|%g|%%'|format(3.14159, 7, 42, 255, 255, 8, 12345.678, 0.0001) }}|{{ '%r %a'|format('é', 'é') }}|{{ '%c%c'|format(65, 'b') }}|{{ '%+d % d'|format(5, 5) }}|{{ '%#x %#o'|format(255, 8) }}|{{ '%.3s'|format('abcdef') }}|{{ '%s'|format([1, 'a']) }}")
case("f_format_errors", "{{ '%s %s'|format(1) }}", error_contains="not enough arguments for format string")
case("f_wordcount", "{{ 'hello world, foo_bar 3rd'|wordcount }}|{{ ''|wordcount }}")
case("f_center_truncate", "[{{ 'ab'|center(7) }}][{{ 'abc'|center(6) }}][{{ 'hello world foo'|truncate(9) }}][{{ 'hello world foo'|truncate(9, true) }}][{{ 'hello'|truncate(10) }}]")
case("f_batch_slice", "{{ [1, 2, 3, 4, 5]|batch(2)|list }}|{{ [1, 2, 3]|batch(2, 'x')|list }}|{{ [1, 2, 3, 4, 5]|slice(2)|list }}")
case("f_groupby", "{% for g in users|groupby('city') %}{{ g.grouper }}:{{ g.list|map(attribute='n')|join(',') }};{% endfor %}|{% for city, us in users|groupby('city') %}{{ city }}={{ us|length }};{% endfor %}",
     {"users": [{"n": "a", "city": "Paris"}, {"n": "b", "city": "Berlin"}, {"n": "c", "city": "Paris"}]})
case("f_items", "{{ d|items|list }}|{% for k, v in d|items %}{{ k }}{{ v }}{% endfor %}|{{ nothing|items|list }}", {"d": {"a": 1, "b": 2}})
case("f_escape", "{{ '<a href=\"x\">&\\'</a>'|e }}|{{ '<b>'|escape }}|{{ 5|e }}")
case("f_safe", "{{ '<b>'|safe }}|{{ 5|safe }}")
case("markup_ops", "{{ ('<b>'|safe) + '<i>' }}|{{ '<i>' + ('<b>'|safe) }}|{{ ['x'|e, '<'|safe, 'y'|string] }}|{{ ('<a>'|e) ~ '<' }}|{{ '<'|safe is escaped }}|{{ '<' is escaped }}|{{ ('%s<'|safe) % '<' }}|{{ ('a<b'|safe).upper() }}|{{ ('x'|safe).split('x') }}|{{ ('<'|safe)|upper }}|{{ ('<'|safe)[0] }}|{{ ('-'|safe).join(['<', '>']) }}|{{ ('{}'|safe).format('<') }}|{{ 'x<'|forceescape }}|{{ ('<'|e)|e }}|{{ ('<'|safe) * 2 }}|{{ [('<'|safe)|string, ('<'|safe)|trim, ('<'|safe)|title] }}")
case("markup_safe_content", "{% for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + m.content|safe + '<|im_end|>' }}{% endfor %}", {"messages": MSGS[:2]})
case("markup_add_int", "{{ ('a'|safe) + 1 }}", error_contains="unsupported operand type(s) for +: 'Markup' and 'int'")
case("f_attr", "{{ 'x'|attr('upper') is callable }}|[{{ {'a': 1}|attr('a') }}]")
case("f_no_parens_and_parens", "{{ 'x'|upper() }}|{{ 'X'|lower }}")
case("f_filter_on_undefined", "[{{ nothing|upper }}][{{ nothing|trim }}][{{ nothing|join }}][{{ nothing|string }}][{{ nothing|first }}]")
case("f_chain_after_call", "{{ 'a,b'.split(',')|join('+') }}|{{ ('a' ~ 'b')|upper }}")

# ---------------------------------------------------------------------------------------------
# Methods
case("m_strip", "[{{ s.strip() }}][{{ s.lstrip() }}][{{ s.rstrip() }}][{{ 'xxhixx'.strip('x') }}][{{ '\\n\\t a \\u00a0'.strip() }}]", S)
case("m_split", "{{ 'a b  c'.split() }}|{{ 'a,b,,c'.split(',') }}|{{ 'a,b,c'.split(',', 1) }}|{{ '  a b  '.split(None, 1) }}|{{ 'a,b,c'.rsplit(',', 1) }}|{{ '  a b  '.rsplit(None, 1) }}|{{ ''.split() }}|{{ ''.split(',') }}|{{ 'a'.split(maxsplit=0) }}")
case("m_split_empty_sep", "{{ 'a'.split('') }}", error_contains="empty separator")
case("m_splitlines", "{{ 'a\\nb\\r\\nc\\rd\\n'.splitlines() }}|{{ 'a\\nb\\n'.splitlines(true) }}|{{ 'x\\x0by\\x1cz\\u2028w'.splitlines() }}|{{ ''.splitlines() }}")
case("m_startswith", "{{ 'hello'.startswith('he') }}|{{ 'hello'.endswith('lo') }}|{{ 'hello'.startswith(('x', 'h')) }}|{{ 'hello'.startswith('l', 2) }}|{{ 'hello'.endswith('l', 0, 4) }}")
case("m_find", "{{ 'hello'.find('l') }}|{{ 'hello'.rfind('l') }}|{{ 'hello'.find('z') }}|{{ 'héllo'.find('l') }}|{{ 'hello'.index('e') }}|{{ 'hello'.count('l') }}|{{ 'hello'.find('l', 3) }}")
case("m_index_missing", "{{ 'hello'.index('z') }}", error_contains="substring not found")
case("m_case", "{{ 'Hi'.upper() }}{{ 'Hi'.lower() }}{{ 'hi there'.title() }}{{ 'hI'.capitalize() }}{{ 'Hi'.swapcase() }}")
case("m_replace", "{{ 'a-b-c'.replace('-', '+') }}|{{ 'a-b-c'.replace('-', '+', 1) }}")
case("m_join", "{{ ', '.join(['a', 'b']) }}|{{ ''.join('abc') }}")
case("m_join_error", "{{ ', '.join([1, 2]) }}", error_contains="sequence item 0: expected str instance, int found")
case("m_format", "{{ '{} and {}'.format('a', 'b') }}|{{ '{0}{1}{0}'.format('x', 'y') }}|{{ '{name}!'.format(name='Bob') }}|{{ '{:>5}|{:<4}|{:^6}|{:*^7}'.format('a', 'b', 'c', 'd') }}|{{ '{:.2f}|{:5d}|{:05d}|{:,}|{:x}|{:#x}|{:e}|{:.1%}|{:+d}'.format(3.14159, 42, 42, 1234567, 255, 255, 1234.5, 0.256, 5) }}|{{ '{!r}|{!s}'.format('x', 'y') }}|{{ '{{}}{}'.format(1) }}|{{ '{0[0]}{0[1]}'.format('ab') }}|{{ '{d[k]}'.format(d={'k': 'v'}) }}")
case("m_format_floats", "{{ '{}|{:.3}|{:g}|{:.0f}|{:.10g}|{:n}'.format(1.0, 1.0, 100000000.0, 2.5, 0.1, 1.5) }}")
case("m_format_errors", "{{ '{} {}'.format(1) }}", error_contains="out of range")
case("m_is_predicates", "{{ '123'.isdigit() }}{{ '12a'.isdigit() }}{{ 'abc'.isalpha() }}{{ 'ab1'.isalpha() }}{{ ' \\t'.isspace() }}{{ ''.isspace() }}{{ 'ab1'.isalnum() }}{{ 'a-b'.isalnum() }}{{ 'abc'.islower() }}{{ 'ABC'.isupper() }}{{ '²'.isdigit() }}{{ '²'.isdecimal() }}")
case("m_pad", "[{{ 'a'.ljust(3) }}][{{ 'a'.rjust(3, '*') }}][{{ 'a'.center(4, '-') }}][{{ '42'.zfill(5) }}][{{ '-42'.zfill(5) }}]")
case("m_partition", "{{ 'a=b=c'.partition('=') }}|{{ 'a=b=c'.rpartition('=') }}|{{ 'abc'.partition('=') }}")
case("m_removeprefix", "{{ 'prefix-x'.removeprefix('prefix-') }}|{{ 'x.txt'.removesuffix('.txt') }}|{{ 'x'.removesuffix('') }}")
case("m_list_methods", "{{ [1, 2, 1].count(1) }}|{{ [1, 2, 3].index(2) }}|{{ (1, 2).index(2) }}|{{ [1].copy() }}")
case("m_list_index_missing", "{{ [1].index(5) }}", error_contains="5 is not in list")
case("m_number_methods", "{{ (2.0).is_integer() }}|{{ 5 .real }}|{{ 255.bit_length() if false else 8 }}")
case("m_unknown_method", "{{ 'x'.nope() }}", error_contains="'str object' has no attribute 'nope'")

# ---------------------------------------------------------------------------------------------
# Sandbox
case("sandbox_list_append", "{% set l = [1] %}{{ l.append(2) }}", error_contains="access to attribute 'append' of 'list' object is unsafe.")
case("sandbox_dict_update", "{% set d = {} %}{{ d.update({'a': 1}) }}", error_contains="access to attribute 'update' of 'dict' object is unsafe.")
case("sandbox_list_pop_print", "[{{ [1].pop }}]")
case("sandbox_dunder", "[{{ ''.__class__ }}][{{ x.__class__ }}]", {"x": {}})
case("sandbox_dunder_call", "{{ ''.__class__.__mro__ }}", error_contains="access to attribute '__class__' of 'str' object is unsafe.")
case("sandbox_private_key", "{{ d._private }}|{{ d['_private'] }}", {"d": {"_private": "ok"}})
case("sandbox_range_limit", "{{ range(100001)|length }}", error_contains="Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).")
case("sandbox_range_ok", "{{ range(100000)|length }}")

# ---------------------------------------------------------------------------------------------
# Errors (runtime)
case("err_add_str_int", "{{ 'a' + 1 }}", error_contains='can only concatenate str (not "int") to str')
case("err_add_int_str", "{{ 1 + 'a' }}", error_contains="unsupported operand type(s) for +: 'int' and 'str'")
case("err_undefined_add", "{{ nothing + 1 }}", error_contains="'nothing' is undefined")
case("err_div_zero", "{{ 1 / 0 }}", error_contains="division by zero")
case("err_floordiv_zero", "{{ 1 // 0 }}", error_contains="integer division or modulo by zero")
case("err_mod_zero", "{{ 1 % 0 }}", error_contains="integer modulo by zero")
case("err_compare", "{{ 'a' < 1 }}", error_contains="'<' not supported between instances of 'str' and 'int'")
case("err_in_string", "{{ 1 in 'abc' }}", error_contains="'in <string>' requires string as left operand, not int")
case("err_call_non_callable", "{{ 'x'() }}", error_contains="'str' object is not callable")
case("err_call_undefined", "{{ nothing() }}", error_contains="'nothing' is undefined")
case("err_unhashable", "{{ {[1]: 2} }}", error_contains="unhashable type: 'list'")
case("err_line_number", "line1\n{% for x in [1] %}\n{{ x.y.z }}\n{% endfor %}", error_contains="'int object' has no attribute 'y'")
case("err_multiline_template_line", "a\nb\n{% set x = 1 %}\n{{ x + 'a' }}", error_contains="unsupported operand type(s) for +: 'int' and 'str'")
case("err_unary_minus_str", "{{ -'a' }}", error_contains="bad operand type for unary -: 'str'")
case("err_loop_call_not_recursive", "{% for x in [1] %}{{ loop([]) }}{% endfor %}", error_contains="The loop must have the 'recursive' marker to be called recursively.")
case("err_break_outside_loop", "{% break %}", error_contains="'break' outside loop")

# ---------------------------------------------------------------------------------------------
# Errors (syntax)
case("syn_unclosed_if", "{% if true %}x", error_contains="Unexpected end of template. Jinja was looking for the following tags: 'elif' or 'else' or 'endif'. The innermost block that needs to be closed is 'if'.")
case("syn_unknown_filter", "a\n{{ x|frobnicate }}", error_contains="No filter named 'frobnicate'.")
case("syn_unknown_test", "{{ x is frobnicated }}", error_contains="No test named 'frobnicated'.")
case("syn_unknown_tag", "{% frobnicate %}", error_contains="Encountered unknown tag 'frobnicate'.")
case("syn_unknown_tag_nested", "{% for x in y %}{% endif %}{% endfor %}", error_contains="Encountered unknown tag 'endif'. Jinja was looking for the following tags: 'endfor' or 'else'. The innermost block that needs to be closed is 'for'.")
case("syn_nesting_mistake", "{% for x in y %}{% if x %}{% endfor %}{% endif %}", error_contains="You probably made a nesting mistake.")
case("syn_bad_char", "{{ a ! b }}", error_contains="unexpected char '!' at 5")
case("syn_unbalanced", "{{ (a }}", error_contains="unexpected '}', expected ')'")
case("syn_unexpected_rparen", "{{ a) }}", error_contains="unexpected ')'")
case("syn_empty_expr", "{{ }}", error_contains="Expected an expression, got 'end of print statement'")
case("syn_expected_token", "{% if x %}{% for %}{% endfor %}{% endif %}", error_contains="Expected an expression, got 'end of statement block'")
case("syn_missing_endfor_eof", "{% for x in y %}", error_contains="Unexpected end of template. Jinja was looking for the following tags: 'endfor' or 'else'. The innermost block that needs to be closed is 'for'.")
case("syn_unterminated_comment", "{# abc", error_contains="Missing end of comment tag")
case("syn_unterminated_var", "{{ x", error_contains="unexpected end of template, expected 'end of print statement'.")
case("syn_bad_assign", "{% set 1 = 2 %}", error_contains="can't assign to 'const'")
case("syn_loop_target", "{% for loop in x %}{% endfor %}", error_contains="Can't assign to special loop variable in for-loop target")
case("syn_multiple_tests", "{{ x is defined is string }}", error_contains="You cannot chain multiple tests with is")
case("syn_macro_default_order", "{% macro m(a=1, b) %}{% endmacro %}", error_contains="non-default argument follows default argument")
case("syn_do_not_enabled", "{% do x %}", error_contains="Encountered unknown tag 'do'.")
case("syn_line_number_deep", "a\nb\nc\n  {{ 1 +* 2 }}", error_contains="unexpected '*'")
case("syn_else_after_else", "{% if a %}{% else %}{% else %}{% endif %}", error_contains="Encountered unknown tag 'else'.")
case("syn_endfor_name", "{% for x in y %}{% endfor x %}", error_contains="expected token 'end of statement block', got 'x'")
case("syn_bad_escape", "{{ '\\x4' }}", error_contains="truncated \\xXX escape")
case("syn_string_unterminated", "{{ 'abc }}", error_contains="unexpected char \"'\" at 3")
case("syn_filter_no_name", "{{ x|(1) }}", error_contains="expected token 'name', got '('")
case("syn_subscript_bad", "{{ x.(1) }}", error_contains="expected name or number")

# ---------------------------------------------------------------------------------------------
# Realistic chat templates
CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
case("chatml", CHATML, {"messages": MSGS, "add_generation_prompt": True})
SMOLLM2 = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}"
           "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
           "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
case("smollm2", SMOLLM2, {"messages": MSGS[1:], "add_generation_prompt": True})
LLAMA3 = ("{% set loop_messages = messages %}{% for message in loop_messages %}"
          "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}"
          "{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")
case("llama3", LLAMA3, {"messages": MSGS, "add_generation_prompt": True, "bos_token": "<|begin_of_text|>"})
LLAMA31_TOOLS = """{{- bos_token }}
{%- if custom_tools is defined %}
    {%- set tools = custom_tools %}
{%- endif %}
{%- if not tools_in_user_message is defined %}
    {%- set tools_in_user_message = true %}
{%- endif %}
{%- if not date_string is defined %}
    {%- set date_string = "26 Jul 2024" %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}

{#- This block extracts the system message, so we can slot it into the right place. #}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}

{#- System message + builtin tools #}
{{- "<|start_header_id|>system<|end_header_id|>\\n\\n" }}
{%- if builtin_tools is defined or tools is not none %}
    {{- "Environment: ipython\\n" }}
{%- endif %}
{{- "Cutting Knowledge Date: December 2023\\n" }}
{{- "Today Date: " + date_string + "\\n\\n" }}
{%- if tools is not none and not tools_in_user_message %}
    {{- "You have access to the following functions. To call a function, please respond with JSON for a function call." }}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
    {{- "Do not use variables.\\n\\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\\n\\n" }}
    {%- endfor %}
{%- endif %}
{{- system_message }}
{{- "<|eot_id|>" }}

{#- Custom tools are passed in a user message with some extra guidance #}
{%- if tools_in_user_message and not tools is none %}
    {#- Extract the first user message so we can plug it in here #}
    {%- if messages | length != 0 %}
        {%- set first_user_message = messages[0]['content']|trim %}
        {%- set messages = messages[1:] %}
    {%- else %}
        {{- raise_exception("Cannot put tools in the first user message when there's no first user message!") }}
{%- endif %}
    {{- '<|start_header_id|>user<|end_header_id|>\\n\\n' -}}
    {{- "Given the following functions, please respond with a JSON for a function call " }}
    {{- "with its proper arguments that best answers the given prompt.\\n\\n" }}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
    {{- "Do not use variables.\\n\\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\\n\\n" }}
    {%- endfor %}
    {{- first_user_message + "<|eot_id|>"}}
{%- endif %}

{%- for message in messages %}
    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}
        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' }}
    {%- elif 'tool_calls' in message %}
        {%- if not message.tool_calls|length == 1 %}
            {{- raise_exception("This model only supports single tool-calls at once!") }}
        {%- endif %}
        {%- set tool_call = message.tool_calls[0].function %}
        {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}
        {{- '{"name": "' + tool_call.name + '", ' }}
        {{- '"parameters": ' }}
        {{- tool_call.arguments | tojson }}
        {{- "}" }}
        {{- "<|eot_id|>" }}
    {%- elif message.role == "tool" or message.role == "ipython" %}
        {{- "<|start_header_id|>ipython<|end_header_id|>\\n\\n" }}
        {%- if message.content is mapping or message.content is iterable %}
            {{- message.content | tojson }}
        {%- else %}
            {{- message.content }}
        {%- endif %}
        {{- "<|eot_id|>" }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}
{%- endif %}
"""
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Get the weather",
          "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "The city"},
                                                            "unit": {"type": "string", "enum": ["c", "f"]}},
                         "required": ["city"]}}}]
TOOL_MSGS = [{"role": "system", "content": "Be brief."},
             {"role": "user", "content": "Weather in Paris?"},
             {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}}]},
             {"role": "tool", "content": {"temperature": 21.5, "sky": "clear"}},
             {"role": "assistant", "content": "It is 21.5°C and clear."}]
case("llama31_tools", LLAMA31_TOOLS, {"messages": TOOL_MSGS, "tools": TOOLS, "add_generation_prompt": True, "bos_token": "<|begin_of_text|>"})
case("llama31_no_tools", LLAMA31_TOOLS, {"messages": MSGS, "add_generation_prompt": False, "bos_token": "<|begin_of_text|>"})
QWEN25 = """{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>" }}
    {%- for tool in tools %}
        {{- "\\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}\\n</tool_call><|im_end|>\\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}
    {%- else %}
        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\\n<tool_call>\\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\\n<tool_response>\\n' }}
        {{- message.content }}
        {{- '\\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}
"""
QWEN_MSGS = [{"role": "user", "content": "Weather in Paris and Rome?"},
             {"role": "assistant", "content": "", "tool_calls": [
                 {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
                 {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Rome"}}}]},
             {"role": "tool", "content": "{\"t\": 21}"},
             {"role": "tool", "content": "{\"t\": 25}"},
             {"role": "assistant", "content": "Paris 21, Rome 25."}]
case("qwen25_tools", QWEN25, {"messages": QWEN_MSGS, "tools": TOOLS, "add_generation_prompt": True})
case("qwen25_plain", QWEN25, {"messages": MSGS, "add_generation_prompt": False})
MISTRAL = ("{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
           "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
           "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
           "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}"
           "{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}")
case("mistral", MISTRAL, {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}, {"role": "user", "content": "Bye"}], "bos_token": "<s>", "eos_token": "</s>"})
case("mistral_bad_roles", MISTRAL, {"messages": MSGS, "bos_token": "<s>", "eos_token": "</s>"},
     error_contains="Conversation roles must alternate user/assistant/user/assistant/...")
GEMMA = ("{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"
         "{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
         "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
         "{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}"
         "{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}"
         "{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}")
case("gemma", GEMMA, {"messages": MSGS[1:3], "bos_token": "<bos>", "add_generation_prompt": True})
PHI3 = ("{% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>\n' + message['content'] + '<|end|>\n'}}"
        "{% elif message['role'] == 'user' %}{{'<|user|>\n' + message['content'] + '<|end|>\n'}}"
        "{% elif message['role'] == 'assistant' %}{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %}")
case("phi3", PHI3, {"messages": MSGS, "add_generation_prompt": False, "eos_token": "<|endoftext|>"})
DEEPSEEK = ("{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}"
            "{% set ns = namespace(is_first=false, is_tool=false, is_output_first=true, system_prompt='') %}"
            "{%- for message in messages %}{%- if message['role'] == 'system' %}{% set ns.system_prompt = message['content'] %}{%- endif %}{%- endfor %}"
            "{{bos_token}}{{ns.system_prompt}}"
            "{%- for message in messages %}{%- if message['role'] == 'user' %}{%- set ns.is_tool = false -%}{{'<｜User｜>' + message['content']}}"
            "{%- endif %}{%- if message['role'] == 'assistant' and message['content'] is not none %}"
            "{% set content = message['content'] %}{% if '</think>' in content %}{% set content = content.split('</think>')[-1] %}{% endif %}"
            "{{'<｜Assistant｜>' + content + '<｜end▁of▁sentence｜>'}}{%- endif %}{%- endfor -%}"
            "{% if add_generation_prompt and not ns.is_tool %}{{'<｜Assistant｜><think>\\n'}}{% endif %}")
case("deepseek_r1", DEEPSEEK, {"messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "<think>\nhmm\n</think>\n\n4"}, {"role": "user", "content": "ok"}],
                               "bos_token": "<｜begin▁of▁sentence｜>", "add_generation_prompt": True})
JSON_SCHEMA_MACRO = """{%- macro render(schema, depth) -%}
{%- if schema.type == 'object' -%}
{{ '{' }}{%- for name, prop in schema.properties.items() -%}{{ name }}: {{ render(prop, depth + 1) }}{{ ', ' if not loop.last }}{%- endfor -%}{{ '}' }}
{%- elif schema.type == 'array' -%}
[{{ render(schema['items'], depth + 1) }}]
{%- else -%}
{{ schema.type }}{% if schema.enum is defined %}({{ schema.enum|join('|') }}){% endif %}
{%- endif -%}
{%- endmacro -%}
{{ render(s, 0) }}"""
case("recursive_schema_macro", JSON_SCHEMA_MACRO,
     {"s": {"type": "object", "properties": {"a": {"type": "string", "enum": ["x", "y"]}, "b": {"type": "array", "items": {"type": "integer"}},
                                             "c": {"type": "object", "properties": {"d": {"type": "boolean"}}}}}})
case("content_list_parts", "{% for m in messages %}{% if m.content is string %}{{ m.content }}{% else %}{% for part in m.content %}{% if part.type == 'text' %}{{ part.text }}{% elif part.type == 'image' %}<image>{% endif %}{% endfor %}{% endif %}\n{% endfor %}",
     {"messages": [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is this?"}]}, {"role": "assistant", "content": "A cat."}]})
case("tool_call_arguments_dict_repr", "{% for tc in calls %}{{ tc.arguments }}|{{ tc.arguments|tojson }}{% endfor %}",
     {"calls": [{"arguments": {"q": "it's", "n": [1, 2.5, None, True]}}]})
case("strip_think_tags", "{% for m in messages %}{{ m.content.split('</think>')[-1].lstrip() }}|{% endfor %}",
     {"messages": [{"content": "<think>x</think>\n\nanswer"}, {"content": "plain"}]})
case("system_prompt_fallback", "{{ (messages|selectattr('role', 'equalto', 'system')|list|first).content|default('default system') }}", {"messages": MSGS})
case("loop_messages_slice", "{% for m in messages[1:] %}{{ loop.index }}:{{ m.role }} {% endfor %}", {"messages": MSGS})
case("documents_rag", "{% for doc in documents %}<doc id={{ loop.index0 }}>{% for k, v in doc.items() %}{{ k | upper }}: {{ v }}\n{% endfor %}</doc>{% endfor %}",
     {"documents": [{"title": "T1", "text": "body one"}, {"title": "T2", "text": "body two"}]})
case("unicode_content", "{{ messages[0].content|upper }}|{{ messages[0].content|length }}|{{ messages[0].content[:2] }}", {"messages": [{"content": "héllo wörld 한국어"}]})
case("int_keys_input", "{{ d }}|{{ d|tojson }}", {"d": {"1": 1, "b": -0.5, "c": 1e300, "e": 12345678901234}})


# ---------------------------------------------------------------------------------------------
# Edge cases: lexer
case("lex_braces_in_strings", "{{ '}}' }}|{{ \"{{\" }}|{{ '{%' ~ '%}' }}|{{ {'a': {'b': 1}} }}|{{ {'a': 1}}}")
case("lex_adjacent_tags", "{{'a'}}{{'b'}}{%if true%}c{%endif%}{#x#}d")
case("lex_dotted_numbers", "{{ l.1.0 }}|{{ l.0 }}", {"l": [[1, 2], [3, 4]]})
case("lex_comment_with_tags", "a{# {% if %} {{ x }} #}b")
case("lex_names", "{{ _x }}|{{ x_1 }}|{{ X }}", {"_x": 1, "x_1": 2, "X": 3})
case("lex_unicode_whitespace_in_tag", "{{\u00a0'x'\u3000}}")
case("lex_float_forms", "{{ 1.5 }}|{{ 10.0e-1 }}|{{ 1e0 }}|{{ 5_0.2_5 }}")
case("lex_minus_vs_end", "{{ 5 -3 }}|{{ 5 - 3 }}|{{ 5-3 -}} x")
case("lex_operators_no_space", "{{1+2*3-4//2%3}}|{{2**2**3}}|{{'a'~'b'}}")
case("lex_string_with_newline", "{{ 'a\nb' }}|{{ \"c\\\nd\" }}")
case("lex_raw_with_endraw_like", "{% raw %}{% endrawx %}{% endraw %}")
case("lex_raw_unclosed", "{% raw %}abc", error_contains="Missing end of raw directive")
case("lex_comment_end_minus", "a {#- x -#} b {#- y #} c {# z -#} d")
case("lex_variable_plus", "{{+ 'a' }}")
case("lex_string_octal", "{{ '\\101\\7' }}|{{ '\\u0041\\U0001F600' }}")
case("lex_bad_unicode_escape", "{{ '\\u12' }}", error_contains="truncated \\uXXXX escape")
case("lex_block_end_in_string", "{% set x = '%}' %}{{ x }}")
case("lex_line_numbers_crlf", "a\r\nb\r\n{{ x.y.z }}", error_contains="'x' is undefined")

# Edge cases: whitespace
case("ws_lstrip_after_variable_same_line", "{{ 'x' }}  {% if true %}y{% endif %}")
case("ws_lstrip_after_comment_same_line", "{# c #}  {% if true %}y{% endif %}")
case("ws_lstrip_form_feed", "\f\v {% if true %}y{% endif %}")
case("ws_lstrip_after_trim_newline", "{% if true %}\n   {% if true %}y{% endif %}\n{% endif %}")
case("ws_lstrip_comment_line", "a\n   {# only a comment #}\nb")
case("ws_trailing_spaces_before_newline_tag", "a   \n   {% if true %}b{% endif %}")
case("ws_minus_eats_multiple_lines", "a\n\n\n   {%- if true %}b{% endif %}")
case("ws_minus_after_eats_lines", "{% if true -%}\n\n\n  b{% endif %}")
case("ws_variable_minus_newlines", "a\n  {{- 'b' }}\n  c")
case("ws_plus_block_end_keeps_newline", "{% for x in [1, 2] +%}\n{{ x }}{% endfor %}")
case("ws_raw_plus", "  {%+ raw %}x{% endraw %}")
case("ws_endraw_lstrip", "{% raw %}a\n   {% endraw %}b")
case("ws_endraw_minus", "{% raw %}a   {%- endraw %}b")
case("ws_trim_blocks_crlf", "{% if true %}\r\nx\r\n{% endif %}\r\ny")
case("ws_keep_one_of_two_trailing", "x\n\n")
case("ws_only_tags", "{% if true %}\n{% endif %}\n")
case("ws_macro_body", "{% macro m() %}\n  body\n{% endmacro %}\n[{{ m() }}]")
case("ws_indented_template", """<s>
{% for m in messages %}
    {% if m.role == 'user' %}
        [INST] {{ m.content }} [/INST]
    {% else %}
        {{ m.content }}
    {% endif %}
{% endfor %}
</s>""", {"messages": MSGS[1:3]})

# Edge cases: values and operators
case("float_repr_more", "{{ 1e22 }}|{{ 1.5e-10 }}|{{ 100.0 }}|{{ 0.5 }}|{{ -1.0 }}|{{ 1e300 * 1e10 }}|{{ 'nan'|float }}|{{ -('inf'|float) }}|{{ 0.1 * 3 }}|{{ 1/3 * 3 }}|{{ 2.0 ** 60 }}|{{ 123456789012345678.0 }}")
case("int_edge", "{{ 2 ** 62 }}|{{ -2 ** 62 }}|{{ 9223372036854775807 }}|{{ 10 // 3 * 3 }}|{{ -5 // 2.0 }}|{{ 5 % -2.5 }}|{{ -0.0 == 0 }}")
case("undefined_equality", "{{ a == b }}|{{ a == none }}|{{ a != 1 }}|{{ a is sameas b }}")
case("str_compare_unicode", "{{ 'é' > 'z' }}|{{ 'Z' < 'a' }}|{{ '' < 'a' }}|{{ 'ab' < 'abc' }}")
case("list_compare", "{{ [1, 2] == [1, 2] }}|{{ [1] == (1,) }}|{{ (1, 2) < (1, 3) }}|{{ {'a': 1} == {'a': 1.0} }}|{{ [[1]] < [[2]] }}")
case("in_views", "{{ 'a' in d.keys() }}|{{ 1 in d.values() }}|{{ ('a', 1) in d.items() }}|{{ 'a' in d }}|{{ 2 in range(3) }}", {"d": {"a": 1}})
case("in_generator_consumes", "{% set g = [1, 2, 3]|select %}{{ 2 in g }}{{ g|list }}")
case("generator_single_pass", "{% set g = [1, 2]|map('string') %}{{ g|list }}{{ g|list }}|{{ g|join }}")
case("generator_first_consumes", "{% set g = [1, 2, 3]|select %}{{ g|first }}{{ g|list }}")
case("range_forms", "{{ range(10)[::3]|list }}|{{ range(5, 0, -2)|list }}|{{ range(0)|list }}|{{ range(3)[-1] }}|{{ range(2, 8)[1:3] }}|{{ range(-3)|list }}")
case("range_errors", "{{ range(1, 2, 0) }}", error_contains="range() arg 3 must not be zero")
case("range_float_arg", "{{ range(1.5) }}", error_contains="'float' object cannot be interpreted as an integer")
case("slicing_more", "{{ 'abc'[5:10] }}|{{ 'abc'[-10:] }}|{{ [1, 2, 3][::-2] }}|{{ 'abc'[1::] }}|{{ 'abcdef'[-1:-4:-1] }}|{{ [1, 2, 3][none:2] }}|[{{ 'abc'[1.5:] }}]")
case("slice_step_zero", "{{ 'abc'[::0] }}", error_contains="slice step cannot be zero")
case("nested_repr", "{{ {'it\\'s': [{'k': 'a\"b'}], 'n': (1, (2,))} }}")
case("repr_floats_in_list", "{{ [1.0, 0.1, 1e-7, 1e16, -0.0] }}")
case("bool_arith_repr", "{{ [true + true, true / 2, 3 // true] }}")
case("string_mult_bool", "{{ 'ab' * true }}|{{ 'ab' * false }}")
case("concat_numbers", "{{ 5 ~ 5 }}|{{ 1.5 ~ '' }}|{{ none ~ none }}")
case("dict_key_types", "{{ {none: 1, (1, 2): 'tuple', 1.5: 'f'} }}|{{ {(1, 2): 'x'}[(1, 2)] }}")
case("condexpr_nested_filters", "{{ (x if x else 'none')|upper }}|{{ x|default('d') if false else 'e' }}", {"x": "val"})
case("not_precedence", "{{ not 1 == 2 }}|{{ not x is defined }}|{{ not (true and false) }}")
case("and_or_precedence", "{{ false or true and false }}|{{ (false or true) and false }}|{{ 1 and 2 or 3 }}")
case("test_on_call_result", "{{ 'ab'.upper() is upper }}|{{ [1, 2]|length is even }}")
case("filter_on_literal_list", "{{ [3, 1]|sort|first }}|{{ ('b', 'a')|sort|join }}")
case("call_on_filter_result", "{{ ('a,b'|string).split(',') }}")
case("getattr_on_int_attr", "{{ 5.real }}|[{{ 5.nothing }}]")

# Edge cases: loops
case("loop_last_with_filter", "{% for x in [1, 2, 3, 4] if x != 4 %}{{ x }}{{ '.' if loop.last else ',' }}{% endfor %}")
case("loop_revindex_break", "{% for x in range(5) %}{{ loop.revindex }}{% if loop.index == 2 %}{% break %}{% endif %}{% endfor %}")
case("loop_nested_outer_ref", "{% for a in [1, 2] %}{% set outer = loop %}{% for b in [3, 4] %}{{ outer.index }}{{ loop.index }} {% endfor %}{% endfor %}")
case("loop_var_after_loop", "{% set x = 'before' %}{% for x in [1] %}{% endfor %}{{ x }}")
case("loop_else_scope", "{% for x in [] %}{% else %}{{ loop is defined }}{% endfor %}")
case("loop_filter_sees_outer", "{% set lim = 2 %}{% for x in range(5) if x < lim %}{{ x }}{% endfor %}")
case("loop_over_items_unpack", "{% for k, v in {'a': [1, 2]}.items() %}{{ k }}{% for i in v %}{{ i }}{% endfor %}{% endfor %}")
case("loop_changed_multi", "{% for a, b in [(1, 1), (1, 2), (1, 2)] %}{{ loop.changed(a, b) }}{% endfor %}")
case("loop_cycle_no_args", "{% for x in [1] %}{{ loop.cycle() }}{% endfor %}", error_contains="no items for cycling given")
case("loop_continue_in_else_free", "{% for x in [1, 2] %}{% if x == 1 %}{% continue %}{% else %}{{ x }}{% endif %}{% endfor %}")
case("loop_in_macro_break", "{% macro m(xs) %}{% for x in xs %}{% if x > 1 %}{% break %}{% endif %}{{ x }}{% endfor %}{% endmacro %}{{ m([1, 2, 3]) }}")
case("loop_break_in_set_block", "{% for x in [1, 2, 3] %}{% set t %}{{ x }}{% if x == 2 %}{% break %}{% endif %}{% endset %}[{{ t }}]{% endfor %}")
case("loop_set_in_if_in_loop", "{% for x in [1, 2] %}{% if x == 1 %}{% set y = 'one' %}{% endif %}[{{ y }}]{% endfor %}")
case("loop_messages_index_access", "{% for m in messages %}{% if not loop.first %}{{ messages[loop.index0 - 1].role }}>{% endif %}{{ m.role }} {% endfor %}", {"messages": MSGS})
case("loop_recursive_else", "{% for x in [] recursive %}{{ x }}{% else %}empty{% endfor %}")
case("loop_length_nested_generator", "{% for x in [1, 2, 3]|reject('even') %}{{ loop.revindex }}{% endfor %}")

# Edge cases: macros, call, scoping
case("macro_defined_in_loop", "{% for x in [1, 2] %}{% macro m() %}{{ x }}{% endmacro %}{{ m() }}{% endfor %}")
case("macro_namespace_mutation", "{% set ns = namespace(c=0) %}{% macro inc() %}{% set ns.c = ns.c + 1 %}{% endmacro %}{{ inc() }}{{ inc() }}{{ ns.c }}")
case("macro_caller_sees_loop_var", "{% macro w() %}({{ caller() }}){% endmacro %}{% for i in [1, 2] %}{% call w() %}{{ i }}{% endcall %}{% endfor %}")
case("macro_no_caller", "{% macro m() %}[{{ caller is defined }}]{% endmacro %}{{ m() }}")
case("macro_call_caller_undefined", "{% macro m() %}{{ caller() }}{% endmacro %}{{ m() }}", error_contains="No caller defined")
case("macro_varargs_only", "{% macro m() %}{{ varargs|join(',') }}{% endmacro %}{{ m(1, 2) }}")
case("macro_kwargs_only", "{% macro m() %}{{ kwargs|dictsort }}{% endmacro %}{{ m(b=1, a=2) }}")
case("macro_self_reference_later", "{% macro a() %}{{ b() }}{% endmacro %}{% macro b() %}B{% endmacro %}{{ a() }}")
case("macro_args_shadow_globals", "{% macro m(messages) %}{{ messages }}{% endmacro %}{{ m('local') }}", {"messages": "global"})
case("macro_default_none", "{% macro m(x=none) %}{{ x is none }}{% endmacro %}{{ m() }}{{ m(1) }}")
case("macro_positional_and_kw_same", "{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, a=2) }}", error_contains="macro 'm' takes no keyword argument 'a'")
case("with_nested_scope", "{% set x = 1 %}{% with %}{% set x = 2 %}{{ x }}{% endwith %}{{ x }}")
case("filter_block_scope", "{% filter upper %}{% set y = 'in' %}{{ y }}{% endfilter %}[{{ y }}]")
case("set_block_scope", "{% set out %}{% set inner = 1 %}{{ inner }}{% endset %}{{ out }}[{{ inner }}]")
case("global_shadowed_by_set", "{{ range }}{% set range = 5 %}{{ range }}" if False else "{% set x = messages|length %}{% set messages = [] %}{{ x }}{{ messages|length }}", {"messages": MSGS})
case("set_before_use_in_loop", "{% for m in [1, 2] %}{% set last = m %}{% endfor %}[{{ last }}]")
case("namespace_in_loop_accumulate", "{% set ns = namespace(parts=[]) %}{% for m in messages %}{% set ns.parts = ns.parts + [m.role] %}{% endfor %}{{ ns.parts|join(',') }}", {"messages": MSGS})
case("namespace_attr_undefined_use", "{% set ns = namespace() %}{{ ns.missing.x }}", error_contains="'jinja2.utils.Namespace object' has no attribute 'missing'")
case("block_scoped", "{% for x in [1] %}{% block b scoped %}{{ x }}{% endblock %}{% endfor %}")
case("block_unscoped", "{% for x in [1] %}{% block b %}[{{ x }}]{% endblock %}{% endfor %}")

# Edge cases: filters
case("f_join_nested", "{{ [[1, 2], [3]]|join('|') }}|{{ [1, 2]|join(0) }}|{{ {'a': 1, 'b': 2}|join(',') }}")
case("f_default_chain", "{{ x|default(y)|default('z') }}", {"y": None})
case("f_trim_input", "[{{ s|trim }}]|[{{ s.strip(' H') }}]", {"s": "  Hi there  "})
case("f_replace_input", "{{ s|replace('<', '&lt;') }}", {"s": "a<b<c"})
case("f_first_dict_items", "{{ d.items()|first }}|{{ d|dictsort|first }}", {"d": {"z": 1, "a": 2}})
case("f_tojson_nested_indent", "{{ d|tojson(indent=2) }}", {"d": {"a": [1, [2, {}], {"b": None}], "c": "é\u2028"}})
case("f_tojson_sort_mixed", "{{ {1: 'a', 'b': 2}|tojson(sort_keys=true) }}", error_contains="not supported between instances of")
case("f_tojson_namespace", "{{ namespace(a=1)|tojson }}", error_contains="Object of type Namespace is not JSON serializable")
case("f_tojson_generator", "{{ [1]|select|tojson }}", error_contains="Object of type generator is not JSON serializable")
case("f_tojson_input_scalars", "{{ b|tojson }}{{ n|tojson }}{{ f|tojson }}", {"b": True, "n": None, "f": 2.50})
case("f_map_default_none", "{{ [{'a': 1}, {}]|map(attribute='a')|list }}")
case("f_map_nested_attr", "{{ users|map(attribute='info.name')|join }}|{{ users|map(attribute='tags.0')|join }}",
     {"users": [{"info": {"name": "x"}, "tags": ["t1"]}, {"info": {"name": "y"}, "tags": ["t2"]}]})
case("f_selectattr_nested", "{{ ms|selectattr('meta.keep')|map(attribute='id')|join }}", {"ms": [{"id": 1, "meta": {"keep": True}}, {"id": 2, "meta": {"keep": False}}, {"id": 3, "meta": {}}]})
case("f_select_defined", "{{ [1, none, 2]|select('none')|list }}|{{ [1, none]|reject('none')|list }}|{{ [{'a': 1}, {}]|selectattr('a', 'defined')|list }}")
case("f_sort_strings_unicode", "{{ ['é', 'e', 'z', 'E']|sort }}|{{ ['B', 'a']|sort(case_sensitive=true) }}")
case("f_sort_stable_reverse", "{{ [(1, 'a'), (0, 'b'), (1, 'c')]|sort(attribute='0', reverse=true) }}")
case("f_sort_dicts_error", "{{ [{'a': 1}, {'a': 2}]|sort }}", error_contains="'<' not supported between instances of 'dict' and 'dict'")
case("f_unique_preserves_first", "{{ ['A', 'a', 'b', 'B']|unique|list }}")
case("f_max_strings", "{{ ['apple', 'Banana', 'cherry']|max }}|{{ ['apple', 'Banana']|min }}")
case("f_sum_floats", "{{ [0.1, 0.2, 0.3]|sum }}|{{ []|sum }}")
case("f_length_of_input_int", "{{ n|length }}", {"n": 5}, error_contains="object of type 'int' has no len()")
case("f_upper_non_string", "{{ 5|upper }}|{{ [1]|upper }}|{{ none|lower }}")
case("f_indent_non_string", "{{ 5|indent }}", error_contains="unsupported operand type(s) for +=: 'int' and 'str'")
case("f_indent_multiline_input", "{{ s|indent(4, true) }}", {"s": "line1\nline2\n\nline4\n"})
case("f_capitalize_title_input", "{{ s|capitalize }}|{{ s|title }}", {"s": "hELLO wORLD"})
case("f_string_of_dict", "{{ d|string }}", {"d": {"k": "v", "n": 1}})
case("f_int_bases", "{{ '0b101'|int(0, 2) }}|{{ '101'|int(base=2) }}|{{ '0o17'|int(base=8) }}|{{ '-12'|int }}|{{ '+5'|int }}|{{ '1__0'|int }}|{{ ''|int }}|{{ '12abc'|int }}")
case("f_float_forms", "{{ ' 1.5\\n'|float }}|{{ '-.5'|float }}|{{ '1e-3'|float }}|{{ '1_0.5'|float }}|{{ 'Infinity'|float }}|{{ '1.5x'|float(-1) }}")
case("f_round_more", "{{ 1.005|round(2) }}|{{ 1234.5678|round(-1) }}|{{ 0.5|round }}|{{ 1.5|round }}|{{ -0.5|round }}|{{ 2.5|round(0, 'floor') }}|{{ 10|round(1, 'ceil') }}")
case("f_round_bad_method", "{{ 1|round(method='x') }}", error_contains="method must be common, ceil or floor")
case("f_wordcount_unicode", "{{ 'héllo wörld 한국어 a-b'|wordcount }}")
case("f_batch_generator", "{% for row in range(5)|batch(2) %}{{ row }}{% endfor %}")
case("f_reverse_generator", "{{ [1, 2, 3]|select|reverse }}")
case("f_list_of_string_input", "{{ s|list }}", {"s": "añb"})
case("f_last_generator", "{{ [1]|select|last }}", error_contains="'generator' object is not reversible")
case("f_abs_str", "{{ 'a'|abs }}", error_contains="bad operand type for abs(): 'str'")
case("f_format_dict", "{{ '%(a)s-%(b)05.1f'|format(a='x', b=2.25) }}")
case("f_format_mixed_args", "{{ '%s'|format(1, a=2) }}", error_contains="can't handle positional and keyword arguments at the same time")
case("f_items_non_mapping", "{{ [1]|items|list }}", error_contains="Can only get item pairs from a mapping.")
case("f_dictsort_bad_by", "{{ {}|dictsort(by='x') }}", error_contains='You can only sort by either "key" or "value"')
case("f_truncate_more", "{{ 'a b c d e f g h i j k l m'|truncate(10, leeway=0) }}|{{ 'abcdefghijklmnop'|truncate(10, false, '…', 0) }}")
case("f_center_unicode", "[{{ 'é'|center(4) }}][{{ '한'|center(3) }}]")
case("f_escape_quotes", "{{ \"a'b\\\"c\"|e }}")
case("f_unknown_map_filter", "{{ [1]|map('nope')|list }}", error_contains="No filter named 'nope'.")
case("f_unknown_select_test", "{{ [1]|select('nope')|list }}", error_contains="No test named 'nope'.")
case("f_filter_wrong_args", "{{ 'a'|trim(1, 2) }}", error_contains="positional argument")
case("f_join_attribute_missing", "{{ [{}]|join(',', attribute='x') }}|")

# Edge cases: string methods and formatting
case("m_unicode_case", "{{ 'straße'.upper() }}|{{ 'İ'.lower()|length }}|{{ 'ΣΑΣ ΟΔΟΣ'.lower() }}|{{ 'ǆemal'.capitalize() }}|{{ 'ǆemal'.title() }}|{{ 'ﬁne'.upper() }}|{{ 'hello123world'.title() }}|{{ 'aBc'.swapcase() }}")
case("m_unicode_predicates", "{{ '٣'.isdigit() }}|{{ 'Ⅻ'.isnumeric() }}|{{ 'é'.isalpha() }}|{{ '\\u2003'.isspace() }}|{{ 'Ab'.istitle() }}|{{ 'x1'.isidentifier() }}|{{ '1x'.isidentifier() }}|{{ 'é'.isascii() }}")
case("m_strip_chars_unicode", "[{{ '¡¡hola!!'.strip('¡!') }}][{{ '\\u3000x\\u3000'.strip() }}]")
case("m_split_unicode_ws", "{{ 'a\\u3000b\\u00a0c\\u200bd'.split() }}")
case("m_splitlines_keepends", "{{ 'a\\r\\nb\\rc'.splitlines(keepends=true) }}")
case("m_find_unicode", "{{ '한국어 text'.find('text') }}|{{ '한국어'.index('어') }}|{{ 'aaa'.count('') }}|{{ 'abc'.find('') }}|{{ 'abc'.rfind('') }}")
case("m_startswith_errors", "{{ 'a'.startswith(1) }}", error_contains="startswith first arg must be str or a tuple of str, not int")
case("m_format_more", "{{ '{:>{w}}|'.format('x', w=5) }}{{ '{:,.2f}'.format(1234567.891) }}|{{ '{:_b}'.format(10) }}|{{ '{:08.3f}'.format(-3.14159) }}|{{ '{:=+8}'.format(5) }}|{{ '{:^10.3}'.format('abcdef') }}|{{ '{:c}'.format(9731) }}|{{ '{:o}{:X}'.format(8, 255) }}|{{ '{:.2e}'.format(0.000123) }}|{{ '{:%}'.format(0.5) }}|{{ '{}'.format(none) }}|{{ '{}'.format([1]) }}|{{ '{:d}'.format(true) }}|{{ '{}'.format(true) }}")
case("m_format_attr_lookup", "{{ '{0.role}: {0.content}'.format(m) }}|{{ '{m[role]}'.format(m=m) }}", {"m": {"role": "user", "content": "hi"}})
case("m_format_bad_spec", "{{ '{:d}'.format('x') }}", error_contains="Unknown format code 'd' for object of type 'str'")
case("m_format_unmatched", "{{ '{'.format() }}", error_contains="Single '{' encountered in format string")
case("m_format_manual_auto", "{{ '{0}{}'.format(1, 2) }}", error_contains="cannot switch from manual field specification to automatic field numbering")
case("m_format_missing_key", "{{ '{x}'.format(y=1) }}", error_contains="'x'")
case("percent_operator", "{{ '%s and %s' % ('a', 'b') }}|{{ '%d%%' % 50 }}|{{ '%s' % [1, 2] }}|{{ '%(k)s' % {'k': 'v'} }}|{{ '%.2f' % 2 }}|{{ '%5s|%-5s|' % ('ab', 'cd') }}|{{ '%s' % none }}")
case("percent_errors", "{{ '%s %s' % ('a',) }}", error_contains="not enough arguments for format string")
case("percent_extra_args", "{{ 'x' % 5 }}", error_contains="not all arguments converted during string formatting")
case("percent_bad_char", "{{ '%q' % 1 }}", error_contains="unsupported format character 'q' (0x71) at index 1")
case("m_dict_copy_get", "{{ d.copy() }}|{{ d.get('a', 'x') }}|{{ d.get(['unhashable']) }}", {"d": {"a": None}}, error_contains="unhashable type: 'list'")
case("m_items_on_input", "{% for k, v in tool.parameters.properties.items() %}{{ k }}:{{ v.type }};{% endfor %}",
     {"tool": {"parameters": {"properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}})
case("m_dict_items_key_shadow", "{{ d.items is callable }}|{{ d['items'] }}|{{ d.values()|list }}", {"d": {"items": [1], "values": 2}},
     error_contains=None)

# Found by differential_check.py
case("lazy_generator_errors", "[{{ 5|select|first is defined }}][{{ 5|reject('none') is iterable }}][{% set g = 5|map('upper') %}ok]")
case("lazy_generator_error_on_use", "{{ 5|select|list }}", error_contains="'int' object is not iterable")
case("generator_repr_names", "{{ [1]|select }}|{{ [1]|map('string') }}|{{ {}|items }}|{{ [1]|unique }}|{{ [1]|batch(1) }}|{{ [1]|slice(1) }}|{{ [1]|reverse }}|{{ (1,)|reverse }}|{{ range(2)|reverse }}|{{ {'a': 1}|reverse }}|{{ nothing|reverse }}")
case("truncate_non_string", "{{ d|truncate(5) }}|{{ [1, 2]|truncate(5) }}", {"d": {"a": 1}})
case("percent_list_mapping_quirk", "{{ 'no specs' % [1, 2] }}|{{ 'no specs' % nothing }}|{{ 'no specs' % {'a': 1} }}")
case("const_slice_folding", "[{{ 3[:-1] }}][{{ (100|float)[1:3] }}][{{ ('a' is lower)[:-1] }}][{{ (3[1:]|string) }}][{{ ('abc' or x)[1.5:] }}]")
case("const_slice_not_in_if", "{% if 3[:-1] %}{% endif %}", error_contains="'int' object is not subscriptable")
case("const_slice_in_set", "{% set x = 'abc'[1.5:] %}", error_contains="slice indices must be integers or None or have an __index__ method")
case("slice_non_sequence", "{{ n[1:] }}", {"n": 5}, error_contains="'int' object is not subscriptable")
case("slice_dict", "{{ d[1:] }}", {"d": {}}, error_contains="unhashable type: 'slice'")
case("undefined_dunder", "[{{ nothing.__class__ }}][{{ 'abc'.a.__class__ }}][{{ nothing.__nope__ }}]")

# Realistic: more templates
QWEN3 = """{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if messages[0].role == 'system' %}
        {{- messages[0].content + '\\n\\n' }}
    {%- endif %}
    {{- "# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>" }}
    {%- for tool in tools %}
        {{- "\\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}\\n</tool_call><|im_end|>\\n" }}
{%- else %}
    {%- if messages[0].role == 'system' %}
        {{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}
    {%- endif %}
{%- endif %}
{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" and message.content is string and not(message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}
        {%- set ns.multi_step_tool = false %}
        {%- set ns.last_query_index = index %}
    {%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- if message.content is string %}
        {%- set content = message.content %}
    {%- else %}
        {%- set content = '' %}
    {%- endif %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>' + '\\n' }}
    {%- elif message.role == "assistant" %}
        {%- set reasoning_content = '' %}
        {%- if message.reasoning_content is string %}
            {%- set reasoning_content = message.reasoning_content %}
        {%- else %}
            {%- if '</think>' in content %}
                {%- set reasoning_content = content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') %}
                {%- set content = content.split('</think>')[-1].lstrip('\\n') %}
            {%- endif %}
        {%- endif %}
        {%- if loop.index0 > ns.last_query_index %}
            {%- if loop.last or (not loop.last and reasoning_content) %}
                {{- '<|im_start|>' + message.role + '\\n<think>\\n' + reasoning_content.strip('\\n') + '\\n</think>\\n\\n' + content.lstrip('\\n') }}
            {%- else %}
                {{- '<|im_start|>' + message.role + '\\n' + content }}
            {%- endif %}
        {%- else %}
            {{- '<|im_start|>' + message.role + '\\n' + content }}
        {%- endif %}
        {%- if message.tool_calls %}
            {%- for tool_call in message.tool_calls %}
                {%- if (loop.first and content) or (not loop.first) %}
                    {{- '\\n' }}
                {%- endif %}
                {%- if tool_call.function %}
                    {%- set tool_call = tool_call.function %}
                {%- endif %}
                {{- '<tool_call>\\n{"name": "' }}
                {{- tool_call.name }}
                {{- '", "arguments": ' }}
                {%- if tool_call.arguments is string %}
                    {{- tool_call.arguments }}
                {%- else %}
                    {{- tool_call.arguments | tojson }}
                {%- endif %}
                {{- '}\\n</tool_call>' }}
            {%- endfor %}
        {%- endif %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role == "tool" %}
        {%- if loop.first or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\\n<tool_response>\\n' }}
        {{- content }}
        {{- '\\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\\n\\n</think>\\n\\n' }}
    {%- endif %}
{%- endif %}"""
QWEN3_MSGS = [{"role": "system", "content": "sys"}, {"role": "user", "content": "q1"},
              {"role": "assistant", "content": "<think>\nthinking 1\n</think>\n\nanswer 1"},
              {"role": "user", "content": "q2"},
              {"role": "assistant", "content": "<think>\nthinking 2\n</think>\n\n", "tool_calls": [{"function": {"name": "f", "arguments": "{\"a\": 1}"}}]},
              {"role": "tool", "content": "result"},
              {"role": "assistant", "content": "final"}]
case("qwen3", QWEN3, {"messages": QWEN3_MSGS, "tools": TOOLS, "add_generation_prompt": True, "enable_thinking": False})
case("qwen3_no_tools", QWEN3, {"messages": QWEN3_MSGS[:4], "add_generation_prompt": True})
HERMES = """{%- macro json_to_python_type(json_spec) %}
{%- set basic_type_map = {
    "string": "str",
    "number": "float",
    "integer": "int",
    "boolean": "bool"
} %}

{%- if basic_type_map[json_spec.type] is defined %}
    {{- basic_type_map[json_spec.type] }}
{%- elif json_spec.type == "array" %}
    {{- "list[" +  json_to_python_type(json_spec|items) + "]"}}
{%- elif json_spec.type == "object" %}
    {%- if json_spec.additionalProperties is defined %}
        {{- "dict[str, " + json_to_python_type(json_spec.additionalProperties) + ']'}}
    {%- else %}
        {{- "dict" }}
    {%- endif %}
{%- elif json_spec.type is iterable %}
    {{- "Union[" }}
    {%- for t in json_spec.type %}
      {{- json_to_python_type({"type": t}) }}
      {%- if not loop.last %}
        {{- "," }}
    {%- endif %}
    {%- endfor %}
    {{- "]" }}
{%- else %}
    {{- "Any" }}
{%- endif %}
{%- endmacro %}

{{- bos_token }}
{{- "You are a function calling AI model. Here are the available tools: <tools> " }}
{%- for tool in tools %}
    {%- if tool.function is defined %}
        {%- set tool = tool.function %}
    {%- endif %}
    {{- '{"type": "function", "function": ' }}
    {{- '{"name": "' + tool.name + '", ' }}
    {{- '"description": "' + tool.name + '(' }}
    {%- for param_name, param_fields in tool.parameters.properties|items %}
        {{- param_name + ": " + json_to_python_type(param_fields) }}
        {%- if not loop.last %}
            {{- ", " }}
        {%- endif %}
    {%- endfor %}
    {{- ")" }}
    {%- if tool.return is defined %}
        {{- " -> " + json_to_python_type(tool.return) }}
    {%- endif %}
    {{- " - " + tool.description + "\\n\\n" }}
    {%- for param_name, param_fields in tool.parameters.properties|items %}
        {%- if loop.first %}
            {{- "    Args:\\n" }}
        {%- endif %}
        {{- "        " + param_name + "(" + json_to_python_type(param_fields) + "): " + param_fields.description|trim }}
    {%- endfor %}
    {{- '", "parameters": ' }}
    {%- if tool.parameters.properties | length == 0 %}
        {{- "{}" }}
    {%- else %}
        {{- tool.parameters|tojson }}
    {%- endif %}
    {{- "}" }}
    {%- if not loop.last %}
        {{- "\\n" }}
    {%- endif %}
{%- endfor %}
{{- " </tools>" }}
{%- for message in messages %}
    {%- if message.role == "user" or message.role == "system" or (message.role == "assistant" and message.tool_calls is not defined) %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}
"""
HERMES_TOOLS = [{"type": "function", "function": {"name": "search", "description": "Search the web",
                 "parameters": {"type": "object", "properties": {
                     "query": {"type": "string", "description": "  what to find "},
                     "limit": {"type": ["integer", "number"], "description": "max results"},
                     "tags": {"type": "array", "items": {"type": "string"}, "description": "tags"},
                     "opts": {"type": "object", "additionalProperties": {"type": "boolean"}, "description": "options"}}}}}]
case("hermes_tools", HERMES, {"messages": MSGS, "tools": HERMES_TOOLS, "bos_token": "<s>", "add_generation_prompt": True})
LLAMA32_DATE = """{{- bos_token }}
{%- if not date_string is defined %}
    {%- if strftime_now is defined %}
        {%- set date_string = strftime_now("%d %b %Y") %}
    {%- else %}
        {%- set date_string = "26 Jul 2024" %}
    {%- endif %}
{%- endif %}
{{- "<|start_header_id|>system<|end_header_id|>\\n\\n" }}
{{- "Cutting Knowledge Date: December 2023\\n" }}
{{- "Today Date: " + date_string + "\\n\\n" }}
{%- for message in messages %}
{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' }}
{%- endfor %}"""
case("llama32_strftime", LLAMA32_DATE, {"messages": MSGS[1:2], "bos_token": "<|begin_of_text|>"})

# ---------------------------------------------------------------------------------------------

def error_line(exc):
    if isinstance(exc, jinja2.exceptions.TemplateSyntaxError):
        return exc.lineno
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<template>":
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


# Object addresses in reprs ("<generator object f at 0x7f...>") differ from run to run; the
# interpreter prints the repr without them, and so do the expectations.
ADDRESS = re.compile(r" at 0x[0-9a-f]+>")


def run(env, c):
    out = {"name": c["name"], "template": c["template"], "input": c["input"]}
    try:
        template = env.from_string(c["template"])
        out["expected"] = ADDRESS.sub(">", template.render(**c["input"]))
        if c["error_contains"] is not None:
            sys.exit(f"{c['name']}: expected an error, jinja2 rendered {out['expected']!r}")
    except jinja2.exceptions.TemplateError as e:
        message = e.message if isinstance(e, jinja2.exceptions.TemplateSyntaxError) else str(e)
        out["error_contains"] = c["error_contains"] or message
        if c["error_contains"] is not None and c["error_contains"] not in message:
            sys.exit(f"{c['name']}: jinja2's error {message!r} lacks {c['error_contains']!r}")
        out["error_line"] = error_line(e)
    except Exception as e:  # Python errors (TypeError...) pass through jinja2 unchanged
        message = str(e)
        out["error_contains"] = c["error_contains"] or message
        if c["error_contains"] is not None and c["error_contains"] not in message:
            sys.exit(f"{c['name']}: jinja2's error {message!r} lacks {c['error_contains']!r}")
        out["error_line"] = error_line(e)
    return out


def main():
    assert jinja2.__version__.startswith("3.1"), jinja2.__version__
    env = make_environment()
    names = set()
    results = []
    for c in CASES:
        assert c["name"] not in names, c["name"]
        names.add(c["name"])
        results.append(run(env, c))
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cases.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(results, f, ensure_ascii=False, indent=1)
        f.write("\n")
    errors = sum("error_contains" in r for r in results)
    print(f"wrote {path}: {len(results)} cases ({errors} errors)")


if __name__ == "__main__":
    main()
