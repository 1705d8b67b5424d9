"""Inference batch norm folded into the convolution before it: the math, and a pass on exported programs.

The lowering folds conv -> batch norm on its own (`ops.conv.fold_batch_norm`), so the pass is an
optimisation, not a requirement: it runs before exir decomposes the program, where removing a
MobileNet's 52 batch norms (and their getitems) halves the graph exir re-traces and converts, the
largest part of compile time. Both places use `bn_scale_shift` and `fold_into_conv` below.
"""

from __future__ import annotations

import copy
import operator
from dataclasses import replace

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import ExportGraphSignature, InputKind, TensorArgument
from torch.fx import Node

from .helpers.convolution import bn_scale_shift, conv_args, fold_into_conv, is_convolution  # noqa: F401  (fold_into_conv re-exported)

aten = torch.ops.aten


def _inference_batch_norm(node: Node) -> tuple[Node | None, ...] | None:
    """(input, weight, bias, running_mean, running_var, eps) of an inference batch norm node, else None.

    torch.export gives aten.batch_norm (training flag at 5, eps at 7); after decomposition it is
    aten._native_batch_norm_legit_no_training (eps at 6), which returns a tuple read via getitem."""
    if node.op != "call_function":
        return None
    if node.target is aten.batch_norm.default and len(node.args) >= 8 and not node.args[5]:
        return (*node.args[:5], node.args[7])
    if node.target is aten._native_batch_norm_legit_no_training.default:
        return (*node.args[:5], node.args[6])
    return None


class _Constants:
    """Read and replace the parameters/buffers behind an exported program's placeholders."""

    def __init__(self, ep: ExportedProgram) -> None:
        sig = ep.graph_signature
        self.target = {spec.arg.name: spec.target for spec in sig.input_specs
                       if spec.kind in (InputKind.PARAMETER, InputKind.BUFFER) and spec.target in ep.state_dict}
        self.state_dict = ep.state_dict

    def get(self, node: Node | None) -> torch.Tensor | None:
        if not isinstance(node, Node) or node.op != "placeholder" or node.name not in self.target:
            return None
        return self.state_dict[self.target[node.name]]


def _foldable(bn: Node, consts: _Constants) -> tuple[Node, Node] | None:
    """(conv, bias placeholder to hold the folded bias) when `bn` can be folded, else None."""
    conv, gamma, beta, mean, var, _ = _inference_batch_norm(bn)
    if not is_convolution(conv) or len(conv.users) != 1:
        return None
    args = conv_args(conv)
    if args.transposed and args.groups != 1:
        return None
    if consts.get(args.weight) is None or len(args.weight.users) != 1:
        return None
    if consts.get(mean) is None or consts.get(var) is None:
        return None
    if any(a is not None and (consts.get(a) is None or len(a.users) != 1) for a in (args.bias, gamma, beta)):
        return None
    if bn.target is not aten.batch_norm.default and any(
            u.target is not operator.getitem or (u.args[1] != 0 and u.users) for u in bn.users):
        return None
    # the folded bias goes where a bias already lives (same shape and dtype, so its placeholder's
    # metadata stays true): the conv's own, else the batch norm's beta
    holder = args.bias if args.bias is not None else beta
    if holder is None or consts.get(holder).dtype != consts.get(args.weight).dtype:
        return None
    return conv, holder


def fold_conv_batch_norm(ep: ExportedProgram) -> ExportedProgram:
    """A copy of `ep` with each inference batch norm that follows a convolution folded into it.

    Assumes a program from torch.export (parameters as placeholders named in the graph signature).
    Guarantees: `ep` and the tensors it holds are not modified; a batch norm is folded only when the
    convolution's weight, bias and the batch norm's parameters are constants used by nothing else,
    so the result computes the same function. Returns `ep` itself when nothing folds.
    """
    consts = _Constants(ep)
    plan = [(bn, found) for bn in ep.graph.nodes
            if _inference_batch_norm(bn) is not None and (found := _foldable(bn, consts))]
    if not plan:
        return ep
    gm = copy.deepcopy(ep.graph_module)
    copy_of = dict(zip(ep.graph.nodes, gm.graph.nodes, strict=True))
    state_dict = dict(ep.state_dict)
    dropped: set[str] = set()
    for bn, (conv, holder) in plan:
        args = conv_args(conv)
        _, gamma, beta, mean, var, eps = _inference_batch_norm(bn)
        scale, shift = bn_scale_shift(*(consts.get(a) for a in (gamma, beta, mean, var)), eps=float(eps))
        weight, bias = fold_into_conv(consts.get(args.weight), consts.get(args.bias), scale, shift,
                                      args.transposed)
        state_dict[consts.target[args.weight.name]] = torch.nn.Parameter(weight, requires_grad=False)
        state_dict[consts.target[holder.name]] = torch.nn.Parameter(bias, requires_grad=False)
        new_conv, new_bn, new_holder = copy_of[conv], copy_of[bn], copy_of[holder]
        conv_call = list(new_conv.args) + [None] * max(0, 3 - len(new_conv.args))
        conv_call[2] = new_holder
        new_conv.args = tuple(conv_call)
        if new_bn.target is aten.batch_norm.default:
            new_bn.replace_all_uses_with(new_conv)
        for user in list(new_bn.users):  # getitems of the tuple-returning form
            user.replace_all_uses_with(new_conv)
            gm.graph.erase_node(user)
        gm.graph.erase_node(new_bn)
        for spent in (gamma, mean, var):  # now unused: drop them so they are not serialized
            node = copy_of[spent] if spent is not None else None
            if node is not None and node is not new_holder and not node.users:
                gm.graph.erase_node(node)
                del state_dict[consts.target[spent.name]]
                dropped.add(spent.name)
    gm.graph.lint()
    gm.recompile()
    names = {old.name: new.name for old, new in copy_of.items() if old.name not in dropped}
    for bn, (conv, _) in plan:  # a batch norm that was a program output: its conv is now
        names[bn.name] = copy_of[conv].name
    signature = _renamed(ep.graph_signature, names, dropped)
    return ExportedProgram(root=gm, graph=gm.graph, graph_signature=signature,
                           state_dict=state_dict, range_constraints=ep.range_constraints,
                           module_call_graph=ep.module_call_graph, example_inputs=ep.example_inputs,
                           constants=ep.constants, verifiers=ep.verifiers)


def _renamed(signature: ExportGraphSignature, names: dict[str, str], dropped: set[str]) -> ExportGraphSignature:
    """`signature` for the copied graph: copying may rename nodes (e.g. `input` -> `input_1`)."""

    def arg(a):
        return replace(a, name=names[a.name]) if isinstance(a, TensorArgument) and a.name in names else a

    return ExportGraphSignature(
        input_specs=[replace(s, arg=arg(s.arg)) for s in signature.input_specs if s.arg.name not in dropped],
        output_specs=[replace(s, arg=arg(s.arg)) for s in signature.output_specs])
