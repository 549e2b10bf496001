#!/usr/bin/python3
"""Generate ONNX's node test cases (the crash suite of infer/wire).

Usage:
    /usr/bin/python3 infer/testdata/gen_node_tests.py OUTDIR

Writes OUTDIR/node/<case>/model.onnx and
OUTDIR/node/<case>/test_data_set_0/{input,output}_N.pb (TensorProto, or
SequenceProto/OptionalProto for the few cases that take those), with the
generators Debian's python3-onnx (1.12) ships. Nothing is downloaded; the
output is not committed (TestONNXNodeSuite writes it to a temporary
directory, about 2 s).

Newer numpy (>= 1.24) removed the aliases np.float, np.int, ... that the
1.12 generators still use: they are set back to the builtins they meant
before the generators are imported.
"""
import builtins
import sys

import numpy as np

for _alias in ("float", "int", "bool", "object", "complex", "str"):
    if _alias not in vars(np):
        setattr(np, _alias, getattr(builtins, _alias))

from onnx.backend.test import cmd_tools  # noqa: E402  (after the aliases)


def main(argv):
    if len(argv) != 2:
        sys.stderr.write(__doc__)
        return 2
    sys.argv = [argv[0], "generate-data", "-o", argv[1]]
    cmd_tools.main()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
