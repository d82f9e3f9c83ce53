"""A kernel family is its module and its template: the registry finds it, and the policy, its priors and its cost
model reach it through the module alone (no family is named anywhere else)."""
from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

import agent.families as families
from agent.families.protocol import REQUIRED
from agent.policy import BuiltinPolicy, costmodel, priors

ROOT = Path(__file__).resolve().parents[1]
FAMILIES_DIR = ROOT / "agent" / "families"


def test_the_registry_finds_every_family_module_in_its_order():
    assert families.names() == ("small", "ampere_cute", "hopper_wgmma", "hopper_raw")
    for name, mod in families.families().items():
        assert all(hasattr(mod, a) for a in REQUIRED), name
        assert (FAMILIES_DIR / mod.TEMPLATE).is_file(), name
        assert set(mod.SHARES) <= set(priors.SIZE_CLASSES), name
    with pytest.raises(ValueError, match="unknown kernel family 'nope'; known: small, ampere_cute"):
        families.get("nope")


def test_no_module_outside_the_families_names_one():
    names = set(families.names())
    for path in sorted((ROOT / "agent").rglob("*.py")):
        if path.parent == FAMILIES_DIR or "retrieval" in path.parts:  # retrieval's keywords are English words
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in names:
                raise AssertionError(f"{path.relative_to(ROOT)}:{node.lineno} names the family {node.value!r}")


@pytest.fixture
def extra_family(tmp_path, monkeypatch):
    """A new family in its own file, beside the others on the package's search path: `small` under another name,
    with its own share of launch-bound shapes and its own pricing (it rides on small's template)."""
    src = (FAMILIES_DIR / "small.py").read_text()
    src = src.replace('NAME = "small"', 'NAME = "tiny"').replace('SHORT = "sm"', 'SHORT = "ti"')
    src = src.replace("ORDER = 0", "ORDER = 9")
    src = src.replace('"launch_bound": 0.5', '"launch_bound": 0.4')
    src += "\n\n_own_estimate = estimate_us\n\n\ndef estimate_us(p, shape, arch):\n    return 0.5 * _own_estimate(p, shape, arch)\n"
    assert 'NAME = "tiny"' in src and "ORDER = 9" in src
    (tmp_path / "tiny.py").write_text(src)
    monkeypatch.setattr(families, "__path__", [*families.__path__, str(tmp_path)])
    families._registry.cache_clear()
    yield "tiny"
    families._registry.cache_clear()
    sys.modules.pop("agent.families.tiny", None)


def test_a_new_family_is_one_module_away(extra_family):
    assert families.names()[-1] == extra_family
    shape = (64, 64, 256)
    assert priors.family_shares(shape, "sm_90a")[extra_family] == 0.4
    p = priors.priors(extra_family, shape, "fp32", "sm_90a")[0]
    assert costmodel.estimate_us(extra_family, p, shape) < costmodel.estimate_us("small", p, shape)
    batch = BuiltinPolicy(0).propose(shape, "fp32", "sm_90a", [], n=12)
    mine = [c for c in batch if c.family == extra_family]
    assert mine and all(c.name.startswith("ti_") for c in mine)
    assert all("hgemm" in c.source for c in mine)
