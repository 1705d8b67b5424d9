"""Mixed precision by target SQNR: the planted layer moves first and meets a target int8 misses."""

import planted_model as pm

from arm_quantizer.mixed_precision import quantize_with_overrides, search_mixed_precision


def _search(target_db, costs=None):
    model, samples = pm.build()
    quantize = quantize_with_overrides(model, samples[0], samples, pm.quantizer)
    return search_mixed_precision(quantize, samples, target_db, costs)


def test_planted_layer_moves_first_and_meets_target():
    costs = {"a": 100.0, "b": 100.0, "c": 100.0, "d": 100.0, "head": 10.0}
    result = _search(45.0, costs)
    assert result.sqnr_before_db < 45.0  # all-int8 misses the target
    assert result.ranking[0][0] == "b" and result.moved[0] == "b"
    assert result.met and result.sqnr_after_db >= 45.0
    assert result.extra_cycles == sum(costs[m] for m in result.moved)
    assert "set_module_name('b', get_symmetric_a16w8_quantization_config())" in result.config_python()
    again = _search(45.0, costs)  # deterministic for a fixed seed
    assert (again.moved, round(again.sqnr_after_db, 9)) == (result.moved, round(result.sqnr_after_db, 9))


def test_unreachable_target_says_so():
    result = _search(200.0)
    assert not result.met and len(result.moved) == len(result.ranking)  # every candidate tried once
    assert result.sqnr_after_db < 200.0 and "NOT met" in result.summary()
