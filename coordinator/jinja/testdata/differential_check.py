#!/usr/bin/env python3
"""Random differential testing against Python's jinja2 (a development tool, not a test).

Generates random templates from a small grammar of chat-template idioms (filters, tests,
methods, operators, loops, macros, whitespace control), renders each with jinja2 in
transformers' environment (make_cases.py's) and with the C++ interpreter
(//coordinator/jinja:render_lines), and prints every disagreement as a case ready to paste
into make_cases.py.

    bazel build //coordinator/jinja:render_lines
    python3 coordinator/jinja/testdata/differential_check.py --count 5000 --seed 1
"""
import argparse
import json
import os
import random
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_cases  # noqa: E402

CONTEXT = {
    "s": "  Hello, World! <|im_end|>\n",
    "u": "héllo wörld 한국어 ß ǆ ΣΑΣ",
    "e": "",
    "n": 7,
    "neg": -3,
    "f": 2.5,
    "z": 0,
    "t": True,
    "nil": None,
    "l": [3, 1, 2],
    "sl": ["b", "A", "a", "c"],
    "d": {"b": 1, "a": [1, 2], "items": "shadow", "role": "user"},
    "msgs": [{"role": "system", "content": "sys"}, {"role": "user", "content": "  hi  "},
             {"role": "assistant", "content": "<think>r</think>ok", "tool_calls": [
                 {"function": {"name": "f", "arguments": {"x": 1}}}]}],
}

VARS = list(CONTEXT) + ["nope", "loop_none"]
STRINGS = ["'a'", "'abc'", "''", "' x '", "'a,b,,c'", "'<|im_start|>'", "'\\n'", "'é'", "'it\\'s'",
           "\"q\\\"\"", "'%s-%d'", "'{}:{}'", "'AbC'"]
NUMBERS = ["0", "1", "2", "-1", "3", "10", "1.5", "0.1", "-2.5", "1e3", "100"]
LITERALS = STRINGS + NUMBERS + ["none", "true", "false", "[]", "[1, 2]", "['x', 'y']", "{}",
                                "{'k': 'v'}", "(1, 'a')", "range(3)", "namespace(a=1)"]
ATTRS = ["role", "content", "a", "b", "items", "0", "1", "tool_calls", "real", "upper",
         "nope"]
METHODS = ["format(x=1)", "split(maxsplit=1)", "ljust(6, '.')", "rfind('o')", "rindex('l')",
           "startswith(('x', ' '))", "count('a', 1)", "__class__", "_x", "title()",
           "strip()", "lstrip()", "rstrip()", "strip('x ')", "upper()", "lower()", "title()",
           "capitalize()", "split()", "split(',')", "split(',', 1)", "rsplit(None, 1)",
           "splitlines()", "startswith('a')", "endswith('!')", "find('l')", "count('l')",
           "replace('l', 'L')", "items()", "keys()", "values()", "get('a')", "get('x', 0)",
           "format(1, 2)", "isdigit()", "isalpha()", "index(1)", "join(['1', '2'])", "zfill(5)",
           "center(9, '*')", "partition(',')", "removeprefix('  ')", "swapcase()"]
FILTERS = ["tojson(sort_keys=true)", "tojson(separators=(',', ':'))", "dictsort(by='value')",
           "groupby('role')|list", "format('x')", "indent(first=true, blank=true)",
           "replace('', '-')", "sort(reverse=true)|join(',')", "first|default('F')",
           "map('length')|list", "select('defined')|list", "rejectattr('role', 'in', ['user'])|list",
           "upper", "lower", "trim", "length", "count", "first", "last", "list", "sort",
           "reverse", "unique", "join", "join(', ')", "string", "int", "float", "abs", "round",
           "round(1)", "title", "capitalize", "tojson", "tojson(indent=1)", "default('D')",
           "default('D', true)", "d", "e", "safe", "wordcount", "sum", "min", "max", "items",
           "dictsort", "indent(2)", "indent(2, true)", "center(8)", "replace('a', 'b')",
           "format(1)", "batch(2)", "slice(2)", "map('upper')", "map('string')",
           "map(attribute='role')", "select", "reject", "select('odd')", "reject('none')",
           "selectattr('role')", "selectattr('role', 'eq', 'user')", "rejectattr('content')",
           "groupby('role')", "truncate(5)", "unique(attribute='role')",
           "sort(attribute='role')", "sum(attribute='a')", "join(attribute='role')",
           "attr('upper')", "list|length", "map('trim')|list", "select|list", "reverse|list"]
TESTS = ["defined", "undefined", "none", "string", "number", "integer", "float", "mapping",
         "sequence", "iterable", "odd", "even", "divisibleby 2", "divisibleby(3)",
         "sameas none", "eq 1", "ne 'a'", "lt 3", "ge 2", "in [1, 2]", "in 'abc'", "lower",
         "upper", "true", "false", "boolean", "callable"]
SUBSCRIPTS = ["0", "1", "-1", "2", "'role'", "'a'", "1:", ":-1", "::-1", "1:3", "::2"]
OPS = ["+", "-", "*", "/", "//", "%", "**", "~", "==", "!=", "<", "<=", ">", ">=", "in",
       "not in", "and", "or"]


def expr(r, depth=0):
    k = r.random()
    if depth > 2 or k < 0.3:
        return r.choice(LITERALS) if r.random() < 0.4 else r.choice(VARS)
    if k < 0.42:
        return f"{expr(r, depth + 1)}.{r.choice(ATTRS)}"
    if k < 0.52:
        return f"{expr(r, depth + 1)}.{r.choice(METHODS)}"
    if k < 0.6:
        return f"{expr(r, depth + 1)}[{r.choice(SUBSCRIPTS)}]"
    if k < 0.75:
        return f"({expr(r, depth + 1)}|{r.choice(FILTERS)})"
    if k < 0.83:
        return f"({expr(r, depth + 1)} {r.choice(OPS)} {expr(r, depth + 1)})"
    if k < 0.88:
        return f"({expr(r, depth + 1)} is {r.choice(['', 'not '])}{r.choice(TESTS)})"
    if k < 0.92:
        return f"(not {expr(r, depth + 1)})"
    if k < 0.96:
        return f"({expr(r, depth + 1)} if {expr(r, depth + 1)} else {expr(r, depth + 1)})"
    return f"[{expr(r, depth + 1)}, {expr(r, depth + 1)}]"


def ws(r):
    return r.choice(["", "", "", " ", "\n", "  \n", "\n  ", "\t", "\n\n"])


def tag(r, body):
    left = r.choice(["", "", "", "-", "+"])
    right = r.choice(["", "", "", "-", "+"])
    return "{%" + left + " " + body + " " + right + "%}"


def var(r, body):
    return "{{" + r.choice(["", "", "-"]) + " " + body + " " + r.choice(["", "", "-"]) + "}}"


def stmt(r, depth=0):
    k = r.random()
    if depth > 2 or k < 0.35:
        return ws(r) + var(r, expr(r)) + ws(r)
    if k < 0.45:
        return ws(r) + r.choice(["text", "x y", "<|im_end|>", "é"]) + ws(r)
    if k < 0.6:
        return (tag(r, f"if {expr(r)}") + block(r, depth) +
                (tag(r, f"elif {expr(r)}") + block(r, depth) if r.random() < 0.3 else "") +
                (tag(r, "else") + block(r, depth) if r.random() < 0.4 else "") + tag(r, "endif"))
    if k < 0.75:
        target = r.choice(["x", "x", "k, v", "m"])
        cond = f" if {expr(r)}" if r.random() < 0.2 else ""
        inner = block(r, depth)
        if r.random() < 0.4:
            inner += var(r, r.choice(["loop.index", "loop.first", "loop.last", "loop.length",
                                      "loop.revindex", "loop.previtem", "loop.cycle('a', 'b')"]))
        if r.random() < 0.15:
            inner += tag(r, "if loop.index > 1") + tag(r, r.choice(["break", "continue"])) + tag(r, "endif")
        return (tag(r, f"for {target} in {expr(r)}{cond}") + inner +
                (tag(r, "else") + block(r, depth) if r.random() < 0.2 else "") + tag(r, "endfor"))
    if k < 0.85:
        name = r.choice(["a", "b", "x"])
        return tag(r, f"set {name} = {expr(r)}") + ws(r) + var(r, name)
    if k < 0.9:
        return tag(r, "set ns = namespace(c=0)") + tag(r, "for i in l") + tag(r, "set ns.c = ns.c + i") + tag(r, "endfor") + var(r, "ns.c")
    if k < 0.95:
        return (tag(r, "macro mac(p, q=1)") + block(r, depth) + var(r, "p ~ q") + tag(r, "endmacro") +
                var(r, f"mac({expr(r)})"))
    k = r.random()
    if k < 0.2:
        return tag(r, "filter upper") + block(r, depth) + tag(r, "endfilter")
    if k < 0.35:
        return (tag(r, "macro w(tag='b')") + "<" + var(r, "tag") + ">" + var(r, "caller()") +
                tag(r, "endmacro") + tag(r, "call w(" + r.choice(["", "'i'"]) + ")") +
                block(r, depth) + tag(r, "endcall"))
    if k < 0.5:
        iterable = r.choice(["msgs", "[{'c': [{'c': []}]}]", "d.items()"])
        return (tag(r, "for item in " + iterable + " recursive") + var(r, "loop.depth") +
                var(r, "item.c is defined and loop(item.c) or ''") + tag(r, "endfor"))
    if k < 0.6:
        return tag(r, "set blk") + block(r, depth) + tag(r, "endset") + var(r, "blk|length")
    if k < 0.7:
        return tag(r, f"with w = {expr(r)}") + var(r, "w") + block(r, depth) + tag(r, "endwith")
    if k < 0.8:
        return tag(r, "raw") + r.choice(["{{ x }}", "{% if %}", "a\n  b"]) + tag(r, "endraw")
    if k < 0.9:
        return "{#" + r.choice(["", "-", "+"]) + " c " + r.choice(["", "-", "+"]) + "#}" + ws(r)
    return (tag(r, "macro v()") + var(r, "varargs") + var(r, "kwargs") + tag(r, "endmacro") +
            var(r, f"v({expr(r)}, k={expr(r)})"))


def block(r, depth):
    return "".join(stmt(r, depth + 1) for _ in range(r.randint(1, 3)))


def template(r):
    return "".join(stmt(r) for _ in range(r.randint(1, 4))) + r.choice(["", "\n", "\n\n"])


# Known, documented divergences: memory addresses in reprs, and big ints.
ADDRESS = re.compile(r" at 0x[0-9a-f]+>", re.IGNORECASE)


def comparable(text):
    return ADDRESS.sub(">", text)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--tool", default="bazel-bin/coordinator/jinja/render_lines")
    args = parser.parse_args()
    r = random.Random(args.seed)
    env = make_cases.make_environment()
    tool = subprocess.Popen([args.tool], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    mismatches = 0
    for i in range(args.count):
        source = template(r)
        py_out = py_err = None
        try:
            py_out = env.from_string(source).render(**CONTEXT)
        except Exception as e:  # noqa: BLE001 - any jinja2/Python error is a refusal
            py_err = f"{type(e).__name__}: {e}"
        tool.stdin.write(json.dumps({"template": source, "input": CONTEXT}) + "\n")
        tool.stdin.flush()
        reply = json.loads(tool.stdout.readline())
        cc_out, cc_err = reply.get("output"), reply.get("error")
        if py_err and "int too large" in py_err:
            continue
        if cc_err and "64 bits" in cc_err:
            continue
        same = (py_err is not None and cc_err is not None) or (
            py_out is not None and cc_out is not None and comparable(py_out) == comparable(cc_out))
        if not same:
            mismatches += 1
            print(f"--- mismatch {mismatches} (#{i})\ncase({json.dumps('diff_' + str(i))}, {json.dumps(source)}, CONTEXT)")
            print(f"  jinja2: {py_out!r} {py_err or ''}\n  c++:    {cc_out!r} {cc_err or ''}")
    tool.stdin.close()
    print(f"{args.count} templates, {mismatches} mismatches")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
