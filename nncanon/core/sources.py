"""Installing, when a model is wrapped, the ``.source`` of every module a value reads an op in, and checking that the
ops are there (a release that moved one makes that value alone unavailable; on a verified release it is the family
module that is wrong)."""

from __future__ import annotations

from typing import Any

from ..guards import releases
from .locators import FamilyMismatch, MissingOp, check_ops


def install_sources(self: Any) -> None:
    """Install the ``.source`` of every module a value reads an op in, and check the ops exist.

    A `.source` first touched mid-trace is not instrumented for that call, so every module's is
    installed now. The ops are checked on one module of each kind of host: the first op always,
    the nested ones when the load serves the value (an eager-only op is absent under sdpa).
    """
    checked: set[tuple] = set()
    for envoy in self._hosts:
        for value in type(envoy).values():
            for module in value.locator.sourced_modules():
                where = f"{self.family}: {envoy._std_path}.{value.name} ({type(envoy).__name__} on " \
                        f"{type(envoy._module).__name__})"
                try:
                    target = envoy if module is None else envoy.get(module)
                except AttributeError:
                    if releases.verified():
                        raise FamilyMismatch(f"{where} reads inside the child module {module}, which "
                                             f"{type(envoy._module).__name__} does not have") from None
                    # outside the verified releases (and on the survey's guessed trees) that value alone is
                    # unavailable, as a moved op's is below
                    self._missing_ops[(type(envoy), value.name)] = (
                        f"{type(envoy._module).__name__} has no module {module} where nncanon reads it")
                    continue
                key = (type(envoy), type(envoy._module), type(target._module), value.name)
                if key in checked:
                    target.source  # noqa: B018  (installs it)
                    continue
                checked.add(key)
                served = all(condition.holds(self) for condition in value.conditions)
                try:
                    check_ops(target, value.locator.ops if served else value.locator.ops[:1])
                except MissingOp as error:
                    if releases.verified():  # on a verified release the family module is wrong
                        raise error.explained(where) from None
                    # another release moved the op: that value alone is unavailable, never a wrong read
                    self._missing_ops[(type(envoy), value.name)] = (
                        f"{releases.named()} has no op where nncanon reads it: {error.describe()}")
