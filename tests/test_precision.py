"""Every relation's tolerance is a level of the float32 error model (nncanon/core/precision.py), and each level
covers the chain of roundings it is named for: no tolerance is a number tuned on one CPU."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import nncanon.families
from nncanon.core import precision
from nncanon.core.relations import Relation


@pytest.mark.parametrize("level", sorted(precision.LEVELS))
def test_each_level_covers_two_orders_of_its_chain(level):
    tolerance, roundings = precision.LEVELS[level]
    assert precision.reordered(roundings) <= tolerance
    assert tolerance < 10 * precision.reordered(roundings), "a level far above its chain hides real errors"


def _relations():
    seen = {}
    for info in pkgutil.iter_modules(nncanon.families.__path__):
        module = importlib.import_module(f"nncanon.families.{info.name}")
        for obj in vars(module).values():
            for relation in getattr(obj, "RELATIONS", ()) if isinstance(obj, type) else ():
                if isinstance(relation, Relation):
                    seen.setdefault(relation.text, relation.tolerance)
    return seen


def test_every_relation_tolerance_is_a_level():
    levels = {tolerance for tolerance, _ in precision.LEVELS.values()}
    relations = _relations()
    assert len(relations) > 50
    odd = {text: tolerance for text, tolerance in relations.items() if tolerance not in levels}
    assert not odd, odd


def test_gamma_refuses_a_meaningless_chain():
    with pytest.raises(ValueError, match="meaningless"):
        precision.gamma(2 ** 24)


def test_the_transformer_lens_comparison_is_one_step():
    from generator.facts import tl_names

    assert tl_names.ATOL == tl_names.RTOL == precision.STEP
