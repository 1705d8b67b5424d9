"""Mixed precision by target SQNR: the planted layer moves first and meets a target int8 misses; the
simulation agrees with the real model where an int16 layer feeds an int8 one."""

import planted_model as pm
import torch

from arm_quantizer import (
    TOSAQuantizer,
    get_symmetric_a16w8_quantization_config,
    get_symmetric_quantization_config,
)
from arm_quantizer.accuracy import output_power, quantized_layers
from arm_quantizer.mixed_precision import (
    overrides_for_all,
    quantize_with_overrides,
    search_mixed_precision,
)
from arm_quantizer.precision_sim import Simulator
from arm_quantizer.precision_units import movable_units
from arm_tosa_core import TosaCompileSpec


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


class _WideEdge(torch.nn.Module):
    """a -> b -> c, 1x1 convs: channel 0 of a's output is 100x the others and b ignores it, so the
    a -> b activation is read on a coarse int8 grid (the model's dominant noise)."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.c = torch.nn.Conv2d(3, 8, 1), torch.nn.Conv2d(8, 8, 1), torch.nn.Conv2d(8, 4, 1)
        with torch.no_grad():
            self.a.weight[0] *= 100.0
            self.b.weight[:, 0] = 0.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c(self.b(self.a(x)))


def _wide_edge_quantize():
    """(quantize(overrides), samples) for `_WideEdge`: int8 everywhere by default, int16-capable spec."""
    torch.manual_seed(0)
    model = _WideEdge().eval()
    gen = torch.Generator().manual_seed(0)
    samples = [(torch.randn(1, 3, 8, 8, generator=gen),) for _ in range(4)]
    quantize = quantize_with_overrides(model, samples[0], samples, lambda: TOSAQuantizer(
        TosaCompileSpec("TOSA-1.0+INT+int16")).set_global(get_symmetric_quantization_config()))
    return quantize, samples


def test_an_int16_output_read_by_an_int8_layer_gains_nothing_in_simulation_as_for_real():
    # where an int16 layer feeds an int8 one, the real model requantizes to int8 at the reader's
    # input: moving `a` alone leaves the a -> b edge at int8, and the simulation must say so
    quantize, samples = _wide_edge_quantize()
    base = quantize({})
    units = movable_units(quantized_layers(base))
    sim = Simulator(base, samples, units)
    a16w8 = get_symmetric_a16w8_quantization_config()
    for owners, gains in ((["a"], False), (["a", "b"], True)):
        real = sim.db(output_power(quantize(overrides_for_all(owners, units, a16w8)), samples, (), sim.refs)[1])
        simulated = sim.db(sim.noise_with(owners))
        assert abs(simulated - real) < 1.0, (owners, simulated, real)
        assert (real > sim.db(sim.noise) + 20.0) == gains, (owners, real)
    assert sim.closure("a") == ["a", "b"]
    result = search_mixed_precision(quantize, samples, sim.db(sim.noise) + 6.0, {"a": 10.0, "b": 10.0, "c": 10.0})
    assert result.met and sorted(result.moved) == ["a", "b"]


class _Fork(torch.nn.Module):
    """a feeds b and c, added at the output: channel 0 of a's output is 100x the others and neither
    reader uses it, so both read a on a coarse int8 grid; c's branch is scaled down (its noise is
    small), so b's read is the model's dominant noise."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.c = (torch.nn.Conv2d(3, 8, 1), torch.nn.Conv2d(8, 4, 1), torch.nn.Conv2d(8, 4, 1))
        with torch.no_grad():
            self.a.weight[0] *= 100.0
            self.b.weight[:, 0] = 0.0
            self.c.weight[:, 0] = 0.0
            self.c.weight *= 0.01

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.a(x)
        return self.b(h) + self.c(h)


def test_a_moved_reader_gains_though_another_reader_of_the_value_stays_int8():
    # the real model requantizes a's int16 output to int8 for c only: b still reads int16, so
    # moving a and b (not c) removes b's share of the noise, in simulation as for real
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    samples = [(torch.randn(1, 3, 8, 8, generator=gen),) for _ in range(4)]
    quantize = quantize_with_overrides(_Fork().eval(), samples[0], samples, lambda: TOSAQuantizer(
        TosaCompileSpec("TOSA-1.0+INT+int16")).set_global(get_symmetric_quantization_config()))
    base = quantize({})
    units = movable_units(quantized_layers(base))
    sim = Simulator(base, samples, units)
    before = sim.db(sim.noise)
    a16w8 = get_symmetric_a16w8_quantization_config()
    for owners, gains in ((["a"], False), (["a", "b"], True)):
        real = sim.db(output_power(quantize(overrides_for_all(owners, units, a16w8)), samples, (), sim.refs)[1])
        simulated = sim.db(sim.noise_with(owners))
        assert abs(simulated - real) < 1.0, (owners, simulated, real)
        assert (real > before + 10.0) == gains, (owners, real, before)
    # narrowed to int8: a's output for c (8x8x8), b's for the int8 add (4x8x8); nothing widened
    assert sim.boundary_elements(["a", "b"]) == (0, 8 * 8 * 8 + 4 * 8 * 8)
    result = search_mixed_precision(quantize, samples, before + 6.0, {"a": 10.0, "b": 10.0, "c": 10.0, "@add": 10.0})
    assert result.met and "c" not in result.moved and {"a", "b"} <= set(result.moved)


def test_boundary_cost_fills_the_hole_to_the_output():
    # {a, b} meets the target, but b's int16 output would be requantized for the int8 c: at a cycle
    # per element (512) that boundary costs more than moving c (10), so c moves too; without a
    # boundary cost it stays int8
    quantize, samples = _wide_edge_quantize()
    costs = {"a": 10.0, "b": 10.0, "c": 10.0}
    target = search_mixed_precision(quantize, samples, 1000.0, costs).sqnr_before_db + 6.0
    free = search_mixed_precision(quantize, samples, target, costs)
    charged = search_mixed_precision(quantize, samples, target, costs, boundary_cycles_per_element=1.0)
    assert free.met and sorted(free.moved) == ["a", "b"] and free.extra_cycles == 20.0
    assert charged.met and sorted(charged.moved) == ["a", "b", "c"] and charged.extra_cycles == 30.0


class _Attention(torch.nn.Module):
    """Single-head attention whose scores, softmax and matmuls are the module's own forward (node
    units); a planted additive bias (one key at -60) stretches the softmax input's int8 range, so the
    other scores round coarsely: the model's dominant noise, in no module of its own."""

    def __init__(self, dim: int = 16, tokens: int = 8) -> None:
        super().__init__()
        self.q, self.k, self.v, self.proj = (torch.nn.Linear(dim, dim) for _ in range(4))
        bias = torch.zeros(tokens, tokens)
        bias[:, 0] = -60.0
        self.register_buffer("bias", bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scores = self.q(x) @ self.k(x).transpose(-1, -2) * 0.25 + self.bias
        return self.proj(torch.softmax(scores, -1) @ self.v(x))


def test_softmax_input_moves_as_node_units_alone():
    # a module unit per Linear, a node unit per op of the forward; moving the whole forward
    # (set_global, as before node units) would take every one of them: the search moves only the
    # softmax input and the softmax ops reading it, by set_node_name, and meets +3 dB
    torch.manual_seed(0)
    model = _Attention().eval()
    gen = torch.Generator().manual_seed(0)
    samples = [(torch.randn(1, 8, 16, generator=gen),) for _ in range(4)]
    quantize = quantize_with_overrides(model, samples[0], samples, lambda: TOSAQuantizer(
        TosaCompileSpec("TOSA-1.0+INT+int16")).set_global(get_symmetric_quantization_config()))
    units = movable_units(quantized_layers(quantize({})))
    node_units = [u.owner for u in units if u.nodes]
    assert sorted(u.owner for u in units if not u.nodes) == ["k", "proj", "q", "v"] and "@add" in node_units
    sim = Simulator(quantize({}), samples, units)
    target = sim.db(sim.noise) + 3.0
    result = search_mixed_precision(quantize, samples, target, lambda us: {u.owner: 10.0 for u in us})
    assert result.met and result.sqnr_after_db >= target
    assert "@add" in result.moved and set(result.moved) <= set(node_units)  # no Linear moves
    assert len(result.moved) <= len(node_units) // 2 and result.extra_cycles == 10.0 * len(result.moved)
    assert "set_node_name('add', get_symmetric_a16w8_quantization_config())" in result.config_python()
    assert "set_module_name" not in result.config_python() and "set_global" not in result.config_python()
    # the real model: the softmax input is int16, every Linear's output int8
    wide = {n.args[0].name for n in result.quantized.graph.nodes if "quantize_per" in str(n.target)
            and n.args[-1] == torch.int16 and isinstance(n.args[0], torch.fx.Node)}
    assert "add" in wide and not wide & {"linear", "linear_1", "linear_2", "linear_3"}
