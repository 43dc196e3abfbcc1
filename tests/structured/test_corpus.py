"""Checks tests/structured/corpus.json: every case is well formed and its `example` is valid.

  python3 -m pytest -q tests/structured/test_corpus.py

json_schema: the schema is a valid Draft 2020-12 schema and the example validates with
             format checking; the example is written the way XGrammar's default JSON grammar
             prints (json.dumps separators ", " and ": ", properties in schema order).
json_object: the example is a JSON object.
regex:       re.fullmatch (ASCII: XGrammar's \\d, \\w are ASCII classes).
choice:      the example is one of the strings.
grammar:     the example is in the language of the GBNF-style grammar (small matcher below,
             supports the subset the corpus uses: literals, [classes], groups, |, *, +, ?).
If the structured-output venv is importable (xgrammar), examples are also fed to XGrammar.
"""

import json
import os
import re

import jsonschema
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS_PATH = os.path.join(HERE, "corpus.json")
WALKS_PATH = os.path.join(HERE, "walks.json")

with open(CORPUS_PATH) as _f:
    CORPUS = json.load(_f)

KINDS = {"json_schema", "json_object", "regex", "choice", "grammar"}


def _cases(kind):
    return [pytest.param(c, id=c["name"]) for c in CORPUS if c["kind"] == kind]


def test_corpus_shape():
    assert isinstance(CORPUS, list)
    names = [c["name"] for c in CORPUS]
    assert len(names) == len(set(names)), "duplicate case names"
    for c in CORPUS:
        assert set(c) == {"name", "kind", "constraint", "prompt", "example"}, c["name"]
        assert c["kind"] in KINDS, c["name"]
        assert isinstance(c["prompt"], str) and c["prompt"].strip(), c["name"]
        assert isinstance(c["example"], str) and c["example"], c["name"]
        assert re.fullmatch(r"[a-z0-9_]+", c["name"]), c["name"]
    count = {k: sum(1 for c in CORPUS if c["kind"] == k) for k in KINDS}
    assert count["json_schema"] >= 14
    assert count["json_object"] >= 1
    assert count["regex"] >= 4
    assert count["choice"] >= 2
    assert count["grammar"] >= 3


@pytest.mark.parametrize("case", _cases("json_schema"))
def test_json_schema_example(case):
    schema = case["constraint"]
    # The draft the schema declares ($schema), 2020-12 where it declares none.
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    cls.check_schema(schema)
    value = json.loads(case["example"])
    validator = cls(schema, format_checker=jsonschema.FormatChecker())
    errors = sorted(validator.iter_errors(value), key=lambda e: list(e.path))
    assert not errors, [f"{list(e.path)}: {e.message}" for e in errors]
    # Same text XGrammar's default schema grammar produces (and that the C++ walk replays).
    assert case["example"] == json.dumps(value), "example is not in json.dumps form"


@pytest.mark.parametrize("case", _cases("json_object"))
def test_json_object_example(case):
    assert case["constraint"] is None
    value = json.loads(case["example"])
    assert isinstance(value, dict)
    assert case["example"] == json.dumps(value)


@pytest.mark.parametrize("case", _cases("regex"))
def test_regex_example(case):
    assert isinstance(case["constraint"], str)
    assert re.fullmatch(case["constraint"], case["example"], re.ASCII), case["example"]


@pytest.mark.parametrize("case", _cases("choice"))
def test_choice_example(case):
    choices = case["constraint"]
    assert isinstance(choices, list) and len(choices) >= 2
    assert all(isinstance(s, str) and s for s in choices)
    assert len(set(choices)) == len(choices)
    assert case["example"] in choices


# ---------------------------------------------------------------------------------------
# A small GBNF-subset matcher (no left recursion) used to check the grammar examples.
# ---------------------------------------------------------------------------------------

class _Gbnf:
    TOKEN = re.compile(r"""
        (?P<ws>[ \t]+|\#[^\n]*) |
        (?P<nl>\n) |
        (?P<defn>::=) |
        (?P<lit>"(?:[^"\\]|\\.)*") |
        (?P<cls>\[(?:[^\]\\]|\\.)*\]) |
        (?P<name>[A-Za-z_][A-Za-z0-9_.-]*) |
        (?P<op>[()|*+?])
    """, re.VERBOSE)

    def __init__(self, text):
        toks = []
        pos = 0
        while pos < len(text):
            m = self.TOKEN.match(text, pos)
            if not m:
                raise ValueError(f"bad grammar text at {pos}: {text[pos:pos + 20]!r}")
            pos = m.end()
            if m.lastgroup != "ws":
                toks.append((m.lastgroup, m.group(0)))
        # split into rules: NAME ::= ... up to the next NAME ::=
        self.rules = {}
        toks = [t for t in toks if t[0] != "nl"]
        starts = [j for j in range(len(toks) - 1)
                  if toks[j][0] == "name" and toks[j + 1][0] == "defn"]
        for k, j in enumerate(starts):
            end = starts[k + 1] if k + 1 < len(starts) else len(toks)
            self._toks, self._i = toks[j + 2:end], 0
            self.rules[toks[j][1]] = self._alt()
            assert self._i == len(self._toks), f"trailing tokens in rule {toks[j][1]}"

    # expression parser -> nested tuples
    def _peek(self):
        return self._toks[self._i] if self._i < len(self._toks) else (None, None)

    def _alt(self):
        seqs = [self._seq()]
        while self._peek() == ("op", "|"):
            self._i += 1
            seqs.append(self._seq())
        return ("alt", seqs)

    def _seq(self):
        items = []
        while True:
            kind, val = self._peek()
            if kind is None or (kind == "op" and val in "|)"):
                return ("seq", items)
            self._i += 1
            if kind == "lit":
                node = ("lit", json.loads(val))
            elif kind == "cls":
                node = ("cls", self._compile_class(val))
            elif kind == "name":
                node = ("ref", val)
            elif val == "(":
                node = self._alt()
                assert self._peek() == ("op", ")"), "unclosed group"
                self._i += 1
            else:
                raise ValueError(f"unexpected {val!r}")
            kind, val = self._peek()
            if kind == "op" and val in "*+?":
                self._i += 1
                node = ("rep", node, val)
            items.append(node)

    @staticmethod
    def _compile_class(text):
        return re.compile(text)  # the corpus' classes are also valid Python classes

    # matcher: set of end positions
    def _match(self, node, s, pos, depth=0):
        if depth > 200:
            raise RecursionError("grammar too deep")
        kind = node[0]
        if kind == "lit":
            return {pos + len(node[1])} if s.startswith(node[1], pos) else set()
        if kind == "cls":
            return {pos + 1} if pos < len(s) and node[1].fullmatch(s[pos]) else set()
        if kind == "ref":
            return self._match(self.rules[node[1]], s, pos, depth + 1)
        if kind == "seq":
            cur = {pos}
            for item in node[1]:
                cur = set().union(*(self._match(item, s, p, depth + 1) for p in cur)) if cur else cur
            return cur
        if kind == "alt":
            return set().union(*(self._match(x, s, pos, depth + 1) for x in node[1]))
        if kind == "rep":
            inner, op = node[1], node[2]
            if op == "?":
                return {pos} | self._match(inner, s, pos, depth + 1)
            out = set() if op == "+" else {pos}
            frontier = {pos}
            seen = set()
            while frontier:
                nxt = set()
                for p in frontier:
                    for q in self._match(inner, s, p, depth + 1):
                        if q not in seen and q != p:
                            seen.add(q)
                            nxt.add(q)
                out |= nxt
                frontier = nxt
            return out
        raise ValueError(kind)

    def fullmatch(self, s, root="root"):
        return len(s) in self._match(self.rules[root], s, 0)


def test_gbnf_matcher_self_check():
    g = _Gbnf('root ::= a ("," a)*\na ::= [0-9]+ | "x"\n')
    assert g.fullmatch("1,22,x")
    assert not g.fullmatch("1,,2")
    assert not g.fullmatch("")


@pytest.mark.parametrize("case", _cases("grammar"))
def test_grammar_example(case):
    g = _Gbnf(case["constraint"])
    assert "root" in g.rules
    assert g.fullmatch(case["example"]), case["example"]


# ---------------------------------------------------------------------------------------
# Optional: the walks file and XGrammar itself (only where the venv is in use).
# ---------------------------------------------------------------------------------------

def test_walks_cover_corpus():
    if not os.path.exists(WALKS_PATH):
        pytest.skip("walks.json not generated (bench/structured_peer_bench.py --walk_out)")
    with open(WALKS_PATH) as f:
        walks = json.load(f)
    by_name = {w["name"]: w for w in walks["cases"]}
    assert walks["vocab_size"] == 49152 and walks["eos_id"] == 2
    for c in CORPUS:
        assert c["name"] in by_name, c["name"]
        toks = by_name[c["name"]]["tokens"]
        assert toks and all(isinstance(t, int) and 0 <= t < 49152 for t in toks)


def _stand_in(name):
    """xgrammar 0.2.8 imports torch/transformers but its matcher does not need them."""
    import importlib.machinery
    import sys
    import types
    m = types.ModuleType(name)
    m.__spec__ = importlib.machinery.ModuleSpec(name, None)

    def __getattr__(attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return type(attr, (), {"__init__": lambda self, *a, **k: None})

    m.__getattr__ = __getattr__
    sys.modules[name] = m


def _xgrammar_or_skip():
    try:
        import tvm_ffi  # noqa: F401  (must load before any torch stand-in exists)
    except ImportError:
        pytest.skip("xgrammar not importable (use ~/.cache/tpserve/venv-structured)")
    for name in ("torch", "transformers"):
        try:
            __import__(name)
        except ImportError:
            _stand_in(name)
    return pytest.importorskip("xgrammar")


# Schemas XGrammar alone reads otherwise than JSON Schema does, and that tpserve compiles only
# after rewriting them (coordinator/structured/schema_normalize.h): draft-04's boolean
# exclusiveMinimum, keywords beside anyOf. tests/structured/corpus_test.cc walks their examples
# through what tpserve compiles.
NEEDS_NORMALIZING = {"draft04_annotations", "anyof_beside_base_properties"}


@pytest.mark.parametrize("case", [pytest.param(c, id=c["name"]) for c in CORPUS])
def test_example_accepted_by_xgrammar(case):
    xgr = _xgrammar_or_skip()
    if case["name"] in NEEDS_NORMALIZING:
        try:  # XGrammar refuses the schema, or the example
            g = xgr.Grammar.from_json_schema(json.dumps(case["constraint"]))
        except RuntimeError:
            return
        tok = xgr.TokenizerInfo(["<eos>"], vocab_type=xgr.VocabType.RAW, stop_token_ids=[0])
        m = xgr.GrammarMatcher(xgr.GrammarCompiler(tok, max_threads=1).compile_grammar(g),
                               terminate_without_stop_token=True)
        assert not m.accept_string(case["example"]), "XGrammar now reads it as JSON Schema does"
        return
    kind, c = case["kind"], case["constraint"]
    if kind == "json_schema":
        g = xgr.Grammar.from_json_schema(json.dumps(c))
    elif kind == "json_object":
        g = xgr.Grammar.builtin_json_grammar()
    elif kind == "regex":
        g = xgr.Grammar.from_regex(c)
    elif kind == "grammar":
        g = xgr.Grammar.from_ebnf(c)
    else:
        g = xgr.Grammar.from_ebnf("root ::= " + " | ".join(json.dumps(s) for s in c))
    tok = xgr.TokenizerInfo(["<eos>"], vocab_type=xgr.VocabType.RAW, stop_token_ids=[0])
    m = xgr.GrammarMatcher(xgr.GrammarCompiler(tok, max_threads=1).compile_grammar(g),
                           terminate_without_stop_token=True)
    assert m.accept_string(case["example"]), case["example"]
    assert m.is_terminated() or m.accept_token(0)
