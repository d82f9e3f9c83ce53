"""Server mode's prelude on a real GPU: the operands it writes are the refill's, bit for bit, only their order and
what the L2 holds differ (evaluator.buffers.PRELUDES)."""
import pytest

pytestmark = pytest.mark.gpu


def test_activations_prelude_writes_what_the_refill_writes():
    from evaluator.buffers import OperandPool, OperandSet, Scrub
    from evaluator.gpu import native_arch
    from evaluator.native import Native, build

    nat = Native(build(native_arch(0)), 0)
    shape = (192, 136, 520)
    plain, cold = OperandPool(nat, *shape, count=2), OperandPool(nat, *shape, count=2)
    try:
        plain.refill(2, 11)
        cold.refill(2, 11, "activations")
        for a, b in zip(plain.sets, cold.sets):
            for name in ("A", "B", "Bc", "C"):
                assert nat.count_diff(a.ptr[name], b.ptr[name], a.sizes[name]) == 0, name
        assert plain._scrub is None and isinstance(cold._scrub, Scrub)
        assert 2 * cold._scrub.halves >= 4 * nat.info()["l2_bytes"] > 0
        assert cold._scrub.runs == 1  # one scrub a batch, between every set's weights and every set's A
        cold.refill(1, 12, "activations")
        assert nat.count_diff(plain.first.ptr["A"], cold.first.ptr["A"], plain.first.sizes["A"]) > 0  # a new draw
        with pytest.raises(ValueError, match="unknown prelude"):
            cold.refill(1, 13, "warm")
        view = cold.view(1)
        view.refill(1, 14, "activations")
        assert view._scrub is not None and view._scrub is not cold._scrub
        view.free()  # its own scrub only: the pool's still scrubs
        cold.refill(1, 15, "activations")
        assert cold._scrub.runs == 3 and cold.sets and cold._scrub.handle is not None
        checked = OperandSet(nat, *shape)  # snapshots, as the checks' sets have them
        try:
            with pytest.raises(ValueError, match="snapshots"):
                checked.fill_weights(16)
        finally:
            checked.free()
    finally:
        plain.free()
        cold.free()
