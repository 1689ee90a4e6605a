"""What a family page shows beside its collected facts, each from the stage that checked it: the TransformerLens
check's hooks and agreement, the half-dtype stage's result (where it is kept and current for these facts) and the
releases the family was verified on (the kept records CI checks)."""

from __future__ import annotations

from pathlib import Path

from generator.facts.dtype_runs import DIRECTORY, merged
from generator.site.releases_page import verified_on


def annotate(hosts: list[dict], found: dict[str, dict]) -> None:
    """Put each checked value's TransformerLens hook and agreement (the check's JSON, keyed ``host::value`` by
    generator/facts/tl_names.py) in the facts' value entries."""
    for host in hosts:
        for value in host["values"]:
            entry = found.get(f"{host['path']}::{value['name']}")
            if entry is not None:
                value["transformer_lens"] = entry


def add_checks(loaded: list[dict], facts_dir: Path, transformer_lens: dict[str, dict] | None,
               records: list[dict]) -> None:
    """Each loaded family's facts with the other stages' checks in them, as the pages render them."""
    on = verified_on(records)
    for facts in loaded:
        if transformer_lens and facts["family"] in transformer_lens:
            annotate(facts["hosts"], transformer_lens[facts["family"]])
        for variant in facts.get("variants") or []:  # the Layouts table's column: the check on each variant's own
            variant["transformer_lens"] = (transformer_lens or {}).get(f"{facts['family']}.{variant['name']}")
        key = facts_dir / f"{facts['family']}.key"
        merged(facts, facts_dir.parent / DIRECTORY, key.read_text().strip() if key.exists() else None)
        facts["verified_on"] = on.get(facts["family"], [])
