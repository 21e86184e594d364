"""`hobbit zoo`: the built-in models (hobbit.zoo): list them, or save one as an .onnx file."""

from __future__ import annotations

import argparse

import onnx

from hobbit import zoo
from hobbit.cli.output import writing


def register(sub: argparse._SubParsersAction) -> None:
    """Add `hobbit zoo` to the subcommands."""
    p = sub.add_parser("zoo", help="list the built-in models, or save one as an .onnx file",
                       description="With no NAME, list the zoo models. With NAME, save that model (random "
                                   "weights, torchvision layout) to NAME.onnx or -o FILE.")
    p.add_argument("name", nargs="?", choices=list(zoo.MODELS), metavar="NAME", help="model to save")
    p.add_argument("-o", "--output", metavar="FILE", help="where to save it (default NAME.onnx)")
    p.set_defaults(func=cmd_zoo)


def cmd_zoo(args: argparse.Namespace) -> int:
    if args.name is None:
        width = max(len(name) for name in zoo.MODELS)
        for name, fn in zoo.MODELS.items():
            print(f"{name:{width}s}  {(fn.__doc__ or '').strip().splitlines()[0]}")
        return 0
    model = zoo.build(args.name)
    path = args.output or f"{args.name}.onnx"
    with writing(path):
        onnx.save(model, path)
    print(f"wrote {path}")
    return 0
