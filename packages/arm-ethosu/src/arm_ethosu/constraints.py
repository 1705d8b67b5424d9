"""What vela 5.2 compiles per Ethos-U family, checked on torch nodes before they are delegated.

vela has no CPU fallback for TOSA input: one operator it cannot place fails the whole compile. So
every rule here keeps a node on the CPU that would make vela fail, with the reason in words.

Sources: vela's own operator report (`vela --supported-ops-report`, sections "Ethos-U55 and Ethos-U65
TOSA" and "Ethos-U85 TOSA"), narrowed by compiling the core's INT graphs with vela 5.2 for
ethos-u55-128, ethos-u65-256 and ethos-u85-256 (the per-family tests keep one case per rule).
Where vela does better than its report (it decomposes pooling strides > 3, though the core's INT average
pools are depthwise convolutions, and regular convolutions whose kernel equals their stride), the rules follow what vela does.

A rule about one op family is attached to that family's registry entry with
`@target_rule(U55_U65, "family", ...)` (a misspelt family fails at import); `RULES` holds the checks
that apply to every family, per Ethos-U family, in order (`_family_rules` runs the attached ones).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from fractions import Fraction
from itertools import combinations

import torch
from torch.fx import Node

from arm_tosa_core.helpers.convolution import conv_args, is_convolution
from arm_tosa_core.helpers.shapes import is_compile_time
from arm_tosa_core.helpers.windows import pool_window
from arm_tosa_core.ops import resize
from arm_tosa_core.ops.matmul import int16_output_target
from arm_tosa_core.registry import aten_target, is_control_flow, lookup, target_rule

aten = torch.ops.aten

#: vela's tensor-axis limit: channels (and the axes a TRANSPOSE moves) must fit 16 bits.
AXIS_LIMIT = 65536
MAX_STRIDE_U55 = 3

#: the target names family rules are attached under (`target_rule`); U65 runs U55's operator set
U55_U65 = ("ethos-u55", "ethos-u65")


def _val(node) -> torch.Tensor | None:
    val = node.meta.get("val") if isinstance(node, Node) else None
    if isinstance(val, (tuple, list)):
        val = val[0] if val else None
    return val if isinstance(val, torch.Tensor) else None


def _tensors(node: Node) -> list[tuple[str, torch.Tensor]]:
    out = [(f"input {a.name}", _val(a)) for a in node.all_input_nodes]
    val = node.meta.get("val")
    for i, v in enumerate(val if isinstance(val, (tuple, list)) else [val]):
        out.append((f"output {i}", v))
    return [(w, v) for w, v in out if isinstance(v, torch.Tensor)]


def _is_constant(node) -> bool:
    """A parameter/buffer/lifted constant, or its quantize/dequantize (the core folds them)."""
    if not isinstance(node, Node):
        return False
    if node.op == "placeholder":
        return bool(node.meta.get("arm_constant"))
    if node.op == "get_attr":
        return True
    if node.op == "call_function" and "quantize" in str(node.target) and node.args:
        return isinstance(node, Node) and bool(node.args) and _is_constant(node.args[0])
    return False


def _quant_dtype(node) -> torch.dtype | None:
    """The integer type a quantized operand is carried in (from its dequantize node), if any."""
    if isinstance(node, Node) and node.op == "call_function" and "dequantize" in str(node.target):
        dtype = node.args[5] if len(node.args) > 5 else node.kwargs.get("dtype")
        if "per_channel" in str(node.target):
            dtype = node.args[6] if len(node.args) > 6 else node.kwargs.get("dtype")
        return dtype if isinstance(dtype, torch.dtype) else None
    return None


def _through_shape_ops(node, probe, depth: int = 8):
    """The first non-None `probe(n)` for `node` and the nodes it is a view of, through the views and permutes
    that exir's decompositions put between an operand and its source (a 4-d matmul is a bmm of reshaped
    operands); None past `depth` or at any other op."""
    while depth and isinstance(node, Node):
        found = probe(node)
        if found is not None:
            return found
        entry = lookup(node.target) if node.op == "call_function" else None
        if entry is None or entry.name not in _SHAPE_ONLY or not node.args:
            return None
        node, depth = node.args[0], depth - 1
    return None


def _operand_quant_dtype(node) -> torch.dtype | None:
    """`_quant_dtype` of the dequantize an operand comes from, through views and permutes."""
    return _through_shape_ops(node, _quant_dtype)


_SHAPE_ONLY = {"view", "permute", "transpose", "expand", "clone_cast", "slice", "select"}


def transposable(shape: tuple[int, ...]) -> bool:
    """Whether vela's U55/U65 TRANSPOSE takes a tensor of this shape (int8/int16, any permutation).

    Its rule: with every axis outside the innermost three equal to 1, each of those three may be up
    to 2^16; otherwise the product of any rank-2 axes must be at most 2^16.
    """
    if len(shape) < 3:
        return all(d <= AXIS_LIMIT for d in shape)
    if all(d == 1 for d in shape[:-3]):
        return all(d <= AXIS_LIMIT for d in shape[-3:])
    return all(_prod(c) <= AXIS_LIMIT for c in combinations(shape, len(shape) - 2))


def _prod(values) -> int:
    out = 1
    for v in values:
        out *= int(v)
    return out


# -- rules for every family -------------------------------------------------------------------
def _channels(node: Node, family: str) -> str | None:
    """Convolution/linear channels must fit vela's 16-bit channel axis."""
    target = aten_target(node.target)
    conv = conv_args(node) if is_convolution(node) else None
    if (conv is not None or target is aten.linear.default) and len(node.args) > 1:
        w = _val(node.args[1])
        if w is not None and w.dim() >= 2:
            transposed = conv is not None and conv.transposed
            groups = conv.groups if conv is not None else 1
            cin = w.shape[0] * groups if transposed else w.shape[1] * groups
            cout = w.shape[1] if transposed else w.shape[0]
            for what, c in (("input", cin), ("output", cout)):
                if c > AXIS_LIMIT:
                    return f"{c} {what} channels; vela allows at most {AXIS_LIMIT}"
    return None


# -- Ethos-U55 / U65: per-family rules ---------------------------------------------------------
def _not_in_u55_set(family: str, operators: str, folded: Callable[[Node], bool] | None = None) -> None:
    """Family `family` lowers to TOSA `operators`, which are outside the U55/U65 operator set (unless
    `folded(node)`: the core computes the node at compile time and writes none of them)."""

    @target_rule(U55_U65, family)
    def rule(node: Node, ethosu_family: str) -> str | None:
        if folded is not None and folded(node):
            return None
        return f"{family} lowers to TOSA {operators}, which Ethos-U55/U65 do not run"


def _constant_source(node: Node) -> bool:
    """x[..., idx] of a constant x (LeViT's and EfficientFormerV2's attention-bias tables): the core's
    `gather_dim` picks the entries at compile time (its support already requires a compile-time index),
    so no GATHER reaches vela."""
    return isinstance(node, Node) and bool(node.args) and _is_constant(node.args[0])


_not_in_u55_set("compare", "EQUAL/GREATER/GREATER_EQUAL")
_not_in_u55_set("ne", "EQUAL")
_not_in_u55_set("logical", "LOGICAL_AND/OR/XOR/NOT")
_not_in_u55_set("where", "SELECT")
_not_in_u55_set("any_all", "REDUCE_ANY/REDUCE_ALL")
_not_in_u55_set("embedding", "GATHER")
_not_in_u55_set("index_select", "GATHER")
_not_in_u55_set("index_tensor", "GATHER", folded=_constant_source)
_not_in_u55_set("gather", "GATHER", folded=_constant_source)
_not_in_u55_set("index_copy", "SCATTER")
_not_in_u55_set("index_put", "SCATTER")


@target_rule(U55_U65, "amax_amin")
def _u55_reduce_extreme(node: Node, family: str) -> str | None:
    dtypes = {t.dtype for _, t in _tensors(node)}
    if dtypes - {torch.int8, torch.int16, torch.float32, torch.bool}:  # bool: `_u55_no_bool` says why
        return "REDUCE_MAX/MIN on Ethos-U55/U65 takes int8 or int16 only"
    return _u55_reduce_min_dropping_dims(node)


_REDUCE_MIN = (aten.amin.default, aten.min.default, aten.min.dim)


def _u55_reduce_min_dropping_dims(node: Node) -> str | None:
    """vela 5.2 runs REDUCE_MIN as -1 - max(-1 - x). Where the graph then drops a reduced axis other than
    the channels, the last SUB reads the maxima as IFM2 with a channel broadcast (IFM2_BROADCAST 4) and
    the row stride of the reduced view, so each maximum lands on several outputs: amin(x, -1) on
    [2, 3, 4, 5] is 2.1 off on the NPU simulator (amin(x, -1, keepdim=True) and amin(x, 1) are exact)."""
    target = aten_target(node.target)
    x = _val(node.args[0])
    if target not in _REDUCE_MIN or x is None:
        return None
    if target is aten.min.default:
        dims, keepdim = set(range(x.dim())), False
    else:
        dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", ())
        dims = {d % max(x.dim(), 1) for d in ([dim] if isinstance(dim, int) else dim or range(x.dim()))}
        keepdim = node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False)
    if keepdim or (x.dim() == 4 and dims == {1}):
        return None
    return (f"min over dims {sorted(dims)} of a rank-{x.dim()} tensor without keepdim: the command stream vela "
            "5.2 writes for it spreads each minimum over several outputs (NPU simulator); with keepdim=True, "
            "or over the channels alone, it runs on the NPU")


@target_rule(U55_U65, "matmul")
def _u55_matmul(node: Node, family: str) -> str | None:
    if node.meta.get("arm_quantized"):
        for arg in node.all_input_nodes:
            dt = _operand_quant_dtype(arg)
            if dt is not None and dt != torch.int8:
                return f"MATMUL on Ethos-U55/U65 takes int8 operands, not {dt} (vela 5.2)"
    return None


@target_rule(U55_U65, "permute", "transpose")
def _u55_int32_transpose(node: Node, family: str) -> str | None:
    val = _val(node.args[0])
    if val is not None and val.dtype == torch.int32 and val.dim() > 4:
        return f"an int32 TRANSPOSE of rank {val.dim()} (Ethos-U55/U65 allow rank <= 4 for int32)"
    return None


@target_rule(U55_U65, "resize")
def _u55_resize(node: Node, family: str) -> str | None:
    """vela 5.2 on U55/U65: NEAREST for power-of-two upscales 2x..8x (half-pixel form) only, and no
    BILINEAR at all. The core lowers an integer k x upscale (2 <= k <= resize.MAX_U55_UPSCALE, nearest or
    bilinear half-pixel) in forms vela takes there: a NEAREST chain (+ a depthwise conv for bilinear)."""
    plan = resize._plan(node)
    if isinstance(plan, str):
        return None  # the core's own reason applies
    if resize.upscale_factor(plan):
        return None
    nearest_by_vela = all(Fraction(n, d) in resize.VELA_NEAREST_FACTORS and 2 * offset == d - n
                          for n, d, offset, _ in plan)
    factors = {Fraction(n, d) for n, d, _, _ in plan}
    if nearest_by_vela and aten_target(node.target) not in resize._BILINEAR:
        if len(factors) > 1:
            # The NPU's IFM_UPSCALE doubles both axes at once; for (2, 4) vela 5.2 writes two upscaled
            # POOLs whose second reads only rows 0-3 of the 8-row intermediate (IFM_STRIDE_Y one row), so
            # rows come out x4 too: another function than the graph on the NPU simulator (1.36 off).
            return (f"nearest resize by {sorted(int(f) for f in factors)} (different factors per axis): the "
                    "command stream vela 5.2 writes for it upscales both axes by the larger factor (NPU "
                    "simulator); resize both axes by the same factor, or in two steps")
        return None  # one NEAREST RESIZE, the same power-of-two factor 2x..8x on both axes
    mode = "bilinear" if aten_target(node.target) in resize._BILINEAR else "nearest"
    return (f"{mode} resize other than an integer upscale by 2x..{resize.MAX_U55_UPSCALE}x on both axes "
            "(half-pixel, align_corners=False): vela 5.2 compiles no bilinear RESIZE and only 2x/4x/8x NEAREST "
            "for Ethos-U55/U65 (the core lowers integer upscales as nearest copies + a depthwise conv)")


def _constant_operand(node) -> bool:
    """`node` is a constant, possibly seen through the views and permutes exir puts before a product."""
    return _through_shape_ops(node, lambda n: True if _is_constant(n) else None) is True


@target_rule("ethos-u85", "linear", "matmul", "addmm")
def _u85_int16_fully_connected(node: Node, family: str) -> str | None:
    """An int16 x int8 product with constant weights lowers as CONV2D (or MATMUL) into an INT48 accumulator.
    regor (vela 5.2, U85) fuses the RESCALEs after it into the convolution's 48-bit scale stream, whose
    records hold a 15-bit multiplier, and writes a 32-bit multiplier's low 15 bits alone (0x75D3A25F became
    0x225F for nn.Linear(8, 12): every output near 0 on the NPU simulator, 1.71 off in float). For U85 the
    core RESCALEs the accumulator straight to the output with a 16-bit multiplier instead
    (`EthosUCompileSpec.int16_fc_rescale16`), which regor stores exactly; that needs the product's one user
    to be its quantize node (`int16_output_target`; the shared quantizer keeps an int16 linear's own
    quantize before a relu/hardtanh, the registry's `int16_fuses_activation`). A product whose output goes
    elsewhere first, or an addmm (the quantizer makes a linear of it), keeps the 32-bit form and stays on
    the CPU. A product of two activations takes its OFM scale from a 32-bit register instead
    and is not affected."""
    if not node.meta.get("arm_quantized"):
        return None
    weight = node.args[2] if family == "addmm" and len(node.args) > 2 else node.args[1] if len(node.args) > 1 else None
    if _operand_quant_dtype(node.args[1 if family == "addmm" else 0]) != torch.int16 or not _constant_operand(weight):
        return None
    if family != "addmm" and int16_output_target(node) is not None:
        return None  # RESCALEd with a 16-bit multiplier (EthosUCompileSpec.int16_fc_rescale16)
    return ("int16 x int8 fully connected layer whose output is not quantized directly: the command stream "
            "vela 5.2 writes for Ethos-U85 keeps only the low 15 bits of its 32-bit output multiplier (another "
            "function than the graph, NPU simulator); quantize this layer's input to int8 to run it on the NPU")


def _family_rules(node: Node, family: str) -> str | None:
    """The rules attached to the node's op family for this Ethos-U family (`target_rule` with
    "ethos-u55", "ethos-u65" or "ethos-u85"), in the order they were attached."""
    entry = lookup(node.target)
    for rule in entry.target_rules.get(f"ethos-{family.lower()}", ()) if entry is not None else ():
        reason = rule(node, family)
        if reason is not None:
            return reason
    return None


# -- Ethos-U55 / U65: rules for every family ----------------------------------------------------
def _u55_no_bool(node: Node, family: str) -> str | None:
    for where, t in _tensors(node):
        if t.dtype == torch.bool:
            return f"{where} is boolean; Ethos-U55/U65 have no boolean operations"
    return None


def _u55_shapes(node: Node, family: str) -> str | None:
    """Layout changes (NCHW <-> NHWC) become TRANSPOSE operators wherever a value needs them
    (constants are permuted when lowering, so only run-time values count)."""
    values = [(f"input {a.name}", _val(a)) for a in node.all_input_nodes if not _is_constant(a)]
    values += [(w, t) for w, t in _tensors(node) if w.startswith("output")]
    for where, t in values:
        if t is None:
            continue
        if t.dim() >= 3 and not transposable(tuple(t.shape)):
            return (f"{where} has shape {tuple(t.shape)}, too large for the Ethos-U55/U65 TRANSPOSE "
                    f"(axes beyond {AXIS_LIMIT} elements)")
    return None


def _u55_convolution(node: Node, family: str) -> str | None:
    if not is_convolution(node):
        return None
    args = conv_args(node)
    x, w = _val(args.input), _val(args.weight)
    if x is None or w is None:
        return None
    stride, padding, dilation, transposed, groups = (args.stride, args.padding, args.dilation,
                                                     args.transposed, args.groups)
    kernel = list(w.shape[2:])
    if len(kernel) == 3 and kernel[0] != 1:
        return (f"3-d convolution with kernel depth {kernel[0]}; vela 5.2 runs CONV3D on Ethos-U55/U65 "
                "only with kernel depth 1")
    if len(kernel) == 3:
        stride, kernel = stride[1:], kernel[1:]
    if transposed:
        if _quant_dtype(args.input) == torch.int16:
            # listed as supported in vela's report, but vela 5.2 fails on it: "Non-passthrough
            # operation (Conv2D) could not run on NPU" (its decomposition of the int16 form)
            return "transposed convolution with int16 activations (vela 5.2 cannot place it on Ethos-U55/U65)"
        return _u55_transpose_conv(list(stride), kernel, list(x.shape[2:]))
    if all(s <= MAX_STRIDE_U55 for s in stride):
        return None
    depthwise = groups > 1 and groups == x.shape[1]
    patchify = (list(stride) == kernel and all(p == 0 for p in padding)
                and all(d == 1 for d in dilation))
    if patchify and not depthwise:
        return None  # vela rewrites a kernel == stride convolution without padding
    kind = "depthwise convolution" if depthwise else "convolution"
    return (f"{kind} stride {list(stride)}; Ethos-U55/U65 allow strides up to {MAX_STRIDE_U55}"
            + ("" if depthwise else " (or kernel == stride without padding)"))


def _u55_transpose_conv(stride: list[int], kernel: list[int], in_hw: list[int]) -> str | None:
    if stride in ([1, 1], [2, 2]):
        return None
    if stride == [1, 2] and in_hw[0] == 1 and kernel[0] == 1:
        return None
    if stride == [2, 1] and in_hw[1] == 1 and kernel[1] == 1:
        return None
    return (f"transposed convolution stride {stride}; Ethos-U55/U65 take (1,1), (2,2), and (1,2) or "
            "(2,1) only when the input and kernel are 1 along the stride-1 axis")


def _u55_avg_pool(node: Node, family: str) -> str | None:
    """The core lowers INT avg_pool2d as exact window sums: an all-ones DEPTHWISE_CONV2D with the pool's
    stride (not an AVG_POOL2D, whose large strides vela would decompose), so the depthwise limit holds."""
    if aten_target(node.target) is not aten.avg_pool2d.default:
        return None
    _, stride, _ = pool_window(node)
    if any(s > MAX_STRIDE_U55 for s in stride):
        return (f"average pooling stride {stride}: the INT window sums are a depthwise convolution, which "
                f"Ethos-U55/U65 allow up to stride {MAX_STRIDE_U55}")
    return None


def _grouped_transposed_convolution(node: Node, family: str) -> str | None:
    """A grouped transposed convolution. The core lowers it as one TRANSPOSE_CONV2D per group and a CONCAT;
    the command stream vela 5.2 (U55/U65) writes for it computes another function than the graph on the
    NPU simulator (ConvTranspose2d(8, 6, 3, stride=2, groups=2): 0.39 off in float), also with one
    RESCALE per group (which made plain grouped convolutions exact, see
    helpers/intmath.py::_rescale_concat_parts). Until that is understood it stays on the CPU: a slower
    model, never a silently wrong one."""
    if not is_convolution(node):
        return None
    args = conv_args(node)
    x = _val(args.input)
    if x is None or args.groups <= 1 or not args.transposed:
        return None
    return (f"grouped transposed convolution ({args.groups} groups): the command stream vela writes for it "
            "computes another function than the graph (NPU simulator); split the groups into separate "
            "transposed convolutions")



def _float_constant_leaving_the_npu(node: Node, family: str) -> str | None:
    """A float value made from constants alone outside the quantized region, read by a node outside it:
    `x + torch.arange(4)` folds the integer arange into a buffer that the quantizer leaves unquantized, and
    exir casts it to float for the add, which stays on the CPU in float. The cast alone would be the whole
    partition, its output a float tensor; Ethos-U computes integers only and vela 5.2 fails on the graph
    (CONST FP32 -> IDENTITY: "Invalid argument output"), on every family (measured on ethos-u55-128 and
    ethos-u85-256). A float constant that only quantized nodes read is folded into them and stays."""
    val = _val(node)
    if val is None or not val.dtype.is_floating_point or node.meta.get("arm_quantized") or not is_compile_time(node):
        return None
    if _read_only_by_quantized_nodes(node):
        return None
    return (f"a {val.dtype} value computed from constants for a float operation on the CPU: Ethos-U computes "
            "integers only (vela takes no float tensor), so the CPU computes it")


def _read_only_by_quantized_nodes(node: Node, depth: int = 8) -> bool:
    """Every reader of `node` is in the quantized region, or another compile-time node whose own readers are
    (a cast, then a view of the constant)."""
    return depth > 0 and all(user.meta.get("arm_quantized") or (
        is_compile_time(user) and _read_only_by_quantized_nodes(user, depth - 1)) for user in node.users)


Rule = Callable[[Node, str], "str | None"]
RULES: dict[str, tuple[Rule, ...]] = {
    "U55": (_channels, _family_rules, _u55_no_bool, _u55_convolution, _u55_avg_pool, _u55_shapes,
            _grouped_transposed_convolution, _float_constant_leaving_the_npu),
    "U65": (_channels, _family_rules, _u55_no_bool, _u55_convolution, _u55_avg_pool, _u55_shapes,
            _grouped_transposed_convolution, _float_constant_leaving_the_npu),
    "U85": (_channels, _family_rules, _grouped_transposed_convolution, _float_constant_leaving_the_npu),
}


def ethosu_reason(node: Node, family: str) -> str | None:
    """Why vela cannot compile `node` for an Ethos-U `family` ("U55", "U65", "U85"); None if it can."""
    if node.op != "call_function" or node.target is operator.getitem:
        return None
    if is_control_flow(node):
        return (f"{node.target.__name__}: vela compiles no TOSA control flow (COND_IF/WHILE_LOOP), so it "
                "runs on the CPU")
    if "quantize" in str(node.target) or _is_constant(node):
        return None  # folded into the neighbours' RESCALEs (or into constants): checked there
    for rule in RULES[family]:
        reason = rule(node, family)
        if reason is not None:
            return reason
    return None
