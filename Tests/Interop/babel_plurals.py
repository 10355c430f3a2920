#!/usr/bin/env python3
"""Babel's plural category for every locale it knows and every number given.

    babel_plurals.py NUMBERS_FILE

NUMBERS_FILE has one decimal number a line ("21", "1.50", "-0.3"). Prints,
per locale identifier Babel has data for (`pt_PT`, `sr_Latn_BA`…), one line:
the identifier, a tab, then one letter per number in the file's order: z(ero),
o(ne), t(wo), f(ew), m(any) or x (other). Babel (PyPI) evaluates CLDR's rules
itself; PluralRulesBabelTests compares Herald's generated rules with it.
"""
import sys
from decimal import Decimal

import babel.plural
from babel import Locale, localedata

_babel_operands = babel.plural.extract_operands


def extract_operands(source):
    """Babel 2.19.0's operands, with v, w, f and t read as CLDR defines them.

    Babel takes the fraction digits from the end of the Decimal's digit tuple,
    which has no leading zeros: for 0.05 (digits (5,), exponent -2) it gets
    v = 1, not 2, so Latvian's "v = 2 and f % 100 = 11..19" held for 0.0014.
    The digits are padded on the left before that; the rules stay Babel's.
    """
    operands = _babel_operands(source)
    if not isinstance(source, Decimal):
        return operands
    sign, digits, exponent = abs(source).as_tuple()
    if not isinstance(exponent, int) or exponent >= 0 or len(digits) >= -exponent:
        return operands
    fraction = "".join(str(d) for d in digits).rjust(-exponent, "0")
    visible = fraction.rstrip("0")
    n, i, _, _, _, _, c, e = operands
    return n, i, len(fraction), len(visible), int(fraction), int(visible or 0), c, e


# Babel's rules read their operands through this module attribute when compiled.
babel.plural.extract_operands = extract_operands

LETTERS = {"zero": "z", "one": "o", "two": "t", "few": "f", "many": "m", "other": "x"}


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        numbers = [Decimal(line.strip()) for line in f if line.strip()]
    answers = {}  # Babel's rule texts -> the letters (one evaluation per distinct rule set)
    out = sys.stdout
    for identifier in sorted(localedata.locale_identifiers()):
        rule = Locale.parse(identifier).plural_form
        key = tuple(sorted(rule.rules.items()))
        if key not in answers:
            answers[key] = "".join(LETTERS[rule(n)] for n in numbers)
        out.write(f"{identifier}\t{answers[key]}\n")


if __name__ == "__main__":
    main()
