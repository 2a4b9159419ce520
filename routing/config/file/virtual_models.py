"""The ``virtual_models`` section: parse and check it, apply it, dump it back, compile it into the RoutingTable.

A virtual model is a public ``source`` name over weighted ``targets`` (models or other virtual models), picked by
its ``strategy`` (``adaptive`` by default); ``session_affinity`` (true), ``contract`` and ``enabled`` (true) are
optional. The targets' names and the graph they form are checked with every other name of the file
(routing.config.file.cross_checks).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from routing import models as m
from routing.config.file.checks import (
    _check_bool,
    _check_duplicates,
    _check_name,
    _check_unknown_keys,
    _Checker,
    _entries,
    _known,
)
from routing.core.table import STRATEGIES, TargetRef, VirtualModelSpec

SECTION = "virtual_models"
_FIELDS = ("source", "strategy", "targets", "session_affinity", "contract", "enabled")


def parse_virtual_models(chk: _Checker, data: Mapping[str, Any], contract_names: set[str]) -> list[dict[str, Any]]:
    """The section's virtual models in canonical form; a ``contract`` is of the file or configured."""
    virtual = [_parse_virtual_model(chk, path, entry, contract_names) for path, entry in _entries(chk, data, SECTION)]
    _check_duplicates(chk, SECTION, [v["source"] for v in virtual], "source")
    return virtual


def _parse_virtual_model(
        chk: _Checker, path: str, entry: dict[str, Any], contract_names: set[str]) -> dict[str, Any]:
    """One ``virtual_models`` entry and its targets (their names are checked with the graph)."""
    _check_unknown_keys(chk, path, entry, _FIELDS)
    _check_name(chk, f"{path}.source", entry.get("source"))
    strategy = entry.get("strategy", "adaptive")
    if strategy not in STRATEGIES:
        chk.add(f"{path}.strategy", f'unknown strategy "{strategy}" (expected {", ".join(STRATEGIES)})')
    if entry.get("contract") is not None and not _known(entry["contract"], contract_names):
        chk.add(f"{path}.contract", f'unknown contract "{entry["contract"]}"')
    _check_bool(chk, f"{path}.session_affinity", entry.get("session_affinity"))
    _check_bool(chk, f"{path}.enabled", entry.get("enabled"))
    targets_in = entry.get("targets")
    if not isinstance(targets_in, list) or not targets_in:
        chk.add(f"{path}.targets", "expected a non-empty list of {model, weight}")
        targets_in = []
    targets: list[dict[str, Any]] = []
    for t, target in enumerate(targets_in):
        tpath = f"{path}.targets[{t}]"
        if isinstance(target, str):
            target = {"model": target}
        if not isinstance(target, dict) or not isinstance(target.get("model"), str):
            chk.add(tpath, "expected {model: name, weight: number}")
            continue
        _check_unknown_keys(chk, tpath, target, ("model", "weight"))
        weight = target.get("weight", 1)
        if isinstance(weight, bool) or not isinstance(weight, int | float) or not weight > 0:
            chk.add(f"{tpath}.weight", f"the weight must be greater than 0, got {weight!r}")
        item: dict[str, Any] = {"model": target["model"]}
        if weight != 1:
            item["weight"] = weight
        targets.append(item)
    names = [t["model"] for t in targets]
    for t, name in enumerate(names):
        if name in names[:t]:
            chk.add(f"{path}.targets[{t}].model", f'"{name}" is listed twice')
    vm: dict[str, Any] = {"source": entry.get("source"), "strategy": strategy, "targets": targets}
    if entry.get("session_affinity") is False:
        vm["session_affinity"] = False
    if entry.get("contract"):
        vm["contract"] = entry["contract"]
    if entry.get("enabled") is False:
        vm["enabled"] = False
    return vm



def apply_virtual_models(canonical: Mapping[str, Any], before: Mapping[str, Any],
                         contract_rows: Mapping[str, m.Contract]) -> None:
    """Create or update the file's virtual models and their targets (unchanged ones are skipped)."""
    for entry in canonical.get(SECTION, []):
        if entry in before.get(SECTION, []):
            continue
        vm, _ = m.VirtualModel.objects.update_or_create(
            source=entry["source"],
            defaults={
                "strategy": entry["strategy"],
                "session_affinity": entry.get("session_affinity", True),
                "contract": contract_rows.get(entry.get("contract", "")),
                "enabled": entry.get("enabled", True),
            },
        )
        vm.targets.all().delete()
        for position, target in enumerate(entry["targets"]):
            m.VirtualModelTarget.objects.create(
                virtual_model=vm, position=position, target=target["model"], weight=float(target.get("weight", 1))
            )


def prune_virtual_models(canonical: Mapping[str, Any]) -> None:
    m.VirtualModel.objects.exclude(source__in=[v["source"] for v in canonical.get(SECTION, [])]).delete()


def virtual_model_entries() -> list[dict[str, Any]]:
    """The configured virtual models in canonical form, in the order they were created."""
    return [_virtual_entry(v) for v in m.VirtualModel.objects.select_related("contract")
            .prefetch_related("targets").order_by("id")]


def _virtual_entry(vm: m.VirtualModel) -> dict[str, Any]:
    targets = []
    for target in vm.targets.all():
        item: dict[str, Any] = {"model": target.target}
        if target.weight != 1:
            item["weight"] = int(target.weight) if float(target.weight).is_integer() else target.weight
        targets.append(item)
    entry: dict[str, Any] = {"source": vm.source, "strategy": vm.strategy, "targets": targets}
    if not vm.session_affinity:
        entry["session_affinity"] = False
    if vm.contract is not None:
        entry["contract"] = vm.contract.workload
    if not vm.enabled:
        entry["enabled"] = False
    return entry


def compile_virtual_models() -> list[VirtualModelSpec]:
    return [
        VirtualModelSpec(
            source=row.source,
            strategy=row.strategy,
            targets=tuple(TargetRef(t.target, float(t.weight)) for t in row.targets.all()),
            session_affinity=row.session_affinity,
            contract=row.contract.workload if row.contract else None,
            enabled=row.enabled,
        )
        for row in m.VirtualModel.objects.select_related("contract").prefetch_related("targets")
    ]
