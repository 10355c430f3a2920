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

from babel import Locale, localedata

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
