#pragma once
// The driver every example shares (examples/<model>.cpp is one line):
//
//   int main(int argc, char** argv) { return tsopt::examples::run("resnet50", argc, argv); }
//
// It builds the zoo model, optimizes it with the measured cost model on the
// chosen backend (cost::measured<backend::dnnl> by default: every distinct
// operator configuration timed once, cached on disk), then verifies on the
// board as AutoGraph does: the original graph and the optimizer's candidates
// (top-k when the graph was searched whole, else its best) run end to end in
// interleaved rounds, candidates whose outputs disagree with the original are
// rejected, and the fastest is kept — the original when nothing beats it, so
// no model gets slower. Both graphs' outputs are compared (relative error at
// most --tolerance, 1e-4 by default); the program exits 1 when they disagree
// or the optimizer produced a wrong candidate, 2 on bad options.
//
// The report mirrors MetaFlow's artifact output: for baseline and optimized,
// end-to-end time, estimated time (sum of measured operator costs), FLOPs,
// memory accesses and kernel launches (cost::multi_dim), then the search
// report (time, rules used) and a summary line; `RESULT key=value ...` is the
// line bench/models_bench.sh reads.
//
// run() is compiled once (driver.cpp, into the library every example links):
// it instantiates the whole optimizer and both executors, which took each
// example ~2 minutes to compile when every main included it.
#include <string_view>

namespace tsopt::examples {

// The whole program: parse, build, optimize, verify on the board, report.
// Returns the exit status (0 agree, 1 outputs disagree, 2 bad options).
int run(std::string_view model, int argc, char** argv);

}  // namespace tsopt::examples
