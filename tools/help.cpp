// `qconv-driver --help` and `qconv-driver MODE --help`: every option with one
// line, its default and an example. The option names here are the ones the
// modes read (an option a mode does not read is refused, exit 2, naming it).
#include <ostream>

#include "tools/driver.h"

namespace qconv::driver {

namespace {

const char common_help[] = R"(common options (every mode):
  --mode=C|P|CP         correctness against the reference, performance, or both (default C; graph: always both)
  --impl=auto|NAME|A,B|all|list
                        the dispatcher's choice (default), forced rows, every row, or print the table
  --isa=NAME            cap the ISA (avx2, avx2_vnni, avx512_core, avx512_core_vnni, avx512_core_amx, ...);
                        also sets ONEDNN_MAX_CPU_ISA unless it is set
  --threads=N           threads (default: OpenMP's; 1..4096)
  --seed=N              data seed (default 1; problem i uses N + i)
  --reps=N              P mode: at most N timed repetitions (default 20)
  --budget-ms=T         P mode: stop repeating once T ms were spent (default 100)
  --cold=1              P mode (conv, matmul): caches flushed before every timed run, as a layer's
                        weights are on their first use in a network (default 0: warm)
  --dump=DIR            write DIR/NNNN/ per run: the problem, its data and both results
  --report=kv|table     key=value lines for scripts (default), or a table for a person
  --report-dir=DIR      with --report=table: where the log, TSV and plot go (default build/reports/<time>/)
  --peak-file=FILE      the int8 peak of the %peak column is read from FILE when an earlier table of the same
                        ISA level and thread count wrote it there, else measured and added (default
                        $QCONV_PEAK_FILE; ./run.sh sets one per run)
  --help, -h            this text; exit 0
)";

const char conv_help[] = R"(usage: qconv-driver conv [options] DESC... | --batch=FILE
int8 convolutions on one, several or all implementations; one line per run, or a table.
  DESC                  benchdnn syntax, e.g. mb1ic64ih56oc64oh56kh3ph1 (repeatable)
  --batch=FILE          one problem per line, '#' comments, a name ending in *N counts N times (repeatable)
  --mb=N                override every problem's mini-batch (default: the problem's)
  --dt=SRC:WEI:DST      data types (default u8:s8:u8; source u8/s8, weights s8, destination u8/s8/s32/f32)
  --zp=none|tensor:V|tensor:random|channel:V|channel:random
                        source zero point (default none)
  --post-ops="A;B;..."  the post-op chain, e.g. relu, clip:0:6, add:per_oc, sum:0.5, fq:per_channel,
                        dw:2:u8 (README.md, "conv options"; default none)
  --scales=per_oc|tensor|none   output scales (default per_oc)
  --bias=1|0            with or without bias (default 1)
  --dst-zp=N            destination zero point (default 0)
  --data=random|extreme data that keeps the f32 pipeline exact (default), or saturating extremes
  --baseline=auto|none|NAME     P mode: the ratio= reference (default auto: the fastest oneDNN brgconv row)
example:
  qconv-driver conv --batch=bench/shapes/shapes_resnet_50 --mb=1 --mode=P --report=table --threads=1
)";

const char matmul_help[] = R"(usage: qconv-driver matmul [options] DESC... | --batch=FILE
weight-compressed MatMul Y = X · deq(W)ᵀ on one, several or all implementations.
  DESC                  mMkKnN, e.g. m1k4096n4096 (repeatable)
  --batch=FILE          one problem per line (repeatable)
  --wei=u8|s8|u4|s4     weight type (default u8)
  --group=per_oc|N      scale / zero-point group along K (default per_oc)
  --zp=none|tensor|per_oc|per_group     weight zero point (default none)
  --bias=1|0            with or without bias (default 0)
  --dq=1|0              opt-in dynamic quantization of X (default 0)
  --scale-dt=f32|f16    the scales' type as handed over (default f32)
  --dt=T|X:Y            activation types f32, f16, bf16 (default f32)
example:
  qconv-driver matmul --mode=CP --impl=all --wei=u4 --group=128 --zp=per_group m1k4096n4096
)";

const char graph_help[] = R"(usage: qconv-driver graph FILE.onnx|FILE.qg [options]
runs a graph as written and after the passes (conv1x1 -> MatMul, the int8 lowering) on the same inputs,
prints the lowering decisions and a summary line op=graph ... status=ok|mismatch (exit 1 on a mismatch).
The check: a quantized network (every output a DequantizeLinear with one scale) is judged in output
steps, within 8 steps (tol=steps:8, docs/semantics.md section 10); any other within a relative
tolerance (1e-4; 1e-2 with --dq or f16 inputs, 5e-2 with bf16 inputs).
  --input=NAME=FILE.npy the input NAME from a NumPy file (repeatable; default: random from --seed);
                        in an ONNX model its shape binds the input's symbolic dims at load
  --shape=NAME=D,D,...  (ONNX) read the model with input NAME of this shape: every symbolic dim
                        (batch, height, width, ...) takes its value; a fixed dim or rank that differs
                        is refused naming the input and dim (exit 2) (repeatable)
  --output-dir=DIR      write each output of the run after the passes as DIR/NAME.npy
  --tol=X               judge by max_rel_diff <= X instead
  --tol-steps=N[:F]     judge in output steps: at most N steps apart, at most the share F differing
  --dim=N               the value of the run-time dimension '?' (default: from --input, else 1)
  --dq=1|0              dynamic quantization in the rewritten graph's compressed MatMuls (default 0)
  --conv-post-ops=1|0   f32 convolutions take the Relu / Clamp / hard-swish / constant Add, Multiply after
                        them as post-ops (default 1; 0: each its own step, for timing the difference)
  --save=FILE           write the graph (an ONNX model: as read; a .qg: after the passes) in the text format
  --report=table        per node: time within the real run, share, implementation, lowering decision
  --threads, --seed, --reps, --budget-ms, --isa: as for every mode (below)
example:
  qconv-driver graph build/models/resnet50_qdq.onnx --report=table --threads=1
)";

} // namespace

void print_help(std::ostream &os, const std::string &mode) {
    if (mode == "conv") os << conv_help;
    else if (mode == "matmul") os << matmul_help;
    else if (mode == "graph") os << graph_help;
    os << "\n" << common_help;
}

} // namespace qconv::driver
