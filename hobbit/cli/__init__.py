"""The `hobbit` command line, one module per subcommand.

main builds the parser from the subcommands and runs one (the console script and
`python -m hobbit` reach it through hobbit.console). Each of run, compile, inspect, bench,
quantize, conformance and zoo adds its own sub-parser (register) and handler (cmd_*); gpu
holds `compile` and `inspect` for a GPU target. Shared by them: args (argument types and
flags), model (the MODEL argument, passes, the fixed-shape build), inputs (--input and
--input-shape against the model's declared inputs) and output (paths checked before the
work, one-line errors for failed writes).

This package imports nothing itself: the console imports hobbit.cli.main only after it
has set up Ctrl-C handling."""
