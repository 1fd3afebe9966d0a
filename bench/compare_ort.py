#!/usr/bin/env python3
"""Runs ONNX models through qconv and ONNX Runtime, side by side: bench/compare.py
with --peers=ort (compare.py also compares with OpenVINO; its docstring has the
details). Same options as compare.py:

  bench/compare_ort.py MODEL.onnx [MODEL.onnx ...] [--driver=build/qconv-driver]
                       [--threads=1,2] [--reps=10] [--rounds=3] [--seed=1] [--keep=DIR]
                       [--tokens=1,32] [--ort-opt=all|none] [--ort-config=KEY=VALUE ...]
                       [--driver-arg=ARG ...] [--per-layer]
"""
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
script = os.path.join(here, "compare.py")
os.execv(sys.executable, [sys.executable, script, "--peers=ort"] + sys.argv[1:])
