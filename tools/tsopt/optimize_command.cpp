// tsopt optimize: import, optimize, pick the fastest on the device, verify (reference executor),
// export, report. The work is tsopt::optimize (search), the backend's
// pick_fastest (AutoGraph's on-board verification), the ONNX importer and
// exporter and io/dot.hpp; this file sequences them and prints.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <future>
#include <iostream>
#include <map>
#include <optional>
#include <stdexcept>

#include "backends.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "derivation_json.hpp"
#include "pictures.hpp"
#include "tsopt/io/progress.hpp"
#include "tsopt/cost/multi_dim.hpp"
#include "tsopt/cost/sum.hpp"
#include "tsopt/io/dot.hpp"
#include "tsopt/optimize.hpp"
#include "tsopt/version.hpp"

namespace tsopt::cli {

using io::progress;

const std::string_view optimize_help =
    "usage: tsopt optimize IN.onnx -o OUT.onnx [options]\n"
    "\n"
    "Imports IN.onnx, searches for a faster equivalent graph with the verified rewrite rules built\n"
    "into tsopt, checks that the result computes the same outputs as the original on random\n"
    "inputs, and writes it to OUT.onnx. With --backend cpu (or cuda) operator costs are measured\n"
    "on the device and the original and the best candidates are timed end to end: the fastest is\n"
    "written, so the model never gets slower (if --budget leaves time to time them; otherwise the\n"
    "cost model's choice is written, and the summary says so). Unknown ONNX operators are kept.\n"
    "\n"
    "options:\n"
    "  -o, --output OUT.onnx   where to write the optimized model (required)\n"
    "  --backend B             cpu: oneDNN, measured costs (default); cuda: cuDNN/cuBLAS (needs a CUDA\n"
    "                          build and a GPU); analytic: the analytical cost model, no device timing\n"
    "  --alpha A               relaxation of the backtracking search, >= 1 (default 1.05; 1 is greedy)\n"
    "  --expansions N          search budget in graphs expanded (default 400): the same model, options\n"
    "                          and measurement cache give the same result whatever the machine's load\n"
    "  --budget SECONDS        wall-time cap of import, measurement, search and end-to-end timing (default 60);\n"
    "                          a search it stops before --expansions depends on the machine's speed (the\n"
    "                          summary says so); on a cold measurement cache, operators it leaves no time\n"
    "                          to measure are priced by the analytical model (the summary counts them)\n"
    "  --batch N               value for a dynamic leading (batch) dimension of the inputs\n"
    "  --dims NAME=N,...       values for named symbolic dimensions\n"
    "  --report FILE.json      write a JSON report (costs, times, rules used, verification)\n"
    "  --dot DIR               pictures (.dot, + .svg with Graphviz): DIR/before and DIR/after (costs on\n"
    "                          the nodes, what the rewrites matched and made highlighted), DIR/rewrite-NNN\n"
    "                          (each rewrite: the region before and after), DIR/report.html (all of it)\n"
    "  --rules SET|FILE        generated (default: the rules tsopt-gen generated and Z3 proved,\n"
    "                          tsopt::rules::default_rules()) | axioms (the axioms read as rules) | all,\n"
    "                          or a rule listing written by tsopt-gen --listing (its spec hash and\n"
    "                          every rule's proof record are checked before use); `tsopt rules` lists them\n"
    "  --top-k K               candidates timed end to end besides the original (default 4)\n"
    "  --reps N                timing rounds per candidate (default 20; fewer, 5 at least, where --budget\n"
    "                          would not hold them); a candidate replaces the original only when it wins\n"
    "                          enough rounds (sign tests at 5 % over the candidates together: one\n"
    "                          needs 5 of 5, 9 of 10, 15 of 20; the first of four 7 of 7, 16 of 20);\n"
    "                          no more candidates are timed than the rounds can confirm one of\n"
    "  --tolerance E           max relative error of outputs vs the original (default 1e-4)\n"
    "  --seed S                seed of the random inputs and the search (default 1)\n"
    "  --keep-denormals        cpu: compute with denormal floats instead of flushing them to zero (slower where they occur)\n"
    "  --max-constant-mib N    largest constant a rewrite may create, in MiB (default: the larger of\n"
    "                          16 MiB and the model's weights); rewrites needing more are not applied\n"
    "  --quiet                 no progress lines on stderr (by default: bars on a terminal, plain lines\n"
    "                          when stderr is a file or a pipe)\n"
    "  -h, --help              this text\n"
    "\n"
    "Measured operator times are cached in $TSOPT_CACHE_DIR (default ~/.cache/tsopt).\n"
    "Set OMP_NUM_THREADS to fix the number of threads oneDNN uses.\n";

namespace {

struct settings {
    std::string in, out, backend, report, dot;
    double alpha = 1.05, budget = 60, tolerance = 1e-4;
    std::size_t expansions = 400;
    std::size_t top_k = 4;
    int reps = 20;
    std::uint64_t seed = 1;
    std::size_t max_constant_bytes = 0;  // 0: optimize's default for the model
    bool keep_denormals = false;
    std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
    double import_s = 0;  // reading and importing the input
    onnx::import_options import;
};

// What an optimization produced, whichever backend priced it.
struct outcome {
    graph chosen;
    optimize_result result;
    std::string cost_model;                 // "measured (dnnl)", "analytical"
    double cost_before = 0, cost_after = 0; // cost-model ms
    std::optional<double> ms_before, ms_after;  // end to end, on the device
    std::size_t chosen_index = 0, rejected = 0;
    std::vector<double> candidate_ms;
    std::vector<int> candidate_faster_rounds;  // rounds each candidate ran faster than the original
    std::vector<bool> candidate_confirmed;     // won enough of them (backend::confirmed_against_original)
    int timing_rounds = 0;                  // end-to-end rounds actually run (at most --reps)
    // Measured backends whose budget left no time to time the candidates:
    // what the original and the best would have needed, and what was left.
    std::optional<double> untimed_need_ms, untimed_left_ms;
    double search_s = 0;
    std::size_t estimated_operators = 0;  // priced by the analytical model: --budget ran out while measuring
    // For pictures; the last argument is the graph's constant_mask().
    std::function<double(const graph&, std::size_t, const std::vector<bool>&)> node_cost;
    // Opaque types no backend implementation exists for: timing and
    // verification run on the graphs with those nodes cut out (cut_around).
    std::set<std::string> unimplemented;
    // The device's reading of the original on the timing's inputs, and how
    // far the written candidate's outputs were from it there: checked against
    // the reference (none when nothing was timed).
    std::vector<tensor<float>> device_inputs, device_outputs;
    double device_chosen_error = 0;
};

// A cost model pricing the opaque nodes of `skip` (which cannot run on the
// device) at 0: every candidate keeps them unchanged, so the comparison
// between candidates is the same without them.
template <class M>
class without_unrunnable {
public:
    static constexpr bool additive = true;
    without_unrunnable(M& m, std::set<std::string> skip) : m_(&m), skip_(std::move(skip)) {}
    double operator_cost(const graph& g, std::size_t i) { return skipped(g, i) ? 0.0 : m_->operator_cost(g, i); }
    double operator_cost(const graph& g, std::size_t i, const std::vector<bool>& constant) {
        return skipped(g, i) ? 0.0 : m_->operator_cost(g, i, constant);
    }
    double graph_cost(const graph& g) {
        auto constant = g.constant_mask();
        double t = 0;
        for (std::size_t i = 0; i < g.size(); ++i) t += operator_cost(g, i, constant);
        return t;
    }

private:
    bool skipped(const graph& g, std::size_t i) const {
        const node& n = g.nodes[i];
        return n.kind == node_kind::opaque && skip_.count(opaque_key(n));
    }
    M* m_;
    std::set<std::string> skip_;
};

// --budget bounds the command, not only the search: what importing and
// measuring took is taken off, and so is what exporting the result and
// reading it back for the check will take, estimated as what the import took
// (the same work in reverse, on a graph of about the same size), and what
// timing the candidates end to end will take (`timing_s`). The search keeps a
// twentieth at least.
optimize_options search_options(const settings& s, double timing_s = 0) {
    const double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - s.started).count();
    const double left = std::max(s.budget / 20, s.budget - spent - s.import_s - timing_s);
    optimize_options o{.alpha = s.alpha, .budget = std::chrono::duration<double>(left), .max_expansions = s.expansions,
                       .seed = s.seed, .top_k = s.top_k};
    o.max_constant_bytes = s.max_constant_bytes;
    // The written candidate's derivation alone is replayed, after the
    // timing (written_rewrites): replaying every candidate's inside
    // optimize would take from --budget's timing.
    o.replay_derivations = false;
    return o;
}

// A cost model from outcome::node_cost (the one that priced the search):
// the graph's cost is the sum of its operators'.
struct node_cost_sum {
    const std::function<double(const graph&, std::size_t, const std::vector<bool>&)>* cost;
    double operator_cost(const graph& g, std::size_t i) { return (*cost)(g, i, g.constant_mask()); }
    double graph_cost(const graph& g) {
        const auto constant = g.constant_mask();
        double sum = 0;
        for (std::size_t i = 0; i < g.size(); ++i) sum += (*cost)(g, i, constant);
        return sum;
    }
};

// The optimizer's best and its top-k, distinct and different from the original.
std::vector<graph> candidates_of(const graph& original, const optimize_result& r) {
    std::vector<graph> c{original};
    std::vector<std::uint64_t> seen{original.structural_hash()};
    auto add = [&](const graph& h) {
        auto k = h.structural_hash();
        if (std::find(seen.begin(), seen.end(), k) != seen.end()) return;
        seen.push_back(k);
        c.push_back(h);
    };
    add(r.optimized);
    for (const auto& h : r.top_k) add(h);
    return c;
}

template <class B>
outcome run_measured(const settings& s, const graph& g, std::span<const rewrite::rule> rules, progress& prog,
                     std::shared_ptr<B>& keep) {
    typename B::options bo;
    bo.verify_tolerance = s.tolerance;
    if constexpr (requires { bo.flush_denormals; }) bo.flush_denormals = !s.keep_denormals;
    keep = std::make_shared<B>(bo);
    B& be = *keep;
    install_device_ops(be);
    if constexpr (requires { be.price_for_model(g); }) be.price_for_model(g);  // weights where the whole model leaves them
    outcome o;
    o.unimplemented = unimplemented_types(g, be.opaque_impls);
    auto device_cost = std::make_shared<cost::measured<B>>(be);
    auto measured = std::make_shared<without_unrunnable<cost::measured<B>>>(*device_cost, o.unimplemented);

    // --budget bounds measuring too: on a cold cache the operators not
    // measured by half the budget (up front), or by the end of the search's
    // share (operators the search creates), are priced by the analytical
    // model scaled to the measured ones, and measured by a later run.
    const auto measure_by = [&](double seconds_from_start) {
        if (std::isfinite(s.budget) && s.budget < 1e9)
            device_cost->measure_until(s.started + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                       std::chrono::duration<double>(seconds_from_start)),
                                       [a = cost::analytical{}](const graph& h, std::size_t i, const std::vector<bool>& c) {
                                           return a.operator_cost(h, i, c);
                                       });
    };
    measure_by(s.budget / 2);
    // Every operator of the input and of its preprocessed form, measured up
    // front (the slow part on a cold cache), with a progress bar.
    {
        rewrite::fold_cache fc;
        graph pre = rewrite::preprocess(g, fc);
        std::size_t total = g.size() + pre.size(), k = 0;
        for (const graph* h : std::initializer_list<const graph*>{&g, &pre}) {
            auto constant = h->constant_mask();
            for (std::size_t i = 0; i < h->size(); ++i, ++k) {
                measured->operator_cost(*h, i, constant);
                if (k % 4 == 0) prog.bar("measuring operators", k, total);
            }
        }
        prog.clear();
    }

    o.cost_model = "measured (" + std::string(B::name) + ")";
    // A timing round runs a graph twice (untimed, then timed); plans and
    // warm-up take about three rounds more. The search leaves room for
    // min_rounds of the original and its best, each estimated at the
    // original's cost, and a twentieth of the budget at least (the search
    // stops between expansions, a little past its deadline); the top-k are
    // timed too when the search ends early.
    const int min_rounds = std::min(backend::min_pick_rounds, s.reps), overhead_rounds = 3;
    const auto round_ms = [&](const graph& h) { return 2 * measured->graph_cost(h); };
    const double timing_s = std::max(s.budget / 20, (min_rounds + overhead_rounds) * round_ms(g) * 2 / 1e3);
    prog.start_ticker("searching", s.budget);
    const auto t0 = std::chrono::steady_clock::now();
    const auto search_opts = search_options(s, timing_s);
    measure_by(std::chrono::duration<double>(t0 - s.started).count() + search_opts.budget.count());
    o.result = optimize(g, rules, *measured, search_opts);
    o.estimated_operators = device_cost->estimated();
    o.search_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    prog.stop_ticker();

    auto cands = candidates_of(g, o.result);
    // Timed without the nodes the device cannot run (when there are any).
    std::vector<graph> runnable;
    for (const graph& c : cands) runnable.push_back(o.unimplemented.empty() ? c : cut_around(c, o.unimplemented));
    auto inputs = backend::random_inputs(runnable[0], s.seed);
    // --budget bounds the command: the end-to-end timing gets what the
    // search left. It times the candidates in order (the original, the
    // search's best, the top-k) as many as fit the rounds in which one of
    // them can be confirmed (backend::rounds_to_confirm: more candidates ask
    // for more, since they are tested together), in fewer rounds than
    // --reps when --reps would not fit; and no more candidates than --reps
    // rounds can confirm one of (--reps 5: the best alone). When not even
    // the original and the best fit, nothing is timed and the cost model's
    // best is written.
    const double left_ms =
        1e3 * (s.budget - std::chrono::duration<double>(std::chrono::steady_clock::now() - s.started).count());
    std::vector<double> rounds_ms;  // one round of each candidate (each a pass over its graph)
    for (const graph& c : runnable) rounds_ms.push_back(round_ms(c));
    std::size_t fit = 0;
    double fit_round_ms = 0;
    // Rounds that can confirm one of `contenders` candidates, within --reps.
    const auto rounds_for = [&](std::size_t contenders) { return std::min(backend::rounds_to_confirm(contenders), s.reps); };
    while (fit < runnable.size() && (fit < 2 || backend::rounds_to_confirm(fit) <= s.reps) &&
           (rounds_for(fit) + overhead_rounds) * (fit_round_ms + rounds_ms[fit]) <= left_ms)
        fit_round_ms += rounds_ms[fit++];
    if (fit < std::min<std::size_t>(2, cands.size())) {
        o.timing_rounds = 0;
        o.untimed_need_ms = (min_rounds + overhead_rounds) * (rounds_ms[0] + (rounds_ms.size() > 1 ? rounds_ms[1] : 0.0));
        o.untimed_left_ms = std::max(0.0, left_ms);
        o.chosen_index = cands.size() > 1 ? 1 : 0;
        o.chosen = cands[o.chosen_index];
    } else {
        cands.resize(fit);
        runnable.resize(fit);
        o.timing_rounds = s.reps;
        if (fit_round_ms > 0 && left_ms < (s.reps + overhead_rounds) * fit_round_ms)
            o.timing_rounds =
                std::clamp(static_cast<int>(left_ms / fit_round_ms) - overhead_rounds, rounds_for(fit - 1), s.reps);
        prog.line("timing " + std::to_string(cands.size()) + " graphs end to end (" + std::to_string(o.timing_rounds) +
                  " rounds)");
        // No round starts that would end past what the export and the check
        // need (as long as the import took, a twentieth of the budget at
        // least: zoo_nasnet_a's took 2.6-3.0 s, its import 0.3 s): compiling
        // the candidates' plans was not in the estimate above.
        const auto deadline = s.started + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                              std::chrono::duration<double>(s.budget - std::max(s.import_s, s.budget / 20)));
        auto pick = be.pick_fastest(runnable, inputs, o.timing_rounds, deadline);
        o.timing_rounds = pick.rounds;
        be.drop_plans();  // the candidates' plans (weights in device layouts) are not run again
        prog.clear();
        o.chosen_index = pick.best;
        o.candidate_ms = pick.ms;
        o.candidate_faster_rounds = pick.faster_rounds;
        o.candidate_confirmed = pick.confirmed;
        for (std::size_t c = 1; c < cands.size(); ++c) o.rejected += pick.rejected[c];
        o.chosen = cands[pick.best];
        o.device_inputs = inputs;
        o.device_outputs = std::move(pick.outputs);
        o.device_chosen_error = pick.error[pick.best];
        o.ms_before = pick.ms[0];
        o.ms_after = pick.ms[pick.best];
    }
    o.cost_before = measured->graph_cost(g);
    o.cost_after = measured->graph_cost(o.chosen);
    // `measured` reads `device_cost` by reference: both are kept alive.
    o.node_cost = [measured, device_cost](const graph& h, std::size_t i, const std::vector<bool>& constant) {
        return measured->operator_cost(h, i, constant);
    };
    return o;
}

void run_analytic(const settings& s, const graph& g, std::span<const rewrite::rule> rules, progress& prog, outcome& o) {
    o.cost_model = "analytical";
    cost::analytical model;
    prog.start_ticker("searching", s.budget);
    const auto t0 = std::chrono::steady_clock::now();
    // Nothing is timed here, so no top-k candidates: on a large graph each
    // one is a copy and a hash of the whole graph.
    auto opts = search_options(s);
    opts.top_k = 0;
    o.result = optimize(g, rules, model, opts);
    o.search_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    prog.stop_ticker();
    o.chosen = o.result.optimized;
    o.chosen_index = o.result.report.improved ? 1 : 0;
    o.cost_before = o.result.report.cost_before;
    o.cost_after = o.result.report.cost_after;
    o.node_cost = [model](const graph& h, std::size_t i, const std::vector<bool>& constant) {
        return model.operator_cost(h, i, constant);
    };
}

json op_counts_json(const graph& g) {
    std::map<std::string, int> c;
    for (const node& n : g.nodes)
        if (n.kind == node_kind::op || n.kind == node_kind::opaque) ++c[std::string(n.type_name())];
    json o = json::object();
    for (const auto& [k, v] : c) o[k] = v;
    return o;
}

json metrics_json(const cost::metrics& m, std::size_t ops, std::optional<double> ms, double cost, const graph& g) {
    return {{"end_to_end_ms", json_number(ms)},
            {"cost_ms", cost},
            {"operators", ops},
            {"flops", m.flops},
            {"memory_bytes", m.memory_bytes},
            {"kernel_launches", m.launches},
            {"peak_memory_bytes", m.peak_bytes},
            {"operator_counts", op_counts_json(g)}};
}

}  // namespace

int optimize_command(int argc, char** argv, int first) {
    settings s;
    std::vector<std::string> arguments;
    std::size_t max_constant_mib = 0;
    std::string rule_set;
    bool quiet = false;
    import_args shapes;
    s.backend = "cpu";
    options cmdline("optimize");
    cmdline.positionals(arguments)
        .text("-o,--output", s.out)
        .one_of("--backend", s.backend, {"cpu", "cuda", "analytic"})
        .number("--alpha", s.alpha, 1.0)
        .number("--budget", s.budget, 0.0, true)
        .integer("--expansions", s.expansions, 1, 100'000'000)
        .text("--report", s.report)
        .text("--dot", s.dot)
        .text("--rules", rule_set)
        .integer("--top-k", s.top_k, 0, max_top_k)
        .integer("--reps", s.reps, 1, max_reps)
        .number("--tolerance", s.tolerance, 0.0, true)
        .integer("--seed", s.seed, 0)
        .integer("--max-constant-mib", max_constant_mib, 1, std::int64_t(1) << 30)
        .flag("--keep-denormals", s.keep_denormals)
        .flag("--quiet", quiet);
    shapes.add_to(cmdline);
    cmdline.parse(argc, argv, first);
    if (arguments.size() != 1)
        throw usage_error(arguments.empty() ? "missing the input model (tsopt optimize IN.onnx -o OUT.onnx)"
                                            : "expected one input model, got " + std::to_string(arguments.size()) + " arguments");
    s.in = arguments[0];
    if (s.out.empty()) throw usage_error("missing -o OUT.onnx (where to write the optimized model)");
    s.max_constant_bytes = max_constant_mib << 20;
    s.import = shapes.import_options();

    // Fail on an unwritable or clashing destination before the search, not
    // after it; the input is never a destination.
    check_output_file("-o", s.out);
    if (!s.report.empty()) check_output_file("--report", s.report);
    std::vector<std::pair<std::string, std::string>> files{{"the input", s.in}, {"-o", s.out}, {"--report", s.report}};
    if (rule_set != "axioms" && rule_set != "generated" && rule_set != "all")
        files.emplace_back("the --rules listing", rule_set);  // read, never overwritten
    if (!s.dot.empty()) {
        namespace fs = std::filesystem;
        std::error_code ec;
        if (!fs::is_directory(s.dot, ec)) {
            fs::path parent = fs::path(s.dot).parent_path();
            if (fs::exists(s.dot, ec)) throw write_error("--dot '" + s.dot + "' is not a directory");
            if (!parent.empty() && !fs::is_directory(parent, ec))
                throw write_error("--dot '" + s.dot + "': directory '" + parent.string() +
                                  "' does not exist (only the last component of --dot is created)");
        }
        for (const char* f : {"before.dot", "after.dot", "before.svg", "after.svg", "report.html"})
            files.emplace_back(std::string("--dot's ") + f, (fs::path(s.dot) / f).string());
    }
    check_distinct(files);

    // A bad listing is refused before the model is read.
    chosen_rules rules(rule_set);
    progress prog(quiet);
    const auto import_started = std::chrono::steady_clock::now();
    auto model = load_model(s.in, s.import);
    const auto import_ended = std::chrono::steady_clock::now();
    s.import_s = std::chrono::duration<double>(import_ended - import_started).count();
    const graph& g = model.graph;

    // The written model is checked against the original on random inputs.
    // Nodes no implementation exists for are cut out of both graphs, and what
    // surrounds them is compared (their inputs as extra outputs).
    outcome o;
    // The written model is verified by the exact reference executor whatever
    // the backend: it checks the result against the operators' definitions
    // and builds no plan (a oneDNN plan for a 100k-node chain took 13 s to
    // build); the device's outputs from timing the candidates are checked
    // against the reference's on the same inputs. It keeps no state between or during runs, so it may run
    // two graphs at once.
    auto reference = std::make_shared<backend::reference>();
    install_opaque_ops(*reference);
    const auto execute = [&reference](const graph& h, const std::vector<tensor<float>>& in) {
        return reference->execute(h, in);
    };
    std::optional<graph> cut;
    std::vector<tensor<float>> inputs;
    const auto prepare_check = [&] {
        if (!o.unimplemented.empty()) cut = cut_around(g, o.unimplemented);
        // The timing's inputs (the same seed): the device's outputs on them
        // are checked against the reference's too.
        inputs = backend::random_inputs(cut ? *cut : g, s.seed);
    };
    // The reference executor computes the original's outputs on a second
    // core: during the search (the search uses one) with the analytic
    // backend, during export and read-back with a device (whose timing used
    // both); errors still come in the old order, the read-back's first.
    std::future<std::vector<tensor<float>>> original_outputs;
    std::shared_ptr<void> device;  // keeps the device backend alive for the pictures' operator costs
    if (s.backend == "analytic") {
        o.unimplemented = unimplemented_types(g, reference->opaque_impls);
        prepare_check();
        original_outputs = std::async(std::launch::async | std::launch::deferred, [&] { return execute(cut ? *cut : g, inputs); });
        run_analytic(s, g, rules.rules(), prog, o);
    } else {
        with_device(s.backend, [&]<class B>() {
            std::shared_ptr<B> be;
            o = run_measured<B>(s, g, rules.rules(), prog, be);
            device = be;
            return 0;
        });
        o.unimplemented.merge(unimplemented_types(g, reference->opaque_impls));
        prepare_check();
        original_outputs = std::async(std::launch::async | std::launch::deferred, [&] { return execute(cut ? *cut : g, inputs); });
    }
    const graph& original = cut ? *cut : g;

    // Export, import the bytes back, and compare the re-imported model's
    // outputs with the original's: this checks the search and the export
    // together.
    const auto check_started = std::chrono::steady_clock::now();
    const onnx::model_files written = onnx::to_files(o.chosen, onnx::data_location_for(s.out), onnx::options_for(model));
    graph back;
    try {
        back = onnx::import_model(written.model, s.import, written_data(written)).graph;
    } catch (const std::exception& e) {
        throw mismatch_error(std::string("the optimized model does not import back: ") + e.what());
    }
    if (!o.unimplemented.empty()) back = cut_nodes(back, opaque_nodes_of(o.chosen, o.unimplemented));
    prog.line("verifying outputs on random inputs");
    auto want = original_outputs.valid() ? original_outputs.get() : execute(original, inputs);
    auto got = execute(back, inputs_by_name(original, inputs, back, "optimized model"));
    prog.clear();
    const double err = max_relative_error(got, want);
    const bool agree = err <= s.tolerance;
    // The device computes the original as the reference does (the written
    // candidate was checked against the original on the device): otherwise
    // tsopt's own executor is wrong, which the written model, verified
    // above, does not show.
    std::optional<double> device_err;
    if (!o.device_outputs.empty() && same_tensors(o.device_inputs, inputs))
        device_err = max_relative_error(o.device_outputs, want);
    const bool device_agrees = !device_err || *device_err <= s.tolerance;

    // Figures of both graphs (FLOPs, bytes, launches, peak memory).
    cost::multi_dim<cost::analytical> md;
    auto before = md.evaluate(g), after = md.evaluate(o.chosen);
    const auto& rep = o.result.report;
    const bool kept_original = o.chosen_index == 0;
    // The written graph's own derivation: every candidate is the optimizer's
    // result or one of its top-k, each with the rules that made it.
    static const std::map<std::string, int> no_uses;
    static const search::derivation no_rewrites;
    const search::derivation* chosen_rewrites = kept_original ? &no_rewrites : o.result.derivation_of(o.chosen);
    if (!chosen_rewrites) throw std::logic_error("the chosen candidate is neither the optimizer's result nor one of its top-k");
    const std::map<std::string, int> uses = chosen_rewrites->uses();
    // Replayed from the original with the cost model that chose it: every
    // step's cost filled in, and the check that the list rebuilds exactly
    // the graph written.
    search::derivation written_rewrites = *chosen_rewrites;
    if (!written_rewrites.empty() && written_rewrites.replayable()) {
        node_cost_sum priced{&o.node_cost};
        const graph again = search::replay(g, written_rewrites, rules.rules(), priced);
        if (again.hash_of_outputs(graph::weights_by::content) != o.chosen.hash_of_outputs(graph::weights_by::content))
            throw std::logic_error("the written graph's derivation, replayed, does not rebuild it");
    }
    const search::derivation* rewrites = &written_rewrites;
    const std::map<std::string, int>& preprocessing = kept_original ? no_uses : rep.preprocessing;

    if (agree) write_model_files(s.out, written, "the optimized model");
    // Where the time went: --budget cuts short measuring, the search and the
    // timing, not reading, writing or verifying the model.
    const auto seconds_since = [](auto t) { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count(); };
    const double check_s = seconds_since(check_started), total_s = seconds_since(s.started);
    const double optimize_s = std::chrono::duration<double>(check_started - import_ended).count();

    std::vector<io::picture> pictures;
    rewrite_pictures drawn;
    constexpr std::size_t max_rewrite_pictures = 100;
    // Whole graphs are drawn to fit a screen (20 in = 1440 pt, 1920 px at
    // 96 dpi); the SVG scales, so a reader zooms into it.
    constexpr double overview_inches = 20;
    if (!s.dot.empty()) {
        std::error_code ec;
        std::filesystem::create_directory(s.dot, ec);
        if (ec) throw write_error("--dot: cannot create directory '" + s.dot + "': " + ec.message());
        auto costs = [&](const graph& h) {
            std::vector<double> c(h.size());
            const auto constant = h.constant_mask();
            for (std::size_t i = 0; i < h.size(); ++i) c[i] = o.node_cost(h, i, constant);
            return c;
        };
        auto title = [&](const char* which, const graph& h, double cost) {
            std::ostringstream t;
            t << s.in << " " << which << ": " << h.op_count() << " operators, cost " << std::setprecision(4) << cost
              << " ms (" << o.cost_model << ")";
            return t.str();
        };
        try {
            // One picture per rewrite first: replaying them says which
            // operators the rewrites matched and made, which is what the
            // overview pictures colour (not everything preprocessing touched).
            drawn = draw_rewrites(g, *rewrites, rules.rules(), s.dot, max_rewrite_pictures, "ms");
            auto named = [](const graph& h, const std::set<std::string>& names) {
                std::set<std::int32_t> ids;
                for (std::size_t i = 0; i < h.size(); ++i)
                    if (h.nodes[i].kind != node_kind::input && names.count(h.nodes[i].name)) ids.insert(static_cast<std::int32_t>(i));
                return ids;
            };
            const bool replayed = rewrites->replayable();
            pictures.push_back(io::write_picture(g, (std::filesystem::path(s.dot) / "before").string(),
                                                 {.costs = costs(g),
                                                  .highlight = named(g, drawn.matched),
                                                  .title = title("before (operators the rewrites matched in gold)", g, o.cost_before),
                                                  .max_inches = overview_inches}));
            pictures.push_back(io::write_picture(o.chosen, (std::filesystem::path(s.dot) / "after").string(),
                                                 {.costs = costs(o.chosen),
                                                  .highlight = replayed ? named(o.chosen, drawn.produced) : io::changed_nodes(g, o.chosen),
                                                  .title = title("after (what the rewrites made in gold)", o.chosen, o.cost_after),
                                                  .max_inches = overview_inches}));
        } catch (const error& e) {
            throw write_error(std::string("--dot: ") + e.what());
        }
    }

    // ---- summary --------------------------------------------------------
    std::size_t opaque = 0;
    for (const node& n : g.nodes) opaque += n.kind == node_kind::opaque;
    auto& out = std::cout;
    out << "tsopt optimize: " << s.in << " -> " << s.out << "\n"
        << "  model: " << g.op_count() << " operators (" << opaque << " opaque), inputs";
    for (value v : g.inputs()) out << " " << g.at(v).name << " " << g.shape_of(v).str();
    out << "\n  backend: " << s.backend << ", cost model " << o.cost_model << "; " << rules.rules().size() << " rules ("
        << rules.text() << "); budget " << s.budget << " s, alpha " << s.alpha << "\n\n";
    auto row = [&](const char* name, std::optional<double> x, std::optional<double> y, int prec) {
        out << "  " << std::left << std::setw(30) << name << std::right << std::fixed << std::setprecision(prec);
        if (x) out << std::setw(12) << *x;
        else out << std::setw(12) << "-";
        if (y) out << std::setw(12) << *y;
        else out << std::setw(12) << "-";
        if (x && y && *x > 0 && *y > 0) out << std::setw(9) << std::setprecision(2) << *x / *y << "x";
        out << "\n";
    };
    out << "  " << std::left << std::setw(30) << "" << std::right << std::setw(12) << "before" << std::setw(12) << "after"
        << std::setw(10) << "ratio" << "\n";
    row("end-to-end time (ms, median)", o.ms_before, o.ms_after, 3);
    row("cost (ms, sum of operators)", o.cost_before, o.cost_after, 3);
    row("FLOPs (M)", before.flops / 1e6, after.flops / 1e6, 2);
    row("memory accesses (MB)", before.memory_bytes / 1e6, after.memory_bytes / 1e6, 2);
    row("kernel launches", before.launches, after.launches, 0);
    row("operators", static_cast<double>(g.op_count()), static_cast<double>(o.chosen.op_count()), 0);
    out << std::defaultfloat << std::setprecision(4) << "\n  search: " << o.search_s << " s (stopped: "
        << search::to_string(rep.stopped) << "), " << rep.parts << " part(s), " << rep.expansions << " graphs expanded, "
        << rep.generated << " generated, " << rep.dedup_hits << " duplicates\n";
    if (rep.stopped == search::stop_reason::time_limit)
        out << "  note: --budget ended the search before --expansions " << s.expansions
            << ": the result depends on this machine's speed and load (raise --budget or lower --expansions to make it repeatable)\n";
    if (rep.oversized_constants)
        out << "  refused " << rep.oversized_constants << " rewrite(s) that would create a constant above "
            << rep.max_constant_bytes / double(1 << 20) << " MiB (--max-constant-mib)\n";
    if (o.estimated_operators)
        out << "  operators estimated, not measured: " << o.estimated_operators
            << " (--budget ran out while measuring them on a cold measurement cache; priced by the analytical model"
               " scaled to the measured ones; a later run measures them)\n";
    if (s.backend == "analytic") out << "  end-to-end time: not measured (--backend analytic)\n";
    else if (o.timing_rounds == 0)
        out << std::fixed << std::setprecision(0) << "  end-to-end time: not measured: --budget left " << *o.untimed_left_ms
            << " ms, timing the original and the best candidate needs about " << *o.untimed_need_ms
            << " ms; the cost model's choice was written (raise --budget or lower --top-k)\n"
            << std::defaultfloat;
    else {
        out << "  timed end to end (" << o.timing_rounds << " interleaved rounds"
            << (o.timing_rounds < s.reps ? ", fewer than --reps to stay within --budget" : "") << "): original "
            << o.candidate_ms[0] << " ms";
        bool faster_unconfirmed = false;
        std::size_t contenders = 0;
        for (std::size_t c = 1; c < o.candidate_ms.size(); ++c)
            if (std::isfinite(o.candidate_ms[c])) {
                ++contenders;
                out << ", candidate " << c << " " << o.candidate_ms[c] << " ms (faster in " << o.candidate_faster_rounds[c]
                    << " of " << o.timing_rounds << ")";
                faster_unconfirmed = faster_unconfirmed || (o.candidate_ms[c] < o.candidate_ms[0] && !o.candidate_confirmed[c]);
            } else {
                out << ", candidate " << c << " rejected";
            }
        out << "\n";
        // Holm's first step is the hardest: the original is kept exactly
        // when the candidate that won most rounds did not win this many.
        const int needed = backend::wins_needed(o.timing_rounds, backend::confirm_level / std::max<std::size_t>(contenders, 1));
        const std::string test = " (a sign test at " + std::to_string(std::lround(backend::confirm_level * 100)) + " %" +
                                 (contenders > 1 ? " over the " + std::to_string(contenders) + " candidates together" : std::string()) +
                                 ": a lower median alone is within the machine's noise)";
        if (kept_original)
            out << "  kept the original: "
                << (faster_unconfirmed
                        ? (needed > o.timing_rounds
                               ? "no candidate can be confirmed faster in " + std::to_string(o.timing_rounds) + " rounds (" +
                                     std::to_string(backend::rounds_to_confirm(contenders)) + " at least)"
                               : "no candidate ran faster in " + std::to_string(needed) + " of the " +
                                     std::to_string(o.timing_rounds) + " rounds") +
                              test
                        : std::string("no candidate was faster end to end"))
                << "\n";
    }
    out << std::fixed << std::setprecision(2) << "  wall time: " << total_s << " s (--budget " << std::defaultfloat
        << s.budget << " s): reading the model " << std::fixed << s.import_s << " s, "
        << (s.backend != "analytic" ? "measuring, search and timing " : "search ") << optimize_s
        << " s, export, read-back and verification " << check_s << " s\n"
        << std::defaultfloat;
    if (!o.unimplemented.empty()) {
        out << "  not run on the device: opaque operator(s)";
        for (const auto& t : o.unimplemented) out << " " << t;
        out << " have no implementation; end-to-end timing and verification ran on the graph without them"
               " (their inputs compared as extra outputs, their outputs fed random values)\n";
    }
    if (o.rejected)
        std::cerr << "tsopt optimize: warning: " << o.rejected
                  << " candidate(s) computed different outputs on the device and were rejected\n";
    if (kept_original && rep.improved) {
        out << "  the optimizer's best graph (cost " << rep.cost_before << " -> " << rep.cost_after
            << " ms) was not faster end to end; its rules:";
        for (const auto& [name, n] : rep.rule_uses) out << " " << n << " x " << name;
        out << (rep.rule_uses.empty() ? " none (weight preprocessing only)" : "") << "\n";
    }
    if (uses.empty()) out << "  rules used: none\n";
    else {
        out << "  rules used (derivation of the written graph):\n";
        std::vector<std::pair<std::string, int>> by_uses(uses.begin(), uses.end());
        std::stable_sort(by_uses.begin(), by_uses.end(), [](const auto& x, const auto& y) { return x.second > y.second; });
        for (const auto& [name, n] : by_uses) out << "    " << std::setw(4) << n << " x " << name << "\n";
    }
    if (const auto steps = rewrites->steps(); !steps.empty()) {
        // The rewrites themselves, in order: the first ones here, all of them in --report.
        constexpr std::size_t shown = 12;
        out << "  rewrites in the written graph (" << steps.size() << ", in order; cost of the graph each applied to,"
            << " the part's when partitioned" << (s.report.empty() ? "" : "; all in --report") << "):\n";
        for (std::size_t k = 0; k < steps.size() && k < shown; ++k) {
            const auto& st = *steps[k];
            std::string where;
            for (const auto& w : st.where) where += (where.empty() ? "" : ", ") + w;
            out << "    " << std::setw(3) << k + 1 << ". " << st.rule << " at " << (where.empty() ? "-" : where)
                << std::defaultfloat << std::setprecision(4) << ": " << st.cost_before << " -> " << st.cost_after << "\n";
        }
        if (steps.size() > shown) out << "    ... " << steps.size() - shown << " more\n";
    }
    if (!preprocessing.empty()) {
        out << "  preprocessing (in the written graph):";
        const char* sep = " ";
        for (const auto& [what, n] : preprocessing) {
            out << sep << n << " x " << what;
            sep = ", ";
        }
        out << "\n";
    }
    out << std::scientific << std::setprecision(2) << "  verification: outputs of the written model vs the original on random inputs ("
        << "reference): max relative error " << err << " (tolerance " << s.tolerance << "): "
        << (agree ? "equal" : "DIFFERENT") << "\n";
    if (device_err)
        out << "  on the device: the original's outputs vs the reference's, same inputs: max relative error " << *device_err
            << ": " << (device_agrees ? "equal" : "DIFFERENT") << "; the written graph's vs the original's there "
            << o.device_chosen_error << "\n";
    out << std::defaultfloat;
    if (!device_agrees)
        std::cerr << "tsopt optimize: warning: the " << s.backend << " executor computed the original model differently from the "
                  << "reference (max relative error " << scientific(*device_err) << " > tolerance " << scientific(s.tolerance)
                  << "): a bug in tsopt's backend, its times above are of that computation; the written model is verified on "
                     "the reference\n";

    std::string html_path;
    if (!s.dot.empty()) {
        auto ms = [](std::optional<double> x) { return x ? std::to_string(*x) + " ms" : std::string("not measured"); };
        html_report_input h;
        h.title = s.in + " -> " + s.out;
        h.facts = {{"backend", s.backend + " (cost model " + o.cost_model + ")"},
                   {"rules", std::to_string(rules.rules().size()) + " (" + rules.text() + ")"},
                   {"operators", std::to_string(g.op_count()) + " -> " + std::to_string(o.chosen.op_count())},
                   {"cost (sum of operators)", std::to_string(o.cost_before) + " -> " + std::to_string(o.cost_after) + " ms"},
                   {"end to end (median)", ms(o.ms_before) + " -> " + ms(o.ms_after)},
                   {"written", kept_original ? "the original (no candidate was faster)" : "candidate " + std::to_string(o.chosen_index)},
                   {"verification", std::string(agree ? "equal" : "DIFFERENT") + " (max relative error " + scientific(err) + ")"}};
        for (const auto& p : pictures) h.overview.push_back(p.svg_path.empty() ? p.dot_path : p.svg_path);
        h.derivation = rewrites;
        h.pictures = &drawn;
        h.unit = "ms";
        html_path = (std::filesystem::path(s.dot) / "report.html").string();
        write_file(html_path, html_report(h), "--dot's report.html");
    }

    if (!s.report.empty()) {
        json rules_used = json::object();
        for (const auto& [name, n] : uses) rules_used[name] = n;
        json preprocessing_done = json::object();
        for (const auto& [what, n] : preprocessing) preprocessing_done[what] = n;
        json candidate_ms = json::array(), candidate_faster_rounds = json::array(), candidate_confirmed = json::array();
        for (double ms : o.candidate_ms) candidate_ms.push_back(json_number(ms));
        for (int k : o.candidate_faster_rounds) candidate_faster_rounds.push_back(k);
        for (bool c : o.candidate_confirmed) candidate_confirmed.push_back(c);
        json picture_paths = json::array();
        for (const auto* set : {&pictures, &drawn.files})
            for (const auto& p : *set) {
                picture_paths.push_back(p.dot_path);
                if (!p.svg_path.empty()) picture_paths.push_back(p.svg_path);
            }
        if (!html_path.empty()) picture_paths.push_back(html_path);
        const json rj = {
            {"schema", "tsopt-optimize-report"},
            {"schema_version", 1},
            {"tool", "tsopt " TSOPT_VERSION_STRING},
            {"input", s.in},
            {"output", agree ? json(s.out) : json(nullptr)},
            {"backend", s.backend},
            {"cost_model", o.cost_model},
            {"rules", rules.text()},
            {"rule_count", rules.rules().size()},
            {"before", metrics_json(before, g.op_count(), o.ms_before, o.cost_before, g)},
            {"after", metrics_json(after, o.chosen.op_count(), o.ms_after, o.cost_after, o.chosen)},
            {"speedup", o.ms_before && o.ms_after && *o.ms_after > 0 ? json_number(*o.ms_before / *o.ms_after) : json(nullptr)},
            {"search",
             {{"seconds", o.search_s},
              {"budget_seconds", s.budget},
              {"max_expansions", s.expansions},
              {"alpha", s.alpha},
              {"stopped", search::to_string(rep.stopped)},
              {"parts", rep.parts},
              {"expansions", rep.expansions},
              {"generated", rep.generated},
              {"duplicates", rep.dedup_hits},
              {"rejected_applications", rep.rejected},
              {"refused_oversized_constants", rep.oversized_constants},
              {"max_constant_bytes", rep.max_constant_bytes},
              {"pruned", rep.pruned},
              {"estimated_operators", o.estimated_operators},
              {"improved_cost", rep.improved}}},
            {"rules_used", rules_used},
            {"rules_used_of", kept_original ? "none" : "chosen"},
            {"preprocessing", preprocessing_done},
            {"rewrites", derivation_json(*rewrites)},
            {"candidate_ms", candidate_ms},
            {"candidate_faster_rounds", candidate_faster_rounds},
            {"candidate_confirmed", candidate_confirmed},
            {"timing_rounds", o.timing_rounds},
            {"wall_seconds",
             {{"total", total_s}, {"import", s.import_s}, {"optimize", optimize_s}, {"export_and_verification", check_s}}},
            {"chosen_candidate", o.chosen_index},
            {"kept_original", kept_original},
            {"rejected_candidates", o.rejected},
            {"verification",
             {{"max_relative_error", json_number(err)},
              {"tolerance", s.tolerance},
              {"equal", agree},
              {"executor", "reference"},
              {"cut_out_unimplemented", o.unimplemented},
              {"device",
               device_err ? json{{"original_vs_reference", json_number(*device_err)},
                                 {"written_vs_original", json_number(o.device_chosen_error)},
                                 {"equal", device_agrees}}
                          : json(nullptr)}}},
            {"pictures", picture_paths}};
        write_file(s.report, rj.dump(2) + "\n", "the report");
    }

    if (!agree)
        throw mismatch_error("the optimized model's outputs differ from the original's (max relative error " +
                             scientific(err) + " > tolerance " + scientific(s.tolerance) + "); nothing written to " + s.out);
    out << "  wrote " << s.out << " (" << written.model.size() << " bytes";
    if (!written.data_location.empty()) out << "; weights in " << written.data_location << ", " << written.data.size() << " bytes";
    out << ")";
    if (!s.report.empty()) out << ", report " << s.report;
    out << "\n";
    for (const auto& p : pictures) {
        out << "  picture: " << (p.svg_path.empty() ? p.dot_path : p.dot_path + ", " + p.svg_path) << "\n";
        if (!p.note.empty()) out << "    (" << p.note << ")\n";
    }
    if (!drawn.files.empty())
        out << "  pictures of rewrites: " << drawn.files.size() << " (" << drawn.files.front().dot_path << " ...)"
            << (drawn.note.empty() ? "" : "; " + drawn.note) << "\n";
    else if (!drawn.note.empty())
        out << "  pictures of rewrites: " << drawn.note << "\n";
    if (!html_path.empty()) out << "  HTML report: " << html_path << "\n";
    return exit_code::ok;
}

}  // namespace tsopt::cli
