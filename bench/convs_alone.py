#!/usr/bin/python3
"""A lowered network against its convolutions run alone (issue #35's targets
"lowered network vs the sum of its convolutions run alone in the driver" and
"time outside convolutions/MatMuls").

  bench/convs_alone.py MODEL.onnx|.qg [--driver=build/qconv-driver] [--threads=1]
                       [--rounds=2] [--reps=5] [--top=10]

Each round runs `qconv-driver graph MODEL --report=table` (every node's median
of 5 profiled runs, and the end-to-end median `after_ms`), then every
QConvolution of its table alone: `qconv-driver conv --mode=P --mb=1
--impl=auto --baseline=none` with the same descriptor, data types, zero-point
kind and post-op text (a fused 1x1 + depthwise pair with its `dw` item). The
rounds alternate the network and the layers; each case keeps its best (the
machine's other jobs only ever add time). Prints the per-layer table (the
`--top` largest network/alone gaps), then:

  network_ms        the sum of the network's per-node times
  after_ms          the best end-to-end median of the driver's summary line
  convs_network_ms  the QConvolution nodes' share of network_ms
  outside_ms        network_ms − convs_network_ms (and its share)
  convs_alone_ms    the same convolutions alone, summed
  network/alone     network_ms / convs_alone_ms
  same_row          convolutions whose row and attribute set alone (`auto`) are the
                    network's (issue #35: "the same row auto picks for that layer alone")
"""
import argparse
import re
import subprocess
import sys

ROW = re.compile(r"^(\S+)\s+(\S+)\s+([0-9.]+)\s+([0-9.]+)%\s+(.*)$")
IMPL = re.compile(r"^qconv:(\S+) attr\[(\d+)\] (\S+) (\w+)->(\w+) zp:(\w+)(?: (.*?))?(?:  \[.*\])?$")


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode not in (0, 1):
        sys.exit("failed (%d): %s\n%s" % (p.returncode, " ".join(cmd), p.stdout[-2000:]))
    return p.stdout


def network(a):
    out = run([a.driver, "graph", a.model, "--threads=%d" % a.threads, "--reps=%d" % a.reps, "--tol-steps=8",
               "--report=table"])
    rows, after = {}, None
    in_table = False
    for line in out.splitlines():
        if line.startswith("node "):
            in_table = True
            continue
        if line.startswith("op=graph"):
            m = re.search(r"after_ms=([0-9.]+)", line)
            after = float(m.group(1)) if m else None
        if not in_table or line.startswith("total"):
            continue
        m = ROW.match(line)
        if m:
            rows[m.group(1)] = (m.group(2), float(m.group(3)), m.group(5))
    return rows, after


def alone(a, impl):
    m = IMPL.match(impl)
    if not m:
        return None, False
    _, _, desc, src, dst, zp, ops = m.groups()
    dt = {"u8": "u8", "s8": "s8", "i8": "s8", "f32": "f32"}
    zp_opt = {"none": "none", "per_tensor": "tensor:random", "per_channel": "channel:random"}.get(zp, "none")
    cmd = [a.driver, "conv", "--mode=P", "--mb=1", "--impl=auto", "--baseline=none", "--threads=%d" % a.threads,
           "--dt=%s:s8:%s" % (dt.get(src, src), dt.get(dst, dst)), "--zp=" + zp_opt]
    if ops:
        cmd.append("--post-ops=" + ops.strip())
    cmd.append(desc)
    out = run(cmd)
    ms, row = None, None
    for line in out.splitlines():
        r = re.match(r"op=conv impl=(\S+) desc=.* attr=(\d+)", line)
        if r:
            row = "%s attr[%s]" % r.groups()
        if line.startswith("op=conv impl=auto total="):
            t = re.search(r" ms=([0-9.]+)", line)
            ms = float(t.group(1)) if t else None
    # The row and attribute set `auto` picked alone, as the network's impl names them.
    return ms, row == "%s attr[%s]" % (m.group(1), m.group(2))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--driver", default="build/qconv-driver")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--top", type=int, default=10)
    a = ap.parse_args()
    best_net, best_alone, impls, after, same_row = {}, {}, {}, None, {}
    for _ in range(a.rounds):
        rows, aft = network(a)
        if aft is not None:
            after = aft if after is None else min(after, aft)
        for node, (op, ms, impl) in rows.items():
            best_net[node] = min(ms, best_net.get(node, ms))
            impls[node] = (op, impl)
        for node, (op, impl) in impls.items():
            if op != "QConvolution":
                continue
            t, same = alone(a, impl)
            same_row[node] = same
            if t is not None:
                best_alone[node] = min(t, best_alone.get(node, t))
    convs = [n for n, (op, _) in impls.items() if op == "QConvolution"]
    missing = [n for n in convs if n not in best_alone]
    net = sum(best_net.values())
    conv_net = sum(best_net[n] for n in convs)
    conv_alone = sum(best_alone.get(n, 0.0) for n in convs)
    gaps = sorted(((best_net[n] - best_alone[n], n) for n in convs if n in best_alone), reverse=True)
    print("%-32s %10s %10s %7s" % ("convolution", "network", "alone", "ratio"))
    for _, n in gaps[:a.top]:
        print("%-32s %10.4f %10.4f %7.3f" % (n, best_net[n], best_alone[n], best_net[n] / best_alone[n]))
    outside = sorted(((best_net[n], n) for n, (op, _) in impls.items() if op != "QConvolution"), reverse=True)
    print("%-32s %10s" % ("outside the convolutions", "network"))
    for ms, n in outside[:a.top]:
        print("%-32s %10.4f  %s" % (n, ms, impls[n][0]))
    print("model=%s threads=%d rounds=%d convs=%d network_ms=%.3f after_ms=%s convs_network_ms=%.3f "
          "outside_ms=%.3f outside_share=%.3f convs_alone_ms=%.3f network/alone=%.3f same_row=%d/%d%s" %
          (a.model, a.threads, a.rounds, len(convs), net, "%.3f" % after if after is not None else "?", conv_net,
           net - conv_net, (net - conv_net) / net if net else 0, conv_alone, net / conv_alone if conv_alone else 0,
           sum(same_row.get(n, False) for n in convs), len(convs),
           (" missing=" + ",".join(missing)) if missing else ""))
    differ = [n for n in convs if not same_row.get(n, False)]
    if differ:
        print("another row alone: " + ", ".join(differ))


if __name__ == "__main__":
    main()
