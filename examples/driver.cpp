// The examples' driver (declared and described in common.hpp).
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "tsopt/backend/dnnl/executor.hpp"
#include "tsopt/backend/profile.hpp"
#include "tsopt/backend/reference/executor.hpp"
#include "tsopt/cost/multi_dim.hpp"
#include "tsopt/cost/sum.hpp"
#include "tsopt/io/progress.hpp"
#include "tsopt/optimize.hpp"
#include "tsopt/rules/built_in.hpp"
#include "tsopt/zoo/zoo.hpp"
#include "common.hpp"
#include "options.hpp"

#if defined(TSOPT_HAVE_CUDA)
#include "tsopt/backend/cudnn/executor.hpp"
#endif

namespace tsopt::examples {

inline std::string usage(std::string_view model) {
    std::ostringstream os;
    os << "usage: " << model << " [options]\n"
       << "Builds the " << model << " model of tsopt's zoo, optimizes it with the measured cost model,\n"
       << "verifies the result on the backend and prints baseline vs optimized.\n"
       << "  --batch N          batch size (default 1)\n"
       << "  --image N          input height = width (default: the paper's; --quick: smallest that builds)\n"
       << "  --width-div N      divide channel / hidden widths by N (default 1; --quick 8)\n"
       << "  --depth-div N      divide repeated blocks / layers by N (default 1; --quick 4)\n"
       << "  --length N         sequence length of RNNs and BERT (default: the paper's; --quick 4)\n"
       << "  --budget SECONDS   search time budget (default 30; --quick 2)\n"
       << "  --alpha A          relaxation of the backtracking search, >= 1 (default 1.05)\n"
       << "  --backend cpu|cuda oneDNN (default) or cuDNN (needs a build with -Dcuda and a GPU)\n"
       << "  --rules generated|axioms|all\n"
       << "                     the generated, Z3-proven rules (default), the axioms read as rules, or both\n"
       << "  --top-k K          candidates verified end to end (default 4)\n"
       << "  --reps N           interleaved timing rounds (default 20; --quick 5)\n"
       << "  --tolerance E      max relative error between outputs (default 1e-4)\n"
       << "  --partition N      partition graphs above N operators (default 30)\n"
       << "  --seed S           seed of weights, inputs and search (default 1)\n"
       << "  --quick            small sizes and a tiny budget (CI smoke test)\n"
       << "  --profile          per-operator-kind time of the original and the optimizer's graphs\n"
       << "  --help             this text\n"
       << "Set OMP_NUM_THREADS to fix the number of threads oneDNN uses.\n";
    return os.str();
}

// The model at the requested size; with --quick and no --image, the smallest
// image its valid-padded layers accept.
inline graph build_model(const settings& s) {
    zoo::options o{.batch = s.batch, .image = s.image, .width_div = s.width_div, .depth_div = s.depth_div,
                   .length = s.length, .seed = s.seed};
    if (!s.quick || s.image != 0) return zoo::build(s.model, o);
    std::string last;
    for (int image : {32, 80, 128, 227}) {
        o.image = image;
        try {
            return zoo::build(s.model, o);
        } catch (const error& e) {
            last = e.what();
        }
    }
    throw error(s.model + " builds at no small size: " + last);
}

struct graph_figures {
    double end_to_end_ms = 0;
    cost::metrics m;
    std::size_t ops = 0;
};

inline void print_table(std::ostream& os, const graph_figures& b, const graph_figures& o) {
    auto row = [&](const char* name, double x, double y, int prec) {
        os << "  " << std::left << std::setw(30) << name << std::right << std::fixed << std::setprecision(prec)
           << std::setw(14) << x << std::setw(14) << y;
        if (x > 0 && y > 0) os << std::setw(10) << std::setprecision(3) << x / y << "x";
        os << "\n";
    };
    os << "  " << std::left << std::setw(30) << "" << std::right << std::setw(14) << "baseline" << std::setw(14)
       << "optimized" << std::setw(11) << "ratio" << "\n";
    row("end-to-end time (ms)", b.end_to_end_ms, o.end_to_end_ms, 3);
    row("estimated time (ms, sum of ops)", b.m.time_ms, o.m.time_ms, 3);
    row("FLOPs (G)", b.m.flops / 1e9, o.m.flops / 1e9, 4);
    row("memory accesses (MB)", b.m.memory_bytes / 1e6, o.m.memory_bytes / 1e6, 2);
    row("kernel launches", b.m.launches, o.m.launches, 0);
    row("peak memory (MB)", b.m.peak_bytes / 1e6, o.m.peak_bytes / 1e6, 2);
    row("operators", static_cast<double>(b.ops), static_cast<double>(o.ops), 0);
}

template <class Backend>
int run_on(const settings& s, typename Backend::options bo, std::ostream& out) {
    using clock = std::chrono::steady_clock;
    io::progress prog(false, "example");
    const auto& info = zoo::find(s.model);
    graph g = build_model(s);
    const char* omp = std::getenv("OMP_NUM_THREADS");
    out << "tsopt example: " << info.name << " — " << info.summary << "\n"
        << "  size: batch " << s.batch << ", width/" << s.width_div << ", depth/" << s.depth_div
        << (s.image ? ", image " + std::to_string(s.image) : std::string()) << (s.quick ? " (--quick)" : "") << "; "
        << g.op_count() << " operators\n"
        << "  backend: " << Backend::name << ", OMP_NUM_THREADS=" << (omp ? omp : "(unset)") << "\n";

    const rules::built_in_rules rule_choice(s.rules);
    out << "  rules: " << rule_choice.rules().size() << " (" << rules::describe(s.rules) << "), search budget " << s.budget << " s, alpha " << s.alpha << "\n"
        << std::flush;

    bo.verify_tolerance = s.tolerance;
    Backend be(bo);
    if constexpr (requires { be.price_for_model(g); }) be.price_for_model(g);  // weights where the whole model leaves them
    cost::measured<Backend> measured(be);
    auto inputs = backend::random_inputs(g, s.seed);

    // Measure the operators of the input (and of its preprocessed form) up
    // front: the slow part on a cold cache, with progress.
    {
        rewrite::fold_cache fc;
        graph pre = rewrite::preprocess(g, fc);
        std::size_t total = 0, k = 0;
        for (const graph* h : {&g, &pre}) total += h->size();
        for (const graph* h : {&g, &pre}) {
            auto constant = h->constant_mask();
            for (std::size_t i = 0; i < h->size(); ++i, ++k) {
                measured.operator_cost(*h, i, constant);
                if (k % 8 == 0) prog.line("measuring operators: " + std::to_string(k) + "/" + std::to_string(total));
            }
        }
        prog.clear();
    }

    optimize_options oo{.alpha = s.alpha,
                        .budget = std::chrono::duration<double>(s.budget),
                        .seed = s.seed,
                        .top_k = s.top_k,
                        .partition_threshold = s.partition};
    prog.start_ticker("searching", s.budget);
    const auto t0 = clock::now();
    auto r = optimize(g, rule_choice.rules(), measured, oo);
    const double search_s = std::chrono::duration<double>(clock::now() - t0).count();
    prog.stop_ticker();

    // On-board verification: candidate 0 is the original, the reference for
    // the outputs; the optimizer's candidates follow.
    std::vector<graph> cands{g};
    std::vector<std::uint64_t> seen{g.structural_hash()};
    auto add = [&](const graph& c) {
        auto h = c.structural_hash();
        if (std::find(seen.begin(), seen.end(), h) != seen.end()) return;
        seen.push_back(h);
        cands.push_back(c);
    };
    add(r.optimized);
    for (const auto& c : r.top_k) add(c);
    prog.line("timing " + std::to_string(cands.size()) + " graphs end to end (" + std::to_string(s.reps) + " rounds)");
    auto pick = be.pick_fastest(cands, inputs, s.reps);
    prog.clear();

    int status = 0;
    std::size_t wrong = 0;
    for (std::size_t c = 1; c < cands.size(); ++c) wrong += pick.rejected[c];
    const graph& chosen = cands[pick.best];

    // The chosen graph's outputs against the original's.
    auto o0 = be.execute(g, inputs);
    auto o1 = be.execute(chosen, inputs);
    double err = o0.size() == o1.size() ? 0 : 1e300;
    for (std::size_t k = 0; k < o0.size() && k < o1.size(); ++k) err = std::max(err, relative_error(o1[k], o0[k]));
    const bool agree = err <= s.tolerance;
    if (!agree || wrong > 0) status = 1;

    cost::multi_dim<cost::measured<Backend>> md(measured);
    graph_figures base{pick.ms[0], md.evaluate(g), g.op_count()};
    graph_figures best{pick.ms[pick.best], md.evaluate(chosen), chosen.op_count()};
    const double optimizer_ms = cands.size() > 1 ? pick.ms[1] : pick.ms[0];

    out << "\n== " << info.name << ": baseline vs optimized ==\n";
    print_table(out, base, best);
    out << "\nsearch (" << std::fixed << std::setprecision(1) << search_s << " s):\n";
    std::ostringstream rep;
    r.report.print(rep);
    std::istringstream lines(rep.str());
    for (std::string l; std::getline(lines, l);) out << "  " << l << "\n";
    out << "on-board verification: " << cands.size() << " graphs timed (" << s.reps << " interleaved rounds):";
    out << std::setprecision(3);
    for (std::size_t c = 0; c < cands.size(); ++c)
        out << " " << (c == 0 ? "original " : "") << pick.ms[c] << " ms" << (pick.rejected[c] ? " (REJECTED: outputs differ)" : "");
    out << "\n";
    if (pick.best == 0)
        out << "  kept the original: no candidate was faster end to end"
            << (cands.size() > 1 ? " (optimizer's best: " + std::to_string(optimizer_ms) + " ms)" : std::string()) << "\n";
    out << std::scientific << std::setprecision(2) << "outputs: relative error " << err << " (tolerance " << s.tolerance
        << "): " << (agree ? "agree" : "DISAGREE") << "\n";
    if (wrong) out << "ERROR: " << wrong << " optimized candidate(s) computed different outputs\n";
    if (s.profile) {
        backend::print_profile(out, be, g, inputs, s.reps, "the original");
        if (pick.best != 0) backend::print_profile(out, be, chosen, inputs, s.reps, "the chosen graph (candidate " + std::to_string(pick.best) + ")");
        if (cands.size() > 1 && pick.best != 1 && !pick.rejected[1])
            backend::print_profile(out, be, cands[1], inputs, s.reps, "the optimizer's graph (candidate 1)");
    }

    const double ratio = best.end_to_end_ms > 0 ? base.end_to_end_ms / best.end_to_end_ms : 1;
    out << std::fixed << std::setprecision(3) << "\nsummary: " << info.name << " " << base.end_to_end_ms << " ms -> "
        << best.end_to_end_ms << " ms (" << std::setprecision(2) << ratio << "x), " << g.op_count() << " -> "
        << chosen.op_count() << " operators, search " << std::setprecision(1) << search_s << " s, outputs "
        << (agree && !wrong ? "agree" : "DISAGREE") << "\n";
    out << std::setprecision(4) << "RESULT model=" << info.name << " baseline_ms=" << base.end_to_end_ms
        << " optimized_ms=" << best.end_to_end_ms << " ratio=" << ratio << " search_s=" << search_s
        << " ops_before=" << g.op_count() << " ops_after=" << chosen.op_count() << " kept_original=" << (pick.best == 0)
        << " agree=" << (agree && !wrong) << "\n";
    return status;
}

int run(std::string_view model, int argc, char** argv) {
    try {
        settings s = parse(model, argc, argv);
        if (s.help) {
            std::cout << usage(model);
            return 0;
        }
        if (s.backend == "cuda") {
#if defined(TSOPT_HAVE_CUDA)
            if (!backend::cudnn::available())
                throw error("--backend cuda: no usable CUDA device (" + backend::cudnn::unavailable_reason() + ")");
            return run_on<backend::cudnn>(s, {}, std::cout);
#else
            throw error("--backend cuda: this build has no CUDA backend; configure with `meson setup -Dcuda=enabled` "
                        "on a machine with /usr/local/cuda (cuDNN, cuBLAS) and run it where a GPU is present");
#endif
        }
        return run_on<backend::dnnl>(s, {}, std::cout);
    } catch (const usage_error& e) {
        std::cerr << model << ": " << e.what() << "\n\n" << usage(model);
        return 2;
    } catch (const std::exception& e) {
        std::cerr << model << ": error: " << e.what() << "\n";
        return 2;
    }
}

}  // namespace tsopt::examples
