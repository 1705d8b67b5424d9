"""run_vgf on the Vulkan device (lavapipe here) against the TOSA reference model."""

import numpy as np
import pytest
import vgf_test_graphs as graphs

from arm_vgf.converter import convert_tosa_to_vgf
from arm_vgf.vulkan_runner import prepare_vgf, run_vgf, time_vgf

# fp32: elementwise relative tolerance 1e-5, with an absolute floor of 1e-5 * max|ref| so that
# outputs near zero (cancellation in the conv sum) do not demand impossible relative accuracy.
RTOL = 1e-5


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    def convert(graph):
        return convert_tosa_to_vgf(graph.tosa, tmp_path_factory.mktemp("vgf"))

    return convert


@pytest.mark.parametrize(
    "builder",
    [graphs.add_fp32, graphs.conv2d_fp32, lambda: graphs.conv2d_fp32(n=2, h=9, w=7, cin=3, cout=5)],
    ids=["add", "conv", "conv_odd"],
)
def test_fp32_matches_reference(builder, converted):
    graph = builder()
    vgf = converted(graph)
    for seed in range(3):  # re-runs the cached scenario with new inputs
        inputs = graph.make_inputs(seed)
        (ref,) = graphs.reference_outputs(graph, inputs)
        (out,) = run_vgf(vgf, inputs)
        assert out.dtype == np.float32 and out.shape == ref.shape
        np.testing.assert_allclose(out, ref, rtol=RTOL, atol=RTOL * np.abs(ref).max())


def test_int8_conv_rescale_bit_exact(converted):
    graph = graphs.conv2d_int8_rescale()
    vgf = converted(graph)
    for seed in range(3):
        inputs = graph.make_inputs(seed)
        (ref,) = graphs.reference_outputs(graph, inputs)
        (out,) = run_vgf(vgf, inputs)
        assert out.dtype == np.int8
        np.testing.assert_array_equal(out, ref)
        assert len(np.unique(out)) > 16  # the rescale is not saturating everything


def test_inputs_are_checked(converted):
    graph = graphs.add_fp32()
    vgf = converted(graph)
    a, b = graph.make_inputs(0)
    with pytest.raises(ValueError, match="takes 2 inputs"):
        run_vgf(vgf, [a])
    with pytest.raises(TypeError, match="must be float32, got float64"):
        run_vgf(vgf, [a, b.astype(np.float64)])
    with pytest.raises(ValueError, match=r"must have shape \[1, 4, 4, 8\]"):
        run_vgf(vgf, [a, b[..., :4]])


def test_prepared_scenario_is_reused_and_timed(converted):
    graph = graphs.conv2d_fp32()
    vgf = converted(graph)
    assert prepare_vgf(vgf) is prepare_vgf(bytes(vgf))
    times = time_vgf(vgf, graph.make_inputs(0), repeats=5)
    assert len(times) == 5 and all(t > 0 for t in times)
