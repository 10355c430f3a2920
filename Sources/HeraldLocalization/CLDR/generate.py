#!/usr/bin/env python3
"""Writes PluralRules+CLDR.swift: CLDR's cardinal plural rules as Swift code.

The data is CLDR's, as the PyPI package Babel ships it (its locale data: one
rule text per category per locale, in CLDR's rule syntax). This script parses
those rule texts itself (UTS #35, "Language Plural Rules") and writes one
`switch` case per distinct rule set, plus the tables that map a language tag to
its rule set. Babel's own evaluator is not used here: the tests compare
Herald's generated code with it (PluralRulesBabelTests).

    .build/interop-venv/bin/python Sources/HeraldLocalization/CLDR/generate.py
    .build/interop-venv/bin/python Sources/HeraldLocalization/CLDR/generate.py --check

`--check` writes nothing and exits 1 if the committed file differs from what
the installed Babel's data gives. The Babel version is pinned in
Tests/Interop/setup.sh (BABEL_SPEC); moving to a newer CLDR is: raise the pin,
run this script, commit both.
"""
import os
import re
import sys

import babel
from babel import Locale
from babel import localedata

CATEGORIES = ["zero", "one", "two", "few", "many"]  # CLDR's order; "other" is what is left
OPERANDS = {"n", "i", "v", "w", "f", "t", "c", "e"}
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "PluralRules+CLDR.swift")


def cldr_version():
    try:
        from babel.core import get_cldr_version
        return str(get_cldr_version())
    except ImportError:  # older Babel
        return "unknown"


class RuleSyntaxError(Exception):
    pass


def tokenize(text):
    tokens = re.findall(r"\.\.|!=|=|%|,|[a-z]+|\d+|\S", text)
    return tokens


class Parser:
    """condition := and_condition ('or' and_condition)*
    and_condition := relation ('and' relation)*
    relation := expr ('in' | 'not' 'in' | '=' | '!=' | 'within' | 'not' 'within' | 'is' | 'is' 'not') range_list
    expr := operand (('mod' | '%') value)?
    range_list := (value | value '..' value) (',' ...)*"""

    def __init__(self, text):
        self.tokens = tokenize(text)
        self.pos = 0
        self.text = text

    def peek(self):
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self, expected=None):
        token = self.peek()
        if token is None or (expected is not None and token != expected):
            raise RuleSyntaxError(f"expected {expected or 'more'} at token {self.pos} of {self.text!r}")
        self.pos += 1
        return token

    def parse(self):
        node = self.condition()
        if self.peek() is not None:
            raise RuleSyntaxError(f"unexpected {self.peek()!r} in {self.text!r}")
        return node

    def condition(self):
        parts = [self.and_condition()]
        while self.peek() == "or":
            self.take()
            parts.append(self.and_condition())
        return ("or", parts) if len(parts) > 1 else parts[0]

    def and_condition(self):
        parts = [self.relation()]
        while self.peek() == "and":
            self.take()
            parts.append(self.relation())
        return ("and", parts) if len(parts) > 1 else parts[0]

    def relation(self):
        operand = self.take()
        if operand not in OPERANDS:
            raise RuleSyntaxError(f"unknown operand {operand!r} in {self.text!r}")
        modulus = None
        if self.peek() in ("mod", "%"):
            self.take()
            modulus = int(self.take())
        op = self.take()
        negated = False
        if op == "not":
            negated = True
            op = self.take()
        elif op == "is":
            if self.peek() == "not":
                self.take()
                negated = True
            op = "in"
        elif op == "!=":
            negated = True
            op = "in"
        elif op == "=":
            op = "in"
        if op not in ("in", "within"):
            raise RuleSyntaxError(f"unknown relation {op!r} in {self.text!r}")
        ranges = [self.range_item()]
        while self.peek() == ",":
            self.take()
            ranges.append(self.range_item())
        return ("relation", operand, modulus, op, negated, ranges)

    def range_item(self):
        low = int(self.take())
        if self.peek() == "..":
            self.take()
            return (low, int(self.take()))
        return (low, low)


LIMIT = 10 ** 18  # PluralOperands keeps i, f and t below 2·10^18 (see PluralOperands)


def swift_relation(node):
    _, operand, modulus, op, negated, ranges = node
    for low, high in ranges:
        if high >= LIMIT:
            raise RuleSyntaxError(f"a value of {high} is past what PluralOperands keeps exactly")
    if modulus is not None and LIMIT % modulus != 0:
        raise RuleSyntaxError(f"mod {modulus} does not divide 10^18: PluralOperands keeps only the low 18 digits")
    # n is i plus a fraction; its relations are the integer part's, and "in"
    # (not "within") holds only where n has no fraction (t == 0).
    value = "o.i" if operand == "n" else f"o.{operand}"
    if modulus is not None:
        value = f"{value} % {modulus}"
    if op == "within" and operand == "n":
        # CLDR dropped "within" (v24); no rule of its data uses it on n, whose
        # fraction it would have to compare. Refuse rather than guess.
        raise RuleSyntaxError("'n within' is not supported")
    # On the integer operands (i, v, w, f, t, c, e) "within" is "in".
    tests = []
    for low, high in ranges:
        tests.append(f"{value} == {low}" if low == high else f"({low}...{high}).contains({value})")
    test = " || ".join(tests)
    if operand == "n" and op == "in":
        test = f"o.t == 0 && ({test})" if len(tests) > 1 else f"o.t == 0 && {test}"
    if negated:
        return f"!({test})"
    return test


def swift_condition(node, top=True):
    kind = node[0]
    if kind == "relation":
        text = swift_relation(node)
        needs_parens = not top and ("||" in text or "&&" in text) and not text.startswith("!(")
        return f"({text})" if needs_parens else text
    joiner = " || " if kind == "or" else " && "
    text = joiner.join(swift_condition(part, top=False) for part in node[1])
    return text if top else f"({text})"


def canonical(identifier):
    """Babel's `pt_PT`, `sr_Latn_BA`, `ca_ES_VALENCIA` as Herald's LanguageTag writes them."""
    parts = identifier.split("_")
    language = parts[0].lower()
    script = region = None
    for part in parts[1:]:
        if len(part) == 4 and part.isalpha() and script is None and region is None:
            script = part.title()
        elif region is None and ((len(part) == 2 and part.isalpha()) or (len(part) == 3 and part.isdigit())):
            region = part.upper()
        # else a variant: ignored, as LanguageTag does
    return language, script, region


def tag_string(language, script, region):
    return "-".join(p for p in (language, script, region) if p)


def lookup(tables, language, script, region):
    """What PluralRules.ruleSet(language:script:region:) answers with these tables."""
    by_tag, by_language = tables
    if language in {key.split("-")[0] for key in by_tag}:
        for candidate in (
            tag_string(language, script, region) if script and region else None,
            tag_string(language, None, region) if region else None,
            tag_string(language, script, None) if script else None,
        ):
            if candidate and candidate in by_tag:
                return by_tag[candidate]
    return by_language.get(language, 0)


def main():
    check = "--check" in sys.argv[1:]
    identifiers = sorted(localedata.locale_identifiers(), key=lambda x: (x.count("_"), x))
    rule_sets = [()]  # 0: no rules, "other" only
    index_of = {(): 0}
    locale_rule_set = {}
    for identifier in identifiers:
        rules = Locale.parse(identifier).plural_form.rules
        unknown = set(rules) - set(CATEGORIES)
        if unknown:
            raise SystemExit(f"{identifier}: unknown plural categories {sorted(unknown)}")
        key = tuple((category, rules[category]) for category in CATEGORIES if category in rules)
        if key not in index_of:
            index_of[key] = len(rule_sets)
            rule_sets.append(key)
        locale_rule_set[identifier] = index_of[key]

    by_language = {}
    for identifier in identifiers:
        language, script, region = canonical(identifier)
        if script is None and region is None and identifier.lower() == language:
            by_language[language] = locale_rule_set[identifier]
    by_tag = {}
    changed = True
    while changed:
        changed = False
        for identifier in identifiers:
            language, script, region = canonical(identifier)
            wanted = locale_rule_set[identifier]
            if lookup((by_tag, by_language), language, script, region) != wanted:
                by_tag[tag_string(language, script, region)] = wanted
                changed = True
    for identifier in identifiers:
        if lookup((by_tag, by_language), *canonical(identifier)) != locale_rule_set[identifier]:
            raise SystemExit(f"{identifier}: the tables do not give its rule set")

    users = {}
    for identifier in identifiers:
        users.setdefault(locale_rule_set[identifier], []).append(identifier)

    out = []
    w = out.append
    w("// Generated by Sources/HeraldLocalization/CLDR/generate.py: do not edit.")
    w(f"// CLDR {cldr_version()} cardinal plural rules, from the locale data of Babel {babel.__version__}")
    w(f"// (PyPI), {len(identifiers)} locales, {len(rule_sets)} distinct rule sets.")
    w("")
    w("extension PluralRules {")
    w("    /// The CLDR version the rules were generated from.")
    w(f"    public static let cldrVersion = \"{cldr_version()}\"")
    w("")
    w("    /// Each rule set's categories in CLDR's order, `other` last.")
    w("    static let categoriesOfRuleSet: [[PluralCategory]] = [")
    for index, rule_set in enumerate(rule_sets):
        names = ", ".join(f".{category}" for category, _ in rule_set)
        w(f"        [{names + ', ' if names else ''}.other],  // {index}")
    w("    ]")
    w("")
    w("    /// A language's rule set (languages not here: rule set 0, `other` only).")
    w("    static let ruleSetOfLanguage: [String: UInt8] = [")
    for language in sorted(by_language):
        if by_language[language] != 0:
            w(f"        \"{language}\": {by_language[language]},")
    w("    ]")
    w("")
    w("    /// Tags with a script or region whose rules differ from their language's.")
    w("    static let ruleSetOfTag: [String: UInt8] = [")
    for tag in sorted(by_tag):
        w(f"        \"{tag}\": {by_tag[tag]},")
    w("    ]")
    w("")
    w("    /// The languages with entries in `ruleSetOfTag`.")
    languages_with_tags = sorted({tag.split("-")[0] for tag in by_tag})
    w("    static let languagesWithTagRules: Set<String> = [" + ", ".join(f"\"{x}\"" for x in languages_with_tags) + "]")
    w("")
    w("    /// The category of `o` under rule set `ruleSet`.")
    w("    @usableFromInline")
    w("    static func category(ruleSet: UInt8, _ o: PluralOperands) -> PluralCategory {")
    w("        switch ruleSet {")
    for index, rule_set in enumerate(rule_sets):
        if index == 0:
            continue
        sample = users[index][:6]
        more = f" and {len(users[index]) - len(sample)} more" if len(users[index]) > len(sample) else ""
        w(f"        case {index}:  // {', '.join(sample)}{more}")
        for category, text in rule_set:
            w(f"            // {category}: {text}")
            w(f"            if {swift_condition(Parser(text).parse())} {{ return .{category} }}")
        w("            return .other")
    w("        default:")
    w("            return .other")
    w("        }")
    w("    }")
    w("}")
    text = "\n".join(out) + "\n"
    if check:
        try:
            with open(OUT, encoding="utf-8") as f:
                current = f.read()
        except FileNotFoundError:
            current = ""
        if current != text:
            print(f"{OUT} is not what Babel {babel.__version__}'s data gives: run {sys.argv[0]}", file=sys.stderr)
            sys.exit(1)
        print(f"{OUT}: up to date (CLDR {cldr_version()}, Babel {babel.__version__})")
        return
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {OUT}: {len(rule_sets)} rule sets, {len(by_language)} languages, {len(by_tag)} tags", file=sys.stderr)


if __name__ == "__main__":
    main()
